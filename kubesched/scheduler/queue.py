"""The scheduling queue: upstream's ``PriorityQueue`` (``pkg/scheduler/backend/queue``) as 1.36 runs it.

Where a pending pod waits:
- **activeQ** — a heap ordered by the QueueSort plugin's ``sort_key``; ``pop()`` takes its head.
- **backoffQ** — pods that failed recently, ordered by backoff expiry (then ``sort_key`` within one 1-second
  window, as ``SchedulerPopFromBackoffQ``). The backoff doubles per failure from ``initial_backoff`` up to
  ``max_backoff``; a flush every second moves the expired ones to activeQ, and ``pop()`` takes from backoffQ
  directly when activeQ is empty (both on by default since 1.33). Failures without any rejecting plugin (errors)
  wait in a separate error heap that ``pop()`` never takes from early.
- **unschedulablePods** — pods some plugins rejected. They come back only when a cluster event that one of the
  rejecting plugins registered (``events_to_register``) happens, when the pod itself changes, or after
  ``max_in_unschedulable`` (5 min) by the 30-second leftover flush. Pods a PreEnqueue plugin gates wait here too
  (counted as ``gated``) and are re-checked when the pod changes or the gating plugin's events happen; those a
  plugin's ``GateWatch`` tracks (DefaultPreemption's preemptors) only when the plugin reports that their answer
  may have changed, so a victim's deletion does not re-ask every waiting preemptor.

Events during a scheduling attempt (1.36 always has QueueingHints, so there is no ``moveRequestCycle`` any more):
while pods are in flight, the events of interest are logged with the scheduling cycle they happened in. When a
pod comes back unschedulable, an event logged in or after its own cycle that one of its rejecting plugins
registered sends it to backoffQ (or straight to activeQ if its backoff is already over) instead of
unschedulablePods. What we do not have are upstream's per-plugin QueueingHint *functions*: a matching event always
counts as "Queue".

Event matching (``event_matches``), kept simple:
- resources match when equal, when either is ``"*"``, or when a plugin registered ``"Pod"`` and the event is about
  an ``"AssignedPod"`` or ``"UnschedulablePod"`` (upstream's split of pod events);
- actions match when equal, when either is ``"*"``/``"All"``, or when one is the generic ``"Update"`` and the
  other a specific ``"Update..."`` (``UpdateNodeLabel``, ``UpdatePodLabel``, ...);
- an event ``ClusterEvent("*", "All")`` (``WILDCARD_EVENT``) moves every pod whatever its rejectors;
- a rejecting plugin absent from the ``plugin_events`` map is taken to be interested in every event (upstream
  registers all events for plugins without EnqueueExtensions); one that registered nothing is never moved by
  events.

Everything runs on one asyncio loop: no locks. Times come from the injectable ``clock`` (seconds, default
``time.time``); ``QueuedPodInfo.timestamp``/``initial_attempt_ts`` are in that clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kubesched.scheduler.framework.interface import AssignedPodHints, ClusterEvent, Status
from kubesched.scheduler.nominated import NominatedRequests
from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.metrics import SchedulerMetrics

log = logging.getLogger(__name__)

DEFAULT_INITIAL_BACKOFF = 1.0
DEFAULT_MAX_BACKOFF = 10.0
DEFAULT_MAX_IN_UNSCHEDULABLE = 300.0
DEFAULT_BACKOFF_FLUSH_PERIOD = 1.0
DEFAULT_UNSCHEDULABLE_FLUSH_PERIOD = 30.0
# Pods in backoffQ are ordered by priority within windows of this size (KEP-5142); the flush aligns to them.
BACKOFF_ORDERING_WINDOW = 1.0

# Queue names, as the ``queue`` label of scheduler_queue_incoming_pods_total.
ACTIVE = "active"
BACKOFF = "backoff"
UNSCHEDULABLE = "unschedulable"
GATED = "gated"

WILDCARD = "*"
WILDCARD_EVENT = ClusterEvent(WILDCARD, "All")
ASSIGNED_POD = "AssignedPod"
UNSCHEDULABLE_POD = "UnschedulablePod"
EVENT_ASSIGNED_POD_ADD = ClusterEvent(ASSIGNED_POD, "Add")
EVENT_ASSIGNED_POD_UPDATE = ClusterEvent(ASSIGNED_POD, "Update")
EVENT_ASSIGNED_POD_DELETE = ClusterEvent(ASSIGNED_POD, "Delete")
EVENT_UPDATE_POD_SCALE_DOWN = ClusterEvent(ASSIGNED_POD, "UpdatePodScaleDown")

# Event labels for the incoming-pods metric that are not ``resource + action``.
SCHEDULE_ATTEMPT_FAILURE = "ScheduleAttemptFailure"
BACKOFF_COMPLETE = "BackoffComplete"
POP_FROM_BACKOFF_Q = "PopFromBackoffQ"
FORCE_ACTIVATE = "ForceActivate"
UNSCHEDULABLE_TIMEOUT = "UnschedulableTimeout"
UNSCHEDULED_POD_ADD = "UnschedulablePodAdd"
UNSCHEDULED_POD_UPDATE = "UnschedulablePodUpdate"

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[Any]]
SortKey = Callable[[QueuedPodInfo], Any]
PreEnqueue = Callable[[PodInfo], Status]
PreCheck = Callable[[PodInfo], bool]


# ----------------------------------------------------------------------------------------------------------------
# Events.


def _is_wildcard(event: ClusterEvent) -> bool:
    return event.resource == WILDCARD and event.action in (WILDCARD, "All")


def _resources_match(registered: str, incoming: str) -> bool:
    if registered == incoming or registered == WILDCARD or incoming == WILDCARD:
        return True
    pod_kinds = (ASSIGNED_POD, UNSCHEDULABLE_POD)
    return (registered == "Pod" and incoming in pod_kinds) or (incoming == "Pod" and registered in pod_kinds)


def _actions_match(registered: str, incoming: str) -> bool:
    if registered == incoming or registered in (WILDCARD, "All") or incoming in (WILDCARD, "All"):
        return True
    if registered == "Update":
        return incoming.startswith("Update")
    if incoming == "Update":
        return registered.startswith("Update")
    return False


def event_matches(registered: ClusterEvent, incoming: ClusterEvent) -> bool:
    """Whether ``incoming`` is an event a plugin that registered ``registered`` cares about (see module doc)."""
    if _is_wildcard(incoming) or _is_wildcard(registered):
        return True
    return _resources_match(registered.resource, incoming.resource) and _actions_match(
        registered.action, incoming.action
    )


def event_label(event: ClusterEvent) -> str:
    """Upstream's ``ClusterEvent.Label()``: resource and action run together (``NodeAdd``)."""
    return f"{event.resource}{event.action}"


# ----------------------------------------------------------------------------------------------------------------
# Gated pods a PreEnqueue plugin keeps track of.


class GateWatch:
    """A PreEnqueue plugin's account of the pods it gates, so that an event re-asks PreEnqueue only for those whose
    answer may have changed (as upstream's queueing hints let an event skip the pods it cannot concern).

    The plugin ``plugin`` promises: for a pod ``tracks(pod)`` accepts, the whole PreEnqueue answer (every plugin's,
    not only its own) changes only when the plugin puts the pod's uid in ``changed``, or at any time while the uid
    is in ``unsettled``. The queue then re-asks PreEnqueue, when a matching event comes, only for the tracked pods in
    either set; for the others it would get the answer it has. It takes uids out of ``changed`` whenever it runs
    PreEnqueue for them or forgets them; ``unsettled`` is the plugin's to empty (putting the uid in ``changed`` when
    it does). DefaultPreemption is the one user: a pod waits for its own preemption, which ends once."""

    def __init__(self, plugin: str, tracks: Callable[[PodInfo], bool]) -> None:
        self.plugin = plugin
        self.tracks = tracks
        self.changed: set[str] = set()
        self.unsettled: set[str] = set()


# ----------------------------------------------------------------------------------------------------------------
# Nominator.


class Nominator:
    """Pods nominated to nodes by preemption, waiting for the victims to go (upstream ``nominator``).

    The Filter of a pod counts the nominated pods of equal or higher priority on a node as if they were there.
    """

    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, PodInfo]] = {}
        self._node_of: dict[str, str] = {}
        self._summaries: list[NominatedRequests] = []
        # PreEnqueue plugins' GateWatches (here because the nominator is what the queue and the plugins share).
        self.gate_watches: list[GateWatch] = []

    def add_nominated(self, pi: PodInfo, node: str | None = None) -> None:
        """Nominate ``pi`` to ``node`` (default: the pod's ``status.nominatedNodeName``); replaces any earlier one.

        Assigned pods are never nominated.
        """
        if pi.uid in self._node_of:
            self.delete_nominated(pi)
        node_name = node or pi.nominated_node_name
        if not node_name or pi.node_name:
            return
        self._node_of[pi.uid] = node_name
        self._by_node.setdefault(node_name, {})[pi.uid] = pi
        for summary in self._summaries:
            summary.nominated(pi, node_name)

    def delete_nominated(self, pi: PodInfo | str) -> None:
        uid = pi if isinstance(pi, str) else pi.uid
        node_name = self._node_of.pop(uid, None)
        if node_name is None:
            return
        pods = self._by_node.get(node_name)
        if pods is not None:
            pods.pop(uid, None)
            if not pods:
                del self._by_node[node_name]
        for summary in self._summaries:
            summary.unnominated(uid)

    def update_nominated(self, old: PodInfo | None, new: PodInfo) -> None:
        """A pod changed: keep its nomination current.

        An update without ``nominatedNodeName`` that arrives right after preemption nominated the pod in memory
        keeps that in-memory nomination (upstream ``UpdateNominatedPod``).
        """
        node: str | None = None
        if (old is None or not old.nominated_node_name) and not new.nominated_node_name:
            node = self._node_of.get(new.uid)
        self.add_nominated(new, node)

    def nominated_pods_for_node(self, node: str) -> list[PodInfo]:
        pods = self._by_node.get(node)
        return list(pods.values()) if pods else []

    def nominated_node(self, uid: str) -> str | None:
        return self._node_of.get(uid)

    def nodes(self) -> list[str]:
        """Nodes with at least one nominated pod."""
        return list(self._by_node)

    def watch_gates(self, watch: GateWatch) -> None:
        """Register a PreEnqueue plugin's ``GateWatch`` with the queue this nominator belongs to."""
        if watch not in self.gate_watches:
            self.gate_watches.append(watch)

    def requests_on(self, table: NodeTable) -> NominatedRequests:
        """The nominated pods' requests per slot of ``table`` (``nominated.py``), kept current from now on."""
        for summary in self._summaries:
            if summary.table is table:
                return summary
        pods = [(pi, node) for node, by_uid in self._by_node.items() for pi in by_uid.values()]
        summary = NominatedRequests(table, pods)
        self._summaries.append(summary)
        return summary

    def __len__(self) -> int:
        return len(self._node_of)


# ----------------------------------------------------------------------------------------------------------------
# Heaps with removal.


class _Heap:
    """A binary heap of pod uids by key, with O(log n) push and lazy removal."""

    def __init__(self) -> None:
        self._heap: list[tuple[Any, int, str]] = []
        self._live: dict[str, int] = {}  # uid -> sequence number of its current heap item
        self._seq = itertools.count()

    def push(self, uid: str, key: Any) -> None:
        seq = next(self._seq)
        self._live[uid] = seq
        heapq.heappush(self._heap, (key, seq, uid))
        if len(self._heap) > 64 and len(self._heap) > 2 * len(self._live):
            self._compact()

    def remove(self, uid: str) -> bool:
        return self._live.pop(uid, None) is not None

    def peek(self) -> tuple[Any, str] | None:
        heap = self._heap
        while heap:
            key, seq, uid = heap[0]
            if self._live.get(uid) == seq:
                return key, uid
            heapq.heappop(heap)
        return None

    def pop(self) -> str | None:
        top = self.peek()
        if top is None:
            return None
        heapq.heappop(self._heap)
        del self._live[top[1]]
        return top[1]

    def _compact(self) -> None:
        self._heap = [item for item in self._heap if self._live.get(item[2]) == item[1]]
        heapq.heapify(self._heap)

    def __contains__(self, uid: str) -> bool:
        return uid in self._live

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._live))


# ----------------------------------------------------------------------------------------------------------------
# The queue.


@dataclass(slots=True)
class _Entry:
    """What the queue keeps per pod besides the ``QueuedPodInfo`` it hands out."""

    qpi: QueuedPodInfo
    where: str = ""  # ACTIVE / BACKOFF / UNSCHEDULABLE (gated pods too) / "inflight" / "" (nowhere yet)
    unschedulable_count: int = 0
    consecutive_errors: int = 0
    backoff_expiry: float | None = None  # cached; reset whenever the counts or the timestamp change
    gating_plugin: str = ""
    watch: GateWatch | None = None  # gated, and the gating plugin's GateWatch tracks it (see _watched)
    useq: int = 0  # order of arrival in unschedulablePods
    cycle: int = -1  # scheduling cycle in which it was last popped
    latest: PodInfo | None = None  # newest version seen while in flight
    deleted: bool = False  # deleted while in flight
    force_requeue: bool = False  # activated while in flight


_INFLIGHT = "inflight"


class SchedulingQueue:
    """Pending pods, keyed by uid. See the module docstring for the rules."""

    def __init__(
        self,
        sort_key: SortKey,
        *,
        pre_enqueue: PreEnqueue | None = None,
        plugin_events: Mapping[str, Iterable[ClusterEvent]] | None = None,
        clock: Clock = time.time,
        sleep: Sleep = asyncio.sleep,
        initial_backoff: float = DEFAULT_INITIAL_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        max_in_unschedulable: float = DEFAULT_MAX_IN_UNSCHEDULABLE,
        backoff_flush_period: float = DEFAULT_BACKOFF_FLUSH_PERIOD,
        unschedulable_flush_period: float = DEFAULT_UNSCHEDULABLE_FLUSH_PERIOD,
        pop_from_backoff: bool = True,
        metrics: SchedulerMetrics | None = None,
        namespace_labels: Callable[[str], Mapping[str, str] | None] | None = None,
        nominator: Nominator | None = None,
        assigned_pod_hints: Sequence[AssignedPodHints] = (),
    ) -> None:
        self.sort_key = sort_key
        self.pre_enqueue = pre_enqueue
        self.clock = clock
        self._sleep = sleep
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.max_in_unschedulable = max_in_unschedulable
        self.backoff_flush_period = backoff_flush_period
        self.unschedulable_flush_period = unschedulable_flush_period
        self.pop_from_backoff = pop_from_backoff
        self.metrics = metrics
        self.namespace_labels = namespace_labels
        self.nominator = nominator if nominator is not None else Nominator()
        # Plugins telling which unschedulable pods a newly bound pod may help (see _cross_topology_candidates).
        self.assigned_pod_hints = tuple(assigned_pod_hints)
        self.scheduling_cycle = 0

        self._entries: dict[str, _Entry] = {}
        self._active = _Heap()
        self._backoff = _Heap()
        self._error_backoff = _Heap()
        # unschedulablePods (gated pods too), in order of arrival; split into the pods every event looks at
        # (_scan) and gated pods a GateWatch tracks (_watched), which an event looks at only when their watch
        # says their PreEnqueue answer may have changed.
        self._unschedulable: dict[str, _Entry] = {}
        self._scan: dict[str, _Entry] = {}
        self._watched: dict[str, _Entry] = {}
        self._scan_unordered = False
        self._useq = itertools.count()
        self._gated: set[str] = set()
        # The unschedulable pods a newly assigned pod may help (see _cross_topology_candidates).
        self._topology_waiting: dict[str, _Entry] = {}
        # Events of interest seen while pods were in flight: (scheduling cycle, event, only-for-uid or None).
        self._inflight: dict[str, int] = {}  # uid -> cycle, in pop order
        self._inflight_events: list[tuple[int, ClusterEvent, str | None]] = []

        self._plugin_events: dict[str, tuple[ClusterEvent, ...]] | None = None
        self._unregistered_rejectors: set[str] = set()
        self.set_plugin_events(plugin_events)

        self._wakeup = asyncio.Event()
        self._closed = False
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping: list[asyncio.Task[None]] = []

    # -- configuration ------------------------------------------------------------------------------------------

    def set_plugin_events(self, plugin_events: Mapping[str, Iterable[ClusterEvent]] | None) -> None:
        """Which events each plugin registered (plugin name -> events). ``None``: every plugin wants everything."""
        if plugin_events is None:
            self._plugin_events = None
        else:
            self._plugin_events = {name: tuple(events) for name, events in plugin_events.items()}
        # Answers of _event_of_interest / _rejector_wants for the registrations above (a bind is one event per
        # pod; matching it against every registration each time added up).
        self._interest: dict[ClusterEvent, bool] = {}
        self._rejector_interest: dict[tuple[str, ClusterEvent], bool] = {}

    # -- adding, updating, deleting -----------------------------------------------------------------------------

    def add(self, pod_info: PodInfo) -> None:
        """A new pending pod (informer Add). A pod the queue already knows is treated as an update."""
        known = self._entries.get(pod_info.uid)
        if known is not None and not known.deleted:
            self.update(known.latest or known.qpi.pod_info, pod_info)
            return
        entry = _Entry(QueuedPodInfo(pod_info, timestamp=self.clock()))
        self._entries[pod_info.uid] = entry
        if self._move_to_active(entry, UNSCHEDULED_POD_ADD):
            self._wake()

    def update(self, old: PodInfo | None, new: PodInfo) -> None:
        """A pending pod changed (informer Update). Unknown pods are added."""
        entry = self._entries.get(new.uid)
        if entry is None or entry.deleted:
            self.add(new)
            return
        if entry.where == _INFLIGHT:
            # Comes back through add_unschedulable_if_not_present; requeue it then if the change may matter.
            if _scheduling_relevant_change(entry.latest or entry.qpi.pod_info, new):
                self._record_inflight_event(WILDCARD_EVENT, new.uid)
            entry.latest = new
            return
        previous = entry.qpi.pod_info
        entry.qpi.pod_info = new
        self.nominator.update_nominated(old, new)
        if entry.where == ACTIVE:
            self._active.push(new.uid, self.sort_key(entry.qpi))
            return
        if entry.where == BACKOFF:
            self._push_backoff(entry)
            return
        if entry.where == UNSCHEDULABLE:
            if not _scheduling_relevant_change(old or previous, new):
                return
            self._remove_unschedulable(entry)
            if not entry.qpi.gated and self._is_backing_off(entry):
                queue = BACKOFF if self._move_to_backoff(entry, UNSCHEDULED_POD_UPDATE) else UNSCHEDULABLE
            else:
                queue = ACTIVE if self._move_to_active(entry, UNSCHEDULED_POD_UPDATE) else UNSCHEDULABLE
            if queue == ACTIVE or (queue == BACKOFF and self.pop_from_backoff):
                self._wake()
            return
        # Known but nowhere (should not happen): queue it.
        if self._move_to_active(entry, UNSCHEDULED_POD_UPDATE):
            self._wake()

    def delete(self, pod: PodInfo | str) -> None:
        """A pending pod went away (deleted, or bound by someone else)."""
        uid = pod if isinstance(pod, str) else pod.uid
        self.nominator.delete_nominated(uid)
        entry = self._entries.get(uid)
        if entry is None:
            return
        if entry.where == _INFLIGHT:
            entry.deleted = True
            return
        self._detach(entry)
        del self._entries[uid]
        qpi = entry.qpi
        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if self.metrics is not None and rejectors:
            # Counted when it was rejected; an in-flight pod was uncounted when popped.
            self.metrics.add_unschedulable_reasons(rejectors, qpi.pod_info.scheduler_name, -1)

    def activate(self, uids: Iterable[str]) -> None:
        """Move these pods from unschedulablePods/backoffQ to activeQ now (upstream ``Activate``).

        An in-flight pod is requeued as soon as it comes back unschedulable.
        """
        woke = False
        for uid in uids:
            entry = self._entries.get(uid)
            if entry is None or entry.deleted:
                continue
            if entry.where == _INFLIGHT:
                entry.force_requeue = True
                continue
            if entry.where == BACKOFF:
                self._backoff.remove(uid)
                self._error_backoff.remove(uid)
                entry.where = ""
                woke |= self._move_to_active(entry, FORCE_ACTIVATE, from_backoff=True)
            elif entry.where == UNSCHEDULABLE:
                self._remove_unschedulable(entry)
                woke |= self._move_to_active(entry, FORCE_ACTIVATE)
        if woke:
            self._wake()

    # -- popping ------------------------------------------------------------------------------------------------

    async def pop(self) -> QueuedPodInfo | None:
        """The next pod to schedule; waits while none is ready. ``None`` once the queue is closed."""
        while True:
            if self._closed:
                return None
            uid = self._active.pop()
            label = None
            if uid is None and self.pop_from_backoff:
                uid = self._backoff.pop()
                label = POP_FROM_BACKOFF_Q
            if uid is not None:
                entry = self._entries[uid]
                if label is not None:
                    self._count_incoming(ACTIVE, label)
                return self._to_inflight(entry)
            self._wakeup.clear()
            await self._wakeup.wait()

    def _to_inflight(self, entry: _Entry) -> QueuedPodInfo:
        qpi = entry.qpi
        qpi.attempts += 1
        self.scheduling_cycle += 1
        entry.where = _INFLIGHT
        entry.cycle = self.scheduling_cycle
        entry.latest = None
        entry.force_requeue = False
        self._inflight[qpi.pod_info.uid] = self.scheduling_cycle
        if self.metrics is not None:
            rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
            if rejectors:
                self.metrics.add_unschedulable_reasons(rejectors, qpi.pod_info.scheduler_name, -1)
        return qpi

    def done(self, uid: str) -> None:
        """The scheduling attempt of a popped pod is over (bound, or handed back). Forgets deleted pods."""
        self._inflight.pop(uid, None)
        entry = self._entries.get(uid)
        if entry is not None and entry.where == _INFLIGHT:
            # Bound (or given up): the queue no longer holds it.
            del self._entries[uid]
        self._prune_inflight_events()

    def add_unschedulable_if_not_present(
        self, qpi: QueuedPodInfo, scheduling_cycle: int | None = None
    ) -> str:
        """Hand back a pod whose attempt failed; returns the queue it went to ("" if dropped or already queued).

        ``qpi.unschedulable_plugins``/``pending_plugins`` name the rejecting plugins (empty = an error). The pod
        goes to unschedulablePods unless an event one of them registered happened during its attempt (in or after
        ``scheduling_cycle``, default the cycle it was popped in): then to backoffQ, or activeQ if its backoff is
        already over. Errors always go to the error backoff.
        """
        uid = qpi.pod_info.uid
        entry = self._entries.get(uid)
        if entry is None:
            entry = _Entry(qpi)
            self._entries[uid] = entry
        elif entry.deleted:
            self._inflight.pop(uid, None)
            del self._entries[uid]
            self._prune_inflight_events()
            return ""
        elif entry.where in (ACTIVE, BACKOFF, UNSCHEDULABLE):
            log.warning("pod %s is already in the %s queue", qpi.pod_info.key, entry.where)
            return ""
        cycle = scheduling_cycle if scheduling_cycle is not None else entry.cycle
        entry.qpi = qpi
        entry.where = ""
        if entry.latest is not None:
            qpi.pod_info = entry.latest
            entry.latest = None

        rejectors = qpi.unschedulable_plugins | qpi.pending_plugins
        if rejectors:
            entry.unschedulable_count += 1
            entry.consecutive_errors = 0
        else:
            entry.consecutive_errors += 1
        qpi.timestamp = self.clock()
        entry.backoff_expiry = None
        if self.metrics is not None and rejectors:
            self.metrics.add_unschedulable_reasons(rejectors, qpi.pod_info.scheduler_name, 1)
        self._note_unregistered(rejectors)

        strategy = self._strategy_for_returning_pod(entry, cycle)
        queue = self._requeue(entry, strategy, SCHEDULE_ATTEMPT_FAILURE)
        self.done(uid)
        if queue == ACTIVE or (queue == BACKOFF and self.pop_from_backoff):
            self._wake()
        return queue

    # -- cluster events -----------------------------------------------------------------------------------------

    def move_all_to_active_or_backoff(self, event: ClusterEvent, pre_check: PreCheck | None = None) -> None:
        """A cluster event: unschedulable pods a rejecting plugin of which registered it go to backoffQ/activeQ.

        ``pre_check(pod_info)`` can narrow the candidates further.
        """
        if not self._event_of_interest(event):
            return
        if self._scan_unordered:
            self._scan = dict(sorted(self._scan.items(), key=lambda item: item[1].useq))
            self._scan_unordered = False
        candidates = [e for e in self._scan.values() if pre_check is None or pre_check(e.qpi.pod_info)]
        due = self._watched_due()
        if due:
            # The tracked gated pods whose answer may have changed, in their places among the others.
            candidates.extend(e for e in due if pre_check is None or pre_check(e.qpi.pod_info))
            candidates.sort(key=lambda e: e.useq)
        self._move_pods(candidates, event, event_label(event))

    def _watched_due(self) -> list[_Entry]:
        """The tracked gated pods whose PreEnqueue answer their GateWatch says may have changed."""
        if not self._watched:
            return []
        due: list[_Entry] = []
        watched = self._watched
        for watch in self.nominator.gate_watches:
            if watch.changed:
                gone: list[str] = []
                for uid in watch.changed:
                    entry = watched.get(uid)
                    if entry is not None and entry.watch is watch:
                        due.append(entry)
                    else:
                        gone.append(uid)  # not gated now: PreEnqueue runs afresh when it is again
                watch.changed.difference_update(gone)
            for uid in watch.unsettled:
                entry = watched.get(uid)
                if entry is not None and entry.watch is watch:
                    due.append(entry)
        if len(due) > 1:
            due = list({id(e): e for e in due}.values())
        return due

    def assigned_pod_added(self, pod: PodInfo) -> None:
        """A pod got bound: it may satisfy pending pods' pod affinity or topology spread."""
        event = EVENT_ASSIGNED_POD_ADD
        if self._event_of_interest(event):
            if not self._topology_waiting:
                # Nobody waits for an assigned pod (the usual case, once per binding): _move_pods would move
                # no one and only note the event for the pods in flight.
                self._record_inflight_event(event, None)
                return
            self._move_pods(self._cross_topology_candidates(pod), event, event_label(event))

    def assigned_pod_updated(
        self, old: PodInfo | None, new: PodInfo, event: ClusterEvent = EVENT_ASSIGNED_POD_UPDATE
    ) -> None:
        """A bound pod changed. A scale-down may free resources for anyone; other changes (labels) only matter to
        pods rejected by pod affinity or topology spread."""
        if event.action == EVENT_UPDATE_POD_SCALE_DOWN.action:
            self.move_all_to_active_or_backoff(event)
        elif self._event_of_interest(event):
            self._move_pods(self._cross_topology_candidates(new), event, event_label(event))

    # -- flushing -----------------------------------------------------------------------------------------------

    def flush_backoff_completed(self) -> int:
        """Move pods whose backoff is over to activeQ; returns how many moved."""
        moved = 0
        for heap in (self._backoff, self._error_backoff):
            while True:
                top = heap.peek()
                if top is None:
                    break
                entry = self._entries[top[1]]
                if self._is_backing_off(entry):
                    break
                heap.pop()
                entry.where = ""
                if self._move_to_active(entry, BACKOFF_COMPLETE, from_backoff=True):
                    moved += 1
        if moved:
            self._wake()
        return moved

    def flush_unschedulable_leftover(self) -> None:
        """Pods that sat in unschedulablePods longer than ``max_in_unschedulable`` get another chance."""
        now = self.clock()
        stale = [e for e in self._unschedulable.values() if now - e.qpi.timestamp > self.max_in_unschedulable]
        if stale:
            self._move_pods(stale, WILDCARD_EVENT, UNSCHEDULABLE_TIMEOUT)

    def start(self) -> None:
        """Start the two flush loops on the running event loop."""
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._backoff_flush_loop(), name="queue-backoff-flush"),
            loop.create_task(self._unschedulable_flush_loop(), name="queue-unschedulable-flush"),
        ]

    def close(self) -> None:
        """Stop the flush loops and wake every ``pop()`` with None."""
        self._closed = True
        for task in self._tasks:
            task.cancel()
        self._stopping, self._tasks = self._tasks, []
        self._wake()

    async def wait_closed(self) -> None:
        """After ``close()``: wait for the flush loops to finish."""
        tasks, self._stopping = self._stopping, []
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _backoff_flush_loop(self) -> None:
        # Align the flushes with the backoffQ ordering windows so a whole window moves at once.
        period = self.backoff_flush_period
        now = self.clock()
        await self._sleep(math.floor(now / period + 1) * period - now if period > 0 else 0)
        while not self._closed:
            try:
                self.flush_backoff_completed()
            except Exception:  # a bug here must not stop the queue
                log.exception("flushing the backoff queue failed")
            await self._sleep(period)

    async def _unschedulable_flush_loop(self) -> None:
        while not self._closed:
            await self._sleep(self.unschedulable_flush_period)
            try:
                self.flush_unschedulable_leftover()
            except Exception:
                log.exception("flushing unschedulable pods failed")

    # -- introspection ------------------------------------------------------------------------------------------

    def pending_counts(self) -> dict[str, int]:
        """Pods per queue: active, backoff, unschedulable (attempted and rejected), gated."""
        return {
            ACTIVE: len(self._active),
            BACKOFF: len(self._backoff) + len(self._error_backoff),
            UNSCHEDULABLE: len(self._unschedulable) - len(self._gated),
            GATED: len(self._gated),
        }

    def where(self, uid: str) -> str | None:
        """Which queue holds the pod: active / backoff / unschedulable / gated / inflight, or None."""
        entry = self._entries.get(uid)
        if entry is None or entry.deleted:
            return None
        if entry.where == UNSCHEDULABLE and entry.qpi.gated:
            return GATED
        return entry.where or None

    def get(self, uid: str) -> QueuedPodInfo | None:
        entry = self._entries.get(uid)
        return None if entry is None or entry.deleted else entry.qpi

    def pods(self, queue: str | None = None) -> list[QueuedPodInfo]:
        """Queued pods (in-flight ones excluded), optionally only those of one queue (as ``where``)."""
        return [
            e.qpi
            for uid, e in self._entries.items()
            if e.where in (ACTIVE, BACKOFF, UNSCHEDULABLE) and (queue is None or self.where(uid) == queue)
        ]

    def backoff_duration(self, count: int) -> float:
        """Backoff after ``count`` consecutive failures: initial doubling per failure, capped at the maximum."""
        if count <= 0:
            return 0.0
        return min(self.initial_backoff * 2.0 ** (count - 1), self.max_backoff)

    def backoff_expiry(self, uid: str) -> float | None:
        entry = self._entries.get(uid)
        return None if entry is None else self._backoff_time(entry)

    def snapshot(self, limit: int = 500) -> dict[str, Any]:
        """A read-only view for ``/debug/queue``: counts, and up to ``limit`` pods per queue with their profile,
        attempts, the plugins that rejected them (or the gating plugin) and, in backoffQ, the time left."""
        now = self.clock()
        out: dict[str, Any] = {"counts": self.pending_counts(), "truncated": False}
        lists: dict[str, list[dict[str, Any]]] = {ACTIVE: [], BACKOFF: [], UNSCHEDULABLE: [], GATED: []}
        for uid, entry in self._entries.items():
            where = self.where(uid)
            bucket = lists.get(where or "")
            if bucket is None:
                continue  # in flight
            if len(bucket) >= limit:
                out["truncated"] = True
                continue
            qpi = entry.qpi
            item: dict[str, Any] = {
                "pod": qpi.pod_info.key,
                "profile": qpi.pod_info.scheduler_name,
                "attempts": qpi.attempts,
                "plugins": sorted(qpi.unschedulable_plugins | qpi.pending_plugins),
                "queuedSeconds": round(max(0.0, now - qpi.timestamp), 3),
            }
            if where == BACKOFF:
                expiry = self._backoff_time(entry)
                item["backoffRemainingSeconds"] = (
                    round(max(0.0, expiry - now), 3) if expiry > -math.inf else 0
                )
            elif where == GATED:
                item["gatingPlugin"] = entry.gating_plugin
            bucket.append(item)
        out.update(lists)
        return out

    def __len__(self) -> int:
        return len(self._active) + len(self._backoff) + len(self._error_backoff) + len(self._unschedulable)

    # -- internals ----------------------------------------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    def _count_incoming(self, queue: str, event: str) -> None:
        if self.metrics is not None:
            self.metrics.count_incoming(queue, event)

    def _run_pre_enqueue(self, entry: _Entry) -> None:
        """Runs PreEnqueue; sets ``qpi.gated`` and the gating plugin."""
        qpi = entry.qpi
        if self.pre_enqueue is None:
            qpi.gated = False
            return
        for watch in self.nominator.gate_watches:
            watch.changed.discard(qpi.pod_info.uid)
        status = self.pre_enqueue(qpi.pod_info)
        if status.ok:
            qpi.gated = False
            entry.gating_plugin = ""
            return
        if status.plugin and status.plugin not in qpi.unschedulable_plugins:
            qpi.unschedulable_plugins.add(status.plugin)
            if self.metrics is not None:
                self.metrics.add_unschedulable_reasons((status.plugin,), qpi.pod_info.scheduler_name, 1)
        qpi.gated = True
        entry.gating_plugin = status.plugin

    def _gate(self, entry: _Entry, event: str) -> bool:
        """Runs PreEnqueue; a gated pod is (kept) in unschedulablePods. True if gated."""
        already_waiting = entry.where == UNSCHEDULABLE
        self._detach(entry)  # so the gated bookkeeping follows the new verdict
        self._run_pre_enqueue(entry)
        if not entry.qpi.gated:
            return False
        self._add_unschedulable(entry)
        if not already_waiting:
            self._count_incoming(GATED, event)
        return True

    def _move_to_active(self, entry: _Entry, event: str, *, from_backoff: bool = False) -> bool:
        """activeQ if PreEnqueue lets it (skipped from backoffQ: it ran on the way in), else kept gated."""
        if not (from_backoff and self.pop_from_backoff) and self._gate(entry, event):
            return False
        qpi = entry.qpi
        if qpi.initial_attempt_ts is None:
            qpi.initial_attempt_ts = self.clock()
        self._detach(entry)
        entry.where = ACTIVE
        self._active.push(qpi.pod_info.uid, self.sort_key(qpi))
        self._count_incoming(ACTIVE, event)
        if event in (UNSCHEDULED_POD_ADD, UNSCHEDULED_POD_UPDATE):
            self.nominator.add_nominated(qpi.pod_info)
        return True

    def _move_to_backoff(self, entry: _Entry, event: str) -> bool:
        # PreEnqueue runs on the way into backoffQ, so a pod popped from it directly is ready.
        if self.pop_from_backoff and self._gate(entry, event):
            return False
        self._detach(entry)
        entry.where = BACKOFF
        self._push_backoff(entry)
        self._count_incoming(BACKOFF, event)
        return True

    def _push_backoff(self, entry: _Entry) -> None:
        qpi = entry.qpi
        uid = qpi.pod_info.uid
        expiry = self._backoff_time(entry)
        if not (qpi.unschedulable_plugins or qpi.pending_plugins):
            self._backoff.remove(uid)
            self._error_backoff.push(uid, expiry)
        else:
            self._error_backoff.remove(uid)
            key = (expiry, self.sort_key(qpi)) if self.pop_from_backoff else (expiry,)
            self._backoff.push(uid, key)

    def _add_unschedulable(self, entry: _Entry) -> None:
        self._detach(entry)
        uid = entry.qpi.pod_info.uid
        entry.where = UNSCHEDULABLE
        entry.useq = next(self._useq)
        self._unschedulable[uid] = entry
        watch = self._watch_of(entry) if entry.qpi.gated else None
        entry.watch = watch
        if watch is None:
            self._scan[uid] = entry
        else:
            self._watched[uid] = entry
        if entry.qpi.gated:
            self._gated.add(uid)
        qpi = entry.qpi
        if any(hint.waits_for_assigned_pods(qpi) for hint in self.assigned_pod_hints):
            self._topology_waiting[uid] = entry

    def _watch_of(self, entry: _Entry) -> GateWatch | None:
        """The GateWatch of the plugin gating this pod, if it tracks the pod."""
        for watch in self.nominator.gate_watches:
            if watch.plugin == entry.gating_plugin and watch.tracks(entry.qpi.pod_info):
                return watch
        return None

    def _remove_unschedulable(self, entry: _Entry) -> None:
        uid = entry.qpi.pod_info.uid
        self._unschedulable.pop(uid, None)
        self._scan.pop(uid, None)
        self._watched.pop(uid, None)
        entry.watch = None
        self._gated.discard(uid)
        self._topology_waiting.pop(uid, None)
        entry.where = ""

    def _detach(self, entry: _Entry) -> None:
        """Take the pod out of whichever queue holds it."""
        uid = entry.qpi.pod_info.uid
        if entry.where == ACTIVE:
            self._active.remove(uid)
        elif entry.where == BACKOFF:
            self._backoff.remove(uid)
            self._error_backoff.remove(uid)
        elif entry.where == UNSCHEDULABLE:
            self._remove_unschedulable(entry)
        entry.where = ""

    def _align(self, t: float) -> float:
        if not self.pop_from_backoff:
            return t
        return math.floor(t / BACKOFF_ORDERING_WINDOW) * BACKOFF_ORDERING_WINDOW

    def _backoff_time(self, entry: _Entry) -> float:
        if self.max_backoff <= 0:
            return -math.inf
        count = entry.consecutive_errors if entry.consecutive_errors > 0 else entry.unschedulable_count
        if count == 0:
            return -math.inf
        if entry.backoff_expiry is None:
            entry.backoff_expiry = self._align(entry.qpi.timestamp + self.backoff_duration(count))
        return entry.backoff_expiry

    def _is_backing_off(self, entry: _Entry) -> bool:
        # Still backing off while the expiry lies in the current ordering window or later.
        return self._backoff_time(entry) >= self._align(self.clock())

    def _requeue(self, entry: _Entry, strategy: str, event: str) -> str:
        """Place a pod per strategy: "skip" -> unschedulablePods, "backoff" -> backoffQ while still backing off
        (else activeQ), "active" -> activeQ. Returns the queue it landed in."""
        if strategy == "skip":
            self._add_unschedulable(entry)
            self._count_incoming(UNSCHEDULABLE, event)
            return UNSCHEDULABLE
        if strategy == "backoff" and self._is_backing_off(entry):
            return BACKOFF if self._move_to_backoff(entry, event) else UNSCHEDULABLE
        return ACTIVE if self._move_to_active(entry, event) else UNSCHEDULABLE

    def _rejector_wants(self, plugin: str, event: ClusterEvent) -> bool:
        if self._plugin_events is None:
            return True
        key = (plugin, event)
        wants = self._rejector_interest.get(key)
        if wants is None:
            registered = self._plugin_events.get(plugin)
            wants = registered is None or any(event_matches(r, event) for r in registered)
            self._rejector_interest[key] = wants
        return wants

    def _note_unregistered(self, plugins: Iterable[str]) -> None:
        if self._plugin_events is not None:
            for p in plugins:
                if p not in self._plugin_events:
                    self._unregistered_rejectors.add(p)

    def _event_of_interest(self, event: ClusterEvent) -> bool:
        if self._plugin_events is None or self._unregistered_rejectors:
            return True
        interesting = self._interest.get(event)
        if interesting is None:
            interesting = _is_wildcard(event) or any(
                event_matches(r, event) for events in self._plugin_events.values() for r in events
            )
            self._interest[event] = interesting
        return interesting

    def _worth_requeuing(self, entry: _Entry, event: ClusterEvent) -> str:
        """upstream isPodWorthRequeuing without hint functions: "skip", "backoff" or "active"."""
        qpi = entry.qpi
        if not (qpi.unschedulable_plugins or qpi.pending_plugins) or _is_wildcard(event):
            return "backoff"
        strategy = "skip"
        for plugin in qpi.pending_plugins:
            if self._rejector_wants(plugin, event):
                return "active"
        for plugin in qpi.unschedulable_plugins:
            if self._rejector_wants(plugin, event):
                strategy = "backoff"
                break
        return strategy

    def _strategy_for_returning_pod(self, entry: _Entry, cycle: int) -> str:
        qpi = entry.qpi
        if not (qpi.unschedulable_plugins or qpi.pending_plugins) or entry.force_requeue:
            return "backoff"
        uid = qpi.pod_info.uid
        strategy = "skip"
        for ev_cycle, event, target in self._inflight_events:
            if ev_cycle < cycle or (target is not None and target != uid):
                continue
            found = self._worth_requeuing(entry, event)
            if found == "active":
                return found
            if found == "backoff":
                strategy = found
        return strategy

    def _move_pods(self, entries: Iterable[_Entry], event: ClusterEvent, label: str) -> None:
        if not self._event_of_interest(event):
            return
        woke = False
        for entry in list(entries):
            qpi = entry.qpi
            if entry.where != UNSCHEDULABLE:
                continue
            if qpi.gated:
                gating = (
                    self._plugin_events.get(entry.gating_plugin) if self._plugin_events is not None else None
                )
                if gating is not None and not any(event_matches(r, event) for r in gating):
                    continue
            strategy = self._worth_requeuing(entry, event)
            if strategy == "skip":
                continue
            if qpi.gated:
                # PreEnqueue again, in place: a pod it still gates stays where it is (as upstream's move to
                # activeQ would put it straight back). Each victim deletion of a preemption wakes every pod
                # gated by DefaultPreemption; most still wait for their own victims.
                self._run_pre_enqueue(entry)
                if qpi.gated:
                    watch = entry.watch
                    if watch is not None and (
                        watch.plugin != entry.gating_plugin or not watch.tracks(qpi.pod_info)
                    ):
                        # Another plugin gates it now: every event looks at it again, from its place.
                        uid = qpi.pod_info.uid
                        del self._watched[uid]
                        entry.watch = None
                        self._scan[uid] = entry
                        self._scan_unordered = True
                    continue
            self._remove_unschedulable(entry)
            queue = self._requeue(entry, strategy, label)
            woke |= queue == ACTIVE or (queue == BACKOFF and self.pop_from_backoff)
        self._record_inflight_event(event, None)
        if woke:
            self._wake()

    def _record_inflight_event(self, event: ClusterEvent, target: str | None) -> None:
        if not self._inflight:
            return
        item = (self.scheduling_cycle, event, target)
        # Bursts of one event (a bind per pod) within one cycle need only one entry.
        if not self._inflight_events or self._inflight_events[-1] != item:
            self._inflight_events.append(item)

    def _prune_inflight_events(self) -> None:
        if not self._inflight:
            self._inflight_events.clear()
            return
        oldest = next(iter(self._inflight.values()))
        events = self._inflight_events
        drop = 0
        while drop < len(events) and events[drop][0] < oldest:
            drop += 1
        if drop:
            del events[:drop]

    def _cross_topology_candidates(self, pod: PodInfo) -> list[_Entry]:
        """Unschedulable pods a newly assigned ``pod`` may help, as the plugins' hints tell (same-namespace
        PodTopologySpread rejections, pods with a required affinity term ``pod`` matches)."""
        if not self._topology_waiting:
            return []
        memo: list[Mapping[str, str] | None] = []

        def ns_labels() -> Mapping[str, str] | None:
            if not memo:
                lookup = self.namespace_labels
                memo.append((lookup(pod.namespace) or {}) if lookup is not None else None)
            return memo[0]

        hints = self.assigned_pod_hints
        return [
            entry
            for entry in self._topology_waiting.values()
            if any(hint.assigned_pod_may_help(entry.qpi, pod, ns_labels) for hint in hints)
        ]


_IGNORED_META = ("resourceVersion", "generation", "managedFields", "finalizers")
_KEPT_STATUS = ("resourceClaimStatuses", "extendedResourceClaimStatus")


def _scheduling_view(pod: Mapping[str, Any]) -> dict[str, Any]:
    view = dict(pod)
    meta = dict(view.get("metadata") or {})
    for key in _IGNORED_META:
        meta.pop(key, None)
    view["metadata"] = meta
    status = view.get("status") or {}
    view["status"] = {k: status[k] for k in _KEPT_STATUS if k in status}
    return view


def _scheduling_relevant_change(old: PodInfo | None, new: PodInfo) -> bool:
    """upstream isPodUpdated: anything changed besides status, resourceVersion, generation, managedFields and
    finalizers."""
    if old is None:
        return True
    return _scheduling_view(old.pod) != _scheduling_view(new.pod)
