"""Load-aware scheduling end to end: ``kubesched cluster up`` serving node-exporter metrics, a real Prometheus
recording crane's rules from them, the load reaching a ``kubesched scheduler`` process running crane's Dynamic
profile (annotator mode: ``kubesched annotator`` writes node annotations; direct mode: the scheduler polls
Prometheus), and the default vs load-aware comparison at a tiny size.

node-0 is made busy through the usage annotation of a pod running on it (3.5 of 4 cores), so its
``cpu_usage_avg_5m`` is 0.875, above crane's 0.65 limit. Skipped when ``prometheus``/``promtool`` are missing
(``scripts/ensure-prometheus.sh`` installs them).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from clusterproc import ClusterProcess, SchedulerProcess, start_cluster, start_scheduler

from kubesched.bench.loadcompare import LIMIT, Workload, compare
from kubesched.client.config import load_config
from kubesched.client.rest import ApiClient
from kubesched.cluster.nodemetrics import CPU_USAGE_ANNOTATION
from kubesched.loadaware.annotations import HOT_VALUE_KEY
from kubesched.loadaware.policy import DEFAULT_POLICY_DOCUMENT
from kubesched.loadaware.prometheus import INSTALL_HINT, PrometheusServer, installed
from kubesched.loadaware.rules import LOAD_METRICS

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not installed(), reason=INSTALL_HINT)]

NS = "default"
SCHEDULER = "load-aware"
BUSY = "node-0"
TOO_HIGH = f"Load[cpu_usage_avg_5m] of node[{BUSY}] is too high"
T = TypeVar("T")


async def until(what: str, probe: Callable[[], Awaitable[T]], timeout: float = 30.0, every: float = 0.2) -> T:
    """Await ``probe`` until it returns something truthy, for up to four times ``timeout``: a passing wait returns
    at once, and the slack spares a loaded machine (CI runs two test workers on two cores) a false failure."""
    timeout *= 4
    deadline = time.monotonic() + timeout
    while True:
        value = await probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {value!r})")
        await asyncio.sleep(every)


def pod(
    name: str, *, node: str | None = None, usage: str | None = None, pin: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    else:
        spec["schedulerName"] = SCHEDULER
    if pin:
        spec["nodeSelector"] = {"kubernetes.io/hostname": pin}
    meta: dict[str, Any] = {"name": name, "namespace": NS}
    if usage:
        meta["annotations"] = {CPU_USAGE_ANNOTATION: usage}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def write_policy(path: Path) -> Path:
    """crane's default policy with every sync period at 2 s, so values refresh while the test runs."""
    doc = json.loads(json.dumps(DEFAULT_POLICY_DOCUMENT))
    for entry in doc["spec"]["syncPolicy"]:
        entry["period"] = "2s"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def write_scheduler_config(path: Path, dynamic_args: dict[str, Any]) -> Path:
    """The founding document's profile (v1beta2, Dynamic score weight 3 and postBind, its pluginConfig shape),
    with Dynamic's filter enabled as crane's own manifests do; leader election off for the test."""
    config = {
        "apiVersion": "kubescheduler.config.k8s.io/v1beta2",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": SCHEDULER,
                "plugins": {
                    "filter": {"enabled": [{"name": "Dynamic"}]},
                    "score": {"enabled": [{"name": "Dynamic", "weight": 3}]},
                    "postBind": {"enabled": [{"name": "Dynamic"}]},
                },
                "pluginConfig": [{"name": "Dynamic", "args": dynamic_args}],
            }
        ],
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


@dataclass
class Stack:
    cluster: ClusterProcess
    client: ApiClient
    prom: PrometheusServer
    tmp: Path

    async def node(self, name: str) -> dict[str, Any]:
        return await self.client.get("v1", "nodes", name)

    async def pods(self) -> dict[str, dict[str, Any]]:
        listed = await self.client.list("v1", "pods", namespace=NS)
        return {p["metadata"]["name"]: p for p in listed["items"]}

    async def failed_scheduling(self, name: str) -> list[str]:
        events = await self.client.list(
            "v1", "events", namespace=NS, field_selector="reason=FailedScheduling"
        )
        return [e["message"] for e in events["items"] if e["involvedObject"]["name"] == name]


@pytest.fixture
async def stack(tmp_path: Path) -> AsyncIterator[Stack]:
    """3 nodes of 4 cores; node-0 runs a pod using 3.5 cores; Prometheus (1 s scrapes and rules) has crane's
    six load metrics for every node."""
    cluster = start_cluster(
        tmp_path / "cluster",
        "--nodes",
        "3",
        "--node-cpu",
        "4",
        "--node-memory",
        "8Gi",
        "--node-metrics-port",
        "0",
        "--node-metrics-cpu-series",
        "one",
    )
    metrics_url = next(
        line.split("node metrics ", 1)[1].strip() for line in cluster.output if "node metrics " in line
    )
    client = ApiClient(load_config(str(cluster.kubeconfig)))
    prom = PrometheusServer([metrics_url], scrape_interval=1.0, workdir=tmp_path / "prometheus")
    try:
        await client.create("v1", "pods", pod("busy", node=BUSY, usage="3500m"), namespace=NS)

        async def running() -> bool:
            p = await client.get("v1", "pods", "busy", namespace=NS)
            return (p.get("status") or {}).get("phase") == "Running"

        await until("the busy pod to run", running)
        await prom.start()
        for metric in LOAD_METRICS:
            await prom.wait_for(metric, count=3, timeout=30)
        yield Stack(cluster, client, prom, tmp_path)
    finally:
        await prom.stop()
        await client.close()
        assert cluster.stop() == 0, "\n".join(cluster.output[-30:])


async def probe_until_filtered(stack: Stack) -> list[str]:
    """A pod that only fits on the busy node, recreated until its FailedScheduling names Dynamic's reason: the
    scheduler then has the load (from annotations, or from its first Prometheus poll in direct mode). Before
    that, the probe fails for another reason or is bound to node-0 (no load known yet passes the filter)."""
    for attempt in range(40):
        name = f"pinned-{attempt}"
        await stack.client.create("v1", "pods", pod(name, pin=BUSY), namespace=NS)

        async def outcome(name: str = name) -> list[str] | str:
            bound = ((await stack.pods())[name].get("spec") or {}).get("nodeName")
            return bound or await stack.failed_scheduling(name)

        result = await until(f"{name} to be bound or to fail", outcome, timeout=15)
        if isinstance(result, list) and any(TOO_HIGH in m for m in result):
            return result
        await stack.client.delete("v1", "pods", name, namespace=NS, grace_period_seconds=0)
        await asyncio.sleep(0.5)
    raise AssertionError("the scheduler never reported node-0 as too loaded")


async def schedule_and_check(stack: Stack, sched: SchedulerProcess) -> dict[str, str]:
    """Four pods for the load-aware profile: all placed, none on the busy node, and the decision log shows
    node-0 filtered out with crane's reason."""
    names = [f"web-{i}" for i in range(4)]
    for name in names:
        await stack.client.create("v1", "pods", pod(name), namespace=NS)

    async def placed() -> dict[str, str] | None:
        pods = await stack.pods()
        nodes = {n: (pods.get(n, {}).get("spec") or {}).get("nodeName") for n in names}
        return nodes if all(nodes.values()) else None

    nodes: dict[str, str] = await until("the pods to be bound", placed)
    assert BUSY not in nodes.values(), nodes
    status, body = sched.get("/debug/decisions")
    assert status == 200
    decisions = {d["pod"]: d for d in json.loads(body)["decisions"]}
    for name in names:
        d = decisions[f"{NS}/{name}"]
        assert d["node"] == nodes[name]
        assert d["filtered"] == {BUSY: [TOO_HIGH]}
        assert set(d["scores"]) == {"node-1", "node-2"} and all("Dynamic" in s for s in d["scores"].values())
    return nodes


async def test_annotator_mode_keeps_pods_off_the_busy_node(stack: Stack) -> None:
    policy = write_policy(stack.tmp / "policy.yaml")
    annotator = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesched.cli",
            "annotator",
            "--policy-config-path",
            str(policy),
            "--prometheus-address",
            stack.prom.url,
            "--kubeconfig",
            str(stack.cluster.kubeconfig),
            "--leader-elect=false",
            "--health-port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    sched = None
    try:

        async def annotated() -> dict[str, str] | None:
            found = {
                n: (await stack.node(n))["metadata"].get("annotations") or {} for n in ("node-0", "node-1")
            }
            return found if all(set(LOAD_METRICS) <= set(a) for a in found.values()) else None

        annotations = await until("the annotator to write every metric", annotated)
        value, _, stamp = annotations[BUSY]["cpu_usage_avg_5m"].partition(",")
        assert float(value) == pytest.approx(0.875, abs=0.02) and stamp.endswith("Z")  # crane's format
        assert float(annotations["node-1"]["cpu_usage_avg_5m"].split(",")[0]) < 0.05

        config = write_scheduler_config(
            stack.tmp / "scheduler.yaml",
            {
                "promeAddr": stack.prom.url,  # the founding document's args; annotation mode reads annotations
                "metricsUpdatePeriodBySeconds": "5m",
                "policyConfigPath": str(policy),
            },
        )
        sched = start_scheduler(stack.cluster.kubeconfig, "--config", str(config), "--explain")
        messages = await probe_until_filtered(stack)
        assert any(m.startswith("0/3 nodes are available: ") and f"1 {TOO_HIGH}" in m for m in messages), (
            messages
        )
        await schedule_and_check(stack, sched)

        # The annotator counts the bindings (Scheduled events) for crane's hot value: two within a minute on a
        # node make 1, written as node_hot_value at its next sync.
        async def hot_value() -> list[str]:
            found = [
                (await stack.node(n))["metadata"]["annotations"].get(HOT_VALUE_KEY)
                for n in ("node-1", "node-2")
            ]
            return [v for v in found if v and float(v.split(",")[0]) >= 1]

        await until("node_hot_value to be written", hot_value, timeout=15)
    finally:
        if sched is not None:
            sched.stop()
        annotator.terminate()
        out, _ = annotator.communicate(timeout=10)
    assert annotator.returncode == 0, out


async def test_direct_mode_reads_prometheus_without_touching_nodes(stack: Stack) -> None:
    policy = write_policy(stack.tmp / "policy.yaml")
    config = write_scheduler_config(
        stack.tmp / "scheduler.yaml",
        {
            "loadSource": "prometheus",
            "promeAddr": stack.prom.url,
            "metricsUpdatePeriodBySeconds": 1,
            "policyConfigPath": str(policy),
        },
    )
    before = {n: (await stack.node(n))["metadata"]["resourceVersion"] for n in ("node-0", "node-1", "node-2")}
    sched = start_scheduler(stack.cluster.kubeconfig, "--config", str(config), "--explain")
    try:
        await probe_until_filtered(stack)
        await schedule_and_check(stack, sched)
        # How Prometheus is doing shows on the scheduler's own /metrics (read as the admin: it is guarded).
        status, text = sched.get("/metrics")
        assert status == 200
        assert "kubesched_dynamic_last_successful_query_timestamp_seconds{" in text
        assert "# TYPE kubesched_dynamic_prometheus_query_failures_total counter" in text
    finally:
        sched.stop()
    load_keys = {*LOAD_METRICS, HOT_VALUE_KEY}
    for name, version in before.items():
        node = await stack.node(name)
        assert not load_keys & set(node["metadata"].get("annotations") or {}), node["metadata"]["annotations"]
        assert node["metadata"]["resourceVersion"] == version  # no PATCH (nor any write) to the node


async def test_load_aware_profile_places_no_worse_than_the_default(tmp_path: Path) -> None:
    """The comparison experiment at a tiny size: 4 nodes, 2 of them hot (1 already above the limit)."""
    workload = Workload().sized(nodes=4, new_pods=4, hot_nodes=2)
    assert (workload.hot_nodes, workload.overloaded_nodes) == (2, 1)
    default, crane_weight, higher = await compare(workload, (3, 5), workdir=tmp_path)
    assert [r.variant for r in (default, crane_weight, higher)] == ["default", "dynamic-w3", "dynamic-w5"]
    for r in (default, crane_weight, higher):
        assert all(r.placements.values()), r.placements
        assert r.above(r.usage_before) == 1 and len(r.usage_after) == 4
    noise = 0.005  # irate of counters sampled by real scrapes
    for r in (crane_weight, higher):
        assert r.busiest[1] <= default.busiest[1] + noise, (r.summary(), default.summary())
        assert r.above(r.usage_after) <= default.above(default.usage_after)
    # The default profile puts new pods on the overloaded node (it requests little); Dynamic filters it out.
    assert default.busiest[1] > 0.7 + noise and higher.busiest[1] < default.busiest[1]
    assert (
        default.pods_on("overloaded") > 0
        and crane_weight.pods_on("overloaded") == higher.pods_on("overloaded") == 0
    )
    assert LIMIT == 0.65
