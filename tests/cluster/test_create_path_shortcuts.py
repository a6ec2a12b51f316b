"""The create path's shortcuts (metadata checks called only for what is there, event fields read without
comprehensions, cached namespace rules, a UUID without the UUID object, the Table test on the Accept header, the
inline string check of the schema decoder) give exactly what the plain formulations give, on random inputs."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.apimachinery.validation import (
    is_dns1123_subdomain,
    is_label_key,
    name_is_dns_label,
    name_is_dns_subdomain,
)
from kubesched.cluster import schema, tables, validation
from kubesched.cluster.api import new_uid
from kubesched.cluster.discovery import media_ranges
from kubesched.cluster.resources import ResourceRegistry
from kubesched.cluster.validation import (
    _dict,
    _str,
    _validate_finalizers,
    _validate_owner_references,
    forbidden,
    invalid,
    required,
    validate_annotations,
    validate_labels,
)

Cause = dict[str, str]

# -- references: the plain formulations the shortcuts replace ------------------------------------------------


def reference_object_meta(meta: Any, namespaced: bool, name_fn: Any, path: str = "metadata") -> list[Cause]:
    meta = _dict(meta)
    causes: list[Cause] = []
    name, generate_name = _str(meta.get("name")), _str(meta.get("generateName"))
    if generate_name:
        causes.extend(invalid(path + ".generateName", generate_name, m) for m in name_fn(generate_name, True))
    if name:
        causes.extend(invalid(path + ".name", name, m) for m in name_fn(name, False))
    elif not generate_name:
        causes.append(required(path + ".name", "name or generateName is required"))
    namespace = _str(meta.get("namespace"))
    if namespaced:
        if not namespace:
            causes.append(required(path + ".namespace"))
        else:
            causes.extend(invalid(path + ".namespace", namespace, m) for m in name_is_dns_label(namespace))
    elif namespace:
        causes.append(forbidden(path + ".namespace", "not allowed on this type"))
    generation = meta.get("generation")
    if isinstance(generation, int) and generation < 0:
        causes.append(invalid(path + ".generation", generation, validation.IS_NEGATIVE))
    causes.extend(validate_labels(meta.get("labels"), path + ".labels"))
    causes.extend(validate_annotations(meta.get("annotations"), path + ".annotations"))
    causes.extend(_validate_owner_references(meta.get("ownerReferences"), path + ".ownerReferences"))
    causes.extend(_validate_finalizers(meta.get("finalizers"), path + ".finalizers"))
    return causes


def reference_event_fields(rtype: Any, event: dict[str, Any]) -> dict[str, Any]:
    if not validation._in_events_v1_shape(rtype, event):
        return {
            "involvedObject": _dict(event.get("involvedObject")),
            "message": _str(event.get("message")),
            "source": _dict(event.get("source")),
            "firstTimestamp": event.get("firstTimestamp"),
            "lastTimestamp": event.get("lastTimestamp"),
            "count": event.get("count") or 0,
            **{
                k: event.get(k)
                for k in (
                    "eventTime",
                    "reportingComponent",
                    "reportingInstance",
                    "action",
                    "reason",
                    "type",
                    "series",
                    "related",
                )
            },
        }
    return {
        "involvedObject": _dict(event.get("regarding")),
        "message": _str(event.get("note")),
        "source": _dict(event.get("deprecatedSource")),
        "firstTimestamp": event.get("deprecatedFirstTimestamp"),
        "lastTimestamp": event.get("deprecatedLastTimestamp"),
        "count": event.get("deprecatedCount") or 0,
        "reportingComponent": event.get("reportingController"),
        **{
            k: event.get(k)
            for k in ("eventTime", "reportingInstance", "action", "reason", "type", "series", "related")
        },
    }


def reference_legacy_event_checks(e: dict[str, Any], namespace: str) -> list[Cause]:
    causes: list[Cause] = []
    involved_ns = _str(e["involvedObject"].get("namespace"))
    if not e.get("eventTime"):
        if involved_ns:
            if namespace != involved_ns:
                causes.append(
                    invalid("involvedObject.namespace", involved_ns, "does not match event.namespace")
                )
        elif namespace not in ("", "default"):
            causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
    else:
        if not involved_ns and namespace not in ("default", "kube-system"):
            causes.append(invalid("involvedObject.namespace", involved_ns, "does not match event.namespace"))
        controller = _str(e.get("reportingComponent"))
        if not controller:
            causes.append(required("reportingController"))
        causes.extend(invalid("reportingController", controller, m) for m in is_label_key(controller))
        for field in ("reportingInstance", "action", "reason"):
            value = _str(e.get(field))
            if not value:
                causes.append(required(field))
            if len(value) > 128:
                causes.append(invalid(field, "", "can have at most 128 characters"))
        if len(e["message"]) > 1024:
            causes.append(invalid("message", "", "can have at most 1024 characters"))
    causes.extend(invalid("namespace", namespace, m) for m in is_dns1123_subdomain(namespace))
    return causes


# -- inputs ---------------------------------------------------------------------------------------------------

NAME_CHARS = "ab9-.%/A_"
texts = st.text(NAME_CHARS, max_size=10)
falsy_or_junk = st.sampled_from([None, "", 0, [], {}, "x", 3, [1], {"a": 1}])
label_maps = st.one_of(
    falsy_or_junk, st.dictionaries(st.text("ab/.-_A", max_size=6), st.text("ab.-_ ", max_size=6), max_size=3)
)
owner_refs = st.one_of(
    falsy_or_junk,
    st.lists(
        st.one_of(
            st.just("junk"),
            st.fixed_dictionaries(
                {},
                optional={
                    "apiVersion": st.sampled_from(["v1", "apps/v1", "apps/", ""]),
                    "kind": st.sampled_from(["Event", "ReplicaSet", ""]),
                    "name": texts,
                    "uid": texts,
                    "controller": st.booleans(),
                },
            ),
        ),
        max_size=3,
    ),
)
finalizers = st.one_of(
    falsy_or_junk,
    st.lists(st.one_of(texts, st.sampled_from(["orphan", "foregroundDeletion", "a/b"])), max_size=3),
)
metas = st.one_of(
    falsy_or_junk,
    st.fixed_dictionaries(
        {},
        optional={
            "name": st.one_of(texts, falsy_or_junk),
            "generateName": st.one_of(texts, falsy_or_junk),
            "namespace": st.one_of(
                st.sampled_from(["default", "Bad", "a.b", "kube-system"]), texts, falsy_or_junk
            ),
            "generation": st.one_of(st.integers(-2, 2), falsy_or_junk),
            "labels": label_maps,
            "annotations": label_maps,
            "ownerReferences": owner_refs,
            "finalizers": finalizers,
        },
    ),
)


@settings(max_examples=600, deadline=None)
@given(metas, st.booleans(), st.sampled_from([name_is_dns_subdomain, name_is_dns_label]))
def test_object_meta_checks_equal_the_plain_ones(meta: Any, namespaced: bool, name_fn: Any) -> None:
    assert validation.validate_object_meta(meta, namespaced, name_fn) == reference_object_meta(
        meta, namespaced, name_fn
    )


EVENT_KEYS = (
    "apiVersion",
    "involvedObject",
    "regarding",
    "message",
    "note",
    "source",
    "deprecatedSource",
    "firstTimestamp",
    "deprecatedFirstTimestamp",
    "lastTimestamp",
    "deprecatedLastTimestamp",
    "count",
    "deprecatedCount",
    "eventTime",
    "reportingComponent",
    "reportingController",
    "reportingInstance",
    "action",
    "reason",
    "type",
    "series",
    "related",
)
event_values = st.one_of(
    falsy_or_junk,
    texts,
    st.sampled_from(
        [
            "v1",
            "events.k8s.io/v1",
            "Normal",
            "Warning",
            "2026-01-01T00:00:00.000000Z",
            "x" * 130,
            "y" * 1030,
            {"namespace": "default", "name": "p"},
            {"namespace": "other"},
            {"component": "c", "host": "h"},
            {"count": 2, "lastObservedTime": "t"},
            {"count": 1},
        ]
    ),
)
events = st.builds(
    lambda fields, meta: {**fields, "metadata": meta},
    st.dictionaries(st.sampled_from(EVENT_KEYS), event_values, max_size=12),
    metas,
)


@settings(max_examples=800, deadline=None)
@given(events, st.sampled_from([("events.k8s.io", "v1"), ("", "v1")]))
def test_event_validation_equals_the_plain_one(event: dict[str, Any], gv: tuple[str, str]) -> None:
    rtype = ResourceRegistry().get(gv[0], gv[1], "events")
    assert rtype is not None
    assert validation._event_fields(rtype, event) == reference_event_fields(rtype, event)
    e = reference_event_fields(rtype, event)
    namespace = _str(_dict(event.get("metadata")).get("namespace"))
    assert validation._legacy_event_checks(e, namespace) == reference_legacy_event_checks(e, namespace)


def test_event_checks_report_what_is_wrong() -> None:
    rtype = ResourceRegistry().get("events.k8s.io", "v1", "events")
    assert rtype is not None
    bad = {
        "metadata": {"name": "e", "namespace": "Bad_NS", "labels": {"-x": "y"}},
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "not a key",
        "reportingInstance": "i" * 129,
        "reason": "",
        "type": "Odd",
        "regarding": {"namespace": "Bad_NS"},
    }
    fields = {c["field"] for c in validation.validate_event(rtype, bad)}
    assert {
        "reportingController",
        "reportingInstance",
        "action",
        "reason",
        "namespace",
        "metadata.namespace",
        "metadata.labels",
        "type",
    } <= fields


# -- uid, tables, decoding --------------------------------------------------------------------------------------


def test_new_uid_is_a_canonical_version_4_uuid() -> None:
    seen = set()
    for _ in range(2000):
        text = new_uid()
        parsed = uuid.UUID(text)
        assert str(parsed) == text and parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert re.fullmatch(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", text)
        seen.add(text)
    assert len(seen) == 2000


def reference_wants_table(accept: str) -> bool:
    return any(
        t in ("application/json", "*/*")
        and p.get("as") == "Table"
        and p.get("g") == "meta.k8s.io"
        and p.get("v") == "v1"
        for t, p in media_ranges(accept or "")
    )


accept_parts = st.sampled_from(
    [
        "application/json",
        "*/*",
        "application/yaml",
        ";as=Table",
        '; as="Table"',
        ";AS=Table",
        ";as=table",
        ";g=meta.k8s.io",
        ";v=v1",
        ";v=v1beta1",
        ",",
        " ",
        "application/json;as=Table;v=v1;g=meta.k8s.io",
        "application/json;as=Table;g=meta.k8s.io;v=v1,application/json",
        "APPLICATION/JSON",
    ]
)


@settings(max_examples=500, deadline=None)
@given(st.lists(accept_parts, max_size=8).map("".join))
def test_wants_table_equals_the_parsed_answer(accept: str) -> None:
    assert tables.wants_table(accept) == reference_wants_table(accept)


def test_wants_table_cases() -> None:
    assert tables.wants_table("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert not tables.wants_table("application/json")
    assert not tables.wants_table("")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            5,
            "json: cannot unmarshal number into Go struct field ObjectReference.regarding.name of type string",
        ),
        (
            True,
            "json: cannot unmarshal bool into Go struct field ObjectReference.regarding.name of type string",
        ),
        (
            [],
            "json: cannot unmarshal array into Go struct field ObjectReference.regarding.name of type string",
        ),
    ],
)
def test_string_fields_still_refuse_other_types(value: Any, message: str) -> None:
    body = {"metadata": {"name": "e"}, "regarding": {"name": value}, "note": "fine"}
    with pytest.raises(schema.DecodeError) as err:
        schema.check_object("events.k8s.io", "v1", "Event", body, schema.WARN)
    assert str(err.value) == message
    ok = {"metadata": {"name": "e"}, "regarding": {"name": "p"}, "note": "fine", "bogus": "x"}
    assert schema.check_object("events.k8s.io", "v1", "Event", ok, schema.WARN).warnings == [
        'unknown field "bogus"'
    ]
