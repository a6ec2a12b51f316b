"""NodeAffinity plugin: cases transcribed from upstream's nodeaffinity table tests, plus selector parsing."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import ClusterEvent, Code, CycleState
from kubesched.scheduler.plugins.node_affinity import (
    ERR_REASON_CONFLICT,
    ERR_REASON_ENFORCED,
    ERR_REASON_POD,
    LabelSelector,
    NodeAffinity,
    Requirement,
    SelectorError,
    default_normalize,
    label_codes,
    parse_int64,
)
from kubesched.scheduler.plugins.node_affinity_args import NodeAffinityArgs
from kubesched.scheduler.podinfo import PodInfo

_uid = itertools.count()


def affinity_args(args: dict[str, Any] | None) -> NodeAffinityArgs:
    """The args as the configuration loader builds them (wire form in)."""
    return NodeAffinityArgs.model_validate(args or {})


def make_node(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": dict(labels or {})}, "status": {"allocatable": {"cpu": "4"}}}


def make_pod(
    cache: Cache, spec: dict[str, Any] | None = None, labels: dict[str, str] | None = None
) -> PodInfo:
    pod = {
        "metadata": {"name": f"p{next(_uid)}", "namespace": "default", "uid": f"uid-{next(_uid)}"},
        "spec": {"containers": [{"name": "c", "image": "img"}], **(spec or {})},
    }
    if labels:
        pod["metadata"]["labels"] = labels
    return PodInfo.from_pod(pod, cache.res)


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
            }
        }
    }


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e


def name_field(*values: str, op: str = "In") -> dict[str, Any]:
    return {"key": "metadata.name", "operator": op, "values": list(values)}


def filter_one(
    spec: dict[str, Any] | None,
    labels: dict[str, str] | None,
    node_name: str = "node1",
    args: dict[str, Any] | None = None,
    run_pre_filter: bool = True,
) -> tuple[Any, str | None]:
    """PreFilter result/status and the Filter reason (None = passes) for one node, as upstream's TestNodeAffinity."""
    cache = Cache()
    cache.on_node_add(make_node(node_name, labels))
    plugin = NodeAffinity(affinity_args(args), Handle(cache=cache))
    pod = make_pod(cache, spec)
    state = CycleState()
    pre = plugin.pre_filter(state, pod, cache.table) if run_pre_filter else None
    f = plugin.filter(state, pod, cache.table, cache.table.slots())
    bits = int(f.reason_bits[0])
    if bits == 0:
        return pre, None
    (j,) = [j for j in range(len(f.reasons)) if bits >> j & 1]
    assert f.unresolvable[j], "NodeAffinity rejections are always unresolvable"
    return pre, f.reasons[j]


# --- Filter, from upstream TestNodeAffinity ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "labels", "want"),
    [
        ({"nodeSelector": {"foo": "bar"}}, {}, ERR_REASON_POD),  # missing labels
        ({"nodeSelector": {"foo": "bar"}}, {"foo": "bar"}, None),
        ({"nodeSelector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, None),  # node labels are a superset
        ({"nodeSelector": {"foo": "bar", "baz": "blah"}}, {"foo": "bar"}, ERR_REASON_POD),  # subset
        (required({"matchExpressions": [expr("foo", "In", "bar", "value2")]}), {"foo": "bar"}, None),
        (
            required({"matchExpressions": [expr("kernel-version", "Gt", "0204")]}),
            {"kernel-version": "0206"},
            None,
        ),
        (
            required({"matchExpressions": [expr("mem-type", "NotIn", "DDR", "DDR2")]}),
            {"mem-type": "DDR3"},
            None,
        ),
        (required({"matchExpressions": [expr("GPU", "Exists")]}), {"GPU": "NVIDIA-GRID-K1"}, None),
        (
            required({"matchExpressions": [expr("foo", "In", "value1", "value2")]}),
            {"foo": "bar"},
            ERR_REASON_POD,
        ),
        # An empty term matches nothing.
        (required({"matchExpressions": []}), {"foo": "bar"}, ERR_REASON_POD),
        # Expressions in a term are ANDed.
        (
            required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]}),
            {"GPU": "NVIDIA-GRID-K1"},
            None,
        ),
        (
            required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "In", "AMD", "INTER")]}),
            {"GPU": "NVIDIA-GRID-K1"},
            ERR_REASON_POD,
        ),
        # Terms are ORed.
        (
            required(
                {"matchExpressions": [expr("foo", "In", "bar", "value2")]},
                {"matchExpressions": [expr("diffkey", "In", "wrong", "value2")]},
            ),
            {"foo": "bar"},
            None,
        ),
        # nodeSelector and affinity must both hold.
        (
            {"nodeSelector": {"foo": "bar"}, **required({"matchExpressions": [expr("foo", "Exists")]})},
            {"foo": "bar"},
            None,
        ),
        (
            {"nodeSelector": {"foo": "bar"}, **required({"matchExpressions": [expr("foo", "Exists")]})},
            {"foo": "barrrrrr"},
            ERR_REASON_POD,
        ),
        # A value that is not a valid label value makes the term unparsable: it matches nothing.
        (
            required({"matchExpressions": [expr("foo", "NotIn", "invalid value: ___@#$%^")]}),
            {"foo": "bar"},
            ERR_REASON_POD,
        ),
    ],
)
def test_filter_table(spec: dict[str, Any], labels: dict[str, str], want: str | None) -> None:
    _, got = filter_one(spec, labels)
    assert got == want


def test_pod_without_affinity_is_skipped() -> None:
    pre, reason = filter_one({}, {"foo": "bar"})
    assert pre is not None and pre[1].code == Code.SKIP
    assert reason is None
    pre, _ = filter_one({"affinity": {"nodeAffinity": {}}}, {"foo": "bar"})
    assert pre[1].code == Code.SKIP


def test_match_fields_restrict_node_names() -> None:
    spec = required({"matchFields": [name_field("node1")]})
    pre, reason = filter_one(spec, {}, node_name="node1")
    assert pre[0].node_names == {"node1"} and pre[1].ok and reason is None
    pre, reason = filter_one(spec, {}, node_name="node2")
    assert pre[0].node_names == {"node1"} and reason == ERR_REASON_POD


def test_match_fields_or_expressions() -> None:
    # Two terms: the name term does not match node2, the expressions term does.
    spec = required(
        {"matchFields": [name_field("node1"), name_field("node2")]},
        {"matchExpressions": [expr("foo", "In", "bar")]},
    )
    pre, reason = filter_one(spec, {"foo": "bar"}, node_name="node2")
    assert pre[0] is None and reason is None
    # One term with both: fields AND expressions.
    spec = required({"matchFields": [name_field("node1")], "matchExpressions": [expr("foo", "In", "bar")]})
    pre, reason = filter_one(spec, {"foo": "bar"}, node_name="node2")
    assert pre[0].node_names == {"node1"} and reason == ERR_REASON_POD
    pre, reason = filter_one(spec, {"foo": "bar"}, node_name="node1")
    assert reason is None
    # Two terms neither of which matches.
    spec = required({"matchFields": [name_field("node1")]}, {"matchExpressions": [expr("foo", "In", "nope")]})
    _, reason = filter_one(spec, {"foo": "bar"}, node_name="node2")
    assert reason == ERR_REASON_POD


def test_two_name_terms_union_and_conflict() -> None:
    spec = required({"matchFields": [name_field("node1")]}, {"matchFields": [name_field("node2")]})
    pre, reason = filter_one(spec, {}, node_name="node2")
    assert pre[0].node_names == {"node1", "node2"} and reason is None
    spec = required({"matchFields": [name_field("node1"), name_field("node2")]})
    pre, reason = filter_one(spec, {"foo": "bar"}, node_name="node2")
    assert pre[0] is None
    assert pre[1].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE and pre[1].reasons == [ERR_REASON_CONFLICT]
    assert reason == ERR_REASON_POD


def test_added_affinity() -> None:
    added = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchFields": [name_field("node2")]}]
            }
        }
    }
    spec = required({"matchExpressions": [expr("zone", "In", "foo")]})
    assert filter_one(spec, {"zone": "foo"}, "node2", added)[1] is None
    spec = required({"matchExpressions": [expr("zone", "In", "bar")]})
    assert filter_one(spec, {"zone": "foo"}, "node2", added)[1] == ERR_REASON_POD
    added_zone = {
        "addedAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "In", "bar")]}]
            }
        }
    }
    pre, reason = filter_one({}, {"zone": "foo"}, "node2", added_zone)
    assert pre[1].ok  # added affinity alone keeps the plugin in the cycle
    assert reason == ERR_REASON_ENFORCED


def test_filter_without_pre_filter() -> None:
    assert (
        filter_one({"nodeSelector": {"foo": "bar"}}, {"foo": "bar", "baz": "blah"}, run_pre_filter=False)[1]
        is None
    )
    spec = required({"matchExpressions": [expr("GPU", "Exists"), expr("GPU", "NotIn", "AMD", "INTER")]})
    assert filter_one(spec, {"GPU": "NVIDIA-GRID-K1"}, run_pre_filter=False)[1] is None


def test_gt_lt_compare_integers() -> None:
    spec = required({"matchExpressions": [expr("v", "Lt", "10")]})
    assert filter_one(spec, {"v": "9"})[1] is None
    assert filter_one(spec, {"v": "10"})[1] == ERR_REASON_POD
    assert filter_one(spec, {"v": "x"})[1] == ERR_REASON_POD  # not an integer never matches
    assert filter_one(spec, {})[1] == ERR_REASON_POD
    spec = required({"matchExpressions": [expr("v", "Gt", "1.5")]})  # bad bound: term unparsable
    assert filter_one(spec, {"v": "9"})[1] == ERR_REASON_POD


def test_filter_many_nodes_vectorised() -> None:
    cache = Cache()
    for i in range(10):
        cache.on_node_add(make_node(f"n{i}", {"zone": f"z{i % 3}", "rank": str(i)}))
    plugin = NodeAffinity(affinity_args(None), Handle(cache=cache))
    pod = make_pod(
        cache, required({"matchExpressions": [expr("zone", "NotIn", "z0"), expr("rank", "Gt", "3")]})
    )
    state = CycleState()
    plugin.pre_filter(state, pod, cache.table)
    idx = cache.table.slots()
    ok = plugin.filter(state, pod, cache.table, idx).ok
    names = {cache.table.names[s] for s, good in zip(idx, ok, strict=True) if good}
    assert names == {"n4", "n5", "n7", "n8"}
    # A label change is seen by the next cycle (masks are cached per label version).
    cache.on_node_update(None, make_node("n9", {"zone": "z1", "rank": "9"}))
    ok = plugin.filter(state, pod, cache.table, idx).ok
    assert {cache.table.names[s] for s, good in zip(idx, ok, strict=True) if good} == {
        "n4",
        "n5",
        "n7",
        "n8",
        "n9",
    }


# --- Score, from upstream TestNodeAffinityPriority ---------------------------------------------------------------

PREF_FOO = {"weight": 2, "preference": {"matchExpressions": [expr("foo", "In", "bar")]}}
AFFINITY2 = [
    PREF_FOO,
    {"weight": 4, "preference": {"matchExpressions": [expr("key", "In", "value")]}},
    {
        "weight": 5,
        "preference": {
            "matchExpressions": [
                expr("foo", "In", "bar"),
                expr("key", "In", "value"),
                expr("az", "In", "az1"),
            ]
        },
    },
]
LABEL1 = {"foo": "bar"}
LABEL2 = {"key": "value"}
LABEL3 = {"az": "az1"}
LABEL4 = {"abc": "az11", "def": "az22"}
LABEL5 = {"foo": "bar", "key": "value", "az": "az1"}


def scores(
    preferred: list[dict[str, Any]] | None, nodes: list[dict[str, str]], args: dict[str, Any] | None = None
) -> list[int] | None:
    cache = Cache()
    for i, labels in enumerate(nodes):
        cache.on_node_add(make_node(f"node{i + 1}", labels))
    plugin = NodeAffinity(affinity_args(args), Handle(cache=cache))
    spec = {}
    if preferred is not None:
        spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}}
    pod = make_pod(cache, spec)
    state = CycleState()
    idx = cache.table.slots()
    if plugin.pre_score(state, pod, cache.table, idx).is_skip:
        return None
    raw = plugin.score(state, pod, cache.table, idx)
    return plugin.normalize_score(state, pod, raw).tolist()


def test_score_table() -> None:
    assert scores(None, [LABEL1, LABEL2, LABEL3]) is None  # no preferences: PreScore skips
    assert scores([PREF_FOO], [LABEL4, LABEL2, LABEL3]) == [0, 0, 0]
    assert scores([PREF_FOO], [LABEL1, LABEL2, LABEL3]) == [100, 0, 0]
    assert scores(AFFINITY2, [LABEL1, LABEL5, LABEL2]) == [18, 100, 36]
    added = {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [PREF_FOO]}}
    assert scores(None, [LABEL1, LABEL2], added) == [100, 0]
    added3 = {
        "addedAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 3, "preference": {"matchExpressions": [expr("key", "In", "value")]}}
            ]
        }
    }
    assert scores([PREF_FOO], [LABEL1, LABEL2, LABEL5], added3) == [40, 60, 100]


def test_score_without_pre_score() -> None:
    cache = Cache()
    for i, labels in enumerate([LABEL1, LABEL5, LABEL2]):
        cache.on_node_add(make_node(f"node{i}", labels))
    plugin = NodeAffinity(affinity_args(None), Handle(cache=cache))
    spec = {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": AFFINITY2}}}
    pod = make_pod(cache, spec)
    state = CycleState()
    raw = plugin.score(state, pod, cache.table, cache.table.slots())
    assert raw.tolist() == [2, 11, 4]
    assert plugin.normalize_score(state, pod, raw).tolist() == [18, 100, 36]


def test_invalid_preferred_term_is_an_error() -> None:
    bad = [{"weight": 1, "preference": {"matchExpressions": [expr("foo", "Gt", "x")]}}]
    cache = Cache()
    cache.on_node_add(make_node("n", {}))
    plugin = NodeAffinity(affinity_args(None), None)
    pod = make_pod(
        cache, {"affinity": {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": bad}}}
    )
    assert plugin.pre_score(CycleState(), pod, cache.table, cache.table.slots()).code == Code.ERROR
    with pytest.raises(ValueError, match="addedAffinity"):
        NodeAffinity(
            affinity_args({"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": bad}}), None
        )


def test_default_normalize() -> None:
    assert default_normalize(np.array([0, 0])).tolist() == [0, 0]
    assert default_normalize(np.array([0, 0]), reverse=True).tolist() == [100, 100]
    assert default_normalize(np.array([1, 3, 2])).tolist() == [33, 100, 66]
    assert default_normalize(np.array([1, 3, 2]), reverse=True).tolist() == [67, 0, 34]


def test_args_from_pydantic_model() -> None:
    model = NodeAffinityArgs.model_validate(
        {"addedAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [PREF_FOO]}}
    )
    assert len(NodeAffinity(model, None).added_preferred) == 1


def test_events() -> None:
    events = NodeAffinity(affinity_args(None), None).events_to_register()
    assert ClusterEvent("Node", "Add") in events and ClusterEvent("Node", "UpdateNodeLabel") in events


# --- Selector parsing -------------------------------------------------------------------------------------------


def test_label_selector_semantics() -> None:
    assert not LabelSelector.parse(None).matches({})  # null selects nothing
    assert (
        LabelSelector.parse({}).matches({"a": "b"}) and LabelSelector.parse({}).empty
    )  # {} selects everything
    sel = LabelSelector.parse(
        {"matchLabels": {"a": "1"}, "matchExpressions": [{"key": "b", "operator": "NotIn", "values": ["x"]}]}
    )
    assert sel.matches({"a": "1"}) and sel.matches({"a": "1", "b": "y"})
    assert not sel.matches({"a": "1", "b": "x"}) and not sel.matches({"b": "y"})
    with pytest.raises(SelectorError):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})
    with pytest.raises(SelectorError):
        LabelSelector.parse({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]})
    with pytest.raises(SelectorError):
        LabelSelector.parse({"matchLabels": {"bad key!": "v"}})
    # Equal selectors share a key regardless of order.
    a = LabelSelector.parse({"matchLabels": {"x": "1", "y": "2"}})
    b = LabelSelector.parse(
        {"matchExpressions": [{"key": "y", "operator": "In", "values": ["2"]}], "matchLabels": {"x": "1"}}
    )
    assert a.key == b.key


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0204", 204),
        ("-5", -5),
        ("+7", 7),
        (" 5", None),
        ("1_000", None),
        ("1.5", None),
        ("", None),
        (str(2**63), None),
    ],
)
def test_parse_int64_is_strict(text: str, want: int | None) -> None:
    assert parse_int64(text) == want


label_values = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "", "10", "-3", "x1"]))
ops = st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"])


@given(st.lists(label_values, min_size=1, max_size=12), ops, st.sampled_from(["a", "b", "10", "0", "3"]))
def test_vectorised_requirement_agrees_with_scalar(values: list[str | None], op: str, operand: str) -> None:
    cache = Cache()
    for i, v in enumerate(values):
        cache.on_node_add(make_node(f"n{i}", {} if v is None else {"k": v}))
    table = cache.table
    if op in ("Exists", "DoesNotExist"):
        req = Requirement.make("k", op, [])
    elif op in ("Gt", "Lt"):
        req = Requirement.make("k", op, [operand if operand.isdigit() else "0"])
    else:
        req = Requirement.make("k", op, [operand, "b"])
    mask = req.node_mask(table)
    for slot in table.slots():
        assert bool(mask[slot]) == req.matches(table.labels[slot])
    codes = label_codes(table, "k")
    assert all((codes.codes[s] >= 0) == ("k" in table.labels[s]) for s in table.slots())
