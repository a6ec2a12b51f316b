"""The operator's Prometheus metrics (served on ``/metrics`` of its HTTPS port).

- ``kubesched_operator_reconciles_total{controller}``, ``kubesched_operator_reconcile_errors_total{controller}``
- ``kubesched_operator_reconcile_duration_seconds{controller}`` (histogram)
- ``kubesched_operator_node_current_revision{node}``, ``kubesched_operator_node_target_revision{node}``
- ``kubesched_operator_latest_available_revision``
- ``kubesched_operator_leader`` (1 while this process leads)
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "kubesched_operator_reconciles", "Syncs of each operator controller.", ["controller"], registry=r
        )
        self.errors = Counter(
            "kubesched_operator_reconcile_errors",
            "Syncs of each operator controller that ended in an error.",
            ["controller"],
            registry=r,
        )
        self.duration = Histogram(
            "kubesched_operator_reconcile_duration_seconds",
            "How long each sync of an operator controller took.",
            ["controller"],
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
            registry=r,
        )
        self.current_revision = Gauge(
            "kubesched_operator_node_current_revision",
            "The scheduler revision running on each control-plane node.",
            ["node"],
            registry=r,
        )
        self.target_revision = Gauge(
            "kubesched_operator_node_target_revision",
            "The revision being installed on each control-plane node (0: none).",
            ["node"],
            registry=r,
        )
        self.latest_revision = Gauge(
            "kubesched_operator_latest_available_revision",
            "The newest revision of the scheduler's inputs.",
            registry=r,
        )
        self.leader = Gauge("kubesched_operator_leader", "1 while this operator process leads.", registry=r)
        self._nodes: set[str] = set()

    def observe_sync(self, controller: str, seconds: float, error: bool) -> None:
        self.reconciles.labels(controller).inc()
        self.duration.labels(controller).observe(seconds)
        if error:
            self.errors.labels(controller).inc()

    def observe_kubescheduler(self, ks: dict[str, Any] | None) -> None:
        """Gauges from ``KubeScheduler/cluster``'s status (nodes that left are dropped)."""
        status = (ks or {}).get("status") or {}
        self.latest_revision.set(int(status.get("latestAvailableRevision") or 0))
        seen: set[str] = set()
        for ns in status.get("nodeStatuses") or []:
            node = str(ns.get("nodeName") or "")
            if not node:
                continue
            seen.add(node)
            self.current_revision.labels(node).set(int(ns.get("currentRevision") or 0))
            self.target_revision.labels(node).set(int(ns.get("targetRevision") or 0))
        for gone in self._nodes - seen:
            self.current_revision.remove(gone)
            self.target_revision.remove(gone)
        self._nodes = seen

    def render(self) -> bytes:
        return generate_latest(self.registry)
