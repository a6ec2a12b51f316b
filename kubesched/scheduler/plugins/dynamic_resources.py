"""DynamicResources: kube-scheduler's plugin for dynamic resource allocation (DRA, ``spec.resourceClaims``),
implemented for what kubesched supports — pods without resource claims.

kubesched does not allocate ResourceClaims. Rather than pretend, the plugin keeps upstream's behaviour for the
pods it can handle and refuses the others plainly:

- a pod without ``spec.resourceClaims`` passes PreEnqueue, gets SKIP from PreFilter (so its Filter is
  skipped, as upstream) and passes Reserve and PreBind; PostFilter answers UNSCHEDULABLE ``no new claims to
  deallocate`` exactly as upstream does for such a pod, which is why that phrase sits in front of
  ``preemption: ...`` in a default-profile FailedScheduling message;
- a pod with resource claims is let into the queue (so it gets a FailedScheduling event that says why) and
  rejected at PreFilter as UNSCHEDULABLE_AND_UNRESOLVABLE: preemption cannot help and no cluster event can
  (resource claims of a pod are immutable). Its PostFilter answer is the same ``no new claims to deallocate``:
  kubesched never allocated a claim, so there is none to give back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    Filtered,
    NodeToStatus,
    PreFilterResult,
    Status,
)

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "DynamicResources"
NO_CLAIMS_TO_DEALLOCATE = "no new claims to deallocate"
NOT_SUPPORTED = "dynamic resource allocation is not supported by kubesched"


def resource_claim_names(pod: Mapping[str, Any]) -> list[str]:
    """Names of the pod's ``spec.resourceClaims`` entries (empty when it has none)."""
    claims = (pod.get("spec") or {}).get("resourceClaims") or ()
    return [str((c or {}).get("name") or "") for c in claims]


def unsupported_message(claims: list[str]) -> str:
    listed = ", ".join(n for n in claims if n) or "unnamed"
    return f"pod has resource claims ({listed}), but {NOT_SUPPORTED}"


class DynamicResources:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self.handle = handle

    def events_to_register(self) -> list[ClusterEvent]:
        # Only pods with claims are ever rejected here, and nothing in the cluster can change that answer.
        return []

    def pre_enqueue(self, pod: PodInfo) -> Status:
        return Status.success()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        claims = resource_claim_names(pod.pod)
        if not claims:
            return None, Status.skip()
        return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [unsupported_message(claims)], NAME)

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        # Reached only when PreFilter was bypassed (what-if checks): the same answer, node by node.
        claims = resource_claim_names(pod.pod)
        if not claims:
            return Filtered.all_pass(len(idx))
        reject = np.ones(len(idx), dtype=np.uint64)
        return Filtered(reject, (unsupported_message(claims),), (True,))

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        return None, Status(Code.UNSCHEDULABLE, [NO_CLAIMS_TO_DEALLOCATE], NAME)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status.success()

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        return None

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return Status.success()


PLUGIN = PluginDefinition(NAME, DynamicResources)


__all__ = [
    "NAME",
    "NOT_SUPPORTED",
    "NO_CLAIMS_TO_DEALLOCATE",
    "PLUGIN",
    "DynamicResources",
    "resource_claim_names",
    "unsupported_message",
]
