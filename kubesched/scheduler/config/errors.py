"""Field errors in the upstream style (``path: Invalid value: 0: detail``) and the one exception that carries them."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class ErrorType(StrEnum):
    """What went wrong with a field; the values are the words upstream prints."""

    INVALID = "Invalid value"
    REQUIRED = "Required value"
    DUPLICATE = "Duplicate value"
    NOT_SUPPORTED = "Unsupported value"
    FORBIDDEN = "Forbidden"
    NOT_FOUND = "Not found"
    UNKNOWN_FIELD = "Unknown field"
    MALFORMED = "Malformed document"


# These types print no value, only the detail (as upstream's field.Error does for Required/Forbidden).
_VALUELESS = frozenset(
    {ErrorType.REQUIRED, ErrorType.FORBIDDEN, ErrorType.UNKNOWN_FIELD, ErrorType.MALFORMED}
)


def render_value(value: Any) -> str:
    """A bad value as upstream prints it: strings quoted, numbers bare, null for None."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int | float):
        return repr(value)
    try:
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path, e.g. ``profiles[0].plugins.score.enabled[1].weight``."""

    field: str
    type: ErrorType
    bad_value: Any = None
    detail: str = ""

    def __str__(self) -> str:
        body = str(self.type)
        if self.type not in _VALUELESS:
            body = f"{body}: {render_value(self.bad_value)}"
        if self.detail:
            body = f"{body}: {self.detail}"
        return f"{self.field}: {body}" if self.field else body


def invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError(field, ErrorType.INVALID, value, detail)


def required(field: str, detail: str = "") -> FieldError:
    return FieldError(field, ErrorType.REQUIRED, None, detail)


def duplicate(field: str, value: Any) -> FieldError:
    return FieldError(field, ErrorType.DUPLICATE, value)


def forbidden(field: str, detail: str) -> FieldError:
    return FieldError(field, ErrorType.FORBIDDEN, None, detail)


def not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    listed = ", ".join(render_value(s) for s in supported)
    return FieldError(field, ErrorType.NOT_SUPPORTED, value, f"supported values: {listed}")


def unknown_field(field: str) -> FieldError:
    return FieldError(field, ErrorType.UNKNOWN_FIELD)


def malformed(detail: str) -> FieldError:
    return FieldError("", ErrorType.MALFORMED, None, detail)


class ConfigError(Exception):
    """A configuration that cannot be used; ``errors`` lists every problem found, not just the first."""

    def __init__(self, errors: Sequence[FieldError], *, source: str | None = None) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors)
        self.source = source
        super().__init__(str(self))

    def __str__(self) -> str:
        where = f" ({self.source})" if self.source else ""
        lines = [f"invalid KubeSchedulerConfiguration{where}:"]
        lines.extend(f"  - {e}" for e in self.errors)
        return "\n".join(lines)

    def fields(self) -> list[str]:
        """The field paths in error, for quick assertions and log lines."""
        return [e.field for e in self.errors]
