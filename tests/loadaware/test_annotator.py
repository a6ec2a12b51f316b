"""The annotator against a real local cluster and a fake Prometheus: one PATCH per node per sync carrying every
due metric, no PATCH when nothing changed and the values stay fresh, crane's timestamp format (or RFC 3339),
the hot value from ``Scheduled`` events, leader election gating, /healthz, and the command line."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from test_poller import (  # the fake Prometheus and the cluster fixtures are shared with the poller tests
    CPU1H,
    CPU5,
    MEM5,
    FakePrometheus,
    client,
    cluster,
    eventually,
    node_ips,
    prom,
    querier,
    scheduled_event,
)

from kubesched import cli as kubesched_cli
from kubesched.client.leaderelection import LeaderElector
from kubesched.client.rest import ApiClient
from kubesched.cluster.local import LocalCluster
from kubesched.loadaware import cli as annotator_cli
from kubesched.loadaware.annotations import HOT_VALUE_KEY, parse_annotation, time_zone
from kubesched.loadaware.annotator import Annotator, HealthServer, run_annotator
from kubesched.loadaware.policy import parse_policy
from kubesched.loadaware.poller import LoadQuerier, VectorQuerier

__all__ = ["client", "cluster", "prom", "querier"]  # fixtures, imported for pytest

SHANGHAI = time_zone("Asia/Shanghai")
POLICY_TEXT = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
    - {name: cpu_usage_avg_5m, period: 3m}
    - {name: mem_usage_avg_5m, period: 3m}
    - {name: cpu_usage_max_avg_1h, period: 15m}
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}]
  priority: [{name: cpu_usage_avg_5m, weight: 1}]
  hotValue: [{timeRange: 5m, count: 5}, {timeRange: 1m, count: 2}]
"""
POLICY = parse_policy(POLICY_TEXT)


class Clock:
    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now


class AnnotationWrites:
    """Node writes that changed annotations, seen by the cluster's store (so every PATCH that landed)."""

    def __init__(self, cluster: LocalCluster) -> None:
        self.nodes: list[str] = []
        self.changed: list[set[str]] = []
        cluster.api.observers.append(self._observe)

    def _observe(self, rtype: Any, etype: str, new: Any, old: Any) -> None:
        if rtype.plural != "nodes" or etype != "MODIFIED" or not new or not old:
            return
        before = old["metadata"].get("annotations") or {}
        after = new["metadata"].get("annotations") or {}
        if before != after:
            self.nodes.append(new["metadata"]["name"])
            self.changed.append({k for k in after if after[k] != before.get(k)})

    def take(self) -> list[str]:
        out, self.nodes, self.changed = sorted(self.nodes), [], []
        return out


def annotations(cluster: LocalCluster, name: str) -> dict[str, str]:
    node = cluster.api.get(cluster.api.rtype("", "v1", "nodes"), None, name).obj
    return dict(node["metadata"].get("annotations") or {})


def seed(prom: FakePrometheus, cluster: LocalCluster) -> None:
    """n0 by ip:port, n1 by bare ip, n2 by node name (crane's three ways)."""
    ips = node_ips(cluster)
    n0, n1, n2 = cluster.node_names
    for metric, base in ((CPU5, 40), (MEM5, 50), (CPU1H, 60)):
        prom.set(metric, base, instance=f"{ips[n0]}:9100")
        prom.set(metric, base + 1, instance=ips[n1])
        prom.set(metric, base + 2, instance=n2)


@pytest.fixture
async def make_annotator(client: ApiClient, querier: VectorQuerier) -> AsyncIterator[Callable[..., Any]]:
    made: list[Annotator] = []

    async def make(**kw: Any) -> Annotator:
        kw.setdefault("zone", SHANGHAI)
        ann = Annotator(client, LoadQuerier(querier), kw.pop("policy", POLICY), **kw)
        ann.start_informers()
        assert await ann.wait_for_sync(5)
        made.append(ann)
        return ann

    yield make
    for ann in made:
        await ann.stop()


async def settled(ann: Annotator, cluster: LocalCluster) -> None:
    """Wait until the annotator's node informer sees what the store holds (its own writes included)."""

    def same() -> bool:
        return all(
            (ann.nodes.get(n) or {}).get("metadata", {}).get("annotations") == annotations(cluster, n)
            for n in cluster.node_names
        )

    await eventually(same)


async def test_one_patch_per_node_carries_every_due_metric_in_cranes_format(
    cluster: LocalCluster, prom: FakePrometheus, make_annotator: Callable[..., Any]
) -> None:
    seed(prom, cluster)
    writes = AnnotationWrites(cluster)
    clock = Clock()
    ann = await make_annotator(clock=clock)
    report = await ann.sync([CPU5, MEM5, CPU1H])
    assert (report.patched, report.unchanged, report.failed_patches) == (3, 0, 0)
    assert ann.patches == 3
    assert writes.take() == sorted(cluster.node_names)  # one write per node, not one per metric
    assert len(prom.queries) == 3  # one query per metric for all nodes
    n0, n1, n2 = cluster.node_names
    for name, offset in ((n0, 0), (n1, 1), (n2, 2)):
        ann_of = annotations(cluster, name)
        for metric, base in ((CPU5, 40), (MEM5, 50), (CPU1H, 60)):
            text = ann_of[metric]
            assert text.endswith("Z") and text.startswith(f"{(base + offset) / 100:.5f},")
            sample = parse_annotation(text, SHANGHAI)
            assert sample.timestamp == clock.now
        assert HOT_VALUE_KEY not in ann_of  # hot value 0: a missing annotation already reads as 0


async def test_no_patch_while_values_are_unchanged_and_fresh_then_only_what_changed(
    cluster: LocalCluster, prom: FakePrometheus, make_annotator: Callable[..., Any]
) -> None:
    seed(prom, cluster)
    clock = Clock()
    t0 = clock.now
    ann = await make_annotator(clock=clock)
    await ann.sync([CPU5, MEM5, CPU1H])
    await settled(ann, cluster)
    writes = AnnotationWrites(cluster)
    n0, n1, _ = cluster.node_names
    before = annotations(cluster, n1)

    clock.now = t0 + 180  # the next 3m tick: values unchanged, stamps fresh until t0+480 > t0+360+60
    report = await ann.sync([CPU5, MEM5])
    assert (report.patched, report.unchanged) == (0, 3) and writes.take() == []

    prom.set(CPU5, 77, instance=node_ips(cluster)[n1])
    report = await ann.sync([CPU5, MEM5])
    assert report.patched == 1 and writes.nodes == [n1] and writes.changed == [{CPU5}]
    writes.take()
    after = annotations(cluster, n1)
    assert after[CPU5].startswith("0.77000,") and after[MEM5] == before[MEM5]
    await settled(ann, cluster)

    clock.now = t0 + 360  # stamps from t0 would expire (t0+480) before the next tick + margin: rewrite
    report = await ann.sync([CPU5, MEM5])
    assert report.patched == 3
    assert writes.take() == sorted(cluster.node_names)
    assert parse_annotation(annotations(cluster, n0)[MEM5], SHANGHAI).timestamp == t0 + 360
    assert parse_annotation(annotations(cluster, n0)[CPU1H], SHANGHAI).timestamp == t0  # not due, kept


async def test_rfc3339_mode_rewrites_crane_stamps_and_reads_its_own(
    cluster: LocalCluster, prom: FakePrometheus, make_annotator: Callable[..., Any]
) -> None:
    seed(prom, cluster)
    clock = Clock()
    crane_ann = await make_annotator(clock=clock)
    await crane_ann.sync([CPU5])
    utc_ann = await make_annotator(clock=clock, zone=None)
    await settled(utc_ann, cluster)
    report = await utc_ann.sync([CPU5])
    assert report.patched == 3  # same values, but crane's local-time stamps are not what this one writes
    text = annotations(cluster, cluster.node_names[0])[CPU5]
    assert text.endswith("+00:00") and parse_annotation(text, SHANGHAI).timestamp == clock.now
    await settled(utc_ann, cluster)
    assert (await utc_ann.sync([CPU5])).patched == 0


async def test_hot_value_from_scheduled_events_travels_in_the_same_patch(
    cluster: LocalCluster, client: ApiClient, prom: FakePrometheus, make_annotator: Callable[..., Any]
) -> None:
    seed(prom, cluster)
    clock = Clock()
    n0, n1, _ = cluster.node_names
    ann = await make_annotator(clock=clock)
    for i in range(5):
        await client.create(
            "v1", "events", scheduled_event(f"e{i}", f"p{i}", n0, clock.now - 5), namespace="default"
        )
    await client.create(
        "v1", "events", scheduled_event("pull", "p9", n1, clock.now, reason="Pulled"), namespace="default"
    )
    await eventually(lambda: ann.hot_values.count(n0, 300, clock.now) == 5)
    writes = AnnotationWrites(cluster)
    await ann.sync([CPU5])
    assert writes.take() == sorted(cluster.node_names)
    hot = annotations(cluster, n0)[HOT_VALUE_KEY]
    assert hot == f"3,{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime(clock.now + 8 * 3600))}"  # 5//5 + 5//2
    assert HOT_VALUE_KEY not in annotations(cluster, n1)
    await settled(ann, cluster)

    clock.now += 61  # the 1m window empties: 5//5 + 0//2 = 1; the CPU value itself is unchanged
    await ann.sync([CPU5])
    assert writes.nodes == [n0] and writes.changed == [{HOT_VALUE_KEY}]
    writes.take()
    assert annotations(cluster, n0)[HOT_VALUE_KEY].startswith("1,")
    await settled(ann, cluster)

    ann.hot_values.clear()  # hot value 0 while a fresh 1 is written: overwrite it
    await ann.sync([CPU5])
    assert writes.take() == [n0] and annotations(cluster, n0)[HOT_VALUE_KEY].startswith("0,")


async def test_a_failing_metric_is_reported_and_the_others_are_still_written(
    cluster: LocalCluster, prom: FakePrometheus, make_annotator: Callable[..., Any]
) -> None:
    seed(prom, cluster)
    prom.failing.add(MEM5)
    writes = AnnotationWrites(cluster)
    ann = await make_annotator(clock=Clock())
    report = await ann.sync([CPU5, MEM5])
    assert report.failed_metrics == {MEM5} and report.patched == 3
    assert all(c == {CPU5} for c in writes.changed) and len(writes.changed) == 3
    prom.failing.add(CPU5)
    report = await ann.sync([CPU5, MEM5])
    assert report.failed_metrics == {CPU5, MEM5} and report.patched == 0


FAST_POLICY = parse_policy(POLICY_TEXT.replace("period: 3m}", "period: 100ms}"))


def elector(client: ApiClient, identity: str) -> LeaderElector:
    return LeaderElector(
        client,
        namespace="kube-system",
        name="crane-scheduler-controller",
        identity=identity,
        lease_duration=2.0,
        renew_deadline=1.5,
        retry_period=0.1,
        release_on_cancel=True,
    )


async def test_only_the_leader_writes_and_the_other_takes_over_when_it_leaves(
    cluster: LocalCluster, client: ApiClient, prom: FakePrometheus, make_annotator: Callable[..., Any]
) -> None:
    seed(prom, cluster)
    first = await make_annotator(policy=FAST_POLICY)
    first_elector = elector(client, "first")
    first_task = asyncio.create_task(run_annotator(first, first_elector))
    await eventually(lambda: first_elector.is_leader)
    second = await make_annotator(policy=FAST_POLICY)
    second_elector = elector(client, "second")
    second_task = asyncio.create_task(run_annotator(second, second_elector))
    try:
        await eventually(lambda: first.patches >= 3)
        await asyncio.sleep(0.5)  # several 100ms rounds
        assert second_elector.leader == "first" and not second_elector.is_leader
        assert second.patches == 0

        first_task.cancel()  # the leader leaves and releases the lease
        await asyncio.gather(first_task, return_exceptions=True)
        await eventually(lambda: second_elector.is_leader)
        n0 = cluster.node_names[0]
        prom.set(CPU5, 99, instance=f"{node_ips(cluster)[n0]}:9100")
        await eventually(lambda: annotations(cluster, n0)[CPU5].startswith("0.99000,"))
        assert second.patches >= 1
    finally:
        second_task.cancel()
        await asyncio.gather(first_task, second_task, return_exceptions=True)


class StaleElector:
    def __init__(self, healthy: bool) -> None:
        self.healthy = healthy

    def check(self, tolerance: float) -> bool:
        return self.healthy


async def test_healthz_is_ok_and_fails_when_the_lease_is_not_renewed() -> None:
    stale = StaleElector(True)
    server = HealthServer("127.0.0.1", 0, elector=stale, insecure=True)  # type: ignore[arg-type]
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            url = f"http://127.0.0.1:{server.port}/healthz"
            async with session.get(url) as resp:
                assert (resp.status, await resp.text()) == (200, "ok")
            stale.healthy = False
            async with session.get(url) as resp:
                assert resp.status == 500 and "leaderElection" in await resp.text()
    finally:
        await server.stop()


# --- the command line ---------------------------------------------------------------------------------------


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    annotator_cli.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_annotator_is_a_kubesched_subcommand_with_cranes_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        kubesched_cli.main(["annotator", "--help"])
    assert exit_info.value.code == 0
    out = capsys.readouterr().out
    for flag in (
        "--policy-config-path",
        "--prometheus-address",
        "--kubeconfig",
        "--leader-elect-lease-duration",
        "--health-port",
        "--cluster-name",
        "--timestamp-format",
        "--prometheus-bearer-token-file",
    ):
        assert flag in out
    args = parse("--prometheus-address", "http://p:9090")
    assert (
        args.policy_config_path,
        args.leader_elect,
        args.leader_elect_resource_name,
        args.health_port,
    ) == (None, True, "crane-scheduler-controller", 8090)


def test_bad_setups_exit_1_naming_the_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_TEXT)
    missing = str(tmp_path / "nope.yaml")
    cases = [
        (["--policy-config-path", missing], "nope.yaml"),
        (["--policy-config-path", str(policy), "--instance-match", "bogus"], "instanceMatch"),
        (["--policy-config-path", str(policy), "--time-zone", "Mars/Olympus"], "Mars/Olympus"),
        (["--policy-config-path", str(policy), "--leader-elect-renew-deadline", "20s"], "lease duration"),
        (["--policy-config-path", str(policy), "--insecure-http"], "loopback"),
    ]
    for argv, expected in cases:
        code = kubesched_cli.main(
            ["annotator", "--prometheus-address", "http://p:9090", "--master", "http://127.0.0.1:1", *argv]
        )
        assert code == 1
        assert expected in capsys.readouterr().err


async def test_serve_annotates_with_leader_election_and_stops_cleanly(
    cluster: LocalCluster, prom: FakePrometheus, tmp_path: Path
) -> None:
    seed(prom, cluster)
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY_TEXT)
    args = parse(
        "--prometheus-address",
        prom.url,
        "--policy-config-path",
        str(policy),
        "--master",
        cluster.url,
        "--leader-elect-resource-namespace",
        "kube-system",
        "--health-port",
        "0",
        "--timestamp-format",
        "rfc3339",
    )
    prepared = annotator_cli.setup(args)
    stop = asyncio.Event()
    task = asyncio.create_task(annotator_cli.serve(args, prepared, stop))
    n2 = cluster.node_names[2]
    await eventually(lambda: CPU1H in annotations(cluster, n2))
    assert annotations(cluster, n2)[CPU1H].startswith("0.62000,") and annotations(cluster, n2)[
        CPU1H
    ].endswith("+00:00")
    lease = cluster.api.get(
        cluster.api.rtype("coordination.k8s.io", "v1", "leases"), "kube-system", "crane-scheduler-controller"
    ).obj
    assert lease["spec"]["holderIdentity"]
    stop.set()
    assert await asyncio.wait_for(task, 5) == 0
