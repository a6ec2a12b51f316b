"""PodTopologySpread: ``topologySpreadConstraints``, hard in Filter and soft in Score.

Upstream: ``pkg/scheduler/framework/plugins/podtopologyspread`` (1.36).

How it stays fast: the expensive part upstream is counting, for every node, the pods that match a constraint's
selector. Here ``PodCountIndex`` keeps those per-node counts as one int32 array per distinct (namespace, selector),
updated incrementally through the NodeTable listener hook as pods come and go. A cycle then only aggregates the
array by topology domain (``np.bincount`` over the label codes of ``node_affinity.label_codes``): O(nodes) in numpy,
no Python loop over pods.

Semantics kept from upstream
- Hard constraints: domains are the values of the topology key among nodes that carry *all* the pod's topology keys
  and pass the constraint's inclusion policies (``nodeAffinityPolicy`` default Honor, ``nodeTaintsPolicy`` default
  Ignore). ``skew = matching pods in the node's domain + (pod matches itself) - global minimum``; the minimum is 0
  while fewer than ``minDomains`` domains exist. A node without the key fails as unresolvable.
- Counting skips terminating pods and pods of other namespaces; an empty selector (``{}``) counts nothing.
- ``matchLabelKeys`` adds ``key in (pod's value)`` requirements; doing it here too is harmless when the API server has
  already merged them (1.34+), and right when it has not.
- Soft constraints score ``Σ count·log(domains+2) + (maxSkew-1)`` per node (rounded), then NormalizeScore reverses
  to 0..100; nodes missing a key are ignored (score 0) unless the constraints are the system defaults.
- Default constraints apply only to pods without constraints, with a selector built from the Services,
  ReplicaSet/StatefulSet/ReplicationController that own or select the pod.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.handle import Handle, WorkloadLister
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.node_affinity import (
    LabelCodes,
    LabelSelector,
    RequiredNodeAffinity,
    Requirement,
    SelectorDispatch,
    SelectorError,
    label_codes,
)
from kubesched.scheduler.plugins.pod_topology_spread_args import SYSTEM_DEFAULTING, PodTopologySpreadArgs

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo

NAME = "PodTopologySpread"

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

LABEL_HOSTNAME = "kubernetes.io/hostname"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR, IGNORE = "Honor", "Ignore"

_MAX_INT32 = 2**31 - 1

# --------------------------------------------------------------------------------------------------------------------
# Which pods count, and the per-node counts index.


@dataclass(frozen=True, slots=True)
class PodMatcher:
    """A predicate over existing pods: every clause must hold.

    A clause is ``(namespaces, selector)``: the pod's namespace is in ``namespaces`` (None = any) and its labels
    match ``selector``. ``owner_uid`` (if set) requires that controller owner instead of labels.
    """

    clauses: tuple[tuple[frozenset[str] | None, LabelSelector], ...]
    skip_terminating: bool = False
    owner_uid: str | None = None

    @property
    def key(self) -> tuple[Any, ...]:
        return (
            self.skip_terminating,
            self.owner_uid,
            tuple((None if ns is None else tuple(sorted(ns)), sel.key) for ns, sel in self.clauses),
        )

    @property
    def namespaces(self) -> frozenset[str] | None:
        """Namespaces a matching pod can be in (None = any)."""
        out: frozenset[str] | None = None
        for ns, _ in self.clauses:
            if ns is not None:
                out = ns if out is None else out & ns
        return out

    @property
    def anchor(self) -> tuple[str, frozenset[str]] | None:
        for _, sel in self.clauses:
            a = sel.anchor()
            if a is not None:
                return a
        return None

    @property
    def never(self) -> bool:
        return any(sel.nothing for _, sel in self.clauses) or self.namespaces == frozenset()

    def __call__(self, pi: PodInfo) -> bool:
        if self.skip_terminating and pi.deletion_ts is not None:
            return False
        if self.owner_uid is not None and _controller_uid(pi.pod) != self.owner_uid:
            return False
        for ns, sel in self.clauses:
            if ns is not None and pi.namespace not in ns:
                return False
            if not sel.matches(pi.labels):
                return False
        return True


def _controller_uid(pod: Mapping[str, Any]) -> str | None:
    for ref in (pod.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref.get("uid")
    return None


class PodSubscriber(Protocol):
    def pod_added(self, pi: PodInfo, slot: int) -> None: ...

    def pod_removed(self, pi: PodInfo, slot: int) -> None: ...


@dataclass(slots=True)
class _Counter:
    matcher: PodMatcher
    counts: np.ndarray  # int32 per slot


class PodCountIndex:
    """Per-node counts of the pods matching each requested ``PodMatcher``, kept current via the listener hook.

    A counter is built on first use by one pass over the pods of its namespaces, then updated per pod event; an
    event only tests the counters whose selector can match the pod (``SelectorDispatch``). Counters unused for a
    while are dropped (LRU) so one-off selectors do not tax later pod events.
    """

    def __init__(self, nodes: NodeTable, max_counters: int = 512) -> None:
        self.nodes = nodes
        self._max = max_counters
        self._pods: dict[str, tuple[int, PodInfo]] = {}
        self._by_slot: dict[int, set[str]] = {}
        self._by_ns: dict[str, set[str]] = {}
        self._by_label: dict[tuple[str, str], set[str]] = {}  # (key, value) -> uids, so builds touch few pods
        self._counters: OrderedDict[Any, _Counter] = OrderedDict()
        # Counters by the namespace their pods must be in (None: any namespace), then by selector anchor.
        self._dispatch: dict[str | None, SelectorDispatch[_Counter]] = {}
        self._subscribers: list[PodSubscriber] = []
        for slot in np.flatnonzero(nodes.valid):
            for pi in list(nodes.pods_on(int(slot)).values()):
                self._record(pi, int(slot))
        nodes.add_listener(self)

    @classmethod
    def of(cls, nodes: NodeTable) -> PodCountIndex:
        """The index of ``nodes`` shared by every plugin that counts pods per node (PodTopologySpread,
        InterPodAffinity, every profile): one bookkeeping per pod event rather than one per plugin. Counters are
        keyed by their matcher, so sharing them changes no answer."""
        index: PodCountIndex = nodes.shared("PodCountIndex", lambda: cls(nodes))
        return index

    # -- queries

    def counts(self, matcher: PodMatcher) -> np.ndarray:
        """Matching pods per slot (int32, one entry per NodeTable slot). Do not modify."""
        key = matcher.key
        c = self._counters.get(key)
        if c is None:
            c = self._build(matcher)
        else:
            self._counters.move_to_end(key)
        if len(c.counts) < self.nodes.capacity:
            c.counts = _grow(c.counts, self.nodes.capacity)
        return c.counts

    def _build(self, matcher: PodMatcher) -> _Counter:
        counts = np.zeros(max(self.nodes.capacity, 1), dtype=np.int32)
        c = _Counter(matcher, counts)
        self._counters[matcher.key] = c
        if not matcher.never:
            namespaces = matcher.namespaces
            anchor = matcher.anchor
            candidates: Iterable[str]
            if anchor is not None:
                key, values = anchor
                candidates = [uid for v in values for uid in self._by_label.get((key, v), ())]
            elif namespaces is not None:
                candidates = [uid for ns in namespaces for uid in self._by_ns.get(ns, ())]
            else:
                candidates = self._pods.keys()
            for uid in candidates:
                slot, pi = self._pods[uid]
                if matcher(pi):
                    counts[slot] += 1
            for ns in [None] if namespaces is None else namespaces:
                self._dispatch.setdefault(ns, SelectorDispatch()).add(c, matcher.anchor)
        if len(self._counters) > self._max:
            _, old = self._counters.popitem(last=False)
            for d in self._dispatch.values():
                d.remove(old, old.matcher.anchor)
        return c

    # -- listener hook

    def on_pod_added(self, pi: PodInfo, slot: int) -> None:
        if pi.uid in self._pods:
            self._forget(pi.uid)
        self._record(pi, slot)
        self._apply(pi, slot, 1)

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None:
        self._forget(pi.uid)

    def on_pod_replaced(self, old: PodInfo, new: PodInfo, slot: int) -> None:
        # Same footprint (NodeTable.replace_pod): counts and subscribers' term counts stay; keep the new object,
        # moved to the end as a forget and re-record would.
        if self._pods.pop(new.uid, None) is None:
            self.on_pod_added(new, slot)
            return
        self._pods[new.uid] = (slot, new)

    def on_node_changed(self, slot: int) -> None:
        # Labels do not matter here (domains are computed per cycle). What matters is a node that went away with
        # its pods, or pods that reached the slot without a pod event: resync the slot from the table.
        known = self._by_slot.get(slot, set())
        if slot >= len(self.nodes.valid) or not self.nodes.valid[slot]:
            for uid in list(known):
                self._forget(uid)
            return
        current = self.nodes.pods_on(slot)
        if len(current) == len(known) and all(uid in current for uid in known):
            return
        for uid in list(known):
            self._forget(uid)
        for pi in list(current.values()):
            self.on_pod_added(pi, slot)

    def subscribe(self, subscriber: PodSubscriber) -> None:
        """Also tell ``subscriber`` of every known pod and of later arrivals/departures (one bookkeeping for all)."""
        self._subscribers.append(subscriber)
        for slot, pi in self._pods.values():
            subscriber.pod_added(pi, slot)

    def _record(self, pi: PodInfo, slot: int) -> None:
        # Once per pod assumed or added: no ``setdefault(key, set())``, which builds a set that is thrown away
        # whenever the key is there already (the usual case).
        uid = pi.uid
        self._pods[uid] = (slot, pi)
        uids = self._by_slot.get(slot)
        if uids is None:
            self._by_slot[slot] = {uid}
        else:
            uids.add(uid)
        uids = self._by_ns.get(pi.namespace)
        if uids is None:
            self._by_ns[pi.namespace] = {uid}
        else:
            uids.add(uid)
        by_label = self._by_label
        for kv in pi.labels.items():
            uids = by_label.get(kv)
            if uids is None:
                by_label[kv] = {uid}
            else:
                uids.add(uid)
        for sub in self._subscribers:
            sub.pod_added(pi, slot)

    def _forget(self, uid: str) -> None:
        rec = self._pods.pop(uid, None)
        if rec is None:
            return
        slot, pi = rec
        # Three indexes keyed by slot, namespace and (label, value): typed loosely so one loop serves all.
        entries: tuple[tuple[dict[Any, set[str]], Any], ...] = (
            (self._by_slot, slot),
            (self._by_ns, pi.namespace),
            *((self._by_label, kv) for kv in pi.labels.items()),
        )
        for index, key in entries:
            uids = index.get(key)
            if uids is not None:
                uids.discard(uid)
                if not uids:
                    del index[key]
        self._apply(pi, slot, -1)
        for sub in self._subscribers:
            sub.pod_removed(pi, slot)

    def _apply(self, pi: PodInfo, slot: int, delta: int) -> None:
        for ns in (None, pi.namespace):
            dispatch = self._dispatch.get(ns)
            if not dispatch:
                continue
            for c in dispatch.candidates(pi.labels):
                if c.matcher(pi):
                    if slot >= len(c.counts):
                        c.counts = _grow(c.counts, max(slot + 1, self.nodes.capacity))
                    c.counts[slot] += delta


def _grow(arr: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def codes_at(lc: LabelCodes, idx: np.ndarray) -> np.ndarray:
    """``lc.codes[idx]``, treating slots beyond the snapshot (nodes added meanwhile) as lacking the label."""
    if len(idx) and int(idx.max()) >= len(lc.codes):
        return np.where(idx < len(lc.codes), lc.codes[np.minimum(idx, len(lc.codes) - 1)], -1)
    return lc.codes[idx]


# --------------------------------------------------------------------------------------------------------------------
# Node inclusion: taints with NoSchedule/NoExecute must be tolerated (nodeTaintsPolicy: Honor).


def toleration_tolerates(tol: Mapping[str, Any], key: str, value: str, effect: str) -> bool:
    """``v1.Toleration.ToleratesTaint`` for the taint ``(key, value, effect)``."""
    tol_effect = tol.get("effect") or ""
    if tol_effect and tol_effect != effect:
        return False
    tol_key = tol.get("key") or ""
    if tol_key and tol_key != key:
        return False
    op = tol.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (tol.get("value") or "") == value
    return False


def tolerated_mask(nodes: NodeTable, tolerations: Sequence[Mapping[str, Any]]) -> np.ndarray:
    """Slots whose NoSchedule/NoExecute taints are all tolerated (one check per distinct taint set)."""
    ok = np.array(
        [
            all(
                any(toleration_tolerates(t, key, value, effect) for t in tolerations)
                for key, value, effect in taints
                if effect in ("NoSchedule", "NoExecute")
            )
            for taints in nodes.taint_sets
        ]
        + [True],
        dtype=bool,
    )
    groups = np.asarray(nodes.taint_group)
    mask = ok[np.where(groups >= 0, groups, len(ok) - 1)]
    return _grow(mask, nodes.capacity) if len(mask) < nodes.capacity else mask


# --------------------------------------------------------------------------------------------------------------------
# Parsed constraints.


@dataclass(frozen=True, slots=True)
class Constraint:
    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    honor_node_affinity: bool = True
    honor_node_taints: bool = False

    def matcher(self, namespace: str) -> PodMatcher:
        # Upstream's countPodsMatchSelector counts nothing for an empty selector.
        sel = LabelSelector(nothing=True) if self.selector.empty else self.selector
        return PodMatcher(((frozenset((namespace,)), sel),), skip_terminating=True)


def parse_constraints(
    raw: Iterable[Mapping[str, Any]], pod_labels: Mapping[str, str], action: str
) -> list[Constraint]:
    """The constraints with ``whenUnsatisfiable == action``; raises ``SelectorError`` on a bad selector."""
    out: list[Constraint] = []
    for c in raw:
        if (c.get("whenUnsatisfiable") or "") != action:
            continue
        selector = LabelSelector.parse(c.get("labelSelector"))
        extra = [
            Requirement(k, "In", frozenset((pod_labels[k],)))
            for k in c.get("matchLabelKeys") or ()
            if k in pod_labels
        ]
        if extra:
            selector = selector.with_requirements(extra)
        min_domains = c.get("minDomains")
        out.append(
            Constraint(
                max_skew=int(c.get("maxSkew") or 0),
                topology_key=c.get("topologyKey") or "",
                selector=selector,
                min_domains=1 if min_domains is None else int(min_domains),
                honor_node_affinity=(c.get("nodeAffinityPolicy") or HONOR) == HONOR,
                honor_node_taints=(c.get("nodeTaintsPolicy") or IGNORE) == HONOR,
            )
        )
    return out


# --------------------------------------------------------------------------------------------------------------------
# Default constraints need the workloads that select or own the pod.


_OWNER_KINDS = {
    ("v1", "ReplicationController"): "ReplicationController",
    ("apps/v1", "ReplicaSet"): "ReplicaSet",
    ("apps/v1", "StatefulSet"): "StatefulSet",
}


_EVERYTHING = LabelSelector()  # what ``from_set({})`` gives; shared as selectors are not modified


def default_selector(pod: PodInfo, lister: WorkloadLister) -> LabelSelector:
    """Upstream ``helper.DefaultSelector``: the union of matching Services' selectors and the controller's."""
    meta = pod.pod.get("metadata") or {}
    namespace, labels = pod.namespace, pod.labels
    label_set: dict[str, str] = {}
    for svc in lister.services(namespace):
        sel = (svc.get("spec") or {}).get("selector") or {}
        if all(labels.get(k) == v for k, v in sel.items()):
            label_set.update(sel)
    selector = LabelSelector.from_set(label_set) if label_set else _EVERYTHING
    owner = next((r for r in meta.get("ownerReferences") or () if r.get("controller")), None)
    kind = _OWNER_KINDS.get((owner.get("apiVersion"), owner.get("kind"))) if owner else None
    if owner is None or kind is None:
        return selector
    obj = lister.get(kind, namespace, owner.get("name") or "")
    if obj is None:
        return selector
    spec_sel = (obj.get("spec") or {}).get("selector")
    if kind == "ReplicationController":
        label_set.update(spec_sel or {})
        return LabelSelector.from_set(label_set)
    try:
        other = LabelSelector.parse(spec_sel)
    except SelectorError:
        return selector
    if other.nothing:
        return selector
    return selector.with_requirements(other.requirements)


# --------------------------------------------------------------------------------------------------------------------
# Cycle state.


@dataclass(slots=True)
class _HardConstraint:
    c: Constraint
    codes: LabelCodes
    counts: np.ndarray  # matching pods per domain code (+1 trailing entry for "absent")
    present: np.ndarray  # which domain codes are eligible domains (+1 trailing)
    domains: int
    self_match: bool
    eligible: np.ndarray  # per-slot inclusion (policies + all keys present), for PreFilterExtensions

    def min_match(self) -> int:
        if self.domains < self.c.min_domains:
            return 0
        real = self.counts[:-1][self.present[:-1]]
        return int(real.min()) if len(real) else _MAX_INT32


@dataclass(slots=True)
class _PreFilterState:
    constraints: list[_HardConstraint] = field(default_factory=list)

    def copy(self) -> _PreFilterState:
        return _PreFilterState(
            [
                _HardConstraint(
                    h.c, h.codes, h.counts.copy(), h.present.copy(), h.domains, h.self_match, h.eligible
                )
                for h in self.constraints
            ]
        )


@dataclass(slots=True)
class _SoftConstraint:
    c: Constraint
    codes: LabelCodes
    weight: float
    domain_counts: np.ndarray | None  # per effective code; None for hostname (per-node counts are used)
    node_counts: np.ndarray  # matching pods per slot


@dataclass(slots=True)
class _PreScoreState:
    constraints: list[_SoftConstraint]
    ignored: np.ndarray  # per slot
    ignored_aligned: np.ndarray | None = None  # ignored[idx] of the last Score call, for NormalizeScore


_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


# --------------------------------------------------------------------------------------------------------------------
# The plugin.


class PodTopologySpread:
    """PreFilter (+ extensions), Filter, PreScore, Score (+ NormalizeScore) and EnqueueExtensions."""

    name = NAME

    def __init__(self, args: PodTopologySpreadArgs, handle: Handle | None = None) -> None:
        self.handle = handle
        self.system_defaulted = args.defaulting_type == SYSTEM_DEFAULTING
        # parse_constraints reads the API's camelCase form, as it does for a pod's own constraints.
        self.default_constraints: list[dict[str, Any]] = [
            c.model_dump(by_alias=True, exclude_none=True) for c in args.effective_default_constraints
        ]
        self.workloads: WorkloadLister | None = handle.workloads if handle is not None else None
        # Parsed default constraints per action, when they do not depend on the pod's labels (no matchLabelKeys).
        self._parsed_defaults: dict[str, list[Constraint]] | None = (
            None if any(c.get("matchLabelKeys") for c in self.default_constraints) else {}
        )
        self._index: PodCountIndex | None = None
        cache = getattr(handle, "cache", None)
        if cache is not None:  # start following pod events now rather than scanning at the first cycle
            self.index(cache.table)

    def index(self, nodes: NodeTable) -> PodCountIndex:
        if self._index is None or self._index.nodes is not nodes:
            self._index = PodCountIndex.of(nodes)
        return self._index

    # -- queueing

    @property
    def never_signs(self) -> bool:
        """Opportunistic batching: with default constraints (the system defaults included) no pod is signable,
        as upstream (spreading is not local to a node), so the profile signs nothing."""
        return bool(self.default_constraints)

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Pods with their own spread constraints are not signable; others have no fragment."""
        if pod.topology_spread_constraints:
            return None
        return ()

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Add"),
            ClusterEvent("Pod", "UpdatePodLabel"),
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "Delete"),
            ClusterEvent("Node", "UpdateNodeLabel"),
            ClusterEvent("Node", "UpdateNodeTaint"),
        ]

    def waits_for_assigned_pods(self, qpod: QueuedPodInfo) -> bool:
        """A pod this plugin rejected may fit once another pod is bound (the spread changed)."""
        return NAME in qpod.unschedulable_plugins

    def assigned_pod_may_help(
        self,
        qpod: QueuedPodInfo,
        assigned: PodInfo,
        namespace_labels: Callable[[], Mapping[str, str] | None],
    ) -> bool:
        # Spreading counts pods of the pod's own namespace only.
        return NAME in qpod.unschedulable_plugins and qpod.pod_info.namespace == assigned.namespace

    # -- constraints of a pod

    def constraints_for(self, pod: PodInfo, action: str) -> list[Constraint]:
        raw = pod.topology_spread_constraints
        if raw:
            return parse_constraints(raw, pod.labels, action)
        return self._default_constraints(pod, action)

    def _default_constraints(self, pod: PodInfo, action: str) -> list[Constraint]:
        memo = self._parsed_defaults
        constraints = memo.get(action) if memo is not None else None
        if constraints is None:
            constraints = parse_constraints(self.default_constraints, pod.labels, action)
            if memo is not None:
                memo[action] = constraints
        if not constraints:
            return []
        if self.workloads is not None:
            if not pod.owner_kind and not self.workloads.services(pod.namespace):
                return []  # no Service and no owner to take a selector from: nothing to spread by
            selector = default_selector(pod, self.workloads)
            if selector.empty:
                return []
            return [_with_selector(c, selector) for c in constraints]
        # No workload informers on the handle: approximate the owner's selector by "pods with the same controller".
        owner = _controller_uid(pod.pod)
        if owner is None:
            return []
        return [_with_selector(c, _OwnerSelector(owner)) for c in constraints]

    def _matcher(self, c: Constraint, namespace: str) -> PodMatcher:
        if isinstance(c.selector, _OwnerSelector):
            return PodMatcher(
                ((frozenset((namespace,)), LabelSelector()),),
                skip_terminating=True,
                owner_uid=c.selector.owner,
            )
        return c.matcher(namespace)

    def _inclusion(self, c: Constraint, pod: PodInfo, nodes: NodeTable) -> np.ndarray | None:
        """Per-slot mask of nodes the constraint's inclusion policies admit (None = all)."""
        mask: np.ndarray | None = None
        if c.honor_node_affinity:
            required = RequiredNodeAffinity.of_pod(pod.pod)
            if not required.trivial:
                mask = required.node_mask(nodes)
        if c.honor_node_taints:
            tol = tolerated_mask(nodes, pod.tolerations)
            mask = tol if mask is None else mask & tol
        return mask

    # -- filtering

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        try:
            constraints = self.constraints_for(pod, DO_NOT_SCHEDULE)
        except SelectorError as e:
            return None, Status.error(f"obtaining pod's hard topology spread constraints: {e}")
        if not constraints:
            return None, Status.skip()
        index = self.index(nodes)
        all_codes = [label_codes(nodes, c.topology_key) for c in constraints]
        has_all_keys = np.asarray(nodes.valid, dtype=bool).copy()
        for lc in all_codes:
            has_all_keys &= lc.codes >= 0
        s = _PreFilterState()
        for c, lc in zip(constraints, all_codes, strict=True):
            eligible = has_all_keys
            inclusion = self._inclusion(c, pod, nodes)
            if inclusion is not None:
                eligible = eligible & inclusion
            slots = np.flatnonzero(eligible)
            codes = lc.codes[slots]
            per_node = index.counts(self._matcher(c, pod.namespace))
            counts = np.bincount(codes, weights=per_node[slots], minlength=lc.size + 1).astype(np.int64)
            present = np.bincount(codes, minlength=lc.size + 1) > 0
            s.constraints.append(
                _HardConstraint(
                    c, lc, counts, present, int(present.sum()), c.selector.matches(pod.labels), eligible
                )
            )
        state.write(_PRE_FILTER_KEY, s)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        s: _PreFilterState | None = state.read(_PRE_FILTER_KEY)
        bits = np.zeros(len(idx), dtype=np.uint64)
        if s is None or not s.constraints:
            return Filtered(bits)
        undecided = np.ones(len(idx), dtype=bool)
        for h in s.constraints:
            codes = codes_at(h.codes, idx)
            missing = undecided & (codes < 0)
            bits[missing] = 2
            undecided &= ~missing
            skew = h.counts[codes] + int(h.self_match) - h.min_match()
            too_skewed = undecided & (skew > h.c.max_skew)
            bits[too_skewed] = 1
            undecided &= ~too_skewed
        return Filtered(
            bits, (ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH), (False, True)
        )

    # -- PreFilterExtensions (preemption's "what if")

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable) -> Status:
        self._update_with_pod(state, pod, other, node, 1)
        return Status.success()

    def remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable
    ) -> Status:
        self._update_with_pod(state, pod, other, node, -1)
        return Status.success()

    def _update_with_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, delta: int
    ) -> None:
        s: _PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None or not s.constraints or other.namespace != pod.namespace:
            return
        if any(node >= len(h.codes.codes) or h.codes.codes[node] < 0 for h in s.constraints):
            return
        s = s.copy()  # the CycleState may be a shallow clone shared with the main cycle
        for h in s.constraints:
            if not _selects(h.c.selector, other) or not h.eligible[node]:
                continue
            code = int(h.codes.codes[node])
            h.counts[code] += delta
            h.present[code] = True
        state.write(_PRE_FILTER_KEY, s)

    # -- scoring

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        if nodes.num_nodes == 0:
            return Status.skip()
        has_own = bool(pod.topology_spread_constraints)
        try:
            constraints = self.constraints_for(pod, SCHEDULE_ANYWAY)
        except SelectorError as e:
            return Status.error(f"obtaining pod's soft topology spread constraints: {e}")
        if not constraints:
            return Status.skip()
        index = self.index(nodes)
        require_all = has_own or not self.system_defaulted
        all_codes = [label_codes(nodes, c.topology_key) for c in constraints]
        has_all_keys = np.asarray(nodes.valid, dtype=bool).copy()
        for lc in all_codes:
            has_all_keys &= lc.codes >= 0
        ignored = ~has_all_keys if require_all else np.zeros(nodes.capacity, dtype=bool)
        scored = idx[~ignored[idx]]
        soft: list[_SoftConstraint] = []
        for c, lc in zip(constraints, all_codes, strict=True):
            node_counts = index.counts(self._matcher(c, pod.namespace))
            if c.topology_key == LABEL_HOSTNAME:
                soft.append(_SoftConstraint(c, lc, math.log(len(scored) + 2), None, node_counts))
                continue
            eff = _effective_codes(lc)
            tracked = np.bincount(eff[scored], minlength=lc.size + 1) > 0
            included = np.asarray(nodes.valid, dtype=bool) if not require_all else has_all_keys
            inclusion = self._inclusion(c, pod, nodes)
            if inclusion is not None:
                included = included & inclusion
            slots = np.flatnonzero(included)
            counts = np.bincount(eff[slots], weights=node_counts[slots], minlength=lc.size + 1).astype(
                np.int64
            )
            counts[~tracked] = 0
            soft.append(_SoftConstraint(c, lc, math.log(int(tracked.sum()) + 2), counts, node_counts))
        state.write(_PRE_SCORE_KEY, _PreScoreState(soft, ignored))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        if s is None:
            return np.zeros(len(idx), dtype=np.int64)
        total = np.zeros(len(idx), dtype=np.float64)
        for sc in s.constraints:
            codes = codes_at(sc.codes, idx)
            has_key = codes >= 0
            if sc.domain_counts is None:
                cnt = sc.node_counts[idx].astype(np.float64)
            else:
                cnt = sc.domain_counts[_effective_codes(sc.codes)[idx]].astype(np.float64)
            total += np.where(has_key, cnt * sc.weight + float(sc.c.max_skew - 1), 0.0)
        ignored = s.ignored[idx]
        s.ignored_aligned = ignored
        # Go's math.Round: half away from zero (scores are never negative).
        return np.where(ignored, 0, np.floor(total + 0.5)).astype(np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        scores = np.asarray(scores, dtype=np.int64)
        if s is None:
            return scores
        ignored = s.ignored_aligned if s.ignored_aligned is not None else np.zeros(len(scores), dtype=bool)
        valid = scores[~ignored]
        if len(valid) == 0:
            return np.zeros_like(scores)
        lo, hi = int(valid.min()), int(valid.max())
        if hi == 0:
            out = np.full_like(scores, MAX_NODE_SCORE)
        else:
            out = MAX_NODE_SCORE * (hi + lo - scores) // hi
        out[ignored] = 0
        return out


class _OwnerSelector(LabelSelector):
    """Stand-in selector for default spreading without workload informers: "same controller as the pod"."""

    __slots__ = ("owner",)

    def __init__(self, owner: str) -> None:
        super().__init__()
        self.owner = owner
        self.key = ("owner", owner)

    @property
    def empty(self) -> bool:
        return False

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        # Only reached for the incoming pod itself (self-match), which has this owner by construction.
        return True


def _selects(selector: LabelSelector, pi: PodInfo) -> bool:
    if isinstance(selector, _OwnerSelector):
        return _controller_uid(pi.pod) == selector.owner
    return selector.matches(pi.labels)


def _with_selector(c: Constraint, selector: LabelSelector) -> Constraint:
    return Constraint(
        c.max_skew, c.topology_key, selector, c.min_domains, c.honor_node_affinity, c.honor_node_taints
    )


def _effective_codes(lc: LabelCodes) -> np.ndarray:
    """Codes with "label absent" folded into the domain of value "" (upstream reads a missing map key as "")."""
    return np.where(lc.codes >= 0, lc.codes, lc.vocab.get("", lc.size))


PLUGIN = PluginDefinition(NAME, PodTopologySpread, PodTopologySpreadArgs)
