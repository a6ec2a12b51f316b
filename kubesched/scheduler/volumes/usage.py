"""What the pods already placed use, for VolumeRestrictions and NodeVolumeLimits: pods per claim (cluster-wide,
for ReadWriteOncePod), inline disks per node (GCE PD, AWS EBS, RBD, iSCSI conflicts) and attached CSI volumes per
node and driver (counts as numpy columns, so the volume-limit check is one comparison over all nodes).

A ``TableListener`` of the node table, registered on the first pod that has volumes of interest: until then a
cluster of pods without volumes pays nothing for it. Each pod's contribution is recorded as it was when the pod
was added, so removing it is exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.volumes.listers import VolumeLister

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

Obj = Mapping[str, Any]
Attachment = tuple[str, str]  # (CSI driver, unique volume name)
DISK_KINDS = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def pod_claim_keys(pod: Obj) -> list[tuple[str, str]]:
    """(namespace, claim name) of each PVC the pod's volumes use (generic ephemeral volumes included)."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or ""
    out: list[tuple[str, str]] = []
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        pvc = vol.get("persistentVolumeClaim")
        if pvc is not None:
            out.append((ns, str(pvc.get("claimName") or "")))
        elif vol.get("ephemeral") is not None:
            out.append((ns, f"{meta.get('name') or ''}-{vol.get('name') or ''}"))
    return out


def inline_disks(pod: Obj) -> list[Obj]:
    """The pod's volumes of the in-tree kinds that can conflict (``needsRestrictionsCheck``)."""
    return [v for v in (pod.get("spec") or {}).get("volumes") or () if any(k in v for k in DISK_KINDS)]


def attachments(pod: Obj, lister: VolumeLister) -> list[Attachment]:
    """CSI volumes the pod attaches (``filterAttachableVolumes``): a PVC's PV with a CSI source (or, unbound,
    its class's provisioner), and inline CSI volumes. A claim stands for its volume: two claims never share a PV,
    and the name stays the same when the claim gets bound."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or ""
    out: list[Attachment] = []
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        claim_name: str | None = None
        pvc_src = vol.get("persistentVolumeClaim")
        if pvc_src is not None:
            claim_name = str(pvc_src.get("claimName") or "")
        elif vol.get("ephemeral") is not None:
            claim_name = f"{meta.get('name') or ''}-{vol.get('name') or ''}"
        elif vol.get("csi") is not None:
            driver = str(vol["csi"].get("driver") or "")
            if driver:
                out.append((driver, f"inline/{ns}/{meta.get('name') or ''}/{vol.get('name') or ''}"))
            continue
        if claim_name is None:
            continue
        claim = lister.claim(ns, claim_name)
        if claim is None:
            continue
        driver = ""
        pv_name = (claim.get("spec") or {}).get("volumeName") or ""
        pv = lister.volume(pv_name) if pv_name else None
        if pv is not None:
            csi = (pv.get("spec") or {}).get("csi")
            if csi is None:
                continue  # an in-tree volume: not counted against CSI limits
            driver = str(csi.get("driver") or "")
        else:
            cls_name = (claim.get("spec") or {}).get("storageClassName") or ""
            sc = lister.storage_class(cls_name) if cls_name else None
            if sc is None:
                continue
            driver = str(sc.get("provisioner") or "")
        if driver:
            out.append((driver, f"pvc/{ns}/{claim_name}"))
    return out


def has_volumes_of_interest(pod: Obj) -> bool:
    for vol in (pod.get("spec") or {}).get("volumes") or ():
        if "persistentVolumeClaim" in vol or "ephemeral" in vol or "csi" in vol:
            return True
        if any(k in vol for k in DISK_KINDS):
            return True
    return False


@dataclass(slots=True)
class _Recorded:
    slot: int
    claims: list[tuple[str, str]]
    disks: list[Obj]
    attached: list[Attachment]


class VolumeUsage:
    """One per scheduler (``Handle.singletons``); ``ensure(table, lister)`` before reading."""

    def __init__(self) -> None:
        self.table: NodeTable | None = None
        self.lister: VolumeLister | None = None
        self.claim_users: Counter[tuple[str, str]] = Counter()
        self.disks: dict[int, list[tuple[str, Obj]]] = {}  # slot -> (pod uid, volume)
        self.attached: dict[int, Counter[Attachment]] = {}
        self.attachment_slots: dict[Attachment, Counter[int]] = {}
        self._counts: dict[str, np.ndarray] = {}  # driver -> distinct attached volumes per slot
        self._pods: dict[str, _Recorded] = {}

    def ensure(self, table: NodeTable, lister: VolumeLister) -> None:
        if self.table is table:
            return
        self.table = table
        self.lister = lister
        table.add_listener(self)
        for pi, slot in table.iter_pods():
            self.on_pod_added(pi, slot)

    def counts(self, driver: str, capacity: int) -> np.ndarray:
        arr = self._counts.get(driver)
        if arr is None or len(arr) < capacity:
            grown = np.zeros(max(capacity, 1), dtype=np.int64)
            if arr is not None:
                grown[: len(arr)] = arr
            arr = self._counts[driver] = grown
        return arr

    def on_pod_added(self, pi: PodInfo, slot: int) -> None:
        pod = pi.pod
        if not has_volumes_of_interest(pod) or pi.uid in self._pods:
            return
        assert self.lister is not None and self.table is not None
        rec = _Recorded(slot, pod_claim_keys(pod), inline_disks(pod), attachments(pod, self.lister))
        self._pods[pi.uid] = rec
        self.claim_users.update(rec.claims)
        if rec.disks:
            self.disks.setdefault(slot, []).extend((pi.uid, v) for v in rec.disks)
        if rec.attached:
            per_slot = self.attached.setdefault(slot, Counter())
            for att in rec.attached:
                if per_slot[att] == 0:
                    self.counts(att[0], self.table.capacity)[slot] += 1
                    self.attachment_slots.setdefault(att, Counter())[slot] += 1
                per_slot[att] += 1

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None:
        rec = self._pods.pop(pi.uid, None)
        if rec is None:
            return
        slot = rec.slot
        self.claim_users.subtract(rec.claims)
        for key in rec.claims:
            if self.claim_users[key] <= 0:
                del self.claim_users[key]
        if rec.disks:
            left = [(u, v) for u, v in self.disks.get(slot, ()) if u != pi.uid]
            if left:
                self.disks[slot] = left
            else:
                self.disks.pop(slot, None)
        if rec.attached:
            per_slot = self.attached.get(slot)
            if per_slot is None:
                return
            for att in rec.attached:
                per_slot[att] -= 1
                if per_slot[att] <= 0:
                    del per_slot[att]
                    self._counts[att[0]][slot] -= 1
                    slots = self.attachment_slots.get(att)
                    if slots is not None:
                        slots[slot] -= 1
                        if slots[slot] <= 0:
                            del slots[slot]
                        if not slots:
                            del self.attachment_slots[att]
            if not per_slot:
                del self.attached[slot]

    def on_pod_replaced(self, old: PodInfo, new: PodInfo, slot: int) -> None:
        """A new version of a pod on the same node (status writes): a pod's volumes never change, so the record
        stands."""
        if old.uid != new.uid or (old.uid not in self._pods and has_volumes_of_interest(new.pod)):
            self.on_pod_removed(old, slot)
            self.on_pod_added(new, slot)

    def on_node_changed(self, slot: int) -> None:
        return None


__all__ = [
    "DISK_KINDS",
    "VolumeUsage",
    "attachments",
    "has_volumes_of_interest",
    "inline_disks",
    "pod_claim_keys",
]
