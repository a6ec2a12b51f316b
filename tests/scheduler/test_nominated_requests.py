"""The nominated pods' requests as columns (``kubesched/scheduler/nominated.py``) against recounting the nominator
node by node, over random sequences of nominations, assumptions, bindings, node changes and what-ifs; and the
cycle's nominated-pods check with the columns against the check that asks the nominator node by node."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_default_preemption import node, pod
from test_preemption_fast_path import build, full_env, nominated_clusters

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import CycleState, runtime
from kubesched.scheduler.plugins.preemption_victims import nominated_rejections_in_bulk
from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.queue import Nominator

PRIORITIES = (-1, 0, 5, 10)
NODES = ("a", "b", "c", "d")


def recount(cache: Cache, nominator: Nominator, priority: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the columns must hold, from the nominator's pods node by node."""
    table = cache.table
    taken = np.zeros((table.capacity, table.width), dtype=np.int64)
    count = np.zeros(table.capacity, dtype=np.int64)
    ports = np.zeros(table.capacity, dtype=np.int64)
    for name, slot in table.index.items():
        for p in nominator.nominated_pods_for_node(name):
            if p.priority >= priority and table.pod_slot(p.uid) is None:
                taken[slot, : len(p.requests)] += p.requests
                count[slot] += 1
                ports[slot] += bool(p.host_ports)
    return taken, count, ports


ops = st.lists(
    st.tuples(
        st.sampled_from(("nominate", "unnominate", "assume", "forget", "node+", "node-", "whatif", "ask")),
        st.integers(0, 7),  # pod
        st.sampled_from(NODES),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops,
    st.lists(st.sampled_from(PRIORITIES), min_size=8, max_size=8),
    st.lists(st.booleans(), min_size=8, max_size=8),
)
def test_columns_follow_nominations_and_the_table(
    steps: list[tuple[str, int, str]], prios: list[int], ports: list[bool]
) -> None:
    cache = Cache()
    for name in NODES[:3]:
        cache.on_node_add(node(name))
    nominator = Nominator()
    pods: list[PodInfo] = []
    for i in range(8):
        extra: dict[str, Any] = {}
        if ports[i]:
            extra["containers"] = [
                {"name": "c", "image": "pause", "ports": [{"containerPort": 80, "hostPort": 80}]}
            ]
        pods.append(
            cache.pod_info(pod(f"p{i}", priority=prios[i], req=(f"{100 * (i + 1)}m", str(i)), **extra))
        )
    table = cache.table
    summary = nominator.requests_on(table) if steps and steps[0][0] == "ask" else None
    for op, i, name in steps:
        pi = pods[i]
        if op == "nominate":
            nominator.add_nominated(pi, name)
        elif op == "unnominate":
            nominator.delete_nominated(pi)
        elif op == "assume" and table.pod_slot(pi.uid) is None:
            table.add_pod(pi, name)
        elif op == "forget" and table.pod_slot(pi.uid) is not None:
            table.remove_pod(pi.uid)
        elif op == "node+" and name not in table.index:
            cache.on_node_add(node(name))
        elif op == "node-" and name in table.index:
            cache.on_node_delete(node(name))
        elif op == "whatif" and table.pod_slot(pi.uid) is None:
            table.add_pod(pi, name, notify=False)
            table.remove_pod(pi.uid, notify=False)
        if summary is None and op == "ask":
            summary = nominator.requests_on(table)
        if summary is not None:
            for priority in PRIORITIES:
                level = summary.level(priority)
                taken, count, with_ports = recount(cache, nominator, priority)
                assert (level.count == count).all()
                assert (level.ports == with_ports).all()
                assert (level.taken[:, : table.width] == taken).all()
                assert level.total == int(count.sum())
            for p in pods:
                own = summary.own(p.uid)
                slot = table.index.get(nominator.nominated_node(p.uid) or "")
                expected = slot is not None and table.pod_slot(p.uid) is None
                assert (own is not None) == expected
                if own is not None:
                    assert own.slot == slot and own.priority == p.priority


class PlainNominator:
    """The queue's nominator without its columns: the framework then asks it node by node."""

    def __init__(self, inner: Nominator) -> None:
        self.inner = inner

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]:
        return self.inner.nominated_pods_for_node(node_name)

    def nodes(self) -> list[str]:
        return self.inner.nodes()

    def nominated_node(self, uid: str) -> str | None:
        return self.inner.nominated_node(uid)


def _rejections(found: list[tuple[int, Any]] | None) -> Any:
    return None if found is None else [(slot, s.code, s.reasons, s.plugin) for slot, s in found]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nominated_clusters(), st.booleans())
def test_nominated_check_with_columns_matches_node_by_node(c: dict[str, Any], own_nominated: bool) -> None:
    """``Framework._nominated_rejections`` and the bulk check give the same rejections, in the same order, with
    the nominator's columns as asking it node by node (the preemptor itself nominated somewhere, or not)."""
    env = build(c, True)
    table = env.cache.table
    fw = env.fw
    columns = env.nominator
    plain = PlainNominator(columns)
    names = list(table.index)
    for k, spec in enumerate(c["preemptors"]):
        pi = env.info(spec)
        if own_nominated:
            columns.add_nominated(pi, names[k % len(names)])
        state = CycleState()
        _, status, _ = fw.run_pre_filter(state, pi)
        if not status.ok:
            continue
        slots = table.slots()
        fits, _ = fw.run_filters(state, pi, slots)
        alive = slots[fits]
        results = []
        for nominator in (plain, columns):
            fw.handle.nominator = nominator  # type: ignore[assignment]
            for bulk in (None, nominated_rejections_in_bulk):
                fw.bulk_nominated_check = bulk
                results.append(_rejections(fw._nominated_rejections(state, pi, table, alive)))
            in_bulk = _rejections(nominated_rejections_in_bulk(fw, state, pi, table, alive.tolist()))
            assert in_bulk is None or in_bulk == results[0]
        fw.handle.nominator = columns
        assert all(r == results[0] for r in results)


def _cycle_outcomes(c: dict[str, Any]) -> list[Any]:
    env = build(c, True)
    names = list(env.cache.table.index)
    out = []
    for k, spec in enumerate(c["preemptors"]):
        pi = env.info(spec)
        env.nominator.add_nominated(env.info(c["preemptors"][(k + 1) % len(c["preemptors"])]), names[0])
        for record in (False, True):
            r = env.fw.schedule(CycleState(), pi, record_scores=record)
            d = r.diagnosis
            out.append(
                (
                    r.node,
                    r.status.code,
                    r.status.reasons,
                    r.evaluated,
                    r.feasible,
                    [(n, s.code, s.reasons, s.plugin) for n, s in d.by_node.items()],
                    list(d.counts.items()),
                    sorted(d.unresolvable_nodes),
                    sorted(d.plugins),
                    None if r.filtered is None else list(r.filtered.items()),
                )
            )
    return out


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nominated_clusters())
def test_nominated_rejections_as_arrays_give_the_same_diagnosis(c: dict[str, Any]) -> None:
    """The Filter path keeps nominated-pods rejections with one status as arrays: the cycle's outcome and its
    diagnosis (statuses, in the order written, counts, unresolvable nodes, plugins) are those of (slot, status)
    pairs."""
    fast = _cycle_outcomes(c)
    original = runtime._nominated_as_rejections
    runtime._nominated_as_rejections = lambda *args: None  # type: ignore[assignment]
    try:
        pairs = _cycle_outcomes(c)
    finally:
        runtime._nominated_as_rejections = original
    assert fast == pairs


def test_many_nominated_nodes_take_the_array_path() -> None:
    """Preemption's shape: thousands of nodes freed for nominated pods reject the next pod with one status."""
    nodes = [node(f"n{i}", ("4", "16Gi")) for i in range(40)]
    env = full_env(nodes, [])
    for i in range(30):
        env.nominator.add_nominated(env.info(pod(f"nom{i}", priority=10, req=("3", "1Gi"))), f"n{i}")
    pi = env.info(pod("next", priority=10, req=("3", "1Gi")))
    state = env.prefiltered(pi)
    table = env.cache.table
    _, rejections, extra, _ = env.fw._find_feasible(state, pi, table, table.slots(), 0, 40)
    assert extra == []
    assert sum(len(r.slots) for r in rejections) == 30
