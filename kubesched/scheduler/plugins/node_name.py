"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import ClusterEvent, CycleState, Filtered

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeName"
REASON = "node(s) didn't match the requested node name"


class NodeName:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        pass

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        if not pod.node_name:
            return Filtered.all_pass(len(idx))
        target = nodes.index.get(pod.node_name, -1)
        return Filtered.from_mask(idx == target, REASON, unresolvable=True)

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: ``spec.nodeName`` decides this plugin's answer."""
        return (pod.node_name,)

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Node", "Add")]


PLUGIN = PluginDefinition(NAME, NodeName)
