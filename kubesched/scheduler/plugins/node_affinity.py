"""NodeAffinity: ``spec.nodeSelector``, required and preferred node affinity, and the profile's ``addedAffinity``.

Upstream: ``pkg/scheduler/framework/plugins/nodeaffinity`` and ``component-helpers/scheduling/corev1/nodeaffinity``.

This module also holds the label machinery the other placement plugins share (PodTopologySpread,
InterPodAffinity): label requirements and selectors, and ``LabelCodes``, which turns a node label into an integer code
per node slot so that "which nodes have value v" is a numpy lookup rather than a loop over dicts.

Semantics kept from upstream
- Terms are ORed, requirements inside a term ANDed; a term with no requirements matches nothing.
- A required term that fails to parse (bad operator, bad value) matches no node; other terms still count.
- ``nodeSelector`` and required affinity must both match. ``addedAffinity`` is checked first with its own reason.
- Preferred terms with weight 0 or no requirements are dropped; a parse error in a preferred term is an error.
- Score is the sum of matching preferred weights (added + pod), normalised to 0..100 by the maximum.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import numpy as np
import orjson

from kubesched.apimachinery import labels as _labels
from kubesched.apimachinery.labels import EQUALITY_OPS, INEQUALITY_OPS, Op, SelectorError, parse_int64
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    ClusterEvent,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.node_affinity_args import NodeAffinityArgs

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeAffinity"

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

OBJECT_NAME_FIELD = "metadata.name"

T = TypeVar("T")

# --------------------------------------------------------------------------------------------------------------------
# Integer codes for one node label across all slots.


@dataclass(slots=True)
class LabelCodes:
    """Node label ``key`` as codes: ``codes[slot]`` is the index of the slot's value in ``values`` or -1 (absent).

    Lookup tables indexed by ``codes`` need one extra trailing entry for "absent": ``table[-1]``.
    """

    key: str
    codes: np.ndarray  # int32, len == capacity
    values: list[str]
    vocab: dict[str, int]
    _ints: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def size(self) -> int:
        return len(self.values)

    def table(self, dtype: Any = bool) -> np.ndarray:
        """A zeroed lookup table indexable by ``codes`` (size + 1 for the absent code -1)."""
        return np.zeros(len(self.values) + 1, dtype=dtype)

    def code_set(self, values: Iterable[str]) -> list[int]:
        return [c for v in values if (c := self.vocab.get(v)) is not None]

    def int_values(self) -> tuple[np.ndarray, np.ndarray]:
        """(value as int64, parsed ok) per code, with a trailing "absent" entry that never parses."""
        if self._ints is None:
            parsed = [parse_int64(v) for v in self.values]
            ok = np.array([p is not None for p in parsed] + [False], dtype=bool)
            ints = np.array([p if p is not None else 0 for p in parsed] + [0], dtype=np.int64)
            self._ints = (ints, ok)
        return self._ints


class _TableCaches:
    """Per-NodeTable caches, invalidated when ``label_version`` or ``capacity`` changes.

    Kept beside the table (weakly) so every plugin of every profile shares one factorisation per label key.
    """

    def __init__(self) -> None:
        self.stamp: tuple[int, int] = (-1, -1)
        self.codes: dict[str, LabelCodes] = {}
        self.masks: OrderedDict[Any, np.ndarray] = OrderedDict()

    def check(self, nodes: NodeTable) -> None:
        stamp = (nodes.label_version, nodes.capacity)
        if stamp != self.stamp:
            self.stamp = stamp
            self.codes.clear()
            self.masks.clear()


_caches: dict[int, tuple[Any, _TableCaches]] = {}
_MASK_CACHE_SIZE = 512


def _table_caches(nodes: NodeTable) -> _TableCaches:
    key = id(nodes)
    entry = _caches.get(key)
    if entry is not None:
        held, caches = entry
        if (held() if isinstance(held, weakref.ref) else held) is nodes:
            caches.check(nodes)
            return caches
    ref: Any
    try:
        ref = weakref.ref(nodes, lambda _r: _caches.pop(key, None))
    except TypeError:  # no weakref slot: keep a strong reference, bounded below
        ref = nodes
        if len(_caches) > 16:
            _caches.clear()
    caches = _TableCaches()
    _caches[key] = (ref, caches)
    caches.check(nodes)
    return caches


def label_codes(nodes: NodeTable, key: str) -> LabelCodes:
    """Codes of node label ``key`` for every slot (cached until any node's labels change)."""
    caches = _table_caches(nodes)
    lc = caches.codes.get(key)
    if lc is None:
        column = nodes.label_column(key)
        vocab: dict[str, int] = {}
        codes = np.fromiter(
            (-1 if v is None else vocab.setdefault(v, len(vocab)) for v in column),
            dtype=np.int32,
            count=len(column),
        )
        if len(codes) < nodes.capacity:
            codes = np.concatenate([codes, np.full(nodes.capacity - len(codes), -1, dtype=np.int32)])
        lc = LabelCodes(key, codes, list(vocab), vocab)
        caches.codes[key] = lc
    return lc


def cached_mask(nodes: NodeTable, key: Any, build: Any) -> np.ndarray:
    """A per-slot bool mask cached under ``key`` until node labels change; ``build(nodes)`` computes it."""
    caches = _table_caches(nodes)
    mask = caches.masks.get(key)
    if mask is None:
        mask = build(nodes)
        caches.masks[key] = mask
        if len(caches.masks) > _MASK_CACHE_SIZE:
            caches.masks.popitem(last=False)
    else:
        caches.masks.move_to_end(key)
    return mask


# --------------------------------------------------------------------------------------------------------------------
# Requirements and label selectors: ``kubesched.apimachinery.labels``' own (validation, matching; this module
# re-exports its ``SelectorError`` and ``parse_int64`` for the other placement plugins), plus the vectorised mask
# over the node table and the canonical keys and anchors the scheduler's indexes use.

_EXISTS, _DOES_NOT_EXIST, _GREATER_THAN = Op.EXISTS, Op.DOES_NOT_EXIST, Op.GREATER_THAN


class Requirement(_labels.Requirement):
    """One label requirement (``labels.Requirement``): key, operator, values; ``node_mask`` over all slots."""

    __slots__ = ()

    def node_mask(self, nodes: NodeTable) -> np.ndarray:
        """Which slots' labels satisfy this requirement (vectorised over the column codes)."""
        lc = label_codes(nodes, self.key)
        op = self.op
        if op == _EXISTS:
            return lc.codes >= 0
        if op == _DOES_NOT_EXIST:
            return lc.codes < 0
        if op in EQUALITY_OPS or op in INEQUALITY_OPS:
            table = lc.table()
            table[lc.code_set(self.values)] = True
            hit = table[lc.codes]
            return hit if op in EQUALITY_OPS else ~hit
        ints, ok = lc.int_values()
        cmp = ints > self.number if op == _GREATER_THAN else ints < self.number
        return (cmp & ok)[lc.codes]


def _canonical_requirement(r: _labels.Requirement) -> tuple[Any, ...]:
    # "=", "==" and "In" select alike, as do "!=" and "NotIn": one spelling so equal selectors share one key.
    op = r.op
    meaning = "In" if op in EQUALITY_OPS else "NotIn" if op in INEQUALITY_OPS else str(op)
    return (r.key, meaning, tuple(sorted(r.values)), r.number)


class LabelSelector(_labels.LabelSelector):
    """A parsed ``metav1.LabelSelector``: AND of requirements, with a canonical ``key``.

    ``LabelSelectorAsSelector`` semantics: ``parse(None)`` selects nothing, ``parse({})`` selects everything.
    Compared by identity, as plugins keep selectors in identity-keyed indexes and compare ``key`` for equality.
    """

    __slots__ = ("key",)

    def __init__(self, reqs: Iterable[_labels.Requirement] = (), *, nothing: bool = False) -> None:
        # Duplicates dropped and sorted so equal selectors share one canonical key (used to share counters).
        unique: dict[tuple[Any, ...], _labels.Requirement] = {}
        for r in reqs:
            unique.setdefault(_canonical_requirement(r), r)
        ordered = sorted(unique.items(), key=lambda item: item[0])
        super().__init__((r for _, r in ordered), nothing=nothing)
        self.key: tuple[Any, ...] = ("nothing",) if nothing else tuple(k for k, _ in ordered)

    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def with_requirements(self, extra: Iterable[_labels.Requirement]) -> LabelSelector:
        if self.nothing:
            return self
        return LabelSelector((*self.requirements, *extra))

    def anchor(self) -> tuple[str, frozenset[str]] | None:
        """A ``key in values`` every matching label set satisfies (the narrowest), or None if there is none.

        Indexes use it to find the few selectors a pod can match from the pod's own labels.
        """
        ins = [r for r in self.requirements if r.op in EQUALITY_OPS]
        if self.nothing or not ins:
            return None
        best = min(ins, key=lambda r: len(r.values))
        return best.key, frozenset(best.values)

    def __repr__(self) -> str:
        return f"LabelSelector{self.key!r}"


class SelectorDispatch(Generic[T]):
    """Items (selectors, counters, term groups) indexed by their selector's ``anchor``.

    ``candidates(labels)`` yields every item whose selector can match ``labels``: those without an anchor, plus
    those anchored on one of the labels. A pod event or a cycle then tests a handful of items instead of all.
    """

    def __init__(self) -> None:
        self._open: dict[int, T] = {}
        self._anchored: dict[tuple[str, str], dict[int, T]] = {}

    def add(self, item: T, anchor: tuple[str, frozenset[str]] | None) -> None:
        if anchor is None:
            self._open[id(item)] = item
            return
        key, values = anchor
        for v in values:
            self._anchored.setdefault((key, v), {})[id(item)] = item

    def remove(self, item: T, anchor: tuple[str, frozenset[str]] | None) -> None:
        if anchor is None:
            self._open.pop(id(item), None)
            return
        key, values = anchor
        for v in values:
            bucket = self._anchored.get((key, v))
            if bucket is not None:
                bucket.pop(id(item), None)
                if not bucket:
                    del self._anchored[(key, v)]

    def candidates(self, labels: Mapping[str, str]) -> list[T]:
        out = list(self._open.values())
        if self._anchored:
            for kv in labels.items():
                bucket = self._anchored.get(kv)
                if bucket:
                    out.extend(bucket.values())
        return out

    def __bool__(self) -> bool:
        return bool(self._open) or bool(self._anchored)


# --------------------------------------------------------------------------------------------------------------------
# Node selectors (``v1.NodeSelector``) and the pod's required node affinity.


@dataclass(frozen=True, slots=True)
class FieldRequirement:
    """A ``matchFields`` requirement; only ``metadata.name`` exists on a node, other keys read as ""."""

    key: str
    op: str  # In or NotIn
    value: str

    def node_mask(self, nodes: NodeTable) -> np.ndarray:
        mask = np.zeros(nodes.capacity, dtype=bool)
        if self.key == OBJECT_NAME_FIELD:
            slot = nodes.index.get(self.value)
            if slot is not None:
                mask[slot] = True
        elif self.value == "":
            mask[:] = True
        return mask if self.op == "In" else ~mask


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """One parsed term; ``error`` set when it failed to parse (then it matches no node)."""

    labels: tuple[Requirement, ...]
    fields: tuple[FieldRequirement, ...]
    error: str | None = None

    @staticmethod
    def parse(term: Mapping[str, Any]) -> NodeSelectorTerm:
        labels: list[Requirement] = []
        fields: list[FieldRequirement] = []
        try:
            for expr in term.get("matchExpressions") or ():
                labels.append(Requirement.from_node_selector(expr))
            for expr in term.get("matchFields") or ():
                op, values = expr.get("operator", ""), list(expr.get("values") or ())
                if op not in ("In", "NotIn"):
                    raise SelectorError(f"{op!r} is not a valid field selector operator")
                if len(values) != 1:
                    raise SelectorError("matchFields values must have one element")
                fields.append(FieldRequirement(expr.get("key", ""), op, values[0]))
        except SelectorError as e:
            return NodeSelectorTerm((), (), str(e))
        return NodeSelectorTerm(tuple(labels), tuple(fields))

    def node_mask(self, nodes: NodeTable) -> np.ndarray:
        def build(n: NodeTable) -> np.ndarray:
            mask = np.full(n.capacity, self.error is None, dtype=bool)
            if self.error is None:
                for r in self.labels:
                    mask &= r.node_mask(n)
                for f in self.fields:
                    mask &= f.node_mask(n)
            return mask

        return cached_mask(nodes, self, build)


def _is_empty_term(term: Mapping[str, Any]) -> bool:
    return not term.get("matchExpressions") and not term.get("matchFields")


def _canonical(obj: Any) -> bytes:
    return orjson.dumps(obj, option=orjson.OPT_SORT_KEYS)


class NodeSelector:
    """A ``v1.NodeSelector``: terms ORed; empty terms dropped (they match nothing)."""

    __slots__ = ("key", "terms")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.terms = tuple(
            NodeSelectorTerm.parse(t) for t in raw.get("nodeSelectorTerms") or () if not _is_empty_term(t)
        )
        self.key = ("nodeSelector", _canonical(raw))

    @property
    def errors(self) -> list[str]:
        return [t.error for t in self.terms if t.error is not None]

    def node_mask(self, nodes: NodeTable) -> np.ndarray:
        def build(n: NodeTable) -> np.ndarray:
            mask = np.zeros(n.capacity, dtype=bool)
            for t in self.terms:
                mask |= t.node_mask(n)
            return mask

        return cached_mask(nodes, self.key, build)


class RequiredNodeAffinity:
    """``spec.nodeSelector`` AND ``requiredDuringSchedulingIgnoredDuringExecution`` of one pod spec."""

    __slots__ = ("key", "node_selector", "selector_map")

    def __init__(
        self, node_selector_map: Mapping[str, str] | None, required: Mapping[str, Any] | None
    ) -> None:
        self.selector_map = dict(node_selector_map) if node_selector_map else None
        self.node_selector = NodeSelector(required) if required is not None else None
        self.key = (
            "required",
            _canonical(self.selector_map),
            self.node_selector.key if self.node_selector else None,
        )

    @staticmethod
    def of_pod(pod: Mapping[str, Any]) -> RequiredNodeAffinity:
        spec = pod.get("spec") or {}
        node_aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
        return _required_cache.get(
            spec.get("nodeSelector"), node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        )

    @property
    def trivial(self) -> bool:
        return self.selector_map is None and self.node_selector is None

    def node_mask(self, nodes: NodeTable) -> np.ndarray:
        """Which slots this pod may go to (cached until node labels change)."""

        def build(n: NodeTable) -> np.ndarray:
            mask = np.ones(n.capacity, dtype=bool)
            for k, v in (self.selector_map or {}).items():
                lc = label_codes(n, k)
                code = lc.vocab.get(v)
                mask &= lc.codes == code if code is not None else False
            if self.node_selector is not None:
                mask &= self.node_selector.node_mask(n)
            return mask

        return cached_mask(nodes, self.key, build)


class ParseCache:
    """A small LRU of parse results keyed by the canonical JSON of the raw input.

    Pods of one workload carry identical affinity specs, so a ReplicaSet's pods parse (and validate) once.
    """

    def __init__(self, parse: Any, size: int = 1024) -> None:
        self._parse = parse
        self._size = size
        self._items: OrderedDict[bytes, Any] = OrderedDict()

    def get(self, *raw: Any) -> Any:
        key = _canonical(raw)
        item = self._items.get(key)
        if item is None:
            item = self._parse(*raw)  # exceptions propagate and are not cached
            self._items[key] = item
            if len(self._items) > self._size:
                self._items.popitem(last=False)
        else:
            self._items.move_to_end(key)
        return item


_required_cache = ParseCache(RequiredNodeAffinity)


@dataclass(frozen=True, slots=True)
class PreferredTerm:
    weight: int
    term: NodeSelectorTerm


def parse_preferred(raw: Sequence[Mapping[str, Any]] | None) -> list[PreferredTerm]:
    """Preferred terms (weight 0 and empty terms dropped); raises ``SelectorError`` on a malformed term."""
    out: list[PreferredTerm] = []
    errors: list[str] = []
    for item in raw or ():
        weight = int(item.get("weight") or 0)
        pref = item.get("preference") or {}
        if weight == 0 or _is_empty_term(pref):
            continue
        term = NodeSelectorTerm.parse(pref)
        if term.error is not None:
            errors.append(term.error)
        else:
            out.append(PreferredTerm(weight, term))
    if errors:
        raise SelectorError("; ".join(errors))
    return out


_preferred_cache = ParseCache(lambda raw: parse_preferred(raw))


def preferred_scores(terms: Sequence[PreferredTerm], nodes: NodeTable) -> np.ndarray:
    """Sum of matching weights per slot."""
    total = np.zeros(nodes.capacity, dtype=np.int64)
    for t in terms:
        total += t.term.node_mask(nodes) * t.weight
    return total


def default_normalize(scores: np.ndarray, *, reverse: bool = False) -> np.ndarray:
    """Upstream ``helper.DefaultNormalizeScore``: scale to 0..100 by the maximum (optionally reversed)."""
    scores = np.asarray(scores, dtype=np.int64)
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return np.full_like(scores, MAX_NODE_SCORE) if reverse else scores.copy()
    out = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - out if reverse else out


# --------------------------------------------------------------------------------------------------------------------
# The plugin.

_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


def _node_affinity(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = pod.get("spec") or {}
    return (spec.get("affinity") or {}).get("nodeAffinity") or {}


class NodeAffinity:
    """PreFilter, Filter, PreScore, Score (+ NormalizeScore) and EnqueueExtensions."""

    name = NAME

    def __init__(self, args: NodeAffinityArgs, handle: Any = None) -> None:
        added = args.added_affinity or {}
        self.handle = handle
        required = added.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.added_selector: NodeSelector | None = None
        if required is not None:
            self.added_selector = NodeSelector(required)
            if self.added_selector.errors:
                raise ValueError(
                    "parsing addedAffinity.requiredDuringSchedulingIgnoredDuringExecution: "
                    + "; ".join(self.added_selector.errors)
                )
        try:
            self.added_preferred = parse_preferred(
                added.get("preferredDuringSchedulingIgnoredDuringExecution")
            )
        except SelectorError as e:
            raise ValueError(
                f"parsing addedAffinity.preferredDuringSchedulingIgnoredDuringExecution: {e}"
            ) from e

    # -- queueing

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's node selector and node affinity decide this plugin's answers
        (the profile's ``addedAffinity`` is the same for every pod)."""
        return (pod.node_selector, pod.required_node_affinity, pod.preferred_node_affinity)

    def events_to_register(self) -> list[ClusterEvent]:
        # Only a new node or a label change can make a node match; taints never change this plugin's verdict.
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeLabel")]

    # -- filtering

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        spec = pod.pod.get("spec") or {}
        required_raw = _node_affinity(pod.pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        if required_raw is None and self.added_selector is None and spec.get("nodeSelector") is None:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, RequiredNodeAffinity.of_pod(pod.pod))
        terms = (required_raw or {}).get("nodeSelectorTerms") or []
        if not terms:
            return None, Status.success()
        names = self._node_names(terms)
        if names is None:
            return None, Status.success()
        if not names:
            return None, Status.unschedulable(ERR_REASON_CONFLICT, unresolvable=True)
        return PreFilterResult(names), Status.success()

    @staticmethod
    def _node_names(terms: Sequence[Mapping[str, Any]]) -> set[str] | None:
        """The node names the terms allow when every term pins ``metadata.name`` with In; else None (all)."""
        union: set[str] = set()
        for t in terms:
            names: set[str] | None = None
            for r in t.get("matchFields") or ():
                if r.get("key") == OBJECT_NAME_FIELD and r.get("operator") == "In":
                    values = set(r.get("values") or ())
                    names = values if names is None else names & values
            if names is None:
                return None  # this term does not restrict names, and terms are ORed
            union |= names
        return union

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        bits = np.zeros(len(idx), dtype=np.uint64)
        if self.added_selector is not None:
            bits[~self.added_selector.node_mask(nodes)[idx]] = 1
        required = state.read(_PRE_FILTER_KEY)
        if required is None:  # PreFilter disabled or skipped
            required = RequiredNodeAffinity.of_pod(pod.pod)
        if not required.trivial:
            bits[(bits == 0) & ~required.node_mask(nodes)[idx]] = 2
        return Filtered(bits, (ERR_REASON_ENFORCED, ERR_REASON_POD), (True, True))

    # -- scoring

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        raw = _node_affinity(pod.pod).get("preferredDuringSchedulingIgnoredDuringExecution")
        if raw is None and not self.added_preferred:
            return Status.skip()
        try:
            state.write(_PRE_SCORE_KEY, _preferred_cache.get(raw))
        except SelectorError as e:
            return Status.error(str(e))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        terms = state.read(_PRE_SCORE_KEY)
        if terms is None:
            raw = _node_affinity(pod.pod).get("preferredDuringSchedulingIgnoredDuringExecution")
            terms = _preferred_cache.get(raw)
        return preferred_scores([*self.added_preferred, *terms], nodes)[idx]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores)


PLUGIN = PluginDefinition(NAME, NodeAffinity, NodeAffinityArgs)
