"""A failing cycle's diagnosis kept as status groups over slots (``NodeToStatus.record``) against the per-node map
it replaces: on random writes (overlapping ones included) the nodes and statuses in their order, the counts per
reason, the unresolvable nodes, the nodes preemption considers, one node's status and the FitError message are
those of a ``dict`` written name by name; and whole cycles with preemption (nominated node, victims, messages)
are the same with ``NodeToStatus.grouped`` on and off."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import itertools
import random
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_default_preemption import node, pod
from test_preemption_fast_path import build, clusters

from kubesched.scheduler.cache import NodeTable
from kubesched.scheduler.framework import Code, CycleState, NodeToStatus, Status, fit_error_message

REASONS = ("Insufficient cpu", "Insufficient memory", "node(s) had untolerated taint(s)", "too many pods")
PLUGINS = ("NodeResourcesFit", "TaintToleration", "NodeAffinity")


# --- the reference: one map entry per node, written name by name ---------------------------------------------


def reference_counts(by_node: dict[str, Status]) -> dict[str, int]:
    values = by_node.values()
    sizes = collections.Counter(map(id, values))
    distinct = {id(st): st for st in values}
    counts: dict[str, int] = {}
    for key, n in sizes.items():
        for reason in distinct[key].reasons:
            counts[reason] = counts.get(reason, 0) + n
    return counts


def reference_preemption_slots(table: NodeTable, by_node: dict[str, Status]) -> list[int]:
    """Slots, ascending, of the nodes of ``table`` now whose status is UNSCHEDULABLE."""
    return sorted(
        slot
        for name, st in by_node.items()
        if st.code == Code.UNSCHEDULABLE and (slot := table.index.get(name)) is not None
    )


# --- random writes ---------------------------------------------------------------------------------------------


@st.composite
def statuses(draw: st.DrawFn) -> Status:
    code = draw(st.sampled_from((Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)))
    reasons = draw(st.lists(st.sampled_from(REASONS), max_size=3, unique=True))
    return Status(code, reasons, draw(st.sampled_from(PLUGINS)))


@st.composite
def scenarios(draw: st.DrawFn) -> dict[str, Any]:
    n = draw(st.integers(1, 24))
    gone = draw(st.sets(st.integers(0, n - 1), max_size=n - 1))
    live = [i for i in range(n) if i not in gone]
    pool = draw(st.lists(statuses(), min_size=1, max_size=5))  # shared objects: identity matters
    ops: list[tuple[str, Any]] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(("group", "group", "pairs")))
        chosen = draw(st.permutations(live))[: draw(st.integers(0, len(live)))]
        if kind == "group":
            ops.append((kind, (draw(st.integers(0, len(pool) - 1)), chosen)))
        else:  # pairs may repeat a slot and change status from one pair to the next
            pairs = [(s, draw(st.integers(0, len(pool) - 1))) for s in chosen]
            pairs += [(s, draw(st.integers(0, len(pool) - 1))) for s in draw(st.lists(st.sampled_from(live)))]
            ops.append((kind, pairs))
    return {
        "n": n,
        "gone": sorted(gone),
        "pool": pool,
        "ops": ops,
        "map_after": draw(st.none() | st.integers(0, len(ops))),
        "change": draw(st.sampled_from(("none", "remove", "replace"))),
    }


def make_table(c: dict[str, Any]) -> NodeTable:
    table = NodeTable()
    for i in range(c["n"]):
        table.add_node(node(f"n{i}"))
    for i in c["gone"]:
        table.remove_node(f"n{i}")
    return table


def apply(c: dict[str, Any], table: NodeTable, diag: NodeToStatus, ref: dict[str, Status]) -> None:
    pool: list[Status] = c["pool"]
    for k, (kind, arg) in enumerate(c["ops"]):
        if k == c["map_after"]:
            _ = diag.by_node  # from here on the map is the truth
        if kind == "group":
            i, slots = arg
            diag.record(np.asarray(slots, dtype=np.intp), pool[i])
            ref.update((table.names[s] or "", pool[i]) for s in slots)
        else:
            diag.record_pairs((s, pool[i]) for s, i in arg)
            ref.update((table.names[s] or "", pool[i]) for s, i in arg)


def change_nodes(c: dict[str, Any], table: NodeTable) -> None:
    """The set of nodes changes between the cycle and its readers: a node goes, another may take its slot."""
    live = [name for name in table.index]
    if c["change"] == "none" or not live:
        return
    table.remove_node(live[0])
    if c["change"] == "replace":
        table.add_node(node("newcomer"))


@contextlib.contextmanager
def per_node_map() -> Iterator[None]:
    """The reference path: every diagnosis a per-node map."""
    NodeToStatus.grouped = False
    try:
        yield
    finally:
        NodeToStatus.grouped = True


def identities(pairs: Iterator[tuple[str, Status]] | Any) -> list[tuple[str, int]]:
    return [(name, id(st)) for name, st in pairs]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_groups_read_as_the_per_node_map(c: dict[str, Any]) -> None:
    table = make_table(c)
    diag = NodeToStatus.over(table)
    ref: dict[str, Status] = {}
    apply(c, table, diag, ref)
    change_nodes(c, table)

    # Per-node views, before anything builds the map.
    names = [f"n{i}" for i in range(c["n"])] + ["newcomer", "absent"]
    for name in names:
        assert diag.status_of(name) is ref.get(name)
    assert diag.preemption_slots(table).tolist() == reference_preemption_slots(table, ref)
    assert diag.preemption_slots(table).dtype == np.intp
    assert diag.unresolvable_nodes == {
        n for n, s in ref.items() if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    }
    assert len(diag) == len(ref)
    assert identities(diag.items()) == identities(ref.items())
    filtered = diag.filtered()
    assert list(filtered.items()) == [(n, list(s.reasons)) for n, s in ref.items()]

    diag.tally()
    want = reference_counts(ref)
    assert list(diag.counts.items()) == list(want.items())
    assert fit_error_message(c["n"], diag, "preemption: x") == fit_error_message(
        c["n"], NodeToStatus(counts=want), "preemption: x"
    )
    # The whole map last: the same entries in the same order.
    assert identities(diag.by_node.items()) == identities(ref.items())
    assert diag.preemption_slots(table).tolist() == reference_preemption_slots(table, ref)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_the_reference_path_is_the_per_node_map(c: dict[str, Any]) -> None:
    """``grouped = False``: every write goes to the map; views read the same."""
    table = make_table(c)
    with per_node_map():
        diag = NodeToStatus.over(table)
    ref: dict[str, Status] = {}
    apply(c, table, diag, ref)
    assert identities(diag.by_node.items()) == identities(ref.items())
    diag.tally()
    assert list(diag.counts.items()) == list(reference_counts(ref).items())
    assert diag.preemption_slots(table).tolist() == reference_preemption_slots(table, ref)


def test_a_node_written_twice_keeps_its_place_and_takes_the_new_status() -> None:
    table = NodeTable()
    for i in range(6):
        table.add_node(node(f"n{i}"))
    first = Status(Code.UNSCHEDULABLE, ["Insufficient cpu"], "NodeResourcesFit")
    then = Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint(s)"], "TaintToleration"
    )
    diag = NodeToStatus.over(table)
    diag.record(np.array([3], dtype=np.intp), first)  # the nominated node, checked first
    diag.record(np.array([4, 5, 0, 1, 2, 3], dtype=np.intp), then)  # the main pass from offset 4
    assert [name for name, _ in diag.items()] == ["n3", "n4", "n5", "n0", "n1", "n2"]
    assert diag.status_of("n3") is then
    assert diag.preemption_slots(table).tolist() == []
    diag.tally()
    assert diag.counts == {"node(s) had untolerated taint(s)": 6}
    assert fit_error_message(6, diag) == "0/6 nodes are available: 6 node(s) had untolerated taint(s)."


def test_record_needs_a_table() -> None:
    with pytest.raises(ValueError, match=r"NodeToStatus\.over"):
        NodeToStatus().record(np.array([0], dtype=np.intp), Status(Code.UNSCHEDULABLE))


def test_a_map_given_by_name_still_serves_every_view() -> None:
    table = NodeTable()
    for i in range(3):
        table.add_node(node(f"n{i}"))
    u = Status(Code.UNSCHEDULABLE, ["Insufficient cpu"])
    r = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) didn't match Pod's node affinity/selector"])
    diag = NodeToStatus(by_node={"n2": u, "n0": r, "gone": u})
    assert diag.preemption_slots(table).tolist() == [2]
    assert diag.status_of("n0") is r and diag.status_of("n1") is None
    assert diag.unresolvable_nodes == {"n0"}
    diag.tally()
    assert diag.counts == {"Insufficient cpu": 2, "node(s) didn't match Pod's node affinity/selector": 1}


# --- whole cycles: groups on and off ----------------------------------------------------------------------------


async def cycles(c: dict[str, Any], record: bool) -> list[Any]:
    """Each preemptor (and each pod already nominated somewhere) through a cycle and PostFilter, offline (victims
    leave at once), nominated as the cycle does; everything the diagnosis feeds, per cycle."""
    env = build(c, True)
    env.plugin.rng = random.Random(7)  # type: ignore[assignment]
    table = env.cache.table
    seen: list[Any] = []
    for spec in [*c["nominated"], *c["preemptors"], *c["preemptors"]]:
        pi = env.info(spec)
        result = env.fw.schedule(CycleState(), pi, record_scores=record)
        diag = result.diagnosis
        before = (
            result.node,
            result.status.code,
            result.status.reasons,
            result.evaluated,
            None if result.filtered is None else list(result.filtered.items()),
            list(diag.counts.items()),
            sorted(diag.plugins),
            diag.preemption_slots(table).tolist(),
        )
        if result.node is not None or result.status.code == Code.ERROR:
            seen.append(before)
            continue
        nominated, status = await env.fw.run_post_filter(CycleState(), pi, diag)
        if nominated:
            env.nominator.add_nominated(pi, nominated)
        seen.append(
            (
                before,
                nominated,
                status.code,
                status.reasons,
                fit_error_message(table.num_nodes, diag, status.message()),
                sorted(diag.unresolvable_nodes),
                [(n, s.code, s.reasons, s.plugin) for n, s in diag.by_node.items()],
                {n: list(table.pods_on(s)) for n, s in table.index.items()},
            )
        )
    return seen


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters(), st.booleans())
def test_cycles_and_preemption_are_the_same_with_groups_and_with_the_map(
    c: dict[str, Any], record: bool
) -> None:
    grouped = asyncio.run(cycles(c, record))
    with per_node_map():
        mapped = asyncio.run(cycles(c, record))
    assert grouped == mapped


def test_a_failed_cycle_records_groups_not_nodes() -> None:
    """The benchmark's shape: the nodes rejected alike are one group per Filter chunk, whatever their number."""
    env = build(
        {
            "nodes": [node(f"n{i}", ("2", "1000")) for i in range(300)],
            "pods": [pod(f"low{i}", req=("1500m", "10"), on=f"n{i}") for i in range(300)],
            "nominated": [],
            "pdbs": [],
            "args": None,
            "stretch": 64,
        },
        True,
    )
    pi = env.info(pod("high", req=("1", "10"), priority=10))
    result = env.fw.schedule(CycleState(), pi)
    diag = result.diagnosis
    assert 1 <= len(diag._groups) <= 3 and diag._by_node is None
    assert len(diag) == 300
    assert result.status.reasons == ["0/300 nodes are available: 300 Insufficient cpu."]
    assert diag.preemption_slots(env.cache.table).tolist() == env.cache.table.slots().tolist()
    assert diag._by_node is None  # no view above needed the per-node map


def test_pairs_of_one_status_are_one_group() -> None:
    table = NodeTable()
    for i in range(4):
        table.add_node(node(f"n{i}"))
    s = Status(Code.UNSCHEDULABLE, ["Insufficient cpu"])
    diag = NodeToStatus.over(table)
    diag.record_pairs(zip([2, 0, 1], itertools.repeat(s)))
    assert len(diag._groups) == 1 and diag._groups[0][1].tolist() == [2, 0, 1]
