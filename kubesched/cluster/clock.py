"""Timestamps the server writes into objects (RFC 3339 seconds for metadata, microseconds for MicroTime)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

_last_second: list[Any] = [None, ""]  # the last whole second formatted: strftime is slow for every write


def now_rfc3339() -> str:
    second = int(time.time())
    if _last_second[0] != second:
        _last_second[1] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _last_second[0] = second
    return _last_second[1]  # type: ignore[no-any-return]


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def rfc3339_in(seconds: int) -> str:
    """The RFC 3339 time ``seconds`` from now (a deletion timestamp with its grace period)."""
    return datetime.fromtimestamp(time.time() + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
