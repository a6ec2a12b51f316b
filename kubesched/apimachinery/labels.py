"""Label selectors, node-selector requirements and field selectors (``k8s.io/apimachinery/pkg/labels``, ``fields``).

One implementation for the API server (list/watch ``labelSelector``, ``fieldSelector``) and the scheduler (pod
affinity, topology spreading, node affinity). A selector comes in three spellings, all parsed into the same
``Requirement`` objects so that their matching cannot disagree:

- the query-string syntax: ``a=b,c!=d,e in (f,g),h notin (i),j,!k,l>3`` (``LabelSelector.parse(text)``);
- ``metav1.LabelSelector``: ``matchLabels`` and ``matchExpressions`` with In/NotIn/Exists/DoesNotExist
  (``LabelSelector.from_dict``);
- ``v1.NodeSelectorRequirement``: the same plus Gt/Lt (``Requirement.from_node_selector``).

Errors raise ``SelectorError`` (a ``ValueError``) with upstream's wording; the API server turns it into a 400.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from operator import attrgetter
from typing import Any, Protocol, Self

from .validation import is_label_value, is_qualified_name

__all__ = [
    "LABEL_SELECTOR_OPERATORS",
    "NODE_SELECTOR_OPERATORS",
    "FieldGetter",
    "FieldGetters",
    "FieldRequirement",
    "FieldSelector",
    "LabelSelector",
    "Op",
    "Requirement",
    "SelectorError",
    "escape_field_value",
    "parse_int64",
]


class SelectorError(ValueError):
    """A selector upstream's parser rejects; ``str(error)`` is upstream's message."""


class Op(StrEnum):
    """Requirement operators (upstream ``selection.Operator``).

    The set, existence and comparison operators carry the names the structured forms use (``In``, ``Gt``...), so
    an operator read from a ``matchExpressions`` item or a node selector term is an ``Op`` as it stands; only the
    string syntax spells them differently (see ``_TOKENS``).
    """

    EQUALS = "="
    DOUBLE_EQUALS = "=="
    NOT_EQUALS = "!="
    IN = "In"
    NOT_IN = "NotIn"
    EXISTS = "Exists"
    DOES_NOT_EXIST = "DoesNotExist"
    GREATER_THAN = "Gt"
    LESS_THAN = "Lt"


# How each operator is written in the query-string syntax.
_TOKENS: dict[str, str] = {
    Op.EQUALS: "=",
    Op.DOUBLE_EQUALS: "==",
    Op.NOT_EQUALS: "!=",
    Op.IN: "in",
    Op.NOT_IN: "notin",
    Op.GREATER_THAN: ">",
    Op.LESS_THAN: "<",
}

# Operators by their spelling in ``metav1.LabelSelectorRequirement`` and ``v1.NodeSelectorRequirement``.
LABEL_SELECTOR_OPERATORS: dict[str, Op] = {
    op.value: op for op in (Op.IN, Op.NOT_IN, Op.EXISTS, Op.DOES_NOT_EXIST)
}
NODE_SELECTOR_OPERATORS: dict[str, Op] = {
    **LABEL_SELECTOR_OPERATORS,
    Op.GREATER_THAN.value: Op.GREATER_THAN,
    Op.LESS_THAN.value: Op.LESS_THAN,
}

_SINGLE_VALUE_OPS = frozenset({Op.EQUALS, Op.DOUBLE_EQUALS, Op.NOT_EQUALS})
_SET_OPS = frozenset({Op.IN, Op.NOT_IN})
_NO_VALUE_OPS = frozenset({Op.EXISTS, Op.DOES_NOT_EXIST})
_NUMERIC_OPS = frozenset({Op.GREATER_THAN, Op.LESS_THAN})
# Matching only knows "value in the set" and "value not in the set"; frozensets make either test one lookup,
# whether ``op`` is an ``Op`` or the plain string a caller constructed the requirement with.
EQUALITY_OPS = frozenset({Op.IN, Op.EQUALS, Op.DOUBLE_EQUALS})
INEQUALITY_OPS = frozenset({Op.NOT_IN, Op.NOT_EQUALS})

# Module constants: looking a member up on the enum class costs several times a comparison on the hot path.
_EXISTS, _DOES_NOT_EXIST, _GREATER_THAN = Op.EXISTS, Op.DOES_NOT_EXIST, Op.GREATER_THAN

_INT64 = re.compile(r"[+-]?[0-9]+")
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def parse_int64(text: str) -> int | None:
    """Go's ``strconv.ParseInt(text, 10, 64)``: ASCII digits with an optional sign, nothing else; None if not."""
    if not _INT64.fullmatch(text):
        return None
    n = int(text)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


def _invalid(field: str, value: str, problems: Sequence[str]) -> str:
    return f'{field}: Invalid value: "{value}": {"; ".join(problems)}'


# --------------------------------------------------------------------------------------------------------------
# Requirements


@dataclass(frozen=True, slots=True)
class Requirement:
    """One term of a label selector (upstream ``labels.Requirement``).

    ``make`` validates and normalises: ``values`` sorted and duplicate-free for In/NotIn, ``number`` the bound
    of Gt/Lt. Constructing directly skips validation (for terms built from labels already known to be valid);
    ``values`` may then be any collection of strings.
    """

    key: str
    op: str  # an ``Op`` (a plain string equal to one is accepted when constructing directly)
    values: Sequence[str] | frozenset[str] = ()
    number: int = 0

    @classmethod
    def make(cls, key: str, op: Op | str, values: Iterable[str] | None = ()) -> Self:
        """A validated requirement (upstream ``labels.NewRequirement``); raises ``SelectorError``."""
        if not isinstance(key, str):
            raise SelectorError(f"key: Invalid value: {key!r}: must be a string")
        try:
            op = Op(op)
        except ValueError:
            raise SelectorError(f'"{op}" is not a valid label selector operator') from None
        vals = list(values or ())
        problems = is_qualified_name(key)
        if problems:
            raise SelectorError(_invalid("key", key, problems))
        number = 0
        if op in _SET_OPS:
            if not vals:
                raise SelectorError(
                    "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
                )
        elif op in _SINGLE_VALUE_OPS:
            if len(vals) != 1:
                raise SelectorError(
                    f"values: Invalid value: {vals}: exact-match compatibility requires one single value"
                )
        elif op in _NO_VALUE_OPS:
            if vals:
                raise SelectorError(
                    f"values: Invalid value: {vals}: values set must be empty for exists and does not exist"
                )
        else:  # Gt, Lt
            if len(vals) != 1:
                raise SelectorError(
                    f"values: Invalid value: {vals}: for 'Gt', 'Lt' operators, exactly one value is required"
                )
            parsed = parse_int64(vals[0]) if isinstance(vals[0], str) else None
            if parsed is None:
                raise SelectorError(
                    f"values[0]: Invalid value: \"{vals[0]}\": for 'Gt', 'Lt' operators, the value must be an integer"
                )
            number = parsed
        for i, v in enumerate(vals):
            problems = is_label_value(v) if isinstance(v, str) else ["must be a string"]
            if problems:
                raise SelectorError(_invalid(f"values[{i}][{key}]", v, problems))
        if op in _SET_OPS:
            vals = sorted(set(vals))
        return cls(key, op, tuple(vals), number)

    @classmethod
    def from_node_selector(cls, expr: Mapping[str, Any]) -> Self:
        """A ``v1.NodeSelectorRequirement`` (``{key, operator, values}``; In/NotIn/Exists/DoesNotExist/Gt/Lt)."""
        operator = expr.get("operator", "")
        op = NODE_SELECTOR_OPERATORS.get(operator) if isinstance(operator, str) else None
        if op is None:
            raise SelectorError(f'"{operator}" is not a valid node selector operator')
        values = expr.get("values")
        if values is not None and not isinstance(values, list | tuple):
            raise SelectorError("values: Invalid value: must be a list of strings")
        return cls.make(expr.get("key", ""), op, values)

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a label set satisfies the term. Objects without the key satisfy the negative operators."""
        op = self.op
        if op in EQUALITY_OPS:
            return labels.get(self.key) in self.values
        if op in INEQUALITY_OPS:
            value = labels.get(self.key)
            return value is None or value not in self.values
        if op == _EXISTS:
            return self.key in labels
        if op == _DOES_NOT_EXIST:
            return self.key not in labels
        # Gt / Lt: the label must be an integer too
        value = labels.get(self.key)
        n = parse_int64(value) if value is not None else None
        if n is None:
            return False
        return n > self.number if op == _GREATER_THAN else n < self.number

    def __str__(self) -> str:
        op = self.op
        if op == Op.EXISTS:
            return self.key
        if op == Op.DOES_NOT_EXIST:
            return "!" + self.key
        values = self.values if isinstance(self.values, Sequence) else sorted(self.values)
        if op in _SET_OPS:
            return f"{self.key} {_TOKENS[op]} ({','.join(values)})"
        return f"{self.key}{_TOKENS[op]}{values[0]}"


# --------------------------------------------------------------------------------------------------------------
# Label selectors

_NO_LABELS: Mapping[str, str] = {}
_by_key = attrgetter("key")


class LabelSelector:
    """A conjunction of label requirements.

    Three kinds exist, as upstream: *everything* (no requirements; ``empty`` is true), *nothing* (what a ``nil``
    ``metav1.LabelSelector`` converts to; matches no object and renders as ``""``), and the ordinary kind.
    """

    __slots__ = ("nothing", "requirements")

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        # Sorted by key (stable) like upstream, so equal selectors compare and render equal.
        self.requirements: tuple[Requirement, ...] = tuple(sorted(requirements, key=_by_key))
        self.nothing = nothing

    @classmethod
    def everything(cls) -> Self:
        return cls()

    @classmethod
    def parse(cls, sel: str | Mapping[str, Any] | None) -> Self:
        """A selector in either spelling: the query syntax (a string) or a ``metav1.LabelSelector`` (see
        ``from_dict``; ``None`` selects nothing)."""
        if isinstance(sel, str):
            return cls(_LabelParser(sel).parse())
        return cls.from_dict(sel)

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any] | None) -> Self:
        """Convert a ``metav1.LabelSelector`` object (``matchLabels`` and ``matchExpressions``).

        ``None`` (the field is absent) gives a selector that matches **nothing**; ``{}`` (present, empty) gives
        one that matches **everything** — upstream ``LabelSelectorAsSelector``. Callers for which an absent
        selector means "all" (e.g. a PodDisruptionBudget, per its own docs) should pass ``sel or {}``.
        """
        if sel is None:
            return cls(nothing=True)
        if not isinstance(sel, Mapping):
            raise SelectorError("label selector must be an object")
        match_labels = sel.get("matchLabels") or {}
        match_exprs = sel.get("matchExpressions") or []
        if not isinstance(match_labels, Mapping) or not isinstance(match_exprs, list):
            raise SelectorError("label selector: matchLabels must be an object and matchExpressions a list")
        reqs: list[Requirement] = []
        for k, v in match_labels.items():
            if not isinstance(v, str):
                raise SelectorError(f"label selector: matchLabels[{k}] must be a string")
            reqs.append(Requirement.make(k, Op.EQUALS, [v]))
        for expr in match_exprs:
            if not isinstance(expr, Mapping):
                raise SelectorError("label selector: matchExpressions items must be objects")
            operator = expr.get("operator")
            op = LABEL_SELECTOR_OPERATORS.get(operator) if isinstance(operator, str) else None
            if op is None:
                raise SelectorError(f'"{operator}" is not a valid label selector operator')
            values = expr.get("values") or []
            if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
                raise SelectorError("label selector: matchExpressions values must be a list of strings")
            reqs.append(Requirement.make(str(expr.get("key", "")), op, values))
        return cls(reqs)

    @classmethod
    def from_set(cls, labels: Mapping[str, str]) -> Self:
        """``labels.SelectorFromSet``: every label must equal (no validation: the labels come from an object)."""
        return cls(Requirement(k, Op.EQUALS, (v,)) for k, v in labels.items())

    @property
    def empty(self) -> bool:
        """True for the match-everything selector (upstream ``Selector.Empty``)."""
        return not self.nothing and not self.requirements

    @property
    def matches_nothing(self) -> bool:
        return self.nothing

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        if self.nothing:
            return False
        if labels is None:
            labels = _NO_LABELS
        # A plain loop: this runs for every pod a scheduler index or a watch filter looks at.
        for r in self.requirements:
            if not r.matches(labels):
                return False
        return True

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)

    def __repr__(self) -> str:
        if self.nothing:
            return f"{type(self).__name__}(nothing=True)"
        return f"{type(self).__name__}.parse({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self.nothing == other.nothing and self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash((self.nothing, self.requirements))


# Tokens of the label selector syntax. Identifiers run up to whitespace or one of the special characters.
_SPECIAL_CHARS = frozenset("=!(),<>")
_WHITESPACE = frozenset(" \t\r\n")
_ID = "identifier"
_EOS = "end of string"
_OPERATOR_TOKENS: dict[str, Op] = {
    "=": Op.EQUALS,
    "==": Op.DOUBLE_EQUALS,
    "!=": Op.NOT_EQUALS,
    ">": Op.GREATER_THAN,
    "<": Op.LESS_THAN,
}


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
                raise SelectorError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            reqs.append(self._requirement())
            kind, lit = self._next()
            if kind == _EOS:
                return reqs
            if kind != ",":
                raise SelectorError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self._peek()
            if kind not in (_ID, "!"):
                raise SelectorError(f"found '{lit}', expected: identifier after ','")

    def _requirement(self) -> Requirement:
        try:
            key, op = self._key_and_inferred_op()
            if op is not None:
                return Requirement.make(key, op)
            op = self._operator()
            values = self._set_values() if op in _SET_OPS else self._exact_value()
            return Requirement.make(key, op, values)
        except SelectorError as e:
            raise SelectorError(f"unable to parse requirement: {e}") from None

    def _key_and_inferred_op(self) -> tuple[str, Op | None]:
        op: Op | None = None
        kind, lit = self._next()
        if kind == "!":
            op = Op.DOES_NOT_EXIST
            kind, lit = self._next()
        if kind != _ID:
            raise SelectorError(f"found '{lit}', expected: identifier")
        problems = is_qualified_name(lit)
        if problems:
            raise SelectorError(_invalid("key", lit, problems))
        if self._peek()[0] in (_EOS, ",") and op is None:
            op = Op.EXISTS
        return lit, op

    def _operator(self) -> Op:
        kind, lit = self._next()
        op = _OPERATOR_TOKENS.get(kind)
        if op is not None:
            return op
        if kind == _ID and lit in ("in", "notin"):
            return Op.IN if lit == "in" else Op.NOT_IN
        raise SelectorError(f"found '{lit}', expected: in, notin, =, ==, !=, gt, lt")

    def _exact_value(self) -> list[str]:
        kind, lit = self._peek()
        if kind in (_EOS, ","):
            return [""]  # "k=" selects the empty value
        self._next()
        if kind == _ID:
            return [lit]
        raise SelectorError(f"found '{lit}', expected: identifier")

    def _set_values(self) -> list[str]:
        kind, lit = self._next()
        if kind != "(":
            raise SelectorError(f"found '{lit}' expected: '('")
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
                raise SelectorError(f"found '{lit}', expected: {want}")


# --------------------------------------------------------------------------------------------------------------
# Field selectors

FieldGetter = Callable[[Any], Any]


class FieldGetters(Protocol):
    """What a field selector is parsed against: the selectable fields of one resource type."""

    def field_getter(self, field: str) -> FieldGetter | None: ...


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
                raise SelectorError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            raise SelectorError(f"invalid field selector: unescaped character in value: {c}")
        else:
            out.append(c)
    if escaped:
        raise SelectorError("invalid field selector: invalid escape sequence: \\")
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
    def everything(cls) -> Self:
        return cls()

    @classmethod
    def parse(cls, text: str, fields: FieldGetters) -> Self:
        """Parse the ``fieldSelector`` query syntax against ``fields`` (a resource type's selectable fields).

        Values may escape ``\\``, ``,`` and ``=`` with a backslash. A field the type does not support is
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
                raise SelectorError(f"invalid selector: '{text}'; can't understand '{part}'")
            field, op, raw = split
            value = _unescape_field_value(raw)
            getter = fields.field_getter(field)
            if getter is None:
                raise SelectorError(f"field label not supported: {field}")
            reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", value))
            getters.append(getter)
        return cls(reqs, getters)

    @property
    def empty(self) -> bool:
        return not self.requirements

    def matches(self, obj: Any) -> bool:
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
        return f"{type(self).__name__}({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self.requirements == other.requirements

    def __hash__(self) -> int:
        return hash(self.requirements)
