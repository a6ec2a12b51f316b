"""NodeResourcesBalancedAllocation: prefer nodes where the pod leaves cpu and memory (or the configured
resources) equally used — with the Kubernetes 1.36 formula, which scores the *change* in balance the pod brings:
``50 + (50 + balance(with pod) - balance(without pod)) / 2``.

Best-effort pods (no requests for any configured resource) are not scored: PreScore answers SKIP, so that a
flood of request-less pods does not pile onto one node (kubernetes#129138).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.cache import SlotMemo
from kubesched.scheduler.framework.interface import CycleState, Status
from kubesched.scheduler.framework.registry import get_arg
from kubesched.scheduler.plugins.node_resources_common import (
    SMALL,
    RequestedResources,
    balanced_allocation_136,
    balanced_allocation_136_one,
    parse_resources,
)

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeResourcesBalancedAllocation"
_PRE_SCORE_KEY = "PreScore" + NAME


class NodeResourcesBalancedAllocation:
    name = NAME
    scores_in_range = True

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        resources = parse_resources(get_arg(args, "resources"))
        names = [r.name for r in resources]
        if len(set(names)) != len(names):
            raise ValueError(f"resources: duplicate resource names in {names}")
        self._resources = RequestedResources(resources, use_requested=True)
        self._memo = SlotMemo()

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        pod_req = self._resources.pod_requests(pod, nodes.res)
        if not any(pod_req):
            return Status.skip()
        state.write(_PRE_SCORE_KEY, pod_req)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        pod_req = state.read(_PRE_SCORE_KEY)
        if pod_req is None:
            pod_req = self._resources.pod_requests(pod, nodes.res)
            if not any(pod_req):
                return np.zeros(len(idx), dtype=np.int64)

        def compute(sub: np.ndarray) -> np.ndarray:
            if len(sub) <= SMALL:
                rows = (self._resources.row(nodes, slot, pod_req) for slot in sub.tolist())
                return np.fromiter(
                    (balanced_allocation_136_one(r) for r in rows), dtype=np.int64, count=len(sub)
                )
            cols = self._resources.columns(nodes, sub, pod_req)
            return balanced_allocation_136(cols, len(sub))

        def compute_one(slot: int) -> int:
            return balanced_allocation_136_one(self._resources.row(nodes, slot, pod_req))

        return self._memo.get(nodes, pod_req, idx, compute, compute_one)


def new(args: Any, handle: Any) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args, handle)
