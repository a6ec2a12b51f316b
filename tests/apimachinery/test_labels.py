"""Selectors: the string and structured spellings parse to the same requirements and match alike."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.apimachinery.labels import (
    FieldSelector,
    LabelSelector,
    Op,
    Requirement,
    SelectorError,
    escape_field_value,
    parse_int64,
)

KEYS = ["a", "b", "app.kubernetes.io/name", "x_y"]
VALUES = ["", "v", "v2", "7", "12", "007"]
label_sets = st.dictionaries(st.sampled_from(KEYS), st.sampled_from([*VALUES, "x", "-3", "+4"]), max_size=4)

# One requirement in the structured form: (key, operator, values).
expression = st.one_of(
    st.tuples(
        st.sampled_from(KEYS), st.sampled_from(["In", "NotIn"]), st.lists(st.sampled_from(VALUES), min_size=1)
    ),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(["Exists", "DoesNotExist"]), st.just([])),
)
numeric = st.tuples(
    st.sampled_from(KEYS),
    st.sampled_from(["Gt", "Lt"]),
    st.sampled_from(["0", "5", "3", "12"]).map(lambda v: [v]),
)


def as_text(key: str, operator: str, values: list[str]) -> str:
    """The string-syntax spelling of one structured requirement, written independently of ``__str__``."""
    if operator == "Exists":
        return key
    if operator == "DoesNotExist":
        return f"!{key}"
    if operator in ("Gt", "Lt"):
        return f"{key}{'>' if operator == 'Gt' else '<'}{values[0]}"
    return f"{key} {operator.lower()} ({','.join(values)})"


def model(key: str, operator: str, values: list[str], labels: dict[str, str]) -> bool:
    have = labels.get(key)
    if operator == "In":
        return have in values
    if operator == "NotIn":
        return have not in values
    if operator == "Exists":
        return have is not None
    if operator == "DoesNotExist":
        return have is None
    n = parse_int64(have) if have is not None else None
    return n is not None and (n > int(values[0]) if operator == "Gt" else n < int(values[0]))


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    st.lists(expression, max_size=4),
    st.lists(label_sets, min_size=1, max_size=4),
)
def test_structured_and_string_forms_agree(
    match_labels: dict[str, str], exprs: list[tuple[str, str, list[str]]], labels_list: list[dict[str, str]]
) -> None:
    structured = LabelSelector.from_dict(
        {
            "matchLabels": match_labels,
            "matchExpressions": [{"key": k, "operator": o, "values": v} for k, o, v in exprs],
        }
    )
    text = ",".join([f"{k}={v}" for k, v in match_labels.items()] + [as_text(*e) for e in exprs])
    parsed = LabelSelector.parse(text)
    assert parsed == structured
    assert str(parsed) == str(structured)
    for labels in labels_list:
        want = all(labels.get(k) == v for k, v in match_labels.items()) and all(
            model(*e, labels) for e in exprs
        )
        assert structured.matches(labels) is want
        assert parsed.matches(labels) is want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(expression, numeric), max_size=5))
def test_string_form_round_trips(exprs: list[tuple[str, str, list[str]]]) -> None:
    sel = LabelSelector.parse(",".join(as_text(*e) for e in exprs))
    again = LabelSelector.parse(str(sel))
    assert again == sel
    assert str(again) == str(sel)


@given(st.one_of(expression, numeric), st.lists(label_sets, min_size=1, max_size=4))
def test_node_selector_requirements_match_the_model(
    expr: tuple[str, str, list[str]], labels_list: list[dict[str, str]]
) -> None:
    key, operator, values = expr
    req = Requirement.from_node_selector({"key": key, "operator": operator, "values": values})
    assert req == Requirement.make(key, operator, values)
    text = LabelSelector.parse(as_text(*expr))
    for labels in labels_list:
        assert req.matches(labels) is model(key, operator, values, labels)
        assert text.matches(labels) is req.matches(labels)


def test_directly_built_requirements_match_like_validated_ones() -> None:
    # The scheduler builds requirements from labels it already has, with a frozenset and a plain "In".
    direct = Requirement("a", "In", frozenset({"x", "y"}))
    made = Requirement.make("a", Op.IN, ["y", "x"])
    for labels in ({"a": "x"}, {"a": "z"}, {}):
        assert direct.matches(labels) is made.matches(labels)
    assert str(direct) == str(made) == "a in (x,y)"
    assert not Requirement("a", "NotIn", frozenset({"x"})).matches({"a": "x"})


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ({"key": "a", "operator": "=", "values": ["x"]}, '"=" is not a valid node selector operator'),
        ({"key": "a", "operator": "In", "values": []}, "values set can't be empty"),
        ({"key": "a", "operator": "Gt", "values": ["x"]}, "the value must be an integer"),
        ({"key": "a", "operator": "Gt", "values": ["1", "2"]}, "exactly one value is required"),
        ({"key": "a", "operator": "Exists", "values": ["x"]}, "values set must be empty"),
        ({"key": "-a", "operator": "Exists"}, 'key: Invalid value: "-a"'),
        ({"key": "a", "operator": "In", "values": [5]}, "must be a string"),
        ({"key": "a", "operator": "In", "values": "abc"}, "must be a list of strings"),
        ({"key": None, "operator": "Exists"}, "must be a string"),
    ],
)
def test_node_selector_errors(expr: dict[str, Any], message: str) -> None:
    with pytest.raises(SelectorError, match=message):
        Requirement.from_node_selector(expr)


def test_nothing_everything_and_from_set() -> None:
    assert not LabelSelector.parse(None).matches({}) and LabelSelector.parse(None).matches_nothing
    assert (
        LabelSelector.parse({}).empty and LabelSelector.parse("").empty and LabelSelector.everything().empty
    )
    assert LabelSelector.from_set({"a": "1", "b": "2"}) == LabelSelector.parse("b=2,a=1")
    with pytest.raises(SelectorError, match='"Gt" is not a valid label selector operator'):
        LabelSelector.from_dict({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]})


@given(st.text(alphabet="0123456789+- x_.", max_size=22))
def test_parse_int64_is_go_strconv(text: str) -> None:
    body = text[1:] if text[:1] in ("+", "-") else text
    want = int(text) if body and body.isdigit() and -(2**63) <= int(text) < 2**63 else None
    assert parse_int64(text) == want


class Fields:
    """A resource type with two selectable fields."""

    getters = {"metadata.name": lambda o: o.get("name", ""), "spec.node": lambda o: o.get("node", "")}

    def field_getter(self, field: str) -> Any:
        return self.getters.get(field)


@given(st.text(alphabet="ab,=\\ -.!", max_size=10), st.text(alphabet="ab,=\\", max_size=6))
def test_field_selector_escaping_round_trips(name: str, node: str) -> None:
    sel = FieldSelector.parse(
        f"metadata.name={escape_field_value(name)},spec.node!={escape_field_value(node)}", Fields()
    )
    assert FieldSelector.parse(str(sel), Fields()) == sel
    assert sel.matches({"name": name, "node": node + "z"})
    assert not sel.matches({"name": name, "node": node})


def test_field_selector_errors() -> None:
    with pytest.raises(SelectorError, match=r"field label not supported: spec\.other"):
        FieldSelector.parse("spec.other=1", Fields())
    with pytest.raises(SelectorError, match=r"can't understand 'metadata\.name'"):
        FieldSelector.parse("metadata.name", Fields())
