"""The PersistentVolume controller and the simulated provisioner through the in-process API (no HTTP, queues
drained synchronously): Immediate binding to the smallest fitting PV, completing the scheduler's choices
(claimRef on a PV, selected-node on a claim), phases, reclaim policy, the shipped classes."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.apimachinery.volumes import (
    ANN_BIND_COMPLETED,
    ANN_BOUND_BY_CONTROLLER,
    ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
)
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.controllers import ControllerManager
from kubesched.cluster.controllers.base import FakeClock, copy_json
from kubesched.cluster.controllers.provisioner import PROVISIONER
from kubesched.cluster.kubelet import NodeShape
from kubesched.cluster.kubelet.simulated import node_object

Obj = dict[str, Any]
NS = "default"


class Env:
    def __init__(self, *controllers: str) -> None:
        self.api = ClusterApi()
        self.api.bootstrap()
        self.mgr = ControllerManager(self.api, controllers, clock=FakeClock())
        self.mgr.start_sync()

    def rt(self, plural: str) -> Any:
        group = "storage.k8s.io" if plural in ("storageclasses", "csidrivers") else ""
        return self.api.rtype(group, "v1", plural)

    def ns(self, plural: str) -> str | None:
        return NS if plural == "persistentvolumeclaims" else None

    def create(self, plural: str, body: Obj) -> Obj:
        return self.api.create(self.rt(plural), body, self.ns(plural)).obj

    def get(self, plural: str, name: str) -> Obj | None:
        st = self.api.lookup(self.rt(plural), self.ns(plural), name)
        return st.obj if st is not None else None

    def update(self, plural: str, name: str, change: Any) -> None:
        obj = copy_json(self.get(plural, name))
        change(obj)
        self.api.update(self.rt(plural), obj, self.ns(plural), name)

    def delete(self, plural: str, name: str) -> None:
        self.api.delete(self.rt(plural), self.ns(plural), name)

    def settle(self) -> None:
        self.mgr.drain()


def sc(name: str, mode: str = "Immediate", provisioner: str = "kubernetes.io/no-provisioner") -> Obj:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def pv(name: str, size: str, cls: str = "fast", *, claim: Obj | None = None, policy: str = "Retain") -> Obj:
    spec: Obj = {
        "capacity": {"storage": size},
        "accessModes": ["ReadWriteOnce"],
        "storageClassName": cls,
        "persistentVolumeReclaimPolicy": policy,
        "hostPath": {"path": f"/data/{name}"},
    }
    if claim is not None:
        spec["claimRef"] = {
            "namespace": NS,
            "name": claim["metadata"]["name"],
            "uid": claim["metadata"]["uid"],
        }
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name}, "spec": spec}


def pvc(name: str, size: str, cls: str = "fast") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": cls,
            "resources": {"requests": {"storage": size}},
        },
    }


def phase(obj: Obj | None) -> str:
    return str(((obj or {}).get("status") or {}).get("phase") or "")


def test_immediate_claim_binds_to_the_smallest_fitting_volume() -> None:
    env = Env("persistentvolume-binder")
    env.create("storageclasses", sc("fast"))
    for name, size in (("pv-big", "10Gi"), ("pv-small", "1Gi"), ("pv-mid", "3Gi")):
        env.create("persistentvolumes", pv(name, size))
    env.settle()
    assert {phase(env.get("persistentvolumes", n)) for n in ("pv-big", "pv-small", "pv-mid")} == {"Available"}
    env.create("persistentvolumeclaims", pvc("data", "2Gi"))
    env.settle()
    claim = env.get("persistentvolumeclaims", "data")
    assert claim is not None
    assert claim["spec"]["volumeName"] == "pv-mid"
    ann = claim["metadata"]["annotations"]
    assert ann[ANN_BIND_COMPLETED] == "yes" and ann[ANN_BOUND_BY_CONTROLLER] == "yes"
    assert claim["status"] == {
        "phase": "Bound",
        "accessModes": ["ReadWriteOnce"],
        "capacity": {"storage": "3Gi"},
    }
    volume = env.get("persistentvolumes", "pv-mid")
    assert volume is not None and phase(volume) == "Bound"
    assert volume["spec"]["claimRef"]["uid"] == claim["metadata"]["uid"]
    assert phase(env.get("persistentvolumes", "pv-small")) == "Available"


def test_claim_without_a_fitting_volume_stays_pending() -> None:
    env = Env("persistentvolume-binder")
    env.create("storageclasses", sc("fast"))
    env.create("persistentvolumes", pv("pv-small", "1Gi"))
    env.create("persistentvolumeclaims", pvc("data", "5Gi"))
    env.settle()
    claim = env.get("persistentvolumeclaims", "data")
    assert phase(claim) == "Pending" and not (claim or {})["spec"].get("volumeName")


def test_wait_for_first_consumer_waits_then_completes_the_schedulers_choice() -> None:
    env = Env("persistentvolume-binder")
    env.create("storageclasses", sc("fast", "WaitForFirstConsumer"))
    env.create("persistentvolumes", pv("pv-1", "5Gi"))
    claim = env.create("persistentvolumeclaims", pvc("data", "1Gi"))
    env.settle()
    assert phase(env.get("persistentvolumeclaims", "data")) == "Pending"
    assert phase(env.get("persistentvolumes", "pv-1")) == "Available"
    # What the scheduler's PreBind writes for a static binding: the PV's claimRef.
    env.update(
        "persistentvolumes",
        "pv-1",
        lambda o: o["spec"].update(claimRef=pv("x", "1Gi", claim=claim)["spec"]["claimRef"]),
    )
    env.settle()
    bound = env.get("persistentvolumeclaims", "data")
    assert bound is not None and bound["spec"]["volumeName"] == "pv-1"
    assert ANN_BIND_COMPLETED in bound["metadata"]["annotations"] and phase(bound) == "Bound"
    assert phase(env.get("persistentvolumes", "pv-1")) == "Bound"


def test_released_and_deleted_by_reclaim_policy() -> None:
    env = Env("persistentvolume-binder")
    env.create("storageclasses", sc("fast"))
    env.create("persistentvolumes", pv("keep", "1Gi", policy="Retain"))
    env.create("persistentvolumeclaims", pvc("a", "1Gi"))
    env.settle()
    env.create("persistentvolumes", pv("drop", "1Gi", policy="Delete"))
    env.create("persistentvolumeclaims", pvc("b", "1Gi"))
    env.settle()
    assert (env.get("persistentvolumeclaims", "a") or {})["spec"]["volumeName"] == "keep"
    assert (env.get("persistentvolumeclaims", "b") or {})["spec"]["volumeName"] == "drop"
    env.delete("persistentvolumeclaims", "a")
    env.delete("persistentvolumeclaims", "b")
    env.settle()
    assert phase(env.get("persistentvolumes", "keep")) == "Released"
    assert env.get("persistentvolumes", "drop") is None


def test_prebound_volume_waits_for_its_claim() -> None:
    env = Env("persistentvolume-binder")
    env.create("storageclasses", sc("fast"))
    volume = pv("reserved", "1Gi")
    volume["spec"]["claimRef"] = {"namespace": NS, "name": "later"}
    env.create("persistentvolumes", volume)
    env.create("persistentvolumeclaims", pvc("other", "1Gi"))
    env.settle()
    assert phase(env.get("persistentvolumes", "reserved")) == "Available"
    assert not (env.get("persistentvolumeclaims", "other") or {})["spec"].get("volumeName")
    env.create("persistentvolumeclaims", pvc("later", "1Gi"))
    env.settle()
    assert (env.get("persistentvolumeclaims", "later") or {})["spec"]["volumeName"] == "reserved"


@pytest.mark.parametrize(
    ("cls", "expected_key"),
    [("standard", "topology.kubernetes.io/zone"), ("local", "kubernetes.io/hostname")],
)
def test_provisioner_follows_the_selected_node(cls: str, expected_key: str) -> None:
    env = Env("persistentvolume-binder", "simulated-provisioner")
    env.settle()
    standard = env.get("storageclasses", "standard")
    assert standard is not None
    assert standard["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"] == "true"
    assert standard["volumeBindingMode"] == "WaitForFirstConsumer" and standard["provisioner"] == PROVISIONER
    assert env.get("csidrivers", PROVISIONER) is not None
    env.api.create(env.rt("nodes"), node_object(1, "node-1", NodeShape(), 3), None)
    env.create("persistentvolumeclaims", pvc("data", "2Gi", cls))
    env.settle()
    assert phase(env.get("persistentvolumeclaims", "data")) == "Pending"  # waits for the first consumer
    env.update(
        "persistentvolumeclaims",
        "data",
        lambda o: o["metadata"].setdefault("annotations", {}).update({ANN_SELECTED_NODE: "node-1"}),
    )
    env.settle()
    claim = env.get("persistentvolumeclaims", "data")
    assert claim is not None
    assert claim["metadata"]["annotations"][ANN_STORAGE_PROVISIONER] == PROVISIONER
    volume = env.get("persistentvolumes", claim["spec"]["volumeName"])
    assert volume is not None and volume["metadata"]["name"] == f"pvc-{claim['metadata']['uid']}"
    assert phase(claim) == "Bound" and phase(volume) == "Bound"
    assert volume["spec"]["capacity"] == {"storage": "2Gi"} and volume["spec"]["csi"]["driver"] == PROVISIONER
    term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]["matchExpressions"][0]
    node = env.get("nodes", "node-1")
    assert node is not None
    assert term == {
        "key": expected_key,
        "operator": "In",
        "values": [node["metadata"]["labels"][expected_key]],
    }
    # Reclaim policy Delete (the shipped classes'): the volume goes with its claim.
    env.delete("persistentvolumeclaims", "data")
    env.settle()
    assert env.get("persistentvolumes", volume["metadata"]["name"]) is None


def test_api_defaults_and_the_default_storage_class_admission() -> None:
    env = Env("simulated-provisioner")
    env.settle()
    bare = env.create(
        "storageclasses",
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "plain"},
            "provisioner": "x.example.com",
        },
    )
    assert (bare["reclaimPolicy"], bare["volumeBindingMode"]) == ("Delete", "Immediate")
    claim = pvc("data", "1Gi")
    del claim["spec"]["storageClassName"]
    created = env.create("persistentvolumeclaims", claim)
    assert created["spec"]["storageClassName"] == "standard"  # the shipped default class
    assert created["spec"]["volumeMode"] == "Filesystem" and created["status"] == {"phase": "Pending"}
    explicit = pvc("none", "1Gi", "")
    assert (
        env.create("persistentvolumeclaims", explicit)["spec"]["storageClassName"] == ""
    )  # "" means no class
    volume = env.create("persistentvolumes", pv("v", "1Gi"))
    assert volume["spec"]["volumeMode"] == "Filesystem" and volume["status"] == {"phase": "Pending"}
