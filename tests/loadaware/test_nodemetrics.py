"""Simulated node-exporter metrics: the usage model, counters that integrate pod usage over time, the /metrics
endpoint of the local cluster, and the history written for backfills."""

from __future__ import annotations

import asyncio
import io
import math
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np
import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics
from prometheus_client.parser import text_string_to_metric_families as parse_text

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.kubelet import NodeShape, SimulatedKubelets
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.cluster.nodemetrics import (
    CPU_USAGE_ANNOTATION,
    INITIAL_UPTIME,
    MEMORY_USAGE_ANNOTATION,
    NodeMetrics,
    UsageModel,
    pod_requests,
    write_openmetrics,
)

GI = 2**30
Obj = dict[str, Any]


def pod(
    name: str, node: str = "", cpu: str | None = None, memory: str | None = None, **annotations: str
) -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    keys = {"cpu_usage": CPU_USAGE_ANNOTATION, "memory_usage": MEMORY_USAGE_ANNOTATION}
    spec: Obj = {"containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}]}
    if node:
        spec["nodeName"] = node
    return {
        "metadata": {"name": name, "annotations": {keys[k]: v for k, v in annotations.items()}},
        "spec": spec,
    }


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def series(text: str) -> dict[tuple[str, ...], float]:
    """(name, node, cpu, mode) -> value from an exposition."""
    out = {}
    for family in parse_text(text):
        for s in family.samples:
            key = (s.name, s.labels.get("node", ""), s.labels.get("cpu", ""), s.labels.get("mode", ""))
            out[key] = s.value
    return out


def cpu_totals(text: str, node: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for (name, n, _cpu, mode), v in series(text).items():
        if name == "node_cpu_seconds_total" and n == node:
            totals[mode] = totals.get(mode, 0.0) + v
    return totals


# -- the usage model ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (pod("p", cpu="2", memory="4Gi"), (1.2, 0.6 * 4 * GI)),  # share of requests
        (
            pod("p", cpu="2", memory="4Gi", cpu_usage="1500m"),
            (1.5, 0.6 * 4 * GI),
        ),  # annotation wins per resource
        (pod("p", cpu="2", cpu_usage="250m", memory_usage="1Gi"), (0.25, GI)),
        (pod("p"), (0.0, 0.0)),  # best effort and no annotation: nothing
        (pod("p", cpu="1", cpu_usage="lots"), (0.6, 0.0)),  # a malformed annotation falls back to requests
    ],
)
def test_usage_model(obj: Obj, expected: tuple[float, float]) -> None:
    cpu, memory = UsageModel(0.6).pod_usage(obj)
    assert cpu == pytest.approx(expected[0]) and memory == pytest.approx(expected[1])


def test_pod_requests_counts_limits_only_containers_and_overhead() -> None:
    obj = {
        "spec": {
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}}},
                {"name": "b", "resources": {"requests": {"cpu": "250m"}, "limits": {"cpu": "1"}}},
            ],
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "8"}}}],
            "overhead": {"cpu": "100m", "memory": "64Mi"},
        }
    }
    assert pod_requests(obj) == pytest.approx((0.85, GI + 64 * 2**20))


def test_usage_model_rejects_a_negative_share() -> None:
    with pytest.raises(ValueError, match="share"):
        UsageModel(-0.1)


# -- counters follow the pods (fake clock) -----------------------------------------------------------------


@pytest.fixture
async def sim() -> AsyncIterator[tuple[ClusterApi, NodeMetrics, FakeClock]]:
    api = ClusterApi()
    api.bootstrap()
    kubelets = SimulatedKubelets(api, heartbeat_interval=3600.0, tick=0.01)
    clock = FakeClock()
    metrics = NodeMetrics(api, clock=clock)
    kubelets.register_nodes(["n0", "n1"], NodeShape(cpu="4", memory="8Gi"))
    kubelets.start()
    metrics.start()
    yield api, metrics, clock
    await kubelets.stop()


async def until(check: Any, timeout: float = 2.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if check():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


async def test_counters_integrate_the_usage_of_running_pods(
    sim: tuple[ClusterApi, NodeMetrics, FakeClock],
) -> None:
    api, metrics, clock = sim
    pods = api.rtype("", "v1", "pods")
    before = cpu_totals("".join(metrics.render()), "n0")
    clock.now += 10  # an idle node: all 4 cores idle
    idle = cpu_totals("".join(metrics.render()), "n0")
    assert idle["idle"] - before["idle"] == pytest.approx(40.0)
    assert idle["user"] == pytest.approx(before["user"]) and idle["system"] == pytest.approx(before["system"])

    api.create(pods, pod("busy", cpu="1", cpu_usage="1500m", memory_usage="2Gi"), "default")
    api.bind("default", "busy", {"metadata": {"name": "busy"}, "target": {"kind": "Node", "name": "n0"}})
    await until(lambda: metrics.usage("n0") != (0.0, 0.0))  # the kubelet starts it, then it counts
    assert metrics.usage("n0") == (1.5, 2 * GI)
    start = cpu_totals("".join(metrics.render()), "n0")
    clock.now += 20
    text = "".join(metrics.render())
    end = cpu_totals(text, "n0")
    assert end["user"] - start["user"] == pytest.approx(1.5 * 0.8 * 20)
    assert end["system"] - start["system"] == pytest.approx(1.5 * 0.2 * 20)
    assert end["idle"] - start["idle"] == pytest.approx(2.5 * 20)
    assert sum(end.values()) - sum(start.values()) == pytest.approx(4 * 20)  # cores x seconds
    values = series(text)
    assert values[("node_memory_MemTotal_bytes", "n0", "", "")] == 8 * GI
    assert values[("node_memory_MemAvailable_bytes", "n0", "", "")] == 6 * GI
    assert values[("node_memory_MemAvailable_bytes", "n1", "", "")] == 8 * GI
    # every core carries the same share: crane's avg by (instance) sees the node's busy fraction
    idles = {v for (name, n, _c, mode), v in values.items() if n == "n0" and mode == "idle"}
    assert len(idles) == 1

    api.delete(pods, "default", "busy", {"gracePeriodSeconds": 0})
    await until(lambda: metrics.usage("n0") == (0.0, 0.0))
    after = cpu_totals("".join(metrics.render()), "n0")
    clock.now += 5
    later = cpu_totals("".join(metrics.render()), "n0")
    assert later["idle"] - after["idle"] == pytest.approx(20.0)
    assert later["user"] == pytest.approx(after["user"])


async def test_requests_share_node_base_load_and_saturation(
    sim: tuple[ClusterApi, NodeMetrics, FakeClock],
) -> None:
    api, metrics, clock = sim
    pods, nodes = api.rtype("", "v1", "pods"), api.rtype("", "v1", "nodes")
    api.patch(
        nodes,
        None,
        "n1",
        {"metadata": {"annotations": {CPU_USAGE_ANNOTATION: "500m"}}},
        "application/merge-patch+json",
    )
    assert metrics.usage("n1") == (0.5, 0.0)
    api.create(pods, pod("a", node="n1", cpu="2", memory="1Gi"), "default")
    await until(lambda: metrics.usage("n1")[0] > 0.5)
    assert metrics.usage("n1") == pytest.approx((0.5 + 1.2, 0.6 * GI))
    # more than the node has: busy is capped at its cores, idle stops
    api.create(pods, pod("b", node="n1", cpu_usage="10"), "default")
    await until(lambda: metrics.usage("n1")[0] == 4.0)
    start = cpu_totals("".join(metrics.render(["n1"])), "n1")
    clock.now += 10
    end = cpu_totals("".join(metrics.render(["n1"])), "n1")
    assert end["idle"] == pytest.approx(start["idle"])
    assert end["user"] - start["user"] == pytest.approx(32.0)


def test_exposition_labels_and_cpu_series_modes() -> None:
    api = ClusterApi()
    api.bootstrap()
    SimulatedKubelets(api).register_nodes(["n0"], NodeShape(cpu="8"))
    per_core, one = NodeMetrics(api), NodeMetrics(api, cpu_series="one")
    per_core.start()
    one.start()
    families = {f.name: f for f in parse_text("".join(per_core.render()))}
    cpu = families["node_cpu_seconds"]
    assert cpu.type == "counter"
    assert {s.labels["cpu"] for s in cpu.samples} == {str(i) for i in range(8)}
    assert {s.labels["mode"] for s in cpu.samples} == {"idle", "user", "system"}
    ip = per_core.instance("n0").rsplit(":", 1)[0]
    assert all(s.labels["instance"] == f"{ip}:9100" and s.labels["node"] == "n0" for s in cpu.samples)
    samples = [
        s for f in parse_text("".join(one.render())) if f.name == "node_cpu_seconds" for s in f.samples
    ]
    assert len(samples) == 3 and {s.labels["cpu"] for s in samples} == {"0"}
    # the averaged core: per-core values equal the node total / cores
    idle_one = next(s.value for s in samples if s.labels["mode"] == "idle")
    assert idle_one == pytest.approx(INITIAL_UPTIME * 0.5)


# -- the local cluster's endpoint (real time) ---------------------------------------------------------------


async def test_local_cluster_serves_metrics_that_follow_a_bound_pod(tmp_path: Path) -> None:
    options = ClusterOptions(
        port=0,
        insecure_http=True,
        data_dir=tmp_path,
        nodes=2,
        heartbeat_interval=3600.0,
        node_shape=NodeShape(cpu="4", memory="8Gi"),
        node_metrics_port=0,
        node_usage_share=0.5,
    )
    async with LocalCluster(options) as cluster, aiohttp.ClientSession() as http:
        assert cluster.node_metrics is not None and cluster.node_metrics_url.startswith("http://127.0.0.1:")
        api = cluster.api
        api.create(api.rtype("", "v1", "pods"), pod("p", cpu="2", memory="2Gi", cpu_usage="3"), "default")
        api.bind("default", "p", {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "node-0"}})
        await until(lambda: cluster.node_metrics.usage("node-0")[0] == 3.0)
        loop = asyncio.get_running_loop()

        async def scrape() -> tuple[float, str]:
            async with http.get(cluster.node_metrics_url) as resp:
                assert resp.status == 200 and resp.content_type == "text/plain"
                return loop.time(), await resp.text()

        t0, first = await scrape()
        await asyncio.sleep(0.5)
        t1, second = await scrape()
        a, b = cpu_totals(first, "node-0"), cpu_totals(second, "node-0")
        busy_rate = (b["user"] + b["system"] - a["user"] - a["system"]) / (t1 - t0)
        assert busy_rate == pytest.approx(3.0, rel=0.15)
        assert (
            series(second)[("node_memory_MemAvailable_bytes", "node-0", "", "")] == 7 * GI
        )  # 8Gi - 0.5 x 2Gi
        async with http.get(cluster.node_metrics_url, params={"node": "node-1"}) as resp:
            only = series(await resp.text())
        assert {k[1] for k in only} == {"node-1"}


# -- history for backfills ----------------------------------------------------------------------------------


@pytest.fixture
def idle_metrics() -> Iterator[NodeMetrics]:
    api = ClusterApi()
    api.bootstrap()
    SimulatedKubelets(api).register_nodes(["n0", "n1"], NodeShape(cpu="4", memory="8Gi"))
    metrics = NodeMetrics(api)
    metrics.start()
    yield metrics


def test_history_ends_at_the_live_counters_and_follows_the_profile(idle_metrics: NodeMetrics) -> None:
    end = 1_800_000_000.0

    def profile(node: str, t: float) -> tuple[float, float]:
        return (6.0, 2 * GI) if node == "n0" and t > end - 600 else (1.0, GI)  # n0 saturated for 10 min

    histories = {h.name: h for h in idle_metrics.history(end - 3600, end, 60, profile)}
    h = histories["n0"]
    assert len(h.times) == 61 and h.times[0] == end - 3600 and h.times[-1] == end
    assert h.cpu_used.max() == 4.0  # capped at the node's cores
    # counters grow by the profile's rates over each step, and never decrease
    steps = np.diff(h.counters, axis=0)
    assert (steps >= 0).all()
    assert steps[0] == pytest.approx([3 * 60, 0.8 * 60, 0.2 * 60])
    assert steps[-1] == pytest.approx([0.0, 0.8 * 4 * 60, 0.2 * 4 * 60])
    assert h.counters.sum(axis=1)[-1] - h.counters.sum(axis=1)[0] == pytest.approx(4 * 3600)
    with pytest.raises(ValueError):
        idle_metrics.history(end, end - 1, 60)


def test_history_without_profile_is_the_current_load(idle_metrics: NodeMetrics) -> None:
    [h0, _] = idle_metrics.history(1000.0, 1300.0, 100)
    assert h0.cpu_used.tolist() == [0.0] * 4 and h0.memory_used.tolist() == [0.0] * 4


def test_openmetrics_output_parses(idle_metrics: NodeMetrics) -> None:
    out = io.StringIO()
    write_openmetrics(idle_metrics.history(1000.0, 1120.0, 60), out, extra_labels={"job": "node-exporter"})
    out.write("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(out.getvalue())}
    cpu = families["node_cpu_seconds"]
    assert len(cpu.samples) == 2 * 4 * 3 * 3  # nodes x cores x modes x times
    assert {float(s.timestamp) for s in cpu.samples} == {1000.0, 1060.0, 1120.0}
    assert all(s.labels["job"] == "node-exporter" for s in cpu.samples)
    mem = families["node_memory_MemAvailable_bytes"]
    assert {s.value for s in mem.samples} == {8.0 * GI}
    assert not any(math.isnan(s.value) for f in families.values() for s in f.samples)
