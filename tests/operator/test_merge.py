"""library-go's sparse-config merge: laws checked with hypothesis, and the cases its own tests name."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kubesched.operator.merge import MergeError, decode_snippet, merge_config, merge_into, to_json

KEYS = st.sampled_from(["a", "b", "c", "profiles", "leaderElection", "x"])
SCALARS = st.none() | st.booleans() | st.integers(-5, 5) | st.text("xyz", max_size=3)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=10,
)
CONFIGS = st.dictionaries(KEYS, VALUES, max_size=4)


def reference(base: Any, overlay: Any) -> Any:
    """The rules written as plainly as possible: the model the implementation is checked against."""
    if not isinstance(overlay, dict):
        return overlay
    out = dict(base) if isinstance(base, dict) else {}
    for k, v in overlay.items():
        out[k] = reference(out.get(k), v)
    return out


@given(CONFIGS, CONFIGS)
def test_merge_matches_the_model(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    assert merge_config(base, overlay) == reference(base, overlay)


@given(CONFIGS, CONFIGS)
def test_inputs_are_not_modified(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    b, o = copy.deepcopy(base), copy.deepcopy(overlay)
    merge_config(base, overlay)
    assert (base, overlay) == (b, o)


@given(CONFIGS, CONFIGS)
def test_idempotent(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    once = merge_config(base, overlay)
    assert merge_config(once, overlay) == once


@given(CONFIGS)
def test_self_merge_and_empty_are_identities(config: dict[str, Any]) -> None:
    assert merge_config(config, config) == config
    assert merge_config(config, {}) == config
    assert merge_config(config, None, "", b"  \n") == config


def replaces_a_map_that_comes_back(b: Any, c: Any) -> bool:
    """Whether ``b`` sets a non-mapping at a path where the later ``c`` sets a mapping."""
    if not isinstance(c, dict):
        return False
    if not isinstance(b, dict):
        return True
    return any(k in b and replaces_a_map_that_comes_back(b[k], v) for k, v in c.items())


@given(CONFIGS, CONFIGS, CONFIGS)
def test_associative_where_it_holds(a: dict[str, Any], b: dict[str, Any], c: dict[str, Any]) -> None:
    # Overlays compose: merging b then c equals merging (b merged with c) once ...
    assume(not any(replaces_a_map_that_comes_back(b.get(k), v) for k, v in c.items() if k in b))
    assert merge_config(a, b, c) == merge_config(a, merge_config(b, c))


def test_where_associativity_fails() -> None:
    # ... except where b wipes a mapping of a's with a scalar and c brings a mapping back: applied in turn, c
    # merges into the empty mapping; merged first, (b, c) carries c's mapping, which merges into a's.
    a, b, c = {"k": {"x": 1}}, {"k": None}, {"k": {}}
    assert merge_config(a, b, c) == {"k": {}}
    assert merge_config(a, merge_config(b, c)) == {"k": {"x": 1}}


@given(CONFIGS, CONFIGS)
def test_overlay_never_loses_keys_it_does_not_mention(base: dict[str, Any], overlay: dict[str, Any]) -> None:
    merged = merge_config(base, overlay)

    def check(b: Any, o: Any, m: Any) -> None:
        if not isinstance(o, dict):
            assert m == o
            return
        assert isinstance(m, dict)
        for k, v in (b if isinstance(b, dict) else {}).items():
            if k not in o:
                assert m[k] == v  # untouched
        for k, v in o.items():
            check(b.get(k) if isinstance(b, dict) else None, v, m[k])

    check(base, overlay, merged)


@given(st.lists(SCALARS, max_size=4), st.lists(SCALARS, max_size=4))
def test_lists_replace_wholesale(base: list[Any], overlay: list[Any]) -> None:
    merged = merge_config({"profiles": base, "keep": 1}, {"profiles": overlay})
    assert merged == {"profiles": overlay, "keep": 1}


@given(CONFIGS)
@settings(max_examples=50)
def test_text_json_and_yaml_inputs_agree(config: dict[str, Any]) -> None:
    as_json = json.dumps(config)
    assert (
        merge_config({"k": 1}, as_json)
        == merge_config({"k": 1}, yaml.safe_dump(config))
        == merge_config({"k": 1}, config)
    )
    assert merge_config(to_json(config)) == config
    assert merge_config(as_json.encode()) == config


def test_library_go_cases() -> None:
    # "nil out": null replaces, it does not delete.
    assert merge_config({"alpha": "first"}, {"alpha": None}) == {"alpha": None}
    # "" forces an empty value; a new key is copied; a map merges into a scalar by replacing it with a map.
    assert merge_config({"a": "x", "b": 1}, {"a": "", "c": {"d": 1}, "b": {"e": 2}}) == {
        "a": "",
        "b": {"e": 2},
        "c": {"d": 1},
    }
    base = {
        "apiVersion": "v1",
        "kind": "K",
        "servingInfo": {"cipherSuites": ["a", "b"], "minTLSVersion": "1"},
    }
    assert merge_config(base, {"servingInfo": {"cipherSuites": ["c"]}})["servingInfo"] == {
        "cipherSuites": ["c"],
        "minTLSVersion": "1",
    }


@pytest.mark.parametrize(
    "overlay",
    [{"apiVersion": "other/v1"}, {"kind": "Other"}, {"apiVersion": "v1", "kind": "Other"}],
)
def test_api_version_and_kind_guard(overlay: dict[str, Any]) -> None:
    base = {"apiVersion": "v1", "kind": "K", "a": 1}
    with pytest.raises(MergeError, match="does not equal"):
        merge_config(base, overlay, names=("the default", "spec.unsupportedConfigOverrides"))
    # Restating the same apiVersion and kind is fine.
    assert merge_config(base, {"apiVersion": "v1", "kind": "K", "a": 2})["a"] == 2


@given(st.sampled_from(["apiVersion", "kind"]), st.text("abc/", min_size=1, max_size=5))
def test_guard_property(field: str, value: str) -> None:
    base = {"apiVersion": "g/v1", "kind": "K"}
    if value == base[field]:
        assert merge_config(base, {field: value}) == base
    else:
        with pytest.raises(MergeError):
            merge_config(base, {field: value})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "must be a mapping, not a list"),
        ('"just a string"', "must be a mapping, not a string"),
        ("{a: [1, 2", "is not valid YAML or JSON at line"),
    ],
)
def test_bad_snippets_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(MergeError, match=message) as info:
        merge_config({"a": 1}, text, names=("base", "spec.unsupportedConfigOverrides"))
    assert "spec.unsupportedConfigOverrides" in str(info.value) and "\n" not in str(info.value)


def test_decode_and_merge_into() -> None:
    assert decode_snippet("null") is None and decode_snippet(b"") is None
    base: dict[str, Any] = {"a": {"b": 1}}
    assert merge_into(base, {"a": {"c": 2}}) is base and base == {"a": {"b": 1, "c": 2}}
    assert merge_config() == {}
