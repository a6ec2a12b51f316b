"""The Dynamic plugin over a NodeTable: crane's Filter and Score, checked by hand-worked cases and against a
node-by-node transliteration of crane's Go logic; hot values from PostBind and from crane's annotation."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from la_helpers import (
    ALL_METRICS,
    CPU1D,
    CPU1H,
    CPU5,
    MEM1D,
    MEM1H,
    MEM5,
    NOW,
    SHANGHAI,
    cluster,
    crane,
    loads,
    node,
    pod,
)
from pydantic import ValidationError

from kubesched.loadaware import DynamicArgs, InMemoryLoadStore
from kubesched.loadaware.annotations import HOT_VALUE_KEY, read_usage
from kubesched.loadaware.dynamic import Dynamic, overload_reason
from kubesched.loadaware.hotvalue import HotValueStore
from kubesched.loadaware.policy import API_VERSION, KIND, DynamicSchedulerPolicy, default_policy, parse_policy
from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import ClusterEvent, CycleState, Handle
from kubesched.scheduler.podinfo import PodInfo


def dynamic_args(args: dict[str, Any] | None = None) -> DynamicArgs:
    """The args as the configuration loader builds them (wire form in)."""
    return DynamicArgs.model_validate(args or {})


def plugin(cache: Cache, policy: DynamicSchedulerPolicy | None = None, args: Any = None) -> Dynamic:
    return Dynamic(
        dynamic_args(args), Handle(cache=cache), policy=policy or default_policy(), clock=lambda: NOW
    )


def info(cache: Cache, **kw: Any) -> PodInfo:
    return cache.pod_info(pod(**kw))


def run_filter(cache: Cache, dyn: Dynamic, names: list[str], **pod_kw: Any) -> dict[str, list[str]]:
    """node -> reasons it was rejected for (only rejected nodes)."""
    table = cache.table
    idx = np.array([table.index[n] for n in names], dtype=np.intp)
    verdict = dyn.filter(CycleState(), info(cache, **pod_kw), table, idx)
    out = {}
    for name, bits in zip(names, verdict.reason_bits.tolist(), strict=True):
        if bits:
            out[name] = [r for j, r in enumerate(verdict.reasons) if bits >> j & 1]
    return out


def run_score(cache: Cache, dyn: Dynamic, names: list[str]) -> list[int]:
    table = cache.table
    idx = np.array([table.index[n] for n in names], dtype=np.intp)
    return dyn.score(CycleState(), info(cache), table, idx).tolist()


# --- Filter -------------------------------------------------------------------------------------------------


def test_filter_rejects_only_fresh_values_over_the_limit() -> None:
    c = cluster(
        node("hot", loads(0.1, **{CPU5: 0.66})),
        node("at-limit", loads(0.1, **{CPU5: 0.65})),  # strictly greater is needed
        node("hot-1h", loads(0.1, **{CPU1H: 0.76})),
        node("hot-1d", loads(0.1, **{CPU1D: 0.99, MEM1D: 0.99})),  # *_1d metrics are not filtered
        node("stale", {CPU5: crane(0.9, age=480), MEM5: crane(0.9, age=480)}),  # 3m + 5m old: expired
        node("just-fresh", {CPU5: crane(0.9, age=479)}),
        node("none"),
        node("garbage", {CPU5: "0.9", MEM5: "0.9,later"}),
    )
    names = ["hot", "at-limit", "hot-1h", "hot-1d", "stale", "just-fresh", "none", "garbage"]
    assert run_filter(c, plugin(c), names) == {
        "hot": [overload_reason(CPU5, "hot")],
        "hot-1h": ["Load[cpu_usage_max_avg_1h] of node[hot-1h] is too high"],
        "just-fresh": ["Load[cpu_usage_avg_5m] of node[just-fresh] is too high"],
    }


def test_first_predicate_in_policy_order_names_the_reason() -> None:
    c = cluster(node("a", loads(0.1, **{MEM1H: 0.9, MEM5: 0.9})))
    assert run_filter(c, plugin(c), ["a"]) == {"a": ["Load[mem_usage_avg_5m] of node[a] is too high"]}
    # the 1h limits are checked only on what the 5m ones let through, in crane's order
    c = cluster(node("a", loads(0.1, **{MEM1H: 0.9, CPU1H: 0.8})))
    assert run_filter(c, plugin(c), ["a"]) == {"a": ["Load[cpu_usage_max_avg_1h] of node[a] is too high"]}


def test_daemonset_pods_are_not_filtered() -> None:
    c = cluster(node("hot", loads(0.99)))
    dyn = plugin(c)
    assert run_filter(c, dyn, ["hot"], owner_kind="DaemonSet") == {}
    assert run_filter(c, dyn, ["hot"], owner_kind="ReplicaSet") == {"hot": [overload_reason(CPU5, "hot")]}


def test_predicates_crane_skips() -> None:
    policy = parse_policy(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "spec": {
                "syncPolicy": [{"name": CPU5, "period": "3m"}],
                "predicate": [{"name": CPU5, "maxLimitPecent": 0}, {"name": MEM5, "maxLimitPecent": 0.1}],
            },
        }
    )
    c = cluster(node("a", loads(0.99)))
    assert run_filter(c, plugin(c, policy), ["a"]) == {}  # limit 0 = off; mem has no sync period


def test_more_rejected_nodes_than_reason_bits() -> None:
    names = [f"n{i:02d}" for i in range(70)]
    c = cluster(*(node(n, loads(0.1, **{CPU5 if i % 2 else MEM5: 0.9})) for i, n in enumerate(names)))
    got = run_filter(c, plugin(c), names)
    assert len(got) == 70
    assert got["n00"] == ["Load[mem_usage_avg_5m] of node[n00] is too high"]
    assert got["n59"] == ["Load[cpu_usage_avg_5m] of node[n59] is too high"]  # 64 bits - 4 predicates
    assert got["n60"] == ["Load[mem_usage_avg_5m] of node is too high"]
    assert got["n61"] == ["Load[cpu_usage_avg_5m] of node is too high"]


# --- Score --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (loads(0.0), 100),
        (loads(0.5), 50),
        (loads(1.0), 0),
        (loads(0.9), 9),  # (1 - 0.9) is 0.0999..., so the quotient truncates to 9
        (loads(0.0, **{CPU5: 0.2}), 98),  # 100 * (0.2 * 0.8 + 1.8) / 2
        ({m: crane(0.0) for m in ALL_METRICS if m != CPU1D}, 75),  # missing: 0 points, weight still counted
        (loads(0.0, **{MEM1D: 0.3, CPU1H: 0.6}), 83),  # 100 * (2 - 0.5 * 0.3 - 0.3 * 0.6) / 2 = 83.5
        (loads(0.2, age=480), 64),  # the *_5m ones expire at 8 minutes: 100 * 0.8 * 1.6 / 2
        (loads(0.2, age=1200), 40),  # the *_1h ones at 20 minutes: 100 * 0.8 * 1.0 / 2
        (loads(0.2, age=3 * 3600 + 300), 0),  # all stale
        ({}, 0),
        (loads(1.5), 0),  # usage above 1: negative, clamped
    ],
)
def test_score_follows_cranes_arithmetic(annotations: dict[str, str], expected: int) -> None:
    c = cluster(node("a", annotations))
    assert run_score(c, plugin(c), ["a"]) == [expected]


def test_score_ordering() -> None:
    c = cluster(node("busy", loads(0.6)), node("idle", loads(0.1)), node("mid", loads(0.3)), node("unknown"))
    assert run_score(c, plugin(c), ["busy", "idle", "mid", "unknown"]) == [40, 90, 70, 0]


def test_hot_value_from_postbind_lowers_the_score() -> None:
    c = cluster(node("a", loads(0.1)), node("b", loads(0.1)))
    dyn = plugin(c)
    assert run_score(c, dyn, ["a", "b"]) == [90, 90]
    dyn.post_bind(CycleState(), info(c, name="r1"), "a")
    assert run_score(c, dyn, ["a", "b"]) == [90, 90]  # 1 binding: floor(1/2) + floor(1/5) = 0
    dyn.post_bind(CycleState(), info(c, name="r2"), "a")
    assert run_score(c, dyn, ["a", "b"]) == [80, 90]  # 2 within 1m: hot 1
    for i in range(3, 6):
        dyn.post_bind(CycleState(), info(c, name=f"r{i}"), "a")
    assert run_score(c, dyn, ["a", "b"]) == [60, 90]  # 5 within 1m: floor(5/5) + floor(5/2) = 3
    dyn.clock = lambda: NOW + 120  # two minutes later: only the 5m window still holds them
    assert run_score(c, dyn, ["a", "b"]) == [80, 90]
    dyn.clock = lambda: NOW + 301
    assert run_score(c, dyn, ["a", "b"]) == [90, 90]


def test_pods_assumed_but_not_yet_bound_count_in_the_hot_value() -> None:
    # A burst: pods scheduled onto "a" before any of their bindings landed (no PostBind yet). Without counting
    # them, every pod of the burst would see the same hot values and pile onto the same coolest node.
    c = cluster(node("a", loads(0.1)), node("b", loads(0.1)))
    dyn = plugin(c)
    c.assume(info(c, name="r1"), "a")
    assert run_score(c, dyn, ["a", "b"]) == [90, 90]  # 1 in flight: floor(1/2) + floor(1/5) = 0
    c.assume(info(c, name="r2"), "a")
    assert run_score(c, dyn, ["a", "b"]) == [80, 90]  # 2 in flight: hot 1
    # Once bound (PostBind), the same pods are counted once, not twice.
    for name in ("r1", "r2"):
        dyn.post_bind(CycleState(), info(c, name=name), "a")
    assert run_score(c, dyn, ["a", "b"]) == [80, 90]
    # A binding that failed is forgotten by the cache, and no longer counts.
    c.assume(info(c, name="r3"), "b")
    c.assume(info(c, name="r4"), "b")
    assert run_score(c, dyn, ["a", "b"]) == [80, 80]
    c.forget(info(c, name="r4").uid)
    assert run_score(c, dyn, ["a", "b"]) == [80, 90]


def test_hot_value_annotation_from_cranes_controller() -> None:
    c = cluster(
        node("annotated", loads(0.1, **{HOT_VALUE_KEY: 2})),
        node("stale-hot", {**loads(0.1), HOT_VALUE_KEY: crane(2, age=300)}),  # valid 5 minutes only
        node("clamped", loads(0.1, **{HOT_VALUE_KEY: 20})),
    )
    assert run_score(c, plugin(c), ["annotated", "stale-hot", "clamped"]) == [70, 90, 0]


def test_local_and_annotated_hot_values_are_not_added() -> None:
    c = cluster(node("a", loads(0.1, **{HOT_VALUE_KEY: 1})))
    dyn = plugin(c)
    for i in range(4):
        dyn.post_bind(CycleState(), info(c, name=f"r{i}"), "a")  # local hot: floor(4/5) + floor(4/2) = 2
    assert run_score(c, dyn, ["a"]) == [70]  # max(20, 10), not 30


def test_profiles_share_one_hot_value_store() -> None:
    c = cluster(node("a", loads(0.1)))
    handle = Handle(cache=c)
    one = Dynamic(DynamicArgs(), handle, policy=default_policy(), clock=lambda: NOW)
    two = Dynamic(DynamicArgs(), handle, policy=default_policy(), clock=lambda: NOW)
    assert one.hot_values is two.hot_values
    one.post_bind(CycleState(), info(c, name="x"), "a")
    two.post_bind(CycleState(), info(c, name="y"), "a")
    assert run_score(c, one, ["a"]) == run_score(c, two, ["a"]) == [80]


def test_rebuild_hot_values_from_events() -> None:
    c = cluster(node("a", loads(0.1)))
    dyn = plugin(c)
    event = {"type": "Normal", "reason": "Scheduled", "lastTimestamp": "2023-10-17T07:09:50Z"}
    events = [{**event, "message": f"Successfully assigned default/p{i} to a"} for i in range(2)]
    assert dyn.rebuild_hot_values(events) == 2
    assert run_score(c, dyn, ["a"]) == [80]


def test_explain() -> None:
    c = cluster(node("a", loads(0.7, **{HOT_VALUE_KEY: 1})))
    report = plugin(c).explain(c.table, "a")
    assert report["overloaded_by"] == CPU5
    assert report["metrics"][CPU5] == {"value": 0.7, "timestamp": NOW - 60, "fresh": True}
    assert report["metrics"][HOT_VALUE_KEY]["fresh"] is True
    assert (report["load_score"], report["annotation_hot_penalty"], report["score"]) == (30, 10, 20)
    with pytest.raises(KeyError):
        plugin(c).explain(c.table, "nope")


# --- construction -------------------------------------------------------------------------------------------


def test_args_model_and_errors() -> None:
    c = cluster(node("a"))
    dyn = Dynamic(dynamic_args({"annotationTimeZone": "UTC"}), Handle(cache=c), policy=default_policy())
    assert str(dyn.zone) == "UTC" and dyn.name == "Dynamic" and dyn.scores_in_range
    # The args model is the one place args are checked (the configuration loader reports these).
    errors = dynamic_args({"loadSource": "x"}).validate_args("args")
    assert any(re.search(r"args.loadSource: Unsupported value", str(e)) for e in errors)
    with pytest.raises(ValidationError):
        DynamicArgs.model_validate(42)


def test_events_to_register() -> None:
    c = cluster(node("a"))
    assert ClusterEvent("Node", "UpdateNodeAnnotation") in plugin(c).events_to_register()


def test_direct_mode_reads_the_shared_store() -> None:
    c = cluster(node("a"), node("b"))
    handle = Handle(cache=c)
    args = {"loadSource": "prometheus", "promeAddr": "http://prom:9090"}
    dyn = Dynamic(dynamic_args(args), handle, policy=default_policy(), clock=lambda: NOW)
    store = handle.singletons.find(InMemoryLoadStore)
    assert isinstance(store, InMemoryLoadStore)
    store.update_many((n, m, 0.8 if n == "a" else 0.2, NOW - 30) for n in ("a", "b") for m in ALL_METRICS)
    assert run_filter(c, dyn, ["a", "b"]) == {"a": [overload_reason(CPU5, "a")]}
    assert run_score(c, dyn, ["a", "b"]) == [19, 80]  # (1 - 0.8) is 0.19999...


# --- against a transliteration of crane's Go code -----------------------------------------------------------


def crane_filter(annotations: dict[str, str], policy: DynamicSchedulerPolicy, now: float) -> str | None:
    for p in policy.spec.predicate:
        active = policy.active_duration(p.name)
        if active is None:
            continue
        usage = read_usage(annotations, p.name, active, SHANGHAI, now)
        if usage is not None and p.max_limit_percent != 0 and usage > p.max_limit_percent:
            return p.name
    return None


def crane_score(annotations: dict[str, str], policy: DynamicSchedulerPolicy, now: float) -> int:
    score = 0
    if policy.spec.priority:
        total = weight = 0.0
        for p in policy.spec.priority:
            part = 0.0
            active = policy.active_duration(p.name)
            usage = None if active is None else read_usage(annotations, p.name, active, SHANGHAI, now)
            if usage is not None:
                part = (1.0 - usage) * p.weight * 100.0
            weight += p.weight
            total += part
        score = int(total / weight)
    hot = read_usage(annotations, HOT_VALUE_KEY, 300.0, SHANGHAI, now) or 0.0
    return min(max(score - int(hot * 10), 0), 100)


_ANNOTATION = st.one_of(
    st.none(),
    st.builds(crane, st.floats(0, 1.5) | st.sampled_from([0.0, 0.65, 0.75, 1.0]), st.floats(0, 12000)),
    st.sampled_from(["oops", "0.5", "-0.5,2023-10-17T15:04:32Z", "0.5,2023-10-17T15:09:59Z"]),
)
_NODE = st.fixed_dictionaries({m: _ANNOTATION for m in ALL_METRICS}).map(
    lambda d: {k: v for k, v in d.items() if v is not None}
)
_HOT = st.one_of(st.none(), st.builds(crane, st.integers(0, 12), st.floats(0, 400)))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(_NODE, _HOT), min_size=1, max_size=12))
def test_vectorised_filter_and_score_agree_with_crane(nodes: list[tuple[dict[str, str], str | None]]) -> None:
    policy = default_policy()
    annotated = []
    for metrics, hot in nodes:
        annotated.append({**metrics, **({HOT_VALUE_KEY: hot} if hot else {})})
    c = cluster(*(node(f"n{i}", a) for i, a in enumerate(annotated)))
    dyn = Dynamic(
        DynamicArgs(), Handle(cache=c), policy=policy, clock=lambda: NOW, hot_values=HotValueStore()
    )
    names = [f"n{i}" for i in range(len(annotated))]
    rejected = run_filter(c, dyn, names)
    for name, on_node in zip(names, annotated, strict=True):
        metric = crane_filter(on_node, policy, NOW)
        assert rejected.get(name) == (None if metric is None else [overload_reason(metric, name)])
    assert run_score(c, dyn, names) == [crane_score(a, policy, NOW) for a in annotated]
