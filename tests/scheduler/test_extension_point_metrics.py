"""``scheduler_framework_extension_point_duration_seconds`` as the framework records it: one observation per run of
an extension point, labelled with the code of the Status the run answered (ERROR when a plugin raised), and no
series for a point that never ran. The framework binds its observers once; the oracle here is the general rule
(the code of the returned Status, ERROR on an exception) applied to every call."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import (
    Catalogue,
    Code,
    CycleState,
    Filtered,
    Framework,
    Handle,
    PluginDefinition,
    Status,
)
from kubesched.scheduler.framework.interface import NodeToStatus
from kubesched.scheduler.metrics import SchedulerMetrics, status_label
from kubesched.scheduler.podinfo import PodInfo

POINTS = ("PreFilter", "Filter", "PreScore", "Score", "Reserve", "Permit", "PreBind", "Bind", "PostBind")
# What a plugin answers at a point: a status code, or "raise".
ANSWERS = ("ok", "unschedulable", "error", "skip", "wait", "raise")


class Boom(Exception):
    pass


def status_for(answer: str) -> Status:
    if answer == "ok":
        return Status.success()
    if answer == "unschedulable":
        return Status.unschedulable("no")
    if answer == "error":
        return Status.error("broken")
    if answer == "skip":
        return Status.skip()
    if answer == "wait":
        return Status(Code.WAIT)
    raise Boom(answer)


class Plugin:
    """Every point; ``answers[point]`` says how the next call of that point answers."""

    name = "P"

    def __init__(self) -> None:
        self.answers: dict[str, str] = {}

    def _status(self, point: str) -> Status:
        return status_for(self.answers.get(point, "ok"))

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Any) -> tuple[None, Status]:
        return None, self._status("PreFilter")

    def filter(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Filtered:
        if self.answers.get("Filter") == "raise":
            raise Boom("filter")
        return Filtered.all_pass(len(idx))

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Status:
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> np.ndarray:
        return np.zeros(len(idx), dtype=np.int64)

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return self._status("Reserve")

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        pass

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        return self._status("Permit"), 1.0

    async def pre_bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return self._status("PreBind")

    async def bind(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        return self._status("Bind")

    def post_bind(self, state: CycleState, pod: PodInfo, node: str) -> None:
        if self.answers.get("PostBind") == "raise":
            raise Boom("post bind")  # logged and swallowed: PostBind still succeeds

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: Any, diagnosis: NodeToStatus
    ) -> tuple[str | None, Status]:
        return None, self._status("PostFilter")


def setup() -> tuple[Framework, Plugin, SchedulerMetrics, PodInfo]:
    cache = Cache()
    for name in ("a", "b"):
        cache.on_node_add(
            {
                "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
            }
        )
    plugin = Plugin()
    catalogue = Catalogue([PluginDefinition("P", lambda args, handle: plugin, plugin_type=Plugin)])
    points = {p: ["P"] for p in (*POINTS, "PostFilter")}
    metrics = SchedulerMetrics()
    fw = Framework.from_plugins(catalogue, points, {}, Handle(cache=cache, metrics=metrics), seed=1)
    pod = {
        "metadata": {"name": "p", "namespace": "default", "uid": "p"},
        "spec": {"containers": [{"name": "c", "image": "pause"}]},
    }
    return fw, plugin, metrics, PodInfo.from_pod(pod, cache.res)


def recorded(metrics: SchedulerMetrics) -> Counter[tuple[str, str]]:
    out: Counter[tuple[str, str]] = Counter()
    for family in metrics.registry.collect():
        if family.name != "scheduler_framework_extension_point_duration_seconds":
            continue
        for sample in family.samples:
            if sample.name.endswith("_count"):
                assert sample.labels["profile"] == "default-scheduler"
                out[sample.labels["extension_point"], sample.labels["status"]] = int(sample.value)
    return out


def code_of(result: Any) -> Code:
    """The general rule: the code of the Status a run answered, alone or first in a tuple; none is success."""
    if isinstance(result, Status):
        return result.code
    if isinstance(result, tuple):
        for item in result:
            if isinstance(item, Status):
                return item.code
    return Code.SUCCESS


async def run_point(fw: Framework, point: str, pod: PodInfo) -> Any:
    state = CycleState()
    if point == "PreFilter":
        return fw.run_pre_filter(state, pod)
    if point == "Filter":
        return fw._find_feasible(state, pod, fw.nodes, fw.nodes.slots(), 0, 2)
    if point == "Reserve":
        return fw.run_reserve(state, pod, "a")
    if point == "Unreserve":
        return fw.run_unreserve(state, pod, "a")
    if point == "Permit":
        return fw.run_permit(state, pod, "a")
    if point == "PreBind":
        return await fw.run_pre_bind(state, pod, "a")
    if point == "Bind":
        return await fw.run_bind(state, pod, "a")
    if point == "PostBind":
        return fw.run_post_bind(state, pod, "a")
    assert point == "PostFilter"
    return await fw.run_post_filter(state, pod, NodeToStatus())


RUNNABLE = (
    "PreFilter",
    "Filter",
    "Reserve",
    "Unreserve",
    "Permit",
    "PreBind",
    "Bind",
    "PostBind",
    "PostFilter",
)


@given(st.lists(st.tuples(st.sampled_from(RUNNABLE), st.sampled_from(ANSWERS)), max_size=30))
def test_each_run_is_observed_with_the_code_it_answered(calls: list[tuple[str, str]]) -> None:
    fw, plugin, metrics, pod = setup()
    expected: Counter[tuple[str, str]] = Counter()

    async def run_all() -> None:
        for point, answer in calls:
            plugin.answers = {point: answer}
            try:
                result = await run_point(fw, point, pod)
            except Exception:
                code = Code.ERROR
            else:
                code = code_of(result)
            expected[point, status_label(code)] += 1

    asyncio.run(run_all())
    assert recorded(metrics) == expected


def test_a_cycle_observes_its_points_once_and_no_others() -> None:
    fw, _, metrics, pod = setup()
    state = CycleState()
    for _ in range(3):
        result = fw.schedule(state, pod)
        assert result.node is not None
        assert fw.run_reserve(state, pod, result.node).ok
        assert fw.run_permit(state, pod, result.node)[0].ok
        assert asyncio.run(fw.run_pre_bind(state, pod, result.node)).ok
        bound = asyncio.run(fw.run_bind(state, pod, result.node))
        assert bound.ok and bound.plugin == "P"
        fw.run_post_bind(state, pod, result.node)
        state = CycleState()
    assert recorded(metrics) == {(point, "Success"): 3 for point in POINTS}
    text = metrics.exposition().decode()
    assert 'extension_point="PostFilter"' not in text and 'extension_point="Unreserve"' not in text


def test_without_metrics_nothing_is_recorded_and_nothing_fails() -> None:
    fw, plugin, _, pod = setup()
    bare = Framework.from_plugins(
        Catalogue([PluginDefinition("P", lambda args, handle: plugin, plugin_type=Plugin)]),
        {p: ["P"] for p in POINTS},
        {},
        Handle(cache=fw.handle.cache),
        seed=1,
    )
    result = bare.schedule(CycleState(), pod)
    assert result.node is not None and bare.run_reserve(CycleState(), pod, result.node).ok
