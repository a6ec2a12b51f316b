"""The kind registry: every strategy names a served type, and the per-kind hooks behave as their kinds do."""

from __future__ import annotations

from typing import Any

from kubesched.cluster.kinds import CUSTOM_RESOURCE, DEFAULT, STRATEGIES, strategy_for
from kubesched.cluster.resources import BUILTIN_TYPES, ResourceType

Obj = dict[str, Any]


def test_every_strategy_names_a_builtin_type() -> None:
    served = {(t.group, t.plural) for t in BUILTIN_TYPES}
    assert set(STRATEGIES) <= served


def test_custom_resources_and_plain_kinds_get_the_generic_strategies() -> None:
    crd = {"spec": {"group": "example.com", "names": {"plural": "pods", "kind": "Pod"}, "versions": []}}
    custom = ResourceType("example.com", "v1", "pods", "Pod", True, crd=crd, builtin=False)
    assert strategy_for(custom) is CUSTOM_RESOURCE
    plain = next(t for t in BUILTIN_TYPES if t.plural == "endpoints")
    assert strategy_for(plain) is DEFAULT


def test_field_selectors_come_from_the_kind() -> None:
    by_plural = {(t.group, t.plural): t for t in BUILTIN_TYPES}
    pods = by_plural[("", "pods")]
    assert pods.field_getter("spec.nodeName") is not None
    assert pods.field_getter("metadata.name") is not None
    assert pods.field_getter("spec.unschedulable") is None
    assert "status.phase" in by_plural[("", "namespaces")].supported_fields()
    assert by_plural[("events.k8s.io", "events")].field_getter("regarding.name") is not None
    assert by_plural[("", "events")].field_getter("regarding.name") is None
    assert by_plural[("", "configmaps")].supported_fields() == ["metadata.name", "metadata.namespace"]


def _samples(t: ResourceType) -> list[Obj]:
    ns = {"namespace": "default"} if t.namespaced else {}
    good = {"metadata": {"name": "good", **ns}}
    dotted = {"metadata": {"name": "a.b", **ns}}
    bad = {"metadata": {"name": "Bad_Name", "labels": {"bad key!": "x"}, **ns}}
    unnamed: Obj = {"metadata": dict(ns)}
    pod_spec = {"containers": [{"name": "c", "image": "busybox"}]}
    extra: list[Obj] = []
    if t.plural == "pods":
        extra = [dict(good, spec=pod_spec), dict(good, spec={"containers": []})]
    elif t.plural == "nodes":
        extra = [dict(good, spec={"taints": [{"key": "k", "effect": "Bogus"}]})]
    elif t.plural == "namespaces":
        extra = [dict(good, spec={"finalizers": ["not/a valid finalizer"]})]
    elif t.plural == "configmaps":
        extra = [dict(good, data={"bad key": "v"}), dict(good, data={"k": "v"})]
    elif t.plural == "leases":
        extra = [dict(good, spec={"leaseDurationSeconds": -1}), dict(good, spec={"holderIdentity": "me"})]
    elif t.plural == "events":
        extra = [
            dict(
                good,
                involvedObject={"kind": "Pod", "name": "p", "namespace": "default"},
                reason="R",
                type="Normal",
            ),
            dict(
                good,
                regarding={"kind": "Pod", "name": "p", "namespace": "default"},
                reason="R",
                type="Normal",
            ),
        ]
    elif t.plural == "customresourcedefinitions":
        extra = [
            {
                "metadata": {"name": "widgets.example.com"},
                "spec": {
                    "group": "example.com",
                    "scope": "Namespaced",
                    "names": {"plural": "widgets", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True}],
                },
            }
        ]
    return [good, dotted, bad, unnamed, *extra]
