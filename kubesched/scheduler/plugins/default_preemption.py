"""DefaultPreemption: when a pod fits nowhere, find a node where evicting lower-priority pods makes room
(PostFilter), and keep the pod out of the queue while its victims are being deleted (PreEnqueue).

Upstream: ``framework/plugins/defaultpreemption/default_preemption.go`` with ``framework/preemption`` (the
evaluator and the asynchronous executor of KEP-4832, on by default since 1.33). The steps of one PostFilter:

1. Eligibility: ``preemptionPolicy: Never`` never preempts; a pod already nominated to a node where
   lower-priority pods are terminating because of preemption waits for them instead of preempting again.
2. Candidates: nodes whose rejection preemption may resolve (code UNSCHEDULABLE in the cycle's diagnosis).
   From a random offset, at most ``max(minCandidateNodesPercentage% of them, minCandidateNodesAbsolute)`` are
   dry-run, stopping early once enough are found and one of them violates no PodDisruptionBudget.
3. Dry run on a node: take every lower-priority pod off it (PreFilter extensions keep InterPodAffinity and
   PodTopologySpread state in step), check the pod fits, then put the victims back one at a time, most
   important first (PDB-violating ones before the others), keeping back each one the pod still fits with.
4. The best candidate by upstream's order: fewest PDB violations, lowest highest-victim priority, smallest sum
   of priorities, fewest victims, latest start of the highest-priority victims, then the first found.
5. Act, off the scheduling cycle: set ``status.nominatedNodeName`` of the pod, clear the nomination of
   lower-priority pods nominated to that node, and for each victim add the ``DisruptionTarget`` condition,
   DELETE it and record a ``Preempted`` event. Until the deletions are issued the pod is gated by PreEnqueue.

The dry run edits the live ``NodeTable`` (without notifying listeners) and always restores it, the order of the
node's pods included, before returning; it never awaits, so no other code sees the intermediate state.

Steps 2 and 3 run in bulk where only resources can change the answer (``preemption_victims.py``: the Filter
plugins once over all nodes with their lower-priority pods' requests given back, the reprieve vectorised across
nodes, step 4 over precomputed numbers); nodes where ports, pod affinity, topology spread or nominated pods could
matter, and pods with unknown Filter plugins or PreFilter extensions, get the per-node dry run above. Both give
the same answers; ``fast_dry_run = False`` keeps the per-node one everywhere (the reference of the tests).

Offline (``kubesched simulate``: no API client) the victims leave the cache at once instead of being deleted
through the API, so later pods of the same simulation see the room. ``Handle.preemption_evict``, when set, is
called as ``evict(victim, preemptor, node_name)`` in place of that removal.

Other ``Handle`` fields read: ``pdbs`` (a lister of PodDisruptionBudget objects; None means no PDBs),
``activate`` (``activate(uids)``: requeue pods whose asynchronous preemption failed), ``metrics``
(``observe_preemption(victims)``) and ``seed`` (for the offset).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import StrictInt

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.client.rest import ApiError
from kubesched.scheduler.config.args import ArgsModel
from kubesched.scheduler.config.errors import FieldError, invalid
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import ClusterEvent, Code, CycleState, NodeToStatus, Status
from kubesched.scheduler.framework.runtime import fit_error_message
from kubesched.scheduler.plugins.dynamic_resources import DynamicResources
from kubesched.scheduler.plugins.node_affinity import LabelSelector, SelectorError
from kubesched.scheduler.plugins.preemption_victims import (
    FastDryRun,
    Found,
    VictimStats,
    nominated_rejections_in_bulk,
    pick_index,
)
from kubesched.scheduler.plugins.scheduling_gates import SchedulingGates
from kubesched.scheduler.podinfo import parse_timestamp
from kubesched.scheduler.queue import GateWatch

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.podinfo import PodInfo

log = logging.getLogger(__name__)

NAME = "DefaultPreemption"

PREEMPT_NEVER = "Never"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"
WAITING_FOR_PREEMPTION = "waiting for the preemption for this pod to be finished"
MESSAGE_PREFIX = "preemption: "

DISRUPTION_TARGET = "DisruptionTarget"
REASON_PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100


class DefaultPreemptionArgs(ArgsModel):
    min_candidate_nodes_percentage: StrictInt = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE
    min_candidate_nodes_absolute: StrictInt = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        pct, absolute = self.min_candidate_nodes_percentage, self.min_candidate_nodes_absolute
        pct_path, abs_path = f"{path}.minCandidateNodesPercentage", f"{path}.minCandidateNodesAbsolute"
        if not 0 <= pct <= 100:
            errs.append(invalid(pct_path, pct, "not in valid range [0, 100]"))
        if absolute < 0:
            errs.append(invalid(abs_path, absolute, "not in valid range [0, inf)"))
        if pct == 0 and absolute == 0:
            errs.append(
                invalid(pct_path, pct, "cannot be zero at the same time as minCandidateNodesAbsolute")
            )
            errs.append(
                invalid(abs_path, absolute, "cannot be zero at the same time as minCandidateNodesPercentage")
            )
        return errs


# Added to every priority before summing, so that victims of negative priority still count as a cost.
_PRIORITY_OFFSET = 2**31


# --- PodDisruptionBudgets ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PDB:
    """What preemption needs from a PodDisruptionBudget (policy/v1)."""

    namespace: str
    selector: LabelSelector | None  # None selects nothing (absent, empty or invalid selector)
    disruptions_allowed: int
    disrupted_pods: frozenset[str]  # names the API server has already processed an eviction for

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> PDB:
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        status = obj.get("status") or {}
        selector: LabelSelector | None = None
        raw = spec.get("selector")
        if raw is not None:
            try:
                parsed = LabelSelector.parse(raw)
            except (SelectorError, ValueError):
                parsed = None  # an invalid selector matches no pod
            # policy/v1: an empty selector matches nothing (unlike LabelSelectorAsSelector's "everything").
            selector = parsed if parsed is not None and not parsed.empty else None
        return cls(
            namespace=meta.get("namespace") or "",
            selector=selector,
            disruptions_allowed=int(status.get("disruptionsAllowed") or 0),
            disrupted_pods=frozenset(status.get("disruptedPods") or ()),
        )

    def covers(self, pod: PodInfo) -> bool:
        return (
            self.selector is not None
            and self.namespace == pod.namespace
            and self.selector.matches(pod.labels)
        )


def filter_pods_with_pdb_violation(
    pods: Sequence[PodInfo], pdbs: Sequence[PDB]
) -> tuple[list[PodInfo], list[PodInfo]]:
    """Split ``pods`` (order kept) into those whose eviction would violate a PDB and the others.

    Each matching PDB's budget is spent in order; a pod the API server already counts as disrupted by a PDB
    spends nothing of it.
    """
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[PodInfo] = []
    other: list[PodInfo] = []
    for pod in pods:
        violated = False
        if pod.labels:  # a pod without labels matches no PDB
            for i, pdb in enumerate(pdbs):
                if not pdb.covers(pod) or pod.name in pdb.disrupted_pods:
                    continue
                allowed[i] -= 1
                if allowed[i] < 0:
                    violated = True
        (violating if violated else other).append(pod)
    return violating, other


# --- victims and candidates ----------------------------------------------------------------------------------


def pod_start_time(pod: PodInfo, now: float) -> float:
    """``status.startTime``; a pod that has not started yet counts as starting ``now`` (as upstream)."""
    started = parse_timestamp((pod.pod.get("status") or {}).get("startTime"))
    return now if started is None else started


def importance_key(pod: PodInfo, now: float) -> tuple[int, float]:
    """Sorting by this puts the most important pod first: higher priority, then the one running longer."""
    return (-pod.priority, pod_start_time(pod, now))


def terminating_by_preemption(pod: PodInfo) -> bool:
    """Being deleted, and the scheduler's preemption is why (``DisruptionTarget`` / ``PreemptionByScheduler``)."""
    if pod.deletion_ts is None:
        return False
    for cond in (pod.pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == DISRUPTION_TARGET:
            return cond.get("status") == "True" and cond.get("reason") == REASON_PREEMPTION_BY_SCHEDULER
    return False


@dataclass(slots=True)
class Candidate:
    """A node the pod fits on once ``victims`` (most important first) are gone."""

    node: str
    victims: list[PodInfo]
    num_pdb_violations: int = 0
    # What pick_one_node_for_preemption compares, when the fast dry run computed it already.
    stats: VictimStats | None = field(default=None, compare=False, repr=False)


def pick_one_node_for_preemption(
    candidates: Sequence[Candidate], now: float | None = None
) -> Candidate | None:
    """The best candidate, each criterion only breaking the ties of the ones before it:
    fewest PDB violations; lowest priority of the most important victim; smallest sum of victim priorities;
    fewest victims; latest start time among the highest-priority victims; the first candidate."""
    if not candidates:
        return None
    t = time.time() if now is None else now

    def latest_start(c: Candidate) -> float:
        top = max(v.priority for v in c.victims)
        return min(pod_start_time(v, t) for v in c.victims if v.priority == top)

    criteria: list[Callable[[Candidate], float]] = [
        lambda c: -c.num_pdb_violations,
        lambda c: -max(v.priority for v in c.victims),
        lambda c: -sum(v.priority + _PRIORITY_OFFSET for v in c.victims),
        lambda c: -len(c.victims),
        latest_start,
    ]
    remaining = list(candidates)
    for score in criteria:
        scores = [score(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0]


class _ExtensionFailed(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


# --- the plugin ----------------------------------------------------------------------------------------------


class DefaultPreemption:
    name = NAME

    def __init__(self, args: DefaultPreemptionArgs, handle: Handle | None = None) -> None:
        self.handle = handle if handle is not None else Handle()
        self.min_candidate_nodes_percentage = args.min_candidate_nodes_percentage
        self.min_candidate_nodes_absolute = args.min_candidate_nodes_absolute
        self.rng = random.Random(self.handle.seed)
        # Customisation points, as upstream's IsEligiblePod / MoreImportantPod: which lower-priority pods may be
        # preempted (``(nodes, slot, victim, preemptor) -> bool``), and the sort key putting the most important
        # pod first (``(pod, now) -> key``), which decides the order victims are reprieved in.
        self.is_eligible_pod: Callable[[NodeTable, int, PodInfo, PodInfo], bool] = _always
        self.importance: Callable[[PodInfo, float], Any] = importance_key
        # The dry run evaluates resource-only nodes in bulk (``preemption_victims``); False runs upstream's
        # per-node algorithm everywhere (the reference the fast path is tested against).
        self.fast_dry_run = True
        self._fast = FastDryRun()
        # Preemptors whose victims are being deleted in the background, and the victim each deletes last.
        self._preempting: set[str] = set()
        self._last_victim: dict[str, str] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        # Tells the queue which gated pods' PreEnqueue answer may have changed (see GateWatch in queue.py):
        # created with the first asynchronous preemption, when the nominator can take it.
        self._watch: GateWatch | None = None
        self._known_gates: bool | None = None

    # --- queueing ---------------------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEvent]:
        # A pod gated here may pass once a victim is gone; the plugins that rejected it decide the requeue.
        return [ClusterEvent("AssignedPod", "Delete")]

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if self.is_pod_running_preemption(pod.uid):
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [WAITING_FOR_PREEMPTION])
        return Status.success()

    def is_pod_running_preemption(self, uid: str) -> bool:
        """True while the pod's victims are still being deleted.

        Once the deletion of the last victim is under way, its disappearance (or its deletionTimestamp) already
        counts as done: the informer may report it before our DELETE call returns, and the pod must not be
        gated by then, or the event that would requeue it is lost.
        """
        if uid not in self._preempting:
            return False
        last = self._last_victim.get(uid)
        if last is None:
            return True
        victim = self._table().pod(last) if self.handle.cache is not None else None
        return victim is not None and victim.deletion_ts is None

    def _gate_watch(self) -> GateWatch | None:
        if self._watch is None:
            register = getattr(self.handle.nominator, "watch_gates", None)
            if not callable(register):
                return None
            self._watch = GateWatch(NAME, self._tracks)
            register(self._watch)
        return self._watch

    def _tracks(self, pod: PodInfo) -> bool:
        """Whether this plugin alone can change the PreEnqueue answer for ``pod``: the pod is of this profile, whose
        other PreEnqueue plugins are in-tree ones that answer from the pod's spec alone for a pod without
        scheduling gates or resource claims (both fixed once the pod is created, gates only ever removed)."""
        fw = self.handle.framework
        if fw is None or pod.scheduler_name != fw.scheduler_name:
            return False
        if self._known_gates is None:
            known = {
                NAME: DefaultPreemption,
                "SchedulingGates": SchedulingGates,
                "DynamicResources": DynamicResources,
            }
            self._known_gates = all(
                type(fw.plugin(name)) is known.get(name) for name in fw.points.get("PreEnqueue", ())
            )
        if not self._known_gates:
            return False
        spec = pod.pod.get("spec") or {}
        return not spec.get("resourceClaims") and not spec.get("schedulingGates")

    def _gate_changed(self, uid: str, *, unsettled: bool | None = None) -> None:
        """The answer of ``pre_enqueue`` for ``uid`` changed (``unsettled``: from now on it may change at any time,
        as long as the last victim's deletion is under way; False: no longer)."""
        watch = self._gate_watch()
        if watch is None:
            return
        if unsettled:
            watch.unsettled.add(uid)
        else:
            if unsettled is not None:
                watch.unsettled.discard(uid)
            watch.changed.add(uid)

    @property
    def in_flight(self) -> int:
        """Number of background API tasks not finished yet."""
        return len(self._tasks)

    async def wait_for_preemptions(self) -> None:
        """Wait until every background API call started so far has finished (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # --- PostFilter -------------------------------------------------------------------------------------------

    async def post_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        fw = self.handle.framework
        if fw is not None and self.fast_dry_run and fw.bulk_nominated_check is None:
            # From now on pods are nominated: their check over many nodes is one Filter run where it can be.
            fw.bulk_nominated_check = nominated_rejections_in_bulk
        node, status = self.preempt(state, pod, nodes, statuses)
        msg = status.message()
        if msg:
            status = Status(status.code, [MESSAGE_PREFIX + msg], status.plugin)
        return node, status

    def preempt(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> tuple[str | None, Status]:
        """Upstream ``Evaluator.Preempt`` (without the ``preemption:`` prefix of the message).

        Returns (nominated node, SUCCESS); ("", UNSCHEDULABLE with a FitError message) when preemption cannot
        help (the pod's nomination is then cleared); (None, UNSCHEDULABLE/ERROR) otherwise.
        """
        victims_preempted = 0
        try:
            fw = self.handle.framework
            if fw is None:
                return None, Status.error("DefaultPreemption needs the framework on its handle")
            nominated = pod.nominated_node_name or self._in_memory_nomination(pod)
            nominated_status = statuses.status_of(nominated) if nominated else None
            eligible, why = self.pod_eligible_to_preempt_others(pod, nodes, nominated, nominated_status)
            if not eligible:
                return None, Status(Code.UNSCHEDULABLE, [why])
            num_all = nodes.num_nodes
            if num_all == 0:
                return None, Status.error("no nodes available")

            found = self._find(fw, state, pod, nodes, statuses)
            if found.errors and not found.count:
                return None, Status.error(_aggregate(found.errors))
            if not found.count:
                self._clear_nomination(pod, nominated)
                node_statuses = found.node_statuses()
                diagnosis = NodeToStatus()
                for status in node_statuses.values():
                    for reason in status.reasons:
                        diagnosis.counts[reason] = diagnosis.counts.get(reason, 0) + 1
                absent = num_all - len(node_statuses)
                if absent > 0:
                    diagnosis.counts[NOT_HELPFUL] = diagnosis.counts.get(NOT_HELPFUL, 0) + absent
                return "", Status(Code.UNSCHEDULABLE, [fit_error_message(num_all, diagnosis)])

            best = found.best()
            if best is None or not best.node:
                return None, Status(Code.UNSCHEDULABLE, ["no candidate node for preemption"])
            victims_preempted = self.prepare_candidate(best, pod, nodes)
            return best.node, Status.success()
        finally:
            metrics = self.handle.metrics
            if metrics is not None:
                metrics.observe_preemption(victims_preempted)

    def pod_eligible_to_preempt_others(
        self, pod: PodInfo, nodes: NodeTable, nominated: str | None, nominated_status: Status | None
    ) -> tuple[bool, str]:
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_NEVER
        if nominated:
            # Unresolvable there now (or not evaluated at all, which counts as unresolvable): try again elsewhere.
            if nominated_status is None or nominated_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            slot = nodes.index.get(nominated)
            if slot is not None:
                for other in nodes.pods_on(slot).values():
                    if self._may_preempt(nodes, slot, other, pod) and terminating_by_preemption(other):
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def _may_preempt(self, nodes: NodeTable, slot: int, victim: PodInfo, preemptor: PodInfo) -> bool:
        return victim.priority < preemptor.priority and self.is_eligible_pod(nodes, slot, victim, preemptor)

    def calculate_num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.min_candidate_nodes_percentage // 100
        n = max(n, self.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def get_offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        offset = self.rng.randrange(num_nodes) if num_nodes > 0 else 0
        return offset, self.calculate_num_candidates(num_nodes)

    def find_candidates(
        self, fw: Framework, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """(candidates, status of each dry-run node that is not one, error messages)."""
        found = self._find(fw, state, pod, nodes, statuses)
        return found.candidates(), found.node_statuses(), found.errors

    def _find(
        self, fw: Framework, state: CycleState, pod: PodInfo, nodes: NodeTable, statuses: NodeToStatus
    ) -> Found:
        # Slots in ascending order whose node preemption may help (from the diagnosis's groups, not per node).
        potential = statuses.preemption_slots(nodes)
        if not len(potential):
            return Found.of([], {}, [], self.select_candidate)
        pdbs = self.list_pdbs()
        offset, num = self.get_offset_and_num_candidates(len(potential))
        return self._dry_run(fw, state, pod, nodes, potential, pdbs, offset, num)

    def dry_run_preemption(
        self,
        fw: Framework,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        potential: Sequence[int] | np.ndarray,
        pdbs: Sequence[PDB],
        offset: int,
        num_candidates: int,
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """Dry-run the ``potential`` slots from ``offset`` (wrapping), until ``num_candidates`` are found with at
        least one that violates no PDB. Candidates without PDB violations come first."""
        found = self._dry_run(fw, state, pod, nodes, potential, pdbs, offset, num_candidates)
        return found.candidates(), found.node_statuses(), found.errors

    def _dry_run(
        self,
        fw: Framework,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        potential: Sequence[int] | np.ndarray,
        pdbs: Sequence[PDB],
        offset: int,
        num_candidates: int,
    ) -> Found:
        if self.fast_dry_run and self.is_eligible_pod is _always and self.importance is importance_key:
            fast = self._fast.run(
                self, fw, state, pod, nodes, potential, pdbs, offset, num_candidates, time.time()
            )
            if fast is not None:
                return fast
        clean: list[Candidate] = []
        violating: list[Candidate] = []
        node_statuses: dict[str, Status] = {}
        errors: list[str] = []
        n = len(potential)
        for i in range(n):
            slot = int(potential[(offset + i) % n])
            name = nodes.names[slot] or ""
            victims, violations, status = self.select_victims_on_node(
                fw, state.clone(), pod, nodes, slot, pdbs
            )
            if status.ok and victims:
                bucket = clean if violations == 0 else violating
                if len(bucket) < num_candidates:  # upstream's lists hold at most that many each
                    bucket.append(Candidate(name, victims, violations))
                if clean and len(clean) + len(violating) >= num_candidates:
                    break
                continue
            if status.ok:
                status = Status.error(f'expected at least one victim pod on node "{name}"')
            if status.code == Code.ERROR:
                errors.append(status.message())
            node_statuses[name] = status
        return Found.of(clean + violating, node_statuses, errors, self.select_candidate)

    def select_victims_on_node(
        self,
        fw: Framework,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        slot: int,
        pdbs: Sequence[PDB],
    ) -> tuple[list[PodInfo], int, Status]:
        """The fewest pods to evict from ``slot`` so that ``pod`` fits: (victims, most important first;
        number of them whose eviction violates a PDB; status). ``state`` is changed: pass a clone."""
        node_name = nodes.names[slot] or ""
        potential = [p for p in nodes.pods_on(slot).values() if self._may_preempt(nodes, slot, p, pod)]
        off_node: dict[str, PodInfo] = {}  # pods taken off the table, to put back whatever happens
        order = list(nodes.pods_on(slot)) if potential else []

        def remove(p: PodInfo) -> None:
            nodes.remove_pod(p.uid, notify=False)
            off_node[p.uid] = p
            s = fw.run_pre_filter_extension_remove_pod(state, pod, p, slot)
            if not s.ok:
                raise _ExtensionFailed(s)

        def add(p: PodInfo) -> None:
            nodes.add_pod(p, node_name, notify=False)
            del off_node[p.uid]
            s = fw.run_pre_filter_extension_add_pod(state, pod, p, slot)
            if not s.ok:
                raise _ExtensionFailed(s)

        try:
            for p in potential:
                remove(p)
            if not potential:
                return [], 0, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS])
            # If the pod does not fit even with all of them gone, this node cannot help.
            status = fw.filter_with_nominated_pods(state, pod, slot)
            if not status.ok:
                return [], 0, status
            now = time.time()
            potential.sort(key=lambda p: self.importance(p, now))
            violating, other = filter_pods_with_pdb_violation(potential, pdbs)
            victims: list[PodInfo] = []

            def reprieve(p: PodInfo) -> bool:
                add(p)
                fits = fw.filter_with_nominated_pods(state, pod, slot).ok
                if not fits:
                    remove(p)
                    victims.append(p)
                return fits

            num_violating = 0
            for p in violating:
                if not reprieve(p):
                    num_violating += 1
            for p in other:
                reprieve(p)
            if violating and other:
                victims.sort(key=lambda p: self.importance(p, now))
            return victims, num_violating, Status.success()
        except _ExtensionFailed as exc:
            return [], 0, exc.status
        finally:
            for p in off_node.values():
                nodes.add_pod(p, node_name, notify=False)
            if order:
                nodes.restore_pod_order(slot, order)

    def select_candidate(self, candidates: Sequence[Candidate]) -> Candidate | None:
        if len(candidates) <= 1:
            return candidates[0] if candidates else None
        stats = [c.stats for c in candidates]
        if all(s is not None for s in stats):
            return candidates[pick_index(stats, time.time())]  # type: ignore[arg-type]
        return pick_one_node_for_preemption(candidates)

    # --- acting on the choice ---------------------------------------------------------------------------------

    def prepare_candidate(self, best: Candidate, pod: PodInfo, nodes: NodeTable) -> int:
        """Nominate, clear lower-priority nominations, evict the victims. Returns the number of victims
        preempted (0 when all were already terminating)."""
        client = self.handle.client
        if client is None:
            for victim in best.victims:
                self._evict_offline(victim, pod, best.node, nodes)
            for other in self._lower_priority_nominated(pod, best.node):
                self._forget_nomination(other)
            return len(best.victims)
        if pod.nominated_node_name != best.node:
            self._spawn(self._patch_nominated_node(pod, best.node), f"nominate {pod.key}")
        to_delete = [v for v in best.victims if v.deletion_ts is None]  # others are going already
        if not to_delete:
            return 0
        self._preempting.add(pod.uid)
        self._gate_changed(pod.uid)
        self._spawn(self._preempt_async(pod, best.node, to_delete), f"preemption by {pod.key}")
        return len(best.victims)

    async def _preempt_async(self, pod: PodInfo, node: str, victims: list[PodInfo]) -> None:
        failed = False
        try:
            for other in self._lower_priority_nominated(pod, node):
                # They may not fit there any more; without a nomination they look for room elsewhere sooner.
                self._forget_nomination(other)
                if other.nominated_node_name:
                    try:
                        await self._patch_status(other, {"nominatedNodeName": None})
                    except Exception as exc:
                        failed = True
                        log.warning("clearing the nominated node of %s failed: %s", other.key, exc)
            preempt_last = True
            if len(victims) > 1:
                # All but the last in parallel; the last one marks the end (see is_pod_running_preemption).
                limit = asyncio.Semaphore(max(1, self.handle.parallelism))

                async def bounded(victim: PodInfo) -> None:
                    async with limit:
                        await self._preempt_victim(pod, victim, node)

                results = await asyncio.gather(*(bounded(v) for v in victims[:-1]), return_exceptions=True)
                errors = [r for r in results if isinstance(r, BaseException)]
                if errors:
                    failed = True
                    preempt_last = False
                    log.warning("preemption by %s on %s failed: %s", pod.key, node, errors[0])
            if preempt_last:
                last = victims[-1]
                self._last_victim[pod.uid] = last.uid
                self._gate_changed(pod.uid, unsettled=True)
                try:
                    await self._preempt_victim(pod, last, node)
                except Exception as exc:
                    failed = True
                    log.warning("preemption of the last victim %s by %s failed: %s", last.key, pod.key, exc)
        finally:
            self._preempting.discard(pod.uid)
            self._last_victim.pop(pod.uid, None)
            self._gate_changed(pod.uid, unsettled=False)
            if failed:
                # The pod may otherwise sit among the unschedulable ones with no event left to move it.
                activate = self.handle.activate
                if activate is not None:
                    activate([pod.uid])

    async def _preempt_victim(self, pod: PodInfo, victim: PodInfo, node: str) -> None:
        """Mark the victim ``DisruptionTarget``, delete it and record ``Preempted``. A victim already gone is
        fine."""
        condition = {
            "type": DISRUPTION_TARGET,
            "status": "True",
            "reason": REASON_PREEMPTION_BY_SCHEDULER,
            "message": f"{pod.scheduler_name}: preempting to accommodate a higher priority pod",
        }
        if not _has_condition(victim, condition):
            condition["lastTransitionTime"] = now_rfc3339()
            generation = (victim.pod.get("metadata") or {}).get("generation")
            if generation:
                condition["observedGeneration"] = generation
            try:
                await self._patch_status(victim, {"conditions": [condition]})
            except ApiError as exc:
                if exc.is_not_found():
                    return
                raise
        try:
            await self.handle.client.delete(
                "v1", "pods", victim.name, namespace=victim.namespace, preconditions={"uid": victim.uid}
            )
        except ApiError as exc:
            # 404: gone already; 409 on the uid precondition: a namesake replaced it, ours is gone too.
            if exc.is_not_found() or exc.is_conflict():
                return
            raise
        self._record_preempted(pod, victim, node)

    async def _patch_nominated_node(self, pod: PodInfo, node: str) -> None:
        try:
            await self._patch_status(pod, {"nominatedNodeName": node})
        except Exception as exc:
            log.warning("setting the nominated node of %s to %s failed: %s", pod.key, node, exc)

    async def _patch_status(self, pod: PodInfo, status: dict[str, Any]) -> None:
        await self.handle.client.patch(
            "v1",
            "pods",
            pod.name,
            {"status": status},
            namespace=pod.namespace,
            subresource="status",
            patch_type="strategic",
        )

    def _evict_offline(self, victim: PodInfo, pod: PodInfo, node: str, nodes: NodeTable) -> None:
        evict = self.handle.preemption_evict
        if evict is not None:
            evict(victim, pod, node)
        elif self.handle.cache is not None:
            self.handle.cache.on_pod_delete(victim.pod)
        else:
            nodes.remove_pod(victim.uid)
        self._record_preempted(pod, victim, node)

    def _record_preempted(self, pod: PodInfo, victim: PodInfo, node: str) -> None:
        recorder = self.handle.recorder
        if recorder is None:
            return
        note = f"Preempted by pod {pod.uid} on node {node}"
        try:
            recorder.event(
                _pod_reference(victim), "Normal", "Preempted", "Preempting", note, _pod_reference(pod)
            )
        except Exception:
            log.exception("recording the preemption of %s failed", victim.key)

    # --- nominations ------------------------------------------------------------------------------------------

    def _in_memory_nomination(self, pod: PodInfo) -> str:
        lookup = getattr(self.handle.nominator, "nominated_node", None)
        return (lookup(pod.uid) or "") if callable(lookup) else ""

    def _lower_priority_nominated(self, pod: PodInfo, node: str) -> list[PodInfo]:
        nominator = self.handle.nominator
        if nominator is None:
            return []
        return [p for p in nominator.nominated_pods_for_node(node) if p.priority < pod.priority]

    def _forget_nomination(self, pod: PodInfo) -> None:
        delete = getattr(self.handle.nominator, "delete_nominated", None)
        if callable(delete):
            delete(pod.uid)

    def _clear_nomination(self, pod: PodInfo, nominated: str | None) -> None:
        """Preemption cannot help: the pod's nomination (in memory and in its status) is void."""
        if not nominated:
            return
        self._forget_nomination(pod)
        if self.handle.client is not None and pod.nominated_node_name:
            self._spawn(self._clear_status_nomination(pod), f"clear nomination of {pod.key}")

    async def _clear_status_nomination(self, pod: PodInfo) -> None:
        try:
            await self._patch_status(pod, {"nominatedNodeName": None})
        except Exception as exc:
            log.warning("clearing the nominated node of %s failed: %s", pod.key, exc)

    # --- helpers ----------------------------------------------------------------------------------------------

    def list_pdbs(self) -> list[PDB]:
        """PDBs from ``Handle.pdbs``; none when the scheduler gives no PDB lister."""
        lister = self.handle.pdbs
        if lister is None:
            return []
        return [PDB.from_object(o) for o in lister.pdbs()]

    def _table(self) -> NodeTable:
        return self.handle.nodes

    def _spawn(self, coro: Any, what: str) -> None:
        task = asyncio.get_running_loop().create_task(coro, name=what)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _always(nodes: NodeTable, slot: int, victim: PodInfo, preemptor: PodInfo) -> bool:
    return True


def _aggregate(errors: Sequence[str]) -> str:
    """As Go's ``utilerrors.NewAggregate(...).Error()``: one message alone, several in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def _has_condition(pod: PodInfo, want: Mapping[str, Any]) -> bool:
    for cond in (pod.pod.get("status") or {}).get("conditions") or ():
        if cond.get("type") == want["type"]:
            return all(cond.get(k) == want[k] for k in ("status", "reason", "message"))
    return False


def _pod_reference(pod: PodInfo) -> dict[str, str]:
    ref = {
        "kind": "Pod",
        "apiVersion": "v1",
        "namespace": pod.namespace,
        "name": pod.name,
        "uid": pod.uid,
        "resourceVersion": pod.resource_version,
    }
    return {k: v for k, v in ref.items() if v}


PLUGIN = PluginDefinition(NAME, DefaultPreemption, DefaultPreemptionArgs)


__all__ = [
    "NAME",
    "NOT_ELIGIBLE_NEVER",
    "NOT_ELIGIBLE_TERMINATING",
    "NOT_HELPFUL",
    "NO_VICTIMS",
    "PDB",
    "PLUGIN",
    "WAITING_FOR_PREEMPTION",
    "Candidate",
    "DefaultPreemption",
    "DefaultPreemptionArgs",
    "filter_pods_with_pdb_violation",
    "importance_key",
    "pick_one_node_for_preemption",
    "pod_start_time",
    "terminating_by_preemption",
]
