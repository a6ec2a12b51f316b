"""A simulated dynamic provisioner (what an external CSI provisioner does), for the StorageClasses the local
cluster ships:

- ``standard`` (the default class) and ``local``, both ``WaitForFirstConsumer`` with provisioner
  ``simulated.csi.kubesched.io``, reclaim policy Delete; a ``CSIDriver`` of that name. They are created when the
  controller starts, unless they exist.
- A claim the PV controller hands to this provisioner (``volume.kubernetes.io/storage-provisioner``) gets a PV
  ``pvc-<claim uid>`` pre-bound to it: the claim's size, access and volume modes, the class's reclaim policy, a
  CSI source of the simulated driver, and node affinity to where the scheduler put the first consumer
  (``volume.kubernetes.io/selected-node``): that node's zone (``standard``; ``parameters.topology: zone``) or
  the node itself (``local``; ``parameters.topology: node``). The PV controller then completes the binding.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kubesched.apimachinery.volumes import (
    ANN_DEFAULT_CLASS,
    ANN_DYNAMICALLY_PROVISIONED,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    annotations_of,
    claim_class,
)
from kubesched.cluster import errors
from kubesched.cluster.controllers.base import FIELD_MANAGER, Clock, Controller, Key, Obj, meta_of

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.resources import ResourceType

NAME = "simulated-provisioner"
PROVISIONER = "simulated.csi.kubesched.io"
TOPOLOGY_PARAMETER = "topology"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
HOSTNAME = "kubernetes.io/hostname"


def shipped_classes() -> list[Obj]:
    """The StorageClasses the local cluster creates at start."""

    def sc(name: str, topology: str, default: bool) -> Obj:
        meta: Obj = {"name": name}
        if default:
            meta["annotations"] = {ANN_DEFAULT_CLASS: "true"}
        return {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": meta,
            "provisioner": PROVISIONER,
            "parameters": {TOPOLOGY_PARAMETER: topology},
            "reclaimPolicy": "Delete",
            "volumeBindingMode": WAIT_FOR_FIRST_CONSUMER,
            "allowVolumeExpansion": True,
        }

    return [sc("standard", "zone", True), sc("local", "node", False)]


def csi_driver() -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSIDriver",
        "metadata": {"name": PROVISIONER},
        "spec": {
            "attachRequired": False,
            "podInfoOnMount": False,
            "storageCapacity": False,
            "volumeLifecycleModes": ["Persistent"],
        },
    }


class SimulatedProvisioner(Controller):
    name = NAME

    def __init__(self, api: ClusterApi, clock: Clock, *, ship_classes: bool = True) -> None:
        super().__init__(api, clock)
        self.ship_classes = ship_classes
        self.pv_type = api.rtype("", "v1", "persistentvolumes")
        self.pvc_type = api.rtype("", "v1", "persistentvolumeclaims")
        self.sc_type = api.rtype("storage.k8s.io", "v1", "storageclasses")
        self.driver_type = api.rtype("storage.k8s.io", "v1", "csidrivers")
        self.node_type = api.rtype("", "v1", "nodes")

    def start(self) -> None:
        if self.ship_classes:
            for obj in shipped_classes():
                self._ensure(self.sc_type, obj)
            self._ensure(self.driver_type, csi_driver())
        items, _ = self.api.store.list(self.pvc_type.storage_key)
        for st in items:
            self.on_claim("ADDED", st.obj, None)

    def _ensure(self, rtype: ResourceType, obj: Obj) -> None:
        if self.api.lookup(rtype, None, obj["metadata"]["name"]) is None:
            try:
                self.api.create(rtype, obj, None, field_manager=FIELD_MANAGER)
            except errors.ApiError as e:
                if e.code != 409:
                    raise

    def on_claim(self, etype: str, new: Obj | None, old: Obj | None) -> None:
        if new is None or meta_of(new).get("deletionTimestamp"):
            return
        if annotations_of(new).get(ANN_STORAGE_PROVISIONER) != PROVISIONER:
            return
        if (new.get("spec") or {}).get("volumeName"):
            return
        meta = meta_of(new)
        self.queue.add((str(meta.get("namespace") or ""), str(meta.get("name") or "")))

    def sync(self, key: Key) -> None:
        st = self.api.lookup(self.pvc_type, key[0], key[1])
        if st is None:
            return
        claim = st.obj
        meta = meta_of(claim)
        if (claim.get("spec") or {}).get("volumeName") or meta.get("deletionTimestamp"):
            return
        pv_name = f"pvc-{meta.get('uid')}"
        if self.api.lookup(self.pv_type, None, pv_name) is not None:
            return
        cls = claim_class(claim)
        sc_st = self.api.lookup(self.sc_type, None, cls) if cls else None
        if sc_st is None or sc_st.obj.get("provisioner") != PROVISIONER:
            return
        sc = sc_st.obj
        ann = annotations_of(claim)
        selected = ann.get(ANN_SELECTED_NODE)
        topology = str((sc.get("parameters") or {}).get(TOPOLOGY_PARAMETER) or "zone")
        labels: dict[str, str] = {}
        exprs: list[Obj] = []
        if selected:
            node_st = self.api.lookup(self.node_type, None, selected)
            if node_st is None:
                self.events.emit(
                    claim,
                    "Warning",
                    "ProvisioningFailed",
                    f'failed to provision volume with StorageClass "{cls}": node "{selected}" not found',
                )
                return
            node_labels = (meta_of(node_st.obj).get("labels")) or {}
            if topology == "node":
                host = node_labels.get(HOSTNAME, selected)
                exprs.append({"key": HOSTNAME, "operator": "In", "values": [host]})
            elif node_labels.get(ZONE):
                exprs.append({"key": ZONE, "operator": "In", "values": [node_labels[ZONE]]})
                labels[ZONE] = node_labels[ZONE]
                if node_labels.get(REGION):
                    labels[REGION] = node_labels[REGION]
        cspec = claim.get("spec") or {}
        size = ((cspec.get("resources") or {}).get("requests") or {}).get("storage") or "1Gi"
        spec: Obj = {
            "capacity": {"storage": size},
            "accessModes": list(cspec.get("accessModes") or ["ReadWriteOnce"]),
            "persistentVolumeReclaimPolicy": sc.get("reclaimPolicy") or "Delete",
            "storageClassName": cls,
            "volumeMode": cspec.get("volumeMode") or "Filesystem",
            "claimRef": {
                "kind": "PersistentVolumeClaim",
                "apiVersion": "v1",
                "namespace": meta.get("namespace") or "",
                "name": meta.get("name") or "",
                "uid": meta.get("uid") or "",
                "resourceVersion": meta.get("resourceVersion") or "",
            },
            "csi": {"driver": PROVISIONER, "volumeHandle": pv_name, "fsType": "ext4"},
        }
        if exprs:
            spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
        pv: Obj = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": pv_name,
                "labels": labels,
                "annotations": {ANN_DYNAMICALLY_PROVISIONED: PROVISIONER},
            },
            "spec": spec,
        }
        try:
            self.api.create(self.pv_type, pv, None, field_manager=FIELD_MANAGER)
        except errors.ApiError as e:
            if e.code != 409:
                raise
            return
        self.events.emit(
            claim,
            "Normal",
            "ProvisioningSucceeded",
            f"Successfully provisioned volume {pv_name}",
        )


__all__ = ["NAME", "PROVISIONER", "SimulatedProvisioner", "csi_driver", "shipped_classes"]
