"""The scheduler's informers for resource.k8s.io/v1 (started only when a profile enables DynamicResources).

DeviceClasses, ResourceClaims and ResourceSlices, as kube-scheduler 1.36 watches them (not templates: the
ResourceClaim controller turns those into claims, and the scheduler's RBAC role cannot read them). Each feeds
``DraObjects`` and reports the cluster event (``Add``/``Update``) the queue moves pods on.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubesched.client.informer import Informer
from kubesched.scheduler.dra.objects import DraObjects
from kubesched.scheduler.framework.interface import ClusterEvent

API_VERSION = "resource.k8s.io/v1"
KINDS = {
    "deviceclasses": "DeviceClass",
    "resourceclaims": "ResourceClaim",
    "resourceslices": "ResourceSlice",
}


def dra_informers(
    client: Any, objects: DraObjects, on_event: Callable[[ClusterEvent], None]
) -> dict[str, Informer]:
    """Informers by plural, with handlers registered (the caller starts them)."""
    out: dict[str, Informer] = {}
    for plural, kind in KINDS.items():
        inf = Informer(client, API_VERSION, plural)

        def added(obj: dict[str, Any], kind: str = kind) -> None:
            objects.upsert(kind, obj)
            on_event(ClusterEvent(kind, "Add"))

        def updated(old: dict[str, Any], new: dict[str, Any], kind: str = kind) -> None:
            objects.upsert(kind, new)
            on_event(ClusterEvent(kind, "Update"))

        def deleted(obj: dict[str, Any], kind: str = kind) -> None:
            objects.delete(kind, obj)

        inf.add_handler(added, updated, deleted)
        out[plural] = inf
    return out


__all__ = ["API_VERSION", "KINDS", "dra_informers"]
