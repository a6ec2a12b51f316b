"""VolumeRestrictions: in-tree disks that one node cannot mount twice (GCE PD and iSCSI unless every mount is
read-only, AWS EBS always, RBD images on overlapping monitors unless read-only) and ReadWriteOncePod claims
another pod already uses, as upstream's ``volumerestrictions`` plugin.

PreFilter looks up the pod's ReadWriteOncePod claims (a missing claim is final: ``persistentvolumeclaim "x" not
found``) and answers SKIP for a pod with neither conflicting disks nor such claims in use, so most pods never
reach Filter. Filter checks only the nodes that hold such disks (a sparse index kept by ``VolumeUsage``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.apimachinery.volumes import READ_WRITE_ONCE_POD
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    Code,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.volumes.listers import VolumeLister, static_volumes
from kubesched.scheduler.volumes.usage import VolumeUsage, inline_disks, pod_claim_keys

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "VolumeRestrictions"
REASON_DISK_CONFLICT = "node(s) had no available disk"
# 1.36's wording (observed; older releases said "node has pod using PersistentVolumeClaim with the same name and
# ReadWriteOncePod access mode").
REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode already in-use by "
    "another pod"
)
_STATE = "PreFilter" + NAME
_REASONS = (REASON_DISK_CONFLICT, REASON_RWOP_CONFLICT)
_UNRESOLVABLE = (False, False)

Obj = Mapping[str, Any]


def lister_of(handle: Any) -> VolumeLister:
    found = getattr(handle, "volumes", None) if handle is not None else None
    return found if found is not None else static_volumes(())


def _overlap(a: Any, b: Any) -> bool:
    return bool(set(a or ()) & set(b or ()))


def volumes_conflict(vol: Obj, existing: Obj) -> bool:
    """Upstream ``isVolumeConflict`` for one volume of the new pod against one volume of a placed pod."""
    g, eg = vol.get("gcePersistentDisk"), existing.get("gcePersistentDisk")
    if g is not None and eg is not None:
        if g.get("pdName") == eg.get("pdName") and not (g.get("readOnly") and eg.get("readOnly")):
            return True
    a, ea = vol.get("awsElasticBlockStore"), existing.get("awsElasticBlockStore")
    if a is not None and ea is not None and a.get("volumeID") == ea.get("volumeID"):
        return True
    i, ei = vol.get("iscsi"), existing.get("iscsi")
    if i is not None and ei is not None:
        if i.get("iqn") == ei.get("iqn") and not (i.get("readOnly") and ei.get("readOnly")):
            return True
    r, er = vol.get("rbd"), existing.get("rbd")
    if r is not None and er is not None:
        if (
            _overlap(r.get("monitors"), er.get("monitors"))
            and (r.get("pool") or "rbd") == (er.get("pool") or "rbd")
            and r.get("image") == er.get("image")
            and not (r.get("readOnly") and er.get("readOnly"))
        ):
            return True
    return False


class _State:
    __slots__ = ("conflicts", "disks", "rwop")

    def __init__(self, disks: list[Obj], rwop: frozenset[tuple[str, str]], conflicts: int) -> None:
        self.disks = disks
        self.rwop = rwop
        self.conflicts = conflicts


class VolumeRestrictions:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self.handle = handle
        self.lister = lister_of(handle)
        self.usage: VolumeUsage = handle.singletons.get(VolumeUsage) if handle is not None else VolumeUsage()

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("AssignedPod", "Delete"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("PersistentVolumeClaim", "Add"),
        ]

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        spec_vols = (pod.pod.get("spec") or {}).get("volumes")
        if not spec_vols:
            return None, Status.skip()
        disks = inline_disks(pod.pod)
        rwop: set[tuple[str, str]] = set()
        for ns, name in pod_claim_keys(pod.pod):
            claim = self.lister.claim(ns, name)
            if claim is None:
                return None, Status(
                    Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [f'persistentvolumeclaim "{name}" not found'], NAME
                )
            if READ_WRITE_ONCE_POD in ((claim.get("spec") or {}).get("accessModes") or ()):
                rwop.add((ns, name))
        if not disks and not rwop:
            return None, Status.skip()
        self.usage.ensure(nodes, self.lister)
        conflicts = sum(1 for key in rwop if self.usage.claim_users.get(key, 0) > 0)
        if not disks and conflicts == 0:
            return None, Status.skip()
        state.write(_STATE, _State(disks, frozenset(rwop), conflicts))
        return None, Status.success()

    # Preemption's what-if: a victim removed frees its claims, a nominated pod added takes them.
    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable) -> Status:
        return self._adjust(state, other, +1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable
    ) -> Status:
        return self._adjust(state, other, -1)

    def _adjust(self, state: CycleState, other: PodInfo, delta: int) -> Status:
        s = state.read(_STATE)
        if s is None or not s.rwop:
            return Status.success()
        hits = sum(1 for key in pod_claim_keys(other.pod) if key in s.rwop)
        if hits:
            state.write(_STATE, _State(s.disks, s.rwop, s.conflicts + delta * hits))
        return Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        s: _State | None = state.read(_STATE)
        if s is None:
            disks = inline_disks(pod.pod)
            s = _State(disks, frozenset(), 0)
            if disks:
                self.usage.ensure(nodes, self.lister)
        bits = np.zeros(len(idx), dtype=np.uint64)
        if s.disks and self.usage.disks:
            bad_slots = [
                slot
                for slot, placed in self.usage.disks.items()
                if any(volumes_conflict(v, e) for v in s.disks for _, e in placed)
            ]
            if bad_slots:
                bits[np.isin(idx, np.asarray(bad_slots, dtype=np.intp))] = 1
        if s.conflicts > 0:
            bits[bits == 0] = 2
        if not bits.any():
            return Filtered.all_pass(len(idx))
        return Filtered(bits, _REASONS, _UNRESOLVABLE)


PLUGIN = PluginDefinition(NAME, VolumeRestrictions)

__all__ = [
    "NAME",
    "PLUGIN",
    "REASON_DISK_CONFLICT",
    "REASON_RWOP_CONFLICT",
    "VolumeRestrictions",
    "volumes_conflict",
]
