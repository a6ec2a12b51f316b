"""NodeUnschedulable: a cordoned node (``spec.unschedulable``) takes only pods that tolerate the
``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import ClusterEvent, CycleState, Filtered
from kubesched.scheduler.plugins.taint_toleration import NO_SCHEDULE, tolerated

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeUnschedulable"
REASON = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = ("node.kubernetes.io/unschedulable", "", NO_SCHEDULE)


class NodeUnschedulable:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        if nodes.num_unschedulable == 0 or tolerated(pod.tolerations_key, UNSCHEDULABLE_TAINT):
            return Filtered.all_pass(len(idx))
        return Filtered(nodes.unschedulable[idx].astype(np.uint64), (REASON,), (True,))

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's tolerations decide this plugin's answer."""
        return pod.tolerations_key

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeTaint"),
            ClusterEvent("Pod", "UpdatePodToleration"),
        ]


PLUGIN = PluginDefinition(NAME, NodeUnschedulable)
