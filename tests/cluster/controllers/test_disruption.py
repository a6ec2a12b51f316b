"""PodDisruptionBudget status: upstream's arithmetic as a table, then the controller through the in-process API."""

from __future__ import annotations

from typing import Any

import pytest
from ctrl_harness import NS, deployment, make_env, template

from kubesched.cluster.controllers.base import get_condition, meta_of
from kubesched.cluster.controllers.disruption import desired_healthy, disruptions_allowed

# (spec, selected pods, controllers' scale) -> (expectedPods, desiredHealthy), as upstream's getExpectedPodCount:
# an integer minAvailable counts the selected pods; percentages (both fields) round up over the scale.
TABLE = [
    ({"minAvailable": 2}, 3, None, (3, 2)),
    ({"minAvailable": 5}, 3, None, (3, 5)),
    ({"minAvailable": "50%"}, 3, 3, (3, 2)),
    ({"minAvailable": "34%"}, 2, 3, (3, 2)),
    ({"minAvailable": "100%"}, 4, 4, (4, 4)),
    ({"maxUnavailable": 1}, 3, 3, (3, 2)),
    ({"maxUnavailable": "50%"}, 3, 3, (3, 1)),
    ({"maxUnavailable": "34%"}, 3, 3, (3, 1)),
    ({"maxUnavailable": 5}, 3, 3, (3, 0)),
    ({"maxUnavailable": "0%"}, 5, 5, (5, 5)),
]


@pytest.mark.parametrize(("spec", "selected", "scale", "expected"), TABLE)
def test_expected_and_desired(spec: dict[str, Any], selected: int, scale: int | None, expected: Any) -> None:
    assert desired_healthy(spec, selected, scale) == expected


@pytest.mark.parametrize(
    ("current", "desired", "expected", "allowed"),
    [(3, 2, 3, 1), (2, 2, 3, 0), (1, 2, 3, 0), (3, 0, 0, 0), (5, 1, 5, 4)],
)
def test_disruptions_allowed(current: int, desired: int, expected: int, allowed: int) -> None:
    assert disruptions_allowed(current, desired, expected) == allowed


def pdb(name: str, selector: dict[str, Any] | None, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": name},
    }
    body["spec"] = dict(spec)
    if selector is not None:
        body["spec"]["selector"] = selector
    return body


def test_budget_over_a_deployment_follows_pods_and_scale() -> None:
    env = make_env()
    env.create("deployments", deployment("web", 3))
    env.create("poddisruptionbudgets", pdb("web", {"matchLabels": {"app": "web"}}, maxUnavailable="34%"))
    env.settle()
    s = env.get("poddisruptionbudgets", "web")["status"]
    assert (s["expectedPods"], s["desiredHealthy"], s["currentHealthy"], s["disruptionsAllowed"]) == (
        3,
        1,
        0,
        0,
    )
    cond = get_condition(s, "DisruptionAllowed")
    assert (cond["status"], cond["reason"], cond["observedGeneration"]) == ("False", "InsufficientPods", 1)
    env.ready_all()
    env.settle()
    s = env.get("poddisruptionbudgets", "web")["status"]
    assert (s["currentHealthy"], s["disruptionsAllowed"], s["observedGeneration"]) == (3, 2, 1)
    assert get_condition(s, "DisruptionAllowed")["reason"] == "SufficientPods"
    # The scale is the Deployment's: scaling it changes expectedPods once pods change.
    env.update("deployments", "web", lambda o: o["spec"].update(replicas=5))
    env.settle()
    s = env.get("poddisruptionbudgets", "web")["status"]
    assert (s["expectedPods"], s["desiredHealthy"]) == (5, 3)
    # A deleted pod stops counting at once.
    env.delete("pods", meta_of(env.pods()[0])["name"])
    env.settle()
    assert env.get("poddisruptionbudgets", "web")["status"]["currentHealthy"] <= 4


def test_min_available_number_counts_selected_bare_pods() -> None:
    env = make_env()
    for i in range(3):
        env.create(
            "pods", {"metadata": {"name": f"p{i}", "labels": {"app": "db"}}, "spec": template({})["spec"]}
        )
    env.create("poddisruptionbudgets", pdb("db", {"matchLabels": {"app": "db"}}, minAvailable=2))
    env.settle()
    for p in env.pods()[:2]:
        env.set_ready(p)
    env.settle()
    s = env.get("poddisruptionbudgets", "db")["status"]
    assert (s["expectedPods"], s["desiredHealthy"], s["currentHealthy"], s["disruptionsAllowed"]) == (
        3,
        2,
        2,
        0,
    )
    env.set_ready(env.pods()[2])
    env.settle()
    assert env.get("poddisruptionbudgets", "db")["status"]["disruptionsAllowed"] == 1


def test_percentage_over_pods_without_a_known_controller_fails_safe() -> None:
    env = make_env()
    ref = {"apiVersion": "example.com/v1", "kind": "Thing", "name": "t", "uid": "u1", "controller": True}
    env.create(
        "pods",
        {
            "metadata": {"name": "p", "labels": {"app": "x"}, "ownerReferences": [ref]},
            "spec": template({})["spec"],
        },
    )
    env.create("poddisruptionbudgets", pdb("x", {"matchLabels": {"app": "x"}}, minAvailable="50%"))
    env.settle()
    s = env.get("poddisruptionbudgets", "x")["status"]
    cond = get_condition(s, "DisruptionAllowed")
    assert s["disruptionsAllowed"] == 0 and (cond["status"], cond["reason"]) == ("False", "SyncFailed")


def test_selector_absent_selects_nothing_empty_selects_all() -> None:
    env = make_env()
    env.create("pods", {"metadata": {"name": "p", "labels": {"a": "b"}}, "spec": template({})["spec"]})
    env.set_ready(env.pods()[0])
    env.create("poddisruptionbudgets", pdb("none", None, minAvailable=0))
    env.create("poddisruptionbudgets", pdb("all", {}, minAvailable=0))
    env.settle()
    assert env.get("poddisruptionbudgets", "none")["status"]["expectedPods"] == 0
    s = env.get("poddisruptionbudgets", "all")["status"]
    assert (s["expectedPods"], s["currentHealthy"], s["disruptionsAllowed"]) == (1, 1, 1)
    events, _ = env.api.store.list(env.rt("events").storage_key, NS)
    assert any(e.obj["reason"] == "NoPods" for e in events)
