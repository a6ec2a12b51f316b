"""``kubesched annotator``: crane-scheduler-controller's command line (``--policy-config-path``,
``--prometheus-address``, ``--kubeconfig``, ``--master``, the leader-election flags, ``--health-port``), plus
Prometheus authentication, TLS and timeout, query templates, instance matching, ``--cluster-name`` and the
timestamp format.

``--health-port`` serves ``/healthz``, ``/livez``, ``/readyz`` and ``/metrics`` over HTTPS with kube-scheduler's
delegated authentication and authorization (``kubesched.serving``: health for anyone, ``/metrics`` for callers
the API server allows); ``--insecure-http`` serves them as plain HTTP without authentication, on a loopback
``--health-bind-address`` only. Bad input (flags, policy, kubeconfig) is one line on stderr and exit status 1.

Losing the lease ends the process with status 1, as crane's controller does, so a supervisor restarts it as a
candidate and two annotators never write at once.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import socket
import ssl
import sys
import uuid
from dataclasses import dataclass
from typing import Any

from kubesched.serving.options import AuthSetupError, go_bool, port_number
from kubesched.serving.options import add_flags as add_serving_flags

log = logging.getLogger("kubesched.loadaware.annotator")

EXIT_LEADERSHIP_LOST = 1
DEFAULT_POLICY_PATH = "/etc/kubernetes/policy.yaml"  # crane controller's default
DEFAULT_LEASE_NAME = "crane-scheduler-controller"
DEFAULT_NAMESPACE_ENV = "CRANE_SYSTEM_NAMESPACE"
DEFAULT_NAMESPACE = "crane-system"
TIMESTAMP_FORMATS = ("crane", "rfc3339")


def _positive_int(value: str) -> int:
    try:
        number = int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {value!r}") from None
    if number <= 0:
        raise argparse.ArgumentTypeError(f"invalid integer {value!r}: must be greater than 0")
    return number


def _duration(value: str) -> float:
    from kubesched.scheduler.config import parse_duration

    try:
        seconds = parse_duration(value)
    except Exception as e:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: {e}") from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: must be greater than 0")
    return seconds


def _template_for(value: str) -> tuple[str, str]:
    metric, eq, template = value.partition("=")
    if not eq or not metric or not template:
        raise argparse.ArgumentTypeError(f"expected METRIC=TEMPLATE, got {value!r}")
    return metric, template


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--policy-config-path",
        default=None,
        help=f"the DynamicSchedulerPolicy file; it must exist when given (default {DEFAULT_POLICY_PATH} if it "
        "exists, else crane's default policy)",
    )
    p.add_argument("--prometheus-address", required=True, help="Prometheus URL, e.g. http://prometheus:9090")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: in-cluster, then $KUBECONFIG)")
    p.add_argument("--master", help="address of the API server (overrides the kubeconfig's server)")
    p.add_argument(
        "--leader-elect",
        type=go_bool,
        nargs="?",
        const=True,
        default=True,
        help="campaign for a Lease before writing (default true)",
    )
    p.add_argument("--leader-elect-lease-duration", type=_duration, default=15.0)
    p.add_argument("--leader-elect-renew-deadline", type=_duration, default=10.0)
    p.add_argument("--leader-elect-retry-period", type=_duration, default=2.0)
    p.add_argument("--leader-elect-resource-lock", default="leases", help="only 'leases' is supported")
    p.add_argument("--leader-elect-resource-name", default=DEFAULT_LEASE_NAME)
    p.add_argument(
        "--leader-elect-resource-namespace",
        default=None,
        help=f"default ${DEFAULT_NAMESPACE_ENV}, else {DEFAULT_NAMESPACE}",
    )
    p.add_argument(
        "--health-port",
        type=port_number,
        default=8090,
        help="HTTPS port of /healthz, /readyz, /livez and /metrics (0 = off)",
    )
    p.add_argument("--health-bind-address", default="0.0.0.0")
    p.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve the health port as plain HTTP without authentication (loopback --health-bind-address only)",
    )
    p.add_argument("--tls-cert-file", default=None, help="serving certificate of the health port")
    p.add_argument("--tls-private-key-file", default=None)
    p.add_argument(
        "--cert-dir", default=None, help="where a self-signed serving pair is kept (default: not kept)"
    )
    add_serving_flags(p)
    p.add_argument(
        "--concurrent-syncs", type=_positive_int, default=8, help="node PATCH requests in flight (crane: 1)"
    )
    p.add_argument(
        "--binding-heap-size",
        type=_positive_int,
        default=1024,
        help="accepted for compatibility: bindings are kept by age (the policy's longest timeRange)",
    )
    # Prometheus
    p.add_argument("--prometheus-timeout", type=_duration, default=10.0, help="per query (default 10s)")
    p.add_argument("--prometheus-bearer-token-file", default=None)
    p.add_argument("--prometheus-username", default=None, help="basic auth user")
    p.add_argument("--prometheus-password-file", default=None, help="basic auth password file")
    p.add_argument("--prometheus-ca-file", default=None, help="CA bundle for an https Prometheus")
    p.add_argument("--prometheus-insecure-skip-verify", action="store_true")
    p.add_argument(
        "--query-template",
        default=None,
        help="PromQL for a metric; placeholders $metric $selector $node $ip $cluster "
        "(default: '$metric{$selector} / 100', crane's query)",
    )
    p.add_argument(
        "--query-template-for",
        type=_template_for,
        action="append",
        default=[],
        metavar="METRIC=TEMPLATE",
        help="the query of one metric (repeatable)",
    )
    p.add_argument(
        "--instance-match",
        default="auto",
        help="how series are matched to nodes: auto (crane's), ip, ip:port, nodename, label:<name>",
    )
    p.add_argument(
        "--cluster-name",
        default=None,
        help="only series whose 'cluster' label has this value (a Prometheus shared by clusters)",
    )
    # what is written
    p.add_argument(
        "--timestamp-format",
        choices=TIMESTAMP_FORMATS,
        default="crane",
        help="crane: local time in --time-zone with a literal Z (what crane's scheduler reads); "
        "rfc3339: UTC with +00:00",
    )
    p.add_argument(
        "--time-zone", default=None, help="zone of crane timestamps (default $TZ, else Asia/Shanghai)"
    )
    p.add_argument("-v", "--v", type=int, default=0, dest="verbosity", help="log verbosity (klog levels)")


def _setup_logging(verbosity: int) -> None:
    level = logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 1 else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s] %(message)s")


def dynamic_args_from_flags(args: argparse.Namespace) -> Any:
    """The flags as the plugin's ``DynamicArgs`` (one validation and one Prometheus client for both)."""
    from .args import BasicAuth, DynamicArgs

    fields: dict[str, Any] = {
        "prome_addr": args.prometheus_address,
        "cluster_name": args.cluster_name,
        "prome_bearer_token_file": args.prometheus_bearer_token_file,
        "prome_ca_file": args.prometheus_ca_file,
        "prome_insecure_skip_verify": args.prometheus_insecure_skip_verify,
        "prome_query_timeout": args.prometheus_timeout,
        "prome_query_templates": dict(args.query_template_for),
        "instance_match": args.instance_match,
        "annotation_time_zone": args.time_zone,
    }
    if args.query_template is not None:
        fields["prome_query_template"] = args.query_template
    if args.prometheus_username is not None:
        fields["prome_basic_auth"] = BasicAuth(
            username=args.prometheus_username, password_file=args.prometheus_password_file
        )
    model = DynamicArgs.model_validate({k: v for k, v in fields.items() if v is not None})
    problems = [str(p) for p in model.validate_args("flags")]
    if problems:
        raise ValueError("; ".join(problems))
    return model


@dataclass(frozen=True)
class Setup:
    """Everything the flags decide, checked before anything is contacted."""

    policy: Any
    dynamic_args: Any
    zone: Any  # a tzinfo for crane timestamps, None for RFC 3339
    client_config: Any


def setup(args: argparse.Namespace) -> Setup:
    """Read and check the policy and the flags; ``ValueError`` says what is wrong."""
    from kubesched.client.config import ConfigError, load_config
    from kubesched.serving import require_loopback

    from .annotations import time_zone
    from .policy import PolicyError, policy_for

    try:
        policy = policy_for(args.policy_config_path)
    except PolicyError as e:
        raise ValueError(f"--policy-config-path: {e.one_line()}") from None
    if args.insecure_http and args.health_port:
        require_loopback(args.health_bind_address, "--insecure-http")
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
    dynamic_args = dynamic_args_from_flags(args)
    zone = time_zone(args.time_zone) if args.timestamp_format == "crane" else None
    if args.leader_elect_resource_lock != "leases":
        raise ValueError(
            f"--leader-elect-resource-lock: only 'leases' is supported, not {args.leader_elect_resource_lock!r}"
        )
    if args.leader_elect and not (
        args.leader_elect_lease_duration
        > args.leader_elect_renew_deadline
        > 1.2 * args.leader_elect_retry_period
    ):
        raise ValueError("leader election: lease duration > renew deadline > 1.2 x retry period is required")
    try:
        client_config = load_config(args.kubeconfig, args.master)
    except ConfigError as e:
        raise ValueError(str(e)) from None
    return Setup(policy, dynamic_args, zone, client_config)


def run(args: argparse.Namespace) -> int:
    _setup_logging(args.verbosity)
    try:
        prepared = setup(args)
    except ValueError as e:
        print(f"kubesched annotator: {e}", file=sys.stderr)
        return 1
    try:
        return asyncio.run(serve(args, prepared))
    except KeyboardInterrupt:
        return 0
    except (OSError, AuthSetupError, ssl.SSLError) as e:
        print(f"kubesched annotator: {e}", file=sys.stderr)
        return 1


async def serve(args: argparse.Namespace, prepared: Setup, stop: asyncio.Event | None = None) -> int:
    """Run until ``stop`` is set (SIGINT/SIGTERM when not given): 0; or until leadership is lost: 1."""
    from kubesched.client.leaderelection import LeaderElector
    from kubesched.client.rest import ApiClient
    from kubesched.serving import delegated_auth

    from .annotator import Annotator, HealthServer
    from .metrics import AnnotatorMetrics
    from .poller import LoadQuerier, QuerySettings, prometheus_from_args

    auth = None
    if args.health_port and not args.insecure_http:
        auth = await delegated_auth(args, prepared.client_config)  # AuthSetupError: one line, exit 1
    client = ApiClient(prepared.client_config)
    prometheus = prometheus_from_args(prepared.dynamic_args)
    settings = QuerySettings.from_args(prepared.dynamic_args)
    metrics = AnnotatorMetrics()
    annotator = Annotator(
        client,
        LoadQuerier(prometheus, settings),
        prepared.policy,
        zone=prepared.zone,
        concurrency=args.concurrent_syncs,
        metrics=metrics,
    )
    elector = None
    if args.leader_elect:
        namespace = (
            args.leader_elect_resource_namespace or os.environ.get(DEFAULT_NAMESPACE_ENV) or DEFAULT_NAMESPACE
        )
        elector = LeaderElector(
            client,
            namespace=namespace,
            name=args.leader_elect_resource_name,
            identity=f"{socket.gethostname()}_{uuid.uuid4()}",
            lease_duration=args.leader_elect_lease_duration,
            renew_deadline=args.leader_elect_renew_deadline,
            retry_period=args.leader_elect_retry_period,
            release_on_cancel=True,
            on_new_leader=lambda who: log.info("new leader elected: %s", who),
        )
    health = (
        HealthServer(
            args.health_bind_address,
            args.health_port,
            elector=elector,
            metrics=metrics,
            auth=auth,
            insecure=args.insecure_http,
            cert_file=args.tls_cert_file,
            key_file=args.tls_private_key_file,
            cert_dir=args.cert_dir,
        )
        if args.health_port
        else None
    )
    if stop is None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
    try:
        if health is not None:
            await health.start()
            log.info("serving /healthz and /metrics at %s", health.url)
        annotator.start_informers()
        work = asyncio.create_task(_synced_then_run(annotator, elector))
        stopper = asyncio.create_task(stop.wait())
        done, _ = await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stopper in done:
            work.cancel()
            await asyncio.gather(work, return_exceptions=True)
            return 0
        stopper.cancel()
        work.result()  # an unexpected error surfaces here
        print("kubesched annotator: leaderelection lost", file=sys.stderr)
        return EXIT_LEADERSHIP_LOST
    finally:
        await annotator.stop()
        if health is not None:
            await health.stop()
        await prometheus.close()
        await client.close()
        if auth is not None:
            await auth.close()


async def _synced_then_run(annotator: Any, elector: Any) -> None:
    from .annotator import run_annotator

    await annotator.wait_for_sync()
    await run_annotator(annotator, elector)


if __name__ == "__main__":  # pragma: no cover
    parser = argparse.ArgumentParser(prog="kubesched annotator")
    add_arguments(parser)
    sys.exit(run(parser.parse_args()))
