"""NodeVolumeLimits: a node takes no more CSI volumes per driver than its CSINode's
``spec.drivers[].allocatable.count``, counting the distinct volumes of the pods already there, as upstream's
``nodevolumelimits`` (CSILimits) plugin.

PreFilter answers SKIP for a pod without claims. Filter compares, for each CSI driver of the pod's new volumes,
attached-per-node (a numpy column kept by ``VolumeUsage``) plus the pod's volumes not already on the node with the
per-node limit (a column built from the CSINodes, rebuilt when they or the set of nodes change).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.volume_restrictions import lister_of
from kubesched.scheduler.volumes.usage import VolumeUsage, attachments

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeVolumeLimits"
REASON = "node(s) exceed max volume count"


def csi_node_limits(csi_node: Any) -> dict[str, int]:
    """``getVolumeLimits``: driver -> allocatable count, for the drivers that declare one."""
    out: dict[str, int] = {}
    for d in ((csi_node or {}).get("spec") or {}).get("drivers") or ():
        count = (d.get("allocatable") or {}).get("count")
        if count is not None and d.get("name"):
            out[str(d["name"])] = int(count)
    return out


class NodeVolumeLimits:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self.lister = lister_of(handle)
        self.usage: VolumeUsage = handle.singletons.get(VolumeUsage) if handle is not None else VolumeUsage()
        self._limits: dict[str, tuple[tuple[int, int, int], np.ndarray]] = {}
        self._limited: dict[str, bool] = {}  # driver -> some node declares a limit for it

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("CSINode", "Add"),
            ClusterEvent("CSINode", "Update"),
            ClusterEvent("AssignedPod", "Delete"),
            ClusterEvent("PersistentVolumeClaim", "Add"),
            ClusterEvent("PersistentVolume", "Add"),
            ClusterEvent("Node", "Add"),
        ]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        for vol in (pod.pod.get("spec") or {}).get("volumes") or ():
            if "persistentVolumeClaim" in vol or "ephemeral" in vol:
                self.usage.ensure(nodes, self.lister)
                return None, Status.success()
        return None, Status.skip()

    def limits(self, driver: str, nodes: NodeTable) -> np.ndarray:
        """Per slot: the driver's volume limit, -1 where the node declares none."""
        stamp = (self.lister.generation("csinodes"), nodes.node_version, nodes.capacity)
        found = self._limits.get(driver)
        if found is not None and found[0] == stamp:
            return found[1]
        arr = np.full(nodes.capacity, -1, dtype=np.int64)
        for csi_node in self.lister.csi_nodes():
            slot = nodes.index.get(str((csi_node.get("metadata") or {}).get("name") or ""))
            if slot is None:
                continue
            count = csi_node_limits(csi_node).get(driver)
            if count is not None:
                arr[slot] = count
        self._limits[driver] = (stamp, arr)
        self._limited[driver] = bool((arr >= 0).any())
        return arr

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        new = attachments(pod.pod, self.lister)
        if not new:
            return Filtered.all_pass(len(idx))
        self.usage.ensure(nodes, self.lister)
        by_driver: dict[str, set[str]] = {}
        for driver, key in new:
            by_driver.setdefault(driver, set()).add(key)
        bad: np.ndarray | None = None
        for driver, keys in by_driver.items():
            all_limits = self.limits(driver, nodes)
            if not self._limited.get(driver, False):
                continue  # no node declares a limit for this driver
            limit = all_limits[idx]
            over = (limit >= 0) & (self.usage.counts(driver, nodes.capacity)[idx] + len(keys) > limit)
            # Volumes of the pod already attached to a node do not count twice there: re-check those nodes.
            already: dict[int, int] = {}
            for key in keys:
                for slot in self.usage.attachment_slots.get((driver, key), ()):
                    already[slot] = already.get(slot, 0) + 1
            for slot, n in already.items():
                for pos in np.flatnonzero(idx == slot).tolist():
                    if over[pos]:
                        over[pos] = (
                            self.usage.counts(driver, nodes.capacity)[slot] + len(keys) - n > limit[pos]
                        )
            bad = over if bad is None else bad | over
        if bad is None:
            return Filtered.all_pass(len(idx))
        if not bad.any():
            return Filtered.all_pass(len(idx))
        return Filtered.from_mask(~bad, REASON)


PLUGIN = PluginDefinition(NAME, NodeVolumeLimits)

__all__ = ["NAME", "PLUGIN", "REASON", "NodeVolumeLimits", "csi_node_limits"]
