"""What the pods nominated to each node request, as columns over the node table.

Upstream's ``RunFilterPluginsWithNominatedPods`` counts, on a node, the pods nominated there with at least the
priority of the pod being scheduled that are not running yet (not in the table). Asking the nominator node by
node made every scheduling cycle and every preemption walk all nominated pods: with thousands of preemptors
waiting, that was most of a cycle. ``NominatedRequests`` keeps the answer as arrays instead:

- which nominated pods count (``_counted``: nominated to a node of the table, not in the table themselves);
- per priority threshold P asked for (a few at a time), per slot: the summed requests of the counted pods with
  priority >= P, how many there are, and how many of them ask for host ports (``Level``).

It follows the ``Nominator`` (which calls ``nominated``/``unnominated``) and the table (a ``TableListener``: a
nominated pod assumed or bound stops counting, one forgotten counts again). What-if changes of the table
(``notify=False``) are not seen, as they restore what they touch before anyone asks. A change of the set of
nodes or of the resource columns rebuilds everything from the nominator on the next question.

The pod being scheduled never counts on its own nominated node: callers take it off with ``own``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from collections.abc import Iterable

    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo


@dataclass(slots=True)
class Level:
    """Per slot, the nominated pods with at least one priority: summed requests, number, number with host ports."""

    taken: np.ndarray  # (capacity, width) int64
    count: np.ndarray  # (capacity,) int64
    ports: np.ndarray  # (capacity,) int64
    total: int  # count.sum()


@dataclass(slots=True)
class Counted:
    """A nominated pod that counts: where, its priority, its requests as a full-width row, whether it has ports."""

    slot: int
    priority: int
    row: np.ndarray
    ports: bool


class NominatedRequests:
    """See the module docstring. Built by ``Nominator.requests_on(table)``."""

    def __init__(self, table: NodeTable, pods: Iterable[tuple[PodInfo, str]], max_levels: int = 8) -> None:
        self.table = table
        self.max_levels = max_levels
        self._nominated: dict[str, tuple[PodInfo, str]] = {}  # uid -> (pod, node name)
        self._counted: dict[str, Counted] = {}
        self._levels: dict[int, Level] = {}
        self._shape = (-1, -1, -1)  # (capacity, width, node_version) the arrays were built for
        for pi, node in pods:
            self._nominated[pi.uid] = (pi, node)
        self._rebuild()
        table.add_listener(self)

    # --- questions ---------------------------------------------------------------------------------------

    def level(self, priority: int) -> Level:
        """The nominated pods with priority >= ``priority`` that count, per slot."""
        self._check_shape()
        lvl = self._levels.get(priority)
        if lvl is None:
            if len(self._levels) >= self.max_levels:
                self._levels.pop(next(iter(self._levels)))
            lvl = self._levels[priority] = self._compute(priority)
        return lvl

    def own(self, uid: str) -> Counted | None:
        """Where the pod ``uid`` counts itself (nominated, not in the table), if it does."""
        self._check_shape()
        return self._counted.get(uid)

    # --- from the nominator ------------------------------------------------------------------------------

    def nominated(self, pi: PodInfo, node: str) -> None:
        self._uncount(pi.uid)
        self._nominated[pi.uid] = (pi, node)
        if self.table.pod_slot(pi.uid) is None:
            self._count(pi, node)

    def unnominated(self, uid: str) -> None:
        if self._nominated.pop(uid, None) is not None:
            self._uncount(uid)

    # --- TableListener -----------------------------------------------------------------------------------

    def on_pod_added(self, pi: PodInfo, slot: int) -> None:
        if pi.uid in self._counted:
            self._uncount(pi.uid)

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None:
        entry = self._nominated.get(pi.uid)
        if entry is not None and pi.uid not in self._counted:
            self._count(entry[0], entry[1])

    def on_pod_replaced(self, old: PodInfo, new: PodInfo, slot: int) -> None:
        pass  # still in the table

    def on_node_changed(self, slot: int) -> None:
        pass  # a new or removed node changes node_version: _check_shape rebuilds

    # --- upkeep ------------------------------------------------------------------------------------------

    def _current_shape(self) -> tuple[int, int, int]:
        t = self.table
        return (t.capacity, t.width, t.node_version)

    def _check_shape(self) -> None:
        if self._shape != self._current_shape():
            self._rebuild()

    def _rebuild(self) -> None:
        self._shape = self._current_shape()
        self._counted.clear()
        self._levels.clear()
        pod_slot = self.table.pod_slot
        for pi, node in self._nominated.values():
            if pod_slot(pi.uid) is None:
                self._count(pi, node)

    def _row(self, pi: PodInfo) -> np.ndarray:
        width = self._shape[1]
        r = pi.requests
        if len(r) == width:
            return np.asarray(r, dtype=np.int64)
        row = np.zeros(width, dtype=np.int64)
        n = min(len(r), width)
        row[:n] = r[:n]
        return row

    def _count(self, pi: PodInfo, node: str) -> None:
        if self._shape != self._current_shape():
            return  # the next question rebuilds from _nominated
        slot = self.table.index.get(node)
        if slot is None:
            return
        c = Counted(slot, pi.priority, self._row(pi), bool(pi.host_ports))
        self._counted[pi.uid] = c
        for priority, lvl in self._levels.items():
            if c.priority >= priority:
                lvl.taken[slot] += c.row
                lvl.count[slot] += 1
                lvl.ports[slot] += c.ports
                lvl.total += 1

    def _uncount(self, uid: str) -> None:
        c = self._counted.pop(uid, None)
        if c is None:
            return
        for priority, lvl in self._levels.items():
            if c.priority >= priority:
                lvl.taken[c.slot] -= c.row
                lvl.count[c.slot] -= 1
                lvl.ports[c.slot] -= c.ports
                lvl.total -= 1

    def _compute(self, priority: int) -> Level:
        capacity, width, _ = self._shape
        taken = np.zeros((capacity, width), dtype=np.int64)
        count = np.zeros(capacity, dtype=np.int64)
        ports = np.zeros(capacity, dtype=np.int64)
        chosen = [c for c in self._counted.values() if c.priority >= priority]
        if chosen:
            at = np.fromiter((c.slot for c in chosen), dtype=np.intp, count=len(chosen))
            np.add.at(taken, at, np.stack([c.row for c in chosen]))
            count += np.bincount(at, minlength=capacity)
            with_ports = [c.slot for c in chosen if c.ports]
            if with_ports:
                ports += np.bincount(np.asarray(with_ports, dtype=np.intp), minlength=capacity)
        return Level(taken, count, ports, len(chosen))


__all__ = ["Counted", "Level", "NominatedRequests"]
