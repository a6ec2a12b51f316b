"""The shared scheduling cycle (``kubesched.scheduler.cycle``): success, Reserve/Permit rejections undone
(Unreserve, forget) and reported as upstream's FitError over one node, errors, PostFilter's nomination and
message, no nodes at all, and the algorithm latency."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.cycle import CycleFailure, scheduling_cycle
from kubesched.scheduler.framework import (
    Catalogue,
    Code,
    CycleState,
    Filtered,
    Framework,
    Handle,
    NodeToStatus,
    PluginDefinition,
    Status,
)
from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.queue import Nominator


def node(name: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str = "p") -> dict[str, Any]:
    container = {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [container]},
    }


class Plugin:
    """Filter (rejecting the nodes in ``reject``), Reserve, Permit and PostFilter, answering as told; logs calls."""

    def __init__(
        self, name: str, log: list[str], reject: frozenset[str] = frozenset(), **answers: Any
    ) -> None:
        self.name = name
        self.log = log
        self.reject = reject
        self.answers = answers

    def filter(self, state: CycleState, pod: PodInfo, nodes: Any, idx: np.ndarray) -> Filtered:
        bad = np.array([nodes.names[s] in self.reject for s in idx.tolist()], dtype=bool)
        return Filtered.from_mask(~bad, "rejected")

    def reserve(self, state: CycleState, pod: PodInfo, node: str) -> Status:
        self.log.append(f"{self.name}.reserve {node}")
        return self.answers.get("reserve", Status())

    def unreserve(self, state: CycleState, pod: PodInfo, node: str) -> None:
        self.log.append(f"{self.name}.unreserve {node}")

    def permit(self, state: CycleState, pod: PodInfo, node: str) -> tuple[Status, float]:
        self.log.append(f"{self.name}.permit {node}")
        return self.answers.get("permit", (Status(), 0.0))

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: Any, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        self.log.append(f"{self.name}.post_filter {sorted(statuses.by_node)}")
        return self.answers.get("post_filter", (None, Status.unschedulable("no help")))


class Metrics:
    def __init__(self) -> None:
        self.algorithm: list[float] = []

    def observe_algorithm(self, seconds: float) -> None:
        self.algorithm.append(seconds)

    def observe_extension_point(self, point: str, status: Any, profile: str, seconds: float) -> None:
        pass

    def watch_batch(self, profile: str, batch: Any) -> None:
        pass


def setup(
    *plugins: Plugin, nodes: tuple[str, ...] = ("a", "b"), metrics: Any = None
) -> tuple[Framework, Cache, Nominator]:
    cache = Cache()
    for name in nodes:
        cache.on_node_add(node(name))
    nominator = Nominator()
    catalogue = Catalogue(
        PluginDefinition(p.name, lambda args, handle, p=p: p, plugin_type=type(p)) for p in plugins
    )
    names = [p.name for p in plugins]
    points = {p: names for p in ("Filter", "Reserve", "Permit", "PostFilter")}
    handle = Handle(cache=cache, nominator=nominator, metrics=metrics)
    return Framework.from_plugins(catalogue, points, {}, handle, seed=1), cache, nominator


async def test_success_leaves_the_pod_assumed_after_reserve_and_permit() -> None:
    log: list[str] = []
    metrics = Metrics()
    fw, cache, nominator = setup(Plugin("A", log, reject=frozenset({"a"})), metrics=metrics)
    pi = PodInfo.from_pod(pod(), cache.res)
    result, outcome = await scheduling_cycle(fw, CycleState(), pi, cache, nominator, start=0.0)
    assert result.node == "b" and isinstance(outcome, PodInfo)
    assert cache.is_assumed("p") and cache.table.pod_slot("p") == cache.table.index["b"]
    assert log == ["A.reserve b", "A.permit b"]
    assert len(metrics.algorithm) == 1


async def test_permit_wait_passes() -> None:
    log: list[str] = []
    fw, cache, nominator = setup(Plugin("A", log, permit=(Status(Code.WAIT), 10.0)), nodes=("a",))
    _, outcome = await scheduling_cycle(
        fw, CycleState(), PodInfo.from_pod(pod(), cache.res), cache, nominator
    )
    assert isinstance(outcome, PodInfo) and cache.is_assumed("p")


async def test_reserve_rejection_is_undone_and_reads_as_a_fit_error_over_one_node() -> None:
    log: list[str] = []
    first = Plugin("A", log)
    second = Plugin("B", log, reserve=Status.unschedulable("no room reserved"))
    fw, cache, nominator = setup(first, second, nodes=("a",))
    result, outcome = await scheduling_cycle(
        fw, CycleState(), PodInfo.from_pod(pod(), cache.res), cache, nominator
    )
    assert result.node == "a"  # what the algorithm chose
    assert isinstance(outcome, CycleFailure)
    assert (outcome.status.code, outcome.status.plugin) == (Code.UNSCHEDULABLE, "B")
    assert outcome.message == "0/1 nodes are available: 1 no room reserved."
    assert outcome.unschedulable_plugins == {"B"} and outcome.nominated_node is None
    # Unreserve runs for every Reserve plugin, in reverse order; the assumed pod is forgotten; no Permit.
    assert log == ["A.reserve a", "B.reserve a", "B.unreserve a", "A.unreserve a"]
    assert not cache.is_assumed("p") and cache.table.pod_slot("p") is None


async def test_reserve_error_keeps_its_message() -> None:
    log: list[str] = []
    fw, cache, nominator = setup(Plugin("A", log, reserve=Status.error("io")), nodes=("a",))
    _, outcome = await scheduling_cycle(
        fw, CycleState(), PodInfo.from_pod(pod(), cache.res), cache, nominator
    )
    assert isinstance(outcome, CycleFailure) and outcome.status.code == Code.ERROR
    assert outcome.message == 'running Reserve plugin "A": io'
    assert outcome.unschedulable_plugins is None
    assert not cache.is_assumed("p")


async def test_permit_rejection_is_undone() -> None:
    log: list[str] = []
    fw, cache, nominator = setup(
        Plugin("A", log, permit=(Status.unschedulable("not now"), 0.0)), nodes=("a",)
    )
    _, outcome = await scheduling_cycle(
        fw, CycleState(), PodInfo.from_pod(pod(), cache.res), cache, nominator
    )
    assert isinstance(outcome, CycleFailure)
    assert outcome.message == "0/1 nodes are available: 1 not now."
    assert outcome.unschedulable_plugins == {"A"}
    assert log == ["A.reserve a", "A.permit a", "A.unreserve a"]
    assert not cache.is_assumed("p") and cache.table.pod_slot("p") is None


async def test_post_filter_nominates_and_adds_its_message() -> None:
    log: list[str] = []
    preempt = Plugin(
        "A",
        log,
        reject=frozenset({"a", "b"}),
        post_filter=("b", Status(Code.SUCCESS, ["preemption: nominated"])),
    )
    metrics = Metrics()
    fw, cache, nominator = setup(preempt, metrics=metrics)
    pi = PodInfo.from_pod(pod(), cache.res)
    result, outcome = await scheduling_cycle(fw, CycleState(), pi, cache, nominator)
    assert result.node is None and isinstance(outcome, CycleFailure)
    assert outcome.nominated_node == "b" and nominator.nominated_node("p") == "b"
    assert outcome.message == "0/2 nodes are available: 2 rejected. preemption: nominated."
    assert outcome.status.code == Code.UNSCHEDULABLE and outcome.unschedulable_plugins == {"A"}
    assert log == ["A.post_filter ['a', 'b']"] and not cache.is_assumed("p")
    assert len(metrics.algorithm) == 1


async def test_post_filter_error_still_reads_as_the_fit_error() -> None:
    # Upstream appends PostFilter's message to the FitError whatever its code.
    log: list[str] = []
    broken = Plugin("A", log, reject=frozenset({"a"}), post_filter=(None, Status.error("boom")))
    fw, cache, nominator = setup(broken, nodes=("a",))
    _, outcome = await scheduling_cycle(
        fw, CycleState(), PodInfo.from_pod(pod(), cache.res), cache, nominator
    )
    assert isinstance(outcome, CycleFailure) and outcome.status.code == Code.UNSCHEDULABLE
    assert outcome.message == "0/1 nodes are available: 1 rejected. boom."
    assert outcome.nominated_node is None and nominator.nominated_node("p") is None


async def test_no_nodes_runs_no_post_filter() -> None:
    log: list[str] = []
    fw, cache, nominator = setup(Plugin("A", log), nodes=())
    _, outcome = await scheduling_cycle(
        fw, CycleState(), PodInfo.from_pod(pod(), cache.res), cache, nominator
    )
    assert isinstance(outcome, CycleFailure)
    assert outcome.message == "no nodes available to schedule pods"
    assert outcome.unschedulable_plugins is None and log == []
