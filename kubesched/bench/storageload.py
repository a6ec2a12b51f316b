"""Storage load and restart measurements (issue 13): ``python -m kubesched.bench.storageload``.

Two modes:

- ``--micro``: the cost one write adds per backend, in-process through ``ClusterApi`` (no HTTP): pod create,
  binding, lease renewal, each timed per call over ``--ops`` objects.
- default: ``kubesched cluster up --storage S --nodes N`` as a process (its simulated nodes renew their Leases every
  10 s, as kubelets do), then ``--pods`` pods created over HTTPS as fast as ``--concurrency`` clients can: request
  latency p50/p99 and failed requests (the client does not retry). With ``--restart-pods P`` the cluster is then
  filled to P pods, stopped (SIGTERM, or SIGKILL with ``--kill``) and started again with the same command: the
  time until it serves, and how many objects were kept.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from kubesched.client.config import load_config
from kubesched.client.rest import ApiClient, ApiError
from kubesched.cluster.process import start_cluster_process

STORAGES = ("memory", "sqlite", "etcd")


def pod_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": {"app": "load"}},
        "spec": {
            "schedulerName": "nobody",  # stays pending: the load is on the API server and its storage
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
                }
            ],
        },
    }


def percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def create_pods(
    kubeconfig: Path, names: list[str], concurrency: int
) -> tuple[list[float], int, float, list[str]]:
    """Create the pods with ``concurrency`` workers; (latencies in s, failures, wall time, first errors)."""
    latencies: list[float] = []
    failures = 0
    errors: list[str] = []
    queue = list(reversed(names))
    async with ApiClient(load_config(str(kubeconfig)), max_connections=concurrency, max_retries=0) as client:

        async def worker() -> None:
            nonlocal failures
            while queue:
                name = queue.pop()
                t = time.perf_counter()
                try:
                    await client.create("v1", "pods", pod_body(name), namespace="default")
                except (TimeoutError, ApiError, OSError) as e:
                    failures += 1
                    if len(errors) < 5:
                        errors.append(f"{name}: {e}")
                    continue
                latencies.append(time.perf_counter() - t)

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return latencies, failures, time.perf_counter() - start, errors


async def count_pods(kubeconfig: Path) -> int:
    async with ApiClient(load_config(str(kubeconfig))) as client:
        got = await client.list("v1", "pods", namespace="default")
        return len(got["items"])


def _line_with(lines: list[str], needle: str) -> str:
    return next((line for line in lines if needle in line), "")


def run_load(args: argparse.Namespace) -> int:
    data_dir = (
        Path(args.data_dir) if args.data_dir else Path(tempfile.mkdtemp(prefix="kubesched-storageload-"))
    )
    flags = (
        *("--nodes", str(args.nodes), "--storage", args.storage, "--no-controllers"),
        *("--node-heartbeat-interval", str(args.heartbeat)),
    )
    print(
        f"storageload: {args.storage}, {args.nodes} nodes (leases every {args.heartbeat:g}s), data dir {data_dir}"
    )
    t0 = time.perf_counter()
    proc, _url, kubeconfig, lines = start_cluster_process(data_dir, *flags, timeout=1800, keep_lines=200)
    print(f"storageload: cluster up in {time.perf_counter() - t0:.1f}s")
    try:
        names = [f"load-{i:06d}" for i in range(args.pods)]
        lat, failed, wall, errs = asyncio.run(create_pods(kubeconfig, names, args.concurrency))
        ms = [x * 1000 for x in lat]
        print(
            f"storageload: {len(lat)} pods created, {failed} failed, in {wall:.1f}s "
            f"({len(lat) / wall:.0f}/s); latency p50 {percentile(ms, 0.5):.1f} ms, "
            f"p99 {percentile(ms, 0.99):.1f} ms, max {max(ms, default=0):.1f} ms"
        )
        for e in errs:
            print(f"storageload:   error: {e}")
        acknowledged = len(lat)
        if args.restart_pods:
            more = [f"fill-{i:06d}" for i in range(max(0, args.restart_pods - args.pods))]
            lat2, failed2, wall2, _ = asyncio.run(create_pods(kubeconfig, more, args.concurrency))
            acknowledged += len(lat2)
            print(f"storageload: filled to {acknowledged} pods ({failed2} failed, {wall2:.1f}s)")
            sig = signal.SIGKILL if args.kill else signal.SIGTERM
            t = time.perf_counter()
            proc.send_signal(sig)
            proc.wait(600)
            print(f"storageload: {sig.name}: exited in {time.perf_counter() - t:.1f}s")
            t = time.perf_counter()
            proc, _url, kubeconfig, lines = start_cluster_process(
                data_dir, *flags, timeout=1800, keep_lines=200
            )
            restart = time.perf_counter() - t
            kept = asyncio.run(count_pods(kubeconfig))
            opened = _line_with(lines, "kubesched cluster: storage ")
            print(f"storageload: restarted in {restart:.1f}s ({opened.split('cluster: ', 1)[-1]})")
            print(f"storageload: {kept} of {acknowledged} acknowledged pods kept")
        return 0 if failed == 0 else 1
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(120)
            except Exception:
                proc.kill()
        if not args.data_dir and not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)


# -- in-process cost per write -------------------------------------------------------------------------------------


def run_micro(args: argparse.Namespace) -> int:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.kubelet.simulated import now_micro
    from kubesched.cluster.local import ClusterOptions, open_storage
    from kubesched.cluster.resources import ResourceRegistry

    for storage in args.storages:
        folder = Path(tempfile.mkdtemp(prefix="kubesched-storagemicro-"))
        opts = ClusterOptions(data_dir=folder, storage=storage)
        store = open_storage(opts)
        try:
            api = ClusterApi(store, ResourceRegistry())
            api.bootstrap()
            pods_t = api.rtype("", "v1", "pods")
            nodes_t = api.rtype("", "v1", "nodes")
            leases_t = api.rtype("coordination.k8s.io", "v1", "leases")
            api.create(nodes_t, {"metadata": {"name": "n0"}}, None)
            n = args.ops
            timings: dict[str, list[float]] = {"pod create": [], "binding": [], "lease renew": []}
            for i in range(n):
                t = time.perf_counter()
                api.create(pods_t, pod_body(f"p{i}"), "default")
                timings["pod create"].append(time.perf_counter() - t)
            for i in range(n):
                t = time.perf_counter()
                api.bind(
                    "default",
                    f"p{i}",
                    {"metadata": {"name": f"p{i}"}, "target": {"kind": "Node", "name": "n0"}},
                )
                timings["binding"].append(time.perf_counter() - t)
            lease = {
                "metadata": {"name": "n0", "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": "n0"},
            }
            api.create(leases_t, lease, "kube-node-lease")
            for _ in range(n):
                cur = api.lookup(leases_t, "kube-node-lease", "n0")
                assert cur is not None
                body = dict(cur.obj, spec=dict(cur.obj["spec"], renewTime=now_micro()))
                t = time.perf_counter()
                api.store.update(leases_t.storage_key, body, cur)
                timings["lease renew"].append(time.perf_counter() - t)
            parts = [
                f"{what} p50 {statistics.median(v) * 1e6:.0f} µs p99 {percentile(v, 0.99) * 1e6:.0f} µs"
                for what, v in timings.items()
            ]
            print(f"storageload --micro {storage:6} ({n} each): " + "; ".join(parts), flush=True)
        finally:
            store.close()
            shutil.rmtree(folder, ignore_errors=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m kubesched.bench.storageload", description=__doc__.split("\n")[0]
    )
    p.add_argument("--storage", choices=STORAGES, default="sqlite")
    p.add_argument("--nodes", type=int, default=5000)
    p.add_argument("--heartbeat", type=float, default=10.0, help="seconds between node Lease renewals")
    p.add_argument("--pods", type=int, default=20000, help="pods created as fast as the clients can")
    p.add_argument("--concurrency", type=int, default=32, help="concurrent clients (default 32)")
    p.add_argument(
        "--restart-pods", type=int, default=0, metavar="P", help="fill to P pods, restart, measure"
    )
    p.add_argument("--kill", action="store_true", help="restart after SIGKILL instead of SIGTERM")
    p.add_argument("--data-dir", default="", help="default: a temporary folder, removed afterwards")
    p.add_argument("--keep", action="store_true", help="keep the temporary data dir")
    p.add_argument("--micro", action="store_true", help="in-process cost per write of each backend")
    p.add_argument("--storages", default="memory,sqlite,etcd", help="--micro: backends to measure")
    p.add_argument("--ops", type=int, default=2000, help="--micro: writes of each kind")
    args = p.parse_args(argv)
    for flag in ("nodes", "pods", "concurrency", "restart_pods", "ops"):
        if getattr(args, flag) < 0 or (flag == "concurrency" and args.concurrency == 0):
            p.error(f"--{flag.replace('_', '-')} must be positive")
    if args.micro:
        args.storages = [s.strip() for s in args.storages.split(",") if s.strip()]
        unknown = [s for s in args.storages if s not in STORAGES]
        if unknown:
            p.error(f"--storages: unknown {', '.join(unknown)} (known: {', '.join(STORAGES)})")
        if "etcd" in args.storages and shutil.which("etcd") is None:
            print("storageload: etcd not on PATH; skipping it", file=sys.stderr)
            args.storages.remove("etcd")
        return run_micro(args)
    return run_load(args)


if __name__ == "__main__":
    sys.exit(main())
