"""Validation: upstream messages for names, metadata and per-kind rules; Kubernetes quantities (apimachinery)."""

from __future__ import annotations

import math
import re
from decimal import Decimal
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.apimachinery.quantity import (
    QUANTITY_FORMAT_ERROR,
    QUANTITY_SUFFIX_ERROR,
    QuantityError,
    canonical_quantity,
    parse_quantity,
    quantity_format,
    quantity_to_int,
    quantity_to_milli,
)
from kubesched.cluster import errors
from kubesched.cluster.kinds import strategy_for
from kubesched.cluster.resources import ResourceRegistry, ResourceType
from kubesched.cluster.validation import decode_error

REG = ResourceRegistry()
POD = REG.get("", "v1", "pods")
NODE = REG.get("", "v1", "nodes")
NS = REG.get("", "v1", "namespaces")
SVC = REG.get("", "v1", "services")
CM = REG.get("", "v1", "configmaps")
LEASE = REG.get("coordination.k8s.io", "v1", "leases")
EVENT = REG.get("", "v1", "events")
EVENT_V1 = REG.get("events.k8s.io", "v1", "events")
CRD = REG.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")
DEPLOY = REG.get("apps", "v1", "deployments")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)


def validate_create(rtype: ResourceType, obj: dict[str, Any]) -> list[dict[str, str]]:
    """What the server checks for a new object: its kind's strategy."""
    return strategy_for(rtype).validate_create(rtype, obj)


def validate_update(rtype: ResourceType, new: dict[str, Any], old: dict[str, Any]) -> list[dict[str, str]]:
    return strategy_for(rtype).validate_update(rtype, new, old)


def message(rtype: ResourceType, name: str, causes: list[dict[str, str]]) -> str:
    return errors.invalid(rtype.kind, name, causes, rtype.group).message


def pod(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"containers": [{"name": "c", "image": "busybox"}]}
    base.update(spec)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": base,
    }


# -- names and metadata ----------------------------------------------------------------------------------------


def test_bad_name_matches_the_observed_1_36_message() -> None:
    causes = validate_create(CM, {"metadata": {"name": "Bad_Name", "namespace": "default"}})
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "message": f'Invalid value: "Bad_Name": {SUBDOMAIN_MSG}',
            "field": "metadata.name",
        }
    ]
    assert (
        message(CM, "Bad_Name", causes)
        == f'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN_MSG}'
    )


@pytest.mark.parametrize("rtype", [NS, SVC])
def test_namespaces_and_services_are_rfc1123_labels(rtype: ResourceType) -> None:
    meta = {"name": "Web"} if rtype is NS else {"name": "Web", "namespace": "default"}
    assert validate_create(rtype, {"metadata": meta})[0]["message"] == f'Invalid value: "Web": {LABEL_MSG}'
    dotted = {**meta, "name": "a.b"}
    assert (
        validate_create(rtype, {"metadata": dotted})[0]["message"]
        == 'Invalid value: "a.b": must not contain dots'
    )
    assert validate_create(rtype, {"metadata": {**meta, "name": "123-abc"}}) == []


def test_name_lengths() -> None:
    long_label = "a" * 64
    causes = validate_create(NS, {"metadata": {"name": long_label}})
    assert [c["message"] for c in causes] == [
        f'Invalid value: "{long_label}": must be no more than 63 characters'
    ]
    long_sub = "a" * 254
    causes = validate_create(CM, {"metadata": {"name": long_sub, "namespace": "default"}})
    assert causes[0]["message"].endswith("must be no more than 253 characters")
    assert validate_create(CM, {"metadata": {"name": "a" * 253, "namespace": "default"}}) == []


def test_node_names_are_subdomains_so_nodeA_is_rejected() -> None:
    causes = validate_create(NODE, {"metadata": {"name": "nodeA"}})
    assert causes[0]["field"] == "metadata.name" and SUBDOMAIN_MSG in causes[0]["message"]
    assert validate_create(NODE, {"metadata": {"name": "node-a.example.com"}}) == []


def test_name_or_generate_name_required() -> None:
    causes = validate_create(CM, {"metadata": {"namespace": "default"}})
    assert (
        message(CM, "", causes)
        == 'ConfigMap "" is invalid: metadata.name: Required value: name or generateName is required'
    )
    assert validate_create(CM, {"metadata": {"generateName": "web-", "namespace": "default"}}) == []
    bad = validate_create(CM, {"metadata": {"generateName": "Web-", "namespace": "default"}})
    assert bad[0]["field"] == "metadata.generateName"


def test_namespace_rules_follow_scope() -> None:
    assert validate_create(CM, {"metadata": {"name": "x"}}) == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.namespace"}
    ]
    assert validate_create(NODE, {"metadata": {"name": "x", "namespace": "default"}}) == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: not allowed on this type",
            "field": "metadata.namespace",
        }
    ]


def test_label_and_annotation_syntax() -> None:
    meta = {"name": "x", "namespace": "default", "labels": {"bad key!": "ok", "app": "-bad"}}
    causes = validate_create(CM, {"metadata": meta})
    assert [c["field"] for c in causes] == ["metadata.labels", "metadata.labels"]
    assert causes[0]["message"].startswith(
        'Invalid value: "-bad": a valid label must be an empty string or consist of'
    )
    assert causes[1]["message"].startswith(
        'Invalid value: "bad key!": name part must consist of alphanumeric'
    )
    ok = {"name": "x", "namespace": "default", "labels": {"example.com/App": "v1.2_x", "e": ""}}
    assert validate_create(CM, {"metadata": ok}) == []
    # Annotation keys ignore case; values are free text but the total size is capped.
    upper = {"name": "x", "namespace": "default", "annotations": {"Example.COM/Key": "anything at all: {}"}}
    assert validate_create(CM, {"metadata": upper}) == []
    big = {"name": "x", "namespace": "default", "annotations": {"k": "v" * (256 * 1024)}}
    assert validate_create(CM, {"metadata": big}) == [
        {
            "reason": "FieldValueTooLong",
            "message": "Too long: must have at most 262144 bytes",
            "field": "metadata.annotations",
        }
    ]
    prefix = {"name": "x", "namespace": "default", "labels": {"/a": "b"}}
    assert (
        validate_create(CM, {"metadata": prefix})[0]["message"]
        == 'Invalid value: "/a": prefix part must be non-empty'
    )


def test_path_segment_rule_applies_even_to_lax_kinds() -> None:
    event = {"metadata": {"name": "a/b", "namespace": "default"}, "involvedObject": {"namespace": "default"}}
    assert validate_create(EVENT, event) == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: \"a/b\": may not contain '/'",
            "field": "metadata.name",
        }
    ]


def test_metadata_update_immutability() -> None:
    old = {
        "metadata": {
            "name": "x",
            "namespace": "default",
            "uid": "u1",
            "creationTimestamp": "2024-01-01T00:00:00Z",
        }
    }
    moved = {"metadata": {**old["metadata"], "namespace": "other"}}
    assert validate_update(CM, moved, old) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "other": field is immutable',
            "field": "metadata.namespace",
        }
    ]
    new_uid = {"metadata": {**old["metadata"], "uid": "u2"}}
    assert message(CM, "x", validate_update(CM, new_uid, old)) == (
        'ConfigMap "x" is invalid: metadata.uid: Invalid value: "u2": field is immutable'
    )
    # Upstream copies these from the stored object before validating rather than refusing the update.
    no_uid = {"metadata": {k: v for k, v in old["metadata"].items() if k != "uid"}}
    assert validate_update(CM, no_uid, old) == []


def test_no_new_finalizers_while_deleting() -> None:
    old = {
        "metadata": {
            "name": "x",
            "namespace": "default",
            "deletionTimestamp": "2024-01-01T00:00:00Z",
            "finalizers": ["a/b"],
        }
    }
    new = {"metadata": {**old["metadata"], "finalizers": ["a/b", "c/d"]}}
    assert validate_update(CM, new, old) == [
        {
            "reason": "FieldValueForbidden",
            "message": 'Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"c/d"}',
            "field": "metadata.finalizers",
        }
    ]
    fewer = {"metadata": {**old["metadata"], "finalizers": []}}
    assert validate_update(CM, fewer, old) == []


# -- pods ------------------------------------------------------------------------------------------------------


def test_pod_requires_containers() -> None:
    causes = validate_create(POD, {"metadata": {"name": "p1", "namespace": "default"}, "spec": {}})
    assert message(POD, "p1", causes) == 'Pod "p1" is invalid: spec.containers: Required value'


def test_container_name_image_and_uniqueness() -> None:
    causes = validate_create(
        POD, pod(containers=[{"name": "A", "image": "x"}, {"name": "b"}, {"name": "b", "image": "y"}])
    )
    assert [(c["field"], c["message"][:22]) for c in causes] == [
        ("spec.containers[0].name", 'Invalid value: "A": a '),
        ("spec.containers[1].image", "Required value"),
        ("spec.containers[2].name", 'Duplicate value: "b"'),
    ]
    init_clash = validate_create(POD, pod(initContainers=[{"name": "c", "image": "x"}]))
    assert init_clash == [
        {
            "reason": "FieldValueDuplicate",
            "message": 'Duplicate value: "c"',
            "field": "spec.initContainers[0].name",
        }
    ]


def test_extended_resources_need_equal_limits() -> None:
    def with_resources(resources: dict[str, Any]) -> dict[str, Any]:
        return pod(containers=[{"name": "c", "image": "x", "resources": resources}])

    missing = validate_create(POD, with_resources({"requests": {"example.com/gpu": "1"}}))
    # observed on 1.36
    assert message(POD, "p", missing) == (
        'Pod "p" is invalid: spec.containers[0].resources.limits: Required value: '
        "Limit must be set for non overcommitable resources"
    )
    unequal = validate_create(
        POD, with_resources({"requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}})
    )
    assert unequal == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "1": must be equal to example.com/gpu limit of 2',
            "field": "spec.containers[0].resources.requests",
        }
    ]
    fractional = validate_create(POD, with_resources({"limits": {"example.com/gpu": "500m"}}))
    assert fractional == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 500m: must be an integer",
            "field": "spec.containers[0].resources.limits[example.com/gpu]",
        }
    ]
    assert (
        validate_create(
            POD, with_resources({"requests": {"example.com/gpu": "2"}, "limits": {"example.com/gpu": "2"}})
        )
        == []
    )


def test_cpu_memory_requests_and_limits() -> None:
    res = {"requests": {"cpu": "1500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "2Gi"}}
    causes = validate_create(POD, pod(containers=[{"name": "c", "image": "x", "resources": res}]))
    assert causes == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "1500m": must be less than or equal to cpu limit of 1',
            "field": "spec.containers[0].resources.requests",
        }
    ]
    negative = {"requests": {"cpu": "-1"}}
    causes = validate_create(POD, pod(containers=[{"name": "c", "image": "x", "resources": negative}]))
    assert causes[0]["message"] == 'Invalid value: "-1": must be greater than or equal to 0'
    odd = {"requests": {"gpu": "1"}}
    causes = validate_create(POD, pod(containers=[{"name": "c", "image": "x", "resources": odd}]))
    assert causes[0]["message"] == 'Invalid value: "gpu": must be a standard resource for containers'
    ok = {
        "requests": {"cpu": "100m", "memory": "64Mi", "ephemeral-storage": "1Gi"},
        "limits": {"memory": "64Mi"},
    }
    assert validate_create(POD, pod(containers=[{"name": "c", "image": "x", "resources": ok}])) == []


def test_pod_spec_enums_tolerations_and_spread() -> None:
    assert validate_create(POD, pod(restartPolicy="Sometimes")) == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"',
            "field": "spec.restartPolicy",
        }
    ]
    tolerations = [
        {"operator": "Equal", "value": "x"},
        {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5},
        {"key": "k", "effect": "Sometimes"},
    ]
    causes = validate_create(POD, pod(tolerations=tolerations))
    assert [(c["field"], c["message"]) for c in causes] == [
        (
            "spec.tolerations[0].operator",
            'Invalid value: "Equal": operator must be Exists when `key` is empty, which means "match all values and all keys"',
        ),
        (
            "spec.tolerations[1].effect",
            "Invalid value: \"NoSchedule\": effect must be 'NoExecute' when `tolerationSeconds` is set",
        ),
        (
            "spec.tolerations[2].effect",
            'Unsupported value: "Sometimes": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"',
        ),
    ]
    spread = [{"maxSkew": 0, "topologyKey": "", "whenUnsatisfiable": "Never"}]
    causes = validate_create(POD, pod(topologySpreadConstraints=spread))
    assert [c["message"] for c in causes] == [
        "Invalid value: 0: must be greater than zero",
        "Required value: can not be empty",
        'Unsupported value: "Never": supported values: "DoNotSchedule", "ScheduleAnyway"',
    ]


def test_scheduling_gates_and_node_name_on_create() -> None:
    gated = pod(nodeName="n1", schedulingGates=[{"name": "example.com/a"}, {"name": "example.com/a"}])
    assert [(c["field"], c["message"]) for c in validate_create(POD, gated)] == [
        ("spec.schedulingGates[1]", 'Duplicate value: "example.com/a"'),
        ("spec.nodeName", "Forbidden: cannot be set until all schedulingGates have been cleared"),
    ]
    assert validate_create(POD, pod(nodeName="Node_1"))[0]["field"] == "spec.nodeName"


def test_pod_update_allows_images_tolerations_additions_and_gate_removal() -> None:
    old = pod(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}],
              schedulingGates=[{"name": "a"}, {"name": "b"}], activeDeadlineSeconds=100)  # fmt: skip
    new = pod(
        containers=[{"name": "c", "image": "busybox:2"}],
        tolerations=[
            {"key": "k", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10},
            {"key": "other", "operator": "Exists"},
        ],
        schedulingGates=[{"name": "b"}],
        activeDeadlineSeconds=50,
    )
    assert validate_update(POD, new, old) == []


def test_pod_update_refuses_other_spec_changes() -> None:
    causes = validate_update(POD, pod(nodeName="n2"), pod(nodeName="n1"))
    assert len(causes) == 1 and causes[0]["field"] == "spec" and causes[0]["reason"] == "FieldValueForbidden"
    assert causes[0]["message"].startswith(
        "Forbidden: pod updates may not change fields other than `spec.containers[*].image`,"
        "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing "
        "tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)\n"
    )
    assert '- \tNodeName: "n1",' in causes[0]["message"] and '+ \tNodeName: "n2",' in causes[0]["message"]
    # Same quantity spelled differently is no change.
    same = {"requests": {"cpu": "1"}}
    spelled = {"requests": {"cpu": "1000m"}}
    a = pod(containers=[{"name": "c", "image": "x", "resources": same}])
    b = pod(containers=[{"name": "c", "image": "x", "resources": spelled}])
    assert validate_update(POD, b, a) == []


def test_pod_update_specific_rules() -> None:
    grown = pod(containers=[{"name": "c", "image": "x"}, {"name": "d", "image": "y"}])
    assert validate_update(POD, grown, pod()) == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: pod updates may not add or remove containers",
            "field": "spec.containers",
        }
    ]
    modified = pod(tolerations=[{"key": "k", "operator": "Equal", "value": "w"}])
    original = pod(tolerations=[{"key": "k", "operator": "Equal", "value": "v"}])
    assert validate_update(POD, modified, original)[0] == {
        "reason": "FieldValueForbidden",
        "message": "Forbidden: existing toleration can not be modified except its tolerationSeconds",
        "field": "spec.tolerations",
    }
    added_gate = validate_update(
        POD, pod(schedulingGates=[{"name": "g1"}, {"name": "g2"}]), pod(schedulingGates=[{"name": "g1"}])
    )
    assert message(POD, "p", added_gate) == (
        "Pod \"p\" is invalid: spec.schedulingGates[1].name: Forbidden: only deletion is allowed, but found new scheduling gate 'g2'"
    )
    longer = validate_update(POD, pod(activeDeadlineSeconds=200), pod(activeDeadlineSeconds=100))
    assert longer == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 200: must be less than or equal to previous value",
            "field": "spec.activeDeadlineSeconds",
        }
    ]
    assert (
        validate_update(POD, pod(terminationGracePeriodSeconds=1), pod(terminationGracePeriodSeconds=-5))
        == []
    )
    assert (
        validate_update(POD, pod(terminationGracePeriodSeconds=2), pod(terminationGracePeriodSeconds=-5))[0][
            "field"
        ]
        == "spec"
    )


def test_gated_pod_may_gain_node_selector_entries() -> None:
    gates = [{"name": "g"}]
    old = pod(schedulingGates=gates, nodeSelector={"zone": "a"})
    assert (
        validate_update(POD, pod(schedulingGates=gates, nodeSelector={"zone": "a", "disk": "ssd"}), old) == []
    )
    changed = validate_update(POD, pod(schedulingGates=gates, nodeSelector={"zone": "b"}), old)
    assert changed[0]["field"] == "spec.nodeSelector"
    assert changed[0]["message"].endswith(
        "only additions to spec.nodeSelector are allowed (no mutations or deletions)"
    )


# -- other kinds -----------------------------------------------------------------------------------------------


def test_node_taints() -> None:
    taints = [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "effect": "NoSchedule"}, {"key": "x"}]
    causes = validate_create(NODE, {"metadata": {"name": "n"}, "spec": {"taints": taints}})
    assert [(c["field"], c["reason"]) for c in causes] == [
        ("spec.taints[1]", "FieldValueDuplicate"),
        ("spec.taints[2].effect", "FieldValueRequired"),
    ]
    assert causes[0]["message"].endswith(": taints must be unique by key and effect pair")


def test_config_map_keys_and_immutability() -> None:
    cm = {"metadata": {"name": "c", "namespace": "default"}, "data": {"ok.key": "", "bad key": "", "..x": ""}}
    causes = validate_create(CM, cm)
    assert [c["field"] for c in causes] == ["data[..x]", "data[bad key]"]
    assert causes[0]["message"] == "Invalid value: \"..x\": must not start with '..'"
    assert causes[1]["message"].startswith(
        "Invalid value: \"bad key\": a valid config key must consist of alphanumeric characters, '-', '_' or '.'"
    )
    old = {"metadata": {"name": "c", "namespace": "default"}, "data": {"a": "1"}, "immutable": True}
    new = {**old, "data": {"a": "2"}}
    assert validate_update(CM, new, old) == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: field is immutable when `immutable` is set",
            "field": "data",
        }
    ]


def test_lease_spec() -> None:
    lease = {
        "metadata": {"name": "l", "namespace": "kube-system"},
        "spec": {"leaseDurationSeconds": 0, "leaseTransitions": -1},
    }
    assert [(c["field"], c["message"]) for c in validate_create(LEASE, lease)] == [
        ("spec.leaseDurationSeconds", "Invalid value: 0: must be greater than 0"),
        ("spec.leaseTransitions", "Invalid value: -1: must be greater than or equal to 0"),
    ]
    typed = {"metadata": {"name": "l", "namespace": "kube-system"}, "spec": {"leaseDurationSeconds": "15"}}
    assert decode_error(LEASE, typed) == (
        'Lease in version "v1" cannot be handled as a Lease: json: cannot unmarshal string into Go struct field '
        "LeaseSpec.spec.leaseDurationSeconds of type int32"
    )
    good = {"metadata": {"name": "l", "namespace": "kube-system"},
            "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15, "renewTime": "2024-01-01T00:00:00.000000Z"}}  # fmt: skip
    assert decode_error(LEASE, good) is None and validate_create(LEASE, good) == []


def test_quantity_decode_error_is_a_400_message() -> None:
    bad = pod(containers=[{"name": "c", "image": "x", "resources": {"requests": {"cpu": "one"}}}])
    assert (
        decode_error(POD, bad) == f'Pod in version "v1" cannot be handled as a Pod: {QUANTITY_FORMAT_ERROR}'
    )
    assert decode_error(POD, pod()) is None
    node = {"metadata": {"name": "n"}, "status": {"capacity": {"cpu": "4K"}}}
    assert (
        decode_error(NODE, node)
        == f'Node in version "v1" cannot be handled as a Node: {QUANTITY_SUFFIX_ERROR}'
    )
    labels = {"metadata": {"name": "c", "namespace": "d", "labels": {"a": 1}}}
    assert decode_error(CM, labels) == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal number into Go struct '
        "field ObjectMeta.metadata.labels of type string"
    )


def v1_event(**overrides: Any) -> dict[str, Any]:
    event = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "p.17a", "namespace": "default"},
        "eventTime": "2024-01-01T00:00:00.000000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-host",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
        "note": "Successfully assigned default/p to n1",
        "type": "Normal",
    }
    event.update(overrides)
    return {k: v for k, v in event.items() if v is not None}


def test_events_k8s_io_v1_required_fields() -> None:
    assert validate_create(EVENT_V1, v1_event()) == []
    causes = validate_create(EVENT_V1, v1_event(eventTime=None, type="Info", deprecatedCount=3))
    assert [(c["field"], c["message"]) for c in causes] == [
        ("eventTime", "Required value"),
        ("type", 'Invalid value: "": has invalid value: Info'),
        ("count", 'Invalid value: "": needs to be unset'),
    ]
    missing = validate_create(
        EVENT_V1, v1_event(reportingController=None, action=None, reportingInstance=None, reason=None)
    )
    # as upstream, an empty controller also fails the qualified-name check (twice: empty, and not matching)
    assert [(c["field"], c["reason"]) for c in missing] == [
        ("reportingController", "FieldValueRequired"),
        ("reportingController", "FieldValueInvalid"),
        ("reportingController", "FieldValueInvalid"),
        ("reportingInstance", "FieldValueRequired"),
        ("action", "FieldValueRequired"),
        ("reason", "FieldValueRequired"),
    ]
    elsewhere = v1_event(regarding={"kind": "Pod", "namespace": "other", "name": "p"})
    assert validate_create(EVENT_V1, elsewhere) == []  # a new-style event may live in another namespace
    cluster_scoped = v1_event(
        regarding={"kind": "Node", "name": "n1"}, metadata={"name": "n1.1", "namespace": "team"}
    )
    assert validate_create(EVENT_V1, cluster_scoped)[0] == {
        "reason": "FieldValueInvalid",
        "message": 'Invalid value: "": does not match event.namespace',
        "field": "involvedObject.namespace",
    }


def test_core_events_stay_lax() -> None:
    old_style = {
        "metadata": {"name": "p.1", "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"},
        "reason": "Started",
        "message": "hi",
        "type": "Whatever",
        "count": 3,
    }
    assert validate_create(EVENT, old_style) == []
    wrong_ns = {**old_style, "involvedObject": {"kind": "Pod", "namespace": "other", "name": "p"}}
    assert validate_create(EVENT, wrong_ns)[0]["field"] == "involvedObject.namespace"


def core_form(event: dict[str, Any]) -> dict[str, Any]:
    """How a server stores an events.k8s.io/v1 Event: in core/v1 field names."""
    renames = {"regarding": "involvedObject", "note": "message", "reportingController": "reportingComponent"}
    return {renames.get(k, k): v for k, v in event.items()} | {"apiVersion": "v1"}


def test_event_checks_read_either_shape() -> None:
    # an update through events.k8s.io may hand over the stored core/v1 form of both objects
    old, new = (
        core_form(v1_event()),
        core_form(v1_event(series={"count": 2, "lastObservedTime": "2024-01-01T00:01:00Z"})),
    )
    assert validate_update(EVENT_V1, new, old) == []
    changed = core_form(v1_event(reason="Other"))
    assert validate_update(EVENT_V1, changed, old) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "Other": field is immutable',
            "field": "reason",
        }
    ]
    assert validate_create(EVENT_V1, core_form(v1_event())) == []


def test_event_update_keeps_content_immutable() -> None:
    old = v1_event()
    series = v1_event(series={"count": 2, "lastObservedTime": "2024-01-01T00:01:00.000000Z"})
    assert validate_update(EVENT_V1, series, old) == []
    renamed = v1_event(note="something else")
    assert validate_update(EVENT_V1, renamed, old) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "something else": field is immutable',
            "field": "message",
        }
    ]


def crd(**overrides: Any) -> dict[str, Any]:
    spec = {
        "group": "stable.example.com",
        "scope": "Namespaced",
        "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "listKind": "CronTabList"},
        "versions": [
            {"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {"type": "object"}}}
        ],
    }
    spec.update(overrides)
    return {"metadata": {"name": "crontabs.stable.example.com"}, "spec": spec}


def test_crd_rules() -> None:
    assert validate_create(CRD, crd()) == []
    misnamed = {**crd(), "metadata": {"name": "crontab.stable.example.com"}}
    assert validate_create(CRD, misnamed) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "crontab.stable.example.com": must be spec.names.plural+"."+spec.group',
            "field": "metadata.name",
        }
    ]
    scoped = validate_create(CRD, crd(scope="Global"))
    assert scoped == [
        {
            "reason": "FieldValueNotSupported",
            "message": 'Unsupported value: "Global": supported values: "Cluster", "Namespaced"',
            "field": "spec.scope",
        }
    ]
    two_storage = crd(versions=[{"name": "v1", "storage": True, "schema": {"openAPIV3Schema": {}}},
                                {"name": "v2", "storage": True, "schema": {"openAPIV3Schema": {}}}])  # fmt: skip
    causes = validate_create(CRD, two_storage)
    assert [c["message"].rsplit(": ", 1)[-1] for c in causes] == [
        "must have exactly one version marked as storage version"
    ]
    no_schema = validate_create(CRD, crd(versions=[{"name": "v1", "storage": True, "served": True}]))
    assert no_schema == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: schemas are required",
            "field": "spec.versions[0].schema.openAPIV3Schema",
        }
    ]
    assert (
        validate_create(CRD, crd(versions=[]))[-1]["message"]
        == "Required value: must have at least one version"
    )
    rescoped = crd(scope="Cluster")
    assert validate_update(CRD, rescoped, crd()) == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: "Cluster": field is immutable',
            "field": "spec.scope",
        }
    ]


def test_generic_kinds_get_metadata_rules() -> None:
    assert validate_create(DEPLOY, {"metadata": {"name": "web", "namespace": "default"}}) == []
    assert (
        validate_create(DEPLOY, {"metadata": {"name": "Web", "namespace": "default"}})[0]["field"]
        == "metadata.name"
    )


# -- quantities ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value", "canonical", "milli", "whole"),
    [
        ("100m", Fraction(1, 10), "100m", 100, 1),
        ("1", 1, "1", 1000, 1),
        ("1.5", Fraction(3, 2), "1500m", 1500, 2),
        ("2e3", 2000, "2e3", 2_000_000, 2000),
        ("1Gi", 2**30, "1Gi", 2**30 * 1000, 2**30),
        ("1.5Gi", 3 * 2**29, "1536Mi", 3 * 2**29 * 1000, 3 * 2**29),
        ("500Ki", 512_000, "500Ki", 512_000_000, 512_000),
        ("1024Ki", 2**20, "1Mi", 2**20 * 1000, 2**20),
        ("1000", 1000, "1k", 1_000_000, 1000),
        ("0.1", Fraction(1, 10), "100m", 100, 1),
        ("1n", Fraction(1, 10**9), "1n", 1, 1),
        ("0.5Ki", 512, "512", 512_000, 512),
        ("1e-3", Fraction(1, 1000), "1e-3", 1, 1),
        ("+5M", 5_000_000, "5M", 5_000_000_000, 5_000_000),
        ("-1", -1, "-1", -1000, -1),
        ("0", 0, "0", 0, 0),
        (".5", Fraction(1, 2), "500m", 500, 1),
        ("1.G", 10**9, "1G", 10**12, 10**9),
        ("0.0000000001", Fraction(1, 10**9), "1n", 1, 1),  # finer than nano rounds up, never to zero
    ],
)
def test_quantity_table(text: str, value: Fraction, canonical: str, milli: int, whole: int) -> None:
    assert parse_quantity(text) == value
    assert canonical_quantity(text) == canonical
    assert quantity_to_milli(text) == milli
    assert quantity_to_int(text) == whole


def test_quantity_numbers_and_formats() -> None:
    assert parse_quantity(3) == 3 and quantity_to_milli(3) == 3000 and quantity_to_int(2) == 2
    assert parse_quantity(0.25) == Fraction(1, 4) and quantity_to_milli(0.25) == 250
    assert quantity_format("1Gi") == "BinarySI" and quantity_format("1G") == "DecimalSI"
    assert quantity_format("1e9") == "DecimalExponent"


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("", QUANTITY_FORMAT_ERROR),
        ("abc", QUANTITY_FORMAT_ERROR),
        ("1Kb", QUANTITY_FORMAT_ERROR),
        ("1 Gi", QUANTITY_FORMAT_ERROR),
        ("1.2.3", QUANTITY_FORMAT_ERROR),
        ("1e", QUANTITY_SUFFIX_ERROR),
        ("1K", QUANTITY_SUFFIX_ERROR),
        ("1m5", QUANTITY_SUFFIX_ERROR),
        ("5iB", QUANTITY_FORMAT_ERROR),
    ],
)
def test_quantity_errors(text: str, error: str) -> None:
    with pytest.raises(QuantityError, match=re.escape(error)):
        parse_quantity(text)


# A deliberately plain reference: regex + Decimal, written from the grammar in the Quantity docs.
_REF_RE = re.compile(r"([+-]?)(\d*\.?\d*)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?")
_REF_BIN = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_REF_DEC = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


def reference_quantity(text: str) -> Fraction:
    sign, number, suffix = _REF_RE.fullmatch(text).groups()  # type: ignore[union-attr]
    value = Fraction(Decimal(number or "0") if number not in ("", ".") else 0)
    if suffix in _REF_BIN:
        value *= 2 ** _REF_BIN[suffix]
    elif suffix in _REF_DEC:
        value *= Fraction(10) ** _REF_DEC[suffix]
    elif suffix:
        value *= Fraction(10) ** int(suffix[1:])
    nanos = value * 10**9
    value = Fraction(math.ceil(nanos), 10**9)  # the reference only makes non-negative numbers before the sign
    return -value if sign == "-" else value


quantities = st.builds(
    lambda sign, whole, frac, suffix: f"{sign}{whole}{'.' + frac if frac is not None else ''}{suffix}",
    st.sampled_from(["", "+", "-"]),
    st.integers(min_value=0, max_value=10**12).map(str),
    st.one_of(st.none(), st.text("0123456789", min_size=0, max_size=12)),
    st.one_of(
        st.sampled_from(
            ["", "n", "u", "m", "k", "M", "G", "T", "P", "E", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
        ),
        st.builds(lambda e, x: f"{e}{x}", st.sampled_from(["e", "E", "e+", "e-", "E-"]), st.integers(0, 20)),
    ),
)


@settings(max_examples=400, deadline=None)
@given(quantities)
def test_quantity_matches_reference(text: str) -> None:
    expected = reference_quantity(text)
    assert parse_quantity(text) == expected
    assert quantity_to_milli(text) == math.ceil(expected * 1000)
    assert quantity_to_int(text) == math.ceil(expected)


@settings(max_examples=300, deadline=None)
@given(quantities)
def test_canonical_form_round_trips(text: str) -> None:
    canonical = canonical_quantity(text)
    assert parse_quantity(canonical) == parse_quantity(text)
    assert canonical_quantity(canonical) == canonical
    # canonical forms never carry a decimal point
    assert "." not in canonical
