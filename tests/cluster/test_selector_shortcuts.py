"""Field selectors on the watch path: two-level field getters read without the generic walk and selectors
compiled into one closure answer exactly as the generic walk and ``FieldSelector.matches`` do."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.resources import ResourceRegistry, field_path
from kubesched.cluster.selectors import FieldSelector, LabelSelector


def walk(obj: Any, path: str, default: str = "") -> str:
    """The generic getter: every key in turn, a default for anything missing or not an object."""
    cur: Any = obj
    for k in path.split("."):
        if not isinstance(cur, dict):
            return default
        cur = cur.get(k)
        if cur is None:
            return default
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 3),
    st.floats(allow_nan=False, width=16),
    st.sampled_from(["", "n1", "Running", "Succeeded", "Failed", "default-scheduler"]),
    st.just([]),
    st.just({}),
)
inner = st.one_of(
    leaves, st.dictionaries(st.sampled_from(["nodeName", "phase", "name", "x"]), leaves, max_size=3)
)
objects = st.one_of(
    leaves,
    st.dictionaries(st.sampled_from(["spec", "status", "metadata", "other"]), inner, max_size=4),
)
PATHS = ["spec.nodeName", "status.phase", "metadata.name", "spec.hostNetwork", "a.b.c", "spec"]


@settings(max_examples=600, deadline=None)
@given(objects, st.sampled_from(PATHS), st.sampled_from(["", "false"]))
def test_field_getters_equal_the_walk(obj: Any, path: str, default: str) -> None:
    assert field_path(path, default)(obj) == walk(obj, path, default)


POD_SELECTORS = [
    "spec.nodeName!=",
    "spec.nodeName=",
    "spec.nodeName=n1",
    "status.phase!=Succeeded,status.phase!=Failed",
    "status.phase=Running,spec.nodeName!=",
    "spec.schedulerName=default-scheduler,spec.nodeName=",
    "spec.hostNetwork=false",
    "metadata.name=n1",
    ",",
]
pods = st.builds(
    lambda spec, status, meta: {"spec": spec, "status": status, "metadata": meta},
    st.dictionaries(
        st.sampled_from(["nodeName", "schedulerName", "hostNetwork"]),
        st.one_of(st.none(), st.booleans(), st.sampled_from(["", "n1", "default-scheduler", "false"])),
        max_size=3,
    ),
    st.one_of(
        st.none(),
        st.fixed_dictionaries(
            {}, optional={"phase": st.sampled_from(["Running", "Failed", "Succeeded", ""])}
        ),
    ),
    st.fixed_dictionaries(
        {}, optional={"name": st.sampled_from(["n1", "p"]), "labels": st.just({"app": "a"})}
    ),
)


@settings(max_examples=600, deadline=None)
@given(pods, st.sampled_from(POD_SELECTORS), st.sampled_from([None, "app=a", "app!=a"]))
def test_compiled_selectors_equal_matches(pod: dict[str, Any], text: str, labels: str | None) -> None:
    registry = ResourceRegistry()
    rtype = registry.get("", "v1", "pods")
    assert rtype is not None
    fs = FieldSelector.parse(text, rtype)
    assert fs.predicate()(pod) == fs.matches(pod)
    pred = ClusterApi(registry=registry).predicate(rtype, labels, text)
    assert pred is not None
    want = fs.matches(pod)
    if labels is not None:
        want = want and LabelSelector.parse(labels).matches((pod.get("metadata") or {}).get("labels"))
    assert pred(pod) == want


def test_bound_pods_selector() -> None:
    rtype = ResourceRegistry().get("", "v1", "pods")
    assert rtype is not None
    bound = FieldSelector.parse("spec.nodeName!=", rtype).predicate()
    assert bound({"spec": {"nodeName": "n1"}}) and not bound({"spec": {}}) and not bound({})
    live = FieldSelector.parse("status.phase!=Succeeded,status.phase!=Failed", rtype).predicate()
    assert live({"status": {"phase": "Running"}}) and live({}) and not live({"status": {"phase": "Failed"}})
