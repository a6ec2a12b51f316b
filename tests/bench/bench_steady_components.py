"""Where a pod's create-to-bound time goes under steady load, without the scheduler: the API path alone.

Starts the local cluster (in memory, HTTPS) in its own process, creates ``--nodes`` plain nodes, then creates
pods at ``--rate`` for ``--duration`` seconds from this process, deleting the oldest once ``--live`` exist (as
SteadyLoad does). A zero-cost "scheduler" in this process watches pods and POSTs each pod's binding the moment
its ADDED event arrives. Reported per pod, in milliseconds (p50/p90/p99/max):

- ``create``: due -> the create call returned (client pacing, the API server's create path, TLS both ways);
- ``watchAdded``: due -> the pod's ADDED event read from the watch (create path plus watch fan-out);
- ``bindRoundTrip``: ADDED read -> the binding's MODIFIED event read (binding POST, its write, fan-out);
- ``total``: due -> MODIFIED (bound) read: the end-to-end latency SteadyLoad would report with a scheduler
  that took no time at all. The scheduler's own cycle is what ``kubesched bench -w SteadyLoad`` (in process)
  adds on top.

Also the API server's CPU per pod and this process's event-loop lag. On a shared machine the absolute numbers
follow the load; compare the parts with each other.

    .venv/bin/python tests/bench/bench_steady_components.py --nodes 5000 --rate 300 --duration 30

Not a test (no ``test_`` prefix): run by hand.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import shutil
import signal
import tempfile
import time
from pathlib import Path
from typing import Any

from kubesched.bench.e2e import _cpu_seconds, _LoopLag, _steady_gc, _warm_connections
from kubesched.bench.measure import latency_summary
from kubesched.bench.workloads import WORKLOADS, make_node
from kubesched.client.config import load_config
from kubesched.client.rest import ApiClient
from kubesched.cluster.process import start_cluster_process

NAMESPACE = "default"


async def _run(args: argparse.Namespace, kubeconfig: Path, api_pid: int) -> dict[str, Any]:
    client = ApiClient(load_config(str(kubeconfig)), max_connections=64)
    try:
        sem = asyncio.Semaphore(64)

        async def create_node(i: int) -> None:
            async with sem:
                await client.create("v1", "nodes", make_node(i))

        await asyncio.gather(*(create_node(i) for i in range(args.nodes)))
        workload = WORKLOADS["SteadyLoad"]
        pods = [
            workload.measured_pod(f"c-{i:06d}", NAMESPACE) for i in range(round(args.rate * args.duration))
        ]
        index = {p["metadata"]["name"]: i for i, p in enumerate(pods)}
        due: dict[str, float] = {}
        returned: dict[str, float] = {}
        added: dict[str, float] = {}
        bound: dict[str, float] = {}
        binds: set[asyncio.Task[Any]] = set()
        limit = asyncio.Semaphore(16)
        all_bound = asyncio.Event()

        async def bind(name: str) -> None:
            body = {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": name, "namespace": NAMESPACE},
                "target": {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": f"bench-node-{index[name] % args.nodes:05d}",
                },
            }
            await client.create_subresource("v1", "pods", name, "binding", body, namespace=NAMESPACE)

        async def follow() -> None:
            async with client.watch("v1", "pods", namespace=NAMESPACE, resource_version=rv) as stream:
                async for event_type, obj in stream:
                    if event_type == "BOOKMARK":
                        continue
                    name = obj["metadata"]["name"]
                    now = time.perf_counter()
                    if event_type == "ADDED" and name in due:
                        added[name] = now
                        task = asyncio.ensure_future(bind(name))
                        binds.add(task)
                        task.add_done_callback(binds.discard)
                    elif event_type == "MODIFIED" and obj["spec"].get("nodeName") and name not in bound:
                        bound[name] = now
                        if len(bound) == len(pods):
                            all_bound.set()

        listed = await client.list("v1", "pods", namespace=NAMESPACE)
        rv = listed["metadata"]["resourceVersion"]
        watcher = asyncio.create_task(follow())
        await _warm_connections(client, 16)
        lag = _LoopLag(0.01)
        api_cpu = _cpu_seconds(api_pid)
        pending: list[asyncio.Future[Any]] = []  # every create and delete, to count the failed ones
        oldest: collections.deque[str] = collections.deque()

        async def create(pod: dict[str, Any]) -> None:
            async with limit:
                await client.create("v1", "pods", pod, namespace=NAMESPACE)
            returned[pod["metadata"]["name"]] = time.perf_counter()

        async def delete(name: str) -> None:
            async with limit:
                await client.delete("v1", "pods", name, namespace=NAMESPACE, grace_period_seconds=0)

        with _steady_gc():
            start = time.perf_counter()
            for i, pod in enumerate(pods):
                delay = start + i / args.rate - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                name = pod["metadata"]["name"]
                due[name] = time.perf_counter()
                for coro in [create(pod)] + (
                    [delete(oldest.popleft())] if len(oldest) >= args.live and oldest[0] in bound else []
                ):
                    pending.append(asyncio.ensure_future(coro))
                oldest.append(name)
            await asyncio.wait_for(all_bound.wait(), args.duration + 120)
            failed = [r for r in await asyncio.gather(*pending, return_exceptions=True) if r is not None]
            lag.stop()
        api_cpu = _cpu_seconds(api_pid) - api_cpu
        watcher.cancel()
        await asyncio.gather(watcher, return_exceptions=True)
        round_trip = {n: bound[n] - added[n] for n in bound if n in added}
        return {
            "nodes": args.nodes,
            "rate": args.rate,
            "pods": len(pods),
            "createMilliseconds": latency_summary(returned, due),
            "watchAddedMilliseconds": latency_summary(added, due),
            "bindRoundTripMilliseconds": latency_summary(round_trip, dict.fromkeys(round_trip, 0.0)),
            "totalMilliseconds": latency_summary(bound, due),
            "apiServerCPUMicrosecondsPerPod": round(api_cpu / len(pods) * 1e6),
            "clientLoopLagMilliseconds": lag.summary(),
            "failedRequests": len(failed),
        }
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--rate", type=float, default=300.0)
    parser.add_argument("--duration", type=float, default=30.0)
    parser.add_argument("--live", type=int, default=3000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="kubesched-components-"))
    proc, _url, kubeconfig, _lines = start_cluster_process(work, "--nodes", "0", storage="memory")
    try:
        print(json.dumps(asyncio.run(_run(args, kubeconfig, proc.pid))))
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
