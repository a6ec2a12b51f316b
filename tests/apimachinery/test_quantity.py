"""Quantities: exact values against a model, canonical form round-trips, integer views, memoised paths agree."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.apimachinery import quantity as q
from kubesched.apimachinery.quantity import (
    QUANTITY_FORMAT_ERROR,
    QUANTITY_SUFFIX_ERROR,
    QuantityError,
    canonical_quantity,
    format_quantity,
    parse_quantity,
    parse_quantity_with_format,
    quantity_format,
    quantity_to_int,
    quantity_to_milli,
)

DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}


def ceil_nano(x: Fraction) -> Fraction:
    """Upstream keeps nano precision, rounding finer amounts away from zero."""
    n = x * 10**9
    return Fraction(math.ceil(n) if x > 0 else math.floor(n), 10**9)


@st.composite
def written(draw: st.DrawFn) -> tuple[str, Fraction, str]:
    """A quantity as someone might write it, with its exact value and format family (the model)."""
    sign = draw(st.sampled_from(["", "+", "-"]))
    whole = draw(st.integers(0, 10**7))
    frac = draw(st.one_of(st.none(), st.text("0123456789", min_size=0, max_size=4)))
    number = Fraction(whole) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    text = f"{sign}{whole}" + ("" if frac is None else f".{frac}")
    kind = draw(st.sampled_from(["decimal", "binary", "exponent"]))
    if kind == "decimal":
        suffix = draw(st.sampled_from(sorted(DECIMAL)))
        value, fmt = number * Fraction(10) ** DECIMAL[suffix], "DecimalSI"
    elif kind == "binary":
        suffix = draw(st.sampled_from(sorted(BINARY)))
        value, fmt = number * 2 ** BINARY[suffix], "BinarySI"
    else:
        exp = draw(st.integers(-12, 12))
        suffix = draw(st.sampled_from(["e", "E"])) + str(exp)
        value, fmt = number * Fraction(10) ** exp, "DecimalExponent"
    value = ceil_nano(value)
    if fmt == "BinarySI" and 0 < value < 1:
        fmt = "DecimalSI"
    return text + suffix, (-value if sign == "-" else value), fmt


@given(written())
def test_parse_agrees_with_the_model(case: tuple[str, Fraction, str]) -> None:
    text, value, fmt = case
    assert parse_quantity(text) == value
    assert parse_quantity_with_format(text) == (value, fmt)
    assert quantity_format(text) == fmt


@given(written())
def test_canonical_form_round_trips_and_is_idempotent(case: tuple[str, Fraction, str]) -> None:
    text, value, _ = case
    canonical = canonical_quantity(text)
    assert parse_quantity(canonical) == value
    assert canonical_quantity(canonical) == canonical
    assert format_quantity(*parse_quantity_with_format(text)) == canonical


@given(written())
def test_integer_views_round_up(case: tuple[str, Fraction, str]) -> None:
    text, value, _ = case
    assert quantity_to_milli(text) == math.ceil(value * 1000)
    assert quantity_to_int(text) == math.ceil(value)
    # A second call is answered from the caches: same answer.
    assert quantity_to_milli(text) == math.ceil(value * 1000)
    assert quantity_to_int(text) == math.ceil(value)


@given(st.integers(0, 10**9), st.sampled_from(["", "m", "k", "M", "G", "T", "Ki", "Mi", "Gi", "Ti"]))
def test_fast_path_agrees_with_general_parser(n: int, suffix: str) -> None:
    text = f"{n}{suffix}"
    exact = q._parse_quantity_str(text)[0]  # the general path (lru-cached, not the dict caches)
    assert q.quantity_to_milli(text) == math.ceil(exact * 1000)
    assert q.quantity_to_int(text) == math.ceil(exact)
    assert q.parse_quantity(text) == exact


@given(st.integers(-(10**12), 10**12))
def test_numbers_are_quantities(n: int) -> None:
    assert parse_quantity(n) == n
    assert quantity_to_int(n) == n
    assert quantity_to_milli(n) == n * 1000
    assert canonical_quantity(n) == canonical_quantity(str(n))


def test_floats_parse_by_their_shortest_spelling() -> None:
    assert parse_quantity(0.25) == Fraction(1, 4)
    assert quantity_to_milli(0.25) == 250
    assert parse_quantity(1e20) == 10**20


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", QUANTITY_FORMAT_ERROR),
        ("abc", QUANTITY_FORMAT_ERROR),
        ("1 Gi", QUANTITY_FORMAT_ERROR),
        ("1.2.3", QUANTITY_FORMAT_ERROR),
        ("1Ki2", QUANTITY_SUFFIX_ERROR),
        ("1e", QUANTITY_SUFFIX_ERROR),
        ("1mi", QUANTITY_SUFFIX_ERROR),
    ],
)
def test_malformed_quantities_have_upstream_messages(text: str, message: str) -> None:
    with pytest.raises(QuantityError) as e:
        parse_quantity(text)
    assert str(e.value) == message
    with pytest.raises(ValueError):
        quantity_to_milli(text)


@pytest.mark.parametrize("bad", [True, None, [1], {"a": 1}])
def test_non_quantities_are_rejected(bad: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(bad)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1.5", "1500m"),
        ("1536Mi", "1536Mi"),
        ("1024Ki", "1Mi"),
        ("0.5Ki", "512"),
        ("1e3", "1e3"),
        ("100m", "100m"),
    ],
)
def test_canonical_examples(text: str, canonical: str) -> None:
    assert canonical_quantity(text) == canonical
