"""``kubesched operator``: install and maintain the scheduler as static pods through ``KubeScheduler/cluster``.

Start-up, as upstream's ``cluster-kube-scheduler-operator operator``:

1. The client: ``--kubeconfig``, else ``$KUBECONFIG``/in-cluster (``kubesched.client.config.load_config``).
2. The CRDs when missing (``crds.ensure_crds``), the namespaces, and the singletons ``KubeScheduler/cluster``
   (``managementState: Managed``) and ``Scheduler/cluster`` when missing.
3. HTTPS ``/metrics`` and ``/healthz`` on ``--secure-port`` (``kubesched.serving``: delegated authentication
   and authorization, a self-signed certificate unless ``--tls-cert-file``).
4. Leader election on the Lease ``openshift-kube-scheduler-operator-lock`` in the operator namespace; the leader
   runs the controllers (``runtime.py``): ConfigObserver, TargetConfigController, RevisionController,
   InstallerController, PruneController, StatusController. Losing the lease ends the process (exit 1), as
   upstream's operators do; a new leader resumes from the cluster's state.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from aiohttp import web

from kubesched import serving
from kubesched.client.config import ConfigError, load_config
from kubesched.client.events import EventRecorder
from kubesched.client.leaderelection import LeaderElector, default_identity
from kubesched.client.rest import ApiClient, ApiError
from kubesched.operator import contract as c
from kubesched.operator.installer import InstallerController
from kubesched.operator.metrics import CONTENT_TYPE, OperatorMetrics
from kubesched.operator.prune import PruneController
from kubesched.operator.revision import RevisionController
from kubesched.operator.runtime import DEFAULT_RESYNC_PERIOD, Runtime
from kubesched.operator.status import DEFAULT_DEGRADED_INERTIA, StatusController

log = logging.getLogger("kubesched.operator")

DEFAULT_SECURE_PORT = 8443
Obj = dict[str, Any]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default=None, help="kubeconfig file (default: $KUBECONFIG or in-cluster)")
    p.add_argument("--operator-namespace", default=c.OPERATOR_NAMESPACE, help="the operator's own namespace")
    p.add_argument("--operand-namespace", default=c.OPERAND_NAMESPACE, help="where the scheduler's inputs go")
    p.add_argument("--config-namespace", default=c.USER_CONFIG_NAMESPACE, help="user-specified configuration")
    p.add_argument("--image", default="kubesched", help="the scheduler's and the installer pods' image")
    p.add_argument(
        "--scheduler-secure-port",
        type=serving.port_number,
        default=10259,
        help="the secure port of the scheduler the operator installs",
    )
    p.add_argument("--server", default=None, help="API server URL written into the scheduler's kubeconfig")
    p.add_argument(
        "--resync-period",
        type=serving.go_duration,
        default=DEFAULT_RESYNC_PERIOD,
        help="sync every controller at least this often (Go duration, default 1m)",
    )
    p.add_argument(
        "--degraded-inertia",
        type=serving.go_duration,
        default=DEFAULT_DEGRADED_INERTIA,
        help="how long a *Degraded sub-condition must hold before the ClusterOperator is Degraded (default 2m)",
    )
    p.add_argument("--secure-port", type=serving.port_number, default=DEFAULT_SECURE_PORT, help="0: any free")
    p.add_argument("--bind-address", default="0.0.0.0")
    p.add_argument("--tls-cert-file", default=None)
    p.add_argument("--tls-private-key-file", default=None)
    p.add_argument("--cert-dir", default=None, help="where a self-signed serving pair is kept")
    p.add_argument("--leader-elect", type=serving.go_bool, nargs="?", const=True, default=True)
    p.add_argument("--leader-elect-lease-duration", type=serving.go_duration, default=137.0)
    p.add_argument("--leader-elect-renew-deadline", type=serving.go_duration, default=107.0)
    p.add_argument("--leader-elect-retry-period", type=serving.go_duration, default=26.0)
    serving.add_flags(p)
    p.add_argument("-v", "--v", dest="verbosity", type=int, default=2, help="log verbosity")


async def ensure_singletons(client: ApiClient, namespaces: list[str]) -> list[str]:
    """Namespaces, ``KubeScheduler/cluster`` and ``Scheduler/cluster`` when missing; what was created."""
    created: list[str] = []
    wanted: list[tuple[str, str, Obj]] = [
        ("v1", "namespaces", {"metadata": {"name": ns}}) for ns in namespaces
    ]
    wanted += [
        (
            c.KUBESCHEDULER_API_VERSION,
            c.KUBESCHEDULER_PLURAL,
            {
                "apiVersion": c.KUBESCHEDULER_API_VERSION,
                "kind": "KubeScheduler",
                "metadata": {"name": c.SINGLETON_NAME},
                "spec": {"managementState": "Managed"},
            },
        ),
        (
            c.SCHEDULER_CONFIG_API_VERSION,
            c.SCHEDULER_CONFIG_PLURAL,
            {
                "apiVersion": c.SCHEDULER_CONFIG_API_VERSION,
                "kind": "Scheduler",
                "metadata": {"name": c.SINGLETON_NAME},
                "spec": {},
            },
        ),
    ]
    for api_version, plural, body in wanted:
        name = body["metadata"]["name"]
        try:
            await client.get(api_version, plural, name)
            continue
        except ApiError as e:
            if not e.is_not_found():
                raise
        try:
            await client.create(api_version, plural, body)
            created.append(f"{plural}/{name}")
        except ApiError as e:
            if not e.is_already_exists():
                raise
    return created


def build_controllers(args: argparse.Namespace) -> list[c.Controller]:
    from kubesched.operator.observer import ConfigObserver
    from kubesched.operator.targetconfig import TargetConfigController

    return [
        ConfigObserver(),
        TargetConfigController(image=args.image, server=args.server, secure_port=args.scheduler_secure_port),
        RevisionController(),
        InstallerController(image=args.image),
        PruneController(image=args.image),
        StatusController(degraded_inertia=args.degraded_inertia),
    ]


async def amain(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.kubeconfig)
    except ConfigError as e:
        print(f"kubesched operator: {e}", file=sys.stderr)
        return 1
    async with ApiClient(config) as client:
        if args.leader_elect:
            try:
                leader_elector(args, client, "check", None)
            except ValueError as e:
                print(f"kubesched operator: leader election: {e}", file=sys.stderr)
                return 1
        try:
            from kubesched.operator.crds import ensure_crds

            made = await ensure_crds(client)
            if made:
                print(f"installed CRDs: {', '.join(made)}", flush=True)
            created = await ensure_singletons(
                client, [args.operator_namespace, args.operand_namespace, args.config_namespace]
            )
        except (ApiError, OSError, TimeoutError) as e:
            print(f"kubesched operator: cannot prepare the cluster: {e}", file=sys.stderr)
            return 1
        if created:
            print(f"created {', '.join(created)}", flush=True)
        identity = default_identity()
        recorder = EventRecorder(client, "kube-scheduler-operator", identity)
        ctx = c.OperatorContext(
            client=client,
            recorder=recorder,
            operator_namespace=args.operator_namespace,
            operand_namespace=args.operand_namespace,
            user_config_namespace=args.config_namespace,
        )
        metrics = OperatorMetrics()
        runtime = Runtime(ctx, build_controllers(args), resync_period=args.resync_period, metrics=metrics)
        try:
            auth = await serving.delegated_auth(args, config)
        except serving.AuthSetupError as e:
            print(f"kubesched operator: {e}", file=sys.stderr)
            return 1
        server = serving.SecureServing(
            _app(metrics),
            bind_address=args.bind_address,
            port=args.secure_port,
            cert_file=args.tls_cert_file,
            key_file=args.tls_private_key_file,
            cert_dir=args.cert_dir,
            pair_name="kube-scheduler-operator",
            auth=auth,
        )
        try:
            await server.start()
        except OSError as e:
            print(
                f"kubesched operator: cannot serve on {args.bind_address}:{args.secure_port}: {e}",
                file=sys.stderr,
            )
            await auth.close()
            return 1
        print(f"serving /metrics and /healthz securely on {server.url}", flush=True)
        try:
            return await _lead(args, client, ctx, runtime, metrics, identity)
        finally:
            await server.stop()
            await auth.close()
            await recorder.close()


async def _lead(
    args: argparse.Namespace,
    client: ApiClient,
    ctx: c.OperatorContext,
    runtime: Runtime,
    metrics: OperatorMetrics,
    identity: str,
) -> int:
    controllers = ", ".join(st.controller.name for st in runtime.states)
    if not args.leader_elect:
        print(f"running controllers without leader election: {controllers}", flush=True)
        metrics.leader.set(1)
        await runtime.run()
        return 0

    def started() -> Any:
        metrics.leader.set(1)
        print(f"became leader {identity}; running controllers: {controllers}", flush=True)
        return runtime.run()

    try:
        elector = leader_elector(args, client, identity, started)
    except ValueError as e:
        print(f"kubesched operator: leader election: {e}", file=sys.stderr)
        return 1
    print(
        f"attempting to acquire leader lease {args.operator_namespace}/{c.LEASE_NAME} as {identity}",
        flush=True,
    )
    await elector.run()
    metrics.leader.set(0)
    print("leader election lost", file=sys.stderr, flush=True)
    return 1


def leader_elector(args: argparse.Namespace, client: ApiClient, identity: str, started: Any) -> LeaderElector:
    """The operator's candidate for its Lease (ValueError for inconsistent durations)."""
    return LeaderElector(
        client,
        namespace=args.operator_namespace,
        name=c.LEASE_NAME,
        identity=identity,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        release_on_cancel=True,
        on_started_leading=started,
        on_new_leader=lambda who: print(f"leader is {who}", flush=True),
    )


def _app(metrics: OperatorMetrics) -> web.Application:
    async def healthz(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def metrics_handler(_: web.Request) -> web.Response:
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", healthz)
    app.router.add_get("/livez", healthz)
    app.router.add_get("/metrics", metrics_handler)
    return app


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG
        if args.verbosity >= 4
        else logging.INFO
        if args.verbosity >= 2
        else logging.WARNING,
        format="%(asctime)s %(levelname).1s %(name)s] %(message)s",
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)

    async def guarded() -> int:
        task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, lambda: task.cancel() if task else None)
        try:
            return await amain(args)
        except asyncio.CancelledError:
            return 0

    return asyncio.run(guarded())
