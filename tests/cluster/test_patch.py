"""PATCH engines: JSON patch, merge patch, strategic merge patch (incl. kubectl's 3-way patches), SSA and
managedFields tracking."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster.errors import ApiError
from kubesched.cluster.patch import (
    json_patch,
    merge_patch,
    record_update,
    server_side_apply,
    strategic_merge_patch,
)

Obj = dict[str, Any]


def pure(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` and check it left its arguments alone and returned something sharing nothing with them."""
    before = copy.deepcopy(args)
    result = fn(*args, **kwargs)
    assert args == before, "input was mutated"
    if isinstance(result, dict):
        kept = copy.deepcopy(result)
        poke(result)
        assert args == before, "result shares structure with the input"
        return kept
    return result


def poke(value: Any) -> None:
    """Mutate every container inside ``value``."""
    if isinstance(value, dict):
        for v in list(value.values()):
            poke(v)
        value["__poked__"] = True
    elif isinstance(value, list):
        for v in value:
            poke(v)
        value.append("__poked__")


def api_error(fn: Any, *args: Any, **kwargs: Any) -> ApiError:
    with pytest.raises(ApiError) as e:
        fn(*args, **kwargs)
    return e.value


# ---------------------------------------------------------------------------------------------------------------
# JSON patch

DOC: Obj = {"metadata": {"name": "p", "labels": {"a": "1"}}, "spec": {"list": [1, 2, 3]}}


@pytest.mark.parametrize(
    ("ops", "expected"),
    [
        ([], DOC),
        (
            [{"op": "add", "path": "/metadata/labels/b", "value": "2"}],
            {**DOC, "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}}},
        ),
        ([{"op": "replace", "path": "/spec/list/0", "value": 9}], {**DOC, "spec": {"list": [9, 2, 3]}}),
        ([{"op": "add", "path": "/spec/list/-", "value": 4}], {**DOC, "spec": {"list": [1, 2, 3, 4]}}),
        ([{"op": "remove", "path": "/metadata/labels"}], {**DOC, "metadata": {"name": "p"}}),
        (
            [{"op": "move", "from": "/metadata/labels/a", "path": "/metadata/labels/z"}],
            {**DOC, "metadata": {"name": "p", "labels": {"z": "1"}}},
        ),
        (
            [{"op": "copy", "from": "/metadata/name", "path": "/spec/name"}],
            {**DOC, "spec": {"list": [1, 2, 3], "name": "p"}},
        ),
        (
            [{"op": "test", "path": "/metadata/name", "value": "p"}, {"op": "remove", "path": "/spec"}],
            {"metadata": DOC["metadata"]},
        ),
        (
            [{"op": "add", "path": "/metadata/labels/a~1b", "value": "x"}],
            {**DOC, "metadata": {"name": "p", "labels": {"a": "1", "a/b": "x"}}},
        ),
    ],
)
def test_json_patch_operations(ops: list[Obj], expected: Obj) -> None:
    assert pure(json_patch, DOC, ops) == expected


@pytest.mark.parametrize(
    "ops",
    [
        [{"op": "test", "path": "/metadata/name", "value": "q"}],  # failed test
        [{"op": "remove", "path": "/metadata/missing"}],
        [{"op": "replace", "path": "/nope/x", "value": 1}],
        [{"op": "frobnicate", "path": "/metadata"}],
        [{"op": "add", "path": "no-slash", "value": 1}],
        [{"op": "replace", "path": "", "value": [1]}],  # the result would not be an object
    ],
)
def test_json_patch_that_does_not_apply_is_422_like_kube_apiserver(ops: list[Obj]) -> None:
    err = api_error(json_patch, DOC, ops)
    assert err.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "the server rejected our request due to an error in our request",
        "reason": "Invalid",
        "details": {},
        "code": 422,
    }


@pytest.mark.parametrize(
    ("ops", "message"),
    [
        ({"op": "add"}, "json patch must be a list of operations, got dict"),
        (["add"], "json patch operation 0 must be an object"),
        ([{"op": "add", "path": 3, "value": 1}], 'json patch operation 0: "path" must be a string'),
    ],
)
def test_malformed_json_patch_is_400(ops: Any, message: str) -> None:
    err = api_error(json_patch, DOC, ops)
    assert (err.code, err.reason, err.message) == (400, "BadRequest", message)


def test_json_patch_operation_limit() -> None:
    err = api_error(json_patch, DOC, [{"op": "test", "path": "/metadata/name", "value": "p"}] * 10001)
    assert err.code == 413


json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_values = st.recursive(
    json_leaf,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
json_objects = st.dictionaries(st.text("abcd", max_size=3), json_values, max_size=5)


@given(json_objects, st.text("xyz", min_size=1, max_size=3), json_values)
def test_json_patch_add_then_remove_is_identity(doc: Obj, key: str, value: Any) -> None:
    doc.pop(key, None)
    ops = [{"op": "add", "path": f"/{key}", "value": value}, {"op": "remove", "path": f"/{key}"}]
    assert json_patch(doc, ops) == doc


# ---------------------------------------------------------------------------------------------------------------
# JSON merge patch (RFC 7386 examples)


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
        ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
        ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),  # lists are replaced whole
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
        ({"a": "x"}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),
    ],
)
def test_merge_patch(target: Obj, patch: Obj, expected: Obj) -> None:
    assert pure(merge_patch, target, patch) == expected


def test_merge_patch_body_must_be_an_object() -> None:
    assert api_error(merge_patch, DOC, ["x"]).code == 400
    assert api_error(merge_patch, DOC, "x").code == 400


def merge_diff(x: Obj, y: Obj) -> Obj:
    """A merge patch turning ``x`` into ``y``."""
    patch: Obj = {k: None for k in x if k not in y}
    for k, v in y.items():
        if k in x and isinstance(v, dict) and isinstance(x[k], dict):
            sub = merge_diff(x[k], v)
            if sub:
                patch[k] = sub
        elif k not in x or x[k] != v or type(x[k]) is not type(v):
            patch[k] = v
    return patch


null_free_values = st.recursive(
    st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text("abc", max_size=3), inner, max_size=3)
    ),
    max_leaves=10,
)
null_free_objects = st.dictionaries(st.text("abcd", max_size=3), null_free_values, max_size=5)


@given(json_objects)
def test_merge_patch_with_empty_patch_is_identity(x: Obj) -> None:
    assert merge_patch(x, {}) == x


@given(json_objects, null_free_objects)
def test_merge_patch_of_diff_gives_target(x: Obj, y: Obj) -> None:
    assert merge_patch(x, merge_diff(x, y)) == y


# ---------------------------------------------------------------------------------------------------------------
# Strategic merge patch: the 3-way patches kubectl 1.32 sends (captured from `kubectl apply` against a logging
# server, last-applied annotation shortened)

LIVE_POD: Obj = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web",
        "namespace": "default",
        "uid": "u1",
        "resourceVersion": "5",
        "labels": {"app": "web", "tier": "front", "injected": "yes"},
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "<old manifest>"},
        "finalizers": ["example.com/a", "example.com/b", "ctrl.example.com/keep"],
    },
    "spec": {
        "containers": [
            {
                "name": "app",
                "image": "nginx:1.25",
                "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                "imagePullPolicy": "IfNotPresent",
                "resources": {},
            },
            {"name": "sidecar", "image": "busybox:1.36", "command": ["sleep", "3600"], "resources": {}},
            {"name": "injected-proxy", "image": "envoy:1"},
        ],
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "nodeName": "n1",
    },
    "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
}

KUBECTL_POD_PATCH: Obj = {
    "metadata": {
        "$deleteFromPrimitiveList/finalizers": ["example.com/a"],
        "$setElementOrder/finalizers": ["example.com/b", "example.com/c"],
        "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "<new manifest>"},
        "finalizers": ["example.com/c"],
        "labels": {"release": "r2", "tier": None},
    },
    "spec": {
        "$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
        "containers": [
            {
                "$setElementOrder/env": [{"name": "A"}, {"name": "C"}],
                "$setElementOrder/ports": [{"containerPort": 80}, {"containerPort": 443}],
                "env": [{"name": "C", "value": "3"}, {"$patch": "delete", "name": "B"}],
                "image": "nginx:1.27",
                "name": "app",
                "ports": [{"containerPort": 443}],
            }
        ],
        "tolerations": [{"key": "k2", "operator": "Exists"}],
    },
}


def test_kubectl_apply_three_way_patch_on_a_pod() -> None:
    out = pure(strategic_merge_patch, LIVE_POD, KUBECTL_POD_PATCH, "Pod")
    meta = out["metadata"]
    # finalizers: a removed, c added in the applied order, the controller's finalizer kept
    assert meta["finalizers"] == ["example.com/b", "example.com/c", "ctrl.example.com/keep"]
    assert meta["labels"] == {"app": "web", "injected": "yes", "release": "r2"}
    assert meta["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": "<new manifest>"}
    app, sidecar, proxy = out["spec"]["containers"]
    assert app == {
        "name": "app",
        "image": "nginx:1.27",
        "env": [{"name": "A", "value": "1"}, {"name": "C", "value": "3"}],
        "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}],
        "imagePullPolicy": "IfNotPresent",  # server-defaulted fields survive
        "resources": {},
    }
    assert sidecar == LIVE_POD["spec"]["containers"][1]
    assert proxy == {"name": "injected-proxy", "image": "envoy:1"}  # not in the manifest: untouched
    assert out["spec"]["tolerations"] == [{"key": "k2", "operator": "Exists"}]  # atomic list: replaced
    assert out["spec"]["nodeName"] == "n1" and out["status"] == LIVE_POD["status"]
    assert "$setElementOrder/containers" not in json.dumps(out)


LIVE_DEPLOYMENT: Obj = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {
        "name": "d",
        "namespace": "default",
        "annotations": {"deployment.kubernetes.io/revision": "1"},
    },
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "d"}},
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "template": {
            "metadata": {"labels": {"app": "d"}},
            "spec": {
                "containers": [
                    {"name": "a", "image": "a:1", "terminationMessagePolicy": "File"},
                    {"name": "b", "image": "b:1"},
                    {"name": "c", "image": "c:1"},
                ],
                "volumes": [{"name": "v", "emptyDir": {}}],
                "restartPolicy": "Always",
            },
        },
    },
    "status": {"replicas": 2},
}

KUBECTL_DEPLOYMENT_PATCH: Obj = {
    "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": "<new manifest>"}},
    "spec": {
        "replicas": 3,
        "strategy": {"$retainKeys": ["type"], "rollingUpdate": None, "type": "Recreate"},
        "template": {
            "spec": {
                "$setElementOrder/containers": [{"name": "c"}, {"name": "a"}],
                "$setElementOrder/volumes": [{"name": "v"}],
                "containers": [{"image": "a:2", "name": "a"}, {"$patch": "delete", "name": "b"}],
                "volumes": [
                    {
                        "$retainKeys": ["configMap", "name"],
                        "configMap": {"name": "cm"},
                        "emptyDir": None,
                        "name": "v",
                    }
                ],
            }
        },
    },
}


def test_kubectl_apply_three_way_patch_on_a_deployment() -> None:
    out = pure(strategic_merge_patch, LIVE_DEPLOYMENT, KUBECTL_DEPLOYMENT_PATCH, "Deployment")
    spec = out["spec"]
    assert spec["replicas"] == 3
    assert spec["strategy"] == {"type": "Recreate"}  # $retainKeys dropped rollingUpdate
    assert spec["template"]["spec"] == {
        # b deleted, a updated (keeping its defaulted field), order from $setElementOrder
        "containers": [
            {"name": "c", "image": "c:1"},
            {"name": "a", "image": "a:2", "terminationMessagePolicy": "File"},
        ],
        "volumes": [{"name": "v", "configMap": {"name": "cm"}}],  # the volume source switched
        "restartPolicy": "Always",
    }
    assert out["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"


# ---------------------------------------------------------------------------------------------------------------
# Strategic merge patch: one rule at a time

POD: Obj = {
    "metadata": {
        "name": "p",
        "labels": {"a": "1", "b": "2"},
        "finalizers": ["f1", "f2"],
        "ownerReferences": [{"uid": "u1", "name": "rs1", "kind": "ReplicaSet"}],
    },
    "spec": {
        "containers": [
            {
                "name": "c1",
                "image": "i1",
                "ports": [{"containerPort": 80}],
                "volumeMounts": [{"name": "v", "mountPath": "/a"}],
            },
            {"name": "c2", "image": "i2"},
        ],
        "tolerations": [{"key": "t1"}],
        "nodeSelector": {"zone": "z1"},
        "affinity": {"nodeAffinity": {"x": 1}},
    },
}


def with_(base: Obj, path: str, value: Any) -> Obj:
    out = copy.deepcopy(base)
    node = out
    *parents, last = path.split(".")
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    if isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return out


@pytest.mark.parametrize(
    ("name", "patch", "expected"),
    [
        (
            "null deletes a map key",
            {"metadata": {"labels": {"a": None, "c": "3"}}},
            with_(POD, "metadata.labels", {"b": "2", "c": "3"}),
        ),
        ("null for a missing key is ignored", {"metadata": {"labels": {"zz": None}}}, POD),
        (
            "containers merge by name",
            {"spec": {"containers": [{"name": "c2", "image": "i2b"}]}},
            with_(POD, "spec.containers.1", {"name": "c2", "image": "i2b"}),
        ),
        (
            "a new item goes before the live ones (upstream order)",
            {"spec": {"containers": [{"name": "c3", "image": "i3"}]}},
            with_(POD, "spec.containers", [{"name": "c3", "image": "i3"}, *POD["spec"]["containers"]]),
        ),
        (
            "$patch: delete removes a list item",
            {"spec": {"containers": [{"name": "c1", "$patch": "delete"}]}},
            with_(POD, "spec.containers", [POD["spec"]["containers"][1]]),
        ),
        (
            "$patch: replace replaces the list",
            {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "x"}]}},
            with_(POD, "spec.containers", [{"name": "only", "image": "x"}]),
        ),
        (
            "$patch: replace on a map",
            {"spec": {"nodeSelector": {"$patch": "replace", "disk": "ssd"}}},
            with_(POD, "spec.nodeSelector", {"disk": "ssd"}),
        ),
        (
            "$patch: delete on a map leaves it empty, as upstream",
            {"spec": {"affinity": {"$patch": "delete"}}},
            with_(POD, "spec.affinity", {}),
        ),
        (
            "$patch: merge is the explicit default",
            {"metadata": {"labels": {"$patch": "merge", "c": "3"}}},
            with_(POD, "metadata.labels", {"a": "1", "b": "2", "c": "3"}),
        ),
        (
            "ports merge by containerPort",
            {"spec": {"containers": [{"name": "c1", "ports": [{"containerPort": 80, "name": "http"}]}]}},
            with_(POD, "spec.containers.0.ports", [{"containerPort": 80, "name": "http"}]),
        ),
        (
            "volumeMounts merge by mountPath",
            {"spec": {"containers": [{"name": "c1", "volumeMounts": [{"mountPath": "/b", "name": "w"}]}]}},
            with_(
                POD,
                "spec.containers.0.volumeMounts",
                [{"mountPath": "/b", "name": "w"}, {"name": "v", "mountPath": "/a"}],
            ),
        ),
        (
            "tolerations are atomic",
            {"spec": {"tolerations": [{"key": "t2"}]}},
            with_(POD, "spec.tolerations", [{"key": "t2"}]),
        ),
        (
            "finalizers merge as a set",
            {"metadata": {"finalizers": ["f3", "f1"]}},
            with_(POD, "metadata.finalizers", ["f3", "f1", "f2"]),
        ),
        (
            "$deleteFromPrimitiveList",
            {"metadata": {"$deleteFromPrimitiveList/finalizers": ["f1", "nope"]}},
            with_(POD, "metadata.finalizers", ["f2"]),
        ),
        (
            "$setElementOrder alone reorders",
            {"spec": {"$setElementOrder/containers": [{"name": "c2"}, {"name": "c1"}]}},
            with_(POD, "spec.containers", POD["spec"]["containers"][::-1]),
        ),
        (
            "ownerReferences merge by uid",
            {"metadata": {"ownerReferences": [{"uid": "u2", "name": "rs2", "kind": "ReplicaSet"}]}},
            with_(
                POD,
                "metadata.ownerReferences",
                [{"uid": "u2", "name": "rs2", "kind": "ReplicaSet"}, *POD["metadata"]["ownerReferences"]],
            ),
        ),
        (
            "a new key's value is cleaned of nulls and directives",
            {
                "spec": {
                    "dnsConfig": {
                        "options": [{"name": "ndots", "value": None}],
                        "nameservers": None,
                        "x": {"$patch": "delete"},
                    }
                }
            },
            with_(POD, "spec.dnsConfig", {"options": [{"name": "ndots"}]}),
        ),
        (
            "a new merge list drops its delete directives",
            {"spec": {"initContainers": [{"name": "i", "image": "x"}, {"name": "gone", "$patch": "delete"}]}},
            with_(POD, "spec.initContainers", [{"name": "i", "image": "x"}]),
        ),
        ("a type change replaces", {"spec": {"affinity": "weird"}}, with_(POD, "spec.affinity", "weird")),
        (
            "$retainKeys clears what it does not list",
            {"spec": {"affinity": {"$retainKeys": ["podAffinity"], "podAffinity": {"y": 2}}}},
            with_(POD, "spec.affinity", {"podAffinity": {"y": 2}}),
        ),
        (
            "top-level $patch: replace",
            {"$patch": "replace", "metadata": {"name": "q"}},
            {"metadata": {"name": "q"}},
        ),
    ],
)
def test_strategic_merge_patch_rules(name: str, patch: Obj, expected: Obj) -> None:
    assert pure(strategic_merge_patch, POD, patch, "Pod") == expected, name


@pytest.mark.parametrize(
    ("kind", "obj", "patch", "expected"),
    [
        (
            "Service",
            {"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443, "name": "https"}]}},
            {"spec": {"ports": [{"port": 443, "targetPort": 8443}]}},
            {
                "spec": {
                    "ports": [
                        {"port": 80, "name": "http"},
                        {"port": 443, "name": "https", "targetPort": 8443},
                    ]
                }
            },
        ),
        (
            "Node",
            {
                "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}]},
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "False"},
                        {"type": "DiskPressure", "status": "False"},
                    ]
                },
            },
            {
                "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            },
            {
                "spec": {"taints": [{"key": "b", "effect": "NoExecute"}]},
                "status": {
                    "conditions": [
                        {"type": "Ready", "status": "True"},
                        {"type": "DiskPressure", "status": "False"},
                    ]
                },
            },
        ),
        (
            "StatefulSet",
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": "1"}]}]}
                    }
                }
            },
            {
                "spec": {
                    "template": {
                        "spec": {"containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}]}
                    }
                }
            },
            {
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "a",
                                    "env": [{"name": "Y", "value": "2"}, {"name": "X", "value": "1"}],
                                }
                            ]
                        }
                    }
                }
            },
        ),
        (
            "ConfigMap",  # only metadata rules: lists anywhere else are replaced
            {"metadata": {"finalizers": ["a"]}, "data": {"k": "v"}, "x": [{"name": "a"}]},
            {"metadata": {"finalizers": ["b"]}, "data": {"k2": "v2"}, "x": [{"name": "b"}]},
            {"metadata": {"finalizers": ["b", "a"]}, "data": {"k": "v", "k2": "v2"}, "x": [{"name": "b"}]},
        ),
    ],
)
def test_strategic_merge_patch_per_kind(kind: str, obj: Obj, patch: Obj, expected: Obj) -> None:
    assert pure(strategic_merge_patch, obj, patch, kind) == expected


@pytest.mark.parametrize(
    ("patch", "code", "message"),
    [
        (["x"], 400, "a strategic merge patch must be a JSON object, got list"),
        ({"$patch": "delete"}, 400, "$patch: delete cannot delete the whole object"),
        ({"spec": {"$patch": "explode"}}, 400, "unknown patch type: explode in map (at spec)"),
        (
            {"spec": {"containers": [{"$patch": "explode", "name": "c1"}]}},
            400,
            "unknown patch type: explode in list",
        ),
        ({"spec": {"containers": [{"$patch": "delete"}]}}, 400, "does not contain declared merge key: name"),
        ({"spec": {"containers": [{"image": "x"}]}}, 400, "does not contain declared merge key: name"),
        ({"spec": {"containers": ["x"]}}, 400, "list element types are not identical"),
        ({"metadata": {"finalizers": [["x"]]}}, 422, "lists of lists are not supported"),
        (
            {"metadata": {"$deleteFromPrimitiveList/finalizers": "f1"}},
            400,
            "invalid patch format of primitive list",
        ),
        (
            {"spec": {"$setElementOrder/containers": "c1"}},
            400,
            "invalid patch format of setElementOrder list",
        ),
        (
            {"spec": {"$setElementOrder/containers": [{"image": "x"}]}},
            400,
            "invalid patch format of setElementOrder list",
        ),
        (
            {"spec": {"$setElementOrder/containers": [{"name": "c1"}], "containers": [{"name": "c9"}]}},
            400,
            "doesn't match $setElementOrder list",
        ),
        ({"spec": {"affinity": {"$retainKeys": ["a"], "b": 1}}}, 400, "invalid patch format of retainKeys"),
        ({"spec": {"affinity": {"$retainKeys": "a"}}}, 400, "invalid patch format of retainKeys"),
    ],
)
def test_strategic_merge_patch_errors(patch: Any, code: int, message: str) -> None:
    err = api_error(strategic_merge_patch, POD, patch, "Pod")
    assert err.code == code
    assert message in err.message


container_names = st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=6, unique=True)


@given(container_names, st.data())
def test_changing_one_image_keeps_the_other_containers(names: list[str], data: st.DataObject) -> None:
    containers = [{"name": n, "image": f"img-{n}", "args": [n]} for n in names]
    pod = {"metadata": {"name": "p"}, "spec": {"containers": containers, "restartPolicy": "Never"}}
    target = data.draw(st.sampled_from(names))
    out = strategic_merge_patch(pod, {"spec": {"containers": [{"name": target, "image": "new"}]}}, "Pod")
    expected = [{**c, "image": "new"} if c["name"] == target else c for c in containers]
    assert out["spec"]["containers"] == expected
    assert out["spec"]["restartPolicy"] == "Never"


# ---------------------------------------------------------------------------------------------------------------
# Server-side apply

T0, T1, T2, T3 = (
    "2026-01-01T00:00:00Z",
    "2026-01-01T00:01:00Z",
    "2026-01-01T00:02:00Z",
    "2026-01-01T00:03:00Z",
)


def deployment(
    replicas: int | None = 2, image: str = "a:1", extra_containers: bool = True, labels: Obj | None = None
) -> Obj:
    containers = [{"name": "a", "image": image, "ports": [{"containerPort": 80}]}]
    if extra_containers:
        containers.append({"name": "b", "image": "b:1"})
    spec: Obj = {
        "selector": {"matchLabels": {"app": "d"}},
        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": containers}},
    }
    if replicas is not None:
        spec["replicas"] = replicas
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": "d",
            "namespace": "default",
            "labels": labels if labels is not None else {"app": "d"},
        },
        "spec": spec,
    }


def apply(
    live: Obj | None, cfg: Obj, manager: str = "kubectl", force: bool = False, now: str = T1, **kw: Any
) -> Obj:
    kw = {"kind": "Deployment", "api_version": "apps/v1", "builtin": True, **kw}
    return pure(server_side_apply, live, cfg, manager=manager, force=force, now=now, **kw)


def update(old: Obj | None, new: Obj, manager: str, now: str = T2, **kw: Any) -> Obj:
    kw = {"kind": "Deployment", "api_version": "apps/v1", **kw}
    return pure(record_update, old, new, manager=manager, now=now, **kw)


def entries(obj: Obj) -> dict[tuple[str, str], Obj]:
    return {(e["manager"], e["operation"]): e for e in obj["metadata"].get("managedFields", [])}


def without_managed(obj: Obj) -> Obj:
    out = copy.deepcopy(obj)
    out["metadata"].pop("managedFields", None)
    return out


def test_apply_creates_and_records_fields_v1() -> None:
    out = apply(None, deployment())
    assert without_managed(out) == deployment()
    assert out["metadata"]["managedFields"] == [
        {
            "manager": "kubectl",
            "operation": "Apply",
            "apiVersion": "apps/v1",
            "time": T1,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:replicas": {},
                    "f:selector": {},  # LabelSelector is atomic
                    "f:template": {
                        "f:metadata": {"f:labels": {"f:app": {}}},
                        "f:spec": {
                            "f:containers": {
                                'k:{"name":"a"}': {
                                    ".": {},
                                    "f:image": {},
                                    "f:name": {},
                                    "f:ports": {
                                        'k:{"containerPort":80,"protocol":"TCP"}': {
                                            ".": {},
                                            "f:containerPort": {},
                                        }
                                    },
                                },
                                'k:{"name":"b"}': {".": {}, "f:image": {}, "f:name": {}},
                            }
                        },
                    },
                },
            },
        }
    ]


def test_reapplying_the_same_config_changes_nothing() -> None:
    first = apply(None, deployment(), now=T1)
    again = apply(first, deployment(), now=T2)
    assert again == first  # same object, same time


def test_apply_updates_values_and_the_time() -> None:
    first = apply(None, deployment(), now=T1)
    second = apply(first, deployment(image="a:2"), now=T2)
    assert second["spec"]["template"]["spec"]["containers"][0]["image"] == "a:2"
    assert entries(second)[("kubectl", "Apply")]["time"] == T2


def test_apply_removes_fields_it_no_longer_applies() -> None:
    first = apply(None, deployment(labels={"app": "d", "old": "x"}))
    second = apply(first, deployment(extra_containers=False))
    assert second["metadata"]["labels"] == {"app": "d"}
    assert [c["name"] for c in second["spec"]["template"]["spec"]["containers"]] == ["a"]
    fields = entries(second)[("kubectl", "Apply")]["fieldsV1"]
    assert 'k:{"name":"b"}' not in fields["f:spec"]["f:template"]["f:spec"]["f:containers"]
    # dropping every label removes the emptied map too
    third = apply(second, deployment(extra_containers=False, labels={}))
    assert "labels" not in third["metadata"] or third["metadata"]["labels"] == {}


def test_apply_keeps_omitted_fields_another_manager_owns() -> None:
    first = apply(None, deployment(replicas=2))
    scaled = copy.deepcopy(first)
    scaled["spec"]["replicas"] = 5
    second = update(first, scaled, "hpa")
    assert entries(second)[("hpa", "Update")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" not in entries(second)[("kubectl", "Apply")]["fieldsV1"]["f:spec"]
    third = apply(second, deployment(replicas=None), now=T3)
    assert third["spec"]["replicas"] == 5  # hpa still owns it


def test_apply_conflict_lists_the_owner_and_force_takes_ownership() -> None:
    first = apply(None, deployment(replicas=2))
    scaled = copy.deepcopy(first)
    scaled["spec"]["replicas"] = 5
    second = update(first, scaled, "hpa")

    err = api_error(
        server_side_apply,
        second,
        deployment(replicas=3),
        manager="kubectl",
        force=False,
        kind="Deployment",
        api_version="apps/v1",
        now=T3,
        builtin=True,
    )
    assert err.status() == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'Apply failed with 1 conflict: conflict with "hpa" using apps/v1: .spec.replicas',
        "reason": "Conflict",
        "details": {
            "causes": [
                {
                    "reason": "FieldManagerConflict",
                    "message": 'conflict with "hpa" using apps/v1',
                    "field": ".spec.replicas",
                }
            ]
        },
        "code": 409,
    }

    # Same value: no conflict, shared ownership.
    shared = apply(second, deployment(replicas=5), now=T3)
    assert shared["spec"]["replicas"] == 5
    assert "f:replicas" in entries(shared)[("hpa", "Update")]["fieldsV1"]["f:spec"]
    assert "f:replicas" in entries(shared)[("kubectl", "Apply")]["fieldsV1"]["f:spec"]

    forced = apply(second, deployment(replicas=3), force=True, now=T3)
    assert forced["spec"]["replicas"] == 3
    assert ("hpa", "Update") not in entries(forced)  # its only field moved: the entry goes away
    assert "f:replicas" in entries(forced)[("kubectl", "Apply")]["fieldsV1"]["f:spec"]


def test_apply_conflicts_with_several_fields_and_managers() -> None:
    first = apply(None, deployment(), manager="alice")
    changed = apply(first, deployment(replicas=4, image="a:9"), manager="bob", force=True, now=T2)
    err = api_error(
        server_side_apply,
        changed,
        deployment(replicas=1, image="a:1"),
        manager="carol",
        force=False,
        kind="Deployment",
        api_version="apps/v1",
        now=T3,
        builtin=True,
    )
    assert err.message == (
        'Apply failed with 2 conflicts: conflicts with "bob":\n'
        "- .spec.replicas\n"
        '- .spec.template.spec.containers[name="a"].image'
    )
    assert [c["field"] for c in err.details["causes"]] == [  # type: ignore[index]
        ".spec.replicas",
        '.spec.template.spec.containers[name="a"].image',
    ]


def test_apply_to_a_custom_resource_treats_lists_as_atomic() -> None:
    cr = {
        "apiVersion": "x.io/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "finalizers": ["x.io/f"]},
        "spec": {"items": [{"name": "a"}]},
    }
    out = apply(None, cr, kind="Widget", api_version="x.io/v1", builtin=False)
    fields = out["metadata"]["managedFields"][0]["fieldsV1"]
    assert fields == {"f:metadata": {"f:finalizers": {'v:"x.io/f"': {}}}, "f:spec": {"f:items": {}}}
    changed = copy.deepcopy(out)
    changed["spec"]["items"].append({"name": "b"})
    other = update(out, changed, "controller", kind="Widget", api_version="x.io/v1", builtin=False)
    assert entries(other)[("controller", "Update")]["fieldsV1"] == {"f:spec": {"f:items": {}}}
    err = api_error(
        server_side_apply,
        other,
        cr,
        manager="kubectl",
        force=False,
        kind="Widget",
        api_version="x.io/v1",
        now=T3,
        builtin=False,
    )
    assert (
        err.message == 'Apply failed with 1 conflict: conflict with "controller" using x.io/v1: .spec.items'
    )


def test_apply_keeps_server_metadata_and_rejects_managed_fields() -> None:
    live = apply(None, deployment())
    live["metadata"].update({"uid": "u1", "resourceVersion": "9", "creationTimestamp": T0, "generation": 3})
    cfg = deployment()
    cfg["metadata"].update({"creationTimestamp": None, "uid": "other", "generation": 1})
    out = apply(live, cfg)
    assert {k: out["metadata"][k] for k in ("uid", "resourceVersion", "creationTimestamp", "generation")} == {
        "uid": "u1",
        "resourceVersion": "9",
        "creationTimestamp": T0,
        "generation": 3,
    }
    bad = deployment()
    bad["metadata"]["managedFields"] = [{"manager": "x"}]
    assert api_error(apply, live, bad).message == "metadata.managedFields must be nil"
    assert api_error(apply, live, deployment(), manager="").code == 400
    assert api_error(apply, live, ["not", "an", "object"]).code == 400


def test_apply_rejects_duplicate_list_map_keys() -> None:
    cfg = deployment()
    cfg["spec"]["template"]["spec"]["containers"].append({"name": "a", "image": "dup"})
    err = api_error(apply, None, cfg)
    assert err.code == 422 and 'duplicate entries for key [name="a"]' in err.message


def test_apply_merges_list_items_keeping_live_only_ones() -> None:
    first = apply(None, deployment())
    injected = copy.deepcopy(first)
    injected["spec"]["template"]["spec"]["containers"].insert(1, {"name": "proxy", "image": "envoy"})
    second = update(first, injected, "injector")
    third = apply(second, deployment(image="a:2"), now=T3)
    names = [(c["name"], c["image"]) for c in third["spec"]["template"]["spec"]["containers"]]
    assert names == [("a", "a:2"), ("proxy", "envoy"), ("b", "b:1")]


def test_two_appliers_share_a_field_until_both_drop_it() -> None:
    first = apply(None, deployment(labels={"app": "d", "team": "x"}), manager="alice")
    both = apply(
        first,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "labels": {"team": "x"}}},
        manager="bob",
    )
    alice_drops = apply(both, deployment(labels={"app": "d"}), manager="alice", now=T2)
    assert alice_drops["metadata"]["labels"] == {"app": "d", "team": "x"}  # bob still applies it
    bob_drops = apply(
        alice_drops,
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}},
        manager="bob",
        now=T3,
    )
    assert bob_drops["metadata"]["labels"] == {"app": "d"}  # its last owner let go
    assert ("bob", "Apply") not in entries(bob_drops)  # nothing left to own


# ---------------------------------------------------------------------------------------------------------------
# managedFields for non-apply writes


def test_record_update_on_create_owns_everything_like_kube_apiserver() -> None:
    obj = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "uid": "u", "labels": {"run": "p"}},
        "spec": {"containers": [{"name": "c", "image": "i", "resources": {}}], "securityContext": {}},
    }
    out = update(None, obj, "kubectl-run", kind="Pod", api_version="v1")
    assert out["metadata"]["managedFields"] == [
        {
            "manager": "kubectl-run",
            "operation": "Update",
            "apiVersion": "v1",
            "time": T2,
            "fieldsType": "FieldsV1",
            "fieldsV1": {
                "f:metadata": {"f:labels": {".": {}, "f:run": {}}},
                "f:spec": {
                    "f:containers": {
                        'k:{"name":"c"}': {".": {}, "f:image": {}, "f:name": {}, "f:resources": {}}
                    },
                    "f:securityContext": {},
                },
            },
        }
    ]


def test_record_update_moves_changed_fields_and_skips_no_ops() -> None:
    created = update(None, deployment(), "creator", now=T1)
    same = copy.deepcopy(created)
    same["metadata"]["resourceVersion"] = "2"  # server-owned: not a change
    assert (
        update(created, same, "someone", now=T2)["metadata"]["managedFields"]
        == created["metadata"]["managedFields"]
    )

    edited = copy.deepcopy(created)
    edited["spec"]["template"]["spec"]["containers"][1]["image"] = "b:2"
    del edited["metadata"]["labels"]
    out = update(created, edited, "editor", now=T3)
    by = entries(out)
    assert by[("editor", "Update")]["fieldsV1"] == {
        "f:spec": {"f:template": {"f:spec": {"f:containers": {'k:{"name":"b"}': {"f:image": {}}}}}}
    }
    creator = by[("creator", "Update")]["fieldsV1"]
    assert "f:metadata" not in creator  # the labels it set were removed
    assert creator["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"b"}'] == {
        ".": {},
        "f:name": {},
    }
    assert [e["manager"] for e in out["metadata"]["managedFields"]] == ["creator", "editor"]  # sorted by time


def test_record_update_honours_client_sent_managed_fields() -> None:
    created = update(None, deployment(), "creator", now=T1)
    reset = copy.deepcopy(created)
    reset["metadata"]["managedFields"] = [{}]
    out = update(created, reset, "someone", now=T2)
    assert "managedFields" not in out["metadata"]
    # An empty list is "not sent": the live entries stay.
    kept = copy.deepcopy(created)
    kept["metadata"]["managedFields"] = []
    assert (
        update(created, kept, "someone")["metadata"]["managedFields"] == created["metadata"]["managedFields"]
    )


def test_record_update_for_a_subresource() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
    }
    created = update(None, pod, "kubectl", kind="Pod", api_version="v1", now=T1)
    running = copy.deepcopy(created)
    running["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    out = update(created, running, "kubelet", kind="Pod", api_version="v1", subresource="status", now=T2)
    entry = entries(out)[("kubelet", "Update")]
    assert entry["subresource"] == "status"
    assert entry["fieldsV1"] == {
        "f:status": {
            "f:conditions": {'k:{"type":"Ready"}': {".": {}, "f:status": {}, "f:type": {}}},
            "f:phase": {},
        }
    }


@settings(max_examples=50, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "c", "d"]), unique=True, max_size=4), st.integers(0, 9))
def test_apply_then_update_then_apply_round_trip(labels: list[str], replicas: int) -> None:
    cfg = deployment(replicas=replicas, labels={k: "1" for k in labels})
    first = apply(None, cfg)
    assert without_managed(first) == cfg
    assert apply(first, cfg) == first
