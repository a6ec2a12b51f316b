"""VolumeZone: a pod whose bound PVs carry zone or region labels goes only to nodes in those zones and regions,
as upstream's ``volumezone`` plugin.

PreFilter collects the labels of the pod's bound PVs (``topology.kubernetes.io/zone|region`` and the legacy
``failure-domain.beta.kubernetes.io/zone|region``; values may list several zones joined by ``__``) and answers
SKIP when there are none. Filter is a lookup in the node table's label codes: nodes without any topology label
pass, others must carry one of the values (a beta PV label is also matched against the node's GA label).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.apimachinery.volumes import WAIT_FOR_FIRST_CONSUMER, claim_class
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.node_affinity import label_codes
from kubesched.scheduler.plugins.volume_restrictions import lister_of
from kubesched.scheduler.volumes.usage import pod_claim_keys

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "VolumeZone"
REASON = "node(s) had no available volume zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}
_STATE = "PreFilter" + NAME

Topology = tuple[str, frozenset[str]]


def _final(message: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [message], NAME)


def volume_topologies(pv: Any) -> list[Topology]:
    labels = (pv.get("metadata") or {}).get("labels") or {}
    return [
        (key, frozenset(v for v in str(labels[key]).split("__") if v))
        for key in TOPOLOGY_LABELS
        if key in labels
    ]


class VolumeZone:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self.lister = lister_of(handle)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("StorageClass", "Add"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeLabel"),
            ClusterEvent("PersistentVolumeClaim", "Add"),
            ClusterEvent("PersistentVolumeClaim", "Update"),
            ClusterEvent("PersistentVolume", "Add"),
            ClusterEvent("PersistentVolume", "Update"),
        ]

    def topologies(self, pod: PodInfo) -> tuple[list[Topology], Status]:
        """Upstream ``getPVbyPod``: the zone/region labels of the pod's bound PVs, or why it cannot go anywhere."""
        found: list[Topology] = []
        for ns, name in pod_claim_keys(pod.pod):
            if not name:
                return [], _final("PersistentVolumeClaim had no name")
            claim = self.lister.claim(ns, name)
            if claim is None:
                return [], _final(f'persistentvolumeclaim "{name}" not found')
            pv_name = (claim.get("spec") or {}).get("volumeName") or ""
            if not pv_name:
                cls_name = claim_class(claim)
                if not cls_name:
                    return [], _final("PersistentVolumeClaim had no pv name and storageClass name")
                sc = self.lister.storage_class(cls_name)
                if sc is None:
                    return [], _final(f'storageclass.storage.k8s.io "{cls_name}" not found')
                mode = sc.get("volumeBindingMode")
                if not mode:
                    return [], _final(f'VolumeBindingMode not set for StorageClass "{cls_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue
                return [], _final("PersistentVolume had no name")
            pv = self.lister.volume(pv_name)
            if pv is None:
                return [], _final(f'persistentvolume "{pv_name}" not found')
            found.extend(volume_topologies(pv))
        return found, Status.success()

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not (pod.pod.get("spec") or {}).get("volumes"):
            return None, Status.skip()
        found, status = self.topologies(pod)
        if not status.ok:
            return None, status
        if not found:
            return None, Status.skip()
        state.write(_STATE, found)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        found: list[Topology] | None = state.read(_STATE)
        if found is None:
            found, status = self.topologies(pod)
            if not status.ok:
                return Filtered(np.ones(len(idx), dtype=np.uint64), (status.message(),), (True,))
        if not found:
            return Filtered.all_pass(len(idx))
        codes = {key: label_codes(nodes, key) for key in TOPOLOGY_LABELS}
        constrained = np.zeros(len(idx), dtype=bool)
        for lc in codes.values():
            constrained |= lc.codes[idx] >= 0
        ok = np.ones(len(idx), dtype=bool)
        for key, values in found:
            lc = codes[key]
            c = lc.codes[idx]
            table = lc.table()
            table[lc.code_set(values)] = True
            match = table[c]
            ga = _GA.get(key)
            if ga is not None:
                glc = codes[ga]
                gtable = glc.table()
                gtable[glc.code_set(values)] = True
                match |= (c < 0) & gtable[glc.codes[idx]]
            ok &= match
        bad = constrained & ~ok
        if not bad.any():
            return Filtered.all_pass(len(idx))
        return Filtered.from_mask(~bad, REASON, unresolvable=True)


PLUGIN = PluginDefinition(NAME, VolumeZone)

__all__ = ["NAME", "PLUGIN", "REASON", "TOPOLOGY_LABELS", "VolumeZone", "volume_topologies"]
