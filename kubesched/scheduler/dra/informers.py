"""The scheduler's informers for resource.k8s.io/v1 (started only when a profile enables DynamicResources).

Each feeds ``DraObjects`` and reports the cluster event (``ResourceClaim``/``ResourceSlice``/``DeviceClass``
``Add``/``Update``) the queue moves pods on; templates only matter to the ResourceClaim controller and
PreEnqueue, so they raise no event.
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
    "resourceclaimtemplates": "ResourceClaimTemplate",
    "resourceslices": "ResourceSlice",
}
_EVENTFUL = ("DeviceClass", "ResourceClaim", "ResourceSlice")


def dra_informers(
    client: Any, objects: DraObjects, on_event: Callable[[ClusterEvent], None]
) -> dict[str, Informer]:
    """Informers by plural, with handlers registered (the caller starts them)."""
    out: dict[str, Informer] = {}
    for plural, kind in KINDS.items():
        inf = Informer(client, API_VERSION, plural)

        def added(obj: dict[str, Any], kind: str = kind) -> None:
            objects.upsert(kind, obj)
            if kind in _EVENTFUL:
                on_event(ClusterEvent(kind, "Add"))

        def updated(old: dict[str, Any], new: dict[str, Any], kind: str = kind) -> None:
            objects.upsert(kind, new)
            if kind in _EVENTFUL:
                on_event(ClusterEvent(kind, "Update"))

        def deleted(obj: dict[str, Any], kind: str = kind) -> None:
            objects.delete(kind, obj)

        inf.add_handler(added, updated, deleted)
        out[plural] = inf
    return out


__all__ = ["API_VERSION", "KINDS", "dra_informers"]
