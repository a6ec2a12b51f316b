"""crane's Filter and Score arithmetic over load columns (pure numpy; the plugin feeds it).

Filter (``isOverLoad``): predicates in policy order; one is skipped when its metric has no sync period or its
limit is 0; a node is overloaded by the first predicate whose metric is fresh and ``usage > limit`` (strict).
Missing, malformed or stale values never reject (fail-open).

Score (``getNodeScore``): ``int(Σ (1 - usage_i) * weight_i * 100 / Σ weight_i)`` in float64, summed in policy
order, with a missing/stale metric contributing 0 while its weight stays in the denominator; then minus
``int(hot * 10)`` and clamped to 0..100. A score Go would turn into garbage (NaN, ±Inf: its float-to-int
conversion yields the minimum int64 on amd64) ends at 0 here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from .annotations import HOT_VALUE_ACTIVE_PERIOD, HOT_VALUE_KEY
from .policy import DynamicSchedulerPolicy
from .sources import LoadColumns

HOT_VALUE_POINTS = 10  # score points per hot-value unit
_GO_INT_MIN_STANDIN = -1e18  # what Go's int(NaN or ±Inf) amounts to after clamping: far below 0


@dataclass(frozen=True, slots=True)
class Predicate:
    metric: str
    row: int  # row of the metric in the LoadColumns
    limit: float
    active: float  # seconds a value stays fresh


@dataclass(frozen=True, slots=True)
class Priority:
    metric: str
    row: int
    weight: float
    active: float | None  # None: no sync period, always scores 0


@dataclass(frozen=True, slots=True)
class ScorePlan:
    """A policy compiled against the row order of a load source."""

    predicates: tuple[Predicate, ...]
    priorities: tuple[Priority, ...]
    weight_sum: float
    hot_row: int | None

    @staticmethod
    def build(policy: DynamicSchedulerPolicy, metrics: Sequence[str]) -> ScorePlan:
        row = {m: i for i, m in enumerate(metrics)}
        predicates = []
        for p in policy.spec.predicate:
            active = policy.active_duration(p.name)
            if active is not None and p.max_limit_percent != 0:
                predicates.append(Predicate(p.name, row[p.name], p.max_limit_percent, active))
        priorities = tuple(
            Priority(p.name, row[p.name], p.weight, policy.active_duration(p.name))
            for p in policy.spec.priority
        )
        weight_sum = 0.0
        for priority in priorities:  # summed in order, as crane does
            weight_sum += priority.weight
        return ScorePlan(tuple(predicates), priorities, weight_sum, row.get(HOT_VALUE_KEY))


def fresh(cols: LoadColumns, row: int, active: float, now: float) -> np.ndarray:
    """Candidates whose value of ``row`` is known and younger than ``active`` seconds."""
    return ~np.isnan(cols.values[row]) & (now < cols.timestamps[row] + active)


def first_overload(cols: LoadColumns, plan: ScorePlan, now: float) -> np.ndarray:
    """Per candidate, the index into ``plan.predicates`` of the first limit exceeded, or -1."""
    first = np.full(cols.values.shape[1], -1, dtype=np.int64)
    for j, p in enumerate(plan.predicates):
        over = fresh(cols, p.row, p.active, now) & (cols.values[p.row] > p.limit)
        over &= first < 0
        first[over] = j
    return first


def load_scores(cols: LoadColumns, plan: ScorePlan, now: float) -> np.ndarray:
    """crane's ``getNodeScore`` per candidate (int64, before the hot value and the clamp)."""
    n = cols.values.shape[1]
    if not plan.priorities:
        return np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    with np.errstate(invalid="ignore", over="ignore"):
        for p in plan.priorities:
            if p.active is None:
                continue  # contributes 0
            part = (1.0 - cols.values[p.row]) * p.weight * 100.0
            total += np.where(fresh(cols, p.row, p.active, now), part, 0.0)
        if plan.weight_sum == 0:
            return np.zeros(n, dtype=np.int64)
        score = total / plan.weight_sum
    score = np.where(np.isfinite(score), score, _GO_INT_MIN_STANDIN)
    return np.trunc(np.clip(score, _GO_INT_MIN_STANDIN, -_GO_INT_MIN_STANDIN)).astype(np.int64)


def annotation_hot_penalty(cols: LoadColumns, plan: ScorePlan, now: float) -> np.ndarray:
    """``int(hot * 10)`` from a fresh ``node_hot_value`` annotation (crane's controller), else 0."""
    n = cols.values.shape[1]
    if plan.hot_row is None:
        return np.zeros(n, dtype=np.int64)
    hot = cols.values[plan.hot_row]
    ok = fresh(cols, plan.hot_row, HOT_VALUE_ACTIVE_PERIOD, now)
    with np.errstate(invalid="ignore", over="ignore"):
        penalty = np.where(ok, np.minimum(hot * HOT_VALUE_POINTS, 1e6), 0.0)
    return np.trunc(penalty).astype(np.int64)


def final_scores(base: np.ndarray, penalty: np.ndarray) -> np.ndarray:
    """``clamp(base - penalty, 0, 100)``."""
    return np.clip(base - penalty, 0, 100)


__all__ = [
    "HOT_VALUE_POINTS",
    "Predicate",
    "Priority",
    "ScorePlan",
    "annotation_hot_penalty",
    "final_scores",
    "first_overload",
    "fresh",
    "load_scores",
]
