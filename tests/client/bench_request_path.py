"""Callgrind micro-benchmark of the scheduler's client request path: N binding POSTs + N ``Scheduled`` events.

The API server runs in its own process (local cluster, in-memory storage, HTTPS); only the client process runs
under callgrind, twice (N1 and N2 pods), and the difference divided by N2-N1 is the client's instruction count
per pod (one binding + one event), free of start-up, imports and TLS handshakes.

    .venv/bin/python tests/client/bench_request_path.py --n1 200 --n2 600

``--side server`` runs the API server under callgrind instead (the client runs normally): its counters are
zeroed before each client run and dumped after it (``callgrind_control``), so the per-pod figure is the
server's share of a binding and an event (request parsing, authentication, the write, the answer).
``BENCH_WRITER=events|all`` attaches an API writer child (kubesched/client/writer.py) to the client; only the
client process is measured then (valgrind does not follow the child). ``--watch`` adds a pods watch to each client run, read until every binding has come back as a MODIFIED event
(the scheduler's informer does that), so the server's watch fan-out and the client's decoding count too.

Not a test (no ``test_`` prefix): run by hand to judge a change to ``kubesched/client``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

NAMESPACE = "default"
CONCURRENCY = 64  # bindings in flight at once, as a scheduler's background binding tasks are


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE, "labels": {"app": "bench"}},
        "spec": {
            "schedulerName": "nobody",
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m"}},
                }
            ],
        },
    }


async def _prepare(kubeconfig: str, prefix: str, count: int) -> None:
    from kubesched.client.config import load_kubeconfig
    from kubesched.client.rest import ApiClient

    async with ApiClient(load_kubeconfig([kubeconfig])) as client:
        try:
            await client.create(
                "v1", "nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}
            )
        except Exception:
            pass
        sem = asyncio.Semaphore(32)

        async def one(i: int) -> None:
            async with sem:
                await client.create("v1", "pods", _pod(f"{prefix}-{i}"), namespace=NAMESPACE)

        await asyncio.gather(*(one(i) for i in range(count)))


async def _client_run(kubeconfig: str, prefix: str, count: int, watch: bool = False) -> None:
    """What is measured: the scheduler's two requests per pod, as the scheduler makes them."""
    from kubesched.client.config import load_kubeconfig
    from kubesched.client.events import EventRecorder
    from kubesched.client.rest import ApiClient
    from kubesched.scheduler.framework.interface import CycleState
    from kubesched.scheduler.plugins.default_binder import DefaultBinder
    from kubesched.scheduler.podinfo import PodInfo
    from kubesched.scheduler.resources import ResourceIndex

    async with ApiClient(load_kubeconfig([kubeconfig])) as client:
        mode = os.environ.get("BENCH_WRITER", "off")  # the API writer child: off, events or all
        if mode != "off":
            from kubesched.client.writer import ApiWriter

            writer = ApiWriter(client.config)
            await writer.start()
            client.attach_writer(writer, requests=mode == "all")
        listed = await client.list("v1", "pods", namespace=NAMESPACE)
        pods = listed["items"]
        # Both runs list and decode the same pods, so only the requests differ between them.
        res = ResourceIndex()
        infos = [PodInfo.from_pod(p, res) for p in pods]
        mine = [pi for pi in infos if pi.name.startswith(prefix + "-")][:count]
        assert len(mine) == count, (len(mine), count)

        class Handle:
            pass

        handle = Handle()
        handle.client = client  # type: ignore[attr-defined]
        binder = DefaultBinder(None, handle)
        recorder = EventRecorder(client, "default-scheduler", "default-scheduler-bench")
        sem = asyncio.Semaphore(CONCURRENCY)
        failures = 0

        async def one(pi: PodInfo) -> None:
            nonlocal failures
            async with sem:
                s = await binder.bind(CycleState(), pi, "n1")
            if not s.ok:
                failures += 1
            recorder.event(pi.pod, "Normal", "Scheduled", "Binding", f"Successfully assigned {pi.key} to n1")

        async def watch_bindings() -> None:
            # From the list's revision: the MODIFIED event of each binding, as an informer receives them.
            rv = listed["metadata"]["resourceVersion"]
            waiting = {pi.name for pi in mine}
            async with client.watch("v1", "pods", namespace=NAMESPACE, resource_version=rv) as stream:
                async for etype, obj in stream:
                    if etype == "MODIFIED" and obj["spec"].get("nodeName"):
                        waiting.discard(obj["metadata"]["name"])
                        if not waiting:
                            return

        watcher = asyncio.create_task(watch_bindings()) if watch else None
        await asyncio.gather(*(one(pi) for pi in mine))
        if watcher is not None:
            await asyncio.wait_for(watcher, 600)
        await recorder.close(timeout=600)
        dropped = recorder.dropped + (client.event_sink.dropped if client.event_sink is not None else 0)
        if failures or dropped:
            raise SystemExit(f"{failures} bindings failed, {dropped} events dropped")


def _child_cmd(kubeconfig: str, prefix: str, count: int, watch: bool) -> list[str]:
    return [
        sys.executable,
        __file__,
        "--child",
        kubeconfig,
        prefix,
        str(count),
        *(["--watch"] if watch else []),
    ]


def _callgrind(kubeconfig: str, prefix: str, count: int, out: Path, watch: bool) -> int:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        f"--callgrind-out-file={out}",
        *_child_cmd(kubeconfig, prefix, count, watch),
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"client run failed:\n{proc.stderr[-3000:]}")
    m = re.search(r"Collected : (\d+)", proc.stderr)
    if m is None:
        raise SystemExit(f"no callgrind total:\n{proc.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        from kubesched import eventloop

        kubeconfig, prefix, count = sys.argv[2], sys.argv[3], int(sys.argv[4])
        watch = "--watch" in sys.argv[5:]
        eventloop.run(_client_run(kubeconfig, prefix, count, watch))  # KUBESCHED_EVENT_LOOP picks the loop
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n1", type=int, default=200)
    parser.add_argument("--n2", type=int, default=600)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--profile", metavar="FILE", help="run the N2 client under cProfile instead, into FILE"
    )
    parser.add_argument("--side", choices=("client", "server"), default="client")
    parser.add_argument("--watch", action="store_true", help="a pods watch reads every binding back")
    args = parser.parse_args()
    if args.side == "server":
        _server_side(args)
        return
    from kubesched.cluster.process import start_cluster_process

    with tempfile.TemporaryDirectory(prefix="bench-request-path-") as tmp:
        proc, _url, kubeconfig, _lines = start_cluster_process(Path(tmp) / "data", storage="memory")
        try:
            results = []
            for r in range(args.repeat):
                for n in (args.n1, args.n2):
                    asyncio.run(_prepare(str(kubeconfig), f"r{r}n{n}", n))
            if args.profile:
                import cProfile

                prefix = f"r0n{args.n2}"
                cProfile.run(
                    f"asyncio.run(_client_run({str(kubeconfig)!r}, {prefix!r}, {args.n2}))", args.profile
                )
                return
            for r in range(args.repeat):
                totals = []
                for n in (args.n1, args.n2):
                    prefix = f"r{r}n{n}"
                    totals.append(
                        _callgrind(str(kubeconfig), prefix, n, Path(tmp) / f"cg.{prefix}", args.watch)
                    )
                per_pod = (totals[1] - totals[0]) / (args.n2 - args.n1)
                results.append(per_pod)
                print(
                    f"N={args.n1}: {totals[0]:,} Ir  N={args.n2}: {totals[1]:,} Ir  per pod: {per_pod:,.0f} Ir"
                )
            if os.environ.get("BENCH_KEEP"):
                input(f"callgrind files in {tmp}; press enter")
        finally:
            proc.terminate()
            proc.wait(30)


def _server_side(args: argparse.Namespace) -> None:
    """The API server under callgrind; counters zeroed before and dumped after each client run."""
    with tempfile.TemporaryDirectory(prefix="bench-request-path-") as tmp:
        out = Path(tmp) / "server.cg"
        cmd = [
            "valgrind",
            "--tool=callgrind",
            f"--callgrind-out-file={out}",
            sys.executable,
            "-m",
            "kubesched.cli",
            "cluster",
            "up",
            "--port",
            "0",
            "--data-dir",
            str(Path(tmp) / "data"),
            "--storage",
            "memory",
            "--nodes",
            "0",
            "--control-plane-nodes",
            "0",
        ]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        kubeconfig = ""
        for line in proc.stdout:
            if "kubeconfig " in line:
                kubeconfig = line.split("kubeconfig ", 1)[1].strip()
            if line.strip().endswith("ready"):
                break
        if not kubeconfig:
            proc.kill()
            raise SystemExit("the cluster did not start under callgrind")
        try:
            for n in (args.n1, args.n2):
                asyncio.run(_prepare(kubeconfig, f"s{n}", n))
            totals = []
            for i, n in enumerate((args.n1, args.n2), start=1):
                subprocess.run(["callgrind_control", "-z", str(proc.pid)], check=True, capture_output=True)
                subprocess.run(_child_cmd(kubeconfig, f"s{n}", n, args.watch), check=True)
                subprocess.run(["callgrind_control", "-d", str(proc.pid)], check=True, capture_output=True)
                dump = Path(f"{out}.{i}")
                m = re.search(r"^(?:summary|totals): (\d+)", dump.read_text(), re.M)
                if m is None:
                    raise SystemExit(f"no total in {dump}")
                totals.append(int(m.group(1)))
            per_pod = (totals[1] - totals[0]) / (args.n2 - args.n1)
            print(
                f"server: N={args.n1}: {totals[0]:,} Ir  N={args.n2}: {totals[1]:,} Ir  per pod: {per_pod:,.0f} Ir"
            )
        finally:
            proc.terminate()
            proc.wait(120)


if __name__ == "__main__":
    main()
