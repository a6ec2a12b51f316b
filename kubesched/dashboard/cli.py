"""``kubesched dashboard``: a read-only web page that follows the cluster live and explains placements.

    kubesched dashboard --kubeconfig FILE [--port 8090] [--config sched.yaml] [--scheduler-url https://127.0.0.1:10259]

Informers on nodes, pods, FailedScheduling events and leader-election Leases feed ``ClusterModel``; the page
gets compact JSON from ``server.py``. Explanations and the what-if panel run ``kubesched simulate``'s engine
with the profiles of ``--config`` (default: the v1 default profile).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import logging
import signal
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesched.scheduler.framework.catalogue import Catalogue

log = logging.getLogger("kubesched.dashboard")

DEFAULT_PORT = 8090


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"not a port number (0..65535): {text!r}")
    return value


def _positive(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
        return value

    return parse


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--master", help="address of the API server (overrides the kubeconfig's server)")
    p.add_argument(
        "--port", type=_port, default=DEFAULT_PORT, help=f"HTTP port (default {DEFAULT_PORT}; 0: any)"
    )
    p.add_argument(
        "--bind-address",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1; the page has no authentication)",
    )
    p.add_argument("--config", help="KubeSchedulerConfiguration whose profiles explain placements")
    p.add_argument("--seed", type=int, default=None, help="tie-breaking seed for explanations and what-ifs")
    p.add_argument(
        "--scheduler-url",
        default=None,
        help="the scheduler's secure port, e.g. https://127.0.0.1:10259 (queue with --explain, metrics)",
    )
    p.add_argument(
        "--scheduler-ca-file",
        default=None,
        help="CA to verify the scheduler's certificate (needed unless the URL is loopback)",
    )
    p.add_argument(
        "--scheduler-poll-interval", type=_positive(float), default=3.0, help="seconds between samples"
    )
    p.add_argument(
        "--tile-limit",
        type=_positive(int),
        default=300,
        help="above this many nodes the page shows a heat map",
    )
    p.add_argument("-v", "--v", type=int, default=0, dest="verbosity", help="log verbosity")


def run(args: argparse.Namespace, catalogue: Catalogue) -> int:
    """``catalogue``: the plugins a configuration may name (``kubesched.catalogue.full_catalogue()``)."""
    logging.basicConfig(
        level=logging.INFO if args.verbosity >= 1 else logging.WARNING,
        format="%(asctime)s %(levelname).1s %(name)s] %(message)s",
    )
    from kubesched.client.config import ConfigError as ClientConfigError
    from kubesched.client.config import load_config as load_client_config
    from kubesched.dashboard.scheduler_view import SchedulerUrlError, ssl_context_for
    from kubesched.scheduler.config import ConfigError, default_config, load_config

    try:
        config = (
            load_config(args.config, catalogue=catalogue)
            if args.config
            else default_config(catalogue=catalogue)
        )
    except (ConfigError, OSError) as e:
        print(f"kubesched dashboard: invalid configuration: {e}", file=sys.stderr)
        return 1
    try:
        client_config = load_client_config(args.kubeconfig, args.master)
    except ClientConfigError as e:
        print(f"kubesched dashboard: {e}", file=sys.stderr)
        return 1
    if args.scheduler_url:
        try:
            ssl_context_for(args.scheduler_url, args.scheduler_ca_file)
        except SchedulerUrlError as e:
            print(f"kubesched dashboard: {e}", file=sys.stderr)
            return 1
    try:
        return asyncio.run(_main(args, config, client_config, catalogue))
    except KeyboardInterrupt:
        return 0
    except OSError as e:
        print(f"kubesched dashboard: {e}", file=sys.stderr)
        return 1


def lease_profiles(config: Any) -> dict[str, list[str]]:
    """The Lease a scheduler with this configuration leads through -> its profiles."""
    le = config.leader_election
    key = f"{le.resource_namespace}/{le.resource_name}"
    return {key: [p.scheduler_name for p in config.profiles]}


def start_informers(client: Any, model: Any) -> list[Any]:
    """Informers feeding ``model``; started. Node heartbeat Leases are filtered out on the server."""
    from kubesched.client.informer import Informer

    nodes = Informer(client, "v1", "nodes")
    nodes.add_handler(model.on_node, model.on_node, model.on_node_delete)
    pods = Informer(client, "v1", "pods")
    pods.add_handler(model.on_pod, model.on_pod, model.on_pod_delete)
    events = Informer(client, "v1", "events", field_selector="reason=FailedScheduling")
    events.add_handler(model.on_event, model.on_event, model.on_event_delete)
    leases = Informer(
        client, "coordination.k8s.io/v1", "leases", field_selector="metadata.namespace!=kube-node-lease"
    )
    leases.add_handler(model.on_lease, model.on_lease, model.on_lease_delete)
    informers = [nodes, pods, events, leases]
    for inf in informers:
        inf.start()
    return informers


async def _main(args: argparse.Namespace, config: Any, client_config: Any, catalogue: Catalogue) -> int:
    from kubesched.client.rest import ApiClient
    from kubesched.dashboard.explain import Explainer
    from kubesched.dashboard.model import ClusterModel
    from kubesched.dashboard.scheduler_view import SchedulerWatcher
    from kubesched.dashboard.server import DashboardServer

    # The dashboard only reads: a modest client rate is plenty.
    client = ApiClient(dataclasses.replace(client_config, qps=20.0, burst=40))
    model = ClusterModel(tile_limit=args.tile_limit, lease_profiles=lease_profiles(config))
    explainer = Explainer(config, catalogue, seed=args.seed)
    watcher = None
    if args.scheduler_url:
        # The scheduler's secure port authorizes /metrics and /debug/queue: present the kubeconfig's identity.
        watcher = SchedulerWatcher(
            args.scheduler_url,
            ca_file=args.scheduler_ca_file,
            interval=args.scheduler_poll_interval,
            credentials=client_config,
        )
    server = DashboardServer(
        model, explainer, watcher=watcher, bind_address=args.bind_address, port=args.port
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    informers = start_informers(client, model)
    try:
        await server.start()
        if watcher is not None:
            watcher.start()
        print(f"kubesched dashboard: serving on {server.url}", flush=True)
        await stop.wait()
        return 0
    finally:
        if watcher is not None:
            await watcher.stop()
        await server.stop()
        for inf in informers:
            await inf.stop()
        await client.close()
