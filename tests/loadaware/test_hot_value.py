"""HotValueStore: crane's hot-value formula over time windows, dedup by pod, GC, and seeding from events."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from la_helpers import NOW, cluster, node

from kubesched.loadaware.hotvalue import HotValueStore, binding_from_event, hot_value_of
from kubesched.loadaware.policy import HotValuePolicy, default_policy

WINDOWS = default_policy().spec.hot_value  # floor(n5m / 5) + floor(n1m / 2)


def iso(t: float, micro: bool = False) -> str:
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ"
    return datetime.fromtimestamp(t, tz=UTC).strftime(fmt)


def store_with(*ages: float, node_name: str = "a") -> HotValueStore:
    store = HotValueStore()
    for i, age in enumerate(ages):
        store.record(node_name, f"default/p{i}", NOW - age)
    return store


def test_formula() -> None:
    assert hot_value_of([4, 1], [5, 2]) == 0
    assert hot_value_of([5, 2], [5, 2]) == 2
    assert hot_value_of([11, 5], [5, 2]) == 4


def test_default_windows() -> None:
    assert store_with(10).hot_value("a", WINDOWS, NOW) == 0
    assert store_with(10, 20).hot_value("a", WINDOWS, NOW) == 1  # two in the last minute
    assert store_with(10, 20, 90, 120, 200).hot_value("a", WINDOWS, NOW) == 2  # 5 in 5m, 2 in 1m
    assert store_with(90, 120, 200, 250, 299).hot_value("a", WINDOWS, NOW) == 1  # 5 in 5m, none in 1m
    assert store_with(10, 20).hot_value("b", WINDOWS, NOW) == 0


def test_windows_are_strict_like_cranes() -> None:
    store = store_with(60, 60)  # exactly one minute old: outside the 1m window
    assert store.count("a", 60, NOW) == 0
    assert store.count("a", 300, NOW) == 2
    assert store.hot_value("a", WINDOWS, NOW) == 0


def test_the_same_pod_counts_once() -> None:
    store = HotValueStore()
    store.record("a", "default/web-0", NOW - 5)
    store.record("a", "default/web-0", NOW - 1)
    assert len(store) == 1 and store.count("a", 60, NOW) == 1


def test_old_bindings_are_forgotten() -> None:
    store = store_with(10, 400)
    store.gc(NOW)
    assert len(store) == 1
    store.ensure_retention(3600)
    store.record("b", "default/x", NOW - 1000)
    store.gc(NOW)
    assert store.count("b", 3600, NOW) == 1
    store.ensure_retention(60)  # never shrinks
    assert store.retention == 3600
    store.gc(NOW + 4000)
    assert len(store) == 0


def test_hot_values_aligned_with_candidate_slots() -> None:
    c = cluster(node("a"), node("b"), node("c"))
    table = c.table
    store = store_with(1, 2, 3, 4)  # a: 4 in 1m -> 2
    store.record("b", "default/q", NOW - 1)
    store.record("gone", "default/r", NOW - 1)
    store.record("gone", "default/s", NOW - 2)  # a node not in the table is ignored
    idx = np.array([table.index["c"], table.index["a"], table.index["b"]], dtype=np.intp)
    assert store.hot_values(table, idx, WINDOWS, NOW).tolist() == [0, 2, 0]
    assert store.hot_values(table, idx, (), NOW).tolist() == [0, 0, 0]
    store.remove_node("a")
    assert store.hot_values(table, idx, WINDOWS, NOW).tolist() == [0, 0, 0]


# --- events -------------------------------------------------------------------------------------------------


def core_event(pod: str, node_name: str, when: float, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "type": "Normal",
        "reason": "Scheduled",
        "message": f"Successfully assigned {pod} to {node_name}",
        "count": 1,
        "lastTimestamp": iso(when),
        "firstTimestamp": iso(when),
        **extra,
    }


def new_event(pod: str, node_name: str, when: float) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "type": "Normal",
        "reason": "Scheduled",
        "note": f"Successfully assigned {pod} to {node_name}",
        "eventTime": iso(when, micro=True),
        "reportingController": "default-scheduler",
    }


def test_binding_from_event() -> None:
    assert binding_from_event(core_event("default/web-1", "n1", NOW - 30)) == (
        "n1",
        "default/web-1",
        NOW - 30,
    )
    assert binding_from_event(new_event("ns/p", "n2", NOW - 2.5)) == ("n2", "ns/p", NOW - 2.5)
    # events.k8s.io series: the last observation counts
    series = {**new_event("ns/p", "n2", NOW - 100), "series": {"count": 2, "lastObservedTime": iso(NOW - 7)}}
    assert binding_from_event(series) == ("n2", "ns/p", NOW - 7)
    # core/v1 event written by the new recorder: no lastTimestamp, eventTime set (crane: count == 0)
    micro = core_event("ns/p", "n3", 0, count=0, lastTimestamp=None, firstTimestamp=None)
    micro["eventTime"] = iso(NOW - 3, micro=True)
    assert binding_from_event(micro) == ("n3", "ns/p", NOW - 3)


def test_events_that_are_not_bindings() -> None:
    assert binding_from_event({**core_event("a/b", "n", NOW), "type": "Warning"}) is None
    assert binding_from_event({**core_event("a/b", "n", NOW), "reason": "FailedScheduling"}) is None
    assert binding_from_event({**core_event("a/b", "n", NOW), "message": "0/3 nodes are available"}) is None
    assert binding_from_event({**core_event("a/b/c", "n", NOW)}) is None
    assert (
        binding_from_event({**core_event("a/b", "n", NOW), "lastTimestamp": None, "firstTimestamp": "x"})
        is None
    )


def test_rebuild_from_events() -> None:
    store = HotValueStore()
    store.record("n1", "default/web-0", NOW - 20)  # already seen through PostBind
    events = [
        core_event("default/web-0", "n1", NOW - 20),  # the same binding: counted once
        core_event("default/web-1", "n1", NOW - 30),
        new_event("default/web-2", "n1", NOW - 200),
        core_event("default/web-3", "n2", NOW - 10),
        core_event("default/old", "n1", NOW - 900),  # older than the longest window
        {**core_event("default/web-4", "n2", NOW - 5), "type": "Warning"},
    ]
    assert store.rebuild_from_events(events, NOW) == 4
    assert store.count("n1", 300, NOW) == 3 and store.count("n1", 60, NOW) == 2
    assert store.hot_value("n1", WINDOWS, NOW) == 1
    assert store.count("n2", 300, NOW) == 1


# --- the incremental per-slot answer equals the per-node definition ----------------------------------------------

_NODES = [f"n{i}" for i in range(5)]
_op = st.one_of(
    st.tuples(st.just("bind"), st.sampled_from(_NODES), st.integers(0, 30), st.integers(0, 90)),
    st.tuples(st.just("ask"), st.just(""), st.just(0), st.integers(0, 90)),
    st.tuples(st.just("past"), st.sampled_from(_NODES), st.integers(0, 30), st.integers(0, 400)),
    st.tuples(st.just("drop"), st.sampled_from(_NODES), st.just(0), st.just(0.0)),
    st.tuples(st.just("node-"), st.sampled_from(_NODES), st.just(0), st.just(0.0)),
)


@settings(max_examples=150, deadline=None)
@given(
    ops=st.lists(_op, max_size=60),
    windows=st.sampled_from([((300, 5), (60, 2)), ((60, 1),), ((120, 3), (30, 1))]),
)
def test_hot_values_follow_the_definition(
    ops: list[tuple[str, str, int, int]], windows: tuple[tuple[int, int], ...]
) -> None:
    policies = [HotValuePolicy.model_validate({"timeRange": f"{r}s", "count": c}) for r, c in windows]
    cache = cluster(*(node(n) for n in _NODES))
    table = cache.table
    store = HotValueStore(retention=300)
    now = NOW
    for kind, name, pod, step in ops:
        if kind == "bind":
            now += step
            store.record(name, f"default/p{pod}", now)
        elif kind == "past":  # a Scheduled event from before, as a rebuild after a restart brings
            event = {
                "type": "Normal",
                "reason": "Scheduled",
                "message": f"Successfully assigned default/q{pod} to {name}",
                "eventTime": datetime.fromtimestamp(now - step, UTC).isoformat(),
            }
            store.rebuild_from_events([event], now)
        elif kind == "drop":
            store.remove_node(name)
        elif kind == "node-":  # the node leaves and comes back (new slot bookkeeping)
            cache.on_node_delete(node(name))
            cache.on_node_add(node(name))
        else:
            now += step
        idx = table.slots()
        got = store.hot_values(table, idx, policies, now)
        want = [store.hot_value(table.names[s] or "", policies, now) for s in idx.tolist()]
        assert got.tolist() == want
