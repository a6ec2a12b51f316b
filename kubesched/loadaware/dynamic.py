"""The ``Dynamic`` plugin: crane-scheduler's load-aware Filter and Score, plus a PostBind that counts bindings
for the hot value inside the scheduler.

- Filter: rejects a node whose fresh load exceeds a policy limit, with crane's reason
  ``Load[<metric>] of node[<node>] is too high``; stale or missing data passes; DaemonSet pods are not
  filtered.
- Score: crane's weighted ``(1 - usage)`` score, minus 10 points per hot-value unit, clamped to 0..100. The
  hot value is the larger of the in-process count (PostBind) and a fresh ``node_hot_value`` annotation written
  by crane's controller, so running beside crane's controller does not count a binding twice.
- PostBind: records the binding in the ``HotValueStore`` shared by the scheduler's profiles (one per scheduler,
  from ``Handle.singletons``, as is the direct-mode ``InMemoryLoadStore``).

Everything node-level is vectorised over the candidate slots; load values come from a ``LoadSource`` (node
annotations, or the in-memory store a Prometheus poller fills in direct mode).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.handle import Handle, Singletons
from kubesched.scheduler.framework.interface import ClusterEvent, CycleState, Filtered

from .annotations import HOT_VALUE_ACTIVE_PERIOD, HOT_VALUE_KEY, time_zone
from .args import PROMETHEUS, DynamicArgs
from .hotvalue import HotValueStore
from .policy import DynamicSchedulerPolicy, PolicyError, policy_for
from .scoring import ScorePlan, annotation_hot_penalty, final_scores, first_overload, load_scores
from .sources import AnnotationLoadSource, InMemoryLoadStore, LoadSource, StoreLoadSource

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

log = logging.getLogger(__name__)

NAME = "Dynamic"
_MAX_REASON_BITS = 64


def overload_reason(metric: str, node: str) -> str:
    return f"Load[{metric}] of node[{node}] is too high"


def _is_daemonset_pod(pod: PodInfo) -> bool:
    refs = (pod.pod.get("metadata") or {}).get("ownerReferences") or ()
    return any(ref.get("kind") == "DaemonSet" for ref in refs)


class Dynamic:
    name = NAME
    scores_in_range = True

    def __init__(
        self,
        args: DynamicArgs,
        handle: Handle | None = None,
        *,
        policy: DynamicSchedulerPolicy | None = None,
        source: LoadSource | None = None,
        hot_values: HotValueStore | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.args = args
        if policy is None:
            try:
                policy = policy_for(args.policy_config_path)
            except PolicyError as e:
                # The scheduler refuses to start (crane's plugin factory fails the same way), on one line.
                raise ValueError(f"Dynamic: policyConfigPath: {e.one_line()}") from None
        self.policy = policy
        self.zone = time_zone(args.annotation_time_zone)
        # Per-scheduler stores: every profile's Dynamic sees the same load values and bindings.
        singletons = handle.singletons if handle is not None else Singletons()
        metrics = (*self.policy.metrics, HOT_VALUE_KEY)
        if source is None:
            if args.load_source == PROMETHEUS:
                source = StoreLoadSource(singletons.get(InMemoryLoadStore), metrics)
            else:
                source = AnnotationLoadSource(metrics, self.zone)
        self.source = source
        if hot_values is None:
            hot_values = singletons.get(HotValueStore)
        self.hot_values = hot_values
        self.hot_values.ensure_retention(self.policy.max_hot_value_range)
        self.clock = clock
        self._cache = handle.cache if handle is not None else None
        self.plan = ScorePlan.build(self.policy, source.metrics)
        self._hot_windows = self.policy.spec.hot_value

    def events_to_register(self) -> list[ClusterEvent]:
        # New load numbers arrive as node annotation updates. Values going stale with time have no event:
        # the queue's periodic flush of unschedulable pods retries those.
        return [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeAnnotation")]

    # --- Filter --------------------------------------------------------------------------------------------

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        if not self.plan.predicates or _is_daemonset_pod(pod):
            return Filtered.all_pass(len(idx))
        cols = self.source.columns(nodes, idx)
        first = first_overload(cols, self.plan, self.clock())
        bad = np.flatnonzero(first >= 0)
        if not len(bad):
            return Filtered.all_pass(len(idx))
        return self._verdict(nodes, idx, first, bad)

    def _verdict(self, nodes: NodeTable, idx: np.ndarray, first: np.ndarray, bad: np.ndarray) -> Filtered:
        """crane's reason names the node, so each rejected node gets its own reason bit; past 64 - P of them
        in one call, the rest share a per-metric reason without the name."""
        predicates = self.plan.predicates
        own = _MAX_REASON_BITS - len(predicates)
        bits = np.zeros(len(idx), dtype=np.uint64)
        reasons: list[str] = []
        names = nodes.names
        for k, pos in enumerate(bad[:own].tolist()):
            metric = predicates[int(first[pos])].metric
            reasons.append(overload_reason(metric, names[int(idx[pos])] or ""))
            bits[pos] = np.uint64(1) << np.uint64(k)
        rest = bad[own:]
        if len(rest):
            reasons += [""] * (own - len(reasons))
            reasons += [f"Load[{p.metric}] of node is too high" for p in predicates]
            bits[rest] = np.uint64(1) << (first[rest].astype(np.uint64) + np.uint64(own))
        return Filtered(bits, tuple(reasons), (False,) * len(reasons))

    # --- Score ---------------------------------------------------------------------------------------------

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        now = self.clock()
        cols = self.source.columns(nodes, idx)
        base = load_scores(cols, self.plan, now)
        hot = self.hot_values.hot_values(nodes, idx, self._hot_windows, now)
        self._count_in_flight(hot, nodes, idx, now)
        penalty = np.maximum(hot * 10, annotation_hot_penalty(cols, self.plan, now))
        return final_scores(base, penalty)

    def _count_in_flight(self, hot: np.ndarray, nodes: NodeTable, idx: np.ndarray, now: float) -> None:
        """Count pods assumed on a node whose binding has not landed yet (PostBind records a binding only once
        the API server confirms it): without them a burst of pods scheduled before the first binding returns all
        see the same hot values and pile onto the one coolest node, crane's hot-spot weakness. Few pods are ever in
        flight, so this looks at their nodes only."""
        cache = self._cache
        if cache is None or not self._hot_windows:
            return
        in_flight: dict[str, int] = {}
        for pi in cache.assumed.values():
            node = pi.node_name
            if node and not self.hot_values.has(node, pi.key):
                in_flight[node] = in_flight.get(node, 0) + 1
        if not in_flight:
            return
        where = {int(slot): pos for pos, slot in enumerate(idx.tolist())}
        for node, extra in in_flight.items():
            pos = where.get(nodes.index.get(node, -1))
            if pos is not None:
                hot[pos] = sum(
                    (self.hot_values.count(node, w.time_range, now) + extra) // w.count
                    for w in self._hot_windows
                )

    # --- PostBind ------------------------------------------------------------------------------------------

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.hot_values.record(node_name, pod.key, self.clock())

    # --- hot value seeding ---------------------------------------------------------------------------------

    def rebuild_hot_values(self, events: Iterable[Mapping[str, Any]]) -> int:
        """Seed the hot values from recent ``Scheduled`` events (on start or on taking over leadership)."""
        return self.hot_values.rebuild_from_events(events, self.clock())

    # --- diagnostics ---------------------------------------------------------------------------------------

    def explain(self, nodes: NodeTable, node_name: str) -> dict[str, Any]:
        """What Dynamic sees for one node: each metric's value and freshness, the load score before the hot
        value, the hot value and the final score (crane logs only the already-reduced score, crane#66)."""
        slot = nodes.index.get(node_name)
        if slot is None:
            raise KeyError(f"no node named {node_name!r}")
        idx = np.array([slot], dtype=np.intp)
        now = self.clock()
        cols = self.source.columns(nodes, idx)
        metrics = {}
        for row, metric in enumerate(cols.metrics):
            active = (
                HOT_VALUE_ACTIVE_PERIOD if metric == HOT_VALUE_KEY else self.policy.active_duration(metric)
            )
            value, stamp = float(cols.values[row, 0]), float(cols.timestamps[row, 0])
            metrics[metric] = {
                "value": None if np.isnan(value) else value,
                "timestamp": None if np.isnan(stamp) else stamp,
                "fresh": active is not None and not np.isnan(value) and now < stamp + active,
            }
        first = int(first_overload(cols, self.plan, now)[0])
        hot = int(self.hot_values.hot_values(nodes, idx, self._hot_windows, now)[0])
        return {
            "metrics": metrics,
            "overloaded_by": None if first < 0 else self.plan.predicates[first].metric,
            "load_score": int(load_scores(cols, self.plan, now)[0]),
            "hot_value": hot,
            "annotation_hot_penalty": int(annotation_hot_penalty(cols, self.plan, now)[0]),
            "score": int(self.score(CycleState(), None, nodes, idx)[0]),  # type: ignore[arg-type]
        }


__all__ = ["NAME", "Dynamic", "overload_reason"]
