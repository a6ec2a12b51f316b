"""Typed read access to the storage objects the volume plugins look at (``Handle.volumes``).

``VolumeLister`` is what a plugin sees: claims, volumes (all, or one class's), storage classes, CSINodes,
CSIDrivers and CSIStorageCapacities. ``StoreVolumes`` serves it from anything with ``get(name, namespace)`` and
``list()`` per plural: the live scheduler's informers, or ``ObjectStore`` (a dict, for ``simulate`` and tests).
Volumes are indexed by storage class, so a claim's candidates are not a scan of every PV in the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from kubesched.apimachinery.volumes import volume_class

Obj = Mapping[str, Any]

PLURALS = (
    "persistentvolumes",
    "persistentvolumeclaims",
    "storageclasses",
    "csinodes",
    "csidrivers",
    "csistoragecapacities",
)
# (apiVersion, plural) of each kind the volume plugins watch.
API_VERSIONS: dict[str, str] = {
    "persistentvolumes": "v1",
    "persistentvolumeclaims": "v1",
    "storageclasses": "storage.k8s.io/v1",
    "csinodes": "storage.k8s.io/v1",
    "csidrivers": "storage.k8s.io/v1",
    "csistoragecapacities": "storage.k8s.io/v1",
}


class VolumeLister(Protocol):
    def claim(self, namespace: str, name: str) -> Obj | None: ...

    def volume(self, name: str) -> Obj | None: ...

    def volumes_of_class(self, cls: str) -> Iterable[Obj]: ...

    def storage_class(self, name: str) -> Obj | None: ...

    def csi_node(self, name: str) -> Obj | None: ...

    def csi_nodes(self) -> Iterable[Obj]: ...

    def csi_driver(self, name: str) -> Obj | None: ...

    def capacities(self) -> Iterable[Obj]: ...

    def generation(self, plural: str) -> int:
        """Bumps whenever an object of ``plural`` changes (plugins key derived columns on it)."""
        ...


class Store(Protocol):
    def get(self, name: str, namespace: str | None = None) -> Any: ...

    def list(self) -> list[Any]: ...


class ObjectStore:
    """A plain keyed store with the informer's read interface (``simulate``, tests)."""

    def __init__(self, objects: Iterable[Obj] = ()) -> None:
        self.store: dict[str, Obj] = {}
        for obj in objects:
            self.put(obj)

    @staticmethod
    def key(obj: Obj) -> str:
        meta = obj.get("metadata") or {}
        ns = meta.get("namespace") or ""
        return f"{ns}/{meta.get('name') or ''}" if ns else str(meta.get("name") or "")

    def put(self, obj: Obj) -> None:
        self.store[self.key(obj)] = obj

    def delete(self, obj: Obj) -> None:
        self.store.pop(self.key(obj), None)

    def get(self, name: str, namespace: str | None = None) -> Obj | None:
        return self.store.get(f"{namespace}/{name}" if namespace else name)

    def list(self) -> list[Obj]:
        return list(self.store.values())


class StoreVolumes:
    """``VolumeLister`` over one store per plural (missing plurals read as empty)."""

    def __init__(self, stores: Mapping[str, Store]) -> None:
        self._stores = stores
        self._by_class: dict[str, dict[str, Obj]] | None = None
        self._generations: dict[str, int] = {}

    def changed(self, plural: str, old: Obj | None = None, new: Obj | None = None) -> None:
        """An object of ``plural`` was added, updated or deleted (the informers' handlers call this)."""
        self._generations[plural] = self._generations.get(plural, 0) + 1
        if plural == "persistentvolumes":
            self.volume_changed(old, new)

    def generation(self, plural: str) -> int:
        return self._generations.get(plural, 0)

    def _store(self, plural: str) -> Store | None:
        return self._stores.get(plural)

    def _get(self, plural: str, name: str, namespace: str | None = None) -> Obj | None:
        s = self._store(plural)
        return s.get(name, namespace) if s is not None else None

    # Volumes by class: kept by ``volume_changed`` (informer handlers), built on first use.
    def volume_changed(self, old: Obj | None, new: Obj | None) -> None:
        if self._by_class is None:
            return
        if old is not None:
            name = (old.get("metadata") or {}).get("name") or ""
            self._by_class.get(volume_class(old), {}).pop(name, None)
        if new is not None:
            name = (new.get("metadata") or {}).get("name") or ""
            self._by_class.setdefault(volume_class(new), {})[name] = new

    def claim(self, namespace: str, name: str) -> Obj | None:
        return self._get("persistentvolumeclaims", name, namespace)

    def volume(self, name: str) -> Obj | None:
        return self._get("persistentvolumes", name)

    def volumes_of_class(self, cls: str) -> Iterable[Obj]:
        if self._by_class is None:
            s = self._store("persistentvolumes")
            by_class: dict[str, dict[str, Obj]] = {}
            for pv in s.list() if s is not None else ():
                by_class.setdefault(volume_class(pv), {})[(pv.get("metadata") or {}).get("name") or ""] = pv
            self._by_class = by_class
        return list(self._by_class.get(cls, {}).values())

    def storage_class(self, name: str) -> Obj | None:
        return self._get("storageclasses", name)

    def csi_node(self, name: str) -> Obj | None:
        return self._get("csinodes", name)

    def csi_nodes(self) -> Iterable[Obj]:
        s = self._store("csinodes")
        return s.list() if s is not None else ()

    def csi_driver(self, name: str) -> Obj | None:
        return self._get("csidrivers", name)

    def capacities(self) -> Iterable[Obj]:
        s = self._store("csistoragecapacities")
        return s.list() if s is not None else ()


_NAMESPACED = frozenset({"persistentvolumeclaims", "csistoragecapacities"})
# kind -> plural, for files of objects (``simulate``).
STORAGE_KINDS: dict[str, str] = {
    "PersistentVolume": "persistentvolumes",
    "PersistentVolumeClaim": "persistentvolumeclaims",
    "StorageClass": "storageclasses",
    "CSINode": "csinodes",
    "CSIDriver": "csidrivers",
    "CSIStorageCapacity": "csistoragecapacities",
}


def static_volumes(objects: Iterable[Obj]) -> StoreVolumes:
    """A ``StoreVolumes`` over a list of objects of any of the storage kinds (by ``kind``)."""
    return StoreVolumes(static_stores(objects))


def static_stores(objects: Iterable[Obj]) -> dict[str, ObjectStore]:
    """One ``ObjectStore`` per storage plural, filled from objects of any of the storage kinds (by ``kind``);
    claims and capacities without a namespace go to ``default``."""
    stores: dict[str, ObjectStore] = {p: ObjectStore() for p in PLURALS}
    for obj in objects:
        plural = STORAGE_KINDS.get(str(obj.get("kind") or ""))
        if plural is None:
            continue
        meta = obj.get("metadata") or {}
        if plural in _NAMESPACED and not meta.get("namespace"):
            obj = {**obj, "metadata": {**meta, "namespace": "default"}}
        stores[plural].put(obj)
    return stores


__all__ = [
    "API_VERSIONS",
    "PLURALS",
    "STORAGE_KINDS",
    "ObjectStore",
    "StoreVolumes",
    "VolumeLister",
    "static_volumes",
]
