"""Annotation values ``"<value>,<timestamp>"``: crane's local-time-with-literal-Z timestamps, RFC 3339, crane's
validity checks and the staleness rule (period + 5 min)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st
from la_helpers import SHANGHAI

from kubesched.loadaware.annotations import (
    DEFAULT_TIME_ZONE,
    AnnotationError,
    active_duration,
    format_annotation,
    format_crane_timestamp,
    format_rfc3339,
    is_fresh,
    parse_annotation,
    parse_timestamp,
    parse_value,
    read_usage,
    time_zone,
)


def utc(*args: int) -> float:
    return datetime(*args, tzinfo=UTC).timestamp()


# --- crane's own strings (gocrane/crane-scheduler#51) ------------------------------------------------------


def test_crane_issue_51_annotations_read_in_shanghai_time() -> None:
    sample = parse_annotation("0.63012,2023-10-17T15:04:32Z", SHANGHAI)
    assert sample.value == 0.63012
    # The Z is literal: 15:04:32 is Shanghai wall-clock time, 07:04:32 UTC.
    assert sample.timestamp == utc(2023, 10, 17, 7, 4, 32)
    hot = parse_annotation("0,2023-10-17T15:04:34Z", SHANGHAI)
    assert (hot.value, hot.timestamp) == (0.0, utc(2023, 10, 17, 7, 4, 34))


def test_the_same_string_read_in_utc_is_eight_hours_later() -> None:
    text = "0.63012,2023-10-17T15:04:32Z"
    assert (
        parse_annotation(text, time_zone("UTC")).timestamp - parse_annotation(text, SHANGHAI).timestamp
        == 8 * 3600
    )


def test_formatting_matches_cranes_layout() -> None:
    when = utc(2023, 10, 17, 7, 4, 32) + 0.9  # crane writes whole seconds
    assert format_crane_timestamp(when, SHANGHAI) == "2023-10-17T15:04:32Z"
    assert format_annotation(0.630123456, when, SHANGHAI) == "0.63012,2023-10-17T15:04:32Z"
    assert format_rfc3339(when) == "2023-10-17T07:04:32+00:00"
    assert format_annotation(0.5, when) == "0.50000,2023-10-17T07:04:32+00:00"


# --- timestamps ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2023-10-17T07:04:32+00:00", utc(2023, 10, 17, 7, 4, 32)),
        ("2023-10-17T15:04:32+08:00", utc(2023, 10, 17, 7, 4, 32)),
        ("2023-10-17T01:34:32-05:30", utc(2023, 10, 17, 7, 4, 32)),
        ("2023-10-17T15:04:32.25Z", utc(2023, 10, 17, 7, 4, 32) + 0.25),  # Go accepts fractional seconds
        ("2023-10-17T7:04:32Z", utc(2023, 10, 16, 23, 4, 32)),  # and a one-digit hour
        ("2024-02-29T08:00:00Z", utc(2024, 2, 29, 0, 0, 0)),
    ],
)
def test_timestamps(text: str, expected: float) -> None:
    assert parse_timestamp(text, SHANGHAI) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2023",  # shorter than crane's minimum of 5 characters
        "2023-10-17 15:04:32Z",
        "2023-10-17T15:04:32",  # no Z, no offset
        "2023-10-17T15:04Z",
        "2023-13-01T00:00:00Z",
        "2023-02-30T00:00:00Z",
        "2023-10-17T24:00:00Z",
        "2023-10-17T15:60:00Z",
        "2023-10-17T15:04:60Z",
        "2023-10-17T15:04:32+24:00",
        "23-10-17T15:04:32Z",
        " 2023-10-17T15:04:32Z",
    ],
)
def test_bad_timestamps(text: str) -> None:
    with pytest.raises(AnnotationError):
        parse_timestamp(text, SHANGHAI)


# --- values -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0.0), ("0.63012", 0.63012), ("1", 1.0), (".5", 0.5), ("5.", 5.0), ("1e-1", 0.1), ("+0.5", 0.5)],
)
def test_values(text: str, expected: float) -> None:
    assert parse_value(text) == expected


def test_infinity_is_a_value_as_in_go() -> None:
    assert parse_value("+Inf") == float("inf")


@pytest.mark.parametrize("text", ["", "abc", "NaN", "nan", " 0.5", "0.5 ", "1_0", "0x1p-2", "0,5"])
def test_bad_values(text: str) -> None:
    with pytest.raises(AnnotationError):
        parse_value(text)


@pytest.mark.parametrize(
    "text",
    [
        "0.5",  # no timestamp
        "0.5,2023-10-17T15:04:32Z,extra",  # crane splits on "," and wants exactly two parts
        "-0.1,2023-10-17T15:04:32Z",  # negative
        "x,2023-10-17T15:04:32Z",
        "0.5,yesterday",
        "0.5,",
    ],
)
def test_bad_annotations(text: str) -> None:
    with pytest.raises(AnnotationError):
        parse_annotation(text, SHANGHAI)


def test_timestamp_memo_is_filled_and_used() -> None:
    memo: dict[str, float] = {}
    first = parse_annotation("0.1,2023-10-17T15:04:32Z", SHANGHAI, timestamp_memo=memo)
    assert memo == {"2023-10-17T15:04:32Z": first.timestamp}
    memo["2023-10-17T15:04:32Z"] = 42.0  # a planted value proves the memo is consulted
    assert parse_annotation("0.2,2023-10-17T15:04:32Z", SHANGHAI, timestamp_memo=memo).timestamp == 42.0
    with pytest.raises(AnnotationError):  # value checks still apply with a known timestamp
        parse_annotation("-1,2023-10-17T15:04:32Z", SHANGHAI, timestamp_memo=memo)


# --- staleness ----------------------------------------------------------------------------------------------


def test_active_duration_is_period_plus_five_minutes() -> None:
    assert active_duration(180) == 480  # *_5m metrics: 3m + 5m
    assert active_duration(900) == 1200  # *_1h: 15m + 5m
    assert active_duration(3 * 3600) == 3 * 3600 + 300


def test_freshness_is_strict() -> None:
    assert is_fresh(1000.0, 480.0, 1479.999)
    assert not is_fresh(1000.0, 480.0, 1480.0)


def test_read_usage() -> None:
    stamp = utc(2023, 10, 17, 7, 4, 32)
    annotations = {"cpu_usage_avg_5m": "0.63012,2023-10-17T15:04:32Z", "bad": "oops"}
    assert read_usage(annotations, "cpu_usage_avg_5m", 480, SHANGHAI, stamp + 479) == 0.63012
    assert read_usage(annotations, "cpu_usage_avg_5m", 480, SHANGHAI, stamp + 480) is None  # expired
    assert read_usage(annotations, "missing", 480, SHANGHAI, stamp) is None
    assert read_usage(annotations, "bad", 480, SHANGHAI, stamp) is None
    # crane's TZ pitfall: read in UTC, Shanghai wall-clock time lies 8 hours ahead, so two-hour-old data
    # still counts as fresh.
    assert read_usage(annotations, "cpu_usage_avg_5m", 480, time_zone("UTC"), stamp + 2 * 3600) == 0.63012


# --- zones --------------------------------------------------------------------------------------------------


def test_zone_defaults_to_tz_then_shanghai(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TZ", raising=False)
    assert str(time_zone()) == DEFAULT_TIME_ZONE == "Asia/Shanghai"
    monkeypatch.setenv("TZ", "")
    assert str(time_zone()) == "Asia/Shanghai"
    monkeypatch.setenv("TZ", "Europe/Berlin")
    assert str(time_zone()) == "Europe/Berlin"
    assert str(time_zone("Asia/Tokyo")) == "Asia/Tokyo"  # an explicit name wins over TZ
    assert time_zone("UTC") is UTC


def test_unknown_zone_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
        time_zone("Mars/Olympus")


# --- round trips --------------------------------------------------------------------------------------------

_WHEN = st.integers(min_value=int(utc(2000, 1, 1)), max_value=int(utc(2099, 12, 31)))
_VALUE = st.floats(min_value=0, max_value=10, allow_nan=False)


@given(_WHEN, _VALUE, st.sampled_from(["Asia/Shanghai", "UTC", "Asia/Kolkata", "Asia/Kathmandu"]))
def test_crane_format_round_trips_in_zones_without_dst(when: int, value: float, zone: str) -> None:
    tz = time_zone(zone)
    sample = parse_annotation(format_annotation(value, when + 0.5, tz), tz)
    assert sample.timestamp == when
    assert sample.value == float(f"{value:.5f}")


@given(_WHEN, _VALUE)
def test_rfc3339_round_trips_whatever_the_zone(when: int, value: float) -> None:
    text = format_annotation(value, when)
    assert parse_annotation(text, SHANGHAI).timestamp == when
    assert parse_annotation(text, time_zone("America/New_York")).timestamp == when


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_values_go_writes_are_read_back(value: float) -> None:
    for text in (repr(value), f"{value:.5f}", f"{value:e}"):
        assert parse_value(text) == float(text)


@given(st.text(max_size=40))
def test_parse_annotation_never_fails_otherwise(text: str) -> None:
    try:
        sample = parse_annotation(text, SHANGHAI)
    except AnnotationError:
        return
    assert sample.value >= 0


def test_shanghai_without_tz_data(monkeypatch: pytest.MonkeyPatch) -> None:
    import kubesched.loadaware.annotations as annotations

    def no_data(key: str) -> None:
        raise annotations.ZoneInfoNotFoundError(key)

    monkeypatch.setattr(annotations, "ZoneInfo", no_data)
    zone = time_zone("Asia/Shanghai")
    assert parse_annotation("0.5,2023-10-17T15:04:32Z", zone).timestamp == utc(2023, 10, 17, 7, 4, 32)
    with pytest.raises(ValueError):
        time_zone("Europe/Berlin")
