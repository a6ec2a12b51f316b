"""Cheaper per-cycle paths of the framework runtime against the general code they replace: the pick of the best
node (ties at random), a successful cycle's result (no diagnosis built until read), PreFilter without a
restriction."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import (
    Catalogue,
    CycleState,
    Filtered,
    Framework,
    Handle,
    NodeToStatus,
    PluginDefinition,
    ScheduleResult,
    Status,
)
from kubesched.scheduler.framework.runtime import _pick_best
from kubesched.scheduler.podinfo import PodInfo


def reference_pick(total: np.ndarray, rng: random.Random) -> int:
    """The pick as it was written before: count the ties, draw among ``flatnonzero``'s positions."""
    pick = int(total.argmax())
    ties = total == total[pick]
    n_best = int(np.count_nonzero(ties))
    if n_best > 1:
        pick = int(np.flatnonzero(ties)[rng.randrange(n_best)])
    return pick


@given(
    st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=40),
    st.integers(min_value=0, max_value=2**32),
)
def test_pick_best_draws_as_the_general_code(values: list[int], seed: int) -> None:
    total = np.asarray(values, dtype=np.int64)
    fast_rng, ref_rng = random.Random(seed), random.Random(seed)
    for _ in range(3):  # the generators stay in step too
        assert _pick_best(total, fast_rng) == reference_pick(total, ref_rng)
    assert fast_rng.random() == ref_rng.random()


class Plugin:
    """PreFilter (no restriction), Filter (all pass) and Score (node slot) for every pod."""

    name = "P"

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Any) -> tuple[None, Status]:
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Filtered:
        return Filtered.all_pass(len(idx))

    def score(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> np.ndarray:
        return np.asarray(idx, dtype=np.int64)


def framework() -> tuple[Framework, PodInfo]:
    cache = Cache()
    for name in ("a", "b", "c"):
        cache.on_node_add(
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            }
        )
    plugin = Plugin()
    catalogue = Catalogue([PluginDefinition("P", lambda args, handle: plugin, plugin_type=Plugin)])
    points = {"PreFilter": ["P"], "Filter": ["P"], "Score": ["P"]}
    fw = Framework.from_plugins(
        catalogue, points, {}, Handle(cache=cache), seed=1, opportunistic_batching=False
    )
    pod = {
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {"containers": [{"name": "c"}]},
    }
    return fw, PodInfo.from_pod(pod, cache.res)


def test_a_successful_cycle_reads_as_before() -> None:
    fw, pod = framework()
    result = fw.schedule(CycleState(), pod)
    assert result.ok and result.node == "c"  # the highest slot scores best
    assert result.status.ok and result.status.reasons == [] and result.status.plugin == ""
    assert (result.evaluated, result.feasible) == (3, 3)
    assert result.scores is None and result.filtered is None and result.total_scores is None
    # No diagnosis was built; reading one gives an empty map, which stays the one written to.
    diagnosis = result.diagnosis
    assert isinstance(diagnosis, NodeToStatus) and diagnosis.by_node == {} and diagnosis.counts == {}
    assert result.diagnosis is diagnosis
    replaced = NodeToStatus(by_node={"a": Status.unschedulable("x")})
    result.diagnosis = replaced
    assert result.diagnosis is replaced
    assert ScheduleResult(None, Status()).diagnosis.by_node == {}


def test_pre_filter_without_a_restriction_answers_no_result() -> None:
    fw, pod = framework()
    result, status, plugins = fw.run_pre_filter(CycleState(), pod)
    assert result is None and status.ok and plugins == set()


class Rejecting:
    """Filter: rejects the nodes named in ``reject``."""

    name = "R"

    def __init__(self) -> None:
        self.reject: set[str] = set()

    def filter(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Filtered:
        ok = np.array([nodes.names[s] not in self.reject for s in idx.tolist()], dtype=bool)
        return Filtered.from_mask(ok, "rejected")


@given(
    st.integers(min_value=1, max_value=40),
    st.data(),
)
def test_find_feasible_walks_the_nodes_as_a_sequential_search(n: int, data: st.DataObject) -> None:
    cache = Cache()
    for i in range(n):
        cache.on_node_add(
            {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}
        )
    plugin = Rejecting()
    catalogue = Catalogue([PluginDefinition("R", lambda args, handle: plugin, plugin_type=Rejecting)])
    fw = Framework.from_plugins(catalogue, {"Filter": ["R"]}, {}, Handle(cache=cache), seed=1)
    pod = PodInfo.from_pod(
        {"metadata": {"name": "p", "namespace": "d", "uid": "p"}, "spec": {"containers": [{"name": "c"}]}},
        cache.res,
    )
    table = cache.table
    for _ in range(3):  # the same candidates again: the wrapped copy is reused
        plugin.reject = {f"n{i}" for i in data.draw(st.sets(st.integers(0, n - 1)))}
        start = data.draw(st.integers(0, n - 1))
        num_to_find = data.draw(st.integers(1, n))
        candidates = table.slots() if data.draw(st.booleans()) else table.slots().copy()
        feasible, rejections, extra, done = fw._find_feasible(
            CycleState(), pod, table, candidates, start, num_to_find
        )
        # The nodes in the order of the search (from ``start``, wrapping around); the first ``done`` were walked:
        # those that pass are the feasible ones (the first ``num_to_find`` that pass anywhere), the others are the
        # rejections, in that order.
        order = [int(candidates[(start + i) % n]) for i in range(n)]
        passing = [slot for slot in order if table.names[slot] not in plugin.reject]
        walked = order[:done]
        assert feasible.tolist() == passing[:num_to_find]
        assert feasible.tolist() == [slot for slot in walked if table.names[slot] not in plugin.reject]
        assert [s for r in rejections for s in r.slots.tolist()] == [
            slot for slot in walked if table.names[slot] in plugin.reject
        ]
        assert extra == []


class Constant:
    """Score: the same cached array every cycle (which the framework must not write to)."""

    def __init__(self, name: str, values: list[int]) -> None:
        self.name = name
        self.values = np.asarray(values, dtype=np.int64)

    def score(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> np.ndarray:
        return self.values[: len(idx)]


@given(
    st.lists(
        st.tuples(st.integers(0, 100), st.integers(0, 100), st.integers(0, 100)), min_size=2, max_size=6
    ),
    st.integers(1, 5),
)
def test_scores_sum_by_weight_and_leave_the_plugins_arrays_alone(
    rows: list[tuple[int, int, int]], weight: int
) -> None:
    cache = Cache()
    for i in range(len(rows)):
        cache.on_node_add(
            {"metadata": {"name": f"n{i}"}, "status": {"allocatable": {"cpu": "4", "pods": "110"}}}
        )
    plugins = [Constant(f"S{k}", [row[k] for row in rows]) for k in range(3)]
    before = [p.values.copy() for p in plugins]
    catalogue = Catalogue(
        [PluginDefinition(p.name, lambda args, handle, p=p: p, plugin_type=Constant) for p in plugins]
    )
    points = {"Score": [("S0", 1), ("S1", weight), ("S2", 1)]}
    fw = Framework.from_plugins(
        catalogue, points, {}, Handle(cache=cache), seed=1, opportunistic_batching=False
    )
    pod = PodInfo.from_pod(
        {"metadata": {"name": "p", "namespace": "d", "uid": "p"}, "spec": {"containers": [{"name": "c"}]}},
        cache.res,
    )
    result = fw.schedule(CycleState(), pod, record_scores=True)
    totals = [row[0] + weight * row[1] + row[2] for row in rows]
    assert result.total_scores == {f"n{i}": t for i, t in enumerate(totals)}
    assert result.node is not None and result.total_scores[result.node] == max(totals)
    for p, values in zip(plugins, before, strict=True):
        assert p.values.tolist() == values.tolist()
    total, _ = fw._score_nodes(CycleState(), pod, cache.table, cache.table.slots(), False)
    assert total.dtype == np.int64 and total.tolist() == totals
