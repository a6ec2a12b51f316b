"""The process event loop (``kubesched.eventloop``): the choice, and the cluster and client working alike on
uvloop and on asyncio's loop (TLS with client certificates, the lean POST path, aiohttp requests, watches)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest

from kubesched import eventloop
from kubesched.client.config import load_kubeconfig
from kubesched.client.events import EventRecorder
from kubesched.client.rest import ApiClient, ApiError
from kubesched.cluster.local import ClusterOptions, LocalCluster

LOOPS = ("asyncio", "uvloop")


def test_choice_from_value_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(eventloop.ENV, raising=False)
    assert eventloop.chosen() == "uvloop"  # installed with kubesched: auto takes it
    assert eventloop.chosen("asyncio") == "asyncio"
    assert eventloop.chosen(" UVLoop ") == "uvloop"
    assert eventloop.chosen("") == "uvloop"
    monkeypatch.setenv(eventloop.ENV, "asyncio")
    assert eventloop.chosen() == "asyncio"
    assert eventloop.loop_factory() is None
    assert eventloop.chosen("auto") == "uvloop"  # an explicit value wins over the environment
    monkeypatch.setenv(eventloop.ENV, "tokio")
    with pytest.raises(eventloop.EventLoopError, match=r"KUBESCHED_EVENT_LOOP='tokio': unknown event loop"):
        eventloop.chosen()


def test_uvloop_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert eventloop.chosen("auto") == "asyncio"
    with pytest.raises(eventloop.EventLoopError, match="uvloop is not installed"):
        eventloop.chosen("uvloop")


@pytest.mark.parametrize("loop", LOOPS)
def test_run_returns_and_propagates(loop: str) -> None:
    async def name() -> str:
        await asyncio.sleep(0)
        return eventloop.running_loop_name()

    assert eventloop.run(name(), loop=loop) == loop

    async def fail() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        eventloop.run(fail(), loop=loop)


def test_bad_choice_closes_the_coroutine() -> None:
    async def never() -> None:
        raise AssertionError("must not run")

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be a RuntimeWarning
        with pytest.raises(eventloop.EventLoopError):
            eventloop.run(never(), loop="trio")


def _pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"schedulerName": "nobody", "containers": [{"name": "c", "image": "pause"}]},
    }


async def _scenario(data_dir: Path) -> dict[str, Any]:
    """Against an in-process TLS cluster with client-certificate auth: creates, bindings and events on the
    lean path (many per kept-alive connection, so the per-connection user cache is hit), GETs and a watch on
    aiohttp, errors as ApiError."""
    cluster = LocalCluster(
        ClusterOptions(port=0, data_dir=data_dir, nodes=2, heartbeat_interval=3600.0, storage="memory")
    )
    await cluster.start()
    try:
        config = load_kubeconfig([str(cluster.kubeconfig_path)])
        async with ApiClient(config, max_connections=4) as client:
            nodes = (await client.list("v1", "nodes"))["items"]
            node = nodes[0]["metadata"]["name"]
            watch = client.watch("v1", "pods", namespace="default", field_selector="spec.nodeName=" + node)
            await watch.open()
            names = [f"p{i}" for i in range(40)]
            await asyncio.gather(*(client.create("v1", "pods", _pod(n), namespace="default") for n in names))
            binding = {"apiVersion": "v1", "kind": "Binding", "target": {"kind": "Node", "name": node}}
            answers = await asyncio.gather(
                *(
                    client.create_subresource(
                        "v1", "pods", n, "binding", {**binding, "metadata": {"name": n}}, namespace="default"
                    )
                    for n in names
                )
            )
            recorder = EventRecorder(client, "default-scheduler", "default-scheduler-test")
            for n in names:
                pod = await client.get("v1", "pods", n, namespace="default")
                recorder.event(pod, "Normal", "Scheduled", "Binding", f"Successfully assigned default/{n}")
            assert await recorder.flush(timeout=60)
            await recorder.close()
            seen: set[str] = set()
            async with asyncio.timeout(60):
                async for etype, obj in watch:
                    if etype != "BOOKMARK":
                        seen.add(obj["metadata"]["name"])
                    if seen == set(names):
                        break
            await watch.aclose()
            events = await client.list("events.k8s.io/v1", "events", namespace="default")
            try:
                await client.create_subresource(
                    "v1",
                    "pods",
                    "p0",
                    "binding",
                    {**binding, "metadata": {"name": "p0"}},
                    namespace="default",
                )
                conflict = None
            except ApiError as e:
                conflict = e.status
            return {
                "loop": eventloop.running_loop_name(),
                "answers": {a["status"] for a in answers},
                "events": sorted(e["regarding"]["name"] for e in events["items"]),
                "dropped": recorder.dropped,
                "conflict": conflict,
            }
    finally:
        await cluster.stop()


@pytest.mark.parametrize("loop", LOOPS)
def test_cluster_and_client_on_each_loop(loop: str, tmp_path: Path) -> None:
    out = eventloop.run(_scenario(tmp_path), loop=loop)
    assert out["loop"] == loop
    assert out["answers"] == {"Success"}
    assert out["events"] == sorted(f"p{i}" for i in range(40))
    assert out["dropped"] == 0
    assert out["conflict"] == 409  # a second binding of a bound pod


def _kubesched(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubesched.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )


def test_cli_refuses_an_unknown_loop_in_one_line(tmp_path: Path) -> None:
    bad = _kubesched("--event-loop", "tokio", "cluster", "up")
    assert bad.returncode == 2
    assert "invalid choice: 'tokio'" in bad.stderr
    env = {**os.environ, eventloop.ENV: "tokio"}
    out = _kubesched(
        "cluster", "up", "--port", "0", "--storage", "memory", "--data-dir", str(tmp_path), env=env
    )
    assert out.returncode == 2
    assert (
        out.stderr.strip().splitlines()[-1].startswith("kubesched cluster up: KUBESCHED_EVENT_LOOP='tokio'")
    )
    assert "Traceback" not in out.stderr
