"""The simulated kubelet and volumes: a node registers its CSINode (the simulated CSI driver with a volume limit),
and a pod whose claim is not bound yet stays Pending until the claim is bound, as a kubelet waits to mount it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.controllers.base import copy_json
from kubesched.cluster.kubelet import NodeShape, SimulatedKubelets
from kubesched.cluster.kubelet.simulated import SIMULATED_CSI_DRIVER, SIMULATED_CSI_VOLUME_LIMIT


@pytest.fixture
async def cluster() -> AsyncIterator[ClusterApi]:
    api = ClusterApi()
    api.bootstrap()
    kubelets = SimulatedKubelets(api, heartbeat_interval=3600.0, tick=0.01)
    kubelets.register_nodes(["n0", "n1"], NodeShape(cpu="4", memory="8Gi"))
    kubelets.start()
    yield api
    await kubelets.stop()


async def phase_after(api: ClusterApi, name: str, seconds: float = 0.3) -> str:
    await asyncio.sleep(seconds)
    pod = api.get(api.rtype("", "v1", "pods"), "default", name).obj
    return str((pod.get("status") or {}).get("phase") or "")


def pod_with_claim(name: str, claim: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "c", "image": "db:1"}],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": claim}}],
        },
    }


async def test_nodes_register_their_csinode(cluster: ClusterApi) -> None:
    items, _ = cluster.store.list(cluster.rtype("storage.k8s.io", "v1", "csinodes").storage_key)
    assert sorted(st.obj["metadata"]["name"] for st in items) == ["n0", "n1"]
    (driver,) = items[0].obj["spec"]["drivers"]
    assert driver["name"] == SIMULATED_CSI_DRIVER and driver["allocatable"] == {
        "count": SIMULATED_CSI_VOLUME_LIMIT
    }


async def test_pod_runs_only_once_its_claim_is_bound(cluster: ClusterApi) -> None:
    api = cluster
    pvcs = api.rtype("", "v1", "persistentvolumeclaims")
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "data"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    api.create(pvcs, claim, "default")
    api.create(api.rtype("", "v1", "pods"), pod_with_claim("db", "data"), "default")
    api.bind("default", "db", {"metadata": {"name": "db"}, "target": {"kind": "Node", "name": "n0"}})
    assert await phase_after(api, "db") == "Pending"
    bound = copy_json(api.get(pvcs, "default", "data").obj)
    bound["spec"]["volumeName"] = "pv-1"
    bound["metadata"]["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    api.update(pvcs, bound, "default", "data")
    assert await phase_after(api, "db") == "Running"
    # A pod whose claim does not exist at all waits too.
    api.create(api.rtype("", "v1", "pods"), pod_with_claim("lonely", "missing"), "default")
    api.bind("default", "lonely", {"metadata": {"name": "lonely"}, "target": {"kind": "Node", "name": "n1"}})
    assert await phase_after(api, "lonely") == "Pending"
