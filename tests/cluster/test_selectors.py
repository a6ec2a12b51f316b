"""Label and field selectors: syntax, validation, matching, and a model-based property test."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.cluster.errors import ApiError
from kubesched.cluster.resources import BUILTIN_TYPES, ResourceType
from kubesched.cluster.selectors import FieldSelector, LabelSelector, Op, Requirement, escape_field_value


def rtype(plural: str, group: str = "") -> ResourceType:
    return next(t for t in BUILTIN_TYPES if t.plural == plural and t.group == group)


PODS = rtype("pods")
NODES = rtype("nodes")
EVENTS_V1 = rtype("events", "events.k8s.io")
CONFIGMAPS = rtype("configmaps")

# ---------------------------------------------------------------------------------------------------------------
# Label selector syntax

LABELS = {"app": "web", "tier": "front", "env": "", "count": "7", "example.com/owner": "team-a"}


@pytest.mark.parametrize(
    ("text", "canonical", "matches"),
    [
        ("", "", True),
        ("   ", "", True),
        ("app=web", "app=web", True),
        ("app==web", "app==web", True),
        ("app = web", "app=web", True),
        ("app!=web", "app!=web", False),
        ("app!=db", "app!=db", True),
        ("missing!=x", "missing!=x", True),  # negative terms match objects without the key
        ("app in (web, db)", "app in (db,web)", True),
        ("app in(db)", "app in (db)", False),
        ("app notin (db)", "app notin (db)", True),
        ("missing notin (x)", "missing notin (x)", True),
        ("missing in (x)", "missing in (x)", False),
        ("app", "app", True),
        ("!app", "!app", False),
        ("! missing", "!missing", True),
        ("env=", "env=", True),  # empty value
        ("app=", "app=", False),
        ("env in ()", "env in ()", True),  # "()" is the empty value
        ("env in (x,)", "env in (,x)", True),
        ("count>5", "count>5", True),
        ("count<5", "count<5", False),
        ("app>5", "app>5", False),  # non-integer label value never satisfies gt/lt
        ("missing<5", "missing<5", False),
        ("tier=front,app=web", "app=web,tier=front", True),  # AND; rendered sorted by key
        ("tier=front, app=db", "app=db,tier=front", False),
        ("example.com/owner=team-a", "example.com/owner=team-a", True),
        ("a=in,b notin (notin)", "a=in,b notin (notin)", False),  # keywords are plain values
    ],
)
def test_label_selector_parse_render_match(text: str, canonical: str, matches: bool) -> None:
    sel = LabelSelector.parse(text)
    assert str(sel) == canonical
    assert sel.matches(LABELS) is matches
    assert LabelSelector.parse(canonical) == sel


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
        ("a=b,", "found '', expected: identifier after ','"),
        (",a", "found ',', expected: !, identifier, or 'end of string'"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        ("a in b", "unable to parse requirement: found 'b' expected: '('"),
        ("a in (b c)", "unable to parse requirement: found 'c', expected: ',' or ')'"),
        ("a in (b", "unable to parse requirement: found '', expected: ',' or ')'"),
        ("a=(", "unable to parse requirement: found '(', expected: identifier"),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
        ("=b", "found '=', expected: !, identifier, or 'end of string'"),
        ("a>b", "for 'Gt', 'Lt' operators, the value must be an integer"),
        ("a/b/c=d", "a qualified name must consist of alphanumeric characters"),
        ("Example.com/a=b", "prefix part a lowercase RFC 1123 subdomain"),
        ("/a=b", "prefix part must be non-empty"),
        ("-a=b", 'key: Invalid value: "-a": name part must consist of alphanumeric characters'),
        ("a=-b", 'values[0][a]: Invalid value: "-b": a valid label must be an empty string'),
        (f"{'k' * 64}=v", "name part must be no more than 63 characters"),
        (f"k={'v' * 64}", "must be no more than 63 characters"),
    ],
)
def test_label_selector_parse_errors_are_400(text: str, message: str) -> None:
    with pytest.raises(ApiError) as e:
        LabelSelector.parse(text)
    assert e.value.code == 400
    assert e.value.reason == "BadRequest"
    assert message in e.value.message


def test_label_key_and_value_limits() -> None:
    prefix = ".".join(["a" * 63] * 4)[:253]
    assert LabelSelector.parse(f"{prefix}/{'n' * 63}={'v' * 63}").matches({f"{prefix}/{'n' * 63}": "v" * 63})
    with pytest.raises(ApiError, match="prefix part must be no more than 253 characters"):
        LabelSelector.parse(f"{prefix}a/n=v")


def test_from_dict_nil_is_nothing_and_empty_is_everything() -> None:
    nothing = LabelSelector.from_dict(None)
    assert not nothing.matches({}) and not nothing.matches({"a": "b"})
    assert not nothing.empty and nothing.matches_nothing
    everything = LabelSelector.from_dict({})
    assert everything.empty and everything.matches({}) and everything.matches(None)
    assert LabelSelector.from_dict({"matchLabels": {}, "matchExpressions": []}).empty


def test_from_dict_match_labels_and_expressions() -> None:
    sel = LabelSelector.from_dict(
        {
            "matchLabels": {"app": "web"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["front", "back"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["z9"]},
                {"key": "team", "operator": "Exists"},
            ],
        }
    )
    assert str(sel) == "app=web,!canary,team,tier in (back,front),zone notin (z9)"
    assert sel.matches({"app": "web", "tier": "back", "team": "x"})
    assert not sel.matches({"app": "web", "tier": "back", "team": "x", "canary": "1"})
    assert not sel.matches({"app": "web", "tier": "back", "team": "x", "zone": "z9"})
    assert not sel.matches({"app": "web", "tier": "middle", "team": "x"})


@pytest.mark.parametrize(
    ("sel", "message"),
    [
        (
            {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
            '"Gt" is not a valid label',
        ),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "values set can't be empty"),
        (
            {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]},
            "values set must be empty",
        ),
        ({"matchLabels": {"a b": "c"}}, 'key: Invalid value: "a b"'),
        ({"matchLabels": {"a": 1}}, "must be a string"),
        ("app=web", "must be an object"),
    ],
)
def test_from_dict_errors(sel: object, message: str) -> None:
    with pytest.raises(ApiError) as e:
        LabelSelector.from_dict(sel)  # type: ignore[arg-type]
    assert e.value.code == 400
    assert message in e.value.message


def test_requirement_make_validates_and_normalises_sets() -> None:
    req = Requirement.make("a", Op.IN, ["y", "x", "y"])
    assert req.values == ("x", "y")
    assert str(req) == "a in (x,y)"
    with pytest.raises(ApiError):
        Requirement.make("a", Op.EQUALS, ["x", "y"])


# ---------------------------------------------------------------------------------------------------------------
# Property: the parser agrees with a simple model of the semantics, and rendering round-trips.

KEYS = ["a", "b", "app.kubernetes.io/name", "x_y"]
VALUES = ["", "v", "v2", "7", "12"]  # label values start with an alphanumeric: no "-3"

model_requirement = st.one_of(
    st.tuples(
        st.sampled_from(KEYS), st.sampled_from(["=", "==", "!="]), st.sampled_from(VALUES).map(lambda v: [v])
    ),
    st.tuples(
        st.sampled_from(KEYS),
        st.sampled_from(["in", "notin"]),
        st.lists(st.sampled_from(VALUES), min_size=1, max_size=3),
    ),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["exists", "!"]), st.just([])),
    st.tuples(
        st.sampled_from(KEYS),
        st.sampled_from([">", "<"]),
        st.sampled_from(["0", "5", "12"]).map(lambda v: [v]),
    ),
)
label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from([*VALUES, "x", "-3", "007"]), max_size=4)
spaces = st.sampled_from(["", " ", "  ", "\t"])


def model_matches(reqs: list[tuple[str, str, list[str]]], labels: dict[str, str]) -> bool:
    for key, op, values in reqs:
        have = labels.get(key)
        if op in ("=", "==", "in") and have not in values:
            return False
        if op in ("!=", "notin") and have is not None and have in values:
            return False
        if op == "exists" and have is None:
            return False
        if op == "!" and have is not None:
            return False
        if op in (">", "<"):
            if have is None or not have.lstrip("-").isdigit():
                return False
            holds = int(have) > int(values[0]) if op == ">" else int(have) < int(values[0])
            if not holds:
                return False
    return True


def model_text(reqs: list[tuple[str, str, list[str]]], pad: str) -> str:
    parts = []
    for key, op, values in reqs:
        if op == "exists":
            parts.append(f"{pad}{key}{pad}")
        elif op == "!":
            parts.append(f"{pad}!{pad}{key}")
        elif op in ("in", "notin"):
            parts.append(f"{key} {op}{pad}({pad}{(pad + ',' + pad).join(values)}{pad})")
        else:
            parts.append(f"{pad}{key}{pad}{op}{pad}{values[0]}")
    return ",".join(parts)


@settings(max_examples=150, deadline=None)
@given(st.lists(model_requirement, max_size=4), st.lists(label_sets, min_size=1, max_size=5), spaces)
def test_label_selector_matches_model_and_round_trips(
    reqs: list[tuple[str, str, list[str]]], label_sets_: list[dict[str, str]], pad: str
) -> None:
    sel = LabelSelector.parse(model_text(reqs, pad))
    assert LabelSelector.parse(str(sel)) == sel
    assert str(LabelSelector.parse(str(sel))) == str(sel)
    for labels in label_sets_:
        assert sel.matches(labels) == model_matches(reqs, labels), (str(sel), labels)


# ---------------------------------------------------------------------------------------------------------------
# Field selectors


def pod(node: str | None = None, phase: str | None = None, name: str = "p") -> dict[str, object]:
    spec = {"nodeName": node} if node is not None else {}
    status = {"phase": phase} if phase is not None else {}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec, "status": status}


@pytest.mark.parametrize(
    ("text", "obj", "matches"),
    [
        ("", pod(), True),
        ("spec.nodeName=", pod(), True),  # unset fields compare as ""
        ("spec.nodeName=", pod("n1"), False),
        ("spec.nodeName==n1", pod("n1"), True),
        ("spec.nodeName!=n1", pod("n1"), False),
        ("status.phase!=Succeeded,status.phase!=Failed", pod(phase="Running"), True),
        ("status.phase!=Succeeded,status.phase!=Failed", pod(phase="Failed"), False),
        ("metadata.name=p,metadata.namespace=default", pod(), True),
        ("metadata.namespace=other", pod(), False),
        ("spec.hostNetwork=false", pod(), True),  # defaulted getter
    ],
)
def test_field_selector_matches(text: str, obj: dict[str, object], matches: bool) -> None:
    assert FieldSelector.parse(text, PODS).matches(obj) is matches


def test_field_selector_unknown_field_is_upstream_400() -> None:
    with pytest.raises(ApiError) as e:
        FieldSelector.parse("spec.foo=1", PODS)
    assert (e.value.code, e.value.reason, e.value.message) == (
        400,
        "BadRequest",
        "field label not supported: spec.foo",
    )
    with pytest.raises(ApiError, match=r"field label not supported: spec\.nodeName"):
        FieldSelector.parse("spec.nodeName=x", CONFIGMAPS)
    with pytest.raises(ApiError, match=r"field label not supported: involvedObject\.name"):
        FieldSelector.parse("involvedObject.name=x", EVENTS_V1)
    assert FieldSelector.parse("regarding.name=x", EVENTS_V1).matches({"involvedObject": {"name": "x"}})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("spec.nodeName", "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
        ("metadata.name=a=b", "invalid field selector: unescaped character in value: ="),
        ("metadata.name=a\\x", "invalid field selector: invalid escape sequence: \\x"),
        ("metadata.name=a\\", "invalid field selector: invalid escape sequence: \\"),
        ("metadata.name =a", "field label not supported: metadata.name "),  # no trimming, as upstream
    ],
)
def test_field_selector_syntax_errors(text: str, message: str) -> None:
    with pytest.raises(ApiError) as e:
        FieldSelector.parse(text, PODS)
    assert e.value.code == 400
    assert e.value.message == message


def test_field_selector_required_equalities_and_rendering() -> None:
    sel = FieldSelector.parse("status.phase!=Failed,spec.nodeName=,metadata.name==x", PODS)
    assert sel.required_equalities() == {"spec.nodeName": "", "metadata.name": "x"}
    assert str(sel) == "metadata.name=x,spec.nodeName=,status.phase!=Failed"
    assert FieldSelector.parse(str(sel), PODS) == sel
    assert FieldSelector.parse("", PODS).empty and not sel.empty
    assert FieldSelector.parse("spec.unschedulable=true", NODES).matches({"spec": {"unschedulable": True}})


@given(st.text(alphabet="ab,=\\ -.", max_size=12))
def test_field_selector_escaping_round_trips(value: str) -> None:
    sel = FieldSelector.parse(f"metadata.name={escape_field_value(value)},metadata.namespace=ns", PODS)
    assert sel.required_equalities() == {"metadata.name": value, "metadata.namespace": "ns"}
    assert sel.matches({"metadata": {"name": value, "namespace": "ns"}})
    assert not sel.matches({"metadata": {"name": value + "z", "namespace": "ns"}})
