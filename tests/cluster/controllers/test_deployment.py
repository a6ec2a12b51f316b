"""The Deployment controller through the in-process API on a fake clock: rollouts, their limits, scaling, history,
status and conditions; upstream's surge/unavailable rounding as a table, the rolling limits as a property."""

from __future__ import annotations

from typing import Any

import pytest
from ctrl_harness import NS, Env, deployment, make_env
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.cluster.controllers.base import controller_ref, get_condition, is_pod_ready, meta_of
from kubesched.cluster.controllers.deployment import (
    HASH_LABEL,
    REVISION,
    REVISION_HISTORY,
    compute_hash,
    resolve_fenceposts,
)

Obj = dict[str, Any]


def replicasets(env: Env) -> list[Obj]:
    items, _ = env.api.store.list(env.rt("replicasets").storage_key, NS)
    return sorted((s.obj for s in items), key=lambda o: int(meta_of(o)["annotations"][REVISION]))


def rollout(env: Env, name: str = "web") -> Obj:
    """Let the pods become Ready as the kubelet would, until nothing changes; the Deployment after."""
    for _ in range(100):
        env.settle()
        if env.ready_all() == 0:
            env.settle()
            break
    return env.get("deployments", name)


def set_image(env: Env, image: str, name: str = "web") -> None:
    env.update(
        "deployments", name, lambda o: o["spec"]["template"]["spec"]["containers"][0].update(image=image)
    )


# Facts from upstream's deployment util tests (ResolveFenceposts): surge rounds up, unavailable rounds down, and
# both zero becomes one unavailable.
@pytest.mark.parametrize(
    ("surge", "unavailable", "desired", "expected"),
    [
        ("25%", "25%", 10, (3, 2)),
        ("25%", "25%", 4, (1, 1)),
        ("25%", "25%", 1, (1, 0)),
        ("50%", "50%", 3, (2, 1)),
        (0, 0, 5, (0, 1)),
        ("0%", "0%", 5, (0, 1)),
        (1, 0, 3, (1, 0)),
        ("10%", "10%", 5, (1, 0)),
        (2, "100%", 3, (2, 3)),
    ],
)
def test_resolve_fenceposts(surge: Any, unavailable: Any, desired: int, expected: tuple[int, int]) -> None:
    assert resolve_fenceposts(surge, unavailable, desired) == expected


def test_hash_is_stable_and_changes_with_template_and_collision_count() -> None:
    t = {"metadata": {"labels": {"app": "x"}}, "spec": {"containers": [{"name": "c", "image": "a"}]}}
    assert compute_hash(t, None) == compute_hash({"spec": t["spec"], "metadata": t["metadata"]}, None)
    assert compute_hash(t, None) != compute_hash(t, 1)
    assert set(compute_hash(t, None)) <= set("bcdfghjklmnpqrstvwxz2456789")


def test_create_rolls_out_and_reports_as_upstream() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 3))
    env.settle()
    (rs,) = replicasets(env)
    h = meta_of(rs)["labels"][HASH_LABEL]
    assert meta_of(rs)["name"] == f"web-{h}"
    assert rs["spec"]["selector"]["matchLabels"] == {"app": "web", HASH_LABEL: h}
    assert controller_ref(rs)["kind"] == "Deployment"
    assert all(meta_of(p)["labels"][HASH_LABEL] == h for p in env.pods())
    d = env.get("deployments", "web")
    assert d["status"]["updatedReplicas"] == 3 and d["status"]["unavailableReplicas"] == 3
    assert get_condition(d["status"], "Available")["reason"] == "MinimumReplicasUnavailable"
    assert get_condition(d["status"], "Progressing")["reason"] == "ReplicaSetUpdated"
    d = rollout(env)
    s = d["status"]
    assert (s["replicas"], s["updatedReplicas"], s["readyReplicas"], s["availableReplicas"]) == (3, 3, 3, 3)
    assert "unavailableReplicas" not in s and s["observedGeneration"] == 1
    assert get_condition(s, "Available")["status"] == "True"
    assert get_condition(s, "Available")["reason"] == "MinimumReplicasAvailable"
    progressing = get_condition(s, "Progressing")
    assert progressing["reason"] == "NewReplicaSetAvailable"
    assert progressing["message"] == f'ReplicaSet "web-{h}" has successfully progressed.'
    assert meta_of(d)["annotations"][REVISION] == "1"


def test_scale_up_and_down_and_pod_replacement() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 3))
    rollout(env)
    env.update("deployments", "web", lambda o: o["spec"].update(replicas=5))
    d = rollout(env)
    assert d["status"]["availableReplicas"] == 5 and len(env.pods()) == 5
    assert len(replicasets(env)) == 1  # scaling makes no new ReplicaSet
    env.delete("pods", meta_of(env.pods()[0])["name"])
    env.settle()
    assert len(env.pods()) == 5
    env.update("deployments", "web", lambda o: o["spec"].update(replicas=2))
    d = rollout(env)
    assert len(env.pods()) == 2 and d["status"]["replicas"] == 2


def check_limits(env: Env, replicas: int, surge: int, unavailable: int, seen: list[tuple[int, int]]) -> None:
    pods = env.pods()
    ready = sum(1 for p in pods if is_pod_ready(p))
    seen.append((len(pods), ready))
    assert len(pods) <= replicas + surge, f"{len(pods)} pods > {replicas} + {surge}"
    assert ready >= replicas - unavailable, f"{ready} available < {replicas} - {unavailable}"


def rolling_update(
    env: Env, replicas: int, surge: Any, unavailable: Any, ready_order: list[int] | None = None
) -> list[tuple[int, int]]:
    """Roll to a new image, making one pod Ready at a time (in ``ready_order``), checking the limits after every
    pod write the controllers make."""
    max_surge, max_unavailable = resolve_fenceposts(surge, unavailable, replicas)
    max_unavailable = min(max_unavailable, replicas)
    seen: list[tuple[int, int]] = []

    def observer(rtype: Any, etype: str, new: Obj | None, old: Obj | None) -> None:
        if rtype.plural == "pods":
            check_limits(env, replicas, max_surge, max_unavailable, seen)

    env.api.observers.append(observer)
    set_image(env, "nginx:2")
    order = list(ready_order or [])
    for _ in range(10 * replicas + 20):
        env.settle()
        waiting = [p for p in env.pods() if not is_pod_ready(p)]
        if not waiting:
            break
        pick = order.pop(0) % len(waiting) if order else 0
        env.set_ready(waiting[pick])
    env.settle()
    env.api.observers.remove(observer)
    return seen


@pytest.mark.parametrize(
    ("replicas", "surge", "unavailable"),
    [(3, "25%", "25%"), (4, 1, 0), (4, 0, 1), (5, 2, 2), (10, "30%", "20%"), (1, 0, 0)],
)
def test_rolling_update_keeps_its_limits_and_completes(replicas: int, surge: Any, unavailable: Any) -> None:
    env = make_env()
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}
    env.create("deployments", deployment("web", replicas, strategy=strategy))
    rollout(env)
    seen = rolling_update(env, replicas, surge, unavailable)
    assert seen, "the controllers wrote pods"
    d = env.get("deployments", "web")
    s = d["status"]
    assert (s["replicas"], s["updatedReplicas"], s["availableReplicas"]) == (replicas, replicas, replicas)
    assert get_condition(s, "Progressing")["reason"] == "NewReplicaSetAvailable"
    old, new = replicasets(env)
    assert old["spec"]["replicas"] == 0 and new["spec"]["replicas"] == replicas
    assert meta_of(new)["annotations"][REVISION] == "2" and meta_of(d)["annotations"][REVISION] == "2"
    assert all(p["spec"]["containers"][0]["image"] == "nginx:2" for p in env.pods())


surge_or_unavailable = st.one_of(st.integers(0, 4), st.sampled_from(["0%", "10%", "25%", "50%", "100%"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    replicas=st.integers(1, 7),
    surge=surge_or_unavailable,
    unavailable=surge_or_unavailable,
    order=st.lists(st.integers(0, 20), max_size=40),
)
def test_rolling_update_limits_hold_for_any_parameters(
    replicas: int, surge: Any, unavailable: Any, order: list[int]
) -> None:
    env = make_env()
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}
    env.create("deployments", deployment("web", replicas, strategy=strategy))
    rollout(env)
    rolling_update(env, replicas, surge, unavailable, order)
    s = env.get("deployments", "web")["status"]
    assert (s["updatedReplicas"], s["availableReplicas"], s["replicas"]) == (replicas, replicas, replicas)


def test_recreate_scales_old_to_zero_before_creating_new_pods() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 3, strategy={"type": "Recreate"}))
    rollout(env)
    set_image(env, "nginx:2")
    env.settle()
    # Old pods are deleted (unscheduled: at once); the new ReplicaSet comes only then, at full size.
    images = {p["spec"]["containers"][0]["image"] for p in env.pods()}
    assert images == {"nginx:2"} and len(env.pods()) == 3
    d = rollout(env)
    assert d["status"]["updatedReplicas"] == 3 and d["status"]["availableReplicas"] == 3
    assert [rs["spec"]["replicas"] for rs in replicasets(env)] == [0, 3]


def test_scaling_during_a_rollout_is_proportional() -> None:
    env = make_env()
    strategy = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 0}}
    env.create("deployments", deployment("web", 10, strategy=strategy))
    rollout(env)
    set_image(env, "nginx:2")
    env.settle()
    old, new = replicasets(env)
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (10, 3)
    env.update("deployments", "web", lambda o: o["spec"].update(replicas=20))
    env.settle()
    old, new = replicasets(env)
    # 23 allowed (20 + 3 surge) from 13: the 10 more go 10:3 as the sizes, leftovers to the larger.
    assert old["spec"]["replicas"] + new["spec"]["replicas"] == 23
    assert (old["spec"]["replicas"], new["spec"]["replicas"]) == (18, 5)
    d = rollout(env)
    assert d["status"]["availableReplicas"] == 20 and d["status"]["updatedReplicas"] == 20


def test_rollback_restart_and_history_limit() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 2, revisionHistoryLimit=1))
    rollout(env)
    first_template = replicasets(env)[0]["spec"]["template"]
    set_image(env, "nginx:2")
    rollout(env)
    # kubectl rollout undo: the old ReplicaSet's template (without the hash label) back on the Deployment.
    undo = {k: v for k, v in first_template.items()}
    undo["metadata"] = {"labels": {"app": "web"}}
    env.update("deployments", "web", lambda o: o["spec"].update(template=undo))
    d = rollout(env)
    rss = replicasets(env)
    assert len(rss) == 2
    back = rss[-1]
    assert meta_of(back)["annotations"][REVISION] == "3"
    assert meta_of(back)["annotations"][REVISION_HISTORY] == "1"
    assert back["spec"]["replicas"] == 2 and meta_of(d)["annotations"][REVISION] == "3"
    # kubectl rollout restart: a template annotation; a third template, and the limit of one old ReplicaSet.
    env.update(
        "deployments",
        "web",
        lambda o: o["spec"]["template"]["metadata"].update(
            annotations={"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}
        ),
    )
    rollout(env)
    rss = replicasets(env)
    assert len(rss) == 2 and [rs["spec"]["replicas"] for rs in rss] == [0, 2]


def test_hash_collision_bumps_collision_count() -> None:
    env = make_env()
    body = deployment("web", 1)
    h = compute_hash(body["spec"]["template"], None)
    # Someone else's ReplicaSet already has the name the Deployment would pick.
    squatter = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": f"web-{h}", "labels": {"other": "x"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"other": "x"}},
            "template": {"metadata": {"labels": {"other": "x"}}, "spec": body["spec"]["template"]["spec"]},
        },
    }
    env.create("replicasets", squatter)
    env.create("deployments", body)
    env.settle()
    env.clock.advance(1)
    env.settle()
    d = rollout(env)
    assert d["status"]["collisionCount"] == 1
    assert d["status"]["availableReplicas"] == 1
    assert meta_of(env.get("replicasets", f"web-{h}"))["labels"] == {"other": "x"}


def test_progress_deadline_exceeded() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 2, progressDeadlineSeconds=30))
    env.settle()  # pods never become Ready
    env.clock.advance(31)
    env.settle()
    cond = get_condition(env.get("deployments", "web")["status"], "Progressing")
    assert (cond["status"], cond["reason"]) == ("False", "ProgressDeadlineExceeded")
    assert cond["message"].endswith("has timed out progressing.")


def test_paused_deployment_does_not_roll() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 2))
    rollout(env)
    env.update("deployments", "web", lambda o: o["spec"].update(paused=True))
    set_image(env, "nginx:2")
    env.settle()
    assert len(replicasets(env)) == 1
    assert (
        get_condition(env.get("deployments", "web")["status"], "Progressing")["reason"] == "DeploymentPaused"
    )
    env.update("deployments", "web", lambda o: o["spec"].update(paused=False))
    rollout(env)
    assert len(replicasets(env)) == 2


def test_adopts_an_orphan_replicaset_with_the_same_template() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 2))
    rollout(env)
    (rs,) = replicasets(env)
    env.api.delete(env.rt("deployments"), NS, "web", {"propagationPolicy": "Orphan"})
    env.settle()
    assert controller_ref(env.get("replicasets", meta_of(rs)["name"])) is None
    env.create("deployments", deployment("web", 2))
    d = rollout(env)
    assert controller_ref(env.get("replicasets", meta_of(rs)["name"]))["uid"] == meta_of(d)["uid"]
    assert len(replicasets(env)) == 1 and len(env.pods()) == 2
