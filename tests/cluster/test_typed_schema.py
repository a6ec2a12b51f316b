"""The schema layer on its own: typed decoding against the published definitions, bounded body parsing, and the
patch metadata read from the same definitions."""

from __future__ import annotations

import copy
import json
from typing import Any

import orjson
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster import schema, smp_schema
from kubesched.cluster.schema import bodies

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "p", "labels": {"a": "b"}},
    "spec": {
        "containers": [
            {
                "name": "c",
                "image": "i",
                "args": ["x"],
                "ports": [{"containerPort": 80}],
                "resources": {"requests": {"cpu": "100m", "memory": 1024}},
            }
        ],
        "tolerations": [{"key": "k", "operator": "Exists", "tolerationSeconds": 5}],
        "affinity": {"nodeAffinity": {}},
        "priority": 5,
    },
}


def check(
    obj: Any, mode: str = schema.STRICT, kind: str = "Pod", group: str = "", version: str = "v1"
) -> schema.Checked:
    return schema.check_object(group, version, kind, obj, mode)


def test_a_valid_pod_passes_unchanged() -> None:
    pod = copy.deepcopy(POD)
    assert check(pod) == schema.Checked()
    assert pod == POD


@pytest.mark.parametrize(
    ("path", "value", "message"),
    [
        (("spec", "priority"), 2**31, "cannot unmarshal number 2147483648 into Go struct field PodSpec.spec.priority of type int32"),
        (("spec", "priority"), 1.5, "cannot unmarshal number 1.5 into Go struct field PodSpec.spec.priority of type int32"),
        (("spec", "priority"), True, "cannot unmarshal bool into Go struct field PodSpec.spec.priority of type int32"),
        (("spec", "containers"), {"a": 1}, "cannot unmarshal object into Go struct field PodSpec.spec.containers of type []v1.Container"),
        (("spec", "containers"), ["x"], "cannot unmarshal string into Go struct field PodSpec.spec.containers of type v1.Container"),
        (("spec", "tolerations", 0, "tolerationSeconds"), "5", "Go struct field Toleration.spec.tolerations.tolerationSeconds of type int64"),
        (("spec", "containers", 0, "args", 0), 1, "cannot unmarshal number into Go struct field Container.spec.containers.args of type string"),
        (("spec", "containers", 0, "resources", "requests", "cpu"), True, "of type resource.Quantity"),
        (("metadata", "labels", "a"), 1, "Go struct field ObjectMeta.metadata.labels of type string"),
        (("spec", "affinity"), "x", "Go struct field PodSpec.spec.affinity of type v1.Affinity"),
    ],
)  # fmt: skip
def test_decoding_errors_name_the_go_field(path: tuple[Any, ...], value: Any, message: str) -> None:
    pod = copy.deepcopy(POD)
    target: Any = pod
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    with pytest.raises(schema.DecodeError) as err:
        check(pod)
    assert str(err.value) == "json: " + message if message.startswith("cannot") else message in str(err.value)


def test_nulls_decode_to_zero_values() -> None:
    pod = copy.deepcopy(POD)
    pod["spec"]["priority"] = None
    pod["spec"]["containers"][0]["args"] = [None]
    pod["metadata"]["labels"] = None
    assert check(pod) == schema.Checked()


def test_unknown_fields_by_mode() -> None:
    def odd() -> dict[str, Any]:
        pod = copy.deepcopy(POD)
        pod["spec"]["bogus"] = 1
        pod["spec"]["containers"][0]["nope"] = {"x": 1}
        return pod

    with pytest.raises(schema.DecodeError) as err:
        check(odd(), schema.STRICT)
    # In document order, as the decoder meets them.
    assert str(err.value) == (
        'strict decoding error: unknown field "spec.containers[0].nope", unknown field "spec.bogus"'
    )
    pod = odd()
    assert check(pod, schema.WARN).warnings == [
        'unknown field "spec.containers[0].nope"',
        'unknown field "spec.bogus"',
    ]
    assert pod == POD
    pod = odd()
    assert check(pod, schema.IGNORE) == schema.Checked()
    assert pod == POD


def test_required_fields_outside_status() -> None:
    found = check({"spec": {"containers": [{"image": "i"}]}, "status": {"conditions": [{}]}})
    assert found.missing == ["spec.containers[0].name"]  # PodCondition's type/status are status: not reported
    assert check({"spec": {}}).missing == ["spec.containers"]


def test_custom_resource_metadata_is_typed() -> None:
    with pytest.raises(schema.DecodeError) as err:
        schema.check_metadata({"name": "x", "finalizers": "f"}, schema.STRICT)
    assert "Go struct field ObjectMeta.metadata.finalizers of type []string" in str(err.value)
    assert schema.check_metadata({"name": "x", "extra": 1}, schema.WARN).warnings == [
        'unknown field "metadata.extra"'
    ]


def test_kinds_without_a_published_schema_pass() -> None:
    assert schema.check_object("example.com", "v1", "Thing", {"spec": 5}, schema.STRICT) == schema.Checked()


# -- typed values from the schema itself --------------------------------------------------------------------------

LEAVES: dict[str, st.SearchStrategy[Any]] = {
    "string": st.text(max_size=5),
    "integer": st.integers(-(2**31), 2**31 - 1),
    "number": st.floats(allow_nan=False, allow_infinity=False),
    "boolean": st.booleans(),
}


def _typed(node: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        if name.endswith(("Quantity", "IntOrString")):
            return st.sampled_from(["1", "50%"]) | st.integers(0, 9)
        return _typed(schema.definitions()[name], depth)
    kinds = node.get("type")
    kind = next((k for k in kinds if k != "null"), None) if isinstance(kinds, list) else kinds
    if kind in LEAVES:
        return LEAVES[kind]
    if depth > 4:
        return st.none()
    if kind == "array":
        return st.lists(_typed(node.get("items") or {}, depth + 1), max_size=2)
    if kind == "object" and "properties" in node:
        props = {
            k: _typed(v, depth + 1) for k, v in node["properties"].items() if k not in ("apiVersion", "kind")
        }
        return st.fixed_dictionaries({}, optional=props)
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return st.dictionaries(
            st.text(max_size=4), _typed(node["additionalProperties"], depth + 1), max_size=2
        )
    return st.none()


KINDS = [("", "v1", "Pod"), ("apps", "v1", "Deployment"), ("", "v1", "Service"), ("", "v1", "Node")]


@settings(max_examples=60, deadline=None)
@given(data=st.data(), gvk=st.sampled_from(KINDS))
def test_objects_typed_by_the_schema_decode(data: st.DataObject, gvk: tuple[str, str, str]) -> None:
    definition = schema.definition_for(*gvk)
    assert definition is not None
    obj = data.draw(_typed(schema.definitions()[definition]))
    before = copy.deepcopy(obj)
    found = schema.check_object(*gvk, obj, schema.STRICT)
    assert found.warnings == [] and obj == before


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_a_string_in_place_of_a_struct_or_list_is_always_refused(data: st.DataObject) -> None:
    definition = schema.definition_for("", "v1", "Pod")
    assert definition is not None
    obj = data.draw(_typed(schema.definitions()[definition]))
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    typed = [k for k in ("containers", "tolerations", "affinity", "securityContext", "volumes")]
    field = data.draw(st.sampled_from(typed))
    spec[field] = data.draw(st.text(max_size=3))
    with pytest.raises(schema.DecodeError) as err:
        schema.check_object("", "v1", "Pod", obj, schema.IGNORE)
    assert f"PodSpec.spec.{field} of type" in str(err.value)


# -- bodies ---------------------------------------------------------------------------------------------------------

# YAML admits no control characters (nor lone surrogates) in a document, JSON admits them escaped.
_printable = st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=8)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60) | _printable,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_printable, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=json_values)
def test_yaml_and_json_bodies_decode_to_the_same_values(value: Any) -> None:
    assert bodies.parse_json(orjson.dumps(value)) == value
    # (YAML has no surrogate-pair escapes: JSON text meant for the YAML parser keeps its characters.)
    assert bodies.parse_yaml(json.dumps(value, ensure_ascii=False).encode()) == value
    assert bodies.parse_yaml(yaml.safe_dump(value).encode()) == value


def test_yaml_scalars_stay_json() -> None:
    doc = b"t: 2024-01-02T03:04:05Z\nd: 2024-01-02\n1: one\nnull: x\n"
    assert bodies.parse_yaml(doc) == {"t": "2024-01-02T03:04:05Z", "d": "2024-01-02", "1": "one", "null": "x"}
    with pytest.raises(bodies.BodyError):
        bodies.parse_yaml(b"b: !!binary aGk=")


def test_depth_is_bounded() -> None:
    deep = b"[" * (bodies.MAX_DEPTH + 1) + b"]" * (bodies.MAX_DEPTH + 1)
    with pytest.raises(bodies.BodyError, match="max depth"):
        bodies.parse_json(deep)
    ok = b"[" * (bodies.MAX_DEPTH - 1) + b"]" * (bodies.MAX_DEPTH - 1)
    assert bodies.parse_json(ok)


def test_large_documents_without_aliases_are_not_aliasing() -> None:
    flat = b"".join(f"k{i}: v\n".encode() for i in range(50_000))
    assert len(bodies.parse_yaml(flat)) == 50_000
    nested = b"a:\n" + b"".join(f"  - [{i}, {i}, {i}]\n".encode() for i in range(20_000))
    assert len(bodies.parse_yaml(nested)["a"]) == 20_000


def test_aliases_may_share_but_not_explode() -> None:
    shared = b"a: &x {k: v}\nb: *x\nc: *x\n"
    assert bodies.parse_yaml(shared) == {"a": {"k": "v"}, "b": {"k": "v"}, "c": {"k": "v"}}
    bomb = b"x0: &a0 [a, a, a, a, a, a, a, a, a, a]\n" + b"".join(
        f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n".encode() for i in range(1, 7)
    )
    with pytest.raises(bodies.BodyError, match="excessive aliasing"):
        bodies.parse_yaml(bomb)
    with pytest.raises(bodies.BodyError, match="refers to itself"):
        bodies.parse_yaml(b"a: &x [*x]\n")


# -- patch metadata -----------------------------------------------------------------------------------------------


def test_patch_metadata_comes_from_the_definitions() -> None:
    pod = smp_schema.schema_for("Pod", api_version="v1")
    containers = pod["spec"].of["containers"]  # type: ignore[index]
    assert containers.merge_key == "name" and containers.list_keys == ("name",)
    ports = containers.of["ports"]  # type: ignore[index]
    assert ports.merge_key == "containerPort" and ports.list_keys == ("containerPort", "protocol")
    assert pod["spec"].of["nodeSelector"].atomic  # type: ignore[index]
    meta = pod["metadata"].of
    assert meta is not None
    assert meta["finalizers"].merge_set and meta["finalizers"].list_set
    assert meta["ownerReferences"].merge_key == "uid" and meta["ownerReferences"].item_atomic
    pdb = smp_schema.schema_for("PodDisruptionBudget", api_version="policy/v1")
    selector = pdb["spec"].of["selector"]  # type: ignore[index]
    assert selector.replace and selector.atomic
    assert smp_schema.schema_for("Event", api_version="events.k8s.io/v1")["regarding"].atomic
    assert smp_schema.schema_for("Event", api_version="v1")["involvedObject"].atomic
    assert set(smp_schema.schema_for("Widget", builtin=False)) == {"metadata"}
