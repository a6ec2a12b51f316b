"""PodInfo built from an earlier version (assume, the bound version the informer reports) must equal a fresh
``PodInfo.from_pod`` of the same object; a real spec change must fall back to a full parse."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.resources import ResourceIndex


def _pod(cpu: str, labels: dict[str, str], tolerate: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "c",
                "image": "nginx",
                "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                "ports": [{"containerPort": 80, "hostPort": 8080}],
            }
        ],
        "schedulerName": "default-scheduler",
    }
    if tolerate:
        spec["tolerations"] = [{"key": "k", "operator": "Exists", "effect": "NoSchedule"}]
    return {
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "uid": "u-1",
            "resourceVersion": "5",
            "labels": labels,
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _fields(pi: PodInfo) -> dict[str, str]:
    return {name: repr(getattr(pi, name)) for name in PodInfo.__slots__ if name != "pod"}


@given(
    cpu=st.sampled_from(["100m", "1", "2500m"]),
    labels=st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"])),
    new_labels=st.dictionaries(st.sampled_from(["app", "tier"]), st.sampled_from(["a", "b"])),
    tolerate=st.booleans(),
    deleting=st.booleans(),
)
def test_bound_version_equals_a_fresh_parse(
    cpu: str, labels: dict[str, str], new_labels: dict[str, str], tolerate: bool, deleting: bool
) -> None:
    res = ResourceIndex()
    pending = PodInfo.from_pod(_pod(cpu, labels, tolerate), res)
    assumed = pending.assumed_on("node-1")
    assert assumed.node_name == "node-1" and pending.node_name == ""
    bound = copy.deepcopy(pending.pod)
    bound["spec"]["nodeName"] = "node-2"
    bound["metadata"].update(resourceVersion="9", labels=new_labels)
    if deleting:
        bound["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    bound["status"] = {"phase": "Running", "nominatedNodeName": "node-3"}
    reused = assumed.bound_version(bound)
    assert reused is not None
    assert reused.pod is bound
    assert _fields(reused) == _fields(PodInfo.from_pod(bound, res))


def test_a_changed_spec_is_parsed_again() -> None:
    res = ResourceIndex()
    pending = PodInfo.from_pod(_pod("1", {}, False), res)
    resized = copy.deepcopy(pending.pod)
    resized["spec"]["nodeName"] = "node-1"
    resized["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "2"
    assert pending.bound_version(resized) is None
    extra = copy.deepcopy(pending.pod)
    extra["spec"]["priority"] = 5
    assert pending.bound_version(extra) is None
    other = copy.deepcopy(pending.pod)
    other["metadata"]["uid"] = "u-2"
    assert pending.bound_version(other) is None
