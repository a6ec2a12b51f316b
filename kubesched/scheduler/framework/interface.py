"""Extension points of the scheduling framework, one small protocol each (as upstream's ``framework/interface.go``).

A plugin implements only the points it needs. What differs from upstream is the shape of the node-level points:
Filter and Score receive *all* candidate nodes of the cycle at once, as an index array into the column store
(``NodeTable``), and answer with numpy arrays. That is how a Python scheduler keeps up at 5,000 nodes: one
vectorised pass per plugin instead of a Python call per plugin per node.

Conventions
- ``idx`` is a 1-D ``np.intp`` array of node slots (rows of the ``NodeTable``) in evaluation order.
- Filter answers a ``Filtered`` whose arrays align with ``idx``.
- Score answers an ``int64`` array aligned with ``idx``; NormalizeScore maps it to 0..100 in place or returns new.
- Plugins must not await inside Filter/Score: the cycle reads the live cache, which only changes between cycles.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, cast, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo

MAX_NODE_SCORE = 100
MIN_NODE_SCORE = 0


class Code(IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    # Preemption cannot help (e.g. node affinity mismatch): DefaultPreemption skips such nodes.
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6


@dataclass(slots=True)
class Status:
    code: Code = Code.SUCCESS
    reasons: list[str] = field(default_factory=list)
    plugin: str = ""

    @property
    def ok(self) -> bool:
        return self.code == Code.SUCCESS

    @property
    def is_skip(self) -> bool:
        return self.code == Code.SKIP

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING)

    def message(self) -> str:
        return ", ".join(self.reasons)

    @staticmethod
    def success() -> Status:
        return _SUCCESS

    @staticmethod
    def skip() -> Status:
        return _SKIP  # shared, like success(): statuses are not modified after they are returned

    @staticmethod
    def error(msg: str) -> Status:
        return Status(Code.ERROR, [msg])

    @staticmethod
    def unschedulable(*reasons: str, unresolvable: bool = False) -> Status:
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unresolvable else Code.UNSCHEDULABLE, list(reasons)
        )


_SUCCESS = Status()
_SKIP = Status(Code.SKIP)


@dataclass(slots=True)
class Filtered:
    """One Filter plugin's verdict over candidate nodes.

    ``reason_bits[i]`` is a bitmask over ``reasons`` for candidate ``i`` (0 = passes); a node can fail for several
    reasons at once (``Insufficient cpu`` and ``Insufficient memory``). ``unresolvable[j]`` says whether reason ``j``
    is one preemption cannot fix.
    """

    reason_bits: np.ndarray  # uint64, aligned with idx
    reasons: Sequence[str] = ()
    unresolvable: Sequence[bool] = ()

    @property
    def ok(self) -> np.ndarray:
        return self.reason_bits == 0

    @staticmethod
    def all_pass(n: int) -> Filtered:
        """Every candidate passes. Shared, read-only instances: several plugins answer this for every cycle."""
        verdict = _ALL_PASS.get(n)
        if verdict is None:
            if len(_ALL_PASS) >= 256:
                _ALL_PASS.clear()
            bits = np.zeros(n, dtype=np.uint64)
            bits.flags.writeable = False
            verdict = _ALL_PASS[n] = Filtered(bits)
        return verdict

    @staticmethod
    def from_mask(ok: np.ndarray, reason: str, *, unresolvable: bool = False) -> Filtered:
        """Candidates where ``ok`` is False fail for the single ``reason``."""
        return Filtered((~ok).astype(np.uint64), (reason,), (unresolvable,))


_ALL_PASS: dict[int, Filtered] = {}


@dataclass(slots=True)
class PreFilterResult:
    """Restricts the cycle to these node names (``None`` = all nodes), as upstream's PreFilterResult."""

    node_names: set[str] | None = None


class CycleState:
    """Per-cycle scratch space shared by a pod's plugins (PreFilter writes, Filter/Score read)."""

    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def read(self, key: str) -> Any:
        return self._data.get(key)

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def clone(self) -> CycleState:
        c = CycleState()
        c._data = dict(self._data)
        c.skip_filter = set(self.skip_filter)
        c.skip_score = set(self.skip_score)
        return c


class NodeToStatus:
    """Why nodes were rejected in a cycle: each rejected node's status (upstream's ``NodeToStatus`` map).

    A failing cycle rejects thousands of nodes with a handful of statuses, so the framework records them as
    *groups*: a status and the table slots it covers (``record``), in upstream's order of writing. A later write
    to a slot replaces its status and keeps its place, as a map does: the groups are kept so that each slot is
    in one group and the groups, read in order, list the nodes in the order of their first write. Per-node
    views are built only when asked for: ``status_of`` (one node), ``preemption_slots`` (the nodes preemption
    may help, as an array), ``tally`` (counts per reason, from the group sizes) and ``by_node`` (the whole map,
    for tests and tools). ``by_node`` once built is the truth: later writes go to it, and every view reads it.

    A diagnosis built from names (``NodeToStatus(by_node={...})``, tests) is such a map from the start, and so is
    every diagnosis while ``grouped`` is False: the reference path (one map entry per node, as before the groups),
    which the tests compare the groups against.
    ``counts``: rejected nodes per reason, in the order the reasons were first seen (filled by ``tally``).
    """

    __slots__ = (
        "_by_node",
        "_groups",
        "_names",
        "_table",
        "_version",
        "_written",
        "counts",
        "plugins",
        "pre_filter_message",
    )

    grouped: ClassVar[bool] = True  # False: every diagnosis is a per-node map (the reference path)

    def __init__(
        self,
        by_node: dict[str, Status] | None = None,
        counts: dict[str, int] | None = None,
        pre_filter_message: str = "",
        plugins: set[str] | None = None,
    ) -> None:
        self._by_node: dict[str, Status] | None = by_node
        self._groups: list[tuple[Status, np.ndarray]] = []
        self._table: NodeTable | None = None
        self._names: list[str] = []  # the table's names when the cycle ran (a recorded slot has one)
        self._version = -1
        self._written: np.ndarray | None = None
        self.counts: dict[str, int] = counts if counts is not None else {}
        self.pre_filter_message = pre_filter_message
        self.plugins: set[str] = plugins if plugins is not None else set()

    @classmethod
    def over(
        cls, table: NodeTable, *, pre_filter_message: str = "", plugins: set[str] | None = None
    ) -> NodeToStatus:
        """An empty diagnosis of a cycle over ``table``, written by slot (``record``). The node names are those
        of the table now (a copy of the name column: the views name the nodes as the cycle saw them)."""
        out = cls(pre_filter_message=pre_filter_message, plugins=plugins)
        out._table = table
        out._names = cast("list[str]", table.names.copy())
        out._version = table.node_version
        if not cls.grouped:
            out._by_node = {}
        return out

    # --- writing -----------------------------------------------------------------------------------------

    def record(self, slots: np.ndarray, status: Status) -> None:
        """``status`` for every slot of ``slots`` (distinct slots of the table given to ``over``), written after
        everything recorded before."""
        if not len(slots):
            return
        if self._table is None:
            raise ValueError("NodeToStatus.record needs a diagnosis made by NodeToStatus.over(table)")
        if self._by_node is not None:
            names = self._names
            self.by_node.update(zip(map(names.__getitem__, slots.tolist()), itertools.repeat(status)))
            return
        written = self._written
        if written is None:
            written = self._written = np.zeros(len(self._names), dtype=bool)
        seen = written[slots]
        if seen.any():
            self._overwrite(slots[seen], status)
            slots = slots[~seen]
            if not len(slots):
                return
        written[slots] = True
        self._groups.append((status, slots))

    def record_pairs(self, pairs: Iterable[tuple[int, Status]]) -> None:
        """(slot, status) pairs, written in order; consecutive pairs with one status are recorded as one group."""
        run: list[int] = []
        in_run: set[int] = set()
        current: Status | None = None
        for slot, status in pairs:
            if status is not current or slot in in_run:
                if current is not None:
                    self.record(np.array(run, dtype=np.intp), current)
                run = []
                in_run = set()
                current = status
            run.append(slot)
            in_run.add(slot)
        if current is not None:
            self.record(np.array(run, dtype=np.intp), current)

    def _overwrite(self, slots: np.ndarray, status: Status) -> None:
        """New ``status`` for ``slots``, already written: each keeps its place (the group it was in is split)."""
        assert self._written is not None
        mark = np.zeros(len(self._written), dtype=bool)
        mark[slots] = True
        groups: list[tuple[Status, np.ndarray]] = []
        for old, group in self._groups:
            hit = mark[group]
            if not hit.any():
                groups.append((old, group))
                continue
            # Runs of consecutive slots that keep their status or take the new one, in their order.
            edges = np.flatnonzero(hit[1:] != hit[:-1]) + 1
            for part, taken in zip(
                np.split(group, edges), hit[np.concatenate(([0], edges))].tolist(), strict=True
            ):
                groups.append((status if taken else old, part))
        self._groups = groups

    # --- reading -----------------------------------------------------------------------------------------

    def __repr__(self) -> str:
        shown = {name: (st.code.name, st.reasons, st.plugin) for name, st in self.items()}
        return (
            f"NodeToStatus({shown!r}, counts={self.counts!r}, pre_filter_message={self.pre_filter_message!r})"
        )

    def _mapped(self) -> bool:
        return self._by_node is not None or self._table is None

    def items(self) -> Iterator[tuple[str, Status]]:
        """(node name, status) in the order of first writes (a map's order)."""
        if self._mapped():
            yield from self.by_node.items()
            return
        names = self._names
        for status, slots in self._groups:
            for slot in slots.tolist():
                yield names[slot], status

    @property
    def by_node(self) -> dict[str, Status]:
        """The whole map, node name -> status (built once, then kept: later writes go to it)."""
        if self._by_node is None:
            built: dict[str, Status] = {}
            names = self._names
            for status, slots in self._groups:
                built.update(zip(map(names.__getitem__, slots.tolist()), itertools.repeat(status)))
            self._by_node = built
            self._groups = []
            self._written = None
        return self._by_node

    def __len__(self) -> int:
        """Number of nodes with a status."""
        if self._mapped():
            return len(self.by_node)
        return sum(len(slots) for _, slots in self._groups)

    def status_of(self, name: str) -> Status | None:
        """The status of node ``name``, None if it has none."""
        if self._mapped():
            return self.by_node.get(name)
        table = self._table
        slot: int | None
        if table is not None and table.node_version == self._version:
            slot = table.index.get(name)
        else:
            slot = self._names.index(name) if name in self._names else None
        if slot is None:
            return None
        for status, slots in self._groups:
            if (slots == slot).any():
                return status
        return None

    def preemption_slots(self, nodes: NodeTable) -> np.ndarray:
        """Slots of ``nodes``, ascending, whose node was rejected as UNSCHEDULABLE: preemption may help there
        (upstream's ``nodesWherePreemptionMightHelp``); UNSCHEDULABLE_AND_UNRESOLVABLE nodes are left out."""
        if not self._mapped() and nodes is self._table and nodes.node_version == self._version:
            helpful = [slots for status, slots in self._groups if status.code == Code.UNSCHEDULABLE]
            if not helpful:
                return np.zeros(0, dtype=np.intp)
            if len(helpful) == 1:
                return np.sort(helpful[0]).astype(np.intp, copy=False)
            mark = np.zeros(len(self._names), dtype=bool)
            for slots in helpful:
                mark[slots] = True
            return np.flatnonzero(mark).astype(np.intp, copy=False)
        # By name, against the table as it is now (a node gone since is left out).
        by_node = self.by_node if self._mapped() else dict(self.items())
        values = by_node.values()
        distinct = dict(zip(map(id, values), values, strict=True))
        helpful_ids = {key for key, st in distinct.items() if st.code == Code.UNSCHEDULABLE}
        if not helpful_ids:
            return np.zeros(0, dtype=np.intp)
        names: Iterable[str]
        if len(helpful_ids) == len(distinct):
            names = by_node.keys()
        else:
            names = [name for name, st in by_node.items() if id(st) in helpful_ids]
        found = np.fromiter(map(nodes.index.get, names, itertools.repeat(-1)), dtype=np.intp)
        return np.sort(found[found >= 0])

    def tally(self) -> None:
        """Add each status's nodes to ``counts`` under each of its reasons (statuses in the order of their first
        node). Statuses are shared by the nodes rejected alike: counted per status, not per node."""
        sizes: dict[int, int] = {}
        distinct: dict[int, Status] = {}
        if self._mapped():
            values = self.by_node.values()
            sizes = collections.Counter(map(id, values))  # in order of first appearance
            distinct = dict(zip(map(id, values), values, strict=True))
        else:
            for status, slots in self._groups:
                key = id(status)
                sizes[key] = sizes.get(key, 0) + len(slots)
                distinct[key] = status
        counts = self.counts
        for key, n in sizes.items():
            for reason in distinct[key].reasons:
                counts[reason] = counts.get(reason, 0) + n

    @property
    def unresolvable_nodes(self) -> set[str]:
        """Names of the nodes rejected as UNSCHEDULABLE_AND_UNRESOLVABLE."""
        if self._mapped():
            return {
                name for name, st in self.by_node.items() if st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            }
        names = self._names
        return {
            names[slot]
            for status, slots in self._groups
            if status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            for slot in slots.tolist()
        }

    def filtered(self) -> dict[str, list[str]]:
        """Node name -> its status's reasons (a list each), in the order of first writes (``record_scores``)."""
        return {name: list(st.reasons) for name, st in self.items()}


@runtime_checkable
class PreEnqueuePlugin(Protocol):
    name: str

    def pre_enqueue(self, pod: PodInfo) -> Status: ...


@runtime_checkable
class QueueSortPlugin(Protocol):
    name: str

    def sort_key(self, qpod: QueuedPodInfo) -> tuple[Any, ...]:
        """Smaller keys pop first (PrioritySort: ``(-priority, enqueue time)``)."""
        ...


@runtime_checkable
class PreFilterPlugin(Protocol):
    name: str

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]: ...


@runtime_checkable
class PreFilterExtensions(Protocol):
    """Lets preemption evaluate "what if these pods were gone / added" without a new PreFilter."""

    def add_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable
    ) -> Status: ...

    def remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable
    ) -> Status: ...


@runtime_checkable
class FilterPlugin(Protocol):
    name: str

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered: ...


@runtime_checkable
class PostFilterPlugin(Protocol):
    name: str

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        """Returns the nominated node name (preemption) or None, and a status."""
        ...


@runtime_checkable
class PreScorePlugin(Protocol):
    name: str

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status: ...


@runtime_checkable
class ScorePlugin(Protocol):
    name: str

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray: ...


@runtime_checkable
class ReservePlugin(Protocol):
    name: str

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@runtime_checkable
class PermitPlugin(Protocol):
    name: str

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        """Status SUCCESS, UNSCHEDULABLE, or WAIT with a timeout in seconds."""
        ...


@runtime_checkable
class PreBindPlugin(Protocol):
    name: str

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status: ...


@runtime_checkable
class BindPlugin(Protocol):
    name: str

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """SKIP hands binding to the next bind plugin."""
        ...


@runtime_checkable
class PostBindPlugin(Protocol):
    name: str

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class ClusterEvent:
    """A change in the cluster that may make rejected pods schedulable (upstream ``fwk.ClusterEvent``)."""

    resource: str  # "Pod", "Node", "Namespace", ...
    action: (
        str  # "Add", "Update", "Delete", "UpdateNodeLabel", "UpdateNodeTaint", "UpdateNodeAllocatable", ...
    )


@runtime_checkable
class EnqueueExtensions(Protocol):
    def events_to_register(self) -> list[ClusterEvent]: ...


@runtime_checkable
class AssignedPodHints(Protocol):
    """A queueing hint for bound pods: which unschedulable pods a newly bound pod may help (pod affinity,
    topology spread), so the queue retries just those rather than every pod waiting for a "Pod Add"."""

    name: str

    def waits_for_assigned_pods(self, qpod: QueuedPodInfo) -> bool:
        """Should the queue keep ``qpod`` among the pods it asks ``assigned_pod_may_help`` about?"""
        ...

    def assigned_pod_may_help(
        self,
        qpod: QueuedPodInfo,
        assigned: PodInfo,
        namespace_labels: Callable[[], Mapping[str, str] | None],
    ) -> bool:
        """``namespace_labels()``: the labels of ``assigned``'s namespace, when the queue knows them."""
        ...


EXTENSION_POINTS = (
    "PreEnqueue",
    "QueueSort",
    "PreFilter",
    "Filter",
    "PostFilter",
    "PreScore",
    "Score",
    "Reserve",
    "Permit",
    "PreBind",
    "Bind",
    "PostBind",
)
