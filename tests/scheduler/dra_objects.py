"""Builders of resource.k8s.io objects for the DynamicResources and allocator tests (upstream's test names:
worker/worker-2 nodes, my-pod, my-resource claims, class ``class`` of driver ``some-driver``)."""

from __future__ import annotations

from typing import Any

DRIVER = "some-driver"
CLASS = "class"


def node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
        "spec": {},
        "status": {"allocatable": {"cpu": "8", "memory": "16Gi", "pods": "110"}},
    }


def pod(
    name: str = "my-pod",
    claims: list[dict[str, Any]] | None = None,
    statuses: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    p: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": f"{name}-uid"},
        "spec": {"containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}]},
    }
    if claims:
        p["spec"]["resourceClaims"] = claims
    if statuses:
        p["status"] = {"resourceClaimStatuses": statuses}
    return p


def device_class(name: str = CLASS, *expressions: str, config: list[Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in expressions]}
    if config:
        spec["config"] = config
    return {"kind": "DeviceClass", "metadata": {"name": name}, "spec": spec}


def exactly(
    name: str, cls: str = CLASS, count: int = 1, mode: str = "ExactCount", *sel: str
) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": cls, "allocationMode": mode}
    if mode == "ExactCount":
        body["count"] = count
    if sel:
        body["selectors"] = [{"cel": {"expression": e}} for e in sel]
    return {"name": name, "exactly": body}


def claim(
    name: str = "my-pod-my-resource",
    requests: list[dict[str, Any]] | None = None,
    constraints: list[dict[str, Any]] | None = None,
    owner: dict[str, Any] | None = None,
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "uid": f"{name}-uid",
        "resourceVersion": "1",
    }
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    devices: dict[str, Any] = {"requests": requests if requests is not None else [exactly("req-1")]}
    if constraints:
        devices["constraints"] = constraints
    return {"kind": "ResourceClaim", "metadata": meta, "spec": {"devices": devices}, "status": {}}


def allocated(
    c: dict[str, Any], node_name: str, *devices: str, reserved: list[str] | None = None
) -> dict[str, Any]:
    out = dict(c)
    out["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "req-1", "driver": DRIVER, "pool": node_name, "device": d} for d in devices
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node_name]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": n, "uid": f"{n}-uid"} for n in reserved or ()],
    }
    return out


def resource_slice(
    node_name: str | None,
    *devices: dict[str, Any],
    driver: str = DRIVER,
    pool: str | None = None,
    generation: int = 1,
    name: str | None = None,
    **placement: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": driver,
        "pool": {"name": pool or node_name or "pool", "generation": generation, "resourceSliceCount": 1},
        "devices": list(devices),
        **placement,
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{node_name or pool}-{driver}-{generation}"},
        "spec": spec,
    }


def device(name: str, memory: str | None = None, **attrs: Any) -> dict[str, Any]:
    attributes: dict[str, Any] = {}
    for k, v in attrs.items():
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string"
        attributes[k] = {kind: v}
    d: dict[str, Any] = {"name": name, "attributes": attributes}
    if memory:
        d["capacity"] = {"memory": {"value": memory}}
    return d
