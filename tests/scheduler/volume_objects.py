"""Builders of nodes, pods and storage objects for the volume plugin tests (plain dicts, as the API serves them)."""

from __future__ import annotations

from typing import Any

from kubesched.scheduler.config import default_config
from kubesched.scheduler.simulate import placements_json, simulate

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"


def node(name: str, zone: str = "", *, labels: dict[str, str] | None = None, cpu: str = "4") -> Obj:
    lab = {"kubernetes.io/hostname": name, **(labels or {})}
    if zone:
        lab[ZONE] = zone
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": lab},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str, *claims: str, node_name: str = "", volumes: list[Obj] | None = None, **extra: Any) -> Obj:
    vols = [{"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}} for i, c in enumerate(claims)]
    vols.extend(volumes or ())
    spec: Obj = {"containers": [{"name": "c", "image": "busybox"}], "volumes": vols}
    if node_name:
        spec["nodeName"] = node_name
    spec.update(extra)
    return {
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
    }


def storage_class(
    name: str,
    mode: str = "WaitForFirstConsumer",
    provisioner: str = "csi.example.com",
    topologies: list[Obj] | None = None,
) -> Obj:
    sc: Obj = {
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }
    if topologies is not None:
        sc["allowedTopologies"] = topologies
    return sc


def pvc(
    name: str,
    cls: str = "",
    size: str = "1Gi",
    *,
    volume: str = "",
    bound: bool = False,
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    annotations: dict[str, str] | None = None,
    phase: str = "",
) -> Obj:
    ann = dict(annotations or {})
    if bound:
        ann["pv.kubernetes.io/bind-completed"] = "yes"
    spec: Obj = {"accessModes": list(modes), "resources": {"requests": {"storage": size}}}
    if cls:
        spec["storageClassName"] = cls
    if volume:
        spec["volumeName"] = volume
    out: Obj = {
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-pvc-{name}", "annotations": ann},
        "spec": spec,
    }
    if phase:
        out["status"] = {"phase": phase}
    return out


def pv(
    name: str,
    cls: str = "",
    size: str = "1Gi",
    *,
    zone: str = "",
    hostname: str = "",
    labels: dict[str, str] | None = None,
    claim: str = "",
    phase: str = "Available",
    modes: tuple[str, ...] = ("ReadWriteOnce",),
    csi_driver: str = "",
) -> Obj:
    spec: Obj = {"capacity": {"storage": size}, "accessModes": list(modes)}
    if cls:
        spec["storageClassName"] = cls
    exprs = []
    if zone:
        exprs.append({"key": ZONE, "operator": "In", "values": [zone]})
    if hostname:
        exprs.append({"key": "kubernetes.io/hostname", "operator": "In", "values": [hostname]})
    if exprs:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": exprs}]}}
    if claim:
        spec["claimRef"] = {"namespace": "default", "name": claim}
    if csi_driver:
        spec["csi"] = {"driver": csi_driver, "volumeHandle": f"handle-{name}"}
    return {
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": spec,
        "status": {"phase": phase},
    }


def csi_node(name: str, driver: str, count: int) -> Obj:
    return {
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {"drivers": [{"name": driver, "nodeID": name, "allocatable": {"count": count}}]},
    }


async def place(objects: list[Obj], config: Any = None) -> list[Obj]:
    placements = await simulate(config or default_config(), objects, seed=1)
    out: list[Obj] = placements_json(placements)["placements"]
    return out


THREE_ZONES = [node("node-a", "zone-a"), node("node-b", "zone-b"), node("node-c", "zone-c")]
P = ", preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling."
