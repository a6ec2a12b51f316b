"""Preemption's dry run over many nodes at once, when only resources can change the answer.

Upstream's ``SelectVictimsOnNode`` runs, per candidate node: take every lower-priority pod off, run the Filter
plugins, then put the pods back one at a time (most important first, PDB-violating ones before the others),
keeping each one the pod still fits with. With up to 500 nodes per preemption, one victim at a time, that is
thousands of Filter calls per pod.

Most of those calls cannot change their answer. This module decides, for one pod and one cycle, which Filter
plugins may see a difference between "victims present" and "victims gone" on a node:

- NodeResourcesFit sees the node's pods only through the free resources (and the pod count): the dry run for it
  is arithmetic, done here for all nodes at once (``free + Σ lower-priority requests``, then a cumulative check
  as victims are reprieved in upstream's order).
- NodeUnschedulable, NodeName, TaintToleration, NodeAffinity and DynamicResources read the node and the pod only.
- NodePorts reads the ports of the node's pods: it matters only if the preemptor asks for host ports and one of
  the node's potential victims holds some.
- InterPodAffinity (when its PreFilter did not skip) matters if the preemptor has pod (anti-)affinity, or a
  potential victim has pod anti-affinity. PodTopologySpread (when not skipped) counts only pods of the
  preemptor's namespace: it matters where a potential victim lives in that namespace.
- Any other Filter plugin, or PreFilter extension (AddPod/RemovePod) that did not skip, may read anything: then
  the whole dry run is the exact per-node one.

Nodes where the answer may depend on more than resources (those above, and nodes with pods nominated there that
would not be plain resources) fall back to the exact per-node dry run (``DefaultPreemption.select_victims_on_node``);
the rest are evaluated here. What is computed is the same as the exact run: same candidates in the same order,
same victims in the same order, same PDB violation counts, same statuses of the nodes that are not candidates,
same errors (``tests/scheduler/test_preemption_fast_path.py`` checks this on random clusters).

Two caches, both ``TableListener``s of the table (only real pod changes notify; what-ifs restore what they
touch), keep the per-cycle Python small: per priority, the summed requests and the number of lower-priority pods
of every node; per priority and node, its lower-priority pods in upstream's importance order (``NodeVictims``),
also laid out as padded arrays over all slots (``_Padded``: requests, priorities, start times by rank), valid
until the node's pods change or a start time falls between the time it was sorted at and now.

Per preemption the walk is then arithmetic: the Filter plugins run over stretches of the walk (from the random
offset, 1.25 times the candidates wanted, doubling) only as far as the walk gets; the reprieve tries victim k of
every node of a batch at once (a loop over ranks, not over nodes and victims); which nodes become candidates and
where the walk stops are cumulative sums; the best candidate is chosen on arrays (``_pick``), and only its
victim list is built (``Found``: the full candidate list and the statuses are built when asked, as
``dry_run_preemption`` does).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.interface import Code, CycleState, Status
from kubesched.scheduler.framework.runtime import FilterError
from kubesched.scheduler.plugins.dynamic_resources import DynamicResources
from kubesched.scheduler.plugins.inter_pod_affinity import InterPodAffinity
from kubesched.scheduler.plugins.node_affinity import NodeAffinity
from kubesched.scheduler.plugins.node_name import NodeName
from kubesched.scheduler.plugins.node_ports import NodePorts
from kubesched.scheduler.plugins.node_resources_fit import NodeResourcesFit
from kubesched.scheduler.plugins.node_unschedulable import NodeUnschedulable
from kubesched.scheduler.plugins.pod_topology_spread import PodTopologySpread
from kubesched.scheduler.plugins.taint_toleration import TaintToleration
from kubesched.scheduler.podinfo import parse_timestamp

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.nominated import NominatedRequests
    from kubesched.scheduler.podinfo import PodInfo

# Filter plugins whose verdict depends on the node object and the pod only, never on the node's pods.
_NODE_ONLY_FILTERS: tuple[type, ...] = (
    NodeUnschedulable,
    NodeName,
    TaintToleration,
    NodeAffinity,
    DynamicResources,
)

NO_VICTIMS = "No preemption victims found for incoming pod"


# --- which plugins can see the victims ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scope:
    """What the fast path must look at for one pod in one cycle (``None`` from ``scope_for``: nothing is
    resource-only, use the exact dry run everywhere)."""

    cols: tuple[int, ...]  # resource columns NodeResourcesFit checks (empty when it does not run)
    need: tuple[int, ...]
    ports: bool  # NodePorts runs and the pod asks for host ports: nodes whose victims hold ports are exact
    anti_affinity: bool  # InterPodAffinity runs: nodes whose victims have pod anti-affinity are exact
    namespace: str | None  # PodTopologySpread runs: nodes with victims in this namespace are exact
    extensions: bool  # some PreFilter extension runs: nominated pods on a node make it exact

    @property
    def per_node(self) -> bool:
        return self.ports or self.anti_affinity or self.namespace is not None


def scope_for(fw: Framework, state: CycleState, pod: PodInfo, nodes: NodeTable) -> Scope | None:
    skip = state.skip_filter
    cols: tuple[int, ...] = ()
    need: tuple[int, ...] = ()
    ports = anti = False
    namespace: str | None = None
    for name in fw.points["Filter"]:
        if name in skip:
            continue
        pl = fw.plugin(name)
        kind = type(pl)
        if kind in _NODE_ONLY_FILTERS:
            continue
        if kind is NodeResourcesFit:
            plan = pl._plan(pod, nodes)
            cols, need = plan.cols, plan.need
        elif kind is NodePorts:
            ports = bool(pod.host_ports)
        elif kind is InterPodAffinity:
            if pod.pod_affinity or pod.pod_anti_affinity:
                return None  # the pod's own terms count matching victims: not worth modelling here
            anti = True
        elif kind is PodTopologySpread:
            namespace = pod.namespace
        else:
            return None  # a plugin we know nothing about may read anything
    extensions = False
    for name in fw.points["PreFilter"]:
        if name in skip:
            continue
        pl = fw.plugin(name)
        if not (callable(getattr(pl, "add_pod", None)) and callable(getattr(pl, "remove_pod", None))):
            continue
        if type(pl) not in (InterPodAffinity, PodTopologySpread):
            return None  # an unknown AddPod/RemovePod may change state, or fail
        extensions = True
    # A known extension without its Filter changes state nobody reads; with its Filter the per-node rules apply.
    return Scope(cols, need, ports, anti, namespace, extensions)


# --- filtering with nominated pods, many nodes at once ------------------------------------------------------


def nominated_rejections_in_bulk(
    fw: Framework, state: CycleState, pod: PodInfo, nodes: NodeTable, slots: list[int]
) -> list[tuple[int, Status]] | None:
    """``Framework._nominated_rejections`` for ``slots`` (nodes that passed the Filter plugins alone), with one
    Filter run over all of them: where the pod's Filter plugins see a node's pods only through its free
    resources, the pods nominated there with at least the pod's priority count as their summed requests taken
    off the free resources. Nodes where they would count for more (host ports the pod asks for too) take the
    per-node check. None when the scope is not resource-only (PreFilter extensions run, unknown plugins) or a
    plugin failed: the caller then checks node by node, as upstream."""
    scope = scope_for(fw, state, pod, nodes)
    nominator = fw.handle.nominator
    if scope is None or scope.extensions or nominator is None:
        return None
    width = nodes.width
    requests_on = getattr(nominator, "requests_on", None)
    if requests_on is not None:
        bulk, exact, taken = _nominated_in_bulk(requests_on(nodes), pod, scope, slots, width)
    else:
        bulk, exact, taken = _nominated_node_by_node(nominator, pod, scope, slots, nodes)
    statuses: dict[int, Status] = {}
    if len(bulk):
        nodes.free[bulk, :width] -= taken
        nodes.unlogged_edits += 1
        try:
            ok, rejected = fw.run_filters(state, pod, bulk)
        except FilterError:
            return None
        finally:
            nodes.unlogged_edits -= 1
            nodes.free[bulk, :width] += taken
        if not exact:  # the bulk slots are ``slots`` in order: the rejected ones, in order, without a walk
            bad: list[int] = bulk[~ok].tolist()
            return list(zip(bad, map(rejected.__getitem__, bad), strict=True))
        statuses.update(rejected)
    for slot in exact:
        s = fw.filter_with_nominated_pods(state, pod, slot, passed_alone=True)
        if s.code == Code.ERROR:
            raise FilterError(s.message())
        if not s.ok:
            statuses[slot] = s
    return [(slot, statuses[slot]) for slot in slots if slot in statuses]


def _nominated_in_bulk(
    summary: NominatedRequests, pod: PodInfo, scope: Scope, slots: list[int], width: int
) -> tuple[np.ndarray, list[int], np.ndarray]:
    """From the nominator's columns: (slots for the bulk Filter run, slots for the per-node check, the requests to
    take off the bulk slots' free resources)."""
    level = summary.level(pod.priority)
    at = np.asarray(slots, dtype=np.intp)
    count = level.count[at]
    ports = level.ports[at]
    taken = level.taken[at, :width]
    own = summary.own(pod.uid)
    if own is not None and own.priority >= pod.priority:
        mine = at == own.slot
        if mine.any():
            count = count - mine
            ports = ports - (mine & own.ports)
            taken = taken.copy()
            taken[mine] -= own.row[:width]
    with_pods = count > 0
    to_exact = with_pods & (ports > 0) if scope.ports else np.zeros(len(at), dtype=bool)
    in_bulk = with_pods & ~to_exact
    return at[in_bulk], at[to_exact].tolist(), taken[in_bulk]


def _nominated_node_by_node(
    nominator: Any, pod: PodInfo, scope: Scope, slots: list[int], nodes: NodeTable
) -> tuple[np.ndarray, list[int], np.ndarray]:
    """``_nominated_in_bulk`` for a nominator without columns: its pods node by node."""
    names, pod_slot, width = nodes.names, nodes.pod_slot, nodes.width
    uid, priority = pod.uid, pod.priority
    bulk: list[int] = []
    owner: list[int] = []  # per nominated pod counted: its node's row in ``bulk``
    rows: list[np.ndarray] = []
    exact: list[int] = []
    for slot in slots:
        others = [
            p
            for p in nominator.nominated_pods_for_node(names[slot] or "")
            if p.uid != uid and p.priority >= priority and pod_slot(p.uid) is None
        ]
        if not others:
            continue
        if scope.ports and any(p.host_ports for p in others):
            exact.append(slot)
            continue
        row = len(bulk)
        bulk.append(slot)
        for p in others:
            owner.append(row)
            rows.append(p.requests)
    taken = np.zeros((len(bulk), width), dtype=np.int64)
    for i, r in zip(owner, rows, strict=True):
        taken[i, : min(len(r), width)] += r[:width]
    return np.asarray(bulk, dtype=np.intp), exact, taken


# --- per priority: what the lower-priority pods of each node request ----------------------------------------


class LowerPriorityTotals:
    """Per priority P: for every slot, the summed requests of its pods below P and how many there are.

    Kept current as a ``TableListener`` of the table (registered on first use): only real pod changes notify,
    not the what-if additions and removals of dry runs and nominated-pod checks, which restore what they touch.
    A new priority or a resized table costs one pass over all pods.
    """

    def __init__(self, max_keys: int = 8) -> None:
        self.max_keys = max_keys
        self._table: NodeTable | None = None
        self._entries: dict[int, tuple[np.ndarray, np.ndarray]] = {}  # priority -> (sums, counts)

    def get(self, nodes: NodeTable, priority: int) -> tuple[np.ndarray, np.ndarray]:
        if self._table is None:
            nodes.add_listener(self)
            self._table = nodes
        entry = self._entries.get(priority)
        if entry is None or entry[0].shape != (nodes.capacity, nodes.width):
            if entry is None and len(self._entries) >= self.max_keys:
                self._entries.pop(next(iter(self._entries)))
            entry = self._entries[priority] = self._compute_all(nodes, priority)
        return entry

    @property
    def table(self) -> NodeTable | None:
        """The table this follows (the first one ``get`` was called with)."""
        return self._table

    # TableListener

    def on_pod_added(self, pi: PodInfo, slot: int) -> None:
        self._count(pi, slot, 1)

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None:
        self._count(pi, slot, -1)

    def on_pod_replaced(self, old: PodInfo, new: PodInfo, slot: int) -> None:
        if old.priority != new.priority or not np.array_equal(old.requests, new.requests):
            self._count(old, slot, -1)
            self._count(new, slot, 1)

    def on_node_changed(self, slot: int) -> None:
        pass

    def _count(self, pi: PodInfo, slot: int, sign: int) -> None:
        stale: list[int] = []
        for priority, (sums, counts) in self._entries.items():
            if pi.priority >= priority:
                continue
            if slot >= len(counts) or len(pi.requests) > sums.shape[1]:
                stale.append(priority)  # the table grew: recount on the next get
                continue
            sums[slot, : len(pi.requests)] += sign * pi.requests
            counts[slot] += sign
        for priority in stale:
            del self._entries[priority]

    @staticmethod
    def _compute_all(nodes: NodeTable, priority: int) -> tuple[np.ndarray, np.ndarray]:
        width = nodes.width
        sums = np.zeros((nodes.capacity, width), dtype=np.int64)
        counts = np.zeros(nodes.capacity, dtype=np.int64)
        slots: list[int] = []
        rows: list[np.ndarray] = []
        for pi, slot in nodes.iter_pods():
            if pi.priority < priority:
                slots.append(slot)
                rows.append(pi.requests)
        if slots:
            at = np.asarray(slots, dtype=np.intp)
            if all(len(r) == width for r in rows):
                np.add.at(sums, at, np.stack(rows))
            else:
                for slot, r in zip(slots, rows, strict=True):
                    sums[slot, : len(r)] += r
            counts += np.bincount(at, minlength=nodes.capacity)
        return sums, counts


# --- per node: the potential victims in upstream's order ----------------------------------------------------


@dataclass(slots=True)
class NodeVictims:
    """One node's pods below one priority, most important first (upstream ``MoreImportantPod``: higher priority,
    then earlier start; a pod not started yet counts as starting now, so the order holds for ``lo < now < hi``)."""

    pods_key: tuple[PodInfo, ...]  # every pod on the node when this was built
    victims: list[PodInfo]
    reqs: np.ndarray  # (len(victims), width): their requests
    prios: np.ndarray  # int64
    starts: np.ndarray  # float64, NaN for pods not started
    lo: float
    hi: float
    has_ports: bool
    has_anti_affinity: bool
    namespaces: frozenset[str]


def _start(pi: PodInfo) -> float | None:
    return parse_timestamp((pi.pod.get("status") or {}).get("startTime"))


class _Padded:
    """One priority's potential victims of every slot as padded arrays (row: slot; column: rank in importance
    order). A row is current while ``lo < now < hi`` (as its ``NodeVictims``); dropped rows have lo = +inf."""

    def __init__(self, capacity: int, width: int) -> None:
        self.width = width
        self.reqs = np.zeros((capacity, 0, width), dtype=np.int64)
        self.prios = np.zeros((capacity, 0), dtype=np.int64)
        self.starts = np.zeros((capacity, 0), dtype=np.float64)
        self.lens = np.zeros(capacity, dtype=np.intp)
        self.lo = np.full(capacity, math.inf)
        self.hi = np.full(capacity, -math.inf)

    def put(self, slot: int, e: NodeVictims) -> None:
        n = len(e.victims)
        k = self.prios.shape[1]
        if n > k:
            grow = max(n, 2 * k) - k
            cap = len(self.lens)
            self.reqs = np.concatenate((self.reqs, np.zeros((cap, grow, self.width), dtype=np.int64)), axis=1)
            self.prios = np.concatenate((self.prios, np.zeros((cap, grow), dtype=np.int64)), axis=1)
            self.starts = np.concatenate((self.starts, np.zeros((cap, grow), dtype=np.float64)), axis=1)
        self.reqs[slot, :n] = e.reqs
        self.prios[slot, :n] = e.prios
        self.starts[slot, :n] = e.starts
        self.lens[slot] = n
        self.lo[slot] = e.lo
        self.hi[slot] = e.hi

    def drop(self, slot: int) -> None:
        self.lo[slot] = math.inf
        self.hi[slot] = -math.inf


class _Entries(Sequence[NodeVictims]):
    """The entries of ``slots`` in a priority's cache, looked up when asked (a batch needs few of them)."""

    def __init__(self, per: dict[int, NodeVictims], slots: list[int]) -> None:
        self._per = per
        self._slots = slots

    def __len__(self) -> int:
        return len(self._slots)

    def __getitem__(self, j: Any) -> Any:
        if isinstance(j, slice):
            return [self._per[s] for s in self._slots[j]]
        return self._per[self._slots[j]]


class VictimOrders:
    """``NodeVictims`` per (priority, slot), rebuilt when the node's pods change.

    A ``TableListener`` of the table it serves (attached by ``attach``): a real change of a node's pods drops
    that node's entries, so a cached entry is valid without looking at the pods again. What-if changes (dry
    runs, nominated-pod checks) do not notify and restore the pods and their order before returning."""

    def __init__(self, max_keys: int = 8) -> None:
        self.max_keys = max_keys
        self._by_priority: dict[int, dict[int, NodeVictims]] = {}
        self._padded: dict[int, _Padded] = {}
        self._table: NodeTable | None = None

    def attach(self, nodes: NodeTable) -> None:
        if self._table is not nodes:
            self._by_priority.clear()
            self._padded.clear()
            nodes.add_listener(self)
            self._table = nodes

    def _per(self, priority: int) -> dict[int, NodeVictims]:
        per = self._by_priority.get(priority)
        if per is None:
            if len(self._by_priority) >= self.max_keys:
                oldest = next(iter(self._by_priority))
                del self._by_priority[oldest]
                self._padded.pop(oldest, None)
            per = self._by_priority[priority] = {}
        return per

    def entries(self, priority: int) -> dict[int, NodeVictims]:
        """The cached entries of ``priority`` (those ``padded`` just ensured are there)."""
        return self._by_priority[priority]

    def _rebuild(
        self, nodes: NodeTable, priority: int, per: dict[int, NodeVictims], slot: int, now: float
    ) -> NodeVictims:
        entry = per[slot] = self._build(tuple(nodes.pods_on(slot).values()), priority, now, nodes.width)
        pad = self._padded.get(priority)
        if pad is not None and slot < len(pad.lens):
            pad.drop(slot)  # its row may hold the order of the entry replaced
        return entry

    def get(self, nodes: NodeTable, priority: int, slot: int, now: float) -> NodeVictims:
        self.attach(nodes)
        per = self._per(priority)
        entry = per.get(slot)
        if entry is not None and entry.lo < now < entry.hi and entry.reqs.shape[1] == nodes.width:
            return entry
        return self._rebuild(nodes, priority, per, slot, now)

    def padded(self, nodes: NodeTable, priority: int, at: np.ndarray, now: float) -> _Padded:
        """The padded arrays of ``priority``, with the rows of ``at`` current (and their entries cached)."""
        self.attach(nodes)
        per = self._per(priority)
        width = nodes.width
        pad = self._padded.get(priority)
        if pad is None or len(pad.lens) != nodes.capacity or pad.width != width:
            pad = self._padded[priority] = _Padded(nodes.capacity, width)
        stale = at[~((pad.lo[at] < now) & (now < pad.hi[at]))]
        for slot in stale.tolist():
            entry = per.get(slot)
            if entry is None or not (entry.lo < now < entry.hi) or entry.reqs.shape[1] != width:
                entry = self._rebuild(nodes, priority, per, slot, now)
            pad.put(slot, entry)
        return pad

    def get_many(self, nodes: NodeTable, priority: int, slots: list[int], now: float) -> list[NodeVictims]:
        """``get`` for each of ``slots``."""
        self.attach(nodes)
        per = self._per(priority)
        width = nodes.width
        out: list[NodeVictims] = []
        for slot in slots:
            entry = per.get(slot)
            if entry is None or not (entry.lo < now < entry.hi) or entry.reqs.shape[1] != width:
                entry = self._rebuild(nodes, priority, per, slot, now)
            out.append(entry)
        return out

    # TableListener

    def _drop(self, slot: int) -> None:
        for per in self._by_priority.values():
            per.pop(slot, None)
        for pad in self._padded.values():
            if slot < len(pad.lens):
                pad.drop(slot)

    def on_pod_added(self, pi: PodInfo, slot: int) -> None:
        self._drop(slot)

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None:
        self._drop(slot)

    def on_pod_replaced(self, old: PodInfo, new: PodInfo, slot: int) -> None:
        self._drop(slot)  # the new version may have started, and it moved to the end of the node's pods

    def on_node_changed(self, slot: int) -> None:
        self._drop(slot)

    @staticmethod
    def _build(pods: tuple[PodInfo, ...], priority: int, now: float, width: int) -> NodeVictims:
        lower = [p for p in pods if p.priority < priority]
        started = [_start(p) for p in lower]
        keyed = [(-p.priority, now if s is None else s) for p, s in zip(lower, started, strict=True)]
        order = sorted(range(len(lower)), key=keyed.__getitem__)  # stable, as upstream's sort of the list
        victims = [lower[i] for i in order]
        rows = [p.requests for p in victims]
        if all(len(r) == width for r in rows):
            reqs = np.array(rows, dtype=np.int64).reshape(len(victims), width)
        else:  # parsed before the index grew: pad with zeros
            reqs = np.zeros((len(victims), width), dtype=np.int64)
            for row, r in zip(reqs, rows, strict=True):
                row[: len(r)] = r[:width]
        lo, hi = -math.inf, math.inf
        for s in started:
            if s is None:
                continue
            if s < now:
                lo = max(lo, s)
            elif s > now:
                hi = min(hi, s)
            else:
                hi = lo = now  # a start time equal to now: do not reuse the order
        return NodeVictims(
            pods,
            victims,
            reqs,
            np.array([p.priority for p in victims], dtype=np.int64),
            np.array([math.nan if started[i] is None else started[i] for i in order], dtype=np.float64),
            lo,
            hi,
            any(p.host_ports for p in victims),
            any(p.pod_anti_affinity for p in victims),
            frozenset(p.namespace for p in victims),
        )

    def clear(self) -> None:
        self._by_priority.clear()


# --- picking among candidates -------------------------------------------------------------------------------


@dataclass(slots=True)
class VictimStats:
    """What ``pick_one_node_for_preemption`` compares, for one candidate."""

    violations: int
    top_priority: int
    priority_sum: int  # with the offset of 2**31 per victim
    count: int
    top_started_min: float  # earliest start among the highest-priority victims that started (inf: none)
    top_unstarted: bool  # some highest-priority victim has not started (counts as "now")


_PRIORITY_OFFSET = 2**31


def stats_of(victims: Sequence[PodInfo], violations: int) -> VictimStats:
    top = max(v.priority for v in victims)
    started = math.inf
    unstarted = False
    for v in victims:
        if v.priority == top:
            s = _start(v)
            if s is None:
                unstarted = True
            else:
                started = min(started, s)
    total = sum(v.priority + _PRIORITY_OFFSET for v in victims)
    return VictimStats(violations, top, total, len(victims), started, unstarted)


def pick_index(stats: Sequence[VictimStats], now: float) -> int:
    """Upstream's ``pickOneNodeForPreemption`` over precomputed stats: the index of the best candidate (each
    criterion only breaks the ties of the ones before; the first candidate wins what is left)."""
    m = len(stats)
    if m == 1:
        return 0
    viol = np.fromiter((s.violations for s in stats), dtype=np.int64, count=m)
    top = np.fromiter((s.top_priority for s in stats), dtype=np.int64, count=m)
    total = np.fromiter((s.priority_sum for s in stats), dtype=np.int64, count=m)
    count = np.fromiter((s.count for s in stats), dtype=np.int64, count=m)
    earliest = np.fromiter(
        (min(s.top_started_min, now) if s.top_unstarted else s.top_started_min for s in stats),
        dtype=np.float64,
        count=m,
    )
    idx = np.arange(m)
    for score in (-viol, -top, -total, -count, earliest):
        sub = score[idx]
        idx = idx[sub == sub.max()]
        if len(idx) == 1:
            break
    return int(idx[0])


# --- the dry run --------------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Outcome:
    """One evaluated node: a candidate's victims (with violations and stats), or the status it failed with."""

    victims: list[PodInfo] | None
    violations: int
    stats: VictimStats | None
    status: Status | None


@dataclass(slots=True)
class _Batch:
    """The reprieve of several nodes at once: per node (row), its victims as a mask over its potential victims
    in reprieve order, and what ``pickOneNodeForPreemption`` compares."""

    slots: list[int]
    entries: Sequence[NodeVictims]
    victim: np.ndarray  # (m, kmax) bool
    perms: list[list[int]] | None  # with PDBs: reprieve order as indices into the entry's victims
    pdb_counts: list[int] | None  # violating ones first; negative when the other group is empty (no re-sort)
    count: np.ndarray  # victims per node
    violations: np.ndarray
    top: np.ndarray
    total: np.ndarray
    earliest: np.ndarray
    unstarted: np.ndarray

    def victims_of(self, j: int, now: float) -> list[PodInfo]:
        e = self.entries[j]
        row = self.victim[j].tolist()
        if self.perms is None or self.pdb_counts is None:
            return list(itertools.compress(e.victims, row))
        perm = self.perms[j]
        chosen = [perm[r] for r in range(len(perm)) if row[r]]
        if self.pdb_counts[j] > 0:  # both groups non-empty: upstream sorts the victims again
            chosen = _stable_resort(e, chosen, now)
        return [e.victims[c] for c in chosen]

    def stats_of(self, j: int) -> VictimStats:
        return VictimStats(
            int(self.violations[j]),
            int(self.top[j]),
            int(self.total[j]),
            int(self.count[j]),
            float(self.earliest[j]),
            bool(self.unstarted[j]),
        )

    def outcome(self, j: int, now: float) -> _Outcome:
        if not self.count[j]:
            return _Outcome([], 0, None, Status.success())
        return _Outcome(self.victims_of(j, now), int(self.violations[j]), self.stats_of(j), None)


def _stable_resort(e: NodeVictims, order: list[int], now: float) -> list[int]:
    """Upstream re-sorts the victims by importance when both PDB groups were non-empty (a stable sort of the
    victims in reprieve order: ties keep violating ones first)."""
    prios, starts = e.prios, e.starts

    def key(c: int) -> tuple[int, float]:
        s = float(starts[c])
        return (-int(prios[c]), now if math.isnan(s) else s)

    return sorted(order, key=key)


def _pick(
    viol: np.ndarray, top: np.ndarray, total: np.ndarray, count: np.ndarray, earliest: np.ndarray
) -> int:
    """``pick_index`` over arrays (``earliest`` with unstarted pods already counted as now)."""
    idx = np.arange(len(viol))
    for score in (-viol, -top, -total, -count, earliest):
        sub = score[idx]
        idx = idx[sub == sub.max()]
        if len(idx) == 1:
            break
    return int(idx[0])


class Found:
    """What a dry run found: ``count`` candidates (those without PDB violations first), the statuses of the
    evaluated nodes that are not candidates, the error messages. Candidates and statuses are built when asked:
    a preemption needs only the best candidate, or the statuses when there is none."""

    def __init__(
        self,
        count: int,
        candidates: Any,
        best: Any,
        statuses: Any,
        errors: list[str],
    ) -> None:
        self.count = count
        self._candidates = candidates
        self._best = best
        self._statuses = statuses
        self.errors = errors

    @classmethod
    def of(cls, candidates: list[Any], statuses: dict[str, Status], errors: list[str], best: Any) -> Found:
        return cls(len(candidates), lambda: candidates, lambda: best(candidates), lambda: statuses, errors)

    def candidates(self) -> list[Any]:
        result: list[Any] = self._candidates()
        return result

    def best(self) -> Any:
        return self._best()

    def node_statuses(self) -> dict[str, Status]:
        result: dict[str, Status] = self._statuses()
        return result


# What the walks pass on to the reprieve: nodes, priority, lower-priority sums, nominated requests, scope, PDBs, now.
_Args = tuple["NodeTable", int, np.ndarray, "np.ndarray | None", Scope, Sequence[Any], float]


class FastDryRun:
    """The state the fast path keeps across cycles (one per DefaultPreemption)."""

    def __init__(self) -> None:
        self.totals = LowerPriorityTotals()
        self.orders = VictimOrders()
        # The first stretch of the walk the Filter plugins see is max(this, 1.25 times the candidates wanted); each
        # further one is twice the last.
        self.min_stretch = 64

    def run(
        self,
        plugin: Any,
        fw: Framework,
        state: CycleState,
        pod: PodInfo,
        nodes: NodeTable,
        potential: Sequence[int] | np.ndarray,
        pdbs: Sequence[Any],
        offset: int,
        num_candidates: int,
        now: float,
    ) -> Found | None:
        """As ``DefaultPreemption.dry_run_preemption`` (candidates carry their ``VictimStats``), or None when the
        fast path does not apply to this pod (the caller then runs the exact dry run)."""
        scope = scope_for(fw, state, pod, nodes)
        if scope is None:
            return None
        n = len(potential)
        pot = np.asarray(potential, dtype=np.intp)
        walk = np.concatenate((pot[offset:], pot[:offset])) if offset else pot
        priority = pod.priority
        if self.totals.table not in (None, nodes):
            self.totals = LowerPriorityTotals()  # another table (tests): start over
        sums, counts = self.totals.get(nodes, priority)
        has_victims = counts.take(walk) > 0

        # Pods nominated to a node with at least the pod's priority count there (RunFilterPluginsWithNominatedPods).
        width = sums.shape[1]
        exact: set[int] = set()
        taken: np.ndarray | None = None  # per slot: requests of the nominated pods counted there
        nominator = fw.handle.nominator
        if nominator is not None and nominator:
            taken = self._nominated(pod, nodes, scope, nominator, width, exact)

        if scope.per_node:
            with_victims = walk[has_victims].tolist()
            for slot, e in zip(
                with_victims, self.orders.get_many(nodes, priority, with_victims, now), strict=True
            ):
                if slot in exact:
                    continue
                if (
                    (scope.ports and e.has_ports)
                    or (scope.anti_affinity and e.has_anti_affinity)
                    or (scope.namespace is not None and scope.namespace in e.namespaces)
                ):
                    exact.add(slot)

        is_exact = np.zeros(n, dtype=bool)
        if exact:
            is_exact = np.isin(walk, np.fromiter(exact, dtype=np.intp, count=len(exact)))
        safe_mask = has_victims & ~is_exact
        free = nodes.free

        def filter_range(lo: int, hi: int) -> tuple[np.ndarray, dict[int, Status]] | None:
            """Walk positions in [lo, hi) of the safe nodes the pod fits on with all their lower-priority pods
            gone (the Filter plugins once over all of them, resources adjusted), and the rejections of the
            others; None when a plugin failed."""
            pos = lo + np.flatnonzero(safe_mask[lo:hi])
            part = walk[pos]
            delta = sums[part]
            if taken is not None:
                delta -= taken[part]
            free[part, :width] += delta
            nodes.unlogged_edits += 1
            try:
                fits, rejected = fw.run_filters(state, pod, part)
            except FilterError:
                return None  # the exact run reports it node by node
            finally:
                nodes.unlogged_edits -= 1
                free[part, :width] -= delta
            return pos[fits], rejected

        args = (nodes, priority, sums, taken, scope, pdbs, now)
        if not (is_exact & has_victims).any():
            return self._walk_bulk(walk, has_victims, safe_mask, filter_range, num_candidates, args)
        found = filter_range(0, n)
        if found is None:
            return None
        fits_at = np.zeros(n, dtype=bool)
        fits_at[found[0]] = True
        return self._walk_mixed(
            plugin,
            fw,
            state,
            pod,
            walk,
            has_victims,
            fits_at,
            is_exact,
            safe_mask,
            found[1],
            num_candidates,
            args,
        )

    def _statuses(
        self,
        names: Sequence[str | None],
        walk: np.ndarray,
        stop_at: int,
        has_victims: np.ndarray,
        safe_mask: np.ndarray,
        fits_at: np.ndarray,
        rejected: dict[int, Status],
        node_statuses: dict[str, Status],
    ) -> dict[str, Status]:
        """Add the nodes that failed before any victim was put back, among those the walk reached."""
        no_victims = np.flatnonzero(~has_victims[:stop_at])
        if len(no_victims):
            st = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [NO_VICTIMS])
            for slot in walk[no_victims].tolist():
                node_statuses[names[slot] or ""] = st
        if rejected:
            safe_walked = safe_mask.copy()
            safe_walked[stop_at:] = False
            for slot in walk[safe_walked & ~fits_at].tolist():
                node_statuses[names[slot] or ""] = rejected[slot]
        return node_statuses

    def _walk_bulk(
        self,
        walk: np.ndarray,
        has_victims: np.ndarray,
        safe_mask: np.ndarray,
        filter_range: Any,
        num: int,
        args: _Args,
    ) -> Found | None:
        """Every node the walk may reach is evaluated in bulk: the walk itself is arithmetic over batches of
        candidates, and the Filter plugins run over stretches of the walk only as far as it gets."""
        from kubesched.scheduler.plugins.default_preemption import Candidate

        nodes, priority, sums, taken, scope, pdbs, now = args
        names = nodes.names
        n = len(walk)
        fits_at = np.zeros(n, dtype=bool)
        rejected: dict[int, Status] = {}
        batches: list[tuple[_Batch, np.ndarray, np.ndarray]] = []  # batch, clean, violating (batch rows)
        errors: list[str] = []
        error_nodes: list[str] = []
        raw_clean = raw_violating = 0
        stop_at = n
        reach = 0  # walk positions before this went through the Filter plugins
        stretch = max(num + num // 4, self.min_stretch, 1)
        stopped = False
        while reach < n and not stopped:
            found = filter_range(reach, min(reach + stretch, n))
            if found is None:
                return None
            fit_pos, rejected_here = found
            rejected.update(rejected_here)
            fits_at[fit_pos] = True
            reach = min(reach + stretch, n)
            stretch *= 2
            start = 0
            while start < len(fit_pos):
                want = max(num - min(raw_clean, num) - min(raw_violating, num), 1) + 8
                sel = fit_pos[start : start + want]
                start += len(sel)
                b = self._reprieve(nodes, priority, sums, taken, scope, pdbs, walk[sel].tolist(), now)
                has = b.count > 0
                is_clean = has & (b.violations == 0)
                is_violating = has & (b.violations > 0)
                ccum = raw_clean + np.cumsum(is_clean)
                vcum = raw_violating + np.cumsum(is_violating)
                clean_kept = np.minimum(ccum, num)
                done = has & (clean_kept >= 1) & (clean_kept + np.minimum(vcum, num) >= num)
                hit = np.flatnonzero(done)
                end = int(hit[0]) + 1 if len(hit) else len(sel)
                keep_c = np.flatnonzero(is_clean[:end] & (ccum[:end] <= num))
                keep_v = np.flatnonzero(is_violating[:end] & (vcum[:end] <= num))
                batches.append((b, keep_c, keep_v))
                for j in np.flatnonzero(~has[:end]).tolist():
                    name = names[b.slots[j]] or ""
                    errors.append(
                        Status.error(f'expected at least one victim pod on node "{name}"').message()
                    )
                    error_nodes.append(name)
                raw_clean, raw_violating = int(ccum[end - 1]), int(vcum[end - 1])
                if len(hit):
                    stop_at = int(sel[end - 1]) + 1
                    stopped = True
                    break
        count = sum(len(kc) + len(kv) for _, kc, kv in batches)

        def candidates() -> list[Any]:
            clean: list[Any] = []
            violating: list[Any] = []
            for b, kc, kv in batches:
                for bucket, keep in ((clean, kc), (violating, kv)):
                    for j in keep.tolist():
                        bucket.append(
                            Candidate(
                                names[b.slots[j]] or "",
                                b.victims_of(j, now),
                                int(b.violations[j]),
                                b.stats_of(j),
                            )
                        )
            return clean + violating

        def best() -> Any:
            if not count:
                return None
            t = time.time()  # as select_candidate: pods not started count as starting now
            # Order as the candidate list: every batch's clean ones, then every batch's violating ones.
            order = [(b, kc) for b, kc, _ in batches] + [(b, kv) for b, _, kv in batches]
            order = [(b, k) for b, k in order if len(k)]
            cols = [
                np.concatenate([getattr(b, f)[k] for b, k in order])
                for f in ("violations", "top", "total", "count")
            ]
            earliest = np.concatenate(
                [np.where(b.unstarted[k], np.minimum(b.earliest[k], t), b.earliest[k]) for b, k in order]
            )
            i = _pick(cols[0], cols[1], cols[2], cols[3], earliest)
            for b, k in order:
                if i < len(k):
                    j = int(k[i])
                    return Candidate(
                        names[b.slots[j]] or "", b.victims_of(j, now), int(b.violations[j]), b.stats_of(j)
                    )
                i -= len(k)
            raise AssertionError("unreachable")

        def statuses() -> dict[str, Status]:
            node_statuses = {
                name: Status.error(f'expected at least one victim pod on node "{name}"')
                for name in error_nodes
            }
            return self._statuses(
                names, walk, stop_at, has_victims, safe_mask, fits_at, rejected, node_statuses
            )

        return Found(count, candidates, best, statuses, errors)

    def _walk_mixed(
        self,
        plugin: Any,
        fw: Framework,
        state: CycleState,
        pod: PodInfo,
        walk: np.ndarray,
        has_victims: np.ndarray,
        fits_at: np.ndarray,
        is_exact: np.ndarray,
        safe_mask: np.ndarray,
        rejected: dict[int, Status],
        num_candidates: int,
        args: _Args,
    ) -> Found:
        """Some nodes need the exact per-node dry run: walk node by node, reprieving the bulk ones in batches."""
        from kubesched.scheduler.plugins.default_preemption import Candidate

        nodes, priority, sums, taken, scope, pdbs, now = args
        n = len(walk)
        interesting = np.flatnonzero(fits_at | (is_exact & has_victims))
        names = nodes.names
        clean: list[Any] = []
        violating: list[Any] = []
        node_statuses: dict[str, Status] = {}
        errors: list[str] = []
        outcomes: dict[int, _Outcome] = {}
        stop_at = n  # walk positions before this were evaluated
        pending = interesting.tolist()
        pending_slots = walk[interesting].tolist()
        pending_fits = fits_at[interesting].tolist()
        fit_slots = walk[interesting[fits_at[interesting]]].tolist()  # the safe candidates, in walk order
        next_fit = 0  # how many of them have been reprieved
        for pos, slot, fit in zip(pending, pending_slots, pending_fits, strict=True):
            if fit and slot not in outcomes:
                # Reprieve a batch of the next safe candidates at once.
                want = max(num_candidates - len(clean) - len(violating), 1) + 8
                batch = fit_slots[next_fit : next_fit + want]
                next_fit += len(batch)
                b = self._reprieve(nodes, priority, sums, taken, scope, pdbs, batch, now)
                for j, s in enumerate(batch):
                    outcomes[s] = b.outcome(j, now)
            name = names[slot] or ""
            if fit:
                out = outcomes[slot]
                victims, violations, stats, status = out.victims, out.violations, out.stats, out.status
            else:
                victims, violations, status = plugin.select_victims_on_node(
                    fw, state.clone(), pod, nodes, slot, pdbs
                )
                stats = stats_of(victims, violations) if status.ok and victims else None
            if status is None or (status.ok and victims):
                assert victims is not None and stats is not None
                bucket = clean if violations == 0 else violating
                if len(bucket) < num_candidates:
                    bucket.append(Candidate(name, victims, violations, stats))
                if clean and len(clean) + len(violating) >= num_candidates:
                    stop_at = pos + 1
                    break
            else:
                if status.ok:
                    status = Status.error(f'expected at least one victim pod on node "{name}"')
                if status.code == Code.ERROR:
                    errors.append(status.message())
                node_statuses[name] = status
        self._statuses(names, walk, stop_at, has_victims, safe_mask, fits_at, rejected, node_statuses)
        return Found.of(clean + violating, node_statuses, errors, plugin.select_candidate)

    def _nominated(
        self, pod: PodInfo, nodes: NodeTable, scope: Scope, nominator: Any, width: int, exact: set[int]
    ) -> np.ndarray | None:
        """Per slot, the summed requests of the pods nominated there that the dry run counts (equal or higher
        priority, not bound yet); nodes where they would count for more than resources go to ``exact``."""
        requests_on = getattr(nominator, "requests_on", None)
        if requests_on is None:
            return self._nominated_node_by_node(pod, nodes, scope, nominator, width, exact)
        summary: NominatedRequests = requests_on(nodes)
        level = summary.level(pod.priority)
        own = summary.own(pod.uid)
        if own is not None and own.priority < pod.priority:
            own = None
        if level.total - (own is not None) <= 0:
            return None
        taken = level.taken
        count, ports = level.count, level.ports
        if own is not None:
            taken = taken.copy()
            taken[own.slot] -= own.row
            count = count.copy()
            count[own.slot] -= 1
            if own.ports:
                ports = ports.copy()
                ports[own.slot] -= 1
        if scope.extensions:
            exact.update(np.flatnonzero(count > 0).tolist())
        elif scope.ports:
            exact.update(np.flatnonzero((ports > 0) & (count > 0)).tolist())
        if taken.shape[1] != width:
            out = np.zeros((taken.shape[0], width), dtype=np.int64)
            n = min(width, taken.shape[1])
            out[:, :n] = taken[:, :n]
            taken = out
        return taken

    def _nominated_node_by_node(
        self, pod: PodInfo, nodes: NodeTable, scope: Scope, nominator: Any, width: int, exact: set[int]
    ) -> np.ndarray | None:
        """``_nominated`` for a nominator without columns (tests): its pods node by node."""
        index, pod_slot, uid, priority = nodes.index, nodes.pod_slot, pod.uid, pod.priority
        slots: list[int] = []
        rows: list[np.ndarray] = []
        for node_name in nominator.nodes():
            slot = index.get(node_name)
            if slot is None:
                continue
            for p in nominator.nominated_pods_for_node(node_name):
                if p.priority < priority or p.uid == uid or pod_slot(p.uid) is not None:
                    continue
                if scope.extensions or (scope.ports and p.host_ports):
                    exact.add(slot)
                slots.append(slot)
                rows.append(p.requests)
        if not slots:
            return None
        taken = np.zeros((nodes.capacity, width), dtype=np.int64)
        for slot, r in zip(slots, rows, strict=True):
            taken[slot, : min(len(r), width)] += r[:width]
        return taken

    def _reprieve(
        self,
        nodes: NodeTable,
        priority: int,
        sums: np.ndarray,
        taken: np.ndarray | None,
        scope: Scope,
        pdbs: Sequence[Any],
        batch: list[int],
        now: float,
    ) -> _Batch:
        """Upstream's reprieve loop for ``batch`` (safe nodes the pod fits on with their victims gone), vectorised
        across nodes: victim k of every node is tried together."""
        from kubesched.scheduler.plugins.default_preemption import filter_pods_with_pdb_violation

        m = len(batch)
        cols = list(scope.cols)
        perms: list[list[int]] | None = None
        pdb_counts: list[int] | None = None
        entries: Sequence[NodeVictims]
        req: np.ndarray | None = None
        if not pdbs:
            # Straight from the per-priority padded arrays: no per-node Python unless a node changed.
            at = np.asarray(batch, dtype=np.intp)
            pad = self.orders.padded(nodes, priority, at, now)
            entries = _Entries(self.orders.entries(priority), batch)
            lens = pad.lens[at]
            kmax = int(lens.max())
            valid = np.arange(kmax)[None, :] < lens[:, None]
            if cols:
                req = pad.reqs[at, :kmax][:, :, cols]
            prio = pad.prios[at, :kmax]
            start = pad.starts[at, :kmax]
        else:
            entries = self.orders.get_many(nodes, priority, batch, now)
            # Reprieve order per node: PDB-violating victims first, then the others (each in importance order).
            perms, pdb_counts = [], []
            for e in entries:
                violating, other = filter_pods_with_pdb_violation(e.victims, pdbs)
                where = {id(p): j for j, p in enumerate(e.victims)}
                perms.append([where[id(p)] for p in violating] + [where[id(p)] for p in other])
                pdb_counts.append(len(violating) if other else -len(violating))  # negative: no re-sort
            lens = np.fromiter((len(e.victims) for e in entries), dtype=np.intp, count=m)
            kmax = int(lens.max())
            valid = np.arange(kmax)[None, :] < lens[:, None]
            uniform = bool((lens == kmax).all())
            starts_at = np.concatenate(([0], np.cumsum(lens)[:-1]))
            src = np.repeat(starts_at, lens) + np.concatenate([np.asarray(p, dtype=np.intp) for p in perms])
            rows = np.repeat(np.arange(m), lens)
            ranks = np.arange(len(rows)) - np.repeat(starts_at, lens)

            def spread(flat: np.ndarray, fill: Any, dtype: Any) -> np.ndarray:
                """Per-victim values (concatenated in entry order) as an (m, kmax, ...) array in reprieve order."""
                flat = flat[src]
                if uniform:
                    return flat.reshape((m, kmax, *flat.shape[1:]))
                out = np.full((m, kmax, *flat.shape[1:]), fill, dtype=dtype)
                out[rows, ranks] = flat
                return out

            if cols:
                req = spread(np.concatenate([e.reqs for e in entries])[:, cols], 0, np.int64)
            prio = spread(np.concatenate([e.prios for e in entries]), 0, np.int64)
            start = spread(np.concatenate([e.starts for e in entries]), np.nan, np.float64)

        keep = np.zeros((m, kmax), dtype=bool)  # reprieved
        if req is not None:
            at = np.asarray(batch, dtype=np.intp)
            room = nodes.free[at][:, cols] + sums[at][:, cols]
            if taken is not None:
                room -= taken[at][:, cols]
            need = np.asarray(scope.need, dtype=np.int64)
            for k in range(kmax):
                after = room - req[:, k]
                ok = valid[:, k] & (after >= need).all(axis=1)
                room[ok] = after[ok]
                keep[:, k] = ok
        else:
            keep[:] = valid  # nothing checks resources: every victim fits back
        victim = valid & ~keep

        # What pickOneNodeForPreemption compares, for all of them at once.
        count = victim.sum(axis=1)
        top = np.where(victim, prio, np.iinfo(np.int64).min).max(axis=1)
        total = np.where(victim, prio, 0).sum(axis=1) + _PRIORITY_OFFSET * count
        at_top = victim & (prio == top[:, None])
        unstarted = np.isnan(start)
        earliest = np.where(at_top & ~unstarted, start, math.inf).min(axis=1)
        top_unstarted = (at_top & unstarted).any(axis=1)
        if pdb_counts is not None:
            is_violating = np.arange(kmax)[None, :] < np.abs(np.asarray(pdb_counts))[:, None]
            violations = (victim & is_violating).sum(axis=1)
        else:
            violations = np.zeros(m, dtype=np.int64)
        return _Batch(
            batch, entries, victim, perms, pdb_counts, count, violations, top, total, earliest, top_unstarted
        )
