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

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

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


@dataclass(slots=True)
class NodeToStatus:
    """Why nodes were rejected in the last cycle: node name → (plugin, reasons, unresolvable)."""

    by_node: dict[str, Status] = field(default_factory=dict)
    # Count of rejected nodes per reason string, in the order reasons were first seen (for the event message).
    counts: dict[str, int] = field(default_factory=dict)
    unresolvable_nodes: set[str] = field(default_factory=set)
    pre_filter_message: str = ""
    plugins: set[str] = field(default_factory=set)


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
