"""The StatefulSet controller through the in-process API: ordinal names, claims before pods, OrderedReady and
Parallel, replacement of deleted pods with the same claims, scale-down from the top, status."""

from __future__ import annotations

from typing import Any

from kubesched.apimachinery.timefmt import format_rfc3339
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.controllers import ControllerManager
from kubesched.cluster.controllers.base import FakeClock, copy_json, meta_of

Obj = dict[str, Any]
NS = "default"


class Env:
    def __init__(self) -> None:
        self.api = ClusterApi()
        self.api.bootstrap()
        self.clock = FakeClock()
        self.mgr = ControllerManager(self.api, ("statefulset",), clock=self.clock)
        self.mgr.start_sync()
        self.sts = self.api.rtype("apps", "v1", "statefulsets")
        self.pod_t = self.api.rtype("", "v1", "pods")
        self.pvc_t = self.api.rtype("", "v1", "persistentvolumeclaims")

    def settle(self) -> None:
        self.mgr.drain()

    def pods(self) -> dict[str, Obj]:
        items, _ = self.api.store.list(self.pod_t.storage_key, NS)
        return {s.obj["metadata"]["name"]: s.obj for s in items}

    def claims(self) -> set[str]:
        items, _ = self.api.store.list(self.pvc_t.storage_key, NS)
        return {s.obj["metadata"]["name"] for s in items}

    def ready(self, name: str) -> None:
        cur = self.api.get(self.pod_t, NS, name).obj
        new = copy_json(cur)
        ts = format_rfc3339(self.clock.now())
        new["status"] = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": ts}],
        }
        self.api.update(self.pod_t, new, NS, name, subresource="status")

    def ready_all(self) -> None:
        for name, pod in self.pods().items():
            if (pod.get("status") or {}).get("phase") != "Running":
                self.ready(name)

    def scale(self, replicas: int) -> None:
        obj = copy_json(self.api.get(self.sts, NS, "db").obj)
        obj["spec"]["replicas"] = replicas
        self.api.update(self.sts, obj, NS, "db")


def statefulset(replicas: int, policy: str = "OrderedReady") -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db"},
        "spec": {
            "replicas": replicas,
            "serviceName": "db",
            "podManagementPolicy": policy,
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "containers": [
                        {"name": "c", "image": "db:1", "volumeMounts": [{"name": "data", "mountPath": "/d"}]}
                    ]
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": "standard",
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def test_ordered_ready_creates_one_at_a_time_with_claims_first() -> None:
    env = Env()
    sts = env.api.create(env.sts, statefulset(3), NS).obj
    env.settle()
    assert set(env.pods()) == {"db-0"} and env.claims() == {"data-db-0"}
    pod = env.pods()["db-0"]
    assert pod["metadata"]["labels"] == {
        "app": "db",
        "statefulset.kubernetes.io/pod-name": "db-0",
        "apps.kubernetes.io/pod-index": "0",
        "controller-revision-hash": pod["metadata"]["labels"]["controller-revision-hash"],
    }
    assert pod["spec"]["hostname"] == "db-0" and pod["spec"]["subdomain"] == "db"
    assert pod["spec"]["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]
    ref = meta_of(pod)["ownerReferences"][0]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("StatefulSet", meta_of(sts)["uid"], True)
    claim = env.api.get(env.pvc_t, NS, "data-db-0").obj
    assert claim["metadata"]["labels"] == {"app": "db"} and "ownerReferences" not in claim["metadata"]
    env.ready("db-0")
    env.settle()
    assert set(env.pods()) == {"db-0", "db-1"}
    env.ready("db-1")
    env.settle()
    assert set(env.pods()) == {"db-0", "db-1", "db-2"}
    assert env.claims() == {"data-db-0", "data-db-1", "data-db-2"}
    env.ready("db-2")
    env.settle()
    status = env.api.get(env.sts, NS, "db").obj["status"]
    assert (status["replicas"], status["readyReplicas"], status["availableReplicas"]) == (3, 3, 3)
    assert (
        status["currentRevision"]
        == status["updateRevision"]
        == pod["metadata"]["labels"]["controller-revision-hash"]
    )
    assert status["observedGeneration"] == 1


def test_parallel_creates_all_and_deleted_pod_comes_back_with_its_claim() -> None:
    env = Env()
    env.api.create(env.sts, statefulset(3, "Parallel"), NS)
    env.settle()
    assert set(env.pods()) == {"db-0", "db-1", "db-2"}
    env.ready_all()
    old_uid = env.pods()["db-1"]["metadata"]["uid"]
    env.api.delete(env.pod_t, NS, "db-1", {"gracePeriodSeconds": 0})
    env.settle()
    back = env.pods()["db-1"]
    assert back["metadata"]["uid"] != old_uid
    assert back["spec"]["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data-db-1"
    assert env.claims() == {"data-db-0", "data-db-1", "data-db-2"}


def test_scale_down_from_the_highest_ordinal_keeps_claims() -> None:
    env = Env()
    env.api.create(env.sts, statefulset(3, "Parallel"), NS)
    env.settle()
    env.ready_all()
    env.scale(1)
    env.settle()
    assert set(env.pods()) == {"db-0"}
    assert env.claims() == {"data-db-0", "data-db-1", "data-db-2"}  # Retain: claims outlive their pods
    env.scale(2)
    env.settle()
    assert set(env.pods()) == {"db-0", "db-1"}


def test_ordered_ready_scale_down_waits_for_the_remaining_pods_to_be_ready() -> None:
    env = Env()
    env.api.create(env.sts, statefulset(3), NS)
    for name in ("db-0", "db-1", "db-2"):
        env.settle()
        env.ready(name)
    env.settle()
    cur = copy_json(env.api.get(env.pod_t, NS, "db-0").obj)
    cur["status"]["conditions"][0]["status"] = "False"
    env.api.update(env.pod_t, cur, NS, "db-0", subresource="status")
    env.scale(1)
    env.settle()
    assert set(env.pods()) == {"db-0", "db-1", "db-2"}  # db-0 is not Ready: nothing is removed
    env.ready("db-0")
    env.settle()
    assert set(env.pods()) == {"db-0"}


def test_rolling_update_from_the_highest_ordinal_down_to_the_partition() -> None:
    env = Env()
    env.api.create(env.sts, statefulset(3, "Parallel"), NS)
    env.settle()
    env.ready_all()
    env.settle()
    old_revision = env.api.get(env.sts, NS, "db").obj["status"]["updateRevision"]
    obj = copy_json(env.api.get(env.sts, NS, "db").obj)
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = "db:2"
    obj["spec"]["updateStrategy"] = {"type": "RollingUpdate", "rollingUpdate": {"partition": 1}}
    env.api.update(env.sts, obj, NS, "db")
    env.settle()

    def images() -> dict[str, str]:
        return {n: p["spec"]["containers"][0]["image"] for n, p in sorted(env.pods().items())}

    assert images() == {"db-0": "db:1", "db-1": "db:1", "db-2": "db:2"}  # db-2 replaced first
    env.ready_all()
    env.settle()
    assert images() == {"db-0": "db:1", "db-1": "db:2", "db-2": "db:2"}
    env.ready_all()
    env.settle()
    assert images() == {"db-0": "db:1", "db-1": "db:2", "db-2": "db:2"}  # the partition keeps db-0
    status = env.api.get(env.sts, NS, "db").obj["status"]
    assert status["currentRevision"] == old_revision != status["updateRevision"]
    assert (status["currentReplicas"], status["updatedReplicas"]) == (1, 2)
    assert env.claims() == {"data-db-0", "data-db-1", "data-db-2"}  # the same claims all along


def test_claim_retention_policy() -> None:
    env = Env()
    body = statefulset(3, "Parallel")
    body["spec"]["persistentVolumeClaimRetentionPolicy"] = {"whenScaled": "Delete", "whenDeleted": "Delete"}
    sts = env.api.create(env.sts, body, NS).obj
    env.settle()
    env.ready_all()
    claim = env.api.get(env.pvc_t, NS, "data-db-0").obj
    (ref,) = claim["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["uid"], ref["controller"]) == ("StatefulSet", sts["metadata"]["uid"], False)
    env.scale(1)
    env.settle()
    assert set(env.pods()) == {"db-0"} and env.claims() == {"data-db-0"}
