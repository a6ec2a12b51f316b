"""Framework: the cycle (PreFilter, chunked Filter with numFeasibleNodesToFind and round-robin start, Score,
selection), diagnosis and the FailedScheduling message, and the other extension points."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import (
    Catalogue,
    Code,
    CycleState,
    Filtered,
    Framework,
    Handle,
    NodeToStatus,
    PluginDefinition,
    PreFilterResult,
    Status,
    fit_error_message,
    num_feasible_nodes_to_find,
)
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo


def node(
    name: str, cpu: str = "4", mem: str = "8Gi", taints: list[dict[str, str]] | None = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110"}},
    }


def pod(name: str = "p", cpu: str = "100m", mem: str = "64Mi", **extra: Any) -> dict[str, Any]:
    status = extra.pop("status", {})
    spec = {
        "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": mem}}}
        ]
    }
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {**spec, **extra},
        "status": status,
    }


def cluster(*nodes: dict[str, Any]) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.on_node_add(n)
    return cache


# --- fake plugins --------------------------------------------------------------------------------------------


class Reject:
    """Filter rejecting the named nodes (or a predicate on the node name)."""

    def __init__(self, name: str, reject: Any, reason: str = "rejected", unresolvable: bool = False) -> None:
        self.name = name
        self.reject = reject if callable(reject) else (lambda n, bad=frozenset(reject): n in bad)
        self.reason = reason
        self.unresolvable = unresolvable
        self.seen: list[int] = []

    def filter(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Filtered:
        self.seen.append(len(idx))
        bad = np.array([self.reject(nodes.names[s]) for s in idx.tolist()], dtype=bool)
        return Filtered.from_mask(~bad, self.reason, unresolvable=self.unresolvable)


class ScoreBy:
    def __init__(self, name: str, table: dict[str, int], normalize: Any = None) -> None:
        self.name = name
        self.table = table
        self.calls = 0
        if normalize is not None:
            self.normalize_score = normalize

    def score(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> np.ndarray:
        self.calls += 1
        return np.array([self.table.get(nodes.names[s] or "", 0) for s in idx.tolist()], dtype=np.int64)


class PreFilterWith:
    def __init__(
        self, name: str, result: PreFilterResult | None = None, status: Status | None = None
    ) -> None:
        self.name = name
        self.result = result
        self.status = status or Status()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: Any
    ) -> tuple[PreFilterResult | None, Status]:
        return self.result, self.status

    def filter(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Filtered:
        raise AssertionError("filter of a plugin whose PreFilter skipped must not run")


def registry_of(*plugins: Any) -> Catalogue:
    return Catalogue(
        PluginDefinition(p.name, lambda args, handle, p=p: p, plugin_type=type(p)) for p in plugins
    )


def framework(cache: Cache, points: dict[str, list[Any]], *plugins: Any, **kwargs: Any) -> Framework:
    """Points list plugin objects (or (plugin, weight)); the framework gets their names."""

    def ref(entry: Any) -> Any:
        return (
            (entry[0].name, entry[1])
            if isinstance(entry, tuple)
            else entry
            if isinstance(entry, str)
            else entry.name
        )

    named = {point: [ref(e) for e in entries] for point, entries in points.items()}
    return Framework.from_plugins(registry_of(*plugins), named, {}, Handle(cache=cache), seed=7, **kwargs)


def info(cache: Cache, body: dict[str, Any]) -> PodInfo:
    return PodInfo.from_pod(body, cache.res)


# --- numFeasibleNodesToFind ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("nodes", "pct", "want"),
    [
        (0, None, 0),
        (10, None, 10),
        (99, None, 99),
        (100, None, 100),
        (500, None, 230),
        (1000, None, 420),
        (2000, None, 680),
        (3000, None, 780),
        (5000, None, 500),
        (5625, None, 281),
        (6000, None, 300),
        (10000, None, 500),
        (15000, None, 750),
        (20000, None, 1000),
        (1000, 30, 300),
        (1000, 5, 100),  # never fewer than 100
        (1000, 100, 1000),
        (50, 10, 50),
        (5000, 0, 500),
    ],
)
def test_num_feasible_nodes_to_find(nodes: int, pct: int | None, want: int) -> None:
    assert num_feasible_nodes_to_find(pct, nodes) == want


# --- FitError message ----------------------------------------------------------------------------------------


def test_fit_error_message_as_observed_on_136() -> None:
    diag = NodeToStatus(counts={"node(s) had untolerated taint(s)": 1, "Insufficient cpu": 1})
    msg = fit_error_message(
        2,
        diag,
        "no new claims to deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    )
    assert msg == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). no new claims to "
        "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_fit_error_message_sorts_count_prefixed_reasons() -> None:
    diag = NodeToStatus(counts={"node(s) had untolerated taint(s)": 2, "node(s) were unschedulable": 1})
    assert fit_error_message(3, diag) == (
        "0/3 nodes are available: 1 node(s) were unschedulable, 2 node(s) had untolerated taint(s)."
    )
    assert fit_error_message(3, NodeToStatus(pre_filter_message="boom", counts={"x": 3})) == (
        "0/3 nodes are available: boom."
    )
    assert fit_error_message(3, NodeToStatus()) == "0/3 nodes are available:"


def test_failed_scheduling_with_the_default_plugins() -> None:
    cache = cluster(
        node("t1", cpu="1"), node("t2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    )
    points = {
        "PreFilter": ["NodePorts", "NodeResourcesFit"],
        "Filter": ["NodeUnschedulable", "NodeName", "TaintToleration", "NodePorts", "NodeResourcesFit"],
        "Score": [("NodeResourcesFit", 1), ("TaintToleration", 3)],
    }
    fw = Framework.from_plugins(in_tree_catalogue(), points, {}, Handle(cache=cache))
    result = fw.schedule(CycleState(), info(cache, pod(cpu="2")), record_scores=True)
    assert result.node is None and result.status.code == Code.UNSCHEDULABLE
    assert result.status.message() == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s)."
    )
    assert result.diagnosis.by_node["t1"].plugin == "NodeResourcesFit"
    assert result.diagnosis.by_node["t2"].plugin == "TaintToleration"
    # 2 cpus asked of a 1-cpu node: preemption cannot help there either
    assert result.diagnosis.unresolvable_nodes == {"t1", "t2"}
    assert result.diagnosis.plugins == {"NodeResourcesFit", "TaintToleration"}
    assert result.filtered == {"t1": ["Insufficient cpu"], "t2": ["node(s) had untolerated taint(s)"]}
    assert result.evaluated == 2 and result.feasible == 0


def test_no_nodes() -> None:
    fw = framework(Cache(), {"Filter": []})
    result = fw.schedule(CycleState(), info(Cache(), pod()))
    assert result.node is None and result.status.reasons == ["no nodes available to schedule pods"]


# --- the cycle -----------------------------------------------------------------------------------------------


def test_least_allocated_node_wins() -> None:
    cache = cluster(node("small", cpu="2"), node("big", cpu="16"))
    points = {
        "PreFilter": ["NodeResourcesFit"],
        "Filter": ["NodeResourcesFit"],
        "Score": [("NodeResourcesFit", 1)],
    }
    fw = Framework.from_plugins(in_tree_catalogue(), points, {}, Handle(cache=cache), seed=1)
    result = fw.schedule(CycleState(), info(cache, pod(cpu="1")), record_scores=True)
    assert result.node == "big" and result.ok
    assert (
        result.scores is not None
        and result.scores["big"]["NodeResourcesFit"] > result.scores["small"]["NodeResourcesFit"]
    )
    assert result.total_scores == {n: s["NodeResourcesFit"] for n, s in result.scores.items()}


def names(prefix: str, n: int) -> list[str]:
    return [f"{prefix}{i:03d}" for i in range(n)]


def test_filtering_stops_at_num_feasible_and_rotates() -> None:
    cache = cluster(*(node(n) for n in names("n", 300)))
    odd = Reject("Odd", lambda name: int(name[1:]) % 2 == 1)
    fw = framework(cache, {"Filter": [odd], "Score": [ScoreBy("S", {})]}, odd, ScoreBy("S", {}))
    # 300 nodes: 48% -> 144 feasible wanted; every other node is rejected
    first = fw.schedule(CycleState(), info(cache, pod()))
    assert (first.feasible, first.evaluated) == (144, 287)  # stops right after the 144th feasible (n286)
    assert fw.next_start_node_index == 287
    second = fw.schedule(CycleState(), info(cache, pod()), record_scores=True)
    # from n287: 13 nodes to the end (6 feasible), then n000..n274 (138 feasible)
    assert (second.feasible, second.evaluated) == (144, 288)
    assert fw.next_start_node_index == 275
    assert second.filtered is not None and len(second.filtered) == 144
    assert "n299" in second.filtered and "n275" not in second.filtered and "n001" in second.filtered


def test_without_score_plugins_one_feasible_node_is_enough() -> None:
    cache = cluster(*(node(n) for n in names("n", 200)))
    fw = framework(cache, {"Filter": []})
    result = fw.schedule(CycleState(), info(cache, pod()))
    assert result.ok and result.evaluated == 1


def test_score_is_skipped_for_a_single_feasible_node() -> None:
    cache = cluster(node("a"), node("b"))
    scorer = ScoreBy("S", {"b": 100})
    fw = framework(cache, {"Filter": [Reject("R", {"b"})], "Score": [scorer]}, Reject("R", {"b"}), scorer)
    result = fw.schedule(CycleState(), info(cache, pod()))
    assert result.node == "a" and scorer.calls == 0 and result.evaluated == 2


def test_first_failing_plugin_wins_and_later_ones_see_fewer_nodes() -> None:
    cache = cluster(node("a"), node("b"), node("c"))
    r1, r2 = Reject("R1", {"a"}, "first"), Reject("R2", {"a", "b"}, "second", unresolvable=True)
    fw = framework(cache, {"Filter": [r1, r2]}, r1, r2)
    result = fw.schedule(CycleState(), info(cache, pod()))
    assert result.node == "c"
    assert r2.seen == [2]  # "a" was already out
    failed = fw.schedule(CycleState(), info(cache, pod()), record_scores=True)
    assert failed.filtered == {"a": ["first"], "b": ["second"]}


def test_scores_are_weighted_and_ties_broken_at_random() -> None:
    cache = cluster(*(node(n) for n in ("a", "b", "c", "d")))
    s1 = ScoreBy("S1", {"a": 10, "b": 50, "c": 50, "d": 20})
    s2 = ScoreBy("S2", {"a": 30})
    fw = framework(cache, {"Score": [(s1, 1), (s2, 2)]}, s1, s2)
    picks = set()
    for _ in range(40):
        r = fw.schedule(CycleState(), info(cache, pod()), record_scores=True)
        picks.add(r.node)
        assert r.total_scores == {"a": 70, "b": 50, "c": 50, "d": 20}
        assert r.scores is not None and r.scores["a"] == {"S1": 10, "S2": 60}
    assert picks == {"a"}
    tie = framework(cache, {"Score": [(s1, 1)]}, s1)
    picks = {tie.schedule(CycleState(), info(cache, pod())).node for _ in range(60)}
    assert picks == {"b", "c"}


def test_normalize_and_invalid_scores() -> None:
    cache = cluster(node("a"), node("b"))
    doubled = ScoreBy("D", {"a": 40, "b": 60}, normalize=lambda state, pod, s: s * 2)
    fw = framework(cache, {"Score": [doubled]}, doubled)
    r = fw.schedule(CycleState(), info(cache, pod()))
    assert r.node is None and r.status.code == Code.ERROR
    assert r.status.reasons == [
        'plugin "D" returns an invalid score 120, it should in the range of [0, 100] after normalizing'
    ]


def test_filter_exception_is_an_error_status() -> None:
    cache = cluster(node("a"))

    class Boom:
        name = "Boom"

        def filter(self, *a: Any) -> Filtered:
            raise RuntimeError("kaput")

    fw = framework(cache, {"Filter": [Boom()]}, Boom())
    r = fw.schedule(CycleState(), info(cache, pod()))
    assert r.status.code == Code.ERROR and r.status.reasons == ['running "Boom" filter plugin: kaput']


def test_pre_filter_rejection_uses_its_message() -> None:
    cache = cluster(node("a"), node("b"))
    pf = PreFilterWith("PF", status=Status.unschedulable("pod is not ready", unresolvable=True))
    fw = framework(cache, {"PreFilter": [pf], "Filter": [pf]}, pf)
    r = fw.schedule(CycleState(), info(cache, pod()))
    assert r.status.message() == "0/2 nodes are available: pod is not ready."
    assert r.diagnosis.plugins == {"PF"} and set(r.diagnosis.by_node) == {"a", "b"}
    assert r.diagnosis.unresolvable_nodes == {"a", "b"}


def test_pre_filter_skip_skips_the_filter() -> None:
    cache = cluster(node("a"))
    pf = PreFilterWith("PF", status=Status.skip())
    fw = framework(cache, {"PreFilter": [pf], "Filter": [pf]}, pf)
    assert fw.schedule(CycleState(), info(cache, pod())).node == "a"


def test_pre_filter_result_restricts_the_nodes() -> None:
    cache = cluster(node("a"), node("b"), node("c"))
    pf = PreFilterWith("Only", PreFilterResult({"b", "gone"}))
    never = Reject("R", set())
    fw = framework(cache, {"PreFilter": [pf], "Filter": [never]}, pf, never)
    r = fw.schedule(CycleState(), info(cache, pod()))
    assert r.node == "b" and never.seen == [1]
    no = Reject("R", {"b"}, "no room")
    fw = framework(cache, {"PreFilter": [pf], "Filter": [no]}, pf, no)
    r = fw.schedule(CycleState(), info(cache, pod()))
    assert (
        r.status.message() == "0/3 nodes are available: 1 no room, 2 node(s) didn't satisfy plugin(s) [Only]."
    )
    assert r.diagnosis.unresolvable_nodes == {"a", "c"}


def test_pre_filter_results_intersect() -> None:
    cache = cluster(node("a"), node("b"))
    p1, p2 = PreFilterWith("P1", PreFilterResult({"a"})), PreFilterWith("P2", PreFilterResult({"b"}))
    fw = framework(cache, {"PreFilter": [p1, p2]}, p1, p2)
    r = fw.schedule(CycleState(), info(cache, pod()))
    assert (
        r.status.message()
        == "0/2 nodes are available: node(s) didn't satisfy plugin(s) [P1 P2] simultaneously."
    )


def test_nominated_node_is_tried_first() -> None:
    cache = cluster(node("a"), node("b"))
    scorer = ScoreBy("S", {"a": 100})
    fw = framework(cache, {"Filter": [], "Score": [scorer]}, scorer)
    r = fw.schedule(CycleState(), info(cache, pod(status={"nominatedNodeName": "b"})))
    assert r.node == "b" and r.evaluated == 1 and scorer.calls == 0
    gone = fw.schedule(CycleState(), info(cache, pod(status={"nominatedNodeName": "zz"})))
    assert gone.node == "a"


class FakeNominator:
    def __init__(self, pods: dict[str, list[PodInfo]]) -> None:
        self.pods = pods

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.pods.get(node_name, [])

    def nodes(self) -> list[str]:
        return list(self.pods)


def test_nominated_pods_hold_their_room() -> None:
    cache = cluster(node("a", cpu="2"), node("b", cpu="2"))
    big = info(cache, pod("nominated", cpu="2", priority=10))
    handle = Handle(cache=cache, nominator=FakeNominator({"a": [big]}))
    points = {
        "PreFilter": ["NodeResourcesFit"],
        "Filter": ["NodeResourcesFit"],
        "Score": [("NodeResourcesFit", 1)],
    }
    fw = Framework.from_plugins(in_tree_catalogue(), points, {}, handle, seed=3)
    low = info(cache, pod("low", cpu="1", priority=0))
    for _ in range(5):
        assert fw.schedule(CycleState(), low).node == "b"
    failed = fw.schedule(CycleState(), info(cache, pod("huge", cpu="2", priority=0)), record_scores=True)
    assert failed.node == "b"
    # higher priority than the nominated pod: may take its room
    high = info(cache, pod("high", cpu="2", priority=20))
    assert {fw.schedule(CycleState(), high).node for _ in range(20)} == {"a", "b"}
    assert cache.table.pod_slot("nominated") is None  # the what-if left the table as it was
    assert cache.table.requested[cache.table.index["a"], 0] == 0


def test_run_filters_for_preemption() -> None:
    cache = cluster(node("a", cpu="1"), node("b", cpu="4"))
    points = {"PreFilter": ["NodeResourcesFit"], "Filter": ["NodeResourcesFit"]}
    fw = Framework.from_plugins(in_tree_catalogue(), points, {}, Handle(cache=cache))
    pi = info(cache, pod(cpu="2"))
    state = CycleState()
    _, s, _ = fw.run_pre_filter(state, pi)
    assert s.ok
    ok, statuses = fw.run_filters(state, pi, cache.table.slots())
    a, b = cache.table.index["a"], cache.table.index["b"]
    assert ok.tolist() == [False, True]
    assert (
        statuses[a].reasons == ["Insufficient cpu"]
        and statuses[a].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    )
    assert fw.filter_node(state, pi, b).ok


# --- construction --------------------------------------------------------------------------------------------


def test_point_spellings_weights_and_protocol_checks() -> None:
    cache = cluster(node("a"))
    s = ScoreBy("S", {})
    fw = framework(cache, {"score": [(s, 0)], "pre_filter": [], "PreBind": []}, s)
    assert fw.score_weights == {"S": 1} and fw.points["Score"] == ["S"]
    assert fw.has_score_plugins and not fw.has_filter_plugins and not fw.has_post_filter_plugins
    with pytest.raises(TypeError):
        framework(cache, {"Filter": [s]}, s)
    with pytest.raises(ValueError):
        framework(cache, {"Nope": [s]}, s)
    with pytest.raises(KeyError):
        Framework.from_plugins(Catalogue(), {"Filter": ["Missing"]}, {}, Handle(cache=cache))


def test_plugins_get_their_args_and_a_handle_pointing_back() -> None:
    got: dict[str, Any] = {}

    class P:
        name = "P"

        def __init__(self, args: Any, handle: Handle) -> None:
            got["args"], got["handle"] = args, handle

        def filter(self, *a: Any) -> Filtered:
            return Filtered.all_pass(0)

    catalogue = Catalogue([PluginDefinition("P", P)])
    fw = Framework.from_plugins(catalogue, {"Filter": ["P"]}, {"P": {"x": 1}}, Handle(cache=Cache()))
    assert got["args"] == {"x": 1} and got["handle"].framework is fw and fw.plugin("P").name == "P"


def test_from_profile() -> None:
    types = pytest.importorskip("kubesched.scheduler.config.types")
    ref = types.PluginRef
    plugins = types.ProfilePlugins(
        queue_sort=(ref("PrioritySort"),),
        pre_filter=(ref("NodeResourcesFit"),),
        filter=(ref("NodeResourcesFit"),),
        score=(ref("NodeResourcesFit", 3),),
        bind=(ref("DefaultBinder"),),
    )
    profile = types.SchedulerProfile(
        scheduler_name="mine", plugins=plugins, plugin_args={"NodeResourcesFit": None}
    )
    cache = cluster(node("a"))
    fw = Framework.from_profile(
        profile, in_tree_catalogue(), Handle(cache=cache), percentage_of_nodes_to_score=50
    )
    assert fw.scheduler_name == "mine" and fw.score_weights == {"NodeResourcesFit": 3}
    assert fw.percentage_of_nodes_to_score == 50 and fw.points["Bind"] == ["DefaultBinder"]
    assert fw.schedule(CycleState(), info(cache, pod())).node == "a"


# --- the other extension points -------------------------------------------------------------------------------


class Recording:
    def __init__(self, name: str, log: list[str], **answers: Any) -> None:
        self.name = name
        self.log = log
        self.answers = answers

    def pre_enqueue(self, pod: PodInfo) -> Status:
        self.log.append(f"{self.name}.pre_enqueue")
        return self.answers.get("pre_enqueue", Status())

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"{self.name}.reserve")
        return self.answers.get("reserve", Status())

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"{self.name}.unreserve")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        return self.answers.get("permit", (Status(), 0.0))

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"{self.name}.pre_bind")
        return self.answers.get("pre_bind", Status())

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"{self.name}.bind")
        return self.answers.get("bind", Status())

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"{self.name}.post_bind")

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: Any, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        self.log.append(f"{self.name}.post_filter")
        return self.answers.get("post_filter", (None, Status()))


def with_points(log: list[str], *plugins: Recording) -> Framework:
    names = [p.name for p in plugins]
    points = {
        p: names for p in ("PreEnqueue", "Reserve", "Permit", "PreBind", "Bind", "PostBind", "PostFilter")
    }
    return Framework.from_plugins(registry_of(*plugins), points, {}, Handle(cache=Cache()))


async def test_reserve_unreserve_bind_order() -> None:
    log: list[str] = []
    fw = with_points(log, Recording("A", log, bind=Status.skip()), Recording("B", log))
    pi = info(Cache(), pod())
    state = CycleState()
    assert fw.run_reserve(state, pi, "n").ok
    fw.run_unreserve(state, pi, "n")
    assert (await fw.run_pre_bind(state, pi, "n")).ok
    s = await fw.run_bind(state, pi, "n")
    assert s.ok and s.plugin == "B"
    fw.run_post_bind(state, pi, "n")
    assert log == [
        "A.reserve",
        "B.reserve",
        "B.unreserve",
        "A.unreserve",
        "A.pre_bind",
        "B.pre_bind",
        "A.bind",
        "B.bind",
        "A.post_bind",
        "B.post_bind",
    ]


async def test_failures_name_their_plugin() -> None:
    log: list[str] = []
    no = Status.unschedulable("nope")
    fw = with_points(
        log, Recording("A", log, reserve=no, pre_enqueue=no, pre_bind=Status.error("io")), Recording("B", log)
    )
    pi = info(Cache(), pod())
    s = fw.run_reserve(CycleState(), pi, "n")
    assert (s.code, s.plugin, log) == (Code.UNSCHEDULABLE, "A", ["A.reserve"])
    assert fw.run_pre_enqueue(pi).plugin == "A"
    s = await fw.run_pre_bind(CycleState(), pi, "n")
    assert s.code == Code.ERROR and s.reasons == ['running PreBind plugin "A": io']
    skip_all = with_points(log, Recording("C", log, bind=Status.skip()))
    assert (await skip_all.run_bind(CycleState(), pi, "n")).is_skip


def test_permit() -> None:
    log: list[str] = []
    wait = (Status(Code.WAIT), 3600.0)
    fw = with_points(
        log, Recording("A", log, permit=wait), Recording("B", log, permit=(Status(Code.WAIT), 5.0))
    )
    s, waits = fw.run_permit(CycleState(), info(Cache(), pod()), "n")
    assert s.code == Code.WAIT and waits == {"A": 900.0, "B": 5.0}  # capped at 15 minutes
    deny = with_points(
        log, Recording("A", log, permit=wait), Recording("B", log, permit=(Status.unschedulable("no"), 0))
    )
    s, waits = deny.run_permit(CycleState(), info(Cache(), pod()), "n")
    assert (s.code, s.plugin, waits) == (Code.UNSCHEDULABLE, "B", {})


async def test_post_filter_collects_rejections() -> None:
    log: list[str] = []
    a = Recording("A", log, post_filter=(None, Status.unschedulable("no new claims to deallocate")))
    b = Recording("B", log, post_filter=("n1", Status.unschedulable("preemption: 0/2 nodes are available")))
    fw = with_points(log, a, b)
    node, s = await fw.run_post_filter(CycleState(), info(Cache(), pod()), NodeToStatus())
    assert node == "n1" and s.code == Code.UNSCHEDULABLE and s.plugin == "A"
    assert s.message() == "no new claims to deallocate, preemption: 0/2 nodes are available"
    ok = with_points(log, Recording("C", log, post_filter=("n2", Status())), a)
    assert await ok.run_post_filter(CycleState(), info(Cache(), pod()), NodeToStatus()) == (
        "n2",
        Status(plugin="C"),
    )


def test_queue_sort_key_and_events() -> None:
    cache = Cache()
    fw = Framework.from_plugins(
        in_tree_catalogue(),
        {"QueueSort": ["PrioritySort"], "Filter": ["NodeResourcesFit", "TaintToleration"]},
        {},
        Handle(cache=cache),
    )
    q = QueuedPodInfo(info(cache, pod(priority=7)), timestamp=2.0)
    assert fw.queue_sort_key(q) == (-7, 2.0)
    events = fw.events_to_register()
    assert {e.action for e in events["TaintToleration"]} >= {"UpdateNodeTaint"}
    assert {(e.resource, e.action) for e in events["NodeResourcesFit"]} >= {
        ("Pod", "Delete"),
        ("Node", "Add"),
    }


def test_works_with_the_queue_nominator() -> None:
    queue = pytest.importorskip("kubesched.scheduler.queue")
    cache = cluster(node("a", cpu="2"), node("b", cpu="2"))
    nominator = queue.Nominator()
    nominator.add_nominated(info(cache, pod("nominated", cpu="2", priority=10)), "a")
    handle = Handle(cache=cache, nominator=nominator)
    points = {
        "PreFilter": ["NodeResourcesFit"],
        "Filter": ["NodeResourcesFit"],
        "Score": [("NodeResourcesFit", 1)],
    }
    fw = Framework.from_plugins(in_tree_catalogue(), points, {}, handle, seed=3)
    assert {fw.schedule(CycleState(), info(cache, pod("low", cpu="1"))).node for _ in range(5)} == {"b"}


def test_filter_with_nominated_pods_needs_both_passes() -> None:
    """Upstream RunFilterPluginsWithNominatedPods: a node passes only if the pod fits with the nominated pods of
    equal or higher priority counted there and without them."""
    queue = pytest.importorskip("kubesched.scheduler.queue")
    cache = cluster(node("a", cpu="2"), node("b", cpu="2"))
    nominator = queue.Nominator()
    web = {"app": "web"}
    nominated = pod("nominated", cpu="1", priority=10)
    nominated["metadata"]["labels"] = web
    nominator.add_nominated(info(cache, nominated), "a")
    handle = Handle(cache=cache, nominator=nominator)
    points = {
        "PreFilter": ["NodeResourcesFit", "InterPodAffinity"],
        "Filter": ["NodeResourcesFit", "InterPodAffinity"],
    }
    fw = Framework.from_plugins(in_tree_catalogue(), points, {}, handle)
    a, b = cache.table.index["a"], cache.table.index["b"]

    def check(body: dict[str, Any], slot: int, **kw: Any) -> Status:
        pi = info(cache, body)
        state = CycleState()
        _, s, _ = fw.run_pre_filter(state, pi)
        assert s.ok
        return fw.filter_with_nominated_pods(state, pi, slot, **kw)

    # Room: with the nominated pod (1 CPU) on a, a 2-CPU pod of lower priority does not fit; one of higher does.
    assert check(pod("low", cpu="2", priority=0), a).reasons == ["Insufficient cpu"]
    assert check(pod("high", cpu="2", priority=20), a).ok
    assert check(pod("low", cpu="2", priority=0), b).ok  # nothing nominated to b
    # Affinity to the nominated pod: it passes with it counted, not without it, so the node does not pass.
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": web}, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    follower = pod("follower", cpu="100m", priority=0, affinity=affinity)
    assert not check(follower, a).ok
    # The cycle's Filter path has filtered the node alone already: only the pass with them is left.
    assert check(follower, a, passed_alone=True).ok
    assert check(pod("low", cpu="2", priority=0), a, passed_alone=True).reasons == ["Insufficient cpu"]
    assert cache.table.pod_slot("nominated") is None  # the what-if left the table as it was
    assert cache.table.requested[a, 0] == 0
