"""The resource.k8s.io objects the DynamicResources plugin reads, and what the scheduler itself has done to claims.

``DraObjects`` is fed by the scheduler's informers (DeviceClasses, ResourceClaims, ResourceClaimTemplates,
ResourceSlices) or, offline, by ``simulate`` from its cluster file; the plugin reaches it as ``Handle.dra``.
It also keeps the scheduler's own view of claims between a decision and the informer catching up, as upstream's
claim assume cache and in-flight allocations:

- ``reserve(claim_key, allocation)``: a pod's Reserve allocated this claim; its devices count as taken until the
  claim's status carries the allocation (or Unreserve drops it), so two pods never get one device;
- ``assume(claim)``: PreBind wrote this claim; the written version is used until the informer delivers one at
  least as new (by resourceVersion).

The set of allocated devices is kept incrementally per claim; pools are rebuilt only when a slice changes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from kubesched.scheduler.dra.allocator import DeviceId, Pools, device_id

Obj = Mapping[str, Any]
DRA_KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice")


def obj_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name") or "")


def _rv(obj: Obj) -> int:
    try:
        return int((obj.get("metadata") or {}).get("resourceVersion") or 0)
    except (TypeError, ValueError):
        return 0


def allocated_devices(claim: Obj) -> set[DeviceId]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return {device_id(r) for r in (allocation.get("devices") or {}).get("results") or ()}


class DraObjects:
    """Device classes, claims, templates and slices by key, with the scheduler's assumed and in-flight claims."""

    def __init__(self) -> None:
        self.classes: dict[str, Obj] = {}
        self.templates: dict[str, Obj] = {}
        self._claims: dict[str, Obj] = {}  # from the informer
        self._assumed: dict[str, Obj] = {}  # written by PreBind, newer than the informer's
        self._slices: dict[str, Obj] = {}
        self._in_flight: dict[str, tuple[str, dict[str, Any]]] = {}  # claim key -> (pod uid, allocation)
        self._devices: dict[str, set[DeviceId]] = {}  # claim key -> devices its status allocates
        self._pools: Pools | None = None
        # Bumped on every change, so a plugin can tell whether what it computed is still current.
        self.generation = 0

    # -- writes (informers, simulate) ----------------------------------------------------------------------

    def upsert(self, kind: str, obj: Obj) -> None:
        """``kind``: DeviceClass, ResourceClaim, ResourceClaimTemplate or ResourceSlice."""
        key = obj_key(obj)
        self.generation += 1
        if kind == "ResourceClaim":
            self._claims[key] = obj
            assumed = self._assumed.get(key)
            if assumed is not None and _rv(obj) >= _rv(assumed):
                del self._assumed[key]
            self._refresh_devices(key)
            entry = self._in_flight.get(key)
            if entry is not None and (obj.get("status") or {}).get("allocation"):
                del self._in_flight[key]
        elif kind == "ResourceSlice":
            self._slices[key] = obj
            self._pools = None
        elif kind == "DeviceClass":
            self.classes[key] = obj
        elif kind == "ResourceClaimTemplate":
            self.templates[key] = obj

    def delete(self, kind: str, obj: Obj) -> None:
        key = obj_key(obj)
        self.generation += 1
        if kind == "ResourceClaim":
            self._claims.pop(key, None)
            self._assumed.pop(key, None)
            self._in_flight.pop(key, None)
            self._devices.pop(key, None)
        elif kind == "ResourceSlice":
            self._slices.pop(key, None)
            self._pools = None
        elif kind == "DeviceClass":
            self.classes.pop(key, None)
        elif kind == "ResourceClaimTemplate":
            self.templates.pop(key, None)

    def add_all(self, objects: Iterable[Obj]) -> None:
        """Objects of any of the four kinds, told apart by ``kind`` (simulate's cluster file)."""
        for obj in objects:
            self.upsert(str(obj.get("kind") or ""), obj)

    # -- the scheduler's own writes ------------------------------------------------------------------------

    def assume(self, claim: Obj) -> None:
        """PreBind wrote ``claim`` (the API server's answer): use it until the informer has it too."""
        key = obj_key(claim)
        current = self._claims.get(key)
        self.generation += 1
        if current is None or _rv(claim) >= _rv(current):
            self._assumed[key] = claim
        self._in_flight.pop(key, None)
        self._refresh_devices(key)

    def restore(self, key: str) -> None:
        """Drop an assumed version (a failed write): the informer's version counts again."""
        if self._assumed.pop(key, None) is not None:
            self.generation += 1
            self._refresh_devices(key)

    def reserve(self, key: str, pod_uid: str, allocation: dict[str, Any]) -> None:
        self.generation += 1
        self._in_flight[key] = (pod_uid, allocation)

    def unreserve(self, key: str, pod_uid: str) -> None:
        entry = self._in_flight.get(key)
        if entry is not None and entry[0] == pod_uid:
            self.generation += 1
            del self._in_flight[key]

    def in_flight(self, key: str) -> tuple[str, dict[str, Any]] | None:
        return self._in_flight.get(key)

    def commit(self, pod_uid: str, pod_name: str) -> None:
        """Offline (``simulate``, no PreBind): the pod's in-flight allocations become its claims' status, with
        the pod in ``reservedFor``, as PreBind would have written them."""
        for key, (uid, allocation) in list(self._in_flight.items()):
            if uid != pod_uid:
                continue
            claim = self._assumed.get(key) or self._claims.get(key)
            if claim is None:
                continue
            status = dict(claim.get("status") or {})
            status["allocation"] = allocation
            status["reservedFor"] = [
                *(status.get("reservedFor") or ()),
                {"resource": "pods", "name": pod_name, "uid": pod_uid},
            ]
            self.assume({**claim, "status": status})

    # -- reads ---------------------------------------------------------------------------------------------

    def claim(self, namespace: str, name: str) -> Obj | None:
        key = f"{namespace}/{name}"
        found = self._assumed.get(key)
        return found if found is not None else self._claims.get(key)

    def claims(self) -> list[Obj]:
        return [self._assumed.get(k, c) for k, c in self._claims.items()]

    def template(self, namespace: str, name: str) -> Obj | None:
        return self.templates.get(f"{namespace}/{name}")

    def slices(self) -> list[Obj]:
        return list(self._slices.values())

    def pools(self) -> Pools:
        if self._pools is None:
            self._pools = Pools(self._slices.values())
        return self._pools

    def allocated(self, excluding: Iterable[str] = ()) -> set[DeviceId]:
        """Devices allocated to claims or in flight (except the claims named in ``excluding``)."""
        skip = set(excluding)
        out: set[DeviceId] = set()
        for key, devices in self._devices.items():
            if key not in skip:
                out |= devices
        for key, (_, allocation) in self._in_flight.items():
            if key not in skip:
                out |= {device_id(r) for r in (allocation.get("devices") or {}).get("results") or ()}
        return out

    def _refresh_devices(self, key: str) -> None:
        claim = self._assumed.get(key) or self._claims.get(key)
        devices = allocated_devices(claim) if claim is not None else set()
        if devices:
            self._devices[key] = devices
        else:
            self._devices.pop(key, None)


__all__ = ["DRA_KINDS", "DraObjects", "allocated_devices", "obj_key"]
