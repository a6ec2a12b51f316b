"""InterPodAffinity: required and preferred pod affinity / anti-affinity, both ways.

Upstream: ``pkg/scheduler/framework/plugins/interpodaffinity`` (1.36) and ``framework.AffinityTerm``.

How it stays fast: nothing scans all pods in a cycle.
- The incoming pod's terms ask "how many existing pods match this term, per node": a ``PodCountIndex`` counter
  (kept current through the NodeTable listener hook), aggregated per topology domain with ``np.bincount``.
- Existing pods' terms ask the reverse, "which existing terms match the incoming pod": ``AffinityTermIndex`` groups
  the terms of all scheduled pods by identity (a ReplicaSet's 1,000 pods share one group) with a per-node count of
  the pods carrying each. A cycle tests the incoming pod once per *distinct* term, then aggregates the matching
  groups' counts per domain.

Semantics kept from upstream
- A term matches a pod when the pod's namespace is in the term's namespaces (default: the term owner's own) or
  its namespace's labels match ``namespaceSelector`` (``{}`` = all), and its labels match ``labelSelector``
  (``null`` matches nothing). ``matchLabelKeys``/``mismatchLabelKeys`` add ``In``/``NotIn`` the owner's values
  (idempotent with the API server's own merge).
- Required affinity: a node passes when for every term it has the topology key and some existing pod matching
  *all* terms sits in its domain; failing that, the first pod of a group passes if no pod anywhere matches and it
  matches all of its own terms. Missing a topology key always fails (unresolvable).
- Required anti-affinity, both the incoming pod's and existing pods' against the incoming pod.
- Score: Σ over existing pods of ± weights of matching preferred terms (both directions) plus
  ``hardPodAffinityWeight`` for existing pods' required affinity terms the incoming pod matches, per topology
  domain; then min-max normalised to 0..100.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import StrictBool, StrictInt

from kubesched.scheduler.config.args import ArgsModel
from kubesched.scheduler.config.errors import FieldError, invalid
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.handle import Handle, NamespaceLister
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
    ParseCache,
    Requirement,
    SelectorDispatch,
    SelectorError,
    label_codes,
)
from kubesched.scheduler.plugins.pod_topology_spread import PodCountIndex, PodMatcher, codes_at

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo

NAME = "InterPodAffinity"


class InterPodAffinityArgs(ArgsModel):
    hard_pod_affinity_weight: StrictInt = 1
    ignore_preferred_terms_of_existing_pods: StrictBool = False

    def validate_args(self, path: str) -> list[FieldError]:
        w = self.hard_pod_affinity_weight
        if not 0 <= w <= 100:
            return [invalid(f"{path}.hardPodAffinityWeight", w, "not in valid range [0, 100]")]
        return []


ERR_REASON_EXISTING_ANTI_AFFINITY = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"

# --------------------------------------------------------------------------------------------------------------------
# Terms.


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A parsed ``PodAffinityTerm`` (upstream ``framework.AffinityTerm``)."""

    namespaces: frozenset[str]
    namespace_selector: LabelSelector
    selector: LabelSelector
    topology_key: str

    @property
    def key(self) -> tuple[Any, ...]:
        return (
            tuple(sorted(self.namespaces)),
            self.namespace_selector.key,
            self.selector.key,
            self.topology_key,
        )

    def matches(self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None) -> bool:
        if namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(labels)
        return False

    def clause(self) -> tuple[frozenset[str] | None, LabelSelector]:
        """As a ``PodMatcher`` clause; only valid once the namespace selector is resolved (``resolved``)."""
        return (None if self.namespace_selector.empty else self.namespaces), self.selector

    def resolved(self, namespaces: NamespaceLister | None) -> AffinityTerm:
        """Upstream ``mergeAffinityTermNamespacesIfNotEmpty``: unroll a non-empty namespace selector into names."""
        sel = self.namespace_selector
        if sel.empty or sel.nothing:
            return self
        names = set(self.namespaces)
        if namespaces is not None:
            for ns in namespaces.list():
                meta = ns.get("metadata") or {}
                if sel.matches(meta.get("labels") or {}):
                    names.add(meta.get("name") or "")
        return AffinityTerm(frozenset(names), LabelSelector(nothing=True), self.selector, self.topology_key)


@dataclass(frozen=True, slots=True)
class WeightedTerm:
    weight: int
    term: AffinityTerm


def parse_term(raw: Mapping[str, Any], namespace: str, labels: Mapping[str, str]) -> AffinityTerm:
    """Parse one ``PodAffinityTerm`` of a pod in ``namespace`` with ``labels``; raises ``SelectorError``."""
    ns_selector_raw = raw.get("namespaceSelector")
    names = list(raw.get("namespaces") or ())
    if not names and ns_selector_raw is None:
        names = [namespace]
    selector = LabelSelector.parse(raw.get("labelSelector"))
    extra = [
        Requirement(k, "In", frozenset((labels[k],))) for k in raw.get("matchLabelKeys") or () if k in labels
    ]
    extra += [
        Requirement(k, "NotIn", frozenset((labels[k],)))
        for k in raw.get("mismatchLabelKeys") or ()
        if k in labels
    ]
    if extra:
        selector = selector.with_requirements(extra)
    return AffinityTerm(
        frozenset(names), LabelSelector.parse(ns_selector_raw), selector, raw.get("topologyKey") or ""
    )


@dataclass(frozen=True, slots=True)
class PodAffinityTerms:
    """All four kinds of terms of one pod."""

    required_affinity: tuple[AffinityTerm, ...] = ()
    required_anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[WeightedTerm, ...] = ()
    preferred_anti_affinity: tuple[WeightedTerm, ...] = ()

    @property
    def any(self) -> bool:
        return bool(
            self.required_affinity
            or self.required_anti_affinity
            or self.preferred_affinity
            or self.preferred_anti_affinity
        )


_NO_TERMS = PodAffinityTerms()


def _parse_pod_terms(
    namespace: str, labels: Mapping[str, str], affinity: Mapping[str, Any]
) -> PodAffinityTerms:
    def required(section: str) -> tuple[AffinityTerm, ...]:
        raw = (affinity.get(section) or {}).get("requiredDuringSchedulingIgnoredDuringExecution") or ()
        return tuple(parse_term(t, namespace, labels) for t in raw)

    def preferred(section: str) -> tuple[WeightedTerm, ...]:
        raw = (affinity.get(section) or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        return tuple(
            WeightedTerm(
                int(t.get("weight") or 0), parse_term(t.get("podAffinityTerm") or {}, namespace, labels)
            )
            for t in raw
        )

    return PodAffinityTerms(
        required("podAffinity"),
        required("podAntiAffinity"),
        preferred("podAffinity"),
        preferred("podAntiAffinity"),
    )


_terms_cache = ParseCache(_parse_pod_terms, size=4096)


def pod_terms(pi: PodInfo) -> PodAffinityTerms:
    """The pod's parsed terms (shared between pods of one template); raises ``SelectorError``."""
    if not pi.pod_affinity and not pi.pod_anti_affinity:
        return _NO_TERMS
    affinity = {"podAffinity": pi.pod_affinity, "podAntiAffinity": pi.pod_anti_affinity}
    return _terms_cache.get(pi.namespace, pi.labels, affinity)


def has_preferred(pi: PodInfo) -> bool:
    return any(
        (section or {}).get("preferredDuringSchedulingIgnoredDuringExecution")
        for section in (pi.pod_affinity, pi.pod_anti_affinity)
    )


# --------------------------------------------------------------------------------------------------------------------
# Namespaces (for namespaceSelector).


def _namespace_labels(lister: NamespaceLister | None, name: str) -> dict[str, str]:
    if lister is None:
        return {}
    ns = lister.get(name)
    return dict(((ns or {}).get("metadata") or {}).get("labels") or {})


# --------------------------------------------------------------------------------------------------------------------
# Existing pods' terms, grouped.

REQUIRED_AFFINITY, REQUIRED_ANTI, PREFERRED_AFFINITY, PREFERRED_ANTI = range(4)


@dataclass(slots=True)
class TermGroup:
    """All existing pods carrying one identical term of one kind: how many per node slot."""

    kind: int
    weight: int
    term: AffinityTerm
    counts: np.ndarray  # int32 per slot
    total: int = 0


class AffinityTermIndex:
    """Terms of scheduled pods grouped by identity, with per-node carrier counts (subscriber of PodCountIndex)."""

    def __init__(self, index: PodCountIndex) -> None:
        self.nodes = index.nodes
        self.groups: dict[tuple[Any, ...], TermGroup] = {}
        self._by_kind: list[SelectorDispatch[TermGroup]] = [SelectorDispatch() for _ in range(4)]
        index.subscribe(self)

    def has(self, kind: int) -> bool:
        """Whether any scheduled pod carries a term of ``kind``."""
        return bool(self._by_kind[kind])

    def matching(self, kind: int, pod: PodInfo, ns_labels: Mapping[str, str] | None) -> list[TermGroup]:
        """Groups of ``kind`` whose term matches ``pod`` (only groups whose selector can match are tested)."""
        dispatch = self._by_kind[kind]
        if not dispatch:
            return []  # the usual case: no scheduled pod has such a term (asked several times per cycle)
        return [
            g for g in dispatch.candidates(pod.labels) if g.term.matches(pod.namespace, pod.labels, ns_labels)
        ]

    @staticmethod
    def _entries(pi: PodInfo) -> list[tuple[int, int, AffinityTerm]]:
        if pi.pod_affinity is None and pi.pod_anti_affinity is None:
            return []  # most pods: nothing to index, asked for every pod placed or removed
        try:
            t = pod_terms(pi)
        except SelectorError:
            return []  # the API server rejects such pods; one that slipped through contributes nothing
        return [
            *((REQUIRED_AFFINITY, 0, x) for x in t.required_affinity),
            *((REQUIRED_ANTI, 0, x) for x in t.required_anti_affinity),
            *((PREFERRED_AFFINITY, w.weight, w.term) for w in t.preferred_affinity),
            *((PREFERRED_ANTI, w.weight, w.term) for w in t.preferred_anti_affinity),
        ]

    def pod_added(self, pi: PodInfo, slot: int) -> None:
        for kind, weight, term in self._entries(pi):
            key = (kind, weight, term.key)
            g = self.groups.get(key)
            if g is None:
                g = TermGroup(
                    kind, weight, term, np.zeros(max(self.nodes.capacity, slot + 1), dtype=np.int32)
                )
                self.groups[key] = g
                self._by_kind[kind].add(g, term.selector.anchor())
            if slot >= len(g.counts):
                g.counts = _grow(g.counts, max(slot + 1, self.nodes.capacity))
            g.counts[slot] += 1
            g.total += 1

    def pod_removed(self, pi: PodInfo, slot: int) -> None:
        for kind, weight, term in self._entries(pi):
            key = (kind, weight, term.key)
            g = self.groups.get(key)
            if g is None:
                continue
            g.counts[slot] -= 1
            g.total -= 1
            if g.total <= 0:
                del self.groups[key]
                self._by_kind[kind].remove(g, term.selector.anchor())


def _grow(arr: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out


def _fit(arr: np.ndarray, size: int) -> np.ndarray:
    return arr if len(arr) == size else (_grow(arr, size) if len(arr) < size else arr[:size])


def _domain_sums(lc: LabelCodes, per_slot: np.ndarray) -> np.ndarray:
    """Σ per_slot over the slots of each domain of ``lc`` (+1 trailing entry for "no label"), int64."""
    per_slot = _fit(per_slot, len(lc.codes))
    slots = np.flatnonzero((lc.codes >= 0) & (per_slot != 0))
    if not len(slots):
        return np.zeros(lc.size + 1, dtype=np.int64)
    sums = np.bincount(lc.codes[slots], weights=per_slot[slots], minlength=lc.size + 1)
    return np.rint(sums).astype(np.int64)  # float64 sums of integers are exact far beyond any pod count


# --------------------------------------------------------------------------------------------------------------------
# Cycle state.


@dataclass(slots=True)
class _PreFilterState:
    terms: PodAffinityTerms  # the incoming pod's, namespace selectors resolved
    namespace_labels: dict[str, str]
    # topology key → (codes, matching count per domain): existing pods' anti-affinity matching the incoming pod,
    # existing pods matching all the incoming affinity terms, existing pods matching the incoming anti-affinity.
    existing_anti: dict[str, tuple[LabelCodes, np.ndarray]] = field(default_factory=dict)
    affinity: dict[str, tuple[LabelCodes, np.ndarray]] = field(default_factory=dict)
    anti: dict[str, tuple[LabelCodes, np.ndarray]] = field(default_factory=dict)
    self_match: bool = False

    def copy(self) -> _PreFilterState:
        def dup(m: dict[str, tuple[LabelCodes, np.ndarray]]) -> dict[str, tuple[LabelCodes, np.ndarray]]:
            return {k: (lc, arr.copy()) for k, (lc, arr) in m.items()}

        return _PreFilterState(
            self.terms,
            self.namespace_labels,
            dup(self.existing_anti),
            dup(self.affinity),
            dup(self.anti),
            self.self_match,
        )


def _bump(
    m: dict[str, tuple[LabelCodes, np.ndarray]], nodes: NodeTable, key: str, slot: int, delta: int
) -> None:
    lc, arr = m.get(key) or (label_codes(nodes, key), None)
    if slot >= len(lc.codes) or lc.codes[slot] < 0:
        return
    if arr is None:
        arr = np.zeros(lc.size + 1, dtype=np.int64)
    arr[lc.codes[slot]] += delta
    m[key] = (lc, arr)


@dataclass(slots=True)
class _PreScoreState:
    scores: dict[str, tuple[LabelCodes, np.ndarray]]  # topology key → score per domain


_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


# --------------------------------------------------------------------------------------------------------------------
# The plugin.


class InterPodAffinity:
    """PreFilter (+ extensions), Filter, PreScore, Score (+ NormalizeScore) and EnqueueExtensions."""

    name = NAME

    def __init__(self, args: InterPodAffinityArgs, handle: Handle | None = None) -> None:
        self.handle = handle
        self.hard_pod_affinity_weight = args.hard_pod_affinity_weight
        self.ignore_preferred_terms_of_existing_pods = args.ignore_preferred_terms_of_existing_pods
        self.namespaces: NamespaceLister | None = handle.namespaces if handle is not None else None
        self._index: PodCountIndex | None = None
        self._terms: AffinityTermIndex | None = None
        cache = getattr(handle, "cache", None)
        if cache is not None:  # start following pod events now rather than scanning at the first cycle
            self.indexes(cache.table)

    def indexes(self, nodes: NodeTable) -> tuple[PodCountIndex, AffinityTermIndex]:
        if self._index is None or self._terms is None or self._index.nodes is not nodes:
            self._index = PodCountIndex.of(nodes)
            self._terms = AffinityTermIndex(self._index)
        return self._index, self._terms

    # -- queueing

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: a pod with affinity or anti-affinity terms is not signable (placing one
        such pod changes the answers on other nodes of its topology domain). Without terms, existing pods'
        terms see the pod through its namespace and labels."""
        if pod.pod_affinity or pod.pod_anti_affinity:
            return None
        return (pod.namespace, pod.labels)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Add"),
            ClusterEvent("Pod", "UpdatePodLabel"),
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeLabel"),
        ]

    def waits_for_assigned_pods(self, qpod: QueuedPodInfo) -> bool:
        """A pod with required pod affinity may become schedulable when a pod its terms match gets bound."""
        pi = qpod.pod_info
        return bool(pi.pod_affinity and pi.pod_affinity.get("requiredDuringSchedulingIgnoredDuringExecution"))

    def assigned_pod_may_help(
        self,
        qpod: QueuedPodInfo,
        assigned: PodInfo,
        namespace_labels: Callable[[], Mapping[str, str] | None],
    ) -> bool:
        """Does the newly bound ``assigned`` pod match a required affinity term of the waiting pod?"""
        if not self.waits_for_assigned_pods(qpod):
            return False
        try:
            terms = pod_terms(qpod.pod_info).required_affinity
        except Exception:  # an unparsable term: let the pod try again rather than wait forever
            return True
        ns_labels = namespace_labels()
        return any(term.matches(assigned.namespace, assigned.labels, ns_labels) for term in terms)

    # -- filtering

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        index, term_index = self.indexes(nodes)
        if not pod.pod_affinity and not pod.pod_anti_affinity and not term_index.has(REQUIRED_ANTI):
            return None, Status.skip()  # the usual case, decided before building any state
        try:
            own = pod_terms(pod)
        except SelectorError as e:
            # As upstream: a pod whose terms do not parse can never fit (the API server normally rejects it).
            return None, Status.unschedulable(f"parsing pod: {e}", unresolvable=True)
        terms = PodAffinityTerms(
            tuple(t.resolved(self.namespaces) for t in own.required_affinity),
            tuple(t.resolved(self.namespaces) for t in own.required_anti_affinity),
        )
        ns_labels = _namespace_labels(self.namespaces, pod.namespace)
        s = _PreFilterState(terms, ns_labels)

        # Existing pods' anti-affinity terms that the incoming pod matches, summed per topology key.
        blocked: dict[str, np.ndarray] = {}
        for g in term_index.matching(REQUIRED_ANTI, pod, ns_labels):
            acc = blocked.get(g.term.topology_key)
            blocked[g.term.topology_key] = g.counts.copy() if acc is None else _sum(acc, g.counts)
        for key, per_slot in blocked.items():
            lc = label_codes(nodes, key)
            dom = _domain_sums(lc, per_slot)
            if dom.any():
                s.existing_anti[key] = (lc, dom)

        if terms.required_affinity:
            matcher = PodMatcher(tuple(t.clause() for t in terms.required_affinity))
            per_slot = index.counts(matcher)
            for t in terms.required_affinity:
                lc = label_codes(nodes, t.topology_key)
                dom = _domain_sums(lc, per_slot)
                prev = s.affinity.get(t.topology_key)
                s.affinity[t.topology_key] = (lc, dom if prev is None else prev[1] + dom)
            s.self_match = all(
                t.matches(pod.namespace, pod.labels, ns_labels) for t in terms.required_affinity
            )
        for t in terms.required_anti_affinity:
            lc = label_codes(nodes, t.topology_key)
            dom = _domain_sums(lc, index.counts(PodMatcher((t.clause(),))))
            prev = s.anti.get(t.topology_key)
            s.anti[t.topology_key] = (lc, dom if prev is None else prev[1] + dom)

        if not s.existing_anti and not terms.required_affinity and not terms.required_anti_affinity:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, s)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        s: _PreFilterState | None = state.read(_PRE_FILTER_KEY)
        bits = np.zeros(len(idx), dtype=np.uint64)
        if s is None:
            return Filtered(bits)
        reasons = (ERR_REASON_AFFINITY, ERR_REASON_ANTI_AFFINITY, ERR_REASON_EXISTING_ANTI_AFFINITY)
        if s.terms.required_affinity:
            missing_key = np.zeros(len(idx), dtype=bool)
            pods_exist = np.ones(len(idx), dtype=bool)
            for t in s.terms.required_affinity:
                lc, dom = s.affinity[t.topology_key]
                codes = codes_at(lc, idx)
                missing_key |= codes < 0
                pods_exist &= dom[codes] > 0
            if not pods_exist.all():
                # The first pod of a group with affinity to itself may go anywhere it has the keys.
                empty = all(not dom.any() for _, dom in s.affinity.values())
                if empty and s.self_match:
                    pods_exist[:] = True
            bits[missing_key | ~pods_exist] = 1
        undecided = bits == 0
        if s.anti:
            hit = np.zeros(len(idx), dtype=bool)
            for lc, dom in s.anti.values():
                hit |= dom[codes_at(lc, idx)] > 0
            bits[undecided & hit] = 2
            undecided &= ~hit
        if s.existing_anti:
            hit = np.zeros(len(idx), dtype=bool)
            for lc, dom in s.existing_anti.values():
                hit |= dom[codes_at(lc, idx)] > 0
            bits[undecided & hit] = 4
        return Filtered(bits, reasons, (True, False, False))

    # -- PreFilterExtensions (preemption's "what if")

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable) -> Status:
        return self._update_with_pod(state, pod, other, node, nodes, 1)

    def remove_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable
    ) -> Status:
        return self._update_with_pod(state, pod, other, node, nodes, -1)

    def _update_with_pod(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: NodeTable, delta: int
    ) -> Status:
        s: _PreFilterState | None = state.read(_PRE_FILTER_KEY)
        if s is None:
            return Status.success()
        try:
            theirs = pod_terms(other)
        except SelectorError:
            theirs = _NO_TERMS
        s = s.copy()  # the CycleState may be a shallow clone shared with the main cycle
        for t in theirs.required_anti_affinity:
            if t.matches(pod.namespace, pod.labels, s.namespace_labels):
                _bump(s.existing_anti, nodes, t.topology_key, node, delta)
        aff = s.terms.required_affinity
        if aff and all(t.matches(other.namespace, other.labels, None) for t in aff):
            for t in aff:
                _bump(s.affinity, nodes, t.topology_key, node, delta)
        for t in s.terms.required_anti_affinity:
            if t.matches(other.namespace, other.labels, None):
                _bump(s.anti, nodes, t.topology_key, node, delta)
        state.write(_PRE_FILTER_KEY, s)
        return Status.success()

    # -- scoring

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        if not pod.pod_affinity and not pod.pod_anti_affinity:
            # The usual pod: no terms of its own, so only scheduled pods' terms could score it.
            if self.ignore_preferred_terms_of_existing_pods:
                return Status.skip()
            _, scheduled_terms = self.indexes(nodes)
            if (
                not scheduled_terms.has(PREFERRED_AFFINITY)
                and not scheduled_terms.has(PREFERRED_ANTI)
                and not (self.hard_pod_affinity_weight > 0 and scheduled_terms.has(REQUIRED_AFFINITY))
            ):
                return Status.skip()
        has_constraints = has_preferred(pod)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return Status.skip()
        try:
            own = pod_terms(pod)
        except SelectorError as e:
            return Status.error(f"failed to parse pod: {e}")
        index, term_index = self.indexes(nodes)
        if (
            not has_constraints
            and not term_index.has(PREFERRED_AFFINITY)
            and not term_index.has(PREFERRED_ANTI)
            and not (self.hard_pod_affinity_weight > 0 and term_index.has(REQUIRED_AFFINITY))
        ):
            return Status.skip()  # nothing could score: no preferred terms here, none on scheduled pods
        ns_labels = _namespace_labels(self.namespaces, pod.namespace)

        weighted: dict[str, np.ndarray] = {}  # topology key → sum of weight * carriers per slot
        touched = False

        def add(key: str, per_slot: np.ndarray, weight: int) -> None:
            nonlocal touched
            lc = label_codes(nodes, key)
            per_slot = _fit(per_slot, len(lc.codes))
            if not touched and (per_slot[lc.codes >= 0] > 0).any():
                touched = True
            contribution = per_slot.astype(np.int64) * weight
            acc = weighted.get(key)
            weighted[key] = contribution if acc is None else _sum(acc, contribution)

        # The incoming pod's preferred terms against all existing pods.
        for sign, terms in ((1, own.preferred_affinity), (-1, own.preferred_anti_affinity)):
            for w in terms:
                t = w.term.resolved(self.namespaces)
                add(t.topology_key, index.counts(PodMatcher((t.clause(),))), sign * w.weight)
        # Existing pods' terms against the incoming pod.
        if self.hard_pod_affinity_weight > 0:
            for g in term_index.matching(REQUIRED_AFFINITY, pod, ns_labels):
                add(g.term.topology_key, g.counts, self.hard_pod_affinity_weight)
        for kind, sign in ((PREFERRED_AFFINITY, 1), (PREFERRED_ANTI, -1)):
            for g in term_index.matching(kind, pod, ns_labels):
                add(g.term.topology_key, g.counts, sign * g.weight)

        if not touched:
            return Status.skip()
        scores = {}
        for key, per_slot in weighted.items():
            lc = label_codes(nodes, key)
            scores[key] = (lc, _domain_sums(lc, per_slot))
        state.write(_PRE_SCORE_KEY, _PreScoreState(scores))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        total = np.zeros(len(idx), dtype=np.int64)
        if s is None:
            return total
        for lc, dom in s.scores.values():
            total += dom[codes_at(lc, idx)]  # the trailing entry (no label) is 0
        return total

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        s: _PreScoreState | None = state.read(_PRE_SCORE_KEY)
        scores = np.asarray(scores, dtype=np.int64)
        if s is None or not s.scores or len(scores) == 0:
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        if hi - lo <= 0:
            return np.zeros_like(scores)
        frac = (scores - lo).astype(np.float64) / float(hi - lo)
        return (float(MAX_NODE_SCORE) * frac).astype(np.int64)


def _sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    n = max(len(a), len(b))
    return _fit(a, n) + _fit(b, n)


PLUGIN = PluginDefinition(NAME, InterPodAffinity, InterPodAffinityArgs)
