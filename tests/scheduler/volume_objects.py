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


def run_plugin(
    plugin_type: Any,
    nodes: list[Obj],
    objects: list[Obj],
    the_pod: Obj,
    placed: list[Obj] = (),  # type: ignore[assignment]
) -> tuple[Any, dict[str, tuple[str, list[str]]]]:
    """One plugin's PreFilter, then (unless it answered SKIP or rejected) its Filter over every node, on a real
    node table. Returns (PreFilter status, node -> (code name, reasons) for the rejected nodes)."""
    import numpy as np

    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.framework.handle import Handle
    from kubesched.scheduler.framework.interface import Code, CycleState
    from kubesched.scheduler.framework.runtime import _bits_status
    from kubesched.scheduler.volumes.listers import static_volumes

    cache = Cache()
    for n in nodes:
        cache.on_node_add(n)
    for p in placed:
        cache.on_pod_add(p)
    handle = Handle(cache=cache, volumes=static_volumes(objects))
    plugin = plugin_type(None, handle)
    state = CycleState()
    pi = cache.pod_info(the_pod)
    _, status = plugin.pre_filter(state, pi, cache.table)
    if status.code != Code.SUCCESS:
        return status, {}
    table = cache.table
    idx = np.array(sorted(table.index.values()), dtype=np.intp)
    verdict = plugin.filter(state, pi, table, idx)
    out: dict[str, tuple[str, list[str]]] = {}
    for slot, bits in zip(idx.tolist(), verdict.reason_bits.tolist(), strict=True):
        if bits:
            st = _bits_status(plugin.name, int(bits), verdict.reasons, verdict.unresolvable)
            out[table.names[slot] or ""] = (st.code.name, st.reasons)
    return status, out
