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
from collections import deque
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
        # Per set of windows asked about (one per policy): counts kept current as bindings arrive and age out,
        # so a Score over 500 nodes does not rescan every recent binding of the cluster.
        self._views: dict[tuple[tuple[float, int], ...], _WindowedCounts] = {}

    def ensure_retention(self, seconds: float) -> None:
        """Keep bindings at least ``seconds`` (the longest ``timeRange`` of any policy using the store)."""
        self.retention = max(self.retention, seconds)

    def record(self, node: str, pod_key: str, when: float) -> None:
        per_node = self._bindings.setdefault(node, {})
        known = per_node.get(pod_key)
        per_node[pod_key] = when
        if known is None:
            for view in self._views.values():
                view.add(node, when)
        elif known != when:
            self._views.clear()  # the same binding seen at another time: rebuilt on the next question
        self._maybe_gc(when)

    def has(self, node: str, pod_key: str) -> bool:
        """Whether the binding of ``pod_key`` to ``node`` is recorded."""
        return pod_key in self._bindings.get(node, ())

    def remove_node(self, node: str) -> None:
        if self._bindings.pop(node, None) is not None:
            self._views.clear()

    def clear(self) -> None:
        self._bindings.clear()
        self._views.clear()

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
        """Hot value of each candidate slot (int64, aligned with ``idx``): the same numbers as ``hot_value`` per
        node, from counts kept current between calls (cost: the bindings that arrived or aged out since)."""
        self._maybe_gc(now)
        if not self._bindings or not windows:
            return np.zeros(len(idx), dtype=np.int64)
        key = tuple((float(w.time_range), int(w.count)) for w in windows)
        view = self._views.get(key)
        if view is None or view.broken:
            view = self._views[key] = _WindowedCounts(key, self._bindings)
        return view.by_slot(nodes, now).take(idx)

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
        # Views only ever hold bindings inside their windows (<= retention), so forgetting older ones changes
        # nothing they count; they stay.

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
        if added:
            self._views.clear()  # bindings from the past arrive out of order: rebuild on the next question
        return added


class _WindowedCounts:
    """For one set of windows ``((time_range, count), ...)``: per window, the bindings inside it in time order
    and how many each node has; the resulting hot value per node, and the same per NodeTable slot."""

    def __init__(
        self, windows: tuple[tuple[float, int], ...], bindings: Mapping[str, Mapping[str, float]]
    ) -> None:
        self.windows = windows
        events = sorted((t, node) for node, per_pod in bindings.items() for t in per_pod.values())
        self.queues: list[deque[tuple[float, str]]] = [deque(events) for _ in windows]
        self.counts: list[dict[str, int]] = []
        for _ in windows:
            counts: dict[str, int] = {}
            for _, node in events:
                counts[node] = counts.get(node, 0) + 1
            self.counts.append(counts)
        self.hot: dict[str, int] = {}
        self._dirty: set[str] = {node for _, node in events}
        self._slots: np.ndarray | None = None
        self._slots_key: tuple[int, int] | None = None
        self._last_added = events[-1][0] if events else float("-inf")
        self.broken = False

    def add(self, node: str, when: float) -> None:
        if when < self._last_added:
            self.broken = True  # out of order (clock step): the store rebuilds this view when next asked
            return
        self._last_added = when
        for queue, counts in zip(self.queues, self.counts, strict=True):
            queue.append((when, node))
            counts[node] = counts.get(node, 0) + 1
        self._dirty.add(node)

    def by_slot(self, nodes: NodeTable, now: float) -> np.ndarray:
        for (time_range, _), queue, counts in zip(self.windows, self.queues, self.counts, strict=True):
            since = now - time_range
            while queue and queue[0][0] <= since:
                _, node = queue.popleft()
                left = counts[node] - 1
                if left:
                    counts[node] = left
                else:
                    del counts[node]
                self._dirty.add(node)
        key = (nodes.node_version, nodes.capacity)
        if self._slots is None or self._slots_key != key:
            self._slots = np.zeros(nodes.capacity, dtype=np.int64)
            self._slots_key = key
            self._dirty.update(self.hot)
        slots = self._slots
        index = nodes.index
        for node in self._dirty:
            value = sum(c.get(node, 0) // per for c, (_, per) in zip(self.counts, self.windows, strict=True))
            if value:
                self.hot[node] = value
            else:
                self.hot.pop(node, None)
            slot = index.get(node)
            if slot is not None:
                slots[slot] = value
        self._dirty.clear()
        return slots


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
