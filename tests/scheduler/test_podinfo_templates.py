"""PodInfo spec templates: a pod whose spec equals an earlier pod's (``nodeName`` aside) copies that pod's
spec-derived fields. The result must equal a full parse of the pod, for any spec, and a spec that differs from
the template in a single field must not be taken for it."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.resources import ResourceIndex

_names = st.sampled_from(["a", "b", "c"])
_quantities = st.sampled_from(["0", "100m", "1", "2500m", "1Gi", "500Mi", "3"])
_resources = st.sampled_from(["cpu", "memory", "ephemeral-storage", "example.com/gpu", "hugepages-2Mi"])
_resource_list = st.dictionaries(_resources, _quantities, max_size=3)


def _container() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"name": _names},
        optional={
            "image": st.sampled_from(["nginx", "nginx:1.2", "reg:5000/app", "app@sha256:ab"]),
            "resources": st.fixed_dictionaries(
                {}, optional={"requests": _resource_list, "limits": _resource_list}
            ),
            "ports": st.lists(
                st.fixed_dictionaries(
                    {"containerPort": st.sampled_from([80, 443])},
                    optional={
                        "hostPort": st.sampled_from([0, 8080, 9090]),
                        "protocol": st.sampled_from(["TCP", "UDP"]),
                        "hostIP": st.sampled_from(["", "10.0.0.1"]),
                    },
                ),
                max_size=2,
            ),
            "restartPolicy": st.just("Always"),
        },
    )


_toleration = st.fixed_dictionaries(
    {},
    optional={
        "key": _names,
        "operator": st.sampled_from(["Exists", "Equal"]),
        "value": _names,
        "effect": st.sampled_from(["NoSchedule", "NoExecute", ""]),
    },
)
_term = st.fixed_dictionaries(
    {
        "matchExpressions": st.lists(
            st.fixed_dictionaries({"key": _names, "operator": st.just("Exists")}), max_size=2
        )
    }
)
_affinity = st.fixed_dictionaries(
    {},
    optional={
        "nodeAffinity": st.fixed_dictionaries(
            {},
            optional={
                "requiredDuringSchedulingIgnoredDuringExecution": st.fixed_dictionaries(
                    {"nodeSelectorTerms": st.lists(_term, max_size=2)}
                ),
                "preferredDuringSchedulingIgnoredDuringExecution": st.lists(
                    st.fixed_dictionaries({"weight": st.integers(1, 100), "preference": _term}), max_size=2
                ),
            },
        ),
        "podAffinity": st.just({"requiredDuringSchedulingIgnoredDuringExecution": []}),
        "podAntiAffinity": st.fixed_dictionaries(
            {"preferredDuringSchedulingIgnoredDuringExecution": st.just([])}
        ),
    },
)

SPECS = st.fixed_dictionaries(
    {"containers": st.lists(_container(), min_size=1, max_size=2)},
    optional={
        "initContainers": st.lists(_container(), max_size=2),
        "nodeName": _names,
        "schedulerName": st.sampled_from(["default-scheduler", "other"]),
        "priority": st.integers(-5, 5),
        "preemptionPolicy": st.sampled_from(["Never", "PreemptLowerPriority"]),
        "schedulingGates": st.lists(st.fixed_dictionaries({"name": _names}), max_size=2),
        "tolerations": st.lists(_toleration, max_size=2),
        "nodeSelector": st.dictionaries(_names, _names, max_size=2),
        "affinity": _affinity,
        "topologySpreadConstraints": st.lists(
            st.fixed_dictionaries({"maxSkew": st.integers(1, 3), "topologyKey": _names}), max_size=1
        ),
        "overhead": _resource_list,
        "resources": st.fixed_dictionaries(
            {}, optional={"requests": _resource_list, "limits": _resource_list}
        ),
    },
)


def _pod(spec: dict[str, Any], n: int) -> dict[str, Any]:
    return {
        "metadata": {
            "name": f"p{n}",
            "namespace": "ns",
            "uid": f"u-{n}",
            "resourceVersion": str(n),
            "labels": {"n": str(n)},
            "creationTimestamp": f"2026-01-01T00:00:{n % 60:02d}Z",
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def _full(pod: dict[str, Any], res: ResourceIndex) -> PodInfo:
    """The full parse, without templates."""
    pi = PodInfo.__new__(PodInfo)
    spec = pod.get("spec") or {}
    pi._read_pod_fields(pod, spec)
    pi._read_spec_fields(spec, res)
    return pi


def _fields(pi: PodInfo) -> dict[str, str]:
    return {name: repr(getattr(pi, name)) for name in PodInfo.__slots__ if name != "pod"}


def _mutations(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """Copies of ``spec`` that differ in one field each."""
    out = []
    for key, value in spec.items():
        if key == "nodeName":
            continue
        changed = copy.deepcopy(spec)
        del changed[key]
        out.append(changed)
        if isinstance(value, int):
            out.append({**copy.deepcopy(spec), key: value + 1})
    out.append({**copy.deepcopy(spec), "priority": int(spec.get("priority") or 0) + 7})
    first = copy.deepcopy(spec)
    first["containers"][0]["image"] = "changed:1"
    out.append(first)
    res_changed = copy.deepcopy(spec)
    res_changed["containers"][0]["resources"] = {"requests": {"cpu": "7", "example.com/new": "2"}}
    out.append(res_changed)
    return out


@given(spec=SPECS, node=st.sampled_from([None, "n1", "n2"]))
def test_a_template_copy_equals_a_full_parse(spec: dict[str, Any], node: str | None) -> None:
    res = ResourceIndex()
    PodInfo.from_pod(_pod(spec, 1), res)  # becomes the template
    twin = copy.deepcopy(spec)
    if node is not None:
        twin["nodeName"] = node
    elif "nodeName" in twin:
        twin["nodeName"] = "elsewhere"
    for n, candidate in enumerate([twin, spec, *_mutations(spec)], start=2):
        pod = _pod(candidate, n)
        got = PodInfo.from_pod(pod, res)
        assert got.pod is pod
        assert _fields(got) == _fields(_full(pod, res))


def test_pods_of_one_template_share_the_derived_fields() -> None:
    spec = {
        "containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "1"}}}],
        "tolerations": [{"key": "k", "operator": "Exists"}],
    }
    res = ResourceIndex()
    first = PodInfo.from_pod(_pod(spec, 1), res)
    second = PodInfo.from_pod(_pod(copy.deepcopy(spec), 2), res)
    assert second.requests is first.requests
    assert second.tolerations_key is first.tolerations_key
    assert (second.uid, second.name, second.labels) == ("u-2", "p2", {"n": "2"})
    other = PodInfo.from_pod(_pod({**spec, "priority": 3}, 3), res)
    assert other.priority == 3 and first.priority == second.priority == 0
    bound = PodInfo.from_pod(_pod({**copy.deepcopy(spec), "nodeName": "n9"}, 4), res)
    assert bound.node_name == "n9" and first.node_name == ""
