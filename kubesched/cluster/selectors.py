"""Label and field selectors as the API server uses them: ``kubesched.apimachinery.labels`` with 400 errors.

The parsing and matching live in ``kubesched.apimachinery.labels`` (shared with the scheduler); this module only
turns its ``SelectorError`` into ``ApiError`` 400 BadRequest with the same message (``found ',', expected:
identifier``, ``field label not supported: spec.foo``, ...), which the server returns as a ``metav1.Status``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any, Self

from kubesched.apimachinery import labels as _labels
from kubesched.apimachinery.labels import FieldRequirement as FieldRequirement
from kubesched.apimachinery.labels import Op, SelectorError
from kubesched.apimachinery.labels import escape_field_value as escape_field_value
from kubesched.cluster import errors


class Requirement(_labels.Requirement):
    __slots__ = ()

    @classmethod
    def make(cls, key: str, op: Op | str, values: Iterable[str] | None = ()) -> Self:
        try:
            return super().make(key, op, values)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from None


class LabelSelector(_labels.LabelSelector):
    __slots__ = ()

    @classmethod
    def parse(cls, sel: str | Mapping[str, Any] | None) -> Self:
        try:
            return super().parse(sel)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from None

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any] | None) -> Self:
        try:
            return super().from_dict(sel)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from None


class FieldSelector(_labels.FieldSelector):
    __slots__ = ()

    @classmethod
    def parse(cls, text: str, fields: _labels.FieldGetters) -> Self:
        try:
            return super().parse(text, fields)
        except SelectorError as e:
            raise errors.bad_request(str(e)) from None

    def predicate(self) -> Callable[[Any], bool]:
        """``matches`` as one closure over (getter, value, negated) terms, for watches and lists that test every
        object against the selector: no zip, no attribute lookups per test; one term (``spec.nodeName!=``, the
        harness's bound pods) tests in a single expression."""
        terms = tuple(
            (get, req.value, req.op == "!=")
            for req, get in zip(self.requirements, self._getters, strict=True)
        )
        if len(terms) == 1:
            get, value, negated = terms[0]

            def one(obj: Any) -> bool:
                return (get(obj) == value) != negated

            return one

        def every(obj: Any) -> bool:
            for get, value, negated in terms:
                if (get(obj) == value) == negated:
                    return False
            return True

        return every
