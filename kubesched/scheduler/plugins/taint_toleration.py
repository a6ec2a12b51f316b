"""TaintToleration: a node's NoSchedule/NoExecute taints must all be tolerated (Filter); nodes with fewer
untolerated PreferNoSchedule taints score higher (Score, reverse-normalized).

Nodes with identical taint lists share a taint-set id in the node table, so the tolerations are matched once
per distinct taint set and the per-node answer is a table lookup.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import MAX_NODE_SCORE, ClusterEvent, CycleState, Filtered, Status

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "TaintToleration"
REASON = "node(s) had untolerated taint(s)"
NO_SCHEDULE = "NoSchedule"
NO_EXECUTE = "NoExecute"
PREFER_NO_SCHEDULE = "PreferNoSchedule"
_PRE_SCORE_KEY = "PreScore" + NAME
_ALL_ZERO_KEY = NAME + "/no-taints"

Toleration = tuple[str, str, str, str]  # (key, operator, value, effect), as PodInfo.tolerations_key
Taint = tuple[str, str, str]  # (key, value, effect)


def tolerates(tol: Toleration, taint: Taint) -> bool:
    """Upstream ``Toleration.ToleratesTaint``: effect (if set) and key (if set) must match; ``Exists`` matches
    any value, ``Equal`` (the default) the same value. The alpha Gt/Lt operators are not enabled."""
    key, op, value, effect = tol
    if effect and effect != taint[2]:
        return False
    if key and key != taint[0]:
        return False
    if op == "Exists":
        return True
    if op in ("", "Equal"):
        return value == taint[1]
    return False


def tolerated(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(tolerates(t, taint) for t in tolerations)


def default_normalize_score(scores: np.ndarray, *, reverse: bool = False) -> np.ndarray:
    """Upstream ``DefaultNormalizeScore``: scale to 0..100 by the maximum; ``reverse`` flips high and low."""
    top = int(scores.max()) if len(scores) else 0
    if top == 0:
        return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64) if reverse else scores
    scaled = MAX_NODE_SCORE * scores // top
    return MAX_NODE_SCORE - scaled if reverse else scaled


class _SetLookup:
    """Per-tolerations answers for every taint set of the table, extended as new sets appear."""

    def __init__(self, compute: Any) -> None:
        self._compute = compute
        self._cache: dict[tuple[Toleration, ...], np.ndarray] = {}

    def get(self, tolerations: tuple[Toleration, ...], nodes: NodeTable) -> np.ndarray:
        sets = nodes.taint_sets
        lut = self._cache.get(tolerations)
        if lut is None or len(lut) < len(sets):
            start = 0 if lut is None else len(lut)
            new = np.array([self._compute(tolerations, s) for s in sets[start:]])
            lut = new if lut is None else np.concatenate((lut, new))
            if len(self._cache) > 1024:
                self._cache.clear()
            self._cache[tolerations] = lut
        return lut


def _untolerated_hard(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> bool:
    return any(t[2] in (NO_SCHEDULE, NO_EXECUTE) and not tolerated(tolerations, t) for t in taints)


def _untolerated_soft(tolerations: tuple[Toleration, ...], taints: tuple[Taint, ...]) -> int:
    return sum(1 for t in taints if t[2] == PREFER_NO_SCHEDULE and not tolerated(tolerations, t))


class TaintToleration:
    name = NAME
    scores_in_range = True

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self._hard = _SetLookup(_untolerated_hard)
        self._soft = _SetLookup(_untolerated_soft)

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's tolerations decide this plugin's answers."""
        return pod.tolerations_key

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeTaint"),
            ClusterEvent("Pod", "UpdatePodToleration"),
        ]

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        if nodes.num_tainted == 0:
            return Filtered.all_pass(len(idx))
        bad = self._hard.get(pod.tolerations_key, nodes)[nodes.taint_group[idx]]
        return Filtered(bad.astype(np.uint64), (REASON,), (True,))

    def constant_score(self, pod: PodInfo, nodes: NodeTable) -> bool:
        """No node has taints: every node scores 100 after normalising (PreScore and Score may be skipped)."""
        return nodes.num_tainted == 0

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        keys = pod.tolerations_key
        soft = tuple(t for t in keys if t[3] in ("", PREFER_NO_SCHEDULE)) if keys else ()
        state.write(_PRE_SCORE_KEY, soft)
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        if nodes.num_tainted == 0:
            state.write(_ALL_ZERO_KEY, True)
            return np.zeros(len(idx), dtype=np.int64)
        soft = state.read(_PRE_SCORE_KEY)
        if soft is None:
            soft = tuple(t for t in pod.tolerations_key if t[3] in ("", PREFER_NO_SCHEDULE))
        return self._soft.get(soft, nodes)[nodes.taint_group[idx]].astype(np.int64)

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> np.ndarray:
        if state.read(_ALL_ZERO_KEY):
            return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        return default_normalize_score(scores, reverse=True)


PLUGIN = PluginDefinition(NAME, TaintToleration)
