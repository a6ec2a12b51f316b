"""Timestamps as the Kubernetes API writes them: ``metav1.Time`` (RFC 3339, seconds) and ``metav1.MicroTime``.

``strftime`` costs microseconds and the API server and the event recorder stamp thousands of objects a second,
almost all within the same second: the formatted whole second is remembered and reused.
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime

__all__ = ["format_micro_time", "format_micro_time_ns", "format_rfc3339", "now_micro", "now_rfc3339"]

# [second, "%Y-%m-%dT%H:%M:%S", the same with "Z"]: one shared slot, as consecutive stamps share the second.
_last_second: list[int | str] = [-1, "", ""]


def _remember_second(second: int) -> None:
    text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    _last_second[:] = [second, text, text + "Z"]


def _second_text(second: int) -> str:
    if _last_second[0] != second:
        _remember_second(second)
    return _last_second[1]  # type: ignore[return-value]


def format_rfc3339(seconds: float) -> str:
    """``metav1.Time``: whole seconds, UTC, ``Z`` (a fraction is dropped, as Go's RFC3339 marshalling does)."""
    second = int(seconds // 1)
    if _last_second[0] != second:
        _remember_second(second)
    return _last_second[2]  # type: ignore[return-value]


def format_micro_time_ns(ns: int) -> str:
    """``metav1.MicroTime`` of a time in integer nanoseconds: six fractional digits, truncated as Go does.

    Integer arithmetic on purpose: a float of ~1.8e18 ns would round rather than truncate.
    """
    seconds, rest = divmod(ns, 1_000_000_000)
    return f"{_second_text(seconds)}.{rest // 1000:06d}Z"


def format_micro_time(seconds: float) -> str:
    """``metav1.MicroTime`` of a time in float seconds, rounded to the microsecond as ``datetime`` does: the
    fraction alone is scaled (scaling the whole value would add the float's error to the last digit)."""
    fraction, whole = math.modf(seconds)
    micros = round(fraction * 1_000_000)
    return format_micro_time_ns(int(whole) * 1_000_000_000 + micros * 1000)


def now_rfc3339() -> str:
    """The current time as ``metav1.Time``."""
    return format_rfc3339(time.time())


def now_micro() -> str:
    """The current time as ``metav1.MicroTime``."""
    return format_micro_time_ns(time.time_ns())
