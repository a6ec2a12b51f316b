"""``kubesched bench``: the placement check catches bad placements, throughput is sampled as scheduler_perf does,
and every workload runs (tiny) in both modes with its check passing. Correctness only, never speed."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

import pytest

from kubesched.bench.check import PlacementChecker, amount, parse_quantity
from kubesched.bench.e2e import E2eOptions, run_e2e
from kubesched.bench.inprocess import RunOptions, run_inprocess
from kubesched.bench.measure import percentile, summarize, throughput_samples
from kubesched.bench.workloads import (
    WORKLOADS,
    Workload,
    default_pod,
    make_node,
    node_affinity_pod,
    pod_affinity_pod,
    pod_anti_affinity_pod,
    topology_spreading_pod,
)
from kubesched.catalogue import full_catalogue
from kubesched.cli import main

# Tiny sizes that every workload can satisfy (anti-affinity needs a node per green pod).
SMOKE_NODES, SMOKE_INIT, SMOKE_PODS = 12, 3, 8
RUNNABLE = list(WORKLOADS)
IN_PROCESS = [name for name, w in WORKLOADS.items() if not w.startup]  # start-up is a process's: e2e only


def smoke(name: str) -> Workload:
    if name == "Preemption":
        return WORKLOADS[name].sized(nodes=4, pods=3)  # four 900m pods fill every node: real preemption
    return WORKLOADS[name].sized(SMOKE_NODES, SMOKE_INIT, SMOKE_PODS)


def bound(pod: dict[str, Any], node: int) -> dict[str, Any]:
    pod["spec"]["nodeName"] = f"bench-node-{node:05d}"
    return pod


def zoned(n: int, zones: list[str]) -> list[dict[str, Any]]:
    return [make_node(i, {"topology.kubernetes.io/zone": zones[i % len(zones)]}) for i in range(n)]


# --- the placement check ---------------------------------------------------------------------------------------


def test_quantities() -> None:
    assert parse_quantity("500Mi") == 500 * 2**20
    assert parse_quantity("1e3") == 1000
    assert amount("cpu", "100m") == 100 and amount("cpu", "9") == 9000 and amount("cpu", "0.1") == 100
    with pytest.raises(ValueError):
        parse_quantity("12 apples")


def test_valid_placement_passes() -> None:
    checker = PlacementChecker([make_node(0), make_node(1)])
    for i in range(4):
        checker.bound(bound(default_pod(f"p{i}", "default"), i % 2))
    result = checker.finish([f"default/p{i}" for i in range(4)])
    assert result.passed, result.problems
    assert result.bound == 4


def test_overcommitted_cpu_and_pod_count_fail() -> None:
    checker = PlacementChecker([make_node(0)])
    for i in range(41):  # 41 x 100m > 4 CPU
        checker.bound(bound(default_pod(f"p{i}", "default"), 0))
    result = checker.finish([])
    assert not result.passed
    assert any("cpu 4000 + 100 > allocatable 4000" in p for p in result.problems)


def test_double_binding_and_missing_pods_fail() -> None:
    checker = PlacementChecker([make_node(0), make_node(1)])
    checker.bound(bound(default_pod("a", "default"), 0))
    checker.bound(bound(default_pod("a", "default"), 1))
    result = checker.finish(["default/a", "default/b"])
    assert "default/a bound again (to bench-node-00001)" in result.problems
    assert "default/a bound 2 times" in result.problems
    assert "default/b was never bound" in result.problems


def test_pod_that_fits_nowhere_must_stay_unbound() -> None:
    checker = PlacementChecker([make_node(0)])
    checker.bound(bound(default_pod("u", "default"), 0))
    assert not checker.finish([], never_bound=["default/u"]).passed


def test_node_affinity_violation_fails() -> None:
    checker = PlacementChecker(zoned(2, ["zone1", "zone3"]))
    checker.bound(bound(node_affinity_pod("ok", "default"), 0))
    checker.bound(bound(node_affinity_pod("bad", "default"), 1))
    result = checker.finish([])
    assert result.problems == ["default/bad on bench-node-00001: node selector/affinity not matched"]


def test_untolerated_taint_fails() -> None:
    node = make_node(0)
    node["spec"]["taints"] = [{"key": "dedicated", "value": "x", "effect": "NoSchedule"}]
    checker = PlacementChecker([node])
    checker.bound(bound(default_pod("p", "default"), 0))
    assert checker.finish([]).problems == ["default/p on bench-node-00000: untolerated taint"]


def test_topology_spread_skew_is_checked() -> None:
    checker = PlacementChecker(zoned(3, ["moon-1", "moon-2", "moon-3"]))
    for i in range(6):  # maxSkew 5: the sixth in moon-1 with the others empty is skew 6
        checker.bound(bound(topology_spreading_pod(f"s{i}", "default"), 0))
    result = checker.finish([])
    assert result.problem_count == 1
    assert "skew 6 over topology.kubernetes.io/zone exceeds maxSkew 5" in result.problems[0]
    # Pods of another namespace do not count towards the skew.
    other = PlacementChecker(zoned(3, ["moon-1", "moon-2", "moon-3"]))
    for i in range(5):
        other.bound(bound(topology_spreading_pod(f"s{i}", "default"), 0))
    other.bound(bound(topology_spreading_pod("x", "elsewhere"), 0))
    assert other.finish([]).passed


def test_pod_anti_affinity_is_checked_both_ways() -> None:
    checker = PlacementChecker([make_node(0), make_node(1)])
    checker.bound(bound(pod_anti_affinity_pod("a", "sched-0"), 0))
    checker.bound(bound(pod_anti_affinity_pod("b", "sched-1"), 1))
    assert checker.finish([]).passed
    checker = PlacementChecker([make_node(0)])
    checker.bound(bound(pod_anti_affinity_pod("a", "sched-0"), 0))
    plain = default_pod("green", "sched-1")
    plain["metadata"]["labels"] = {"color": "green"}
    checker.bound(bound(plain, 0))  # no anti-affinity of its own, but matches the one already there
    assert checker.finish([]).problems == [
        "sched-1/green on bench-node-00000: violates the anti-affinity of a pod already there"
    ]


def test_pod_affinity_first_pod_allowed_then_enforced() -> None:
    checker = PlacementChecker(zoned(2, ["zone1", "zone2"]))
    checker.bound(bound(pod_affinity_pod("first", "sched-0"), 0))  # nothing to join yet: allowed
    checker.bound(bound(pod_affinity_pod("joins", "sched-1"), 0))
    checker.bound(bound(pod_affinity_pod("strays", "sched-1"), 1))
    result = checker.finish([])
    assert result.problems == [
        "sched-1/strays on bench-node-00001: required pod affinity (topology.kubernetes.io/zone) not satisfied"
    ]


def test_deleted_pods_free_their_room() -> None:
    checker = PlacementChecker([make_node(0)])
    big = default_pod("big", "default")
    big["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3500m"
    checker.bound(bound(big, 0))
    checker.deleted(big)
    other = default_pod("next", "default")
    other["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "3500m"
    checker.bound(bound(other, 0))
    assert checker.finish([]).passed


# --- throughput ------------------------------------------------------------------------------------------------


def test_samples_per_second_with_empty_intervals_merged() -> None:
    # 100 pods in [0,1), nothing in [1,2), 50 in [2,2.98]: the empty second joins the next (partial) one.
    times = [i / 100 for i in range(100)] + [2 + i / 50 for i in range(50)]
    rate = pytest.approx(50 / 1.98)
    assert throughput_samples(times, start=0.0) == [100.0, rate, rate]


def test_short_trailing_interval_is_folded_into_the_last_sample() -> None:
    times = [i / 1000 for i in range(1000)] + [1.0 + i / 1000 for i in range(200)]  # last 0.2 s
    samples = throughput_samples(times, start=0.0)
    assert len(samples) == 1 and samples[0] == pytest.approx(1200 / 1.199, rel=1e-3)


def test_summary_percentiles_as_scheduler_perf() -> None:
    assert percentile([1.0, 2.0, 3.0, 4.0], 50) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 99) == 4.0
    t = summarize([i / 10 for i in range(40)], start=0.0)  # 10 pods a second for 4 s
    assert t.average == pytest.approx(10.0, rel=0.05) and t.p50 == pytest.approx(10.0, rel=0.05)


# --- smoke runs of every workload ------------------------------------------------------------------------------


def assert_passed(result: dict[str, Any]) -> None:
    assert not result.get("error"), result
    assert result["check"]["passed"], result["check"]["problems"]
    for key in (
        "workload",
        "mode",
        "nodes",
        "initPods",
        "measuredPods",
        "throughput",
        "durationSeconds",
        "peakRSSBytes",
    ):
        assert key in result
    assert set(result["throughput"]) == {"average", "p50", "p90", "p99"}
    assert result["throughput"]["average"] > 0 and result["peakRSSBytes"] > 0


def assert_workload_specifics(name: str, result: dict[str, Any]) -> None:
    if name == "Preemption":
        assert result["podsDeleted"] >= 3 * result["measuredPods"]  # three victims per high-priority pod
    if name == "Unschedulable":
        assert result["unschedulablePodsCreated"] >= 1


@pytest.mark.parametrize("name", IN_PROCESS)
def test_inprocess_smoke(name: str) -> None:
    result = run_inprocess(smoke(name), RunOptions(timeout=30), full_catalogue())
    assert_passed(result)
    assert_workload_specifics(name, result)


@pytest.mark.parametrize("name", RUNNABLE)
def test_e2e_smoke(name: str) -> None:
    create = "before" if name == "SchedulingBasic" else "live"  # "before" restarts the scheduler: slower
    result = run_e2e(smoke(name), E2eOptions(timeout=30, create=create), full_catalogue())
    assert_passed(result)
    assert result["apiServerPeakRSSBytes"] > 0
    assert_workload_specifics(name, result)


def test_workload_needing_an_unregistered_plugin_is_skipped_with_a_reason() -> None:
    missing = dataclasses.replace(WORKLOADS["LoadAware"], needs_plugin="NoSuchPlugin").sized(4, 1, 2)
    for result in (
        run_inprocess(missing, RunOptions(timeout=10), full_catalogue()),
        run_e2e(missing, E2eOptions(timeout=10), full_catalogue()),
    ):
        assert "needs the NoSuchPlugin plugin, which is not registered" in result["skipped"]
        assert "check" not in result


def test_cli_json_runs_isolated_and_exit_status(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        [
            "bench",
            "-w",
            "SchedulingBasic,TopologySpreading",
            "--nodes",
            "5",
            "--init-pods",
            "2",
            "--pods",
            "6",
            "-o",
            "json",
            "--no-progress",
        ]
    )
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rc == 0
    assert [r["workload"] for r in lines] == ["SchedulingBasic", "TopologySpreading"]
    for r in lines:
        assert r["check"]["passed"] and r["measuredPods"] == 6 and r["nodes"] == 5 and r["peakRSSBytes"] > 0


def test_cli_fails_when_the_check_fails(capsys: pytest.CaptureFixture[str]) -> None:
    # 3 nodes cannot hold 4 pods with hostname anti-affinity: some are never bound, so the run fails.
    rc = main(
        [
            "bench",
            "-w",
            "SchedulingPodAntiAffinity",
            "--nodes",
            "3",
            "--init-pods",
            "1",
            "--pods",
            "3",
            "--timeout",
            "2",
            "-o",
            "json",
            "--no-isolate",
            "--no-progress",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert not result["check"]["passed"]
    assert any("never bound" in p for p in result["check"]["problems"])


def test_cli_scale_runs_each_size_and_reports_the_per_pod_cost(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(
        ["bench", "--scale", "4,12", "--init-pods", "2", "--pods", "8", "--no-isolate", "--no-progress"]
    )
    out = capsys.readouterr().out
    assert rc == 0
    assert "per-pod cost by cluster size" in out
    rows = [line for line in out.splitlines() if "SchedulingB" in line and "x" in line.split("│")[-2]]
    assert len(rows) == 2, out
    assert rows[0].split("│")[2].strip() == "4" and rows[1].split("│")[2].strip() == "12"
    assert rows[0].split("│")[-3].strip() == "1.00x"

    rc = main(
        [
            "bench",
            "--scale",
            "4",
            "--init-pods",
            "0",
            "--pods",
            "3",
            "-o",
            "json",
            "--no-isolate",
            "--no-progress",
        ]
    )
    result = json.loads(capsys.readouterr().out)
    assert rc == 0 and result["nodes"] == 4
    assert result["cpuMicrosecondsPerPod"] == pytest.approx(result["cpuSeconds"] / 3 * 1e6, rel=0.01)


def test_cli_scale_rejects_bad_sizes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--scale", "0,5", "--no-progress"]) == 2
    assert "positive node counts" in capsys.readouterr().err
    assert main(["bench", "--scale", "10", "--nodes", "5", "--no-progress"]) == 2


@pytest.mark.parametrize("api_writer", ["off", "events", "all"])
def test_e2e_every_binding_and_event_lands_whatever_the_api_writer(api_writer: str) -> None:
    workload = WORKLOADS["SchedulingBasic"].sized(nodes=20, init_pods=5, pods=200)
    result = run_e2e(workload, E2eOptions(timeout=60, create="live", api_writer=api_writer), full_catalogue())
    assert_passed(result)
    assert result["scheduledEvents"] == 200  # every measured pod's Scheduled event was written
    assert 0.0 <= result["scheduledEventsLagSeconds"] < 15.0
    if api_writer == "off":
        assert result["writerCPUSeconds"] == 0.0
    else:
        assert result["writerCPUSeconds"] > 0.0  # the child's CPU is counted (and within schedulerCPUSeconds)
        assert result["schedulerCPUSeconds"] > result["writerCPUSeconds"]


def test_scheduled_events_are_counted_per_bound_pod() -> None:
    """One list, then a watch from its resourceVersion for the events written after it (no re-listing)."""
    from kubesched.bench.e2e import _scheduled_events
    from kubesched.client.rest import ApiError

    def ev(ns: str, name: str, reason: str = "Scheduled") -> dict[str, Any]:
        return {"reason": reason, "regarding": {"kind": "Pod", "namespace": ns, "name": name}}

    class Stream:
        def __init__(self, events: list[tuple[str, dict[str, Any]]], hang: bool) -> None:
            self.events, self.hang = events, hang

        async def __aenter__(self) -> Stream:
            return self

        async def __aexit__(self, *exc: object) -> None:
            return None

        def __aiter__(self) -> Stream:
            return self

        async def __anext__(self) -> tuple[str, dict[str, Any]]:
            if self.events:
                return self.events.pop(0)
            if self.hang:  # a live watch with nothing more to say: only the wait ends it
                await asyncio.sleep(3600)
            raise StopAsyncIteration

    class Client:
        def __init__(self, later: tuple[tuple[str, dict[str, Any]], ...] = (), refuse: bool = False) -> None:
            self.refuse, self.later = refuse, list(later)
            self.lists: list[str | None] = []
            self.watches: list[tuple[str | None, str | None]] = []

        async def list_all(self, api_version: str, plural: str, *, namespace: str | None) -> dict[str, Any]:
            self.lists.append(namespace)
            if self.refuse:
                raise ApiError(403, "Forbidden", "no")
            items = [ev("a", "p1"), ev("a", "p1"), ev("a", "p2", "FailedScheduling"), ev("a", "other")]
            items += [ev("b", "p3"), ev("c", "p4")]
            return {"metadata": {"resourceVersion": "42"}, "items": items}

        def watch(
            self, api_version: str, plural: str, *, namespace: str | None, resource_version: str | None
        ) -> Stream:
            self.watches.append((namespace, resource_version))
            return Stream(self.later, hang=True)

    bound = {"a/p1", "a/p2", "b/p3"}
    # p2 has no Scheduled event (and a duplicate of p1's does not make up for it): 2 of 3, after the wait
    client = Client()
    assert asyncio.run(_scheduled_events(client, bound, wait=0.05))[0] == 2
    assert client.lists == [None] and client.watches == [(None, "42")]  # several namespaces: the collection
    # all there at the list: no watch
    client = Client()
    assert asyncio.run(_scheduled_events(client, {"a/p1", "b/p3"}, wait=0.0))[0] == 2
    assert client.watches == []
    # p2's event lands after the list: the watch counts it (MODIFIED and other reasons do not) and stops there
    later = (("MODIFIED", ev("a", "p2")), ("ADDED", ev("a", "p2", "Pulled")), ("ADDED", ev("a", "p2")))
    client = Client(later)
    assert asyncio.run(_scheduled_events(client, bound, wait=5.0))[0] == 3
    # one namespace: list and watch just it
    client = Client((("ADDED", ev("a", "p2")),))
    assert asyncio.run(_scheduled_events(client, {"a/p1", "a/p2"}, wait=5.0))[0] == 2
    assert client.lists == ["a"] and client.watches == [("a", "42")]
    assert asyncio.run(_scheduled_events(Client(refuse=True), bound, wait=0.0))[0] is None
