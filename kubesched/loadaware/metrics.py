"""The annotator's own metrics, served at ``/metrics`` on its secure port: what Prometheus did for it.

- ``kubesched_annotator_prometheus_query_failures_total{metric}``: queries that failed (Prometheus down, slow
  past the timeout, or answering what is not a query result); the metric is retried with back-off.
- ``kubesched_annotator_prometheus_non_finite_values_total{metric}``: node values Prometheus answered as NaN or
  ±Inf; they are never written as load (the node keeps its previous value, which goes stale in time).
- ``kubesched_annotator_last_successful_query_timestamp_seconds{metric}``: when a metric was last answered.
- ``kubesched_annotator_node_patches_total{result}``: node PATCHes, ``success`` or ``error``.

A stale ``last_successful_query`` or a growing failure count tells the user what the Dynamic plugin can only
see as annotations going stale (it then stops filtering and scoring by load, fail-open, as crane).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4


class AnnotatorMetrics:
    """One registry per annotator (tests run several in a process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.query_failures = Counter(
            "kubesched_annotator_prometheus_query_failures",
            "Prometheus queries of a metric that failed (down, timed out, or an unreadable answer).",
            ["metric"],
            registry=self.registry,
        )
        self.non_finite = Counter(
            "kubesched_annotator_prometheus_non_finite_values",
            "Node values Prometheus answered as NaN or Inf, skipped (never written as load).",
            ["metric"],
            registry=self.registry,
        )
        self.last_success = Gauge(
            "kubesched_annotator_last_successful_query_timestamp_seconds",
            "Unix time of the last successful Prometheus query of a metric.",
            ["metric"],
            registry=self.registry,
        )
        self.patches = Counter(
            "kubesched_annotator_node_patches",
            "PATCH requests writing node load annotations, by result.",
            ["result"],
            registry=self.registry,
        )

    def non_finite_seen(self, metric: str, nodes: list[str]) -> None:
        self.non_finite.labels(metric).inc(len(nodes))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
