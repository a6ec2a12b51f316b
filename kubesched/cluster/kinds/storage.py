"""Storage kinds: the defaults kube-apiserver applies to StorageClasses, PersistentVolumes and
PersistentVolumeClaims, and the DefaultStorageClass admission plugin (a claim that names no class gets the
default one, the newest if several are marked ``storageclass.kubernetes.io/is-default-class``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.apimachinery.volumes import ANN_BETA_STORAGE_CLASS, ANN_DEFAULT_CLASS
from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, col, created, name_of
from kubesched.cluster.kinds.strategy import Strategy
from kubesched.cluster.resources import Obj, ResourceType

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi


def _spec(obj: Obj) -> Obj:
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        spec = obj["spec"] = {}
    return spec


class StorageClassStrategy(Strategy):
    columns: list[Column] = [
        NAME_COLUMN,
        col("Provisioner", "The volume plugin or CSI driver that provisions volumes of this class."),
        col("ReclaimPolicy", "What happens to a provisioned volume when its claim goes."),
        col("VolumeBindingMode", "When volumes are bound and provisioned."),
        col("AllowVolumeExpansion", "Whether claims may grow.", type="boolean"),
        AGE_COLUMN,
    ]

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        name = name_of(obj)
        if ((obj.get("metadata") or {}).get("annotations") or {}).get(ANN_DEFAULT_CLASS) == "true":
            name += " (default)"
        return [
            name,
            obj.get("provisioner") or "",
            obj.get("reclaimPolicy") or "Delete",
            obj.get("volumeBindingMode") or "Immediate",
            bool(obj.get("allowVolumeExpansion")),
            created(obj, now),
        ]


class PersistentVolumeStrategy(Strategy):
    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        spec = _spec(obj)
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")
        obj["status"] = {"phase": "Pending"}


def default_class_name(api: ClusterApi) -> str | None:
    """The default StorageClass: the newest of those annotated as default (upstream ``GetDefaultClass``)."""
    rtype = api.rtype("storage.k8s.io", "v1", "storageclasses")
    items, _ = api.store.list(rtype.storage_key)
    best: tuple[str, str] | None = None
    for st in items:
        meta = st.obj.get("metadata") or {}
        if (meta.get("annotations") or {}).get(ANN_DEFAULT_CLASS) != "true":
            continue
        key = (str(meta.get("creationTimestamp") or ""), str(meta.get("name") or ""))
        if best is None or key > best:
            best = key
    return best[1] if best is not None else None


class PersistentVolumeClaimStrategy(Strategy):
    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        spec = _spec(obj)
        spec.setdefault("volumeMode", "Filesystem")
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        if spec.get("storageClassName") is None and ANN_BETA_STORAGE_CLASS not in annotations:
            default = default_class_name(api)
            if default is not None:
                spec["storageClassName"] = default
        obj["status"] = {"phase": "Pending"}


STORAGE_CLASS = StorageClassStrategy()
PERSISTENT_VOLUME = PersistentVolumeStrategy()
PERSISTENT_VOLUME_CLAIM = PersistentVolumeClaimStrategy()

__all__ = [
    "PERSISTENT_VOLUME",
    "PERSISTENT_VOLUME_CLAIM",
    "STORAGE_CLASS",
    "default_class_name",
]
