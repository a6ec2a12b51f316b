"""events.k8s.io/v1 creates skip the generic metadata pass (a hot path: one event per bound pod); the causes
must be exactly those of the full two-pass validation, for any metadata."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster.kinds import events
from kubesched.cluster.kinds.strategy import Strategy
from kubesched.cluster.resources import ResourceRegistry

NAME_CHARS = "ab9-.%/A_"
names = st.one_of(
    st.none(), st.sampled_from(["", ".", "..", "a", "a.b", "-a", "a-"]), st.text(NAME_CHARS, max_size=8)
)
labels = st.one_of(
    st.none(), st.dictionaries(st.text("ab/.-_", max_size=6), st.text("ab.-_ ", max_size=6), max_size=2)
)


def _event(name: Any, generate: Any, namespace: Any, labels: Any, series: bool) -> dict[str, Any]:
    meta = {
        k: v
        for k, v in (("name", name), ("generateName", generate), ("namespace", namespace), ("labels", labels))
        if v is not None
    }
    ev: dict[str, Any] = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": meta,
        "eventTime": "2026-01-01T00:00:00.000000Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-x",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p"},
        "note": "Successfully assigned default/p to n",
        "type": "Normal",
    }
    if series:
        ev["series"] = {"count": 2, "lastObservedTime": "2026-01-01T00:00:01.000000Z"}
    return ev


@settings(max_examples=400, deadline=None)
@given(
    names, names, st.one_of(st.none(), st.sampled_from(["default", "Bad", "", "a.b"])), labels, st.booleans()
)
def test_events_v1_create_causes_equal_the_two_pass_validation(
    name: Any, generate: Any, namespace: Any, labels: Any, series: bool
) -> None:
    registry = ResourceRegistry()
    rtype = registry.get("events.k8s.io", "v1", "events")
    assert rtype is not None
    obj = _event(name, generate, namespace, labels, series)
    reference = Strategy.validate_create(events.V1, rtype, obj)  # the kind's pass, then the generic one
    assert events.V1.validate_create(rtype, obj) == reference


def test_core_events_keep_the_generic_pass() -> None:
    registry = ResourceRegistry()
    rtype = registry.get("", "v1", "events")
    assert rtype is not None
    obj = {"metadata": {"name": "a/b", "namespace": "default"}, "involvedObject": {"namespace": "default"}}
    # core/v1 events have lax names of their own; the generic pass still refuses what is no path segment.
    assert any(c["field"] == "metadata.name" for c in events.CORE.validate_create(rtype, obj))
