"""The ResourceClaim controller through the in-process API (no HTTP, fake clock, queues drained by hand), and the
simulated driver's objects (devices.py)."""

from __future__ import annotations

from typing import Any

from kubesched.cluster import devices
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.controllers import KNOWN_CONTROLLERS, ControllerManager, parse_controllers
from kubesched.cluster.controllers.base import FakeClock, copy_json, meta_of
from kubesched.cluster.controllers.resourceclaim import FINALIZER, POD_CLAIM_NAME_ANNOTATION

NS = "default"
Obj = dict[str, Any]


class Env:
    def __init__(self) -> None:
        self.api = ClusterApi()
        self.api.bootstrap()
        self.mgr = ControllerManager(self.api, ("resourceclaim",), clock=FakeClock())
        self.mgr.start_sync()
        self.pods = self.api.rtype("", "v1", "pods")
        self.claims = self.api.rtype("resource.k8s.io", "v1", "resourceclaims")
        self.templates = self.api.rtype("resource.k8s.io", "v1", "resourceclaimtemplates")

    def settle(self) -> int:
        return self.mgr.drain()

    def pod(self, name: str) -> Obj:
        return self.api.get(self.pods, NS, name).obj

    def claim_list(self) -> list[Obj]:
        items, _ = self.api.store.list(self.claims.storage_key, NS)
        return [s.obj for s in items]

    def template(self, name: str = "gpu") -> None:
        self.api.create(
            self.templates,
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": name, "namespace": NS},
                "spec": {
                    "metadata": {"labels": {"team": "ml"}},
                    "spec": {
                        "devices": {
                            "requests": [
                                {"name": "gpu", "exactly": {"deviceClassName": devices.DEVICE_CLASS}}
                            ]
                        }
                    },
                },
            },
            NS,
        )

    def create_pod(self, name: str, claims: list[Obj]) -> Obj:
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"containers": [{"name": "c", "image": "app:1"}], "resourceClaims": claims},
        }
        return self.api.create(self.pods, body, NS).obj

    def set_status(self, plural_type: Any, name: str, change: Any) -> Obj:
        obj = copy_json(self.api.get(plural_type, NS, name).obj)
        change(obj.setdefault("status", {}))
        return self.api.update(plural_type, obj, NS, name, subresource="status")[0].obj


TEMPLATE_CLAIM = [{"name": "gpu", "resourceClaimTemplateName": "gpu"}]


def test_registered_as_a_known_controller() -> None:
    assert "resourceclaim" in KNOWN_CONTROLLERS
    assert "resourceclaim" not in parse_controllers("*,-resourceclaim")


def test_claim_created_from_the_template_and_recorded_in_the_pod_status() -> None:
    env = Env()
    env.template()
    pod = env.create_pod("trainer", TEMPLATE_CLAIM)
    env.settle()
    (claim,) = env.claim_list()
    meta = meta_of(claim)
    assert meta["name"].startswith("trainer-gpu-") and len(meta["name"]) == len("trainer-gpu-") + 5
    assert meta["annotations"][POD_CLAIM_NAME_ANNOTATION] == "gpu"
    assert meta["labels"] == {"team": "ml"}
    (owner,) = meta["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"], owner["controller"]) == (
        "Pod",
        "trainer",
        meta_of(pod)["uid"],
        True,
    )
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == devices.DEVICE_CLASS
    assert env.pod("trainer")["status"]["resourceClaimStatuses"] == [
        {"name": "gpu", "resourceClaimName": meta["name"]}
    ]
    env.settle()
    assert len(env.claim_list()) == 1  # not created twice


def test_pod_waits_for_a_missing_template_then_gets_its_claim() -> None:
    env = Env()
    env.create_pod("trainer", TEMPLATE_CLAIM)
    env.settle()
    assert env.claim_list() == []
    assert not (env.pod("trainer").get("status") or {}).get("resourceClaimStatuses")
    env.template()
    env.settle()
    assert len(env.claim_list()) == 1
    assert env.pod("trainer")["status"]["resourceClaimStatuses"][0]["name"] == "gpu"


def test_a_claim_created_earlier_but_not_recorded_is_found_not_duplicated() -> None:
    env = Env()
    env.template()
    pod = env.create_pod("trainer", TEMPLATE_CLAIM)
    env.settle()
    (claim,) = env.claim_list()
    # The status write was lost (a crash between create and status update).
    env.set_status(env.pods, "trainer", lambda s: s.pop("resourceClaimStatuses"))
    env.settle()
    assert len(env.claim_list()) == 1
    assert (
        env.pod("trainer")["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        == meta_of(claim)["name"]
    )
    assert meta_of(pod)["uid"]


def allocate_for(env: Env, claim_name: str, *pods: Obj) -> None:
    obj = copy_json(env.api.get(env.claims, NS, claim_name).obj)
    obj["metadata"]["finalizers"] = [FINALIZER]
    env.api.update(env.claims, obj, NS, claim_name)

    def change(status: Obj) -> None:
        status["allocation"] = {
            "devices": {
                "results": [{"request": "gpu", "driver": devices.DRIVER, "pool": "node-0", "device": "gpu-0"}]
            }
        }
        status["reservedFor"] = [
            {"resource": "pods", "name": meta_of(p)["name"], "uid": meta_of(p)["uid"]} for p in pods
        ]

    env.set_status(env.claims, claim_name, change)


def test_finished_pod_leaves_reserved_for_and_its_generated_claim_is_deleted() -> None:
    env = Env()
    env.template()
    pod = env.create_pod("trainer", TEMPLATE_CLAIM)
    env.settle()
    (claim,) = env.claim_list()
    allocate_for(env, meta_of(claim)["name"], pod)
    env.settle()
    assert env.claim_list()[0]["status"]["reservedFor"]  # still running: nothing changes
    env.set_status(env.pods, "trainer", lambda s: s.update(phase="Succeeded"))
    env.settle()
    assert env.claim_list() == []


def test_shared_claim_keeps_its_allocation_while_one_user_remains_then_is_deallocated() -> None:
    env = Env()
    env.api.create(
        env.claims,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": NS},
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": devices.DEVICE_CLASS}}]
                }
            },
        },
        NS,
    )
    ref = [{"name": "gpu", "resourceClaimName": "shared"}]
    a, b = env.create_pod("a", ref), env.create_pod("b", ref)
    allocate_for(env, "shared", a, b)
    env.settle()
    env.api.delete(env.pods, NS, "a")
    env.settle()
    shared = env.api.get(env.claims, NS, "shared").obj
    assert [r["name"] for r in shared["status"]["reservedFor"]] == ["b"]
    assert shared["status"]["allocation"]
    env.api.delete(env.pods, NS, "b")
    env.settle()
    shared = env.api.get(env.claims, NS, "shared").obj
    assert not (shared.get("status") or {}).get("allocation")
    assert not (shared.get("status") or {}).get("reservedFor")
    assert FINALIZER not in (meta_of(shared).get("finalizers") or ())


def test_a_claim_being_allocated_keeps_its_finalizer() -> None:
    # PreBind adds the finalizer before it writes the allocation: the controller must not race it away.
    env = Env()
    env.template()
    env.create_pod("trainer", TEMPLATE_CLAIM)
    env.settle()
    (claim,) = env.claim_list()
    obj = copy_json(claim)
    obj["metadata"]["finalizers"] = [FINALIZER]
    env.api.update(env.claims, obj, NS, meta_of(claim)["name"])
    env.settle()
    assert meta_of(env.claim_list()[0])["finalizers"] == [FINALIZER]


def test_simulated_driver_objects() -> None:
    api = ClusterApi()
    api.bootstrap()
    assert devices.publish(api, ["node-0", "node-1"], devices.GpuShape(2)) == 2
    assert devices.publish(api, ["node-0", "node-1"], devices.GpuShape(2)) == 0  # idempotent
    slices = api.rtype("resource.k8s.io", "v1", "resourceslices")
    s = api.get(slices, None, f"node-1-{devices.DRIVER}").obj
    assert s["spec"]["nodeName"] == "node-1" and s["spec"]["pool"]["name"] == "node-1"
    assert [d["name"] for d in s["spec"]["devices"]] == ["gpu-0", "gpu-1"]
    assert s["spec"]["devices"][1]["attributes"]["index"] == {"int": 1}
    assert s["spec"]["devices"][0]["capacity"]["memory"] == {"value": "16Gi"}
    classes = api.rtype("resource.k8s.io", "v1", "deviceclasses")
    assert api.get(classes, None, devices.DEVICE_CLASS).obj["spec"]["selectors"] == [
        {"cel": {"expression": 'device.driver == "gpu.kubesched.io"'}}
    ]
    assert devices.publish(api, ["node-0"], devices.GpuShape(0)) == 0


def test_kubectl_columns_of_claims_and_slices() -> None:
    from datetime import UTC, datetime

    from kubesched.cluster.kinds import STRATEGIES
    from kubesched.cluster.kinds.resource import claim_state

    pending: Obj = {"metadata": {"name": "c"}, "status": {}}
    allocated: Obj = {"metadata": {"name": "c"}, "status": {"allocation": {"devices": {}}}}
    reserved: Obj = {"metadata": {"name": "c"}, "status": {"allocation": {}, "reservedFor": [{"name": "p"}]}}
    reserved["status"]["allocation"] = {"devices": {}}
    deleting: Obj = {"metadata": {"name": "c", "deletionTimestamp": "x"}, "status": {"allocation": {"a": 1}}}
    assert [claim_state(o) for o in (pending, allocated, reserved, deleting)] == [
        "pending",
        "allocated",
        "allocated,reserved",
        "deleted,allocated,deallocating",
    ]
    now = datetime.now(UTC)
    slice_strategy = STRATEGIES[("resource.k8s.io", "resourceslices")]
    assert [c["name"] for c in slice_strategy.columns or ()] == ["Name", "Node", "Driver", "Pool", "Age"]
    row = slice_strategy.print_row(devices.gpu_slice("node-0", devices.GpuShape(1)), now)
    assert row[:4] == ["node-0-gpu.kubesched.io", "node-0", "gpu.kubesched.io", "node-0"]
    claim_strategy = STRATEGIES[("resource.k8s.io", "resourceclaims")]
    assert claim_strategy.print_row(reserved, now)[:2] == ["c", "allocated,reserved"]


def test_generated_claim_of_a_deleted_pod_is_deleted() -> None:
    env = Env()
    env.template()
    env.create_pod("trainer", TEMPLATE_CLAIM)
    env.settle()
    assert len(env.claim_list()) == 1
    env.api.delete(env.pods, NS, "trainer")  # never scheduled: gone at once
    env.settle()
    assert env.claim_list() == []
