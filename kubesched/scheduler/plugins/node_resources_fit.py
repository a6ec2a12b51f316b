"""NodeResourcesFit: does the node have room for the pod's requests (Filter), and how full would it be (Score,
with the LeastAllocated, MostAllocated or RequestedToCapacityRatio strategy).

Filter reasons, as upstream: ``Too many pods``, ``Insufficient cpu``, ``Insufficient memory``,
``Insufficient ephemeral-storage``, ``Insufficient <extended resource>``. A request larger than the node's whole
allocatable is unresolvable (preemption cannot help); otherwise preemption might.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import Field, StrictInt, StrictStr, model_validator

from kubesched.scheduler.cache import SlotMemo
from kubesched.scheduler.config.args import (
    ArgsModel,
    ResourceSpec,
    default_resources,
    validate_qualified_name,
    validate_resource_weights,
)
from kubesched.scheduler.config.errors import FieldError, forbidden, invalid, not_supported, required
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.plugins.node_resources_common import (
    DEFAULT_SHAPE,
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MOST_ALLOCATED,
    REQUESTED_TO_CAPACITY_RATIO,
    SMALL,
    STRATEGIES,
    RequestedResources,
    least_allocated,
    least_allocated_one,
    most_allocated,
    most_allocated_one,
    requested_to_capacity_ratio,
    requested_to_capacity_ratio_one,
    resource_weights,
    scale_shape,
)
from kubesched.scheduler.resources import PODS, is_extended_resource_name

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodeResourcesFit"
TOO_MANY_PODS = "Too many pods"
_PRE_FILTER_KEY = "PreFilter" + NAME
_PRE_SCORE_KEY = "PreScore" + NAME


@dataclass(frozen=True, slots=True)
class _FitPlan:
    """What Filter checks for one pod: resource columns (pods first) and the amounts needed.

    ``need_full`` spans every column of the table (a huge negative for unchecked ones) so all can be compared
    in one go. Column j of ``cols`` owns reason bits 2j (short now: preemption may help) and 2j+1 (the pod
    asks more than the node has at all).
    """

    cols: tuple[int, ...]
    need: tuple[int, ...]
    need_full: np.ndarray
    reasons: tuple[str, ...]
    unresolvable: tuple[bool, ...]


_UNCHECKED = np.iinfo(np.int64).min


# --- args ----------------------------------------------------------------------------------------------------


class UtilizationShapePoint(ArgsModel):
    utilization: StrictInt
    score: StrictInt


class RequestedToCapacityRatioParam(ArgsModel):
    shape: tuple[UtilizationShapePoint, ...] = ()


class ScoringStrategy(ArgsModel):
    # No default for ``type``: upstream only defaults the whole strategy, so an empty type is rejected.
    type: StrictStr = ""
    resources: tuple[ResourceSpec, ...] = Field(default_factory=default_resources)
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = None

    @model_validator(mode="before")
    @classmethod
    def _default_resources(cls, data: Any) -> Any:
        if isinstance(data, dict) and not data.get("resources"):
            return {k: v for k, v in data.items() if k != "resources"}
        return data


def _least_allocated() -> ScoringStrategy:
    return ScoringStrategy(type=LEAST_ALLOCATED)


class NodeResourcesFitArgs(ArgsModel):
    ignored_resources: tuple[StrictStr, ...] = ()
    ignored_resource_groups: tuple[StrictStr, ...] = ()
    scoring_strategy: ScoringStrategy = Field(default_factory=_least_allocated)

    @model_validator(mode="before")
    @classmethod
    def _default_strategy(cls, data: Any) -> Any:
        # An explicit null strategy means "use the default", as an absent one does.
        if isinstance(data, dict) and "scoringStrategy" in data and data["scoringStrategy"] is None:
            return {k: v for k, v in data.items() if k != "scoringStrategy"}
        return data

    def validate_args(self, path: str) -> list[FieldError]:
        errs: list[FieldError] = []
        for i, res in enumerate(self.ignored_resources):
            errs.extend(validate_qualified_name(f"{path}.ignoredResources[{i}]", res))
        for i, group in enumerate(self.ignored_resource_groups):
            p = f"{path}.ignoredResourceGroups[{i}]"
            if "/" in group:
                errs.append(invalid(p, group, "resource group name can't contain '/'"))
            errs.extend(validate_qualified_name(p, group))
        strategy = self.scoring_strategy
        sp = f"{path}.scoringStrategy"
        if strategy.type not in STRATEGIES:
            errs.append(not_supported(f"{sp}.type", strategy.type, STRATEGIES))
        errs.extend(validate_resource_weights(f"{sp}.resources", strategy.resources))
        ratio_path = f"{sp}.requestedToCapacityRatio"
        if strategy.type == REQUESTED_TO_CAPACITY_RATIO:
            if strategy.requested_to_capacity_ratio is None:
                errs.append(required(ratio_path, "must be specified when type is RequestedToCapacityRatio"))
            else:
                errs.extend(
                    _validate_shape(f"{ratio_path}.shape", strategy.requested_to_capacity_ratio.shape)
                )
        elif strategy.requested_to_capacity_ratio is not None:
            errs.append(forbidden(ratio_path, "must be nil when type is not RequestedToCapacityRatio"))
        return errs


def _validate_shape(path: str, shape: tuple[UtilizationShapePoint, ...]) -> list[FieldError]:
    if not shape:
        return [required(path, "at least one point must be specified")]
    errs: list[FieldError] = []
    for i in range(1, len(shape)):
        if shape[i - 1].utilization >= shape[i].utilization:
            errs.append(
                invalid(
                    f"{path}[{i}].utilization",
                    shape[i].utilization,
                    "values must be sorted in increasing order",
                )
            )
            break
    for i, point in enumerate(shape):
        if not 0 <= point.utilization <= 100:
            errs.append(invalid(f"{path}[{i}].utilization", point.utilization, "not in valid range [0, 100]"))
        if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
            errs.append(
                invalid(
                    f"{path}[{i}].score", point.score, f"not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]"
                )
            )
    return errs


# --- the plugin ----------------------------------------------------------------------------------------------


class NodeResourcesFit:
    name = NAME
    scores_in_range = True

    def __init__(self, args: NodeResourcesFitArgs, handle: Any = None) -> None:
        self.ignored_resources = frozenset(args.ignored_resources)
        self.ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        self._resources = RequestedResources(resource_weights(strategy.resources), use_requested=False)
        ratio = strategy.requested_to_capacity_ratio
        shape = tuple((p.utilization, p.score) for p in ratio.shape) if ratio is not None else ()
        self._shape = scale_shape(shape or DEFAULT_SHAPE)
        self._plans: dict[tuple[int, bytes], _FitPlan] = {}
        # The last plan with the request vector (held, so its identity is not reused) and table width it is for.
        self._last_plan: tuple[np.ndarray, int, _FitPlan] | None = None
        self._memo = SlotMemo()
        self._short_memo = SlotMemo()
        self._reasons: dict[int, str] = {}

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's requests decide this plugin's answers."""
        return (tuple(pod.requests.tolist()), pod.nonzero_cpu, pod.nonzero_mem, pod.scalar_names)

    def events_to_register(self) -> list[ClusterEvent]:
        return [
            ClusterEvent("Pod", "Delete"),
            ClusterEvent("Node", "Add"),
            ClusterEvent("Node", "UpdateNodeAllocatable"),
        ]

    # --- Filter --------------------------------------------------------------------------------------------

    def _ignored(self, name: str) -> bool:
        if not is_extended_resource_name(name):
            return False
        return name in self.ignored_resources or name.split("/", 1)[0] in self.ignored_groups

    def _plan(self, pod: PodInfo, nodes: NodeTable) -> _FitPlan:
        last = self._last_plan
        if last is not None and last[0] is pod.requests and last[1] == nodes.width:
            return last[2]  # pods of one template share their (read-only) request vector
        if len(pod.requests) > nodes.width:
            nodes.ensure_columns()  # the pod brought a resource name no node has yet
        key = (nodes.width, pod.requests.tobytes())
        plan = self._plans.get(key)
        if plan is not None:
            self._last_plan = (pod.requests, nodes.width, plan)
            return plan
        names = nodes.res.names
        cols = [PODS] + [
            int(c) for c in np.flatnonzero(pod.requests) if c != PODS and not self._ignored(names[c])
        ]
        need = [1] + [int(pod.requests[c]) for c in cols[1:]]
        need_full = np.full(nodes.width, _UNCHECKED, dtype=np.int64)
        need_full[cols] = need
        reasons: list[str] = [TOO_MANY_PODS, TOO_MANY_PODS]
        unresolvable: list[bool] = [False, False]
        for c in cols[1:]:
            reason = self._reasons.get(c) or self._reasons.setdefault(c, f"Insufficient {names[c]}")
            reasons += [reason, reason]
            unresolvable += [False, True]
        plan = _FitPlan(tuple(cols), tuple(need), need_full[:, None], tuple(reasons), tuple(unresolvable))
        if len(self._plans) > 4096:
            self._plans.clear()
        self._plans[key] = plan
        self._last_plan = (pod.requests, nodes.width, plan)
        return plan

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        state.write(_PRE_FILTER_KEY, self._plan(pod, nodes))
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        plan: _FitPlan | None = state.read(_PRE_FILTER_KEY)
        if plan is None or len(plan.need_full) != nodes.width:
            plan = self._plan(pod, nodes)
        if len(idx) == 1:
            return self._filter_one(plan, nodes, int(idx[0]))
        if not nodes.unlogged_edits and not np.count_nonzero(self._short_somewhere(plan, nodes, idx)):
            return Filtered.all_pass(len(idx))
        free = nodes.free.T  # (width, capacity), rows contiguous
        if len(plan.cols) == 1:
            short_pods = free[PODS].take(idx) < 1
            if not np.count_nonzero(short_pods):
                return Filtered.all_pass(len(idx))
            return Filtered(short_pods.astype(np.uint64), plan.reasons, plan.unresolvable)
        short = free.take(idx, axis=1) < plan.need_full
        if not np.count_nonzero(short):
            return Filtered.all_pass(len(idx))
        bits = np.zeros(len(idx), dtype=np.uint64)
        alloc = nodes.allocatable.T
        for j, (col, need) in enumerate(zip(plan.cols, plan.need, strict=True)):
            row = short[col]
            if j and need > 0:
                unres = row & (alloc[col].take(idx) < need)
                row = row & ~unres
                bits |= unres.astype(np.uint64) << np.uint64(2 * j + 1)
            bits |= row.astype(np.uint64) << np.uint64(2 * j)
        return Filtered(bits, plan.reasons, plan.unresolvable)

    def _short_somewhere(self, plan: _FitPlan, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        """Per node of ``idx``: 1 if it lacks any resource the plan checks, else 0. Memoised per slot (a node's
        answer changes only with its row), so that pods of one template, the usual case, pay one ``take``."""
        cols, need = plan.cols, plan.need

        def compute(sub: np.ndarray) -> np.ndarray:
            free = nodes.free.T
            short = np.zeros(len(sub), dtype=np.int64)
            for col, amount in zip(cols, need, strict=True):
                short |= free[col].take(sub) < amount
            return short

        def compute_one(slot: int) -> int:
            row = nodes.free[slot].tolist()
            for col, amount in zip(cols, need, strict=True):
                if row[col] < amount:
                    return 1
            return 0

        return self._short_memo.get(nodes, (cols, need), idx, compute, compute_one)

    @staticmethod
    def _filter_one(plan: _FitPlan, nodes: NodeTable, slot: int) -> Filtered:
        """``filter`` for a single node (preemption's what-ifs), in plain Python: same bits, no array work."""
        free = nodes.free
        bits = 0
        for j, (col, need) in enumerate(zip(plan.cols, plan.need, strict=True)):
            if int(free[slot, col]) >= need:
                continue
            if j and need > 0 and int(nodes.allocatable[slot, col]) < need:
                bits |= 1 << (2 * j + 1)
            else:
                bits |= 1 << (2 * j)
        if not bits:
            return Filtered.all_pass(1)
        return Filtered(np.array([bits], dtype=np.uint64), plan.reasons, plan.unresolvable)

    # --- Score ---------------------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Status:
        state.write(_PRE_SCORE_KEY, self._resources.pod_requests(pod, nodes.res))
        return Status.success()

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        pod_req = state.read(_PRE_SCORE_KEY)
        if pod_req is None:
            pod_req = self._resources.pod_requests(pod, nodes.res)

        def compute(sub: np.ndarray) -> np.ndarray:
            if len(sub) <= SMALL:
                one = self._score_one
                rows = (self._resources.row(nodes, slot, pod_req) for slot in sub.tolist())
                return np.fromiter((one(row) for row in rows), dtype=np.int64, count=len(sub))
            cols = self._resources.columns(nodes, sub, pod_req)
            if self.strategy == LEAST_ALLOCATED:
                return least_allocated(cols, len(sub))
            if self.strategy == MOST_ALLOCATED:
                return most_allocated(cols, len(sub))
            return requested_to_capacity_ratio(cols, len(sub), *self._shape)

        def compute_one(slot: int) -> int:
            return self._score_one(self._resources.row(nodes, slot, pod_req))

        # A node's score depends only on its own row and the pod's requests: reuse it while both hold.
        return self._memo.get(nodes, pod_req, idx, compute, compute_one)

    def _score_one(self, row: list[tuple[int, int, int, int]]) -> int:
        if self.strategy == LEAST_ALLOCATED:
            return least_allocated_one(row)
        if self.strategy == MOST_ALLOCATED:
            return most_allocated_one(row)
        return requested_to_capacity_ratio_one(row, *self._shape)


PLUGIN = PluginDefinition(NAME, NodeResourcesFit, NodeResourcesFitArgs)
