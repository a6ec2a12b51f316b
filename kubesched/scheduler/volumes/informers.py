"""The scheduler's informers for the storage kinds (started only when a profile enables a volume plugin).

Each becomes one of ``StoreVolumes``' stores, keeps its generations and class index current, and reports the
cluster event (``PersistentVolume``/``PersistentVolumeClaim``/``StorageClass``/``CSINode``/``CSIDriver``/
``CSIStorageCapacity`` ``Add``/``Update``) the queue moves pods rejected by the volume plugins on. As upstream's
hints: PV and PVC events only concern pods with claims.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesched.client.informer import Informer
from kubesched.scheduler.framework.interface import ClusterEvent
from kubesched.scheduler.volumes.listers import API_VERSIONS, StoreVolumes

KINDS = {
    "persistentvolumes": "PersistentVolume",
    "persistentvolumeclaims": "PersistentVolumeClaim",
    "storageclasses": "StorageClass",
    "csinodes": "CSINode",
    "csidrivers": "CSIDriver",
    "csistoragecapacities": "CSIStorageCapacity",
}
VOLUME_PLUGINS = ("VolumeBinding", "VolumeRestrictions", "VolumeZone", "NodeVolumeLimits")
_CLAIM_EVENTS = ("PersistentVolume", "PersistentVolumeClaim")


def has_claims(pod_info: Any) -> bool:
    for vol in (pod_info.pod.get("spec") or {}).get("volumes") or ():
        if "persistentVolumeClaim" in vol or "ephemeral" in vol:
            return True
    return False


def volume_informers(
    client: Any,
    volumes: StoreVolumes,
    stores: dict[str, Any],
    on_event: Callable[[ClusterEvent, Callable[[Any], bool] | None], None],
) -> dict[str, Informer]:
    """Informers by plural, registered in ``stores`` (the dict ``volumes`` reads) with their handlers."""
    out: dict[str, Informer] = {}
    for plural, kind in KINDS.items():
        inf = Informer(client, API_VERSIONS[plural], plural)
        check = has_claims if kind in _CLAIM_EVENTS else None

        def added(obj: dict[str, Any], plural: str = plural, kind: str = kind, check: Any = check) -> None:
            volumes.changed(plural, None, obj)
            on_event(ClusterEvent(kind, "Add"), check)

        def updated(
            old: dict[str, Any],
            new: dict[str, Any],
            plural: str = plural,
            kind: str = kind,
            check: Any = check,
        ) -> None:
            volumes.changed(plural, old, new)
            on_event(ClusterEvent(kind, "Update"), check)

        def deleted(obj: dict[str, Any], plural: str = plural) -> None:
            volumes.changed(plural, obj, None)

        inf.add_handler(added, updated, deleted)
        stores[plural] = inf
        out[plural] = inf
    return out


__all__ = ["KINDS", "VOLUME_PLUGINS", "has_claims", "volume_informers"]
