"""Label and field selectors: parsing the query-string syntax, the ``metav1.LabelSelector`` object, and matching.

Pure functions of their inputs. Parse errors raise ``ApiError`` 400 BadRequest with upstream's wording where it is
known (``found ',', expected: identifier``, ``field label not supported: spec.foo``, ...).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from kubesched.cluster import errors
from kubesched.cluster.resources import FieldGetter, ResourceType

# --------------------------------------------------------------------------------------------------------------
# Label key and value syntax (upstream k8s.io/apimachinery/pkg/util/validation)

_NAME_RE = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    f"character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '{_NAME_FMT}')"
)
_SUBDOMAIN_RE = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    r"'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
_VALUE_RE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start "
    "and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
_INT64 = re.compile(r"[+-]?[0-9]+")


def label_key_errors(key: str) -> list[str]:
    """Why ``key`` is not a valid label key (a qualified name), empty if it is."""
    parts = key.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [
            f"a qualified name {_NAME_MSG} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if len(prefix) > 253:
                errs.append("prefix part must be no more than 253 characters")
            if not _SUBDOMAIN_RE.fullmatch(prefix):
                errs.append(f"prefix part {_SUBDOMAIN_MSG}")
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 characters")
    if not _NAME_RE.fullmatch(name):
        errs.append(f"name part {_NAME_MSG}")
    return errs


def label_value_errors(value: str) -> list[str]:
    """Why ``value`` is not a valid label value, empty if it is."""
    errs: list[str] = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _VALUE_RE.fullmatch(value):
        errs.append(_VALUE_MSG)
    return errs


def _invalid(field: str, value: str, problems: list[str]) -> str:
    return f'{field}: Invalid value: "{value}": {"; ".join(problems)}'


# --------------------------------------------------------------------------------------------------------------
# Label selectors


class Op(StrEnum):
    """Label selector operators, spelled as upstream's ``selection.Operator``."""

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "in"
    NOT_IN = "notin"
    EXISTS = "exists"
    DOES_NOT_EXIST = "!"
    GREATER_THAN = "gt"
    LESS_THAN = "lt"


_SINGLE_VALUE_OPS = (Op.EQUALS, Op.DOUBLE_EQUALS, Op.NOT_EQUALS)
_SET_OPS = (Op.IN, Op.NOT_IN)
_NO_VALUE_OPS = (Op.EXISTS, Op.DOES_NOT_EXIST)
_NUMERIC_OPS = (Op.GREATER_THAN, Op.LESS_THAN)


def _as_int64(text: str) -> int | None:
    if not _INT64.fullmatch(text):
        return None
    n = int(text)
    return n if -(2**63) <= n < 2**63 else None


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector. ``values`` is sorted and duplicate-free for set operators."""

    key: str
    op: Op
    values: tuple[str, ...] = ()

    @classmethod
    def make(cls, key: str, op: Op, values: Iterable[str] = ()) -> Requirement:
        """A validated requirement (upstream ``labels.NewRequirement``); bad input raises 400."""
        vals = list(values)
        problems = label_key_errors(key)
        if problems:
            raise errors.bad_request(_invalid("key", key, problems))
        if op in _SET_OPS:
            if not vals:
                raise errors.bad_request(
                    "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
                )
        elif op in _SINGLE_VALUE_OPS:
            if len(vals) != 1:
                raise errors.bad_request(
                    f"values: Invalid value: {vals}: exact-match compatibility requires one single value"
                )
        elif op in _NO_VALUE_OPS:
            if vals:
                raise errors.bad_request(
                    f"values: Invalid value: {vals}: values set must be empty for exists and does not exist"
                )
        elif op in _NUMERIC_OPS:
            if len(vals) != 1:
                raise errors.bad_request(
                    f"values: Invalid value: {vals}: for 'Gt', 'Lt' operators, exactly one value is required"
                )
            if _as_int64(vals[0]) is None:
                raise errors.bad_request(
                    f"values[0]: Invalid value: \"{vals[0]}\": for 'Gt', 'Lt' operators, the value must be an integer"
                )
        for i, v in enumerate(vals):
            problems = label_value_errors(v)
            if problems:
                raise errors.bad_request(_invalid(f"values[{i}][{key}]", v, problems))
        if op in _SET_OPS:
            vals = sorted(set(vals))
        return cls(key, op, tuple(vals))

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op in _SINGLE_VALUE_OPS or op in _SET_OPS:
            present = self.key in labels
            if op in (Op.NOT_EQUALS, Op.NOT_IN):
                # Objects without the key satisfy negative terms (upstream semantics).
                return not present or labels[self.key] not in self.values
            return present and labels[self.key] in self.values
        if op is Op.EXISTS:
            return self.key in labels
        if op is Op.DOES_NOT_EXIST:
            return self.key not in labels
        # gt / lt: both sides must be integers
        if self.key not in labels:
            return False
        have = _as_int64(labels[self.key])
        want = _as_int64(self.values[0])
        if have is None or want is None:
            return False
        return have > want if op is Op.GREATER_THAN else have < want

    def __str__(self) -> str:
        op = self.op
        if op is Op.EXISTS:
            return self.key
        if op is Op.DOES_NOT_EXIST:
            return "!" + self.key
        if op in _SET_OPS:
            return f"{self.key} {op.value} ({','.join(self.values)})"
        if op is Op.GREATER_THAN:
            return f"{self.key}>{self.values[0]}"
        if op is Op.LESS_THAN:
            return f"{self.key}<{self.values[0]}"
        return f"{self.key}{op.value}{self.values[0]}"


class LabelSelector:
    """A conjunction of label requirements.

    Three kinds exist, as upstream: *everything* (no requirements; ``empty`` is true), *nothing* (what a ``nil``
    ``metav1.LabelSelector`` converts to; matches no object and renders as ``""``), and the ordinary kind.
    """

    __slots__ = ("_nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        # Sorted by key (stable) like upstream, so equal selectors compare and render equal.
        self.requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=lambda r: r.key))
        self._nothing = nothing

    @classmethod
    def everything(cls) -> LabelSelector:
        return cls()

    @classmethod
    def nothing(cls) -> LabelSelector:
        return cls(nothing=True)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Parse the ``labelSelector`` query syntax: ``a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3``."""
        return cls(_LabelParser(text).parse())

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any] | None) -> LabelSelector:
        """Convert a ``metav1.LabelSelector`` object (``matchLabels`` and ``matchExpressions``).

        ``None`` (the field is absent) gives a selector that matches **nothing**; ``{}`` (present, empty) gives
        one that matches **everything** — upstream ``LabelSelectorAsSelector``. Callers for which an absent
        selector means "all" (e.g. a PodDisruptionBudget, per its own docs) should pass ``sel or {}``.
        """
        if sel is None:
            return cls.nothing()
        if not isinstance(sel, Mapping):
            raise errors.bad_request("label selector must be an object")
        match_labels = sel.get("matchLabels") or {}
        match_exprs = sel.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping) or not isinstance(match_exprs, list):
            raise errors.bad_request(
                "label selector: matchLabels must be an object and matchExpressions a list"
            )
        reqs: list[Requirement] = []
        for k, v in match_labels.items():
            if not isinstance(v, str):
                raise errors.bad_request(f"label selector: matchLabels[{k}] must be a string")
            reqs.append(Requirement.make(k, Op.EQUALS, [v]))
        ops = {"In": Op.IN, "NotIn": Op.NOT_IN, "Exists": Op.EXISTS, "DoesNotExist": Op.DOES_NOT_EXIST}
        for expr in match_exprs:
            if not isinstance(expr, Mapping):
                raise errors.bad_request("label selector: matchExpressions items must be objects")
            op = ops.get(str(expr.get("operator")))
            if op is None:
                raise errors.bad_request(f'"{expr.get("operator")}" is not a valid label selector operator')
            values = expr.get("values") or []
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise errors.bad_request("label selector: matchExpressions values must be a list of strings")
            reqs.append(Requirement.make(str(expr.get("key", "")), op, values))
        return cls(reqs)

    @property
    def empty(self) -> bool:
        """True for the match-everything selector (upstream ``Selector.Empty``)."""
        return not self.requirements and not self._nothing

    @property
    def matches_nothing(self) -> bool:
        return self._nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self._nothing:
            return False
        have = labels or {}
        return all(r.matches(have) for r in self.requirements)

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        if self._nothing:
            return "LabelSelector.nothing()"
        return f"LabelSelector.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._nothing == other._nothing and self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash((self._nothing, self.requirements))


# Tokens of the label selector syntax. Identifiers run up to whitespace or one of the special characters.
_SPECIAL_CHARS = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")
_ID = "identifier"
_EOS = "end of string"


class _LabelParser:
    """Recursive-descent parser for the label selector string syntax (upstream ``labels.Parse``)."""

    def __init__(self, text: str) -> None:
        self.tokens = self._lex(text)
        self.pos = 0

    @staticmethod
    def _lex(text: str) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c in _WHITESPACE:
                i += 1
            elif c in _SPECIAL_CHARS:
                two = text[i : i + 2]
                if two in ("!=", "=="):
                    out.append((two, two))
                    i += 2
                else:
                    out.append((c, c))
                    i += 1
            else:
                j = i
                while j < n and text[j] not in _SPECIAL_CHARS and text[j] not in _WHITESPACE:
                    j += 1
                out.append((_ID, text[i:j]))
                i = j
        out.append((_EOS, ""))
        return out

    def _peek(self) -> tuple[str, str]:
        return self.tokens[self.pos]

    def _next(self) -> tuple[str, str]:
        tok = self.tokens[self.pos]
        if tok[0] != _EOS:
            self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self._peek()
            if kind == _EOS:
                return reqs
            if kind not in (_ID, "!"):
                raise errors.bad_request(f"found '{lit}', expected: !, identifier, or 'end of string'")
            reqs.append(self._requirement())
            kind, lit = self._next()
            if kind == _EOS:
                return reqs
            if kind != ",":
                raise errors.bad_request(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self._peek()
            if kind not in (_ID, "!"):
                raise errors.bad_request(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        try:
            key, op = self._key_and_inferred_op()
            if op in _NO_VALUE_OPS:
                return Requirement.make(key, op)
            op = self._operator()
            values = self._set_values() if op in _SET_OPS else self._exact_value()
            return Requirement.make(key, op, values)
        except errors.ApiError as e:
            raise errors.bad_request(f"unable to parse requirement: {e.message}") from None

    def _key_and_inferred_op(self) -> tuple[str, Op | None]:
        op: Op | None = None
        kind, lit = self._next()
        if kind == "!":
            op = Op.DOES_NOT_EXIST
            kind, lit = self._next()
        if kind != _ID:
            raise errors.bad_request(f"found '{lit}', expected: identifier")
        problems = label_key_errors(lit)
        if problems:
            raise errors.bad_request(_invalid("key", lit, problems))
        if self._peek()[0] in (_EOS, ",") and op is None:
            op = Op.EXISTS
        return lit, op

    def _operator(self) -> Op:
        kind, lit = self._next()
        by_token = {
            "=": Op.EQUALS,
            "==": Op.DOUBLE_EQUALS,
            "!=": Op.NOT_EQUALS,
            ">": Op.GREATER_THAN,
            "<": Op.LESS_THAN,
        }
        if kind in by_token:
            return by_token[kind]
        if kind == _ID and lit in ("in", "notin"):
            return Op.IN if lit == "in" else Op.NOT_IN
        raise errors.bad_request(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")

    def _exact_value(self) -> list[str]:
        kind, lit = self._peek()
        if kind in (_EOS, ","):
            return [""]  # "k=" selects the empty value
        self._next()
        if kind == _ID:
            return [lit]
        raise errors.bad_request(f"found '{lit}', expected: identifier")

    def _set_values(self) -> list[str]:
        kind, lit = self._next()
        if kind != "(":
            raise errors.bad_request(f"found '{lit}' expected: '('")
        values: list[str] = []
        # Empty slots ("()", "(a,)", "(,a)", "(a,,b)") stand for the empty value, as upstream.
        expect_value = True
        while True:
            kind, lit = self._next()
            if kind == _ID and expect_value:
                values.append(lit)
                expect_value = False
            elif kind == ",":
                if expect_value:
                    values.append("")
                expect_value = True
            elif kind == ")":
                if expect_value:
                    values.append("")
                return values
            else:
                want = "',', or identifier" if expect_value else "',' or ')'"
                raise errors.bad_request(f"found '{lit}', expected: {want}")


# --------------------------------------------------------------------------------------------------------------
# Field selectors


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    field: str
    op: str  # "=" (also written "==") or "!="
    value: str

    def __str__(self) -> str:
        return f"{self.field}{self.op}{escape_field_value(self.value)}"


def escape_field_value(value: str) -> str:
    """Escape ``\\``, ``,`` and ``=`` for use in a field selector value."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _unescape_field_value(value: str) -> str:
    if not any(c in value for c in "\\,="):
        return value
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in "\\,=":
                raise errors.bad_request(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise errors.bad_request(f"invalid field selector: unescaped character in value: {c}")
        else:
            out.append(c)
    if escaped:
        raise errors.bad_request("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _split_unescaped_commas(text: str) -> list[str]:
    terms: list[str] = []
    start = 0
    escaped = False
    for i, c in enumerate(text):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(text[start:i])
            start = i + 1
    terms.append(text[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    # The first operator occurrence from the left wins; "!=" and "==" before "=" at the same position.
    for i in range(len(term)):
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


class FieldSelector:
    """A conjunction of ``field=value`` / ``field!=value`` terms over a resource type's selectable fields."""

    __slots__ = ("_getters", "requirements")

    def __init__(
        self, requirements: Iterable[FieldRequirement] = (), getters: Iterable[FieldGetter] = ()
    ) -> None:
        self.requirements: tuple[FieldRequirement, ...] = tuple(requirements)
        self._getters: tuple[FieldGetter, ...] = tuple(getters)
        if len(self._getters) != len(self.requirements):
            raise ValueError("one getter per requirement")

    @classmethod
    def everything(cls) -> FieldSelector:
        return cls()

    @classmethod
    def parse(cls, text: str, rtype: ResourceType) -> FieldSelector:
        """Parse the ``fieldSelector`` query syntax for ``rtype``.

        Values may escape ``\\``, ``,`` and ``=`` with a backslash. A field the type does not support is a 400
        ``field label not supported: <field>``. No whitespace trimming, as upstream.
        """
        if not text:
            return cls()
        reqs: list[FieldRequirement] = []
        getters: list[FieldGetter] = []
        for part in sorted(_split_unescaped_commas(text)):
            if part == "":
                continue
            split = _split_term(part)
            if split is None:
                raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
            field, op, raw = split
            value = _unescape_field_value(raw)
            getter = rtype.field_getter(field)
            if getter is None:
                raise errors.bad_request(f"field label not supported: {field}")
            reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
            getters.append(getter)
        return cls(reqs, getters)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: dict[str, Any]) -> bool:
        for req, get in zip(self.requirements, self._getters, strict=True):
            equal = get(obj) == req.value
            if equal == (req.op == "!="):
                return False
        return True

    def required_equalities(self) -> dict[str, str]:
        """``field → value`` for every exact-match term: an index hint (the server still calls ``matches``).

        Two terms on one field with different values keep the last; the selector then matches nothing anyway.
        """
        return {r.field: r.value for r in self.requirements if r.op != "!="}

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash(self.requirements)
