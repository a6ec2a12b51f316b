"""The hot value: how many pods went to a node recently, so a burst of replicas does not pile onto the node
that looked least loaded before any of them started.

crane's formula (``annotateNodeHotValue``): ``hot = Σ floor(bindings within timeRange / count)`` over the
policy's ``hotValue`` entries (default ``floor(n5m / 5) + floor(n1m / 2)``), each unit costing 10 points of
Score. crane counts bindings in its controller from ``Scheduled`` events and ships the result through a node
annotation refreshed only on metric ticks (≥ 3 min), so a burst sees a stale 0. Here the scheduler counts its
own bindings in PostBind (``HotValueStore.record``) and can seed the counts from recent ``Scheduled`` events
when it starts or takes over leadership (``rebuild_from_events``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable

    from .policy import HotValuePolicy

# The default scheduler's message (crane parses it with Fscanf "Successfully assigned %s to %s").
_SCHEDULED_MESSAGE = re.compile(r"Successfully assigned (\S+) to (\S+)")
_GC_INTERVAL = 10.0


def hot_value_of(counts: Sequence[int], counts_per_unit: Sequence[int]) -> int:
    """``Σ counts[i] // counts_per_unit[i]`` (crane's integer division)."""
    return sum(n // c for n, c in zip(counts, counts_per_unit, strict=True))


class HotValueStore:
    """Recent bindings per node: ``node -> {pod key: time}`` (Unix seconds), kept for ``retention`` seconds.

    Keyed by pod so the same binding seen twice (PostBind, then its event during a rebuild) counts once.
    Shared by every profile of a scheduler; each asks with its own policy's windows.
    """

    def __init__(self, retention: float = 300.0) -> None:
        self.retention = retention
        self._bindings: dict[str, dict[str, float]] = {}
        self._last_gc = float("-inf")

    def ensure_retention(self, seconds: float) -> None:
        """Keep bindings at least ``seconds`` (the longest ``timeRange`` of any policy using the store)."""
        self.retention = max(self.retention, seconds)

    def record(self, node: str, pod_key: str, when: float) -> None:
        self._bindings.setdefault(node, {})[pod_key] = when
        self._maybe_gc(when)

    def remove_node(self, node: str) -> None:
        self._bindings.pop(node, None)

    def clear(self) -> None:
        self._bindings.clear()

    def __len__(self) -> int:
        return sum(len(b) for b in self._bindings.values())

    def count(self, node: str, time_range: float, now: float) -> int:
        """Bindings to ``node`` strictly after ``now - time_range``."""
        since = now - time_range
        return sum(1 for t in self._bindings.get(node, {}).values() if t > since)

    def hot_value(self, node: str, windows: Sequence[HotValuePolicy], now: float) -> int:
        bindings = self._bindings.get(node)
        if not bindings:
            return 0
        times = list(bindings.values())
        total = 0
        for w in windows:
            since = now - w.time_range
            total += sum(1 for t in times if t > since) // w.count
        return total

    def hot_values(
        self, nodes: NodeTable, idx: np.ndarray, windows: Sequence[HotValuePolicy], now: float
    ) -> np.ndarray:
        """Hot value of each candidate slot (int64, aligned with ``idx``)."""
        self._maybe_gc(now)
        out = np.zeros(len(idx), dtype=np.int64)
        if not self._bindings or not windows:
            return out
        hot: dict[int, int] = {}
        for node in self._bindings:
            slot = nodes.index.get(node)
            if slot is not None:
                value = self.hot_value(node, windows, now)
                if value:
                    hot[slot] = value
        if not hot:
            return out
        by_slot = np.zeros(nodes.capacity, dtype=np.int64)
        by_slot[list(hot)] = list(hot.values())
        return by_slot.take(idx)

    def gc(self, now: float) -> None:
        """Forget bindings older than ``retention``."""
        since = now - self.retention
        for node in list(self._bindings):
            kept = {k: t for k, t in self._bindings[node].items() if t > since}
            if kept:
                self._bindings[node] = kept
            else:
                del self._bindings[node]
        self._last_gc = now

    def _maybe_gc(self, now: float) -> None:
        if now - self._last_gc >= _GC_INTERVAL:
            self.gc(now)

    def rebuild_from_events(self, events: Iterable[Mapping[str, Any]], now: float) -> int:
        """Record the bindings told by recent ``Scheduled`` events (core/v1 or events.k8s.io/v1 objects);
        returns how many were within ``retention`` of ``now``. Existing records are kept (same pod: once)."""
        added = 0
        for event in events:
            binding = binding_from_event(event)
            if binding is None:
                continue
            node, pod_key, when = binding
            if now - self.retention < when <= now + _GC_INTERVAL:
                self._bindings.setdefault(node, {})[pod_key] = when
                added += 1
        return added


def binding_from_event(event: Mapping[str, Any]) -> tuple[str, str, float] | None:
    """``(node, "namespace/name", time)`` of a Normal/Scheduled event, or None for any other event."""
    if event.get("type") != "Normal" or event.get("reason") != "Scheduled":
        return None
    message = event.get("message") or event.get("note") or ""
    m = _SCHEDULED_MESSAGE.match(message)
    if m is None:
        return None
    pod_key, node = m.groups()
    if pod_key.count("/") > 1:
        return None
    when = _event_time(event)
    return None if when is None else (node, pod_key, when)


def _event_time(event: Mapping[str, Any]) -> float | None:
    """When the event last happened: the series' last observation, else the last/event/first timestamp."""
    series = event.get("series") or {}
    meta = event.get("metadata") or {}
    for text in (
        series.get("lastObservedTime"),
        event.get("lastTimestamp"),
        event.get("deprecatedLastTimestamp"),
        event.get("eventTime"),
        event.get("firstTimestamp"),
        event.get("deprecatedFirstTimestamp"),
        meta.get("creationTimestamp"),
    ):
        if isinstance(text, str) and text:
            try:
                return datetime.fromisoformat(text).timestamp()
            except ValueError:
                continue
    return None


__all__ = ["HotValueStore", "binding_from_event", "hot_value_of"]
