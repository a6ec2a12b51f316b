"""``kubesched scheduler``: kube-scheduler's command line, flags and process lifecycle.

Flags mirror kube-scheduler's (``--config``, ``--kubeconfig``, ``--master``, ``--leader-elect*``, ``--secure-port``,
``--bind-address``, ``--tls-cert-file``/``--tls-private-key-file``, ``-v``); leader-election flags override the
configuration file as upstream. A configuration error is reported with the field it concerns and the process exits
with status 1 before it contacts the cluster. Losing the lease ends the process (exit 1), as kube-scheduler does,
so a supervisor restarts it as a candidate and no scheduling happens without the lease.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import math
import signal
import socket
import sys
import uuid
from typing import TYPE_CHECKING, Any

from kubesched.serving.options import AuthSetupError, go_bool, port_number
from kubesched.serving.options import add_flags as add_serving_flags

if TYPE_CHECKING:
    from kubesched.scheduler.config.types import SchedulerConfiguration
    from kubesched.scheduler.framework.catalogue import Catalogue

log = logging.getLogger("kubesched.scheduler")
STARTUP_LOGGER = "kubesched.startup"
startup_log = logging.getLogger(STARTUP_LOGGER)

EXIT_LEADERSHIP_LOST = 1
# The API writer child (kubesched/client/writer.py): see --api-writer and writer.AUTO_MIN_CPUS.
DEFAULT_API_WRITER = "auto"


def _finite_float(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {value!r}") from None
    if not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"invalid number {value!r}: must be finite")
    return number


def _non_negative_int(value: str) -> int:
    try:
        number = int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer {value!r}") from None
    if number < 0:
        raise argparse.ArgumentTypeError(f"invalid integer {value!r}: must not be negative")
    return number


def _duration(value: str) -> float:
    from kubesched.scheduler.config import parse_duration

    try:
        return parse_duration(value)
    except Exception as e:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: {e}") from None


def _feature_gates(value: str) -> dict[str, bool]:
    from kubesched.scheduler import features

    try:
        return features.parse(value)
    except features.FeatureGateError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="path to a KubeSchedulerConfiguration file (v1, v1beta3 or v1beta2)")
    p.add_argument(
        "--kubeconfig", help="kubeconfig file (without --config, or when the config file names none)"
    )
    p.add_argument("--master", help="address of the API server (overrides the kubeconfig's server)")
    p.add_argument(
        "--leader-elect",
        type=go_bool,
        nargs="?",
        const=True,
        default=None,
        help="campaign for the leader Lease before scheduling (default from the config: true)",
    )
    p.add_argument("--leader-elect-lease-duration", type=_duration, default=None)
    p.add_argument("--leader-elect-renew-deadline", type=_duration, default=None)
    p.add_argument("--leader-elect-retry-period", type=_duration, default=None)
    p.add_argument("--leader-elect-resource-lock", default=None, help="only 'leases' is supported")
    p.add_argument("--leader-elect-resource-name", default=None)
    p.add_argument("--leader-elect-resource-namespace", default=None)
    p.add_argument(
        "--secure-port",
        type=port_number,
        default=10259,
        help="HTTPS port for /healthz, /metrics, /configz and /debug (0 = off)",
    )
    p.add_argument("--bind-address", default="0.0.0.0", help="address of the secure port (default 0.0.0.0)")
    p.add_argument("--tls-cert-file", default=None)
    p.add_argument("--tls-private-key-file", default=None)
    p.add_argument(
        "--cert-dir",
        default=None,
        help="where the self-signed serving pair is kept without --tls-cert-file (default: not kept)",
    )
    p.add_argument(
        "--kube-api-qps", type=_finite_float, default=None, help="deprecated: use clientConnection.qps"
    )
    p.add_argument(
        "--kube-api-burst",
        type=_non_negative_int,
        default=None,
        help="deprecated: use clientConnection.burst",
    )
    p.add_argument("--seed", type=int, default=None, help="seed the tie-breaking among equally scored nodes")
    p.add_argument(
        "--feature-gates",
        type=_feature_gates,
        default=None,
        metavar="Name=true|false,...",
        help="feature gates (known: OpportunisticBatching, default true as in Kubernetes 1.36)",
    )
    add_serving_flags(p)
    p.add_argument(
        "--api-writer",
        choices=("auto", "off", "events", "all"),
        default=DEFAULT_API_WRITER,
        help="hand API writes to a child process with connections of its own: events, or events and bindings; "
        "auto: all with 4 or more CPUs, else off (default auto; kubesched)",
    )
    p.add_argument(
        "--explain",
        action="store_true",
        help="keep recent decisions with per-plugin scores, served at /debug/decisions (kubesched)",
    )
    p.add_argument("-v", "--v", type=int, default=0, dest="verbosity", help="log verbosity (klog levels)")


def _setup_logging(verbosity: int) -> None:
    level = logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 1 else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s] %(message)s")
    if verbosity < 2:
        logging.getLogger("kubesched.scheduler").setLevel(logging.WARNING if verbosity == 0 else logging.INFO)
    # What kube-scheduler prints at its default level: who this candidate is and how the lease goes (a few lines
    # a run, which operators and `kubesched takeover`/`doctor` read); per-pod lines stay at -v=1 and above.
    for name in ("kubesched.client.leaderelection", STARTUP_LOGGER):
        logging.getLogger(name).setLevel(logging.DEBUG if verbosity >= 4 else logging.INFO)


def load_effective_config(args: argparse.Namespace, catalogue: Catalogue) -> Any:
    """The configuration file (or defaults), checked against ``catalogue``, with the command-line overrides
    upstream applies."""
    from kubesched.scheduler.config import default_config, load_config

    if args.config:
        config = load_config(args.config, catalogue=catalogue)
    else:
        config = default_config(catalogue=catalogue)
    le = config.leader_election
    overrides: dict[str, Any] = {}
    if args.leader_elect is not None:
        overrides["leader_elect"] = args.leader_elect
    for flag, field in (
        ("leader_elect_lease_duration", "lease_duration"),
        ("leader_elect_renew_deadline", "renew_deadline"),
        ("leader_elect_retry_period", "retry_period"),
        ("leader_elect_resource_lock", "resource_lock"),
        ("leader_elect_resource_name", "resource_name"),
        ("leader_elect_resource_namespace", "resource_namespace"),
    ):
        value = getattr(args, flag)
        if value is not None:
            overrides[field] = value
    if overrides:
        le = (
            dataclasses.replace(le, **overrides)
            if dataclasses.is_dataclass(le)
            else le.model_copy(update=overrides)
        )
        config = (
            dataclasses.replace(config, leader_election=le)
            if dataclasses.is_dataclass(config)
            else config.model_copy(update={"leader_election": le})
        )
    le = config.leader_election
    if le.leader_elect:
        if le.resource_lock not in ("leases", "endpointsleases", "configmapsleases"):
            raise ValueError(
                f'leaderElection.resourceLock: Unsupported value: "{le.resource_lock}": supported values: "leases"'
            )
        if not (le.lease_duration > le.renew_deadline > 1.2 * le.retry_period > 0):
            raise ValueError(
                "leaderElection: leaseDuration must be greater than renewDeadline, and renewDeadline greater than "
                f"1.2 x retryPeriod (got {le.lease_duration}s, {le.renew_deadline}s, {le.retry_period}s)"
            )
    return config


def run(args: argparse.Namespace, catalogue: Catalogue) -> int:
    """``catalogue``: the plugins this scheduler knows (``kubesched.catalogue.full_catalogue()`` from the
    ``kubesched`` command)."""
    _setup_logging(args.verbosity)
    from kubesched.client.config import ConfigError, load_config, one_line
    from kubesched.scheduler import features

    for gate, enabled in (getattr(args, "feature_gates", None) or {}).items():
        features.DEFAULT.set(gate, enabled)  # before the profiles' frameworks are built

    try:
        config = load_effective_config(args, catalogue)
    except Exception as e:  # ConfigError and friends: say what is wrong, no stack trace
        print(f"kubesched scheduler: invalid configuration: {one_line(e)}", file=sys.stderr)
        return 1
    for w in getattr(config, "warnings", ()):
        log.warning("%s", w)
    if (args.tls_cert_file is None) != (args.tls_private_key_file is None):
        print(
            "kubesched scheduler: --tls-cert-file and --tls-private-key-file must be given together",
            file=sys.stderr,
        )
        return 1

    kubeconfig = args.kubeconfig or config.client_connection.kubeconfig or None
    try:
        client_config = load_config(kubeconfig, args.master)
    except ConfigError as e:
        print(f"kubesched scheduler: {e}", file=sys.stderr)
        return 1
    qps = args.kube_api_qps if args.kube_api_qps is not None else config.client_connection.qps
    burst = args.kube_api_burst if args.kube_api_burst is not None else config.client_connection.burst
    if not math.isfinite(float(qps)) or int(burst) < 0:
        print(
            f"kubesched scheduler: clientConnection: qps must be a finite number and burst not negative "
            f"(got qps {qps}, burst {burst})",
            file=sys.stderr,
        )
        return 1
    client_config = dataclasses.replace(client_config, qps=float(qps), burst=int(burst))
    from kubesched import eventloop

    try:
        return eventloop.run(_main(args, config, client_config, catalogue))
    except KeyboardInterrupt:
        return 0
    except (OSError, ValueError) as e:
        print(f"kubesched scheduler: {one_line(e)}", file=sys.stderr)
        return 1


async def _main(args: argparse.Namespace, config: Any, client_config: Any, catalogue: Catalogue) -> int:
    from kubesched.client.config import one_line
    from kubesched.client.leaderelection import LeaderElector
    from kubesched.client.rest import ApiClient
    from kubesched.eventloop import running_loop_name
    from kubesched.scheduler.metrics import SchedulerMetrics
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.scheduler.server import LeaderHealthzAdaptor, SecureServer

    log.info("event loop: %s", running_loop_name())

    identity = f"{socket.gethostname()}_{uuid.uuid4()}"
    client = ApiClient(client_config)
    await _attach_api_writer(client, getattr(args, "api_writer", "off"))
    metrics = SchedulerMetrics()
    try:
        sched = Scheduler(
            config,
            client,
            catalogue=catalogue,
            metrics=metrics,
            seed=args.seed,
            identity=identity,
            explain=args.explain,
        )
    except (KeyError, ValueError) as e:
        await client.close()
        print(f"kubesched scheduler: cannot build the scheduling profiles: {one_line(e)}", file=sys.stderr)
        return 1
    server = None
    auth = None
    if args.secure_port:
        from kubesched.serving import delegated_auth

        try:
            auth = await delegated_auth(args, client_config)
        except AuthSetupError as e:
            await client.close()
            print(f"kubesched scheduler: {e}", file=sys.stderr)
            return 1
        server = SecureServer(
            bind_address=args.bind_address,
            port=args.secure_port,
            cert_file=args.tls_cert_file,
            key_file=args.tls_private_key_file,
            cert_dir=args.cert_dir,
            metrics=metrics,
            configz=lambda: _configz(config),
            auth=auth,
        )
        decisions = sched.decisions
        if decisions is not None:
            server.add_json_route("/debug/decisions", lambda: {"decisions": decisions.snapshot()})
            # The queue as the dashboard shows it (kubesched dashboard --scheduler-url).
            server.add_json_route("/debug/queue", lambda: sched.queue.snapshot())
        try:
            await server.start()
        except (OSError, ValueError):
            await auth.close()
            await client.close()
            raise
        log.info("serving securely on %s:%s", args.bind_address, server.port)
    # Plugins' background work (load-aware scheduling's Prometheus pollers and hot-value rebuild).
    services = catalogue.services()
    started: list[Any] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    exit_code = 0
    try:
        sched.start_informers()
        synced = asyncio.create_task(sched.wait_for_cache_sync())
        stopper = asyncio.create_task(stop.wait())
        await asyncio.wait({synced, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stop.is_set():
            synced.cancel()
            return 0
        if server is not None:
            server.mark_handlers_synced()
        for service in services:
            await service.start(client, sched.frameworks, sched.informers["nodes"].list)
            started.append(service)
        le = config.leader_election
        if not le.leader_elect:
            for service in services:
                await service.leading(client, sched.frameworks)
            run_task = asyncio.create_task(sched.run())
            await asyncio.wait({run_task, stopper}, return_when=asyncio.FIRST_COMPLETED)
            return 0
        lost = asyncio.Event()
        startup_log.info(
            "candidate %s for the leader lease %s/%s", identity, le.resource_namespace, le.resource_name
        )
        elector = LeaderElector(
            client,
            namespace=le.resource_namespace,
            name=le.resource_name,
            identity=identity,
            lease_duration=le.lease_duration,
            renew_deadline=le.renew_deadline,
            retry_period=le.retry_period,
            release_on_cancel=True,
            on_started_leading=lambda: _lead(sched, elector, metrics, le.resource_name, services),
            on_stopped_leading=lambda: lost.set(),
            on_new_leader=lambda who: log.info("new leader elected: %s", who),
        )
        if server is not None:
            adaptor = LeaderHealthzAdaptor(20.0)
            adaptor.attach(
                is_leader=lambda: elector.is_leader,
                observed_time=lambda: elector._observed_time,
                lease_duration=le.lease_duration,
                lease_name=le.resource_name,
            )
            server.add_check(adaptor.name, adaptor)
        elect_task = asyncio.create_task(elector.run())
        done, _ = await asyncio.wait({elect_task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        if stopper in done:
            elect_task.cancel()
            await asyncio.gather(elect_task, return_exceptions=True)
            return 0
        # run() returned: leadership was lost. Upstream exits so that nothing schedules without the lease.
        metrics.set_leader(le.resource_name, False)
        print("kubesched scheduler: leaderelection lost", file=sys.stderr)
        exit_code = EXIT_LEADERSHIP_LOST
        return exit_code
    finally:
        for service in started:
            await service.stop()
        await sched.stop()
        if server is not None:
            await server.stop()
        if auth is not None:
            await auth.close()
        await client.close()


async def _attach_api_writer(client: Any, mode: str) -> None:
    """Start the API writer child for ``mode`` (auto, events, all) and attach it to ``client``, before the scheduler's
    event recorders are made; without one (off, or it cannot start) the writes stay in process."""
    from kubesched.client.writer import ApiWriter, resolve_mode

    mode = resolve_mode(mode)
    if mode == "off":
        return

    try:
        writer = ApiWriter(client.config, timeout=client.timeout, max_connections=client.max_connections)
        await writer.start()
    except (OSError, ValueError) as e:
        log.error("API writer not started (%s); writing in process", e)
        return
    client.attach_writer(writer, requests=mode == "all")
    log.info("API writer process %s: %s", writer.pid, "events and bindings" if mode == "all" else "events")


async def _lead(sched: Any, elector: Any, metrics: Any, lease_name: str, services: list[Any]) -> None:
    metrics.set_leader(lease_name, True)
    log.info("became leader; scheduling")
    # e.g. Dynamic's hot value: bindings the previous leader made recently still count.
    for service in services:
        await service.leading(sched.client, sched.frameworks)
    await sched.run(elector.leading)


def _configz(config: SchedulerConfiguration) -> dict[str, Any]:
    # Upstream's /configz: the effective configuration with every default and every plugin's args.
    from kubesched.scheduler.config.serialize import effective_document

    return effective_document(config)
