"""The basic in-tree plugins against upstream's table-test cases (inputs and expected reasons/scores
transcribed from kubernetes/kubernetes pkg/scheduler/framework/plugins/*_test.go; BalancedAllocation with the
1.36 formula)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import Code, CycleState, Framework, Handle, Status
from kubesched.scheduler.framework.interface import Filtered
from kubesched.scheduler.plugins import IN_TREE_MODULES, in_tree_catalogue
from kubesched.scheduler.plugins.balanced_allocation import (
    NodeResourcesBalancedAllocation,
    NodeResourcesBalancedAllocationArgs,
)
from kubesched.scheduler.plugins.default_binder import DefaultBinder
from kubesched.scheduler.plugins.image_locality import ImageLocality
from kubesched.scheduler.plugins.node_name import NodeName
from kubesched.scheduler.plugins.node_ports import NodePorts
from kubesched.scheduler.plugins.node_resources_common import (
    Column,
    RequestedResources,
    ResourceWeight,
    balance,
    balanced_allocation_136,
    balanced_allocation_136_one,
    broken_linear,
    broken_linear_one,
    least_allocated,
    least_allocated_one,
    most_allocated,
    most_allocated_one,
    requested_to_capacity_ratio,
    requested_to_capacity_ratio_one,
    scale_shape,
)
from kubesched.scheduler.plugins.node_resources_fit import NodeResourcesFit, NodeResourcesFitArgs
from kubesched.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kubesched.scheduler.plugins.priority_sort import PrioritySort
from kubesched.scheduler.plugins.scheduling_gates import SchedulingGates
from kubesched.scheduler.plugins.taint_toleration import TaintToleration
from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo

MB = 1024 * 1024


def fit_plugin(args: dict[str, Any] | None = None) -> NodeResourcesFit:
    """NodeResourcesFit with its args as the configuration loader builds them (wire form in)."""
    return NodeResourcesFit(NodeResourcesFitArgs.model_validate(args or {}))


def balanced(args: dict[str, Any] | None = None) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(NodeResourcesBalancedAllocationArgs.model_validate(args or {}))


# --- builders ------------------------------------------------------------------------------------------------


def make_node(name: str, alloc: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    status: dict[str, Any] = {"allocatable": alloc or {}}
    if "images" in spec:
        status["images"] = spec.pop("images")
    return {"metadata": {"name": name, "labels": {}}, "spec": spec, "status": status}


def make_pod(
    *containers: dict[str, Any],
    inits: list[dict[str, Any]] | None = None,
    name: str = "p",
    node: str = "",
    **spec: Any,
) -> dict[str, Any]:
    def c(requests: dict[str, Any]) -> dict[str, Any]:
        body = dict(requests)
        extra = {k: body.pop(k) for k in ("image", "ports", "restartPolicy") if k in body}
        return {"name": "c", "image": "pause", "resources": {"requests": body}, **extra}

    s: dict[str, Any] = {"containers": [c(x) for x in containers], **spec}
    if inits:
        s["initContainers"] = [c(x) for x in inits]
    if node:
        s["nodeName"] = node
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": s}


class Cluster:
    def __init__(self, *nodes: dict[str, Any]) -> None:
        self.cache = Cache()
        for n in nodes:
            self.cache.on_node_add(n)
        self.handle = Handle(cache=self.cache)
        self._uid = 0

    @property
    def table(self) -> Any:
        return self.cache.table

    def add(self, pod: dict[str, Any], node: str) -> None:
        self._uid += 1
        pod = {
            **pod,
            "metadata": {**pod["metadata"], "uid": f"existing-{self._uid}", "name": f"e{self._uid}"},
        }
        pod["spec"] = {**pod["spec"], "nodeName": node}
        self.cache.on_pod_add(pod)

    def pi(self, pod: dict[str, Any]) -> PodInfo:
        return PodInfo.from_pod(pod, self.cache.res)

    def idx(self) -> np.ndarray:
        return np.array(list(self.table.index.values()), dtype=np.intp)

    def filter(self, plugin: Any, pod: dict[str, Any]) -> list[Status | None]:
        """Run PreFilter (if any) and Filter through a one-plugin framework; a Status per node (None = fits)."""
        points: dict[str, list[str]] = {"Filter": [plugin.name]}
        if hasattr(plugin, "pre_filter"):
            points["PreFilter"] = [plugin.name]
        fw = Framework.from_plugins(_Fixed(plugin), points, {}, self.handle)
        pi = self.pi(pod)
        state = CycleState()
        _, s, _ = fw.run_pre_filter(state, pi)
        assert s.ok, s
        idx = self.idx()
        ok, statuses = fw.run_filters(state, pi, idx)
        return [None if ok[i] else statuses[int(slot)] for i, slot in enumerate(idx)]

    def score(self, plugin: Any, pod: dict[str, Any]) -> list[int]:
        pi = self.pi(pod)
        state = CycleState()
        idx = self.idx()
        if hasattr(plugin, "pre_score"):
            s = plugin.pre_score(state, pi, self.table, idx)
            assert s.ok, s
        scores = plugin.score(state, pi, self.table, idx)
        if hasattr(plugin, "normalize_score"):
            scores = plugin.normalize_score(state, pi, scores)
        return [int(x) for x in scores]


class _Fixed:
    """A registry holding one already-built plugin."""

    def __init__(self, plugin: Any) -> None:
        self.plugin = plugin

    def create(self, name: str, args: Any, handle: Any) -> Any:
        return self.plugin


def reasons(statuses: list[Status | None]) -> list[Any]:
    return [None if s is None else (s.code, s.reasons) for s in statuses]


U = Code.UNSCHEDULABLE
UU = Code.UNSCHEDULABLE_AND_UNRESOLVABLE


# --- NodeResourcesFit: Filter (upstream TestEnoughRequests and friends) ---------------------------------------

FIT_NODE = {
    "cpu": "10m",
    "memory": "20",
    "pods": "32",
    "example.com/aaa": "5",
    "ephemeral-storage": "20",
    "hugepages-2Mi": "5",
}


def cpu_mem(cpu: int, mem: int, **more: Any) -> dict[str, Any]:
    return {"cpu": f"{cpu}m", "memory": str(mem), **{k.replace("_", "/"): v for k, v in more.items()}}


AAA = "example.com/aaa"
BBB = "example.com/bbb"
K8S_IO = "kubernetes.io/something"
HUGE = "hugepages-2Mi"

ENOUGH_REQUESTS = [
    ("no resources requested always fits", make_pod(), cpu_mem(10, 20), None, None),
    (
        "too many resources fails",
        make_pod(cpu_mem(1, 1)),
        cpu_mem(10, 20),
        None,
        (U, ["Insufficient cpu", "Insufficient memory"]),
    ),
    (
        "init container cpu",
        make_pod(cpu_mem(1, 1), inits=[cpu_mem(3, 1)]),
        cpu_mem(8, 19),
        None,
        (U, ["Insufficient cpu"]),
    ),
    (
        "highest init cpu",
        make_pod(cpu_mem(1, 1), inits=[cpu_mem(3, 1), cpu_mem(2, 1)]),
        cpu_mem(8, 19),
        None,
        (U, ["Insufficient cpu"]),
    ),
    (
        "init container memory",
        make_pod(cpu_mem(1, 1), inits=[cpu_mem(1, 3)]),
        cpu_mem(9, 19),
        None,
        (U, ["Insufficient memory"]),
    ),
    (
        "highest init memory",
        make_pod(cpu_mem(1, 1), inits=[cpu_mem(1, 3), cpu_mem(1, 2)]),
        cpu_mem(9, 19),
        None,
        (U, ["Insufficient memory"]),
    ),
    ("init max not sum", make_pod(cpu_mem(1, 1), inits=[cpu_mem(1, 1)]), cpu_mem(9, 19), None, None),
    (
        "multiple init max not sum",
        make_pod(cpu_mem(1, 1), inits=[cpu_mem(1, 1), cpu_mem(1, 1)]),
        cpu_mem(9, 19),
        None,
        None,
    ),
    ("both resources fit", make_pod(cpu_mem(1, 1)), cpu_mem(5, 5), None, None),
    ("one resource memory fits", make_pod(cpu_mem(2, 1)), cpu_mem(9, 5), None, (U, ["Insufficient cpu"])),
    ("one resource cpu fits", make_pod(cpu_mem(1, 2)), cpu_mem(5, 19), None, (U, ["Insufficient memory"])),
    ("equal edge case", make_pod(cpu_mem(5, 1)), cpu_mem(5, 19), None, None),
    (
        "equal edge case for init container",
        make_pod(cpu_mem(4, 1), inits=[cpu_mem(5, 1)]),
        cpu_mem(5, 19),
        None,
        None,
    ),
    ("extended resource fits", make_pod({AAA: "1"}), {}, None, None),
    ("extended resource fits for init container", make_pod({}, inits=[{AAA: "1"}]), {}, None, None),
    (
        "extended resource capacity enforced",
        make_pod(cpu_mem(1, 1, **{AAA: "10"})),
        {AAA: "0"},
        None,
        (UU, [f"Insufficient {AAA}"]),
    ),
    (
        "extended capacity enforced for init",
        make_pod({}, inits=[cpu_mem(1, 1, **{AAA: "10"})]),
        {AAA: "0"},
        None,
        (UU, [f"Insufficient {AAA}"]),
    ),
    (
        "extended resource allocatable enforced",
        make_pod(cpu_mem(1, 1, **{AAA: "1"})),
        {AAA: "5"},
        None,
        (U, [f"Insufficient {AAA}"]),
    ),
    (
        "extended allocatable enforced for init",
        make_pod({}, inits=[cpu_mem(1, 1, **{AAA: "1"})]),
        {AAA: "5"},
        None,
        (U, [f"Insufficient {AAA}"]),
    ),
    (
        "extended enforced for multiple containers",
        make_pod(cpu_mem(1, 1, **{AAA: "3"}), cpu_mem(1, 1, **{AAA: "3"})),
        {AAA: "2"},
        None,
        (UU, [f"Insufficient {AAA}"]),
    ),
    (
        "extended admits multiple init containers",
        make_pod({}, inits=[cpu_mem(1, 1, **{AAA: "3"}), cpu_mem(1, 1, **{AAA: "3"})]),
        {AAA: "2"},
        None,
        None,
    ),
    (
        "extended enforced for multiple init containers",
        make_pod({}, inits=[cpu_mem(1, 1, **{AAA: "6"}), cpu_mem(1, 1, **{AAA: "3"})]),
        {AAA: "2"},
        None,
        (UU, [f"Insufficient {AAA}"]),
    ),
    (
        "unknown extended resource",
        make_pod(cpu_mem(1, 1, **{BBB: "1"})),
        {},
        None,
        (UU, [f"Insufficient {BBB}"]),
    ),
    (
        "unknown extended resource for init",
        make_pod({}, inits=[cpu_mem(1, 1, **{BBB: "1"})]),
        {},
        None,
        (UU, [f"Insufficient {BBB}"]),
    ),
    (
        "kubernetes.io resource capacity enforced",
        make_pod(cpu_mem(1, 1, **{K8S_IO: "10"})),
        {},
        None,
        (UU, [f"Insufficient {K8S_IO}"]),
    ),
    (
        "hugepages capacity enforced",
        make_pod(cpu_mem(1, 1, **{HUGE: "10"})),
        {HUGE: "0"},
        None,
        (UU, [f"Insufficient {HUGE}"]),
    ),
    (
        "hugepages enforced for multiple containers",
        make_pod(cpu_mem(1, 1, **{HUGE: "3"}), cpu_mem(1, 1, **{HUGE: "3"})),
        {HUGE: "2"},
        None,
        (UU, [f"Insufficient {HUGE}"]),
    ),
    (
        "skip ignored extended resource",
        make_pod(cpu_mem(1, 1, **{BBB: "1"})),
        {},
        {"ignoredResources": [BBB]},
        None,
    ),
    (
        "resources + pod overhead fits",
        make_pod(cpu_mem(1, 1), overhead={"cpu": "3m", "memory": "13"}),
        cpu_mem(5, 5),
        None,
        None,
    ),
    (
        "requests + overhead does not fit for memory",
        make_pod(cpu_mem(1, 1), overhead={"cpu": "1m", "memory": "15"}),
        cpu_mem(5, 5),
        None,
        (U, ["Insufficient memory"]),
    ),
    (
        "ignored resource groups",
        make_pod(cpu_mem(1, 1, **{BBB: "1", K8S_IO: "1"})),
        {},
        {"ignoredResourceGroups": ["example.com"]},
        (UU, [f"Insufficient {K8S_IO}"]),
    ),
    ("extended request of zero is skipped", make_pod(cpu_mem(1, 1, **{AAA: "0"})), {AAA: "6"}, None, None),
    (
        "pod-level cpu does not fit",
        make_pod(cpu_mem(1, 1), resources={"requests": {"cpu": "7m", "memory": "2"}}),
        cpu_mem(5, 5),
        None,
        (U, ["Insufficient cpu"]),
    ),
    (
        "pod-level memory does not fit",
        make_pod(cpu_mem(1, 1), resources={"requests": {"cpu": "3m", "memory": "2"}}),
        cpu_mem(5, 19),
        None,
        (U, ["Insufficient memory"]),
    ),
    (
        "ephemeral storage fits",
        make_pod({"ephemeral-storage": "10"}),
        {"ephemeral-storage": "10"},
        None,
        None,
    ),
    (
        "ephemeral storage short",
        make_pod({"ephemeral-storage": "11"}),
        {"ephemeral-storage": "10"},
        None,
        (U, ["Insufficient ephemeral-storage"]),
    ),
    (
        "ephemeral storage beyond capacity",
        make_pod({"ephemeral-storage": "25"}),
        {},
        None,
        (UU, ["Insufficient ephemeral-storage"]),
    ),
]


@pytest.mark.parametrize(
    ("pod", "used", "args", "want"), [c[1:] for c in ENOUGH_REQUESTS], ids=[c[0] for c in ENOUGH_REQUESTS]
)
def test_fit_filter(pod: dict, used: dict, args: dict | None, want: Any) -> None:
    cluster = Cluster(make_node("n", FIT_NODE))
    cluster.add(make_pod(used), "n")
    assert reasons(cluster.filter(fit_plugin(args), pod)) == [want]


def test_fit_filter_too_many_pods() -> None:
    cluster = Cluster(make_node("n", {"cpu": "10m", "memory": "20", "pods": "1"}))
    cluster.add(make_pod(), "n")
    got = reasons(cluster.filter(fit_plugin(), make_pod(cpu_mem(1, 1))))
    assert got == [(U, ["Too many pods"])]
    cluster.add(make_pod(cpu_mem(10, 20)), "n")
    got = reasons(cluster.filter(fit_plugin(), make_pod(cpu_mem(1, 1))))
    assert got == [(U, ["Too many pods", "Insufficient cpu", "Insufficient memory"])]


def test_fit_filter_over_many_nodes_is_per_node() -> None:
    cluster = Cluster(
        *(make_node(f"n{i}", {"cpu": f"{i}", "memory": "1Gi", "pods": "10"}) for i in range(1, 7))
    )
    got = cluster.filter(fit_plugin(), make_pod({"cpu": "3", "memory": "1Gi"}))
    assert [s is None for s in got] == [False, False, True, True, True, True]
    assert got[0] is not None and got[0].code == UU and got[0].plugin == "NodeResourcesFit"


@pytest.mark.parametrize(
    "args",
    [
        {"scoringStrategy": {"type": "Bogus"}},
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": 101}]}},
        {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu", "weight": -1}]}},
        {
            "scoringStrategy": {
                "type": "RequestedToCapacityRatio",
                "requestedToCapacityRatio": {
                    "shape": [{"utilization": 50, "score": 1}, {"utilization": 40, "score": 2}]
                },
            }
        },
    ],
)
def test_fit_rejects_bad_args(args: dict) -> None:
    # The args model is the one place args are checked (the configuration loader reports these).
    assert NodeResourcesFitArgs.model_validate(args).validate_args("args")


def test_fit_reads_pydantic_args() -> None:
    args = NodeResourcesFitArgs.model_validate(
        {"scoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 2}]}}
    )
    fit = NodeResourcesFit(args)
    assert fit.strategy == "MostAllocated"


# --- NodeResourcesFit: Score strategies ----------------------------------------------------------------------

DEFAULT = None
EXT = "intel.com/foo"
EXT_SET = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}, {"name": EXT, "weight": 1}]


def two_nodes(a: dict[str, str], b: dict[str, str]) -> Cluster:
    return Cluster(make_node("node1", a), make_node("node2", b))


def cm(cpu: str, mem: str, **more: str) -> dict[str, str]:
    return {"cpu": cpu, "memory": mem, **more}


C3M5 = make_pod(cm("1000", "2000"), cm("2000", "3000"))  # 3000 cpus / 5000 bytes across two containers

# (name, strategy, resources, node allocs, existing pods [(requests, node)], pod, expected scores).
# Capacities as upstream writes them ("4000" cpu is 4000 cores: only the ratios matter).
SCORE_CASES: list[tuple[str, str, Any, tuple[dict, dict], list[tuple[dict, str]], dict, list[int]]] = [
    (
        "least: nothing scheduled, nothing requested",
        "LeastAllocated",
        DEFAULT,
        (cm("4000", "10000"), cm("4000", "10000")),
        [],
        make_pod(),
        [100, 100],
    ),
    (
        "least: differently sized nodes",
        "LeastAllocated",
        DEFAULT,
        (cm("4000", "10000"), cm("6000", "10000")),
        [],
        C3M5,
        [37, 50],
    ),
    (
        "least: no resources requested, pods scheduled",
        "LeastAllocated",
        DEFAULT,
        (cm("4000", "10000"), cm("4000", "10000")),
        [(None, "node1"), (None, "node2")],
        make_pod(),
        [100, 100],
    ),
    (
        "least: no resources requested, pods with resources",
        "LeastAllocated",
        DEFAULT,
        (cm("10000", "20000"), cm("10000", "20000")),
        [
            (cm("3000", "0"), "node1"),
            (cm("3000", "0"), "node1"),
            (cm("3000", "0"), "node2"),
            (cm("3000", "5000"), "node2"),
        ],
        make_pod(),
        [70, 57],
    ),
    (
        "least: requested, pods with resources",
        "LeastAllocated",
        DEFAULT,
        (cm("10000", "20000"), cm("10000", "20000")),
        [(cm("3000", "0"), "node1"), (cm("3000", "5000"), "node2")],
        C3M5,
        [57, 45],
    ),
    (
        "least: differently sized, with pods",
        "LeastAllocated",
        DEFAULT,
        (cm("10000", "20000"), cm("10000", "50000")),
        [(cm("3000", "0"), "node1"), (cm("3000", "5000"), "node2")],
        C3M5,
        [57, 60],
    ),
    (
        "least: requested exceeds capacity",
        "LeastAllocated",
        DEFAULT,
        (cm("4000", "10000"), cm("4000", "10000")),
        [(cm("3000", "0"), "node1"), (cm("3000", "5000"), "node2")],
        make_pod(cm("3000", "0")),
        [50, 25],
    ),
    (
        "least: zero node resources",
        "LeastAllocated",
        DEFAULT,
        ({}, {}),
        [(cm("3000", "0"), "node1"), (cm("3000", "5000"), "node2")],
        make_pod(),
        [0, 0],
    ),
    (
        "least: weights memory 2 cpu 1",
        "LeastAllocated",
        [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}],
        (cm("4000", "10000"), cm("6000", "10000")),
        [],
        C3M5,
        [41, 50],
    ),
    (
        "least: bypass extended not requested",
        "LeastAllocated",
        EXT_SET,
        (cm("6000", "10000"), cm("6000", "10000", **{EXT: "4"})),
        [],
        C3M5,
        [50, 50],
    ),
    (
        "least: honor extended when requested",
        "LeastAllocated",
        EXT_SET,
        (cm("6000", "10000", **{EXT: "4"}), cm("6000", "10000", **{EXT: "10"})),
        [],
        make_pod(cm("3000", "5000", **{EXT: "2"})),
        [50, 60],
    ),
    (
        "least: node without the resource",
        "LeastAllocated",
        [{"name": EXT, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        (cm("6000", "10000"), cm("6000", "10000", **{EXT: "4"})),
        [],
        make_pod(cm("3000", "4000")),
        [55, 55],
    ),
    (
        "most: nothing scheduled, nothing requested",
        "MostAllocated",
        DEFAULT,
        (cm("4000", "10000"), cm("4000", "10000")),
        [],
        make_pod(),
        [0, 0],
    ),
    (
        "most: differently sized nodes",
        "MostAllocated",
        DEFAULT,
        (cm("4000", "10000"), cm("6000", "10000")),
        [],
        C3M5,
        [62, 50],
    ),
    (
        "most: no resources requested, pods with resources",
        "MostAllocated",
        DEFAULT,
        (cm("10000", "20000"), cm("10000", "20000")),
        [
            (cm("3000", "0"), "node1"),
            (cm("3000", "0"), "node1"),
            (cm("3000", "0"), "node2"),
            (cm("3000", "5000"), "node2"),
        ],
        make_pod(),
        [30, 42],
    ),
    (
        "most: requested, pods with resources",
        "MostAllocated",
        DEFAULT,
        (cm("10000", "20000"), cm("10000", "20000")),
        [(cm("3000", "0"), "node1"), (cm("3000", "5000"), "node2")],
        C3M5,
        [42, 55],
    ),
    (
        "most: requested equal to capacity",
        "MostAllocated",
        DEFAULT,
        (cm("5000", "10000"), cm("10000", "9000")),
        [],
        make_pod(cm("2000", "4000"), cm("3000", "5000")),
        [95, 75],
    ),
    (
        "most: weights memory 2 cpu 1",
        "MostAllocated",
        [{"name": "memory", "weight": 2}, {"name": "cpu", "weight": 1}],
        (cm("4000", "10000"), cm("6000", "10000")),
        [],
        C3M5,
        [58, 50],
    ),
    (
        "most: non-zero defaults for request-less containers",
        "MostAllocated",
        DEFAULT,
        (cm("250m", "1000Mi"), cm("250m", "1000Mi")),
        [({}, "node1"), ({}, "node1")],
        make_pod({}),
        [80, 30],
    ),
    (
        "most: bypass extended not requested",
        "MostAllocated",
        EXT_SET,
        (cm("6000", "10000"), cm("6000", "10000", **{EXT: "4"})),
        [],
        C3M5,
        [50, 50],
    ),
    (
        "most: honor extended when requested",
        "MostAllocated",
        EXT_SET,
        (cm("6000", "10000", **{EXT: "4"}), cm("6000", "10000", **{EXT: "10"})),
        [],
        make_pod(cm("3000", "5000", **{EXT: "2"})),
        [50, 40],
    ),
    (
        "most: node without the resource",
        "MostAllocated",
        [{"name": EXT, "weight": 2}, {"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}],
        (cm("6000", "10000"), cm("6000", "10000", **{EXT: "4"})),
        [],
        make_pod(cm("3000", "4000")),
        [45, 45],
    ),
    (
        "rtcr: nothing requested",
        "RequestedToCapacityRatio",
        DEFAULT,
        (cm("4000", "10000"), cm("4000", "10000")),
        [(None, "node1"), (None, "node1")],
        make_pod(),
        [100, 100],
    ),
    (
        "rtcr: differently sized nodes",
        "RequestedToCapacityRatio",
        DEFAULT,
        (cm("4000", "10000"), cm("6000", "10000")),
        [(None, "node1"), (None, "node1")],
        C3M5,
        [38, 50],
    ),
    (
        "rtcr: pods with resources",
        "RequestedToCapacityRatio",
        DEFAULT,
        (cm("4000", "10000"), cm("6000", "10000")),
        [(cm("3000", "5000"), "node1"), (cm("3000", "5000"), "node2")],
        make_pod(),
        [38, 50],
    ),
]


@pytest.mark.parametrize(
    ("strategy", "resources", "allocs", "existing", "pod", "want"),
    [c[1:] for c in SCORE_CASES],
    ids=[c[0] for c in SCORE_CASES],
)
def test_fit_score_strategies(
    strategy: str, resources: Any, allocs: tuple, existing: list, pod: dict, want: list[int]
) -> None:
    cluster = two_nodes(*allocs)
    for requests, node in existing:  # None: a pod without containers; {}: a container without requests
        cluster.add(make_pod() if requests is None else make_pod(requests), node)
    strat: dict[str, Any] = {"type": strategy}
    if resources:
        strat["resources"] = resources
    if strategy == "RequestedToCapacityRatio":
        strat["requestedToCapacityRatio"] = {
            "shape": [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]
        }
    assert cluster.score(fit_plugin({"scoringStrategy": strat}), pod) == want


EXT_RTCR = {
    "scoringStrategy": {
        "type": "RequestedToCapacityRatio",
        "resources": [{"name": EXT, "weight": 1}],
        "requestedToCapacityRatio": {
            "shape": [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 1}]
        },
    }
}


@pytest.mark.parametrize(
    ("pod", "existing", "want"),
    [
        (make_pod(), [], [0, 0]),  # the pod asks for none of the scored resource
        (make_pod({EXT: "2"}), [], [2, 5]),
        (make_pod({EXT: "2"}), [({EXT: "2"}, "node2")], [2, 10]),
        (make_pod({EXT: "4"}), [], [5, 10]),
    ],
)
def test_rtcr_single_extended_resource(pod: dict, existing: list, want: list[int]) -> None:
    cluster = two_nodes(cm("4000", f"{10000 * MB}", **{EXT: "8"}), cm("4000", f"{10000 * MB}", **{EXT: "4"}))
    for requests, node in existing:
        cluster.add(make_pod(requests), node)
    assert cluster.score(fit_plugin(EXT_RTCR), pod) == want


@pytest.mark.parametrize(
    ("points", "checks"),
    [
        (
            [(10, 1), (90, 9)],
            [
                (-10, 1),
                (0, 1),
                (9, 1),
                (10, 1),
                (15, 1),
                (19, 1),
                (20, 2),
                (89, 8),
                (90, 9),
                (99, 9),
                (100, 9),
                (110, 9),
            ],
        ),
        (
            [(0, 2), (40, 10), (100, 0)],
            [(-10, 2), (0, 2), (20, 6), (30, 8), (40, 10), (70, 5), (100, 0), (110, 0)],
        ),
        (
            [(0, 2), (40, 2), (100, 2)],
            [(-10, 2), (0, 2), (20, 2), (30, 2), (40, 2), (70, 2), (100, 2), (110, 2)],
        ),
    ],
)
def test_broken_linear_function(points: list[tuple[int, int]], checks: list[tuple[int, int]]) -> None:
    utils = np.array([u for u, _ in points], dtype=np.int64)
    scores = np.array([s for _, s in points], dtype=np.int64)
    p = np.array([c[0] for c in checks], dtype=np.int64)
    assert broken_linear(utils, scores, p).tolist() == [c[1] for c in checks]
    assert [broken_linear_one(utils, scores, int(x)) for x in p] == [c[1] for c in checks]


# --- NodeResourcesBalancedAllocation (1.36 formula) ----------------------------------------------------------

CPU_ONLY = (cm("1000m", "0"), cm("2000m", "0"))
CPU_MEM = (cm("1000m", "2000"), cm("2000m", "3000"))


@pytest.mark.parametrize(
    ("allocs", "existing", "pod", "balance_with_pod", "want"),
    [
        # upstream "nothing scheduled, resources requested, differently sized nodes": b(with pod) 87/100
        ((cm("4000m", "10000"), cm("6000m", "10000")), [], make_pod(*CPU_MEM), [87, 100], [68, 75]),
        # "resources requested, pods scheduled with resources": 82/95 (without the pod: 85/97)
        (
            (cm("10000m", "20000"), cm("10000m", "20000")),
            [(CPU_ONLY, "node1"), (CPU_MEM, "node2")],
            make_pod(*CPU_MEM),
            [82, 95],
            [73, 74],
        ),
        # "..., differently sized nodes": 82/80 (without: 85/90)
        (
            (cm("10000m", "20000"), cm("10000m", "50000")),
            [(CPU_ONLY, "node1"), (CPU_MEM, "node2")],
            make_pod(*CPU_MEM),
            [82, 80],
            [73, 70],
        ),
        # "requested resources at node capacity": 50/75 (without: 75/100)
        (
            (cm("6000m", "10000"), cm("6000m", "10000")),
            [(CPU_ONLY, "node1"), (CPU_MEM, "node2")],
            make_pod(*CPU_ONLY),
            [50, 75],
            [62, 62],
        ),
    ],
)
def test_balanced_allocation(
    allocs: tuple, existing: list, pod: dict, balance_with_pod: list[int], want: list[int]
) -> None:
    cluster = two_nodes(*allocs)
    for containers, node in existing:
        cluster.add(make_pod(*containers), node)
    plugin = balanced()
    assert cluster.score(plugin, pod) == want
    res = RequestedResources((ResourceWeight("cpu"), ResourceWeight("memory")), use_requested=True)
    pi = cluster.pi(pod)
    cols = res.columns(cluster.table, cluster.idx(), res.pod_requests(pi, cluster.cache.res))
    assert balance(cols, [c.with_pod for c in cols], 2).tolist() == balance_with_pod


def test_balanced_allocation_observed_on_136() -> None:
    # kubernetes-1.36-observed.md: 8 CPU / 16Gi node holding 2 CPU / 2Gi, incoming 2 CPU / 6Gi -> 78
    cluster = Cluster(make_node("n", cm("8", "16Gi")))
    cluster.add(make_pod(cm("2", "2Gi")), "n")
    assert cluster.score(balanced(), make_pod(cm("2", "6Gi"))) == [78]


def test_balanced_allocation_scalar_resources() -> None:
    gpu = "nvidia.com/gpu"
    args = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": gpu}]}
    cluster = two_nodes(cm("3500m", "40000", **{gpu: "8"}), cm("3500m", "40000", **{gpu: "8"}))
    cluster.add(make_pod(*CPU_MEM[:1], cm("2000m", "3000", **{gpu: "3"})), "node1")
    cluster.add(make_pod(*CPU_MEM), "node2")
    # upstream (pre-1.36) scores 70/65 are b(with pod); without the pod 69/62
    assert cluster.score(balanced(args), make_pod({"memory": "0", gpu: "1"})) == [
        75,
        76,
    ]
    # a node without the scalar resource, and a pod not asking for it: the resource is left out (b = 63)
    cluster = two_nodes(cm("3500m", "40000", **{gpu: "8"}), cm("3500m", "40000"))
    assert cluster.score(balanced(args), make_pod(*CPU_MEM)) == [56, 56]


def test_balanced_allocation_skips_best_effort_pods() -> None:
    cluster = Cluster(make_node("n", cm("4", "8Gi")))
    pi = cluster.pi(make_pod({}))
    s = balanced().pre_score(CycleState(), pi, cluster.table, cluster.idx())
    assert s.code == Code.SKIP


# The one-node scalar versions must agree exactly with the vector versions (they serve nodes that changed).
resource_values = st.integers(min_value=0, max_value=64 * 2**30)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(resource_values, resource_values, st.integers(0, 2**30), st.integers(1, 100)),
        min_size=1,
        max_size=4,
    ),
)
def test_scalar_and_vector_scores_agree(rows: list[tuple[int, int, int, int]]) -> None:
    cols = [
        Column(np.array([a], dtype=np.int64), np.array([b], dtype=np.int64), p, w, a > 0)
        for a, b, p, w in rows
    ]
    row = [(a, b, p, w) for a, b, p, w in rows if a > 0]
    utils, scores = scale_shape([(0, 10), (30, 2), (100, 7)])
    assert least_allocated(cols, 1)[0] == least_allocated_one(row)
    assert most_allocated(cols, 1)[0] == most_allocated_one(row)
    assert requested_to_capacity_ratio(cols, 1, utils, scores)[0] == requested_to_capacity_ratio_one(
        row, utils, scores
    )
    assert balanced_allocation_136(cols, 1)[0] == balanced_allocation_136_one(row)


def test_memoised_scores_follow_node_changes() -> None:
    cluster = two_nodes(cm("4000m", "10000"), cm("4000m", "10000"))
    fit, bal = fit_plugin(), balanced()
    pod = make_pod(cm("1000m", "1000"))
    assert cluster.score(fit, pod) == [82, 82]
    assert cluster.score(bal, pod) == [71, 71]
    cluster.add(make_pod(cm("1000m", "8000")), "node2")
    assert cluster.score(fit, pod) == [82, 30]
    assert cluster.score(bal, pod) == [71, 79]


# --- TaintToleration -----------------------------------------------------------------------------------------


def taint(key: str, value: str, effect: str) -> dict[str, str]:
    return {"key": key, "value": value, "effect": effect}


def tol(key: str, value: str = "", effect: str = "", op: str = "") -> dict[str, str]:
    t = {"key": key, "value": value, "effect": effect}
    if op:
        t["operator"] = op
    return t


def tainted(*taint_lists: list[dict[str, str]]) -> Cluster:
    return Cluster(*(make_node(f"node{chr(65 + i)}", taints=t) for i, t in enumerate(taint_lists)))


PNS = "PreferNoSchedule"


@pytest.mark.parametrize(
    ("tolerations", "taint_lists", "want"),
    [
        (
            [tol("foo", "bar", PNS, "Equal")],
            [[taint("foo", "bar", PNS)], [taint("foo", "blah", PNS)]],
            [100, 0],
        ),
        (
            [tol("cpu-type", "arm64", PNS, "Equal"), tol("disk-type", "ssd", PNS, "Equal")],
            [
                [],
                [taint("cpu-type", "arm64", PNS)],
                [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)],
            ],
            [100, 100, 100],
        ),
        (
            [tol("foo", "bar", PNS, "Equal")],
            [
                [],
                [taint("cpu-type", "arm64", PNS)],
                [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)],
            ],
            [100, 50, 0],
        ),
        (
            [tol("cpu-type", "arm64", "NoSchedule", "Equal"), tol("disk-type", "ssd", "NoSchedule", "Equal")],
            [
                [],
                [taint("cpu-type", "arm64", "NoSchedule")],
                [taint("cpu-type", "arm64", PNS), taint("disk-type", "ssd", PNS)],
            ],
            [100, 100, 0],
        ),
        ([], [[], [taint("cpu-type", "arm64", PNS)]], [100, 0]),
    ],
)
def test_taint_toleration_score(tolerations: list, taint_lists: list, want: list[int]) -> None:
    cluster = tainted(*taint_lists)
    assert cluster.score(TaintToleration(), make_pod({}, tolerations=tolerations)) == want


def test_taint_toleration_score_without_taints() -> None:
    cluster = tainted([], [])
    assert cluster.score(TaintToleration(), make_pod({})) == [100, 100]


TAINT_REASON = (UU, ["node(s) had untolerated taint(s)"])


@pytest.mark.parametrize(
    ("tolerations", "taints", "want"),
    [
        ([], [taint("dedicated", "user1", "NoSchedule")], TAINT_REASON),
        ([tol("dedicated", "user1", "NoSchedule")], [taint("dedicated", "user1", "NoSchedule")], None),
        (
            [tol("dedicated", "user2", "NoSchedule", "Equal")],
            [taint("dedicated", "user1", "NoSchedule")],
            TAINT_REASON,
        ),
        ([tol("foo", effect="NoSchedule", op="Exists")], [taint("foo", "bar", "NoSchedule")], None),
        (
            [tol("dedicated", "user2", "NoSchedule", "Equal"), tol("foo", effect="NoSchedule", op="Exists")],
            [taint("dedicated", "user2", "NoSchedule"), taint("foo", "bar", "NoSchedule")],
            None,
        ),
        ([tol("foo", "bar", PNS, "Equal")], [taint("foo", "bar", "NoSchedule")], TAINT_REASON),
        ([tol("foo", "bar", op="Equal")], [taint("foo", "bar", "NoSchedule")], None),
        ([tol("dedicated", "user2", "NoSchedule", "Equal")], [taint("dedicated", "user1", PNS)], None),
        ([], [taint("dedicated", "user1", PNS)], None),
        ([], [taint("k", "v", "NoExecute")], TAINT_REASON),
        ([tol("", op="Exists")], [taint("k", "v", "NoExecute")], None),
    ],
)
def test_taint_toleration_filter(tolerations: list, taints: list, want: Any) -> None:
    cluster = tainted(taints)
    assert reasons(cluster.filter(TaintToleration(), make_pod({}, tolerations=tolerations))) == [want]


def test_taint_toleration_filter_picks_per_taint_set() -> None:
    t = [taint("dedicated", "a", "NoSchedule")]
    cluster = tainted(t, [], t, [taint("other", "b", "NoExecute")])
    got = cluster.filter(TaintToleration(), make_pod({}, tolerations=[tol("dedicated", "a", "NoSchedule")]))
    assert [s is None for s in got] == [True, True, True, False]


# --- NodePorts -----------------------------------------------------------------------------------------------


def ports_pod(*specs: str, name: str = "p") -> dict[str, Any]:
    ports = []
    for spec in specs:
        proto, ip, port = spec.split("/")
        ports.append({"containerPort": int(port), "hostPort": int(port), "hostIP": ip, "protocol": proto})
    return make_pod({"ports": ports}, name=name)


PORT_REASON = (U, ["node(s) didn't have free ports for the requested pod ports"])


@pytest.mark.parametrize(
    ("wanted", "used", "want"),
    [
        (["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/9090"], None),
        (["UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], PORT_REASON),
        (["TCP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], PORT_REASON),
        (["TCP/127.0.0.1/8080"], ["TCP/127.0.0.2/8080"], None),
        (["UDP/127.0.0.1/8080"], ["TCP/127.0.0.1/8080"], None),
        (["UDP/127.0.0.1/8000", "UDP/127.0.0.1/8080"], ["UDP/127.0.0.1/8080"], PORT_REASON),
        (
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8080"],
            ["TCP/127.0.0.1/8001", "UDP/127.0.0.1/8081"],
            PORT_REASON,
        ),
        (["TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], PORT_REASON),
        (["TCP/10.0.10.10/8001", "TCP/0.0.0.0/8001"], ["TCP/127.0.0.1/8001"], PORT_REASON),
        (["TCP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], PORT_REASON),
        (["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001"], None),
        (["UDP/127.0.0.1/8001"], ["TCP/0.0.0.0/8001", "UDP/0.0.0.0/8001"], PORT_REASON),
    ],
)
def test_node_ports(wanted: list[str], used: list[str], want: Any) -> None:
    cluster = Cluster(make_node("m1", {"pods": "10"}))
    cluster.add(ports_pod(*used), "m1")
    assert reasons(cluster.filter(NodePorts(), ports_pod(*wanted))) == [want]


def test_node_ports_prefilter_skips_pods_without_host_ports() -> None:
    cluster = Cluster(make_node("m1"))
    _, s = NodePorts().pre_filter(CycleState(), cluster.pi(make_pod({})), cluster.table)
    assert s.code == Code.SKIP


# --- NodeUnschedulable, NodeName ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("unschedulable", "tolerations", "want"),
    [
        (True, [], (UU, ["node(s) were unschedulable"])),
        (False, [], None),
        (True, [tol("node.kubernetes.io/unschedulable", effect="NoSchedule")], None),
        (True, [tol("node.kubernetes.io/unschedulable", op="Exists")], None),
    ],
)
def test_node_unschedulable(unschedulable: bool, tolerations: list, want: Any) -> None:
    cluster = Cluster(make_node("n", unschedulable=unschedulable), make_node("ok"))
    got = reasons(cluster.filter(NodeUnschedulable(), make_pod({}, tolerations=tolerations)))
    assert got == [want, None]


def test_node_name() -> None:
    cluster = Cluster(make_node("foo"), make_node("bar"))
    reason = (UU, ["node(s) didn't match the requested node name"])
    assert reasons(cluster.filter(NodeName(), make_pod({}))) == [None, None]
    assert reasons(cluster.filter(NodeName(), make_pod({}, node="foo"))) == [None, reason]
    assert reasons(cluster.filter(NodeName(), make_pod({}, node="gone"))) == [reason, reason]


# --- ImageLocality -------------------------------------------------------------------------------------------


def images(*entries: tuple[list[str], int]) -> list[dict[str, Any]]:
    return [{"names": names, "sizeBytes": size * MB} for names, size in entries]


NODE_40_300_2000 = images(
    (["gcr.io/40:latest", "gcr.io/40:v1", "gcr.io/40:v1"], 40),
    (["gcr.io/300:latest", "gcr.io/300:v1"], 300),
    (["gcr.io/2000:latest"], 2000),
)
NODE_250_10 = images((["gcr.io/250:latest"], 250), (["gcr.io/10:latest", "gcr.io/10:v1"], 10))
NODE_600_40_900 = images(
    (["gcr.io/600:latest"], 600), (["gcr.io/40:latest"], 40), (["gcr.io/900:latest"], 900)
)
NODE_300_600_900 = images(
    (["gcr.io/300:latest"], 300), (["gcr.io/600:latest"], 600), (["gcr.io/900:latest"], 900)
)
NODE_4000_30 = images((["gcr.io/4000:latest"], 4000), (["gcr.io/30:latest"], 30))
NODE_20_30_40 = images((["gcr.io/20:latest"], 20), (["gcr.io/30:latest"], 30), (["gcr.io/40:latest"], 40))


def image_pod(*names: str, inits: tuple[str, ...] = ()) -> dict[str, Any]:
    return make_pod(*({"image": n} for n in names), inits=[{"image": n} for n in inits] or None)


@pytest.mark.parametrize(
    ("pod", "node_images", "want"),
    [
        (image_pod("gcr.io/40", "gcr.io/250"), [NODE_40_300_2000, NODE_250_10], [0, 5]),
        (image_pod("gcr.io/40", "gcr.io/300"), [NODE_40_300_2000, NODE_250_10], [7, 0]),
        (image_pod("gcr.io/10", "gcr.io/4000"), [NODE_4000_30, NODE_250_10], [100, 0]),
        (image_pod("gcr.io/10", "gcr.io/4000"), [NODE_4000_30, NODE_250_10, []], [66, 0, 0]),
        (
            image_pod("gcr.io/300", "gcr.io/600", "gcr.io/900"),
            [NODE_600_40_900, NODE_300_600_900, []],
            [32, 36, 0],
        ),
        (image_pod("gcr.io/30", "gcr.io/40"), [NODE_20_30_40, NODE_4000_30], [1, 0]),
        (image_pod("gcr.io/30", inits=("gcr.io/300",)), [NODE_40_300_2000, NODE_20_30_40], [6, 0]),
    ],
)
def test_image_locality(pod: dict, node_images: list, want: list[int]) -> None:
    cluster = Cluster(*(make_node(f"node{i}", images=imgs) for i, imgs in enumerate(node_images)))
    assert cluster.score(ImageLocality(), pod) == want


# --- queueing and binding ------------------------------------------------------------------------------------


def test_priority_sort() -> None:
    pl = PrioritySort()
    cluster = Cluster()
    hi = QueuedPodInfo(cluster.pi(make_pod(priority=10)), timestamp=5.0)
    lo_old = QueuedPodInfo(cluster.pi(make_pod(priority=1)), timestamp=1.0)
    lo_new = QueuedPodInfo(cluster.pi(make_pod(priority=1)), timestamp=2.0)
    assert sorted([lo_new, hi, lo_old], key=pl.sort_key) == [hi, lo_old, lo_new]
    assert pl.less(hi, lo_old) and not pl.less(lo_new, lo_old)


def test_scheduling_gates() -> None:
    cluster = Cluster()
    pl = SchedulingGates()
    assert pl.pre_enqueue(cluster.pi(make_pod())).ok
    s = pl.pre_enqueue(cluster.pi(make_pod(schedulingGates=[{"name": "a"}, {"name": "b"}])))
    assert (s.code, s.reasons) == (UU, ["waiting for scheduling gates: [a b]"])


class FakeClient:
    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.error = error

    async def create_subresource(
        self, api_version: str, plural: str, name: str, sub: str, body: dict, *, namespace: str | None = None
    ) -> dict:
        self.calls.append((api_version, plural, name, sub, body, namespace))
        if self.error:
            raise self.error
        return {"kind": "Status", "status": "Success"}


class FakeApiError(Exception):
    def __init__(self, message: str) -> None:
        super().__init__(f"409 Conflict: {message}")
        self.message = message


async def test_default_binder() -> None:
    cluster = Cluster()
    pi = cluster.pi(make_pod(name="web"))
    client = FakeClient()
    s = await DefaultBinder(None, Handle(client=client)).bind(CycleState(), pi, "n5")
    assert s.ok
    assert client.calls == [
        (
            "v1",
            "pods",
            "web",
            "binding",
            {
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "web", "namespace": "default", "uid": "web"},
                "target": {"kind": "Node", "name": "n5"},
            },
            "default",
        )
    ]
    msg = 'Operation cannot be fulfilled on pods/binding "web": pod web is already assigned to node "n5"'
    s = await DefaultBinder(None, Handle(client=FakeClient(FakeApiError(msg)))).bind(CycleState(), pi, "n5")
    assert (s.code, s.reasons) == (Code.ERROR, [msg])
    s = await DefaultBinder(None, Handle()).bind(CycleState(), pi, "n5")
    assert s.code == Code.ERROR


def test_in_tree_catalogue() -> None:
    registry = in_tree_catalogue()
    mine = {
        "PrioritySort",
        "SchedulingGates",
        "NodeName",
        "NodePorts",
        "NodeUnschedulable",
        "NodeResourcesFit",
        "NodeResourcesBalancedAllocation",
        "TaintToleration",
        "ImageLocality",
        "DefaultBinder",
    }
    assert mine <= set(registry) and len(registry) == len(IN_TREE_MODULES)
    handle = Handle(cache=Cache())
    for name in mine:
        assert registry.create(name, None, handle).name == name


def test_filtered_all_pass_has_no_reasons() -> None:
    # The framework treats a verdict without reasons as "rejects nothing"; all_pass must keep that shape.
    assert Filtered.all_pass(3).reasons == ()


# NodeResourcesFit's Filter keeps, per node, whether it lacks any resource a pod of one shape asks for, and
# follows the table's change log: the verdicts must stay those of a fresh plugin whatever changed in between.
@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "remove", "node", "look"]),
            st.integers(0, 5),
            st.sampled_from(["500m", "1", "1500m"]),
        ),
        max_size=30,
    )
)
def test_fit_filter_memo_follows_the_table(ops: list[tuple[str, int, str]]) -> None:
    cluster = Cluster(*(make_node(f"n{i}", cm("2", "4Gi", pods="3")) for i in range(4)))
    table = cluster.table
    kept = fit_plugin()
    probe = make_pod(cm("1", "1Gi"))
    live: list[str] = []
    for n, (op, arg, cpu) in enumerate(ops):
        if op == "add":
            d = make_pod(cm(cpu, "1Gi"), name=f"q{n}", node=f"n{arg % 4}")
            d["metadata"]["uid"] = f"q{n}"
            cluster.cache.on_pod_add(d)
            live.append(f"q{n}")
        elif op == "remove" and live:
            cluster.cache.on_pod_delete({"metadata": {"uid": live.pop(arg % len(live))}})
        elif op == "node":
            cluster.cache.on_node_update(None, make_node(f"n{arg % 4}", cm(f"{arg + 1}", "4Gi", pods="3")))
        pi = cluster.pi(probe)
        idx = cluster.idx()
        got = kept.filter(CycleState(), pi, table, idx)
        want = fit_plugin().filter(CycleState(), pi, table, idx)
        assert got.reason_bits.tolist() == want.reason_bits.tolist()
        assert (list(got.reasons), list(got.unresolvable)) == (list(want.reasons), list(want.unresolvable))
