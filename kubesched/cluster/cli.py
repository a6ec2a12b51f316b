"""``kubesched cluster up``: run the local cluster in the foreground until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
import time
from pathlib import Path

from kubesched.apimachinery.quantity import parse_quantity
from kubesched.cluster.controllers import KNOWN_CONTROLLERS, parse_controllers
from kubesched.cluster.kubelet import NodeShape
from kubesched.cluster.local import STORAGE_CHOICES, ClusterOptions, LocalCluster, run_forever
from kubesched.cluster.nodemetrics import CPU_SERIES_CHOICES, DEFAULT_USAGE_SHARE
from kubesched.cluster.storage.etcd import EtcdUnavailable
from kubesched.cluster.storage.memory import DEFAULT_HISTORY_SIZE
from kubesched.cluster.storage.sqlite import StorageInUse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cluster_command", metavar="ACTION")
    up = sub.add_parser("up", help="start an API server with simulated nodes (foreground)")
    up.add_argument(
        "--port", type=int, default=6443, help="port to serve on (default 6443; 0 picks a free one)"
    )
    up.add_argument("--bind-address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    up.add_argument("--nodes", type=int, default=3, help="number of simulated nodes (default 3)")
    up.add_argument("--node-cpu", default="32", help="CPU capacity of each node (default 32)")
    up.add_argument("--node-memory", default="256Gi", help="memory capacity of each node (default 256Gi)")
    up.add_argument("--node-pods", type=int, default=110, help="pod capacity of each node (default 110)")
    up.add_argument("--node-name-prefix", default="node-", help="simulated node names are <prefix><index>")
    up.add_argument("--zones", type=int, default=3, help="spread nodes over this many zones (default 3)")
    up.add_argument(
        "--node-gpus",
        type=int,
        default=0,
        help="GPUs of the simulated DRA driver gpu.kubesched.io on each simulated node (default 0)",
    )
    up.add_argument(
        "--data-dir",
        type=Path,
        default=Path.home() / ".kubesched" / "cluster",
        help="where objects (with --storage sqlite or a local etcd), certificates and the kubeconfig are kept "
        "(default ~/.kubesched/cluster)",
    )
    up.add_argument(
        "--storage",
        choices=STORAGE_CHOICES,
        default="sqlite",
        help="where objects live: sqlite (default: <data-dir>/db/state.db, every write committed before it is "
        "acknowledged), etcd (a real etcd, see --etcd-servers), or memory (nothing survives a restart; for "
        "benchmarks and throwaway clusters)",
    )
    up.add_argument(
        "--sqlite-sync",
        choices=("normal", "full"),
        default="normal",
        help="sqlite: 'normal' (default) survives the process being killed at any point; 'full' also fsyncs "
        "every commit, to survive a power loss (several times slower per write)",
    )
    up.add_argument(
        "--etcd-servers",
        default="",
        metavar="URLS",
        help="etcd: comma-separated client URLs (http://127.0.0.1:2379); default: start an etcd on loopback "
        "under <data-dir>/etcd",
    )
    up.add_argument(
        "--kubeconfig-out",
        type=Path,
        default=None,
        help="where to write the admin kubeconfig (default <data-dir>/admin.kubeconfig)",
    )
    up.add_argument("--insecure-http", action="store_true", help="serve plain HTTP without authentication")
    up.add_argument(
        "--watch-history",
        type=int,
        default=DEFAULT_HISTORY_SIZE,
        help="change events kept per resource for watch resumption (older → 410 Expired)",
    )
    up.add_argument(
        "--node-heartbeat-interval",
        type=float,
        default=10.0,
        help="seconds between node Lease renewals (default 10, as the kubelet)",
    )
    up.add_argument(
        "--bookmark-interval",
        type=float,
        default=60.0,
        help="seconds between watch bookmarks for clients that allow them (default 60)",
    )
    up.add_argument(
        "--node-metrics-port",
        type=int,
        default=None,
        metavar="PORT",
        help="serve node-exporter metrics of all simulated nodes at http://<bind-address>:PORT/metrics "
        "(0 picks a free port; default: off)",
    )
    up.add_argument(
        "--node-usage-share",
        type=float,
        default=DEFAULT_USAGE_SHARE,
        help="a pod without usage annotations uses this share of its requests "
        f"(default {DEFAULT_USAGE_SHARE})",
    )
    up.add_argument(
        "--node-metrics-cpu-series",
        choices=CPU_SERIES_CHOICES,
        default="per-core",
        help="node_cpu_seconds_total series per node and mode: one per core (as node-exporter), or "
        "'one' averaged core (crane's rules read the same load; far fewer series at 5,000 nodes)",
    )
    up.add_argument(
        "--authorization-mode",
        choices=("RBAC", "AlwaysAllow"),
        default="RBAC",
        help="RBAC (default, as kube-apiserver) or AlwaysAllow (any authenticated user may do anything)",
    )
    up.add_argument(
        "--token-auth-file",
        type=Path,
        default=None,
        metavar="FILE",
        help='bearer tokens as kube-apiserver reads them: CSV rows token,user,uid[,"group1,group2"]',
    )
    up.add_argument(
        "--controllers",
        default="*",
        metavar="LIST",
        help="controllers to run, as kube-controller-manager's flag: '*' all, 'foo' enables, '-foo' "
        f"disables, '' none (known: {', '.join(KNOWN_CONTROLLERS)}; default '*')",
    )
    up.add_argument(
        "--no-controllers", action="store_true", help="run no controllers (same as --controllers='')"
    )
    up.add_argument(
        "--control-plane-nodes",
        type=int,
        default=1,
        metavar="N",
        help="nodes control-plane-0..N-1 (tainted NoSchedule, InternalIP 127.0.1.x, root folder "
        "<data-dir>/nodes/<node>/) whose kubelet runs static pods and pods of --process-image as "
        "local processes (default 1)",
    )
    up.add_argument(
        "--process-image",
        default="kubesched",
        help="image whose containers run as kubesched processes on control-plane nodes (default kubesched)",
    )
    up.add_argument("-v", "--v", type=int, default=0, dest="verbosity", help="log verbosity")


def _check_flags(args: argparse.Namespace) -> str:
    """What is wrong with the flags, before anything is opened or written ("" when nothing is)."""
    if not 0 <= args.port <= 65535:
        return f"--port must be in 0..65535, not {args.port}"
    for flag, value in (("--node-cpu", args.node_cpu), ("--node-memory", args.node_memory)):
        try:
            parse_quantity(value)
        except (ValueError, TypeError):
            return f"{flag}: {value!r} is not a quantity (e.g. 32, 500m, 256Gi)"
    if args.insecure_http and not _is_loopback(args.bind_address):
        return (
            "--insecure-http serves without TLS or authentication and only on a loopback address "
            f"(127.0.0.1, ::1, localhost), not {args.bind_address!r}"
        )
    return ""


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def run(args: argparse.Namespace) -> int:
    if args.cluster_command != "up":
        print("usage: kubesched cluster up [flags]  (see kubesched cluster up --help)", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=logging.DEBUG if args.verbosity >= 4 else logging.INFO if args.verbosity else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    problem = _check_flags(args)
    if problem:
        print(f"kubesched cluster up: {problem}", file=sys.stderr)
        return 2
    if args.nodes < 0:
        print("kubesched cluster up: --nodes must be >= 0", file=sys.stderr)
        return 2
    if args.node_gpus < 0:
        print("kubesched cluster up: --node-gpus must be >= 0", file=sys.stderr)
        return 2
    if args.control_plane_nodes < 0:
        print("kubesched cluster up: --control-plane-nodes must be >= 0", file=sys.stderr)
        return 2
    if args.node_metrics_port is not None and not 0 <= args.node_metrics_port <= 65535:
        print("kubesched cluster up: --node-metrics-port must be in 0..65535", file=sys.stderr)
        return 2
    if args.token_auth_file is not None and not args.token_auth_file.expanduser().is_file():
        print(
            f"kubesched cluster up: --token-auth-file {args.token_auth_file}: no such file", file=sys.stderr
        )
        return 2
    try:
        controllers = frozenset() if args.no_controllers else parse_controllers(args.controllers)
    except ValueError as e:
        print(f"kubesched cluster up: --controllers: {e}", file=sys.stderr)
        return 2
    if not args.node_usage_share >= 0:
        print("kubesched cluster up: --node-usage-share must be >= 0", file=sys.stderr)
        return 2
    options = ClusterOptions(
        bind_address=args.bind_address,
        port=args.port,
        nodes=args.nodes,
        node_gpus=args.node_gpus,
        node_shape=NodeShape(cpu=args.node_cpu, memory=args.node_memory, pods=args.node_pods),
        node_name_prefix=args.node_name_prefix,
        zones=args.zones,
        data_dir=args.data_dir.expanduser(),
        kubeconfig_out=args.kubeconfig_out.expanduser() if args.kubeconfig_out else None,
        insecure_http=args.insecure_http,
        watch_history=args.watch_history,
        heartbeat_interval=args.node_heartbeat_interval,
        bookmark_interval=args.bookmark_interval,
        node_metrics_port=args.node_metrics_port,
        node_usage_share=args.node_usage_share,
        node_metrics_cpu_series=args.node_metrics_cpu_series,
        control_plane_nodes=args.control_plane_nodes,
        process_image=args.process_image,
        controllers=controllers,
        authorization_mode=args.authorization_mode,
        token_auth_file=args.token_auth_file.expanduser() if args.token_auth_file else None,
        storage=args.storage,
        sqlite_synchronous=args.sqlite_sync,
        etcd_servers=tuple(u.strip() for u in args.etcd_servers.split(",") if u.strip()),
    )
    if options.etcd_servers and options.storage != "etcd":
        print("kubesched cluster up: --etcd-servers needs --storage etcd", file=sys.stderr)
        return 2
    print(f"kubesched cluster: data dir {options.data_dir}", flush=True)
    opened = time.perf_counter()
    try:
        cluster = LocalCluster(options)
    except (StorageInUse, EtcdUnavailable, OSError, ValueError) as e:
        print(f"kubesched cluster up: storage {options.storage}: {e}", file=sys.stderr)
        return 1
    print(
        f"kubesched cluster: storage {options.storage}, revision {cluster.store.revision}, "
        f"{sum(len(c.objects) for c in cluster.store.collections().values())} objects "
        f"(opened in {time.perf_counter() - opened:.2f}s)",
        flush=True,
    )
    ready = "kubesched cluster: serving on {url}\nkubesched cluster: kubeconfig {kubeconfig}\n"
    if options.node_metrics_port is not None:
        ready += "kubesched cluster: node metrics {node_metrics_url}\n"
    from kubesched import eventloop

    try:
        eventloop.run(run_forever(cluster, ready + "kubesched cluster: ready"))
    except eventloop.EventLoopError as e:
        print(f"kubesched cluster up: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(
            f"kubesched cluster up: cannot serve on {args.bind_address}:{args.port}: {e.strerror or e}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        pass
    return 0
