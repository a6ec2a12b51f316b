"""Where node load values come from, as numpy columns over node slots.

A ``LoadSource`` answers, for the candidate slots of a cycle, each metric's value and timestamp
(``LoadColumns``: arrays of shape (metrics, candidates), NaN where unknown). Two sources:

- ``AnnotationLoadSource`` reads crane's node annotations. Each node's annotations are parsed once per node
  object version: a slot is looked at again only when its ``row_version`` moved, and re-parsed only when one
  of the watched annotation strings changed (pod bindings also move ``row_version``).
- ``StoreLoadSource`` reads an ``InMemoryLoadStore`` that a Prometheus poller fills (direct mode), picking up
  only the nodes written since the last cycle.

Freshness is not decided here: timestamps are returned as they are and the plugin compares them with "now".
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import tzinfo
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import numpy as np

from .annotations import AnnotationError, parse_annotation

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable

log = logging.getLogger(__name__)

_NO_VERSION = -1
_TIMESTAMP_MEMO_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class LoadColumns:
    """``values[m, i]`` and ``timestamps[m, i]`` of metric ``metrics[m]`` on candidate ``i`` (NaN = unknown)."""

    metrics: tuple[str, ...]
    values: np.ndarray  # float64 (M, n)
    timestamps: np.ndarray  # float64 (M, n), Unix seconds

    def row(self, metric: str) -> int:
        return self.metrics.index(metric)


@runtime_checkable
class LoadSource(Protocol):
    metrics: tuple[str, ...]

    def columns(self, nodes: NodeTable, idx: np.ndarray) -> LoadColumns: ...


class _SlotColumns:
    """Per-slot value/timestamp arrays for a fixed list of metrics, grown with the node table."""

    def __init__(self, metrics: Sequence[str]) -> None:
        self.metrics = tuple(dict.fromkeys(metrics))
        self._table: NodeTable | None = None
        self._reset(0)

    def _reset(self, capacity: int) -> None:
        m = len(self.metrics)
        self._values = np.full((m, capacity), np.nan)
        self._stamps = np.full((m, capacity), np.nan)

    def _fit(self, nodes: NodeTable) -> bool:
        """Follow the table's size; True when everything must be recomputed (a new table)."""
        if nodes is not self._table:
            self._table = nodes
            self._reset(nodes.capacity)
            return True
        have = self._values.shape[1]
        if nodes.capacity > have:
            extra = np.full((len(self.metrics), nodes.capacity - have), np.nan)
            self._values = np.hstack((self._values, extra))
            self._stamps = np.hstack((self._stamps, extra))
        return False

    def _take(self, idx: np.ndarray) -> LoadColumns:
        return LoadColumns(self.metrics, self._values.take(idx, axis=1), self._stamps.take(idx, axis=1))


class AnnotationLoadSource(_SlotColumns):
    """Load values from node annotations ``<metric>: "<value>,<timestamp>"`` (crane's annotator)."""

    def __init__(self, metrics: Sequence[str], zone: tzinfo) -> None:
        super().__init__(metrics)
        self.zone = zone
        self._seen = np.zeros(0, dtype=np.int64)  # row_version each slot was last looked at
        self._raw: list[tuple[str | None, ...] | None] = []  # the watched annotation strings per slot
        self._timestamp_memo: dict[str, float] = {}

    def _fit(self, nodes: NodeTable) -> bool:
        fresh = super()._fit(nodes)
        have = len(self._seen)
        if fresh:
            self._seen = np.full(nodes.capacity, _NO_VERSION, dtype=np.int64)
            self._raw = [None] * nodes.capacity
        elif nodes.capacity > have:
            extra = np.full(nodes.capacity - have, _NO_VERSION, dtype=np.int64)
            self._seen = np.concatenate((self._seen, extra))
            self._raw.extend([None] * (nodes.capacity - have))
        return fresh

    def columns(self, nodes: NodeTable, idx: np.ndarray) -> LoadColumns:
        self._fit(nodes)
        versions = nodes.row_version.take(idx)
        moved = idx[self._seen.take(idx) != versions]
        for slot in moved.tolist():
            self._refresh(nodes, slot)
        if len(moved):
            self._seen[moved] = nodes.row_version.take(moved)
        return self._take(idx)

    def _refresh(self, nodes: NodeTable, slot: int) -> None:
        try:
            annotations = (nodes.node(slot).get("metadata") or {}).get("annotations") or {}
        except KeyError:  # no node in the slot
            annotations = {}
        raw = tuple(annotations.get(m) for m in self.metrics)
        if raw == self._raw[slot]:
            return
        self._raw[slot] = raw
        for row, text in enumerate(raw):
            value = stamp = np.nan
            if text is not None:
                try:
                    value, stamp = self._parse(text)
                except AnnotationError as exc:
                    log.debug("node %s annotation %s: %s", nodes.names[slot], self.metrics[row], exc)
            self._values[row, slot] = value
            self._stamps[row, slot] = stamp

    def _parse(self, text: str) -> tuple[float, float]:
        # Annotators stamp many nodes in the same second: each timestamp string is parsed once.
        memo = self._timestamp_memo
        if len(memo) >= _TIMESTAMP_MEMO_LIMIT:
            memo.clear()
        sample = parse_annotation(text, self.zone, timestamp_memo=memo)
        return sample.value, sample.timestamp


class InMemoryLoadStore:
    """Latest load samples per node and metric, written by a poller (direct mode), read by ``StoreLoadSource``.

    Every write appends the node name to a change log, so readers catch up on what changed only.
    """

    def __init__(self, max_log: int = 1 << 16) -> None:
        self._samples: dict[str, dict[str, tuple[float, float]]] = {}
        self.change_log: list[str] = []
        self.log_epoch = 0
        self._max_log = max_log

    def update(self, node: str, metric: str, value: float, timestamp: float) -> None:
        self._samples.setdefault(node, {})[metric] = (float(value), float(timestamp))
        self._changed(node)

    def update_many(self, samples: Iterable[tuple[str, str, float, float]]) -> None:
        """``(node, metric, value, timestamp)`` tuples."""
        for node, metric, value, timestamp in samples:
            self.update(node, metric, value, timestamp)

    def remove_node(self, node: str) -> None:
        if self._samples.pop(node, None) is not None:
            self._changed(node)

    def sample(self, node: str, metric: str) -> tuple[float, float] | None:
        """(value, timestamp) or None."""
        return self._samples.get(node, {}).get(metric)

    def node_samples(self, node: str) -> dict[str, tuple[float, float]]:
        return dict(self._samples.get(node, {}))

    def _changed(self, node: str) -> None:
        if len(self.change_log) >= self._max_log:
            self.change_log.clear()
            self.log_epoch += 1
        self.change_log.append(node)


class StoreLoadSource(_SlotColumns):
    """Load values from an ``InMemoryLoadStore``, kept as slot columns and updated from its change log."""

    def __init__(self, store: InMemoryLoadStore, metrics: Sequence[str]) -> None:
        super().__init__(metrics)
        self.store = store
        self._epoch = -1
        self._pos = 0
        self._node_version = -1

    def columns(self, nodes: NodeTable, idx: np.ndarray) -> LoadColumns:
        new_table = self._fit(nodes)
        store = self.store
        if new_table or store.log_epoch != self._epoch or nodes.node_version != self._node_version:
            # Nodes came or went (slots may now hold other nodes) or we fell behind the log: rebuild.
            self._values.fill(np.nan)
            self._stamps.fill(np.nan)
            for slot in nodes.slots().tolist():
                self._load(slot, nodes.names[slot])
            self._epoch, self._node_version = store.log_epoch, nodes.node_version
        else:
            for name in dict.fromkeys(store.change_log[self._pos :]):
                slot = nodes.index.get(name)
                if slot is not None:
                    self._load(slot, name)
        self._pos = len(store.change_log)
        return self._take(idx)

    def _load(self, slot: int, name: str | None) -> None:
        samples = self.store.node_samples(name) if name else {}
        for row, metric in enumerate(self.metrics):
            value, stamp = samples.get(metric, (np.nan, np.nan))
            self._values[row, slot] = value if value >= 0 else np.nan
            self._stamps[row, slot] = stamp


__all__ = [
    "AnnotationLoadSource",
    "InMemoryLoadStore",
    "LoadColumns",
    "LoadSource",
    "StoreLoadSource",
]
