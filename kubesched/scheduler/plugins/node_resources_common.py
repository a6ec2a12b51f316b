"""Resource-allocation maths shared by NodeResourcesFit's scoring strategies and BalancedAllocation
(upstream ``noderesources/resource_allocation.go`` and the strategy files), vectorised over nodes.

Work is done one resource at a time on 1-D arrays over the candidate nodes (``Column``): small-axis reductions
and 2-D fancy indexing are slow in numpy, elementwise ops on contiguous vectors are not. A resource whose
allocatable is 0 on a node is left out of that node's score (no weight), as upstream does; so is an extended
resource the pod does not request. Integer divisions follow Go (truncation toward zero).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.interface import MAX_NODE_SCORE
from kubesched.scheduler.resources import CPU, MEMORY, is_scalar_resource_name

if TYPE_CHECKING:
    from kubesched.scheduler.config.args import ResourceSpec

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"
STRATEGIES = (LEAST_ALLOCATED, MOST_ALLOCATED, REQUESTED_TO_CAPACITY_RATIO)
MAX_CUSTOM_PRIORITY_SCORE = 10  # RequestedToCapacityRatio shape scores are 0..10, scaled to 0..100
MAX_UTILIZATION = 100
DEFAULT_SHAPE: tuple[tuple[int, int], ...] = ((0, 10), (100, 0))


@dataclass(frozen=True, slots=True)
class ResourceWeight:
    name: str
    weight: int = 1


DEFAULT_RESOURCES = (ResourceWeight("cpu", 1), ResourceWeight("memory", 1))


def resource_weights(specs: Sequence[ResourceSpec]) -> tuple[ResourceWeight, ...]:
    """Validated ``resources`` args as the weights the maths works with (an empty list means cpu and memory)."""
    return tuple(ResourceWeight(r.name, r.weight) for r in specs) or DEFAULT_RESOURCES


def trunc_div(a: np.ndarray, b: np.ndarray | int) -> np.ndarray:
    """Go's integer division (toward zero) for int64 arrays, ``b`` > 0."""
    return np.where(a >= 0, a // b, -((-a) // b))


@dataclass(slots=True)
class Column:
    """One scored resource over the candidate nodes: allocatable, requested before the pod, the pod's request,
    weight, and whether every node has allocatable > 0 (no per-node masking needed)."""

    alloc: np.ndarray
    base: np.ndarray
    pod: int
    weight: int
    all_valid: bool

    @property
    def with_pod(self) -> np.ndarray:
        return self.base + self.pod if self.pod else self.base

    def valid(self) -> np.ndarray:
        return self.alloc > 0

    def safe_alloc(self) -> np.ndarray:
        return self.alloc if self.all_valid else np.where(self.alloc > 0, self.alloc, 1)


class RequestedResources:
    """The configured resources of a scoring strategy, read from the node table for a set of nodes.

    ``use_requested=False`` (NodeResourcesFit) scores cpu/memory with the non-zero defaults (100m / 200Mi per
    container without a request) on both the pod and the node side; ``True`` (BalancedAllocation) uses plain
    requests.
    """

    def __init__(self, resources: Sequence[ResourceWeight], *, use_requested: bool) -> None:
        self.resources = tuple(resources)
        self.use_requested = use_requested
        self._row_plans: dict[tuple[tuple[int, ...], int], tuple[tuple[int, int, int, int], ...]] = {}
        # The last answer of ``pod_requests`` and what it was computed from: pods of one template share their
        # (interned, read-only) request vector, so consecutive pods of a Deployment or a benchmark skip the loop.
        # Keyed by the vector's identity (held here, so never reused), the non-zero cpu/memory requests (not in
        # the vector) and the index's size (columns only grow).
        self._last: tuple[Any, int, int, int, tuple[int, ...]] | None = None

    def pod_requests(self, pod: Any, res: Any) -> tuple[int, ...]:
        """The pod's request for each configured resource (cpu millicores, others in units)."""
        last = self._last
        if (
            last is not None
            and last[0] is pod.requests
            and last[1] == pod.nonzero_cpu
            and last[2] == pod.nonzero_mem
            and last[3] == res.count
        ):
            return last[4]
        answer = self._pod_requests(pod, res)
        self._last = (pod.requests, pod.nonzero_cpu, pod.nonzero_mem, res.count, answer)
        return answer

    def _pod_requests(self, pod: Any, res: Any) -> tuple[int, ...]:
        out = []
        for r in self.resources:
            if not self.use_requested and r.name == "cpu":
                out.append(pod.nonzero_cpu)
            elif not self.use_requested and r.name == "memory":
                out.append(pod.nonzero_mem)
            else:
                col = res.get(r.name)
                out.append(pod.request_of(col) if col is not None else 0)
        return tuple(out)

    def columns(self, nodes: Any, idx: np.ndarray, pod_req: Sequence[int]) -> list[Column]:
        """The resources that take part in scoring, as Columns over ``idx``."""
        res = nodes.res
        width = nodes.width
        out: list[Column] = []
        for r, req in zip(self.resources, pod_req, strict=True):
            col = res.get(r.name)
            native = r.name in ("cpu", "memory", "ephemeral-storage")
            if col is None or col >= width or (not native and not is_scalar_resource_name(r.name)):
                continue
            if not native and req == 0:
                continue  # an extended resource the pod does not ask for is not scored
            if nodes.zero_allocatable(col) == nodes.num_nodes:
                continue  # no node has any: left out everywhere
            alloc = nodes.allocatable.T[col].take(idx)
            if not self.use_requested and col in (CPU, MEMORY):
                base = nodes.nonzero_requested.T[0 if col == CPU else 1].take(idx)
            else:
                base = nodes.requested.T[col].take(idx)
            out.append(Column(alloc, base, int(req), r.weight, nodes.zero_allocatable(col) == 0))
        return out

    def row_plan(self, nodes: Any, pod_req: Sequence[int]) -> tuple[tuple[int, int, int, int], ...]:
        """For ``row``: (column, non-zero-requested column or -1, pod request, weight) of each resource that can
        take part, worked out once per request vector and table width."""
        key = (tuple(pod_req), nodes.width)
        plan = self._row_plans.get(key)
        if plan is not None:
            return plan
        res = nodes.res
        width = nodes.width
        out = []
        for r, req in zip(self.resources, pod_req, strict=True):
            col = res.get(r.name)
            native = r.name in ("cpu", "memory", "ephemeral-storage")
            if col is None or col >= width or (not native and not is_scalar_resource_name(r.name)):
                continue
            if not native and req == 0:
                continue
            nz = (0 if col == CPU else 1) if not self.use_requested and col in (CPU, MEMORY) else -1
            out.append((col, nz, int(req), r.weight))
        if len(self._row_plans) > 256:
            self._row_plans.clear()
        plan = self._row_plans[key] = tuple(out)
        return plan

    def row(self, nodes: Any, slot: int, pod_req: Sequence[int]) -> list[tuple[int, int, int, int]]:
        """The same for one node, as Python ints: (allocatable, requested before the pod, pod request, weight)
        for each resource the node has. For the few nodes that changed since the last cycle, where numpy's
        per-call overhead would dominate."""
        alloc_row = nodes.allocatable[slot].tolist()
        req_row: list[int] | None = None
        nz_row: list[int] | None = None
        out = []
        for col, nz, req, weight in self.row_plan(nodes, pod_req):
            alloc = alloc_row[col]
            if alloc == 0:
                continue
            if nz >= 0:
                if nz_row is None:
                    nz_row = nodes.nonzero_requested[slot].tolist()
                base = nz_row[nz]
            else:
                if req_row is None:
                    req_row = nodes.requested[slot].tolist()
                base = req_row[col]
            out.append((alloc, base, req, weight))
        return out


def _weighted_mean(parts: list[tuple[np.ndarray, Column]], n: int) -> np.ndarray:
    """sum(score * weight) / sum(weight) over the resources each node has (0 if it has none)."""
    if not parts:
        return np.zeros(n, dtype=np.int64)
    num: np.ndarray | None = None
    wconst = 0
    warr: np.ndarray | None = None
    for score, c in parts:
        term = score if c.weight == 1 else score * c.weight
        if not c.all_valid:
            valid = c.valid()
            term = term * valid
            w = valid * c.weight
            warr = w if warr is None else warr + w
        else:
            wconst += c.weight
        num = term if num is None else num + term
    assert num is not None
    if warr is None:
        return num // wconst
    wsum = warr + wconst
    return np.where(wsum > 0, num // np.maximum(wsum, 1), 0)


def least_allocated(cols: list[Column], n: int) -> np.ndarray:
    """((alloc - requested) * 100 / alloc) per resource (0 when over-requested), weighted mean."""
    parts = []
    for c in cols:
        free = np.maximum(c.alloc - c.with_pod, 0)
        parts.append((free * MAX_NODE_SCORE // c.safe_alloc(), c))
    return _weighted_mean(parts, n)


def most_allocated(cols: list[Column], n: int) -> np.ndarray:
    """(min(requested, alloc) * 100 / alloc) per resource, weighted mean."""
    parts = []
    for c in cols:
        used = np.minimum(c.with_pod, c.alloc)
        parts.append((used * MAX_NODE_SCORE // c.safe_alloc(), c))
    return _weighted_mean(parts, n)


def scale_shape(shape: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
    """A RequestedToCapacityRatio shape (utilization, score 0..10) as arrays, scores scaled to 0..100."""
    utils = np.array([u for u, _ in shape], dtype=np.int64)
    scores = np.array([s for _, s in shape], dtype=np.int64) * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE)
    return utils, scores


def broken_linear(utils: np.ndarray, scores: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Upstream's BuildBrokenLinearFunction: piecewise linear through the points, flat outside them."""
    if len(utils) == 1:
        return np.full(p.shape, scores[0], dtype=np.int64)
    i = np.searchsorted(utils, p, side="left")  # first point with utilization >= p
    inner = np.clip(i, 1, len(utils) - 1)
    u0, u1 = utils[inner - 1], utils[inner]
    s0, s1 = scores[inner - 1], scores[inner]
    mid = s0 + trunc_div((s1 - s0) * (p - u0), u1 - u0)
    return np.where(i == 0, scores[0], np.where(i >= len(utils), scores[-1], mid))


def requested_to_capacity_ratio(
    cols: list[Column], n: int, utils: np.ndarray, scores: np.ndarray
) -> np.ndarray:
    """f(requested * 100 / alloc) per resource (f(100) when over-requested); the weighted mean over the
    resources that score above 0, rounded half away from zero."""
    num = np.zeros(n, dtype=np.int64)
    wsum = np.zeros(n, dtype=np.int64)
    for c in cols:
        req = c.with_pod
        util = np.where(req > c.alloc, MAX_UTILIZATION, req * MAX_UTILIZATION // c.safe_alloc())
        per = broken_linear(utils, scores, util)
        counted = (per > 0) & c.valid()
        num += per * counted * c.weight
        wsum += counted * c.weight
    return np.where(wsum > 0, (2 * num + wsum) // np.maximum(2 * wsum, 1), 0)


def balance(cols: list[Column], requested: list[np.ndarray], n: int) -> np.ndarray:
    """``int((1 - std(fractions)) * 100)`` per node, fractions ``min(requested/alloc, 1)`` over the resources
    with allocatable > 0 (std = |f1 - f2| / 2 for two, population std for more, 0 for fewer). Float operations
    in upstream's order so the truncation matches Go bit for bit."""
    fracs = []
    for c, req in zip(cols, requested, strict=True):
        if c.all_valid:
            fracs.append(np.minimum(req / c.alloc, 1.0))
        else:
            fracs.append(np.where(c.alloc > 0, np.minimum(req / c.safe_alloc(), 1.0), 0.0))
    if len(cols) == 2 and cols[0].all_valid and cols[1].all_valid:
        std = np.abs((fracs[0] - fracs[1]) / 2)
    elif all(c.all_valid for c in cols):
        std = _std(fracs, n) if len(cols) > 2 else np.zeros(n)
    else:
        std = _masked_std(cols, fracs, n)
    return ((1.0 - std) * MAX_NODE_SCORE).astype(np.int64)


def _std(fracs: list[np.ndarray], n: int) -> np.ndarray:
    total = np.zeros(n)
    for f in fracs:
        total = total + f
    mean = total / len(fracs)
    sq = np.zeros(n)
    for f in fracs:
        d = f - mean
        sq = sq + d * d
    return np.sqrt(sq / len(fracs))


def _masked_std(cols: list[Column], fracs: list[np.ndarray], n: int) -> np.ndarray:
    count = np.zeros(n, dtype=np.int64)
    total = np.zeros(n)
    first = np.zeros(n)
    last = np.zeros(n)
    seen = np.zeros(n, dtype=bool)
    for c, f in zip(cols, fracs, strict=True):
        v = c.valid()
        count += v
        total = total + np.where(v, f, 0.0)
        first = np.where(v & ~seen, f, first)
        last = np.where(v, f, last)
        seen |= v
    k = np.maximum(count, 1).astype(np.float64)
    mean = total / k
    sq = np.zeros(n)
    for c, f in zip(cols, fracs, strict=True):
        d = f - mean
        sq = sq + np.where(c.valid(), d * d, 0.0)
    return np.where(count == 2, np.abs((first - last) / 2), np.where(count > 2, np.sqrt(sq / k), 0.0))


# 50 + trunc((50 + d) / 2) for d = b(with) - b(without) in [-100, 100], as a lookup table.
_BALANCE_136 = np.array([50 + int((50 + d) / 2) for d in range(-100, 101)], dtype=np.int64)
_BALANCE_136_LIST: list[int] = _BALANCE_136.tolist()


def balanced_allocation_136(cols: list[Column], n: int) -> np.ndarray:
    """Kubernetes 1.36 BalancedAllocation: ``50 + (50 + b(with pod) - b(without pod)) / 2`` (Go division)."""
    with_pod = balance(cols, [c.with_pod for c in cols], n)
    without_pod = balance(cols, [c.base for c in cols], n)
    return _BALANCE_136.take(with_pod - without_pod + 100)


# --- the same maths for one node, in plain Python (must agree exactly with the vector versions) -------------

SMALL = 16  # up to this many nodes, the scalar versions are faster


def least_allocated_one(row: list[tuple[int, int, int, int]]) -> int:
    num = wsum = 0
    for alloc, base, pod, weight in row:
        num += max(alloc - (base + pod), 0) * MAX_NODE_SCORE // alloc * weight
        wsum += weight
    return num // wsum if wsum else 0


def most_allocated_one(row: list[tuple[int, int, int, int]]) -> int:
    num = wsum = 0
    for alloc, base, pod, weight in row:
        num += min(base + pod, alloc) * MAX_NODE_SCORE // alloc * weight
        wsum += weight
    return num // wsum if wsum else 0


def _go_div(a: int, b: int) -> int:
    return a // b if a >= 0 else -((-a) // b)


def broken_linear_one(utils: np.ndarray, scores: np.ndarray, p: int) -> int:
    points = list(zip(utils.tolist(), scores.tolist(), strict=True))
    for i, (u, s) in enumerate(points):
        if p <= u:
            if i == 0:
                return s
            u0, s0 = points[i - 1]
            return s0 + _go_div((s - s0) * (p - u0), u - u0)
    return points[-1][1]


def requested_to_capacity_ratio_one(
    row: list[tuple[int, int, int, int]], utils: np.ndarray, scores: np.ndarray
) -> int:
    num = wsum = 0
    for alloc, base, pod, weight in row:
        req = base + pod
        util = MAX_UTILIZATION if req > alloc else req * MAX_UTILIZATION // alloc
        score = broken_linear_one(utils, scores, util)
        if score > 0:
            num += score * weight
            wsum += weight
    return (2 * num + wsum) // (2 * wsum) if wsum else 0


def balance_one(pairs: list[tuple[int, int]]) -> int:
    """``balance`` for one node: pairs of (requested, allocatable > 0)."""
    fracs = [min(float(r) / float(a), 1.0) for r, a in pairs]
    if len(fracs) == 2:
        std = abs((fracs[0] - fracs[1]) / 2)
    elif len(fracs) > 2:
        total = 0.0
        for f in fracs:
            total += f
        mean = total / len(fracs)
        sq = 0.0
        for f in fracs:
            sq += (f - mean) * (f - mean)
        std = math.sqrt(sq / len(fracs))
    else:
        std = 0.0
    return int((1.0 - std) * MAX_NODE_SCORE)


def _balance_two(r0: int, a0: int, r1: int, a1: int) -> int:
    """``balance_one([(r0, a0), (r1, a1)])`` without the lists (the usual cpu and memory), same arithmetic."""
    f0 = min(float(r0) / float(a0), 1.0)
    f1 = min(float(r1) / float(a1), 1.0)
    return int((1.0 - abs((f0 - f1) / 2)) * MAX_NODE_SCORE)


def balanced_allocation_136_one(row: list[tuple[int, int, int, int]]) -> int:
    if len(row) == 2:
        (a0, b0, p0, _), (a1, b1, p1, _) = row
        return _BALANCE_136_LIST[_balance_two(b0 + p0, a0, b1 + p1, a1) - _balance_two(b0, a0, b1, a1) + 100]
    with_pod = balance_one([(base + pod, alloc) for alloc, base, pod, _ in row])
    without_pod = balance_one([(base, alloc) for alloc, base, _, _ in row])
    return _BALANCE_136_LIST[with_pod - without_pod + 100]
