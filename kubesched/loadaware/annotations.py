"""Node load annotations ``"<value>,<timestamp>"``: parsing, formatting and staleness. Pure functions.

crane's annotator writes ``cpu_usage_avg_5m: "0.63012,2023-10-17T15:04:32Z"``. The timestamp is wall-clock time
in the zone named by ``TZ`` (default ``Asia/Shanghai``) followed by a *literal* ``Z``: it is not UTC, and the
scheduler reads it back in its own ``TZ``. We read that form, and RFC 3339 with an explicit offset
(``2023-10-17T07:04:32+00:00``), which is unambiguous. A ``Z`` timestamp is read in the configured zone (set
the zone to ``UTC`` to read ``Z`` as RFC 3339 UTC).

A value is *fresh* while ``now < timestamp + period + 5m``, ``period`` being the metric's ``syncPolicy`` period;
the hot value annotation ``node_hot_value`` is fresh for 5 minutes.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DEFAULT_TIME_ZONE = "Asia/Shanghai"
# Extra lifetime of a value beyond its sync period (crane's ExtraActivePeriod).
EXTRA_ACTIVE_PERIOD = 300.0
HOT_VALUE_KEY = "node_hot_value"
HOT_VALUE_ACTIVE_PERIOD = 300.0
# crane rejects timestamps shorter than this before trying to parse them.
MIN_TIMESTAMP_LENGTH = 5

# Go's time.Parse of "2006-01-02T15:04:05Z": fixed-width fields except the hour (one or two digits), optional
# fractional seconds, then the literal Z. RFC 3339 adds a numeric offset instead of the Z.
_TIMESTAMP = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{1,2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(?:(Z)|([+-])(\d{2}):(\d{2}))"
)
# What Go's strconv.ParseFloat accepts in decimal (no hex floats, no underscores, no surrounding spaces).
_FLOAT = re.compile(
    r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf|infinity|nan)", re.IGNORECASE
)


_SHANGHAI_FIXED = timezone(timedelta(hours=8), DEFAULT_TIME_ZONE)


class AnnotationError(ValueError):
    """An annotation value that cannot be used (crane logs these and treats the metric as unknown)."""


@dataclass(frozen=True, slots=True)
class LoadSample:
    """One metric of one node: ``value`` (a fraction, 0.63 = 63 %) observed at ``timestamp`` (Unix seconds)."""

    value: float
    timestamp: float


def time_zone(name: str | None = None) -> tzinfo:
    """The zone crane-style timestamps are written in: ``name``, else ``$TZ``, else Asia/Shanghai.

    Raises ``ValueError`` for a zone the system does not know (crane would crash on first use instead).
    """
    zone = name if name else os.environ.get("TZ") or DEFAULT_TIME_ZONE
    if zone in ("UTC", "Etc/UTC", "Z"):
        return UTC
    try:
        return ZoneInfo(zone.removeprefix(":"))
    except (ZoneInfoNotFoundError, ValueError):
        # An image without tz data still gets crane's default: Shanghai is UTC+8 without DST since 1991.
        if zone == DEFAULT_TIME_ZONE:
            return _SHANGHAI_FIXED
        raise ValueError(
            f"unknown time zone {zone!r}: use an IANA name such as Asia/Shanghai or UTC"
        ) from None


def parse_timestamp(text: str, zone: tzinfo) -> float:
    """Unix seconds of a crane (``...Z`` in ``zone``) or RFC 3339 (numeric offset) timestamp."""
    if len(text) < MIN_TIMESTAMP_LENGTH:
        raise AnnotationError(f"illegal timestamp {text!r}")
    m = _TIMESTAMP.fullmatch(text)
    if m is None:
        raise AnnotationError(f"timestamp {text!r} is neither YYYY-MM-DDTHH:MM:SSZ nor RFC 3339")
    year, month, day, hour, minute, second, frac, z, sign, off_h, off_m = m.groups()
    tz: tzinfo = zone
    if z is None:
        offset = timedelta(hours=int(off_h), minutes=int(off_m))
        if offset >= timedelta(hours=24) or int(off_m) >= 60:
            raise AnnotationError(f"timestamp {text!r}: offset out of range")
        tz = timezone(-offset if sign == "-" else offset)
    try:
        when = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=tz)
    except ValueError as exc:
        raise AnnotationError(f"timestamp {text!r}: {exc}") from None
    seconds = when.timestamp()
    if frac:
        seconds += int(frac) / 10 ** len(frac)
    return seconds


def parse_value(text: str) -> float:
    """A metric value as Go's ``strconv.ParseFloat`` reads it; NaN is refused (it poisons the score)."""
    if _FLOAT.fullmatch(text) is None:
        raise AnnotationError(f"failed to parse float {text!r}")
    value = float(text)
    if math.isnan(value):
        raise AnnotationError("value is NaN")
    return value


def parse_annotation(
    text: str, zone: tzinfo, *, timestamp_memo: dict[str, float] | None = None
) -> LoadSample:
    """``"<value>,<timestamp>"`` to a sample, with crane's checks: exactly one comma, a parseable timestamp,
    a float value, not negative. ``timestamp_memo`` (timestamp text -> seconds, for one ``zone``) saves
    re-parsing timestamps shared by many annotations."""
    parts = text.split(",")
    if len(parts) != 2:
        raise AnnotationError(f'illegal value {text!r}: want "<value>,<timestamp>"')
    if timestamp_memo is None:
        timestamp = parse_timestamp(parts[1], zone)
    else:
        known = timestamp_memo.get(parts[1])
        timestamp = parse_timestamp(parts[1], zone) if known is None else known
        timestamp_memo[parts[1]] = timestamp
    value = parse_value(parts[0])
    if value < 0:
        raise AnnotationError(f"illegal value {text!r}: negative")
    return LoadSample(value, timestamp)


def active_duration(period: float) -> float:
    """How long a value synced every ``period`` seconds stays usable."""
    return period + EXTRA_ACTIVE_PERIOD


def is_fresh(timestamp: float, active: float, now: float) -> bool:
    """crane's ``inActivePeriod``: strictly before ``timestamp + active``."""
    return now < timestamp + active


def read_usage(
    annotations: Mapping[str, str], key: str, active: float, zone: tzinfo, now: float
) -> float | None:
    """The fresh, valid value of annotation ``key``, or None when missing, malformed, negative or expired
    (crane's ``getResourceUsage`` without the error text)."""
    text = annotations.get(key)
    if text is None:
        return None
    try:
        sample = parse_annotation(text, zone)
    except AnnotationError:
        return None
    return sample.value if is_fresh(sample.timestamp, active, now) else None


def format_crane_timestamp(when: float, zone: tzinfo) -> str:
    """``when`` (Unix seconds) as crane writes it: local time in ``zone``, whole seconds, literal ``Z``."""
    local = datetime.fromtimestamp(math.floor(when), tz=zone)
    return local.strftime("%Y-%m-%dT%H:%M:%SZ")


def format_rfc3339(when: float) -> str:
    """``when`` as RFC 3339 UTC with an explicit ``+00:00`` (never mistaken for crane's local ``Z``)."""
    return datetime.fromtimestamp(math.floor(when), tz=UTC).strftime("%Y-%m-%dT%H:%M:%S+00:00")


def format_annotation(value: float, when: float, zone: tzinfo | None = None) -> str:
    """An annotation value as crane writes it (``"%.5f,<crane timestamp>"``); with ``zone=None``, RFC 3339."""
    stamp = format_rfc3339(when) if zone is None else format_crane_timestamp(when, zone)
    return f"{value:.5f},{stamp}"


__all__ = [
    "DEFAULT_TIME_ZONE",
    "EXTRA_ACTIVE_PERIOD",
    "HOT_VALUE_ACTIVE_PERIOD",
    "HOT_VALUE_KEY",
    "AnnotationError",
    "LoadSample",
    "active_duration",
    "format_annotation",
    "format_crane_timestamp",
    "format_rfc3339",
    "is_fresh",
    "parse_annotation",
    "parse_timestamp",
    "parse_value",
    "read_usage",
    "time_zone",
]
