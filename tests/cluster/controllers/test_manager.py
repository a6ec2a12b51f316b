"""The controller manager: the --controllers list, and what bare pods cost (nothing but one check)."""

from __future__ import annotations

import pytest
from ctrl_harness import make_env, template

from kubesched.cluster.controllers import KNOWN_CONTROLLERS, parse_controllers


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("*", set(KNOWN_CONTROLLERS)),
        ("", set()),
        ("*,-disruption", set(KNOWN_CONTROLLERS) - {"disruption"}),
        ("replicaset,deployment", {"replicaset", "deployment"}),
        ("-replicaset,*", set(KNOWN_CONTROLLERS) - {"replicaset"}),
    ],
)
def test_parse_controllers(spec: str, expected: set[str]) -> None:
    assert parse_controllers(spec) == expected


def test_unknown_controller_is_an_error() -> None:
    with pytest.raises(ValueError, match="not in the list of known controllers"):
        parse_controllers("*,nodelifecycle")


def test_bare_pods_cost_no_controller_work() -> None:
    env = make_env()
    for i in range(200):
        env.create(
            "pods", {"metadata": {"name": f"p{i}", "labels": {"app": "x"}}, "spec": template({})["spec"]}
        )
    env.ready_all()
    assert env.settle() == 0
    assert env.mgr.pods.selecting == {} and env.mgr.pods.owned_by("anything") == {}


def test_no_controllers_registers_no_observer() -> None:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.controllers import ControllerManager

    api = ClusterApi()
    before = list(api.observers)
    ControllerManager(api, ())
    assert api.observers == before
