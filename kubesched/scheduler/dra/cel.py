"""Device selectors: CEL expressions over one device, as upstream's ``dynamic-resource-allocation/cel``.

Expressions are compiled once (``compile_selector`` caches by text) with the ``common-expression-language``
package (Rust's cel engine behind Python bindings), and evaluated against one device:

- ``device.driver`` (string), ``device.attributes["domain"]["id"]`` and ``device.capacity["domain"]["id"]``.
  An unqualified attribute or capacity name belongs to the driver's domain, as upstream. A domain the device
  has nothing in reads as an empty map (upstream returns an empty map for unknown domains), so
  ``"model" in device.attributes["other.io"]`` is false rather than an error; a missing *name* inside a domain
  is a runtime error, as upstream.
- attribute values: ``int``, ``bool``, ``string``, and ``version`` (a semantic version, compared with
  ``compareTo``/``isGreaterThan``/``isLessThan``/``==`` against ``semver("1.2.3")``);
- capacities are quantities: ``quantity("40Gi")``, ``q.compareTo(other)``, ``isGreaterThan``, ``isLessThan``,
  ``sign()``, ``isInteger()``, ``asInteger()``, ``asApproximateFloat()``, ``add``, ``sub`` and ``==`` by value.

Not supported (the library has no hook for them): CEL's static type check (an expression that does not return
a bool is caught at evaluation, not at compile time), the cost limit, and ``device.allowMultipleAllocations``
is always false. Quantities and versions are represented as small maps, so ``device.capacity[...].x > 3``
(a type error upstream) is also an error here, but with the library's wording.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from types import ModuleType

from kubesched.apimachinery.quantity import QuantityError, parse_quantity

_Q = "__quantity_milli__"
_V = "__semver__"
_DOMAIN_RE = re.compile(r"device\s*\.\s*(?:attributes|capacity)\s*\[\s*[\"']([^\"']+)[\"']\s*\]")
_SEMVER_RE = re.compile(
    r"^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-([0-9A-Za-z.-]+))?(?:\+[0-9A-Za-z.-]+)?$"
)


class SelectorError(Exception):
    """A selector that does not compile, or that failed at runtime for one device."""


def _quantity(text: Any) -> dict[str, int]:
    try:
        value = parse_quantity(str(text))
    except QuantityError as e:
        raise ValueError(f"invalid quantity {text!r}: {e}") from None
    return {_Q: int(value * 1000)}


def _semver_key(text: str) -> list[Any]:
    m = _SEMVER_RE.match(text)
    if m is None:
        raise ValueError(f"invalid semantic version {text!r}")
    pre = m.group(4)
    # A release sorts after its pre-releases: [major, minor, patch, 1] vs [.., 0, pre].
    return [int(m.group(1)), int(m.group(2)), int(m.group(3)), 0 if pre else 1, pre or ""]


def _semver(text: Any) -> dict[str, Any]:
    return {_V: _semver_key(str(text))}


def _ordered(a: Any, b: Any) -> tuple[Any, Any]:
    if isinstance(a, dict) and isinstance(b, dict):
        if _Q in a and _Q in b:
            return a[_Q], b[_Q]
        if _V in a and _V in b:
            return tuple(a[_V]), tuple(b[_V])
    raise ValueError("compareTo: both sides must be quantities or both versions")


def _compare(a: Any, b: Any) -> int:
    x, y = _ordered(a, b)
    return (x > y) - (x < y)


def _milli(a: Any) -> int:
    if isinstance(a, dict) and _Q in a:
        return int(a[_Q])
    raise ValueError("not a quantity")


def _functions() -> dict[str, Any]:
    return {
        "quantity": _quantity,
        "semver": _semver,
        "compareTo": _compare,
        "isGreaterThan": lambda a, b: _compare(a, b) > 0,
        "isLessThan": lambda a, b: _compare(a, b) < 0,
        "sign": lambda a: (_milli(a) > 0) - (_milli(a) < 0),
        "isInteger": lambda a: _milli(a) % 1000 == 0,
        "asInteger": lambda a: _milli(a) // 1000,
        "asApproximateFloat": lambda a: _milli(a) / 1000.0,
        "add": lambda a, b: {_Q: _milli(a) + (_milli(b) if isinstance(b, dict) else int(b) * 1000)},
        "sub": lambda a, b: {_Q: _milli(a) - (_milli(b) if isinstance(b, dict) else int(b) * 1000)},
    }


_FUNCTIONS = _functions()


@functools.cache
def _cel() -> ModuleType:
    """The ``cel`` package, imported on first use: its ``__init__`` also loads its command-line interface
    (prompt_toolkit), half a second or more of start-up that a scheduler without device claims never needs."""
    import cel

    return cel


class Selector:
    """One compiled expression and the attribute domains it names (so they exist, empty, on every device)."""

    __slots__ = ("domains", "expression", "program")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        try:
            self.program = _cel().compile(expression)
        except Exception as e:  # the library raises ValueError or RuntimeError with its parser's message
            raise SelectorError(f"compilation failed: {_one_line(e)}") from None
        self.domains = tuple(sorted(set(_DOMAIN_RE.findall(expression))))

    def matches(self, device: DeviceView) -> bool:
        ctx = _cel().Context()
        for name, fn in _FUNCTIONS.items():
            ctx.add_function(name, fn)
        ctx.add_variable("device", device.variable(self.domains))
        try:
            result = self.program.execute(ctx)
        except KeyError as e:
            raise SelectorError(f"no such key: {e.args[0] if e.args else ''}") from None
        except Exception as e:
            raise SelectorError(_one_line(e)) from None
        if not isinstance(result, bool):
            raise SelectorError(f"expression must return a bool, got {type(result).__name__}")
        return result


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())


@functools.lru_cache(maxsize=4096)
def compile_selector(expression: str) -> Selector:
    """The compiled selector for ``expression`` (cached; raises ``SelectorError`` when it does not compile)."""
    return Selector(expression)


def _split_name(name: str, driver: str) -> tuple[str, str]:
    domain, sep, ident = name.rpartition("/")
    return (domain, ident) if sep else (driver, name)


def _attribute_value(raw: Mapping[str, Any]) -> Any:
    if "int" in raw:
        return int(raw["int"])
    if "bool" in raw:
        return bool(raw["bool"])
    if "string" in raw:
        return str(raw["string"])
    if "version" in raw:
        try:
            return _semver(raw["version"])
        except ValueError:
            return None
    return None


class DeviceView:
    """A device of a ResourceSlice as the CEL environment sees it (built once per device and slice version)."""

    __slots__ = ("_variable", "attributes", "capacity", "driver", "name")

    def __init__(self, driver: str, device: Mapping[str, Any]) -> None:
        self.driver = driver
        self.name = str(device.get("name") or "")
        attributes: dict[str, dict[str, Any]] = {}
        for key, raw in (device.get("attributes") or {}).items():
            domain, ident = _split_name(str(key), driver)
            value = _attribute_value(raw or {})
            if value is not None:
                attributes.setdefault(domain, {})[ident] = value
        capacity: dict[str, dict[str, Any]] = {}
        for key, raw in (device.get("capacity") or {}).items():
            domain, ident = _split_name(str(key), driver)
            try:
                capacity.setdefault(domain, {})[ident] = _quantity((raw or {}).get("value", "0"))
            except ValueError:
                continue
        self.attributes = attributes
        self.capacity = capacity
        self._variable: dict[tuple[str, ...], dict[str, Any]] = {}

    def attribute(self, qualified: str) -> Any:
        """The value of a ``domain/id`` attribute (``matchAttribute``), or None when the device lacks it."""
        domain, ident = _split_name(qualified, self.driver)
        return self.attributes.get(domain, {}).get(ident)

    def variable(self, domains: tuple[str, ...]) -> dict[str, Any]:
        found = self._variable.get(domains)
        if found is None:
            empty: dict[str, dict[str, Any]] = {d: {} for d in domains}
            attributes = empty | self.attributes
            capacity = empty | self.capacity
            found = {
                "driver": self.driver,
                "attributes": attributes,
                "capacity": capacity,
                "allowMultipleAllocations": False,
            }
            self._variable[domains] = found
        return found


def quantity_value(q: Mapping[str, Any]) -> Fraction:
    """A quantity map's value (for tests and explanations)."""
    return Fraction(int(q[_Q]), 1000)


__all__ = ["DeviceView", "Selector", "SelectorError", "compile_selector", "quantity_value"]
