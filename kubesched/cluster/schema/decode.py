"""What kube-apiserver's decoding into typed Go structs refuses, checked against the published schemas.

Each definition is compiled once into a small closure tree (no generic JSON-Schema interpreter on the request
path): a struct checks the type of each of its fields, a list each item, a map each value. The outcome is what
upstream's JSON decoder reports:

- a value of the wrong JSON type, or an integer outside its Go type's range, is a decoding error: 400 with
  ``json: cannot unmarshal string into Go struct field PodSpec.spec.tolerations of type []v1.Toleration`` (the Go
  struct holding the field, the path of field names from the object's root, the field's Go type);
- a field the struct does not have is an *unknown field* (``spec.containers[0].foo``): an error under
  ``fieldValidation=Strict``, a warning under ``Warn`` (the default), silently dropped under ``Ignore``; in the last
  two cases it is removed from the object, as a Go struct never holds it;
- a field the schema lists as required but the object lacks is reported for validation (422 ``Required value``).

``null`` decodes to the zero value in Go, so it is accepted anywhere. Enumerations are not part of the published
schemas (only ``apiVersion``/``kind``, checked elsewhere); the kinds' validators hold them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from kubesched.cluster.schema.published import Schema, definitions, ref_name

# A location in the object, built only as deep as the walk goes and turned into text only when reported:
# None for the root, else (parent, segment) with a field name (str), a list index (int) or a map key ((key,)).
Path = tuple[Any, Any] | None


class DecodeError(Exception):
    """The body does not decode into the kind's Go type (400 BadRequest)."""


class _Mismatch(Exception):
    """A value that does not fit its Go type; the enclosing struct adds where it is."""

    def __init__(self, got: str, go_type: str) -> None:
        self.got = got
        self.go_type = go_type


class Findings:
    """What one check found besides decoding errors."""

    __slots__ = ("missing", "unknown")

    def __init__(self) -> None:
        self.unknown: list[tuple[dict[str, Any], str, Path]] = []
        self.missing: list[tuple[Path, str]] = []


Checker = Callable[[Any, Findings, Path], None]

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def _got(value: Any) -> str:
    """How Go's decoder names the JSON value it could not place."""
    t = type(value)
    if t is str:
        return "string"
    if t is bool:
        return "bool"
    if t is float:
        # orjson reads integers beyond 64 bits as floats: show them as the integer the client wrote.
        return f"number {int(value)}" if value.is_integer() and abs(value) >= 2**63 else f"number {value!r}"
    if t is int:
        return f"number {value}"
    if t is list:
        return "array"
    if t is dict:
        return "object"
    return "value"


def _got_plain(value: Any) -> str:
    """Go names numbers without their literal when the target is not numeric."""
    t = type(value)
    return "number" if t is int or t is float else _got(value)


def render(path: Path, last: str | None = None) -> str:
    """``spec.containers[0].ports[1].hostPort`` from a path chain (plus an optional last field)."""
    parts: list[Any] = [] if last is None else [last]
    while path is not None:
        path, seg = path
        parts.append(seg)
    out = ""
    for seg in reversed(parts):
        if type(seg) is int:
            out += f"[{seg}]"
        elif type(seg) is tuple:
            out += f"[{seg[0]}]"
        else:
            out += f".{seg}" if out else seg
    return out


def _go_path(path: Path, last: str) -> str:
    """The field names from the root, as Go's decoder reports them (no indices, no map keys)."""
    parts = [last]
    while path is not None:
        path, seg = path
        if type(seg) is str:
            parts.append(seg)
    return ".".join(reversed(parts))


def go_type_name(definition: str) -> str:
    """``v1.PodSpec`` for ``io.k8s.api.core.v1.PodSpec``, ``resource.Quantity`` for the quantity."""
    pieces = definition.split(".")
    return ".".join(pieces[-2:])


# -- leaves --------------------------------------------------------------------------------------------------


def _any(value: Any, found: Findings, path: Path) -> None:
    return None


def _string(value: Any, found: Findings, path: Path) -> None:
    if type(value) is not str:
        raise _Mismatch(_got_plain(value), "string")


def _bool(value: Any, found: Findings, path: Path) -> None:
    if type(value) is not bool:
        raise _Mismatch(_got_plain(value), "bool")


def _number(value: Any, found: Findings, path: Path) -> None:
    t = type(value)
    if t is not int and t is not float:
        raise _Mismatch(_got_plain(value), "float64")


def _integer(go: str) -> Checker:
    lo, hi = _INT_RANGES.get(go, _INT_RANGES["int64"])

    def check(value: Any, found: Findings, path: Path) -> None:
        if type(value) is int:
            if lo <= value <= hi:
                return
            raise _Mismatch(_got(value), go)
        raise _Mismatch(_got(value) if type(value) is float else _got_plain(value), go)

    return check


def _quantity(value: Any, found: Findings, path: Path) -> None:
    t = type(value)
    if t is not str and t is not int and t is not float:
        raise _Mismatch(_got_plain(value), "resource.Quantity")


def _int_or_string(value: Any, found: Findings, path: Path) -> None:
    t = type(value)
    if t is str:
        return
    if t is int and _INT_RANGES["int32"][0] <= value <= _INT_RANGES["int32"][1]:
        return
    raise _Mismatch(_got(value) if t is int or t is float else _got_plain(value), "intstr.IntOrString")


_SPECIAL: dict[str, tuple[Checker, str]] = {
    "io.k8s.apimachinery.pkg.api.resource.Quantity": (_quantity, "resource.Quantity"),
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": (_int_or_string, "intstr.IntOrString"),
}

# -- containers ------------------------------------------------------------------------------------------------


def _list(item: Checker, go: str) -> Checker:
    def check(value: Any, found: Findings, path: Path) -> None:
        if type(value) is not list:
            raise _Mismatch(_got_plain(value), go)
        for i, x in enumerate(value):
            if x is not None:
                item(x, found, (path, i))

    return check


def _map(item: Checker, go: str) -> Checker:
    if item is _any:

        def check_any(value: Any, found: Findings, path: Path) -> None:
            if type(value) is not dict:
                raise _Mismatch(_got_plain(value), go)

        return check_any

    def check(value: Any, found: Findings, path: Path) -> None:
        if type(value) is not dict:
            raise _Mismatch(_got_plain(value), go)
        for k, x in value.items():
            if x is not None:
                item(x, found, (path, (k,)))

    return check


def _struct(short: str, go: str, props: dict[str, Checker], required: tuple[str, ...]) -> Checker:
    def check(value: Any, found: Findings, path: Path) -> None:
        if type(value) is not dict:
            raise _Mismatch(_got_plain(value), go)
        get = props.get
        for key, x in value.items():
            fn = get(key)
            if fn is None:
                found.unknown.append((value, key, path))
                continue
            if x is None or fn is _any:
                continue
            if fn is _string and type(x) is str:
                continue  # the commonest field, checked without a call
            try:
                fn(x, found, (path, key))
            except _Mismatch as m:
                raise DecodeError(
                    f"json: cannot unmarshal {m.got} into Go struct field {short}.{_go_path(path, key)} "
                    f"of type {m.go_type}"
                ) from None
        for key in required:
            if value.get(key) is None:
                found.missing.append((path, key))

    return check


# -- compiling -------------------------------------------------------------------------------------------------


def _primary_type(schema: Schema) -> str | None:
    t = schema.get("type")
    if isinstance(t, list):
        rest = [x for x in t if x != "null"]
        return rest[0] if rest else None
    return t if isinstance(t, str) else None


class _Compiler:
    def __init__(self, defs: dict[str, Schema]) -> None:
        self.defs = defs
        self.done: dict[str, tuple[Checker, str]] = {}

    def ref(self, name: str) -> tuple[Checker, str]:
        got = self.done.get(name)
        if got is not None:
            return got
        if name in _SPECIAL:
            return _SPECIAL[name]
        schema = self.defs.get(name)
        if schema is None:
            return _any, "interface {}"
        if "properties" in schema:
            # Recursive definitions (JSONSchemaProps) resolve through a cell filled once the struct is built.
            cell: list[Checker] = []

            def forward(value: Any, found: Findings, path: Path) -> None:
                cell[0](value, found, path)

            go = go_type_name(name)
            self.done[name] = (forward, go)
            props = {k: self.value(v)[0] for k, v in schema["properties"].items()}
            # Booleans and numbers decode to a meaningful zero value, which validation judges on its own terms
            # (upstream never says "Required value" for them); strings, lists and structs can be missing.
            required = tuple(
                k
                for k in schema.get("required") or ()
                if _primary_type(self._resolve(schema["properties"].get(k) or {}))
                not in ("boolean", "integer")
            )
            checker = _struct(name.rsplit(".", 1)[-1], go, props, required)
            cell.append(checker)
            self.done[name] = (checker, go)
            return checker, go
        checker, go = self.value(schema)
        if _primary_type(schema) == "object" and "additionalProperties" not in schema:
            go = go_type_name(name)
        self.done[name] = (checker, go)
        return checker, go

    def _resolve(self, schema: Schema) -> Schema:
        if "$ref" in schema:
            return self.defs.get(ref_name(schema["$ref"])) or {}
        return schema

    def value(self, schema: Schema) -> tuple[Checker, str]:
        if "$ref" in schema:
            return self.ref(ref_name(schema["$ref"]))
        t = _primary_type(schema)
        if t == "string":
            if schema.get("format") == "byte":
                return _string, "[]uint8"
            return _string, "string"
        if t == "integer":
            go = str(schema.get("format") or "int64")
            return _integer(go), go
        if t == "number":
            return _number, "float64"
        if t == "boolean":
            return _bool, "bool"
        if t == "array":
            item, go = self.value(schema.get("items") or {})
            return _list(item, "[]" + go), "[]" + go
        if t == "object":
            extra = schema.get("additionalProperties")
            if isinstance(extra, dict):
                item, go = self.value(extra)
                return _map(item, "map[string]" + go), "map[string]" + go
            return _any, "map[string]interface {}"
        return _any, "interface {}"


@functools.cache
def _compiler() -> _Compiler:
    return _Compiler(definitions())


def checker(definition: str) -> Checker:
    """The compiled checker of a definition (compiled on first use, then shared)."""
    return _compiler().ref(definition)[0]


def check(definition: str, obj: Any, root: Path = None) -> Findings:
    """Check ``obj`` against ``definition``; raises ``DecodeError``, returns unknown and missing fields.
    ``root``: where ``obj`` sits in the object (for messages), when it is not the object itself."""
    return run(checker(definition), obj, root)


def run(fn: Checker, obj: Any, root: Path = None) -> Findings:
    """``check`` with the definition's checker already at hand."""
    found = Findings()
    try:
        fn(obj, found, root)
    except _Mismatch as m:
        if root is not None:
            parent, last = root
            where = _go_path(parent, last)
            raise DecodeError(
                f"json: cannot unmarshal {m.got} into Go struct field {where} of type {m.go_type}"
            ) from None
        raise DecodeError(f"json: cannot unmarshal {m.got} into Go value of type {m.go_type}") from None
    return found
