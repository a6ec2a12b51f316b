"""Kubernetes resource quantities (``k8s.io/apimachinery/pkg/api/resource``): parse, canonical form, integers.

The one implementation for the whole stack: the API server validates and canonicalises with it, the scheduler
turns requests and capacities into integers with it on its hot path (hence the dict caches in front of the
general parser). Error messages are upstream's, word for word: the API server returns them in 400s.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

__all__ = [
    "QUANTITY_FORMAT_ERROR",
    "QUANTITY_NUMERIC_ERROR",
    "QUANTITY_SUFFIX_ERROR",
    "QuantityError",
    "canonical_quantity",
    "format_quantity",
    "parse_quantity",
    "parse_quantity_with_format",
    "quantity_format",
    "quantity_to_int",
    "quantity_to_milli",
]

QUANTITY_FORMAT_ERROR = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
QUANTITY_SUFFIX_ERROR = "unable to parse quantity's suffix"
QUANTITY_NUMERIC_ERROR = "unable to parse numeric part of quantity"


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity; the message is upstream's."""


_DECIMAL_SUFFIXES: dict[str, int] = {
    "n": -9,
    "u": -6,
    "m": -3,
    "": 0,
    "k": 3,
    "M": 6,
    "G": 9,
    "T": 12,
    "P": 15,
    "E": 18,
}
_BINARY_SUFFIXES: dict[str, int] = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {v: k for k, v in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {v: k for k, v in _BINARY_SUFFIXES.items()}

# The shape upstream's parser accepts: sign, digits with an optional point, then suffix letters, an optional sign
# and digits (an exponent); which suffixes mean something is decided afterwards.
_QUANTITY_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*)([-+]?[0-9]*)")
# The common forms ("100m", "2", "512Mi") skip the general path.
_SIMPLE_QUANTITY_RE = re.compile(r"([0-9]+)(m|k|M|G|T|Ki|Mi|Gi|Ti|)")
_NANO = Fraction(1, 10**9)


def _round_up_to_nano(value: Fraction) -> Fraction:
    """Upstream keeps nano precision and rounds any finer value away from zero (a tiny request stays non-zero)."""
    if (value * 10**9).denominator == 1:
        return value
    scaled = value / _NANO
    rounded = math.ceil(scaled) if value > 0 else math.floor(scaled)
    return rounded * _NANO


@lru_cache(maxsize=8192)
def _parse_quantity_str(text: str) -> tuple[Fraction, str]:
    simple = _SIMPLE_QUANTITY_RE.fullmatch(text)
    if simple:
        digits, suffix = simple.groups()
        if suffix in _BINARY_SUFFIXES:
            return Fraction(int(digits) << _BINARY_SUFFIXES[suffix]), "BinarySI"
        return Fraction(int(digits)) * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    if not text:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    match = _QUANTITY_RE.fullmatch(text)
    if match is None:
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    sign, whole, frac, letters, exp_digits = match.groups()
    suffix = letters + exp_digits
    number = Fraction(int(whole or "0")) + (Fraction(int(frac), 10 ** len(frac)) if frac else 0)
    if suffix in _DECIMAL_SUFFIXES:
        value, fmt = number * Fraction(10) ** _DECIMAL_SUFFIXES[suffix], "DecimalSI"
    elif suffix in _BINARY_SUFFIXES:
        value, fmt = number * (1 << _BINARY_SUFFIXES[suffix]), "BinarySI"
    elif len(suffix) > 1 and suffix[0] in "eE" and re.fullmatch(r"[-+]?[0-9]+", suffix[1:]):
        exponent = int(suffix[1:])
        if abs(exponent) > 1 << 31:
            raise QuantityError(QUANTITY_SUFFIX_ERROR)
        value, fmt = number * Fraction(10) ** exponent, "DecimalExponent"
    else:
        raise QuantityError(QUANTITY_SUFFIX_ERROR)
    value = _round_up_to_nano(value)
    if fmt == "BinarySI" and 0 < value < 1:
        fmt = "DecimalSI"  # as upstream: a fractional binary amount is shown in decimal
    return (-value if sign == "-" else value), fmt


def _quantity_text(value: str | int | float) -> str:
    if isinstance(value, bool):
        raise QuantityError(QUANTITY_FORMAT_ERROR)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        # JSON numbers are accepted as quantities; repr gives the shortest exact-enough spelling
        return repr(value).replace("e+", "e")
    if isinstance(value, str):
        return value
    raise QuantityError(QUANTITY_FORMAT_ERROR)


# Plain dicts in front of the parser: the scheduler converts the same few strings ("100m", "512Mi") millions of
# times, and a dict lookup is several times cheaper than lru_cache plus argument normalisation.
_CACHE_LIMIT = 1 << 16
_value_cache: dict[str, Fraction] = {}
_milli_cache: dict[str, int] = {}
_whole_cache: dict[str, int] = {}
# For the simple forms: (thousandths per unit, units per whole) — integer arithmetic, no Fraction.
_SIMPLE_SCALE: dict[str, tuple[int, int]] = {
    "m": (1, 1000),
    "": (1000, 1),
    "k": (10**6, 1),
    "M": (10**9, 1),
    "G": (10**12, 1),
    "T": (10**15, 1),
    "Ki": (1000 << 10, 1),
    "Mi": (1000 << 20, 1),
    "Gi": (1000 << 30, 1),
    "Ti": (1000 << 40, 1),
}


def _remember(cache: dict[str, Any], key: str, value: Any) -> Any:
    if len(cache) >= _CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def parse_quantity(value: str | int | float) -> Fraction:
    """The exact value of a Kubernetes quantity ("100m", "1Gi", "2e3", "1.5", "500Ki"), nano precision.

    Raises ``QuantityError`` (a ``ValueError``) with upstream's message for malformed input.
    """
    if type(value) is str:
        found = _value_cache.get(value)
        if found is not None:
            return found
        return _remember(_value_cache, value, _parse_quantity_str(value)[0])
    if type(value) is int:
        return Fraction(value)
    return _parse_quantity_str(_quantity_text(value))[0]


def parse_quantity_with_format(value: str | int | float) -> tuple[Fraction, str]:
    """The exact value and the format family (``quantity_format``) at once, for validators that need both."""
    return _parse_quantity_str(_quantity_text(value))


def quantity_format(value: str | int | float) -> str:
    """``BinarySI``, ``DecimalSI`` or ``DecimalExponent``: the family the quantity was written in."""
    return _parse_quantity_str(_quantity_text(value))[1]


def quantity_to_milli(value: str | int | float) -> int:
    """The quantity in thousandths, rounded up as upstream ``MilliValue()`` does ("100m" → 100, "1" → 1000)."""
    if type(value) is str:
        found = _milli_cache.get(value)
        if found is not None:
            return found
        simple = _SIMPLE_QUANTITY_RE.fullmatch(value)
        if simple:
            milli = int(simple.group(1)) * _SIMPLE_SCALE[simple.group(2)][0]
        else:
            milli = math.ceil(_parse_quantity_str(value)[0] * 1000)
        return _remember(_milli_cache, value, milli)
    if type(value) is int:
        return value * 1000
    return math.ceil(_parse_quantity_str(_quantity_text(value))[0] * 1000)


def quantity_to_int(value: str | int | float) -> int:
    """The quantity as an integer, rounded up as upstream ``Value()`` does ("1Gi" → 1073741824, "100m" → 1)."""
    if type(value) is str:
        found = _whole_cache.get(value)
        if found is not None:
            return found
        simple = _SIMPLE_QUANTITY_RE.fullmatch(value)
        if simple:
            milli_per_unit, units_per_whole = _SIMPLE_SCALE[simple.group(2)]
            number = int(simple.group(1))
            whole = -(-number // units_per_whole) if units_per_whole > 1 else number * milli_per_unit // 1000
        else:
            whole = math.ceil(_parse_quantity_str(value)[0])
        return _remember(_whole_cache, value, whole)
    if type(value) is int:
        return value
    return math.ceil(_parse_quantity_str(_quantity_text(value))[0])


def canonical_quantity(value: str | int | float) -> str:
    """The quantity as upstream serialises it: "1.5" → "1500m", "1536Mi" → "1536Mi", "1024Ki" → "1Mi"."""
    amount, fmt = _parse_quantity_str(_quantity_text(value))
    return format_quantity(amount, fmt)


def format_quantity(amount: Fraction, fmt: str = "DecimalSI") -> str:
    """Render an exact amount in upstream's canonical form for the given format family."""
    if amount == 0:
        return "0"
    sign = "-" if amount < 0 else ""
    magnitude = -amount if amount < 0 else amount
    if fmt == "BinarySI" and magnitude >= 1024 and magnitude.denominator == 1:
        number, exponent = int(magnitude), 0
        while number % 1024 == 0 and exponent < 60:
            number //= 1024
            exponent += 10
        return f"{sign}{number}{_BINARY_BY_EXPONENT.get(exponent, '')}"
    # Decimal: the largest exponent (a multiple of 3) that keeps the mantissa whole; nano is always enough.
    scaled = magnitude * 10**9
    if scaled.denominator != 1:  # finer than nano cannot come out of the parser; round up to be safe
        scaled = Fraction(math.ceil(scaled))
    mantissa, exponent = int(scaled), -9
    while mantissa % 1000 == 0 and (exponent < 18 or fmt == "DecimalExponent"):
        mantissa //= 1000
        exponent += 3
    if fmt == "DecimalExponent":
        return f"{sign}{mantissa}" + (f"e{exponent}" if exponent else "")
    return f"{sign}{mantissa}{_DECIMAL_BY_EXPONENT[exponent]}"
