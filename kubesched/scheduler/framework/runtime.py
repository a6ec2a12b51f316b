"""``Framework``: one scheduling profile's plugins, run point by point (upstream ``framework/runtime`` plus the
node-finding half of ``schedule_one.go``).

A cycle (``schedule``) runs PreFilter, then Filter over the candidate nodes in chunks, each plugin answering
for a whole chunk at once, stopping once ``num_feasible_nodes_to_find`` nodes passed (counted in evaluation
order, as a sequential upstream would); then PreScore/Score/NormalizeScore on the feasible nodes, weights
applied, and the best node picked with random tie-breaking. Failure explanations (``NodeToStatus``) are built
only when the pod does not fit, or when scores are recorded for ``kubesched simulate``.

Two conventions keep the per-cycle cost down: a ``Filtered`` with no ``reasons`` (``Filtered.all_pass``)
rejects nothing and its bits are not inspected; a Score plugin whose results are always within 0..100 may set
``scores_in_range = True`` to skip the range check upstream does after NormalizeScore.
"""

from __future__ import annotations

import dataclasses
import logging
import random
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from time import perf_counter
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler import features
from kubesched.scheduler.framework.batch import OpportunisticBatch, Signature
from kubesched.scheduler.framework.catalogue import Catalogue
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    BindPlugin,
    ClusterEvent,
    Code,
    CycleState,
    EnqueueExtensions,
    FilterPlugin,
    NodeToStatus,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    Status,
)

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
MAX_PERMIT_TIMEOUT = 15 * 60.0
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
DEFAULT_SCHEDULER_NAME = "default-scheduler"

_POINT_PROTOCOLS: dict[str, type] = {
    "PreEnqueue": PreEnqueuePlugin,
    "QueueSort": QueueSortPlugin,
    "PreFilter": PreFilterPlugin,
    "Filter": FilterPlugin,
    "PostFilter": PostFilterPlugin,
    "PreScore": PreScorePlugin,
    "Score": ScorePlugin,
    "Reserve": ReservePlugin,
    "Permit": PermitPlugin,
    "PreBind": PreBindPlugin,
    "Bind": BindPlugin,
    "PostBind": PostBindPlugin,
}
_POINT_BY_KEY = {p.lower(): p for p in _POINT_PROTOCOLS}
_OK = Status.success()  # the shared success status most plugins answer
_SKIPPED = Status.skip()  # the shared skip status


def _discard(seconds: float) -> None:
    """The extension-point observer of a framework without metrics."""


def _bind_observer(metrics: Any, point: str, code: Code, profile: str) -> Callable[[float], None]:
    """What records one run of ``point`` that ended with ``code``: the bound ``observe`` of its
    ``framework_extension_point_duration_seconds`` series (a ``SchedulerMetrics``), or a call of
    ``observe_extension_point`` (any other metrics object)."""
    if metrics is None:
        return _discard
    bind = getattr(metrics, "extension_point_observer", None)
    if bind is not None:
        observer: Callable[[float], None] = bind(point, code, profile)
        return observer
    observe = metrics.observe_extension_point
    return lambda seconds: observe(point, code, profile, seconds)


def _point_name(key: str) -> str:
    point = _POINT_BY_KEY.get(key.replace("_", "").lower())
    if point is None:
        raise ValueError(f"unknown extension point {key!r}")
    return point


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """How many feasible nodes a cycle looks for before it stops filtering (upstream's adaptive rule).

    Below 100 nodes: all of them. Percentage 0/None is adaptive: ``50 - N/125`` percent, at least 5 percent;
    and never fewer than 100 nodes.
    """
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * pct // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


def fit_error_message(num_all_nodes: int, diagnosis: NodeToStatus, preemption_message: str = "") -> str:
    """The FailedScheduling message: ``0/N nodes are available: <count> <reason>, ....`` (upstream FitError).

    Reasons are counted over nodes, rendered as ``"<count> <reason>"`` and sorted as strings. When PreFilter
    rejected the pod its message replaces the histogram. ``preemption_message`` (the PostFilter status message,
    e.g. ``preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling``) is appended.
    """
    msg = f"0/{num_all_nodes} nodes are available:"
    if diagnosis.pre_filter_message:
        msg += f" {diagnosis.pre_filter_message}."
    else:
        histogram = sorted(f"{count} {reason}" for reason, count in diagnosis.counts.items())
        if histogram:
            msg += " " + ", ".join(histogram) + "."
    if preemption_message:
        msg += " " + preemption_message.rstrip(".") + "."
    return msg


class ScheduleResult:
    """The outcome of one scheduling cycle.

    ``node``: the chosen node, None if none fits (then ``status`` says why: UNSCHEDULABLE with the
    FailedScheduling message, or ERROR). ``evaluated``/``feasible``: nodes filtered / nodes that passed.
    ``diagnosis``: why nodes were rejected (filled when none fits, or with ``record_scores``; an empty one is made
    on first reading otherwise, so a successful cycle builds none).
    With ``record_scores``: ``scores[node][plugin]`` is the weighted (normalized x weight) score,
    ``total_scores[node]`` their sum, and ``filtered[node]`` the reasons a node was rejected.
    """

    __slots__ = (
        "_diagnosis",
        "evaluated",
        "feasible",
        "filtered",
        "node",
        "scores",
        "status",
        "total_scores",
    )

    def __init__(
        self,
        node: str | None,
        status: Status,
        diagnosis: NodeToStatus | None = None,
        evaluated: int = 0,
        feasible: int = 0,
        scores: dict[str, dict[str, int]] | None = None,
        filtered: dict[str, list[str]] | None = None,
        total_scores: dict[str, int] | None = None,
    ) -> None:
        self.node = node
        self.status = status
        self._diagnosis = diagnosis
        self.evaluated = evaluated
        self.feasible = feasible
        self.scores = scores
        self.filtered = filtered
        self.total_scores = total_scores

    @property
    def diagnosis(self) -> NodeToStatus:
        diagnosis = self._diagnosis
        if diagnosis is None:
            diagnosis = self._diagnosis = NodeToStatus()
        return diagnosis

    @diagnosis.setter
    def diagnosis(self, value: NodeToStatus) -> None:
        self._diagnosis = value

    @property
    def ok(self) -> bool:
        return self.node is not None

    def __repr__(self) -> str:
        return (
            f"ScheduleResult(node={self.node!r}, status={self.status!r}, evaluated={self.evaluated}, "
            f"feasible={self.feasible})"
        )


@dataclass(slots=True)
class _Rejections:
    """Nodes one Filter plugin rejected in one chunk: slots, positions in the chunk, reason bitmasks."""

    plugin: str
    slots: np.ndarray
    positions: np.ndarray
    bits: np.ndarray
    reasons: Sequence[str]
    unresolvable: Sequence[bool]

    def before(self, cut: int) -> _Rejections | None:
        keep = self.positions <= cut
        if keep.all():
            return self
        if not keep.any():
            return None
        return _Rejections(
            self.plugin,
            self.slots[keep],
            self.positions[keep],
            self.bits[keep],
            self.reasons,
            self.unresolvable,
        )


class FilterError(Exception):
    """A Filter plugin failed (not a rejection): the cycle ends with an ERROR status."""


def _bits_status(plugin: str, bits: int, reasons: Sequence[str], unresolvable: Sequence[bool]) -> Status:
    out: list[str] = []
    unres = False
    j = 0
    while bits:
        if bits & 1:
            reason = reasons[j] if j < len(reasons) else f"rejected by {plugin}"
            if reason not in out:
                out.append(reason)
            if j < len(unresolvable) and unresolvable[j]:
                unres = True
        bits >>= 1
        j += 1
    code = Code.UNSCHEDULABLE_AND_UNRESOLVABLE if unres else Code.UNSCHEDULABLE
    return Status(code, out, plugin)


def _go_list(items: Iterable[str]) -> str:
    return "[" + " ".join(items) + "]"


class Framework:
    """One profile: its plugins per extension point, and the code that runs them."""

    def __init__(
        self,
        handle: Handle,
        *,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        percentage_of_nodes_to_score: int | None = None,
        seed: int | None = None,
        opportunistic_batching: bool | None = None,
    ) -> None:
        self.handle = dataclasses.replace(handle, framework=self)
        self.scheduler_name = scheduler_name
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.next_start_node_index = 0
        # ``(framework, state, pod, table, slots) -> [(slot, status)] | None``: the nominated-pods check of many
        # nodes at once, for plugin sets where nominated pods count only as resources (DefaultPreemption's fast
        # path installs it; None from it, or no hook, means the per-node check).
        self.bulk_nominated_check: Callable[..., list[tuple[int, Status]] | None] | None = None
        self._rng = random.Random(seed)
        self.plugins: dict[str, Any] = {}
        self.points: dict[str, list[str]] = {p: [] for p in _POINT_PROTOCOLS}
        self.score_weights: dict[str, int] = {}
        self._pre_enqueue: list[Any] = []
        self._queue_sort: Any = None
        self._pre_filter: list[Any] = []
        # The PreFilter plugins with AddPod/RemovePod, found once: isinstance against a runtime-checkable
        # Protocol is slow, and preemption's dry runs call these for every victim.
        self._pre_filter_extensions: list[Any] = []
        self._filter: list[Any] = []
        self._post_filter: list[Any] = []
        self._pre_score: list[Any] = []
        self._score: list[tuple[Any, int, bool, bool]] = []  # plugin, weight, NormalizeScore?, check range?
        # Score plugins that can tell when their score is the same on every node (``constant_score(pod, nodes)``).
        self._constant_scorers: list[Any] = []
        self._reserve: list[Any] = []
        self._permit: list[Any] = []
        self._pre_bind: list[Any] = []
        # Bind plugins with the status that says one of them bound the pod (shared: it names the plugin).
        self._bind: list[tuple[Any, Status]] = []
        self._post_bind: list[Any] = []
        # Opportunistic batching (KEP-5598): None when the feature gate is off. ``_signers``: the plugins that sign
        # pods, found on first use ([] when some PreFilter/Filter/PreScore/Score plugin cannot sign any pod).
        if opportunistic_batching is None:
            opportunistic_batching = features.DEFAULT.enabled(features.OPPORTUNISTIC_BATCHING)
        self.batch: OpportunisticBatch | None = None
        if opportunistic_batching:
            self.batch = OpportunisticBatch()
            if self.handle.metrics is not None:
                self.handle.metrics.watch_batch(scheduler_name, self.batch)
        self._signers: list[Any] | None = None
        self._can_sign = False
        self._cycles = 0
        self._tie_rng = np.random.default_rng(seed)
        # Extension-point durations: one observer per (point, code), bound on first use (a bound series is
        # exposed, so none is bound before its point ran); the hot points' success observers are attributes.
        self._observers: dict[tuple[str, Code], Callable[[float], None]] = {}
        self._doubled: tuple[np.ndarray, np.ndarray] | None = (
            None  # candidates, and them twice (wrapping chunks)
        )
        self._ok_pre_filter = self._success_observer("_ok_pre_filter", "PreFilter")
        self._ok_filter = self._success_observer("_ok_filter", "Filter")
        self._ok_pre_score = self._success_observer("_ok_pre_score", "PreScore")
        self._ok_score = self._success_observer("_ok_score", "Score")
        self._ok_reserve = self._success_observer("_ok_reserve", "Reserve")
        self._ok_permit = self._success_observer("_ok_permit", "Permit")
        self._ok_pre_bind = self._success_observer("_ok_pre_bind", "PreBind")
        self._ok_bind = self._success_observer("_ok_bind", "Bind")
        self._ok_post_bind = self._success_observer("_ok_post_bind", "PostBind")

    # --- construction --------------------------------------------------------------------------------------

    @classmethod
    def from_plugins(
        cls,
        catalogue: Catalogue,
        points: Mapping[str, Sequence[tuple[str, int] | str]],
        args: Mapping[str, Any] | None,
        handle: Handle,
        *,
        percentage_of_nodes_to_score: int | None = None,
        seed: int | None = None,
        scheduler_name: str = DEFAULT_SCHEDULER_NAME,
        opportunistic_batching: bool | None = None,
    ) -> Framework:
        """Build from ``{"PreFilter": [("NodeResourcesFit", 0), ...], "Score": [("NodeResourcesFit", 1)]}``.

        Point keys may be spelled ``PreFilter``, ``preFilter`` or ``pre_filter``; an entry may be a bare name.
        Each plugin is built once (shared by all its points) from its catalogue definition with ``args[name]``
        (None: the definition's default args). A score weight of 0 means 1.
        """
        fw = cls(
            handle,
            scheduler_name=scheduler_name,
            percentage_of_nodes_to_score=percentage_of_nodes_to_score,
            seed=seed,
            opportunistic_batching=opportunistic_batching,
        )
        args = args or {}
        for key, entries in points.items():
            point = _point_name(key)
            for entry in entries:
                name, weight = (entry, 0) if isinstance(entry, str) else (entry[0], int(entry[1] or 0))
                plugin = fw.plugins.get(name)
                if plugin is None:
                    plugin = catalogue.create(name, args.get(name), fw.handle)
                    fw.plugins[name] = plugin
                fw._enable(point, name, plugin, weight)
        return fw

    @classmethod
    def from_profile(
        cls,
        profile: Any,
        catalogue: Catalogue,
        handle: Handle,
        *,
        percentage_of_nodes_to_score: int | None = None,
        seed: int | None = None,
    ) -> Framework:
        """Build from a resolved ``kubesched.scheduler.config`` ``SchedulerProfile``.

        ``percentage_of_nodes_to_score`` is the configuration-wide value, used when the profile has none.
        """
        plugins = profile.plugins
        points: dict[str, list[tuple[str, int]]] = {}
        for point in _POINT_PROTOCOLS:
            refs = plugins[point[0].lower() + point[1:]]
            points[point] = [(ref.name, ref.weight) for ref in refs]
        pct = profile.percentage_of_nodes_to_score
        return cls.from_plugins(
            catalogue,
            points,
            dict(profile.plugin_args),
            handle,
            percentage_of_nodes_to_score=pct if pct is not None else percentage_of_nodes_to_score,
            seed=seed,
            scheduler_name=profile.scheduler_name,
        )

    def _enable(self, point: str, name: str, plugin: Any, weight: int) -> None:
        proto = _POINT_PROTOCOLS[point]
        if not isinstance(plugin, proto):
            raise TypeError(f"plugin {name!r} does not extend {point} plugin")
        if name in self.points[point]:
            raise ValueError(f"plugin {name!r} already registered as {point!r}")
        self.points[point].append(name)
        self._signers = None
        if point == "PreEnqueue":
            self._pre_enqueue.append(plugin)
        elif point == "QueueSort":
            if self._queue_sort is not None:
                raise ValueError("only one QueueSort plugin can be enabled")
            self._queue_sort = plugin
        elif point == "PreFilter":
            self._pre_filter.append(plugin)
            if isinstance(plugin, PreFilterExtensions):
                self._pre_filter_extensions.append(plugin)
        elif point == "Filter":
            self._filter.append(plugin)
        elif point == "PostFilter":
            self._post_filter.append(plugin)
        elif point == "PreScore":
            self._pre_score.append(plugin)
        elif point == "Score":
            w = weight or 1
            self.score_weights[name] = w
            normalize = callable(getattr(plugin, "normalize_score", None))
            # Plugins that guarantee 0..100 (``scores_in_range = True``) skip the per-cycle range check.
            self._score.append((plugin, w, normalize, not getattr(plugin, "scores_in_range", False)))
            if callable(getattr(plugin, "constant_score", None)):
                self._constant_scorers.append(plugin)
        elif point == "Reserve":
            self._reserve.append(plugin)
        elif point == "Permit":
            self._permit.append(plugin)
        elif point == "PreBind":
            self._pre_bind.append(plugin)
        elif point == "Bind":
            self._bind.append((plugin, Status(Code.SUCCESS, [], name)))
        elif point == "PostBind":
            self._post_bind.append(plugin)

    # --- introspection -------------------------------------------------------------------------------------

    @property
    def profile_name(self) -> str:
        return self.scheduler_name

    def plugin(self, name: str) -> Any:
        return self.plugins[name]

    @property
    def has_filter_plugins(self) -> bool:
        return bool(self._filter)

    @property
    def has_score_plugins(self) -> bool:
        return bool(self._score)

    @property
    def has_post_filter_plugins(self) -> bool:
        return bool(self._post_filter)

    def events_to_register(self) -> dict[str, list[ClusterEvent]]:
        """Plugin name -> the cluster events that may make a pod it rejected schedulable."""
        out: dict[str, list[ClusterEvent]] = {}
        for name, plugin in self.plugins.items():
            if isinstance(plugin, EnqueueExtensions):
                out[name] = list(plugin.events_to_register())
        return out

    @property
    def nodes(self) -> NodeTable:
        return self.handle.nodes

    # --- queueing points -----------------------------------------------------------------------------------

    def _observer(self, point: str, code: Code) -> Callable[[float], None]:
        key = (point, code)
        observer = self._observers.get(key)
        if observer is None:
            observer = _bind_observer(self.handle.metrics, point, code, self.scheduler_name)
            self._observers[key] = observer
        return observer

    def _observe(self, point: str, code: Code, started: float) -> None:
        """Record a run of ``point`` begun at ``started`` (``perf_counter``) that ended with ``code``."""
        self._observer(point, code)(perf_counter() - started)

    def _success_observer(self, attr: str, point: str) -> Callable[[float], None]:
        """A stand-in for attribute ``attr`` that binds the success observer of ``point`` on its first call and
        puts it in its own place."""

        def first(seconds: float) -> None:
            observer = self._observer(point, Code.SUCCESS)
            setattr(self, attr, observer)
            observer(seconds)

        return first

    def queue_sort_key(self, qpod: QueuedPodInfo) -> tuple[Any, ...]:
        if self._queue_sort is None:
            return (-qpod.pod_info.priority, qpod.timestamp)
        return self._queue_sort.sort_key(qpod)

    def run_pre_enqueue(self, pod: PodInfo) -> Status:
        for pl in self._pre_enqueue:
            s = pl.pre_enqueue(pod)
            if not s.ok:
                if not s.rejected:
                    return Status(
                        Code.ERROR, [f'running PreEnqueue plugin "{pl.name}": {s.message()}'], pl.name
                    )
                return Status(s.code, list(s.reasons), pl.name)
        return Status.success()

    # --- PreFilter / Filter --------------------------------------------------------------------------------

    def run_pre_filter(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[PreFilterResult | None, Status, set[str]]:
        """Run PreFilter plugins: (merged node restriction or None, status, plugins that rejected/restricted).

        A plugin answering SKIP has its Filter skipped this cycle; a restriction from several plugins is
        their intersection.
        """
        started = perf_counter()
        try:
            out = self._pre_filter_plugins(state, pod)
        except BaseException:
            self._observe("PreFilter", Code.ERROR, started)
            raise
        s = out[1]
        if s is _OK:
            self._ok_pre_filter(perf_counter() - started)
        else:
            self._observe("PreFilter", s.code, started)
        return out

    def _pre_filter_plugins(
        self, state: CycleState, pod: PodInfo
    ) -> tuple[PreFilterResult | None, Status, set[str]]:
        table = self.nodes
        table.ensure_columns()
        names: set[str] | None = None
        restricting: list[str] = []
        skip_filter = state.skip_filter
        for pl in self._pre_filter:
            try:
                result, s = pl.pre_filter(state, pod, table)
            except Exception as exc:  # a plugin bug must not kill the loop
                log.exception("PreFilter plugin %s failed", pl.name)
                return (
                    None,
                    Status(Code.ERROR, [f'running PreFilter plugin "{pl.name}": {exc}'], pl.name),
                    set(),
                )
            if result is None:  # the usual answers, checked first
                if s is _OK:
                    continue
                if s is _SKIPPED:
                    skip_filter.add(pl.name)
                    continue
            if s.code == Code.SKIP:
                skip_filter.add(pl.name)
                continue
            if not s.ok:
                if not s.rejected:
                    msg = f'running PreFilter plugin "{pl.name}": {s.message()}'
                    return None, Status(Code.ERROR, [msg], pl.name), set()
                return None, Status(s.code, list(s.reasons), pl.name), {pl.name}
            if result is not None and result.node_names is not None:
                restricting.append(pl.name)
                names = set(result.node_names) if names is None else names & result.node_names
                if not names:
                    if len(restricting) == 1:
                        msg = f"node(s) didn't satisfy plugin {restricting[0]}"
                    else:
                        msg = f"node(s) didn't satisfy plugin(s) {_go_list(restricting)} simultaneously"
                    s = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [msg], pl.name)
                    return PreFilterResult(names), s, set(restricting)
        if names is None:
            return None, _OK, set()
        return PreFilterResult(names), _OK, set(restricting)

    def run_filters(
        self, state: CycleState, pod: PodInfo, idx: np.ndarray
    ) -> tuple[np.ndarray, dict[int, Status]]:
        """Run the Filter plugins on ``idx`` (slots); returns (pass mask aligned with idx, slot -> Status of
        each rejected node, from the first plugin that rejected it). For preemption and what-if checks."""
        idx = np.asarray(idx, dtype=np.intp)
        alive, _, rejections = self._filter_chunk(state, pod, self.nodes, idx)
        ok = np.isin(idx, alive) if len(alive) != len(idx) else np.ones(len(idx), dtype=bool)
        statuses: dict[int, Status] = {}
        for rej in rejections:
            for status, slots in _group_statuses(rej):
                for slot in slots.tolist():
                    statuses[slot] = status
        return ok, statuses

    def filter_node(self, state: CycleState, pod: PodInfo, slot: int) -> Status:
        """The Filter plugins on one node (preemption's dry runs call this for every victim of every candidate,
        so it skips ``run_filters``' array bookkeeping): the first plugin's rejection, else success."""
        alive, _, rejections = self._filter_chunk(state, pod, self.nodes, np.array([slot], dtype=np.intp))
        if len(alive):
            return Status.success()
        rej = rejections[0]
        return _bits_status(rej.plugin, int(rej.bits[0]), rej.reasons, rej.unresolvable)

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, slot: int
    ) -> Status:
        for pl in self._pre_filter_extensions:
            if pl.name in state.skip_filter:
                continue
            s = pl.add_pod(state, pod, other, slot, self.nodes)
            if not s.ok:
                return Status(Code.ERROR, [f'running AddPod on PreFilter plugin "{pl.name}": {s.message()}'])
        return Status.success()

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, slot: int
    ) -> Status:
        for pl in self._pre_filter_extensions:
            if pl.name in state.skip_filter:
                continue
            s = pl.remove_pod(state, pod, other, slot, self.nodes)
            if not s.ok:
                return Status(
                    Code.ERROR, [f'running RemovePod on PreFilter plugin "{pl.name}": {s.message()}']
                )
        return Status.success()

    def _filter_chunk(
        self, state: CycleState, pod: PodInfo, table: NodeTable, idx: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray | None, list[_Rejections]]:
        """Filter plugins in order over ``idx``; each plugin sees only the nodes all earlier ones passed.

        Returns (passing slots, their positions in ``idx`` or None when all passed, rejections)."""
        alive = idx
        pos: np.ndarray | None = None
        rejections: list[_Rejections] = []
        skip = state.skip_filter
        for pl in self._filter:
            if skip and pl.name in skip:
                continue
            if not len(alive):
                break
            try:
                verdict = pl.filter(state, pod, table, alive)
            except Exception as exc:
                log.exception("Filter plugin %s failed", pl.name)
                raise FilterError(f'running "{pl.name}" filter plugin: {exc}') from exc
            if not verdict.reasons:
                continue  # a verdict without reasons rejects nothing (Filtered.all_pass and the like)
            bits = verdict.reason_bits
            # One C method for the usual all-pass verdict (``ndarray.any()`` and ``np.count_nonzero`` go through
            # Python wrappers).
            if not len(bits.nonzero()[0]):
                continue
            bad = bits != 0
            if pos is None:
                pos = np.arange(len(idx), dtype=np.intp)
            rejections.append(
                _Rejections(pl.name, alive[bad], pos[bad], bits[bad], verdict.reasons, verdict.unresolvable)
            )
            good = ~bad
            alive = alive[good]
            pos = pos[good]
        return alive, pos, rejections

    def filter_with_nominated_pods(
        self, state: CycleState, pod: PodInfo, slot: int, *, passed_alone: bool = False
    ) -> Status:
        """Upstream ``RunFilterPluginsWithNominatedPods`` on one node: the pod fits only if the Filter plugins pass
        it both with the pods nominated to the node that have equal or higher priority counted there (added to
        the table, and to a clone of ``state`` through the PreFilter extensions' AddPod) and without them.
        Returns the first failing pass's status (with them first, as upstream), ERROR when a plugin failed.

        ``passed_alone``: the caller has filtered the node without them already and it passed (the cycle's Filter
        path filters whole chunks at once), so only the pass with them is left. Preemption's dry runs call this
        per victim they try to put back: a node without nominated pods costs one lookup, no clone."""
        table = self.nodes
        nominator = self.handle.nominator
        try:
            if nominator is not None:
                node_name = table.names[slot] or ""
                others = [
                    p
                    for p in nominator.nominated_pods_for_node(node_name)
                    if p.uid != pod.uid and p.priority >= pod.priority and table.pod_slot(p.uid) is None
                ]
                if others:
                    s = self._filter_with_pods_added(state, pod, table, slot, node_name, others)
                    if not s.ok:
                        return s
            return Status.success() if passed_alone else self.filter_node(state, pod, slot)
        except FilterError as exc:
            return Status(Code.ERROR, [str(exc)])

    def _filter_with_pods_added(
        self,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        slot: int,
        node_name: str,
        others: list[PodInfo],
    ) -> Status:
        """The Filter plugins on ``slot`` with ``others`` placed there for the time of the call."""
        with_them = state.clone()
        added: list[str] = []
        try:
            for other in others:
                table.add_pod(other, node_name, notify=False)
                added.append(other.uid)
                s = self.run_pre_filter_extension_add_pod(with_them, pod, other, slot)
                if not s.ok:
                    return s
            return self.filter_node(with_them, pod, slot)
        finally:
            for uid in added:
                table.remove_pod(uid, notify=False)

    def _nominated_rejections(
        self, state: CycleState, pod: PodInfo, table: NodeTable, alive: np.ndarray
    ) -> list[tuple[int, Status]]:
        """The nodes of ``alive`` (they passed the Filter plugins alone) that fail ``filter_with_nominated_pods``,
        as (slot, status), in the order of ``alive``. Only nodes with nominated pods that count for ``pod`` (equal
        or higher priority, not in the table, not ``pod`` itself) are looked at: the queue's nominator keeps them
        as columns (``nominated.py``), so finding them is one numpy lookup, not a walk over all nominated pods."""
        nominator = self.handle.nominator
        if nominator is None:
            return []
        requests_on = getattr(nominator, "requests_on", None)
        if requests_on is not None:
            summary = requests_on(table)
            level = summary.level(pod.priority)
            own = summary.own(pod.uid)
            if own is not None and own.priority < pod.priority:
                own = None
            if level.total - (own is not None) <= 0:
                return []
            counts = level.count[alive]
            if own is not None:
                counts = counts - (alive == own.slot)
            hit = alive[counts > 0]
        else:  # a nominator without columns (tests): its nodes, then the per-node check filters the pods
            names = nominator.nodes()
            if not names:
                return []
            slots = [s for s in (table.index.get(n) for n in names) if s is not None]
            if not slots:
                return []
            hit = alive[np.isin(alive, np.asarray(slots, dtype=np.intp))]
        if not len(hit):
            return []
        bulk = self.bulk_nominated_check
        if bulk is not None and len(hit) > 1:
            found = bulk(self, state, pod, table, hit.tolist())
            if found is not None:
                return found
        out: list[tuple[int, Status]] = []
        for slot in hit.tolist():
            s = self.filter_with_nominated_pods(state, pod, slot, passed_alone=True)
            if s.code == Code.ERROR:
                raise FilterError(s.message())  # upstream ends the cycle with the error
            if not s.ok:
                out.append((slot, s))
        return out

    def _find_feasible(
        self,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        candidates: np.ndarray,
        start: int,
        num_to_find: int,
    ) -> tuple[np.ndarray, list[_Rejections], list[tuple[int, Status]], int]:
        """Filter ``candidates`` from ``start`` (wrapping around) in chunks until ``num_to_find`` nodes pass.
        Returns (feasible slots in evaluation order, rejections, extra (slot, status) rejections, number of
        nodes processed). Observed as the Filter point (once per cycle over all nodes, as upstream's
        findNodesThatPassFilters)."""
        started = perf_counter()
        try:
            out = self._find_feasible_chunks(state, pod, table, candidates, start, num_to_find)
        except BaseException:
            self._observe("Filter", Code.ERROR, started)
            raise
        self._ok_filter(perf_counter() - started)
        return out

    def _find_feasible_chunks(
        self,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        candidates: np.ndarray,
        start: int,
        num_to_find: int,
    ) -> tuple[np.ndarray, list[_Rejections], list[tuple[int, Status]], int]:
        n = len(candidates)
        found_parts: list[np.ndarray] = []
        rejections: list[_Rejections] = []
        extra: list[tuple[int, Status]] = []
        found = done = 0
        nominator = self.handle.nominator
        # The queue's Nominator is falsy (``__len__``) while no pod is nominated anywhere, the usual case: then
        # the nominated-pods pass costs this one check per cycle, no call and no list.
        with_nominated = nominator is not None and bool(nominator)
        late: list[_Rejections] = []  # nominated-pods rejections as arrays, after every plugin's rejections
        late_as_extra = False
        while done < n and found < num_to_find:
            need = num_to_find - found
            if done == 0:
                size = need + need // 8 + 16
            elif found == 0:
                size = n - done
            else:
                size = int(need * done / found * 1.2) + 16
            size = min(size, n - done)
            lo = (start + done) % n
            if lo + size <= n:
                chunk = candidates[lo : lo + size]
            else:
                # Wrapping around: a slice of the candidates twice over, kept while the candidates are the same
                # array (the table's cached slots), instead of a concatenation per cycle.
                doubled = self._doubled
                if doubled is None or doubled[0] is not candidates:
                    twice = np.concatenate((candidates, candidates))
                    twice.flags.writeable = False
                    doubled = self._doubled = (candidates, twice)
                chunk = doubled[1][lo : lo + size]
            alive, pos, rejs = self._filter_chunk(state, pod, table, chunk)
            chunk_extra: list[tuple[int, Status, int]] = []
            chunk_late: _Rejections | None = None
            if with_nominated and len(alive):
                nominated = self._nominated_rejections(state, pod, table, alive)
                if nominated:
                    if pos is None:
                        pos = np.arange(len(chunk), dtype=np.intp)
                    rejected_slots = np.fromiter([slot for slot, _ in nominated], dtype=np.intp)
                    out = np.isin(alive, rejected_slots)
                    if not late_as_extra and np.array_equal(alive[out], rejected_slots):
                        # Usually thousands of nodes, all with one status: kept as arrays, which the diagnosis
                        # records in the same order as the (slot, status) pairs (after every plugin's rejections).
                        chunk_late = _nominated_as_rejections(nominated, rejected_slots, pos[out])
                    if chunk_late is None:
                        late_as_extra = True  # from here on pairs, to keep the order of writing
                        pos_of = dict(zip(alive[out].tolist(), pos[out].tolist(), strict=True))
                        chunk_extra = [(slot, status, pos_of[slot]) for slot, status in nominated]
                    keep = ~out
                    alive, pos = alive[keep], pos[keep]
            consumed = len(chunk)
            if len(alive) > need:
                cut = int(pos[need - 1]) if pos is not None else need - 1
                alive = alive[:need]
                if rejs:
                    rejs = [r for r in (rej.before(cut) for rej in rejs) if r is not None]
                if chunk_extra:
                    chunk_extra = [e for e in chunk_extra if e[2] <= cut]
                if chunk_late is not None:
                    chunk_late = chunk_late.before(cut)
                consumed = cut + 1
            if chunk_extra:
                extra.extend((slot, status) for slot, status, _ in chunk_extra)
            if chunk_late is not None:
                late.append(chunk_late)
            found_parts.append(alive)
            if rejs:
                rejections.extend(rejs)
            found += len(alive)
            done += consumed
        rejections.extend(late)
        if len(found_parts) == 1:
            feasible = found_parts[0]
        else:
            feasible = np.concatenate(found_parts) if found_parts else candidates[:0]
        return feasible, rejections, extra, done

    # --- the cycle -----------------------------------------------------------------------------------------

    def schedule(
        self, state: CycleState, pod: PodInfo, *, record_scores: bool = False, cycle: int | None = None
    ) -> ScheduleResult:
        """One scheduling cycle for ``pod`` against the live cache: PreFilter, Filter, PreScore, Score, pick.

        ``cycle``: the queue's scheduling-cycle count (opportunistic batching reuses a list only for the very next
        cycle, whatever profile ran it); None counts this framework's own cycles."""
        if cycle is None:
            self._cycles += 1
            cycle = self._cycles
        table = self.nodes
        num_all = table.num_nodes
        if num_all == 0:
            return ScheduleResult(None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_NODES_AVAILABLE]))

        pre_result, s, pre_plugins = self.run_pre_filter(state, pod)  # widens the table's columns first
        if s is not _OK and s.code != Code.SUCCESS:
            if s.code == Code.ERROR:
                return ScheduleResult(None, s)
            diagnosis = NodeToStatus.over(table, pre_filter_message=s.message(), plugins=set(pre_plugins))
            _mark_all(diagnosis, table, table.slots(), s)
            return self._failure(num_all, diagnosis, record_scores)

        # Opportunistic batching: the next node of the last cycle's ranking, when upstream's rules allow it.
        batch = self.batch
        hint = ""
        signature: Signature | None = None
        if batch is not None:
            signature = self.sign_pod(pod)
            if batch.state is None:
                batch.no_hint()
            else:
                hint = batch.node_hint(signature, cycle, lambda name: self._rejects(state, pod, name))

        try:
            # A pod nominated by an earlier preemption tries its nominated node first (evaluateNominatedNode).
            nominated_rejections: list[tuple[int, Status]] = []
            if pod.nominated_node_name:
                slot = table.index.get(pod.nominated_node_name)
                if slot is not None:
                    one = np.array([slot], dtype=np.intp)
                    alive, _, rejs = self._filter_chunk(state, pod, table, one)
                    if len(alive) and self.handle.nominator is not None:
                        nominated_rejections = self._nominated_rejections(state, pod, table, alive)
                    if len(alive) and not nominated_rejections:
                        if batch is not None:  # upstream stores the one-node result too (a wasted hint)
                            batch.store(signature, hint, pod.nominated_node_name, None, cycle)
                        return ScheduleResult(pod.nominated_node_name, _OK, None, 1, 1)
                    for rej in rejs:
                        nominated_rejections.extend(
                            (int(sl), st) for st, sls in _group_statuses(rej) for sl in sls.tolist()
                        )
            elif hint:
                # The hinted node is checked as a nominated node is (upstream's evaluateNominatedNode).
                slot = table.index.get(hint)
                if slot is not None:
                    found = self._hint_fits(state, pod, table, slot, nominated_rejections)
                    if found:
                        if batch is not None:
                            batch.store(signature, hint, hint, None, cycle)
                        return ScheduleResult(hint, _OK, None, 1, 1)

            all_slots = table.slots()
            absent: np.ndarray | None = None
            if pre_result is None or pre_result.node_names is None:
                candidates = all_slots
            else:
                chosen = sorted(
                    s for s in (table.index.get(n) for n in pre_result.node_names) if s is not None
                )
                candidates = np.asarray(chosen, dtype=np.intp)
                absent = np.setdiff1d(all_slots, candidates, assume_unique=True)
            n = len(candidates)
            num_to_find = num_feasible_nodes_to_find(self.percentage_of_nodes_to_score, n)
            if not self._score:
                num_to_find = min(num_to_find, 1)
            start = self.next_start_node_index % n if n else 0
            feasible, rejections, extra, _ = self._find_feasible(
                state, pod, table, candidates, start, num_to_find
            )
        except FilterError as exc:
            return ScheduleResult(None, Status(Code.ERROR, [str(exc)]))

        rejected = len(extra)
        for rej in rejections:
            rejected += len(rej.slots)
        if nominated_rejections:
            seen = set(feasible.tolist()) | {slot for slot, _ in extra}
            for rej in rejections:
                seen.update(rej.slots.tolist())
            rejected += len({slot for slot, _ in nominated_rejections} - seen)
        self.next_start_node_index = (self.next_start_node_index + len(feasible) + rejected) % num_all
        evaluated = len(feasible) + rejected

        if not len(feasible):
            diagnosis = self._diagnosis(table, rejections, nominated_rejections, extra)
            if absent is not None and len(absent):
                msg = f"node(s) didn't satisfy plugin(s) {_go_list(sorted(pre_plugins))}"
                _mark_all(diagnosis, table, absent, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [msg]))
            result = self._failure(num_all, diagnosis, record_scores)
            result.evaluated = evaluated
            return result

        result = ScheduleResult(None, _OK, None, evaluated, len(feasible))
        if record_scores:
            diagnosis = _tally(self._diagnosis(table, rejections, nominated_rejections, extra))
            result.diagnosis = diagnosis
            result.filtered = diagnosis.filtered()

        if len(feasible) == 1:
            # Scoring one node cannot change the answer (upstream skips PreScore/Score too).
            result.node = table.names[int(feasible[0])]
            if batch is not None:
                batch.store(signature, hint, result.node or "", None, cycle)
            if record_scores:
                result.scores = {result.node or "": {}}
                result.total_scores = {result.node or "": 0}
            return result

        try:
            total, per_plugin = self._score_nodes(state, pod, table, feasible, record_scores)
        except _ScoreError as exc:
            return ScheduleResult(
                None, Status(Code.ERROR, [str(exc)]), evaluated=evaluated, feasible=len(feasible)
            )
        pick = _pick_best(total, self._rng)
        result.node = table.names[int(feasible[pick])]
        if batch is not None:
            others = self._ranked_rest(table, feasible, total, pick) if signature is not None else None
            batch.store(signature, hint, result.node or "", others, cycle)
        if record_scores:
            names = [table.names[s] or "" for s in feasible.tolist()]
            result.total_scores = dict(zip(names, total.tolist(), strict=True))
            scores: dict[str, dict[str, int]] = {name: {} for name in names}
            for plugin, arr in per_plugin.items():
                for name, value in zip(names, arr.tolist(), strict=True):
                    scores[name][plugin] = value
            result.scores = scores
        return result

    # --- opportunistic batching ----------------------------------------------------------------------------

    def _find_signers(self) -> list[Any]:
        """The plugins that sign pods (upstream: every PreFilter, Filter, PreScore and Score plugin must be a
        SignPlugin, else the profile signs no pod). A plugin with ``never_signs`` (PodTopologySpread with default
        constraints) makes every pod unsignable, so signing is off for the profile: [] then."""
        candidates: dict[str, Any] = {}
        for pl in (*self._pre_filter, *self._filter, *self._pre_score, *(entry[0] for entry in self._score)):
            candidates.setdefault(pl.name, pl)
        signers: list[Any] = []
        for pl in candidates.values():
            if getattr(pl, "sign_pod", None) is None or getattr(pl, "never_signs", False):
                signers = []
                break
            signers.append(pl)
        self._can_sign = bool(signers) or not candidates
        self._signers = signers
        return signers

    def sign_pod(self, pod: PodInfo) -> Signature | None:
        """The pod's scheduling signature (upstream ``SignPod``): equal signatures get the same Filter and Score
        answers on the same nodes. None when the pod cannot be signed."""
        signers = self._signers
        if signers is None:
            signers = self._find_signers()
        if not self._can_sign:
            return None
        parts: list[Any] = [pod.scheduler_name]
        for pl in signers:
            fragment = pl.sign_pod(pod)
            if fragment is None:
                return None
            parts.append(fragment)
        return tuple(parts)

    def pod_succeeded(self) -> None:
        """The cycle's pod passed Reserve and Permit (upstream: the batch's ``PodSucceeded``)."""
        if self.batch is not None:
            self.batch.pod_succeeded()

    def _rejects(self, state: CycleState, pod: PodInfo, name: str) -> bool | None:
        """Do the Filter plugins reject ``pod`` on node ``name`` (None: no such node)? A failing plugin is not a
        rejection (upstream's ``IsRejected``)."""
        table = self.nodes
        slot = table.index.get(name)
        if slot is None:
            return None
        try:
            alive, _, _ = self._filter_chunk(state, pod, table, np.array([slot], dtype=np.intp))
        except FilterError:
            return False
        return not len(alive)

    def _hint_fits(
        self,
        state: CycleState,
        pod: PodInfo,
        table: NodeTable,
        slot: int,
        rejections: list[tuple[int, Status]],
    ) -> bool:
        """Filter (with nominated pods) on the hinted node; its rejection, if any, joins ``rejections``."""
        one = np.array([slot], dtype=np.intp)
        alive, _, rejs = self._filter_chunk(state, pod, table, one)
        if len(alive):
            nominated: list[tuple[int, Status]] = []
            if self.handle.nominator is not None:
                nominated = self._nominated_rejections(state, pod, table, alive)
            if not nominated:
                return True
            rejections.extend(nominated)
            return False
        for rej in rejs:
            rejections.extend((int(sl), st) for st, sls in _group_statuses(rej) for sl in sls.tolist())
        return False

    def _ranked_rest(self, table: NodeTable, feasible: np.ndarray, total: np.ndarray, pick: int) -> list[str]:
        """The scored nodes but the chosen one, best LAST: by total score, ties in a random order (upstream's
        heap of scores with a random tie-breaker per node). Drawn from a generator of its own, so batching
        leaves the node choice of full cycles as it was."""
        keys = self._tie_rng.random(len(feasible))
        order = np.lexsort((keys, total))  # ascending: the best comes last
        order = order[order != pick]
        names = table.names
        return [names[s] or "" for s in feasible[order].tolist()]

    def _failure(self, num_all: int, diagnosis: NodeToStatus, record_scores: bool) -> ScheduleResult:
        diagnosis.tally()
        status = Status(Code.UNSCHEDULABLE, [fit_error_message(num_all, diagnosis)])
        result = ScheduleResult(None, status, diagnosis)
        if record_scores:
            result.filtered = diagnosis.filtered()
        return result

    def _diagnosis(
        self,
        table: NodeTable,
        rejections: list[_Rejections],
        early: list[tuple[int, Status]],
        late: list[tuple[int, Status]],
    ) -> NodeToStatus:
        """Statuses in upstream's order of writing: nominated node first, then the main pass. Recorded as groups
        of slots (``NodeToStatus.record``): no per-node work here."""
        diagnosis = NodeToStatus.over(table)
        plugins = diagnosis.plugins
        if early:
            plugins.update(status.plugin for _, status in early)
            diagnosis.record_pairs(early)
        for rej in rejections:
            plugins.add(rej.plugin)
            for status, slots in _group_statuses(rej):
                diagnosis.record(slots, status)
        if late:
            plugins.update(status.plugin for _, status in late)
            diagnosis.record_pairs(late)
        return diagnosis

    def _score_nodes(
        self, state: CycleState, pod: PodInfo, table: NodeTable, feasible: np.ndarray, record: bool
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        started = perf_counter()
        skip = state.skip_score
        if not record:
            # A plugin whose Score is the same on every node this cycle adds a constant to every total: the choice
            # is the same without it, so its PreScore and Score are skipped (the recorded scores keep them).
            for pl in self._constant_scorers:
                if pl.constant_score(pod, table):
                    skip.add(pl.name)
        for pl in self._pre_score:
            if skip and pl.name in skip:
                continue
            s = pl.pre_score(state, pod, table, feasible)
            if s is _OK:
                continue
            if s.is_skip:
                state.skip_score.add(pl.name)
            elif not s.ok:
                self._observe("PreScore", Code.ERROR, started)
                raise _ScoreError(f'running PreScore plugin "{pl.name}": {s.message()}')
        now = perf_counter()
        self._ok_pre_score(now - started)
        started = now
        # The weighted sum, started from the first plugin's scores (never written to in place: a plugin may keep
        # the array it answered).
        total: np.ndarray | None = None
        per_plugin: dict[str, np.ndarray] = {}
        for pl, weight, normalize, check in self._score:
            if skip and pl.name in skip:
                continue
            scores = pl.score(state, pod, table, feasible)
            if normalize:
                scores = pl.normalize_score(state, pod, scores)
            if check:
                lo, hi = int(scores.min()), int(scores.max())
                if lo < MIN_NODE_SCORE or hi > MAX_NODE_SCORE:
                    bad = lo if lo < MIN_NODE_SCORE else hi
                    self._observe("Score", Code.ERROR, started)
                    raise _ScoreError(
                        f'plugin "{pl.name}" returns an invalid score {bad}, it should in the range of '
                        f"[{MIN_NODE_SCORE}, {MAX_NODE_SCORE}] after normalizing"
                    )
            weighted = scores if weight == 1 else scores * weight
            if total is None:
                total = np.asarray(weighted, dtype=np.int64)  # no copy for the usual int64 array
            else:
                total = total + weighted
            if record:
                per_plugin[pl.name] = np.asarray(scores, dtype=np.int64) * weight
        self._ok_score(perf_counter() - started)
        if total is None:
            total = np.zeros(len(feasible), dtype=np.int64)
        return total, per_plugin

    # --- PostFilter ----------------------------------------------------------------------------------------

    async def run_post_filter(
        self, state: CycleState, pod: PodInfo, diagnosis: NodeToStatus
    ) -> tuple[str | None, Status]:
        """PostFilter plugins (preemption). Success or an unresolvable answer stops the run; rejections are
        collected and their reasons joined (the message that follows the FitError in FailedScheduling)."""
        started = perf_counter()
        code = Code.ERROR
        try:
            node, status = await self._post_filter_plugins(state, pod, diagnosis)
            code = status.code
            return node, status
        finally:
            self._observe("PostFilter", code, started)

    async def _post_filter_plugins(
        self, state: CycleState, pod: PodInfo, diagnosis: NodeToStatus
    ) -> tuple[str | None, Status]:
        nominated: str | None = None
        reasons: list[str] = []
        rejector = ""
        for pl in self._post_filter:
            node, s = await pl.post_filter(state, pod, self.nodes, diagnosis)
            if s.ok:
                return node, Status(Code.SUCCESS, list(s.reasons), pl.name)
            if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return node, Status(s.code, list(s.reasons), pl.name)
            if not s.rejected:
                return None, Status(Code.ERROR, list(s.reasons), pl.name)
            if node:
                nominated = node
            reasons.extend(s.reasons)
            rejector = rejector or pl.name
        return nominated, Status(Code.UNSCHEDULABLE, reasons, rejector)

    # --- Reserve / Permit / binding -------------------------------------------------------------------------
    # Each run is observed in framework_extension_point_duration_seconds with the code of the Status it answers,
    # ERROR when a plugin raises; a plugin's shared success status is checked by identity first.

    def run_reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """Reserve plugins in order; on failure the caller runs ``run_unreserve``."""
        started = perf_counter()
        try:
            for pl in self._reserve:
                s = pl.reserve(state, pod, node_name)
                if s is _OK or s.code == Code.SUCCESS:
                    continue
                if s.rejected:
                    s = Status(s.code, list(s.reasons), pl.name)
                else:
                    s = Status(Code.ERROR, [f'running Reserve plugin "{pl.name}": {s.message()}'], pl.name)
                self._observe("Reserve", s.code, started)
                return s
        except BaseException:
            self._observe("Reserve", Code.ERROR, started)
            raise
        self._ok_reserve(perf_counter() - started)
        return _OK

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Unreserve in reverse order; it must not fail, so errors are logged and the rest still run."""
        started = perf_counter()
        code = Code.ERROR
        try:
            for pl in reversed(self._reserve):
                try:
                    pl.unreserve(state, pod, node_name)
                except Exception:
                    log.exception("Unreserve of plugin %s failed for pod %s", pl.name, pod.key)
            code = Code.SUCCESS
        finally:
            self._observe("Unreserve", code, started)

    def run_permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, dict[str, float]]:
        """Permit plugins: (status, plugin -> wait timeout). WAIT when some plugin waits and none rejected;
        timeouts are capped at 15 minutes as upstream."""
        started = perf_counter()
        try:
            s, waits = self._permit_plugins(state, pod, node_name)
        except BaseException:
            self._observe("Permit", Code.ERROR, started)
            raise
        if s is _OK:
            self._ok_permit(perf_counter() - started)
        else:
            self._observe("Permit", s.code, started)
        return s, waits

    def _permit_plugins(
        self, state: CycleState, pod: PodInfo, node_name: str
    ) -> tuple[Status, dict[str, float]]:
        waits: dict[str, float] = {}
        for pl in self._permit:
            s, timeout = pl.permit(state, pod, node_name)
            if s is _OK or s.code == Code.SUCCESS:
                continue
            if s.rejected:
                return Status(s.code, list(s.reasons), pl.name), {}
            if s.code == Code.WAIT:
                waits[pl.name] = min(float(timeout), MAX_PERMIT_TIMEOUT)
                continue
            return Status(Code.ERROR, [f'running Permit plugin "{pl.name}": {s.message()}'], pl.name), {}
        if waits:
            return Status(Code.WAIT, ["one or more plugins asked to wait and no plugin rejected pod"]), waits
        return _OK, {}

    async def run_pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        started = perf_counter()
        try:
            for pl in self._pre_bind:
                s = await pl.pre_bind(state, pod, node_name)
                if s is _OK or s.code == Code.SUCCESS:
                    continue
                if s.rejected:
                    s = Status(s.code, list(s.reasons), pl.name)
                else:
                    s = Status(Code.ERROR, [f'running PreBind plugin "{pl.name}": {s.message()}'], pl.name)
                self._observe("PreBind", s.code, started)
                return s
        except BaseException:
            self._observe("PreBind", Code.ERROR, started)
            raise
        self._ok_pre_bind(perf_counter() - started)
        return _OK

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        """The first Bind plugin that does not SKIP binds; SKIP from all (or none configured) is SKIP."""
        started = perf_counter()
        try:
            status = Status.skip()
            for pl, bound in self._bind:
                status = await pl.bind(state, pod, node_name)
                if status.code == Code.SKIP:
                    continue
                if status is _OK or status.code == Code.SUCCESS:
                    self._ok_bind(perf_counter() - started)
                    return bound
                if status.rejected:
                    status = Status(status.code, list(status.reasons), pl.name)
                else:
                    msg = f'running Bind plugin "{pl.name}": {status.message()}'
                    status = Status(Code.ERROR, [msg], pl.name)
                break
        except BaseException:
            self._observe("Bind", Code.ERROR, started)
            raise
        self._observe("Bind", status.code, started)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        started = perf_counter()
        try:
            for pl in self._post_bind:
                try:
                    pl.post_bind(state, pod, node_name)
                except Exception:
                    log.exception("PostBind plugin %s failed for pod %s", pl.name, pod.key)
        except BaseException:
            self._observe("PostBind", Code.ERROR, started)
            raise
        self._ok_post_bind(perf_counter() - started)


class _ScoreError(Exception):
    pass


def _pick_best(total: np.ndarray, rng: random.Random) -> int:
    """The position of the best total, ties broken at random: one ``randrange`` over the tied positions in
    ascending order (argmax and nonzero are C methods; ``max()``, ``count_nonzero`` and ``flatnonzero`` go
    through Python wrappers)."""
    pick = int(total.argmax())
    best = (total == total[pick]).nonzero()[0]
    n_best = len(best)
    if n_best > 1:
        pick = int(best[rng.randrange(n_best)])
    return pick


def _nominated_as_rejections(
    nominated: list[tuple[int, Status]], slots: np.ndarray, positions: np.ndarray
) -> _Rejections | None:
    """Nominated-pods rejections that all have one status, as one ``_Rejections`` whose ``_group_statuses``
    gives that status back (same code, reasons, plugin); None when they do not."""
    first = nominated[0][1]
    reasons = list(first.reasons)
    if (
        first.code not in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
        or not reasons
        or len(reasons) > 62
        or len(set(reasons)) != len(reasons)
    ):
        return None
    statuses = [status for _, status in nominated]
    if statuses.count(first) != len(statuses):
        return None
    unresolvable = [first.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE] + [False] * (len(reasons) - 1)
    bits = np.full(len(slots), (1 << len(reasons)) - 1, dtype=np.int64)
    return _Rejections(first.plugin, slots, positions, bits, reasons, unresolvable)


def _group_statuses(rej: _Rejections) -> list[tuple[Status, np.ndarray]]:
    """One Status per distinct reason bitmask (usually one or two), with the slots that got it."""
    bits = rej.bits
    first = int(bits[0])
    if len(bits) == 1 or not (bits != first).any():
        return [(_bits_status(rej.plugin, first, rej.reasons, rej.unresolvable), rej.slots)]
    uniq, inverse = np.unique(bits, return_inverse=True)
    return [
        (_bits_status(rej.plugin, int(u), rej.reasons, rej.unresolvable), rej.slots[inverse == i])
        for i, u in enumerate(uniq.tolist())
    ]


def _tally(diagnosis: NodeToStatus) -> NodeToStatus:
    """Fill ``counts`` (``NodeToStatus.tally``: per status group, not per node)."""
    diagnosis.tally()
    return diagnosis


def _mark_all(diagnosis: NodeToStatus, table: NodeTable, slots: np.ndarray, status: Status) -> None:
    diagnosis.record(slots, status)


__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "NO_NODES_AVAILABLE",
    "FilterError",
    "Framework",
    "ScheduleResult",
    "fit_error_message",
    "num_feasible_nodes_to_find",
]
