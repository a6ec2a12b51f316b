"""NodeResourcesBalancedAllocation: prefer nodes where the pod leaves cpu and memory (or the configured
resources) equally used — with the Kubernetes 1.36 formula, which scores the *change* in balance the pod brings:
``50 + (50 + balance(with pod) - balance(without pod)) / 2``.

Best-effort pods (no requests for any configured resource) are not scored: PreScore answers SKIP, so that a
flood of request-less pods does not pile onto one node (kubernetes#129138).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, model_validator

from kubesched.scheduler.cache import SlotMemo
from kubesched.scheduler.config.args import ArgsModel, ResourceSpec, default_resources
from kubesched.scheduler.config.errors import FieldError, duplicate, invalid
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import CycleState, Status
from kubesched.scheduler.plugins.node_resources_common import (
    SMALL,
    RequestedResources,
    balanced_allocation_136,
    balanced_allocation_136_one,
    resource_weights,
)

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeResourcesBalancedAllocation"
_PRE_SCORE_KEY = "PreScore" + NAME


class NodeResourcesBalancedAllocationArgs(ArgsModel):
    resources: tuple[ResourceSpec, ...] = Field(default_factory=default_resources)

    @model_validator(mode="before")
    @classmethod
    def _default_resources(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("resources"):
            return {k: v for k, v in data.items() if k != "resources"}
        return data

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        seen: set[str] = set()
        for i, res in enumerate(self.resources):
            if res.name in seen:
                errs.append(duplicate(f"{path}.resources[{i}].name", res.name))
            seen.add(res.name)
            if res.weight != 1:
                errs.append(invalid(f"{path}.resources[{i}].weight", res.weight, "must be 1"))
        return errs


class NodeResourcesBalancedAllocation:
    name = NAME
    scores_in_range = True

    def __init__(self, args: NodeResourcesBalancedAllocationArgs, handle: Any = None) -> None:
        self._resources = RequestedResources(resource_weights(args.resources), use_requested=True)
        self._memo = SlotMemo()

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's requests decide this plugin's answers."""
        return (tuple(pod.requests.tolist()), pod.nonzero_cpu, pod.nonzero_mem, pod.scalar_names)

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


PLUGIN = PluginDefinition(NAME, NodeResourcesBalancedAllocation, NodeResourcesBalancedAllocationArgs)
