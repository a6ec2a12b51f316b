"""A simulated DRA driver, ``gpu.kubesched.io``: GPUs on simulated nodes, as a real driver's kubelet plugin
publishes them.

- ``cluster up --node-gpus N`` gives every simulated node N GPUs: one ResourceSlice per node (pool = node name,
  ``nodeName`` set), devices ``gpu-0`` .. ``gpu-N-1`` with attributes ``model`` (string), ``index`` (int),
  ``uuid`` (string), ``driverVersion`` (version) and capacity ``memory`` (quantity);
- the DeviceClass ``gpu.kubesched.io`` (selector ``device.driver == "gpu.kubesched.io"``) is created at start;
- ``claims_prepared(api, pod)``: what the kubelet asks before starting a pod with claims: every claim exists, is
  allocated and lists the pod in ``reservedFor`` (a real kubelet calls the driver's NodePrepareResources then;
  here there is nothing to prepare). Until then the pod stays Pending.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesched.cluster.controllers.resourceclaim import claim_names

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

DRIVER = "gpu.kubesched.io"
DEVICE_CLASS = DRIVER
API_VERSION = "resource.k8s.io/v1"
Obj = dict[str, Any]


@dataclass(frozen=True)
class GpuShape:
    count: int = 0
    model: str = "kubesched-sim-gpu"
    memory: str = "16Gi"
    driver_version: str = "1.0.0"


def device_class() -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": DEVICE_CLASS},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def gpu_slice(node_name: str, shape: GpuShape) -> Obj:
    """The ResourceSlice the driver publishes for one node."""
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "model": {"string": shape.model},
                "index": {"int": i},
                "uuid": {"string": f"GPU-{node_name}-{i}"},
                "driverVersion": {"version": shape.driver_version},
            },
            "capacity": {"memory": {"value": shape.memory}},
        }
        for i in range(shape.count)
    ]
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node_name}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node_name,
            "pool": {"name": node_name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def publish(api: ClusterApi, node_names: Iterable[str], shape: GpuShape) -> int:
    """Create the DeviceClass and one ResourceSlice per node (those that exist already are kept); returns the
    number of slices created."""
    if shape.count <= 0:
        return 0
    classes = api.rtype("resource.k8s.io", "v1", "deviceclasses")
    slices = api.rtype("resource.k8s.io", "v1", "resourceslices")
    if api.store.get(classes.storage_key, ("", DEVICE_CLASS)) is None:
        api.create(classes, device_class(), None)
    created = 0
    for name in node_names:
        obj = gpu_slice(name, shape)
        if api.store.get(slices.storage_key, ("", obj["metadata"]["name"])) is None:
            api.create(slices, obj, None)
            created += 1
    return created


def claims_prepared(api: ClusterApi, pod: Obj) -> bool:
    """Whether every claim of the pod is allocated and reserved for it (the kubelet may start it)."""
    claims = api.rtype("resource.k8s.io", "v1", "resourceclaims")
    meta = pod.get("metadata") or {}
    ns, uid = meta.get("namespace") or "", meta.get("uid")
    wanted = (pod.get("spec") or {}).get("resourceClaims") or ()
    names = claim_names(pod)
    templated = sum(1 for pc in wanted if not pc.get("resourceClaimName"))
    recorded = {
        s.get("name") for s in (pod.get("status") or {}).get("resourceClaimStatuses") or () if s.get("name")
    }
    if templated and len([pc for pc in wanted if pc.get("name") in recorded]) < templated:
        return False
    for name in names:
        st = api.store.get(claims.storage_key, (ns, name))
        if st is None:
            return False
        status = st.obj.get("status") or {}
        if not status.get("allocation"):
            return False
        if not any(r.get("uid") == uid for r in status.get("reservedFor") or ()):
            return False
    return True


__all__ = ["DEVICE_CLASS", "DRIVER", "GpuShape", "claims_prepared", "device_class", "gpu_slice", "publish"]
