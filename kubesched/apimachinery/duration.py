"""Go duration strings ("15s", "1m30s", "1.5h", "300ms") as used by ``metav1.Duration``, to and from seconds.

The grammar follows Go's ``time.ParseDuration``: an optional sign, then one or more ``<decimal><unit>`` pairs
with units ns, us (or µs/μs), ms, s, m, h; a bare "0" is allowed; the total must fit in int64 nanoseconds.
"""

from __future__ import annotations

from fractions import Fraction

_NS_PER_UNIT: dict[str, int] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_MAX_NS = 2**63 - 1
_DIGITS = "0123456789"


class DurationError(ValueError):
    """A string that is not a Go duration; the message is the one Go's parser gives."""


def parse_duration_ns(text: str) -> int:
    """Nanoseconds in a Go duration string."""
    quoted = f'"{text}"'
    s = text
    negative = False
    if s[:1] in ("-", "+"):
        negative = s[0] == "-"
        s = s[1:]
    if s == "0":
        return 0
    if not s:
        raise DurationError(f"time: invalid duration {quoted}")
    total = Fraction(0)
    while s:
        if s[0] not in _DIGITS and s[0] != ".":
            raise DurationError(f"time: invalid duration {quoted}")
        i = 0
        while i < len(s) and s[i] in _DIGITS:
            i += 1
        whole, s = s[:i], s[i:]
        fraction = ""
        if s.startswith("."):
            j = 1
            while j < len(s) and s[j] in _DIGITS:
                j += 1
            fraction, s = s[1:j], s[j:]
        if not whole and not fraction:
            raise DurationError(f"time: invalid duration {quoted}")
        k = 0
        while k < len(s) and s[k] != "." and s[k] not in _DIGITS:
            k += 1
        unit, s = s[:k], s[k:]
        if not unit:
            raise DurationError(f"time: missing unit in duration {quoted}")
        if unit not in _NS_PER_UNIT:
            raise DurationError(f'time: unknown unit "{unit}" in duration {quoted}')
        value = Fraction(int(whole or "0"))
        if fraction:
            value += Fraction(int(fraction), 10 ** len(fraction))
        total += value * _NS_PER_UNIT[unit]
        if total > _MAX_NS + (1 if negative else 0):
            raise DurationError(f"time: invalid duration {quoted}")
    ns = int(total)  # Go truncates sub-nanosecond fractions
    return -ns if negative else ns


def parse_duration(text: str) -> float:
    """Seconds (float) in a Go duration string: ``parse_duration("1m30s") == 90.0``."""
    return parse_duration_ns(text) / 1e9


def format_duration_ns(ns: int) -> str:
    """The Go rendering of a duration (``time.Duration.String``): "1h2m3.5s", "1.5ms", "0s"."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("\u00b5s", 1_000), ("ns", 1)):
            if ns >= size:
                return f"{sign}{_decimal(ns, size)}{unit}"
    hours, rest = divmod(ns, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    seconds = _decimal(rest, 1_000_000_000)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def format_duration(seconds: float) -> str:
    """The Go rendering of a duration given in seconds, rounded to the nanosecond."""
    return format_duration_ns(round(seconds * 1e9))


def _decimal(value: int, unit: int) -> str:
    """``value / unit`` as a shortest exact decimal string ("1.5", "3", "0.25")."""
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    width = len(str(unit)) - 1
    return f"{whole}.{str(frac).rjust(width, '0').rstrip('0')}"
