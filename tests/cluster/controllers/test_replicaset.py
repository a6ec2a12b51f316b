"""The ReplicaSet controller through the in-process API: replicas kept, ownership, surplus ranking, status."""

from __future__ import annotations

from typing import Any

from ctrl_harness import NS, make_env, replicaset, template

from kubesched.cluster.controllers.base import controller_ref, meta_of


def pod(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels}, "spec": template({})["spec"]}


def names(pods: list[dict[str, Any]]) -> set[str]:
    return {meta_of(p)["name"] for p in pods}


def test_creates_replicas_owned_and_named_after_the_replicaset() -> None:
    env = make_env("replicaset")
    rs = env.create("replicasets", replicaset("web", 3))
    env.settle()
    pods = env.pods_of(rs)
    assert len(pods) == 3
    for p in pods:
        meta = meta_of(p)
        assert meta["name"].startswith("web-") and len(meta["name"]) == len("web-") + 5
        assert meta["labels"] == {"app": "web"}
        ref = controller_ref(p)
        assert ref == {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": "web",
            "uid": meta_of(rs)["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
        # Through the normal API path: pod defaults were applied.
        assert p["spec"]["restartPolicy"] == "Always" and p["status"]["phase"] == "Pending"
    status = env.get("replicasets", "web")["status"]
    assert status == {"replicas": 3, "fullyLabeledReplicas": 3, "observedGeneration": 1}


def test_scale_up_and_down_and_replacement() -> None:
    env = make_env("replicaset")
    env.create("replicasets", replicaset("web", 2))
    env.settle()
    env.update("replicasets", "web", lambda o: o["spec"].update(replicas=5))
    env.settle()
    assert len(env.pods()) == 5
    victim = env.pods()[0]
    env.delete("pods", meta_of(victim)["name"])
    env.settle()
    assert len(env.pods()) == 5 and meta_of(victim)["name"] not in names(env.pods())
    env.update("replicasets", "web", lambda o: o["spec"].update(replicas=1))
    env.settle()
    assert len(env.pods()) == 1
    assert env.get("replicasets", "web")["status"]["replicas"] == 1


def test_surplus_deletion_prefers_unscheduled_then_not_ready() -> None:
    env = make_env("replicaset")
    env.create("replicasets", replicaset("web", 4))
    env.settle()
    pods = sorted(env.pods(), key=lambda p: meta_of(p)["name"])
    # Two run Ready on a node, one is on a node but not ready, one stays unscheduled.
    for p in pods[:3]:
        name = meta_of(p)["name"]
        env.api.bind(NS, name, {"metadata": {"name": name}, "target": {"kind": "Node", "name": "node-0"}})
    env.set_ready(pods[0])
    env.set_ready(pods[1])
    env.set_ready(pods[2], ready=False)
    env.settle()
    env.update("replicasets", "web", lambda o: o["spec"].update(replicas=3))
    env.settle()
    left = names(env.pods())
    assert meta_of(pods[3])["name"] not in left  # unscheduled goes first
    env.update("replicasets", "web", lambda o: o["spec"].update(replicas=2))
    env.settle()
    # pods on a node get a graceful deletion: no longer active, still stored until the kubelet finishes
    assert names(env.pods()) == {meta_of(pods[0])["name"], meta_of(pods[1])["name"]}


def test_adopts_matching_orphans_and_releases_pods_that_stop_matching() -> None:
    env = make_env("replicaset")
    orphan = env.create("pods", pod("stray", {"app": "web"}))
    env.create("replicasets", replicaset("web", 2))
    env.settle()
    rs = env.get("replicasets", "web")
    adopted = env.get("pods", "stray")
    assert controller_ref(adopted) is not None and controller_ref(adopted)["uid"] == meta_of(rs)["uid"]
    assert len(env.pods_of(rs)) == 2  # the orphan counts: one created, not two
    del orphan
    # A pod relabelled out of the selector is released and replaced.
    env.update("pods", "stray", lambda o: o["metadata"].update(labels={"app": "other"}))
    env.settle()
    assert controller_ref(env.get("pods", "stray")) is None
    assert len(env.pods_of(rs)) == 2
    # An orphan appearing later with matching labels is adopted; the surplus is then deleted.
    env.create("pods", pod("late", {"app": "web"}))
    env.settle()
    assert len(env.pods_of(rs)) == 2


def test_pods_of_a_foreign_controller_are_left_alone() -> None:
    env = make_env("replicaset")
    env.create("replicasets", replicaset("web", 1))
    env.settle()
    rs = env.get("replicasets", "web")
    other_ref = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": "x", "controller": True}
    env.create(
        "pods",
        dict(
            pod("theirs", {"app": "web"}),
            metadata={"name": "theirs", "labels": {"app": "web"}, "ownerReferences": [other_ref]},
        ),
    )
    env.settle()
    assert controller_ref(env.get("pods", "theirs"))["uid"] == "x"
    assert len(env.pods_of(rs)) == 1


def test_available_replicas_honour_min_ready_seconds() -> None:
    env = make_env("replicaset")
    env.create("replicasets", replicaset("web", 2, minReadySeconds=10))
    env.settle()
    env.ready_all()
    env.settle()
    status = env.get("replicasets", "web")["status"]
    assert status["readyReplicas"] == 2 and "availableReplicas" not in status
    env.clock.advance(10.5)
    env.settle()  # the controller asked to look again once minReadySeconds passed
    assert env.get("replicasets", "web")["status"]["availableReplicas"] == 2


def test_expectations_prevent_double_creation_while_creates_are_unobserved() -> None:
    env = make_env("replicaset")
    ctl = env.mgr.controllers["replicaset"]
    env.create("replicasets", replicaset("web", 3))
    # Pretend three creates are in flight and not yet seen: the controller must not create more.
    ctl.expectations.expect_creations((NS, "web"), 3)  # type: ignore[attr-defined]
    env.settle()
    assert len(env.pods()) == 0
    env.clock.advance(301)  # expectations expire, as upstream's five minutes
    env.create("replicasets", replicaset("other", 1))  # any event; the key is re-synced on the next event
    env.update("replicasets", "web", lambda o: o["metadata"].update(labels={"touch": "1"}))
    env.settle()
    assert len([p for p in env.pods() if meta_of(p)["labels"] == {"app": "web"}]) == 3


def test_failed_creates_set_replica_failure_and_back_off() -> None:
    env = make_env("replicaset")
    body = replicaset("web", 2)
    body["spec"]["template"]["spec"]["containers"][0]["name"] = "Not_A_Valid_Name"
    # kube-apiserver refuses such a template on the ReplicaSet itself; stored as trusted, the controller's pod
    # creates fail instead, which is the path under test (as a quota or an admission webhook would fail them).
    env.api.create(env.rt("replicasets"), body, NS, trusted=True)
    env.settle()
    status = env.get("replicasets", "web")["status"]
    cond = status["conditions"][0]
    assert cond["type"] == "ReplicaFailure" and cond["status"] == "True" and cond["reason"] == "FailedCreate"
    assert env.pods() == []
    ctl = env.mgr.controllers["replicaset"]
    assert ctl.queue.failures((NS, "web")) >= 1  # retried with back-off
    events, _ = env.api.store.list(env.rt("events").storage_key, NS)
    assert any(e.obj["reason"] == "FailedCreate" for e in events)


def test_replication_controller_keeps_replicas_with_template_labels_as_selector() -> None:
    env = make_env("replicationcontroller")
    rc = env.create(
        "replicationcontrollers",
        {"metadata": {"name": "legacy"}, "spec": {"replicas": 2, "template": template({"app": "legacy"})}},
    )
    env.settle()
    pods = env.pods_of(rc)
    assert len(pods) == 2 and controller_ref(pods[0])["kind"] == "ReplicationController"
    assert env.get("replicationcontrollers", "legacy")["status"]["replicas"] == 2


def test_deleting_the_replicaset_collects_its_pods() -> None:
    env = make_env("replicaset")
    env.create("replicasets", replicaset("web", 3))
    env.settle()
    env.delete("replicasets", "web")
    env.settle()
    assert env.pods() == []
