"""What Prometheus did for load-aware scheduling, as metrics: the annotator's (served at ``/metrics`` on its
secure port) and direct mode's (``kubesched_dynamic_*``, in the scheduler's own registry, on its ``/metrics``).

- ``kubesched_annotator_prometheus_query_failures_total{metric}``: queries that failed (Prometheus down, slow
  past the timeout, or answering what is not a query result); the metric is retried with back-off.
- ``kubesched_annotator_prometheus_non_finite_values_total{metric}``: node values Prometheus answered as NaN or
  ±Inf; they are never written as load (the node keeps its previous value, which goes stale in time).
- ``kubesched_annotator_last_successful_query_timestamp_seconds{metric}``: when a metric was last answered.
- ``kubesched_annotator_node_patches_total{result}``: node PATCHes, ``success`` or ``error``.

Direct mode (the scheduler polls Prometheus itself) exposes the first three as ``kubesched_dynamic_*``.

A stale ``last_successful_query`` or a growing failure count tells the user what the Dynamic plugin can only
see as annotations going stale (it then stops filtering and scoring by load, fail-open, as crane).
"""

from __future__ import annotations

import weakref

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


class QueryMetrics:
    """Prometheus query outcomes per load metric, under ``prefix`` (``kubesched_annotator``, ``kubesched_dynamic``)."""

    def __init__(self, registry: CollectorRegistry, prefix: str) -> None:
        self.registry = registry
        self.query_failures = Counter(
            f"{prefix}_prometheus_query_failures",
            "Prometheus queries of a metric that failed (down, timed out, or an unreadable answer).",
            ["metric"],
            registry=registry,
        )
        self.non_finite = Counter(
            f"{prefix}_prometheus_non_finite_values",
            "Node values Prometheus answered as NaN or Inf, skipped (never used as load).",
            ["metric"],
            registry=registry,
        )
        self.last_success = Gauge(
            f"{prefix}_last_successful_query_timestamp_seconds",
            "Unix time of the last successful Prometheus query of a metric.",
            ["metric"],
            registry=registry,
        )

    def non_finite_seen(self, metric: str, nodes: list[str]) -> None:
        self.non_finite.labels(metric).inc(len(nodes))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class AnnotatorMetrics(QueryMetrics):
    """The annotator's registry (one per annotator: tests run several in a process)."""

    def __init__(self) -> None:
        super().__init__(CollectorRegistry(), "kubesched_annotator")
        self.patches = Counter(
            "kubesched_annotator_node_patches",
            "PATCH requests writing node load annotations, by result.",
            ["result"],
            registry=self.registry,
        )


_DIRECT: weakref.WeakKeyDictionary[CollectorRegistry, QueryMetrics] = weakref.WeakKeyDictionary()


def direct_mode_metrics(registry: CollectorRegistry) -> QueryMetrics:
    """Direct mode's metrics in a scheduler's registry, registered once per registry."""
    found = _DIRECT.get(registry)
    if found is None:
        found = _DIRECT[registry] = QueryMetrics(registry, "kubesched_dynamic")
    return found
