"""API timestamps: the memoised second gives what strftime gives, in any order of calls."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from kubesched.apimachinery.timefmt import (
    format_micro_time,
    format_micro_time_ns,
    format_rfc3339,
    now_micro,
    now_rfc3339,
)

NS = st.integers(0, 4_102_444_800 * 10**9)  # up to 2100


@given(st.lists(NS, min_size=1, max_size=6))
def test_micro_time_truncates_to_microseconds(times: list[int]) -> None:
    for ns in times:
        seconds, rest = divmod(ns, 10**9)
        want = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{rest // 1000:06d}Z"
        assert format_micro_time_ns(ns) == want


@given(st.lists(st.floats(0, 4_102_444_800, allow_nan=False), min_size=1, max_size=6))
def test_rfc3339_drops_the_fraction(times: list[float]) -> None:
    for t in times:
        want = datetime.fromtimestamp(int(t), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        assert format_rfc3339(t) == want
        # Interleaving with micro-time formatting of another second must not confuse the shared cache.
        format_micro_time_ns(int(t + 7) * 10**9)
        assert format_rfc3339(t) == want


@given(st.lists(st.floats(min_value=0, max_value=4_000_000_000, allow_nan=False), max_size=20))
def test_micro_time_of_float_seconds_matches_datetime(times: list[float]) -> None:
    for t in times:
        assert format_micro_time(t) == datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), t


def test_now() -> None:
    before = int(time.time())
    stamp = now_rfc3339()
    after = int(time.time())
    assert stamp in {format_rfc3339(s) for s in range(before, after + 1)}
    micro = now_micro()
    assert len(micro) == len("2026-01-01T00:00:00.000000Z") and micro.endswith("Z")
