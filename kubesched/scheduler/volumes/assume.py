"""Assumed PV and PVC bindings (upstream's ``AssumeCache``): between a pod's Reserve and the PV controller
finishing its binding, the scheduler reads its own decision, so two pods never take one PV and a claim chosen for
provisioning is not chosen again.

An assumption is kept while the informer still holds the version it was made on; a newer version (the PreBind
write seen, or anyone else's) replaces it. ``AssumedView`` is a ``VolumeLister`` with the assumptions laid over
the informers' objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.scheduler.volumes.listers import VolumeLister

Obj = Mapping[str, Any]


def _rv(obj: Obj | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")


class AssumedVolumes:
    """One per scheduler (``Handle.singletons``): assumed PVs by name, assumed PVCs by (namespace, name)."""

    def __init__(self) -> None:
        self.volumes: dict[str, tuple[Obj, str]] = {}
        self.claims: dict[tuple[str, str], tuple[Obj, str]] = {}

    def assume_volume(self, new: Obj, base: Obj) -> None:
        self.volumes[(new.get("metadata") or {}).get("name") or ""] = (new, _rv(base))

    def assume_claim(self, new: Obj, base: Obj) -> None:
        meta = new.get("metadata") or {}
        self.claims[(meta.get("namespace") or "", meta.get("name") or "")] = (new, _rv(base))

    def restore_volume(self, name: str) -> None:
        self.volumes.pop(name, None)

    def restore_claim(self, namespace: str, name: str) -> None:
        self.claims.pop((namespace, name), None)

    def volume(self, live: Obj | None, name: str) -> Obj | None:
        found = self.volumes.get(name)
        if found is None:
            return live
        if live is None or _rv(live) != found[1]:
            del self.volumes[name]
            return live
        return found[0]

    def claim(self, live: Obj | None, namespace: str, name: str) -> Obj | None:
        found = self.claims.get((namespace, name))
        if found is None:
            return live
        if live is None or _rv(live) != found[1]:
            del self.claims[(namespace, name)]
            return live
        return found[0]


class AssumedView:
    """A ``VolumeLister`` that answers with the assumed versions where they still hold."""

    def __init__(self, lister: VolumeLister, assumed: AssumedVolumes) -> None:
        self.lister = lister
        self.assumed = assumed

    def claim(self, namespace: str, name: str) -> Obj | None:
        live = self.lister.claim(namespace, name)
        if not self.assumed.claims:
            return live
        return self.assumed.claim(live, namespace, name)

    def volume(self, name: str) -> Obj | None:
        live = self.lister.volume(name)
        if not self.assumed.volumes:
            return live
        return self.assumed.volume(live, name)

    def volumes_of_class(self, cls: str) -> Iterable[Obj]:
        found = self.lister.volumes_of_class(cls)
        if not self.assumed.volumes:
            return found
        out: list[Obj] = []
        for pv in found:
            name = (pv.get("metadata") or {}).get("name") or ""
            view = self.assumed.volume(pv, name)
            if view is not None:
                out.append(view)
        return out

    def storage_class(self, name: str) -> Obj | None:
        return self.lister.storage_class(name)

    def csi_node(self, name: str) -> Obj | None:
        return self.lister.csi_node(name)

    def csi_nodes(self) -> Iterable[Obj]:
        return self.lister.csi_nodes()

    def csi_driver(self, name: str) -> Obj | None:
        return self.lister.csi_driver(name)

    def generation(self, plural: str) -> int:
        return self.lister.generation(plural)

    def capacities(self) -> Iterable[Obj]:
        return self.lister.capacities()


__all__ = ["AssumedView", "AssumedVolumes"]
