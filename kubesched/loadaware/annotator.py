"""The annotator: crane-scheduler-controller's job. Queries Prometheus on each metric's sync period and writes
the values as node annotations ``<metric>: "<value>,<timestamp>"``, plus ``node_hot_value`` counted from recent
``Scheduled`` events, for a Dynamic plugin in annotation mode (ours or crane's) to read.

Differences from crane's controller, each to cut API traffic without changing what a scheduler reads:

- One merge PATCH per node per sync, carrying every metric due in that round and the hot value (crane sends
  two JSON patches per node per metric: the metric, then the hot value).
- No PATCH for a value that did not change while its timestamp is still fresh enough: a metric is rewritten
  only when its value changed or when the written one would expire (``period + 5m`` after its timestamp)
  before the next sync plus ``refresh_margin``. A hot value of 0 is written only to replace a fresh non-zero
  one: a missing or expired ``node_hot_value`` already counts as 0.
- With the default query template, one Prometheus query per metric serves every node (``LoadQuerier``).
- A metric whose query fails is retried after 10 s, doubling to 6 min (crane retries per node the same way).
  A failed PATCH is logged and the node is written again at its next sync (the old value stays fresh for
  5 minutes past the sync period).

Timestamps are crane's (local time in ``TZ``, default Asia/Shanghai, with a literal ``Z``) unless the
annotator is told to write RFC 3339 UTC (``zone=None``).
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, tzinfo
from typing import TYPE_CHECKING, Any

from aiohttp import ClientError, web

from kubesched.client.informer import Informer
from kubesched.client.rest import ApiError
from kubesched.serving import DelegatedAuth, SecureServing

from .annotations import (
    HOT_VALUE_ACTIVE_PERIOD,
    HOT_VALUE_KEY,
    AnnotationError,
    format_crane_timestamp,
    format_rfc3339,
    parse_annotation,
)
from .hotvalue import HotValueStore
from .metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from .metrics import AnnotatorMetrics
from .policy import DynamicSchedulerPolicy
from .poller import LoadQuerier, MetricSchedule, node_address, sleep_until

if TYPE_CHECKING:
    from kubesched.client.leaderelection import LeaderElector
    from kubesched.client.rest import ApiClient

log = logging.getLogger(__name__)

FIELD_MANAGER = "kubesched-annotator"
# A value is rewritten unless it stays fresh this long past the next sync (room for a late or failed round).
DEFAULT_REFRESH_MARGIN = 60.0
DEFAULT_CONCURRENCY = 8
# The leader-election part of /healthz fails when the lease was not renewed for lease duration + this.
LEADER_HEALTH_TOLERANCE = 20.0


@dataclass
class SyncReport:
    """What one sync round did."""

    metrics: tuple[str, ...]
    failed_metrics: set[str] = field(default_factory=set)
    patched: int = 0  # nodes patched
    unchanged: int = 0  # nodes that needed no patch
    failed_patches: int = 0
    missing: dict[str, int] = field(default_factory=dict)  # metric -> nodes without a series


class Annotator:
    """Keeps node load annotations current. ``start_informers()``, then ``run()`` (or ``sync()`` by hand)."""

    def __init__(
        self,
        client: ApiClient,
        querier: LoadQuerier,
        policy: DynamicSchedulerPolicy,
        *,
        zone: tzinfo | None,
        refresh_margin: float = DEFAULT_REFRESH_MARGIN,
        concurrency: int = DEFAULT_CONCURRENCY,
        clock: Callable[[], float] = time.time,
        metrics: AnnotatorMetrics | None = None,
    ) -> None:
        self.client = client
        self.querier = querier
        self.metrics = metrics
        if metrics is not None and querier.on_non_finite is None:
            querier.on_non_finite = metrics.non_finite_seen
        self.policy = policy
        self.zone = zone
        self.refresh_margin = refresh_margin
        self.concurrency = max(1, concurrency)
        self.clock = clock
        self.periods: dict[str, float] = {}
        for sync in policy.spec.sync_policy:
            self.periods.setdefault(sync.name, sync.period)  # crane: the first entry for a name
        self.schedule = MetricSchedule(self.periods, clock())
        self.hot_values = HotValueStore(retention=max(policy.max_hot_value_range, HOT_VALUE_ACTIVE_PERIOD))
        self.nodes = Informer(client, "v1", "nodes")
        self.events = Informer(client, "v1", "events", field_selector="reason=Scheduled")
        self.events.add_handler(self._event_seen, lambda _old, new: self._event_seen(new), None)
        self.patches = 0  # PATCH requests sent so far

    # --- informers ------------------------------------------------------------------------------------------

    def start_informers(self) -> None:
        self.nodes.start()
        self.events.start()

    async def wait_for_sync(self, timeout: float | None = None) -> bool:
        results = await asyncio.gather(self.nodes.has_synced(timeout), self.events.has_synced(timeout))
        return all(results)

    async def stop(self) -> None:
        await self.nodes.stop()
        await self.events.stop()

    def _event_seen(self, event: dict[str, Any]) -> None:
        self.hot_values.rebuild_from_events((event,), self.clock())

    # --- the loop -------------------------------------------------------------------------------------------

    async def run(self, leading: asyncio.Event | None = None) -> None:
        """Sync every metric on its period until cancelled, or until ``leading`` is cleared."""
        self.schedule = MetricSchedule(self.periods, self.clock())
        while leading is None or leading.is_set():
            due = self.schedule.due(self.clock())
            if due:
                report = await self.sync(due, leading=leading)
                now = self.clock()
                self.schedule.completed([m for m in due if m not in report.failed_metrics], now)
                self.schedule.failed(report.failed_metrics, now)
            await sleep_until(self.schedule.next_wake(), self.clock)

    async def sync(self, metrics: Sequence[str], *, leading: asyncio.Event | None = None) -> SyncReport:
        """Query ``metrics`` for every node and patch each node whose annotations need it."""
        unknown = [m for m in metrics if m not in self.periods]
        if unknown:
            raise ValueError(f"{', '.join(unknown)}: not in the policy's syncPolicy")
        report = SyncReport(tuple(metrics))
        nodes = [n for n in self.nodes.list() if (n.get("metadata") or {}).get("name")]
        addresses = [node_address(n) for n in nodes]
        results = await asyncio.gather(
            *(self.querier.query_metric(m, addresses) for m in metrics), return_exceptions=True
        )
        values: dict[str, dict[str, float]] = {}
        for metric, result in zip(metrics, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.warning("querying %s from Prometheus failed: %s", metric, result)
                report.failed_metrics.add(metric)
                if self.metrics is not None:
                    self.metrics.query_failures.labels(metric).inc()
                continue
            values[metric] = result
            if self.metrics is not None:
                self.metrics.last_success.labels(metric).set(self.clock())
            report.missing[metric] = len(addresses) - len(result)
            if report.missing[metric]:
                log.info("%s: no series for %d of %d nodes", metric, report.missing[metric], len(addresses))
        if not values:
            return report
        now = self.clock()
        self.hot_values.gc(now)
        next_sync = {m: self.schedule.upcoming(m, now) for m in self.periods}
        next_any = min(next_sync.values(), default=math.inf)
        gate = asyncio.Semaphore(self.concurrency)

        async def one(node: Mapping[str, Any]) -> None:
            name = node["metadata"]["name"]
            current = node["metadata"].get("annotations") or {}
            updates = {}
            for metric, by_node in values.items():
                if name in by_node:
                    text = self._metric_update(
                        current.get(metric), metric, by_node[name], now, next_sync[metric]
                    )
                    if text is not None:
                        updates[metric] = text
            hot = self.hot_values.hot_value(name, self.policy.spec.hot_value, now)
            text = self._hot_update(current.get(HOT_VALUE_KEY), hot, now, next_any)
            if text is not None:
                updates[HOT_VALUE_KEY] = text
            if not updates:
                report.unchanged += 1
                return
            async with gate:
                if leading is not None and not leading.is_set():
                    return  # leadership is gone: no more writes
                if await self._patch(name, updates):
                    report.patched += 1
                    if self.metrics is not None:
                        self.metrics.patches.labels("success").inc()
                else:
                    report.failed_patches += 1
                    if self.metrics is not None:
                        self.metrics.patches.labels("error").inc()

        await asyncio.gather(*(one(n) for n in nodes))
        log.info(
            "synced %s: %d nodes patched, %d unchanged, %d failed",
            ", ".join(values),
            report.patched,
            report.unchanged,
            report.failed_patches,
        )
        return report

    # --- what to write ------------------------------------------------------------------------------------

    def stamp(self, when: float) -> str:
        return format_rfc3339(when) if self.zone is None else format_crane_timestamp(when, self.zone)

    def _written(self, text: str | None) -> tuple[str, float] | None:
        """(value text, timestamp) of an annotation in the format this annotator writes, else None (so that
        it is rewritten: crane's scheduler cannot read RFC 3339, and a crane ``Z`` is local time)."""
        if text is None or text.endswith("Z") != (self.zone is not None):
            return None
        try:
            sample = parse_annotation(text, self.zone or UTC)
        except AnnotationError:
            return None
        return text.split(",", 1)[0], sample.timestamp

    def _metric_update(
        self, current: str | None, metric: str, value: float, now: float, next_sync: float
    ) -> str | None:
        if not math.isfinite(value):
            return None  # never written as load (the querier skips them already)
        written = f"{value:.5f}"
        seen = self._written(current)
        if seen is not None:
            old, stamp = seen
            lasts_until = stamp + self.policy.active_duration(metric)  # type: ignore[operator]
            if old == written and lasts_until >= next_sync + self.refresh_margin:
                return None
        return f"{written},{self.stamp(now)}"

    def _hot_update(self, current: str | None, hot: int, now: float, next_sync: float) -> str | None:
        seen = self._written(current)
        fresh = seen is not None and now < seen[1] + HOT_VALUE_ACTIVE_PERIOD
        if hot == 0:
            # Missing or expired reads as 0 already; only a fresh non-zero value must be overwritten.
            if not fresh or seen is None or float(seen[0]) == 0:
                return None
        elif fresh and seen is not None and _same_int(seen[0], hot):
            if seen[1] + HOT_VALUE_ACTIVE_PERIOD >= next_sync + self.refresh_margin:
                return None
        return f"{hot},{self.stamp(now)}"

    async def _patch(self, node: str, annotations: dict[str, str]) -> bool:
        self.patches += 1
        try:
            await self.client.patch(
                "v1",
                "nodes",
                node,
                {"metadata": {"annotations": annotations}},
                patch_type="merge",
                field_manager=FIELD_MANAGER,
            )
        except ApiError as exc:
            if exc.is_not_found():
                return True  # deleted since the informer saw it: nothing to keep current
            log.warning("patching the load annotations of node %s failed: %s", node, exc)
            return False
        except (TimeoutError, OSError, ClientError) as exc:
            log.warning("patching the load annotations of node %s failed: %s", node, exc)
            return False
        return True


def _same_int(text: str, value: int) -> bool:
    try:
        return float(text) == value
    except ValueError:
        return False


async def run_annotator(annotator: Annotator, elector: LeaderElector | None = None) -> None:
    """Annotate until cancelled; with ``elector``, only while leading, and return when leadership is lost."""
    if elector is None:
        await annotator.run()
        return
    elector.on_started_leading = lambda: annotator.run(elector.leading)
    await elector.run()


class HealthServer:
    """The annotator's endpoint: ``/healthz``, ``/livez``, ``/readyz`` (ok, unless we lead but have not renewed
    the lease for too long; crane's controller answers ping only) and ``/metrics`` (``AnnotatorMetrics``).

    Served over HTTPS through ``kubesched.serving`` (``auth``: delegated authentication and authorization; the
    health paths are always allowed, ``/metrics`` needs a caller the API server allows). ``insecure=True``
    serves plain HTTP without authentication, on a loopback address only.
    """

    def __init__(
        self,
        bind_address: str,
        port: int,
        *,
        elector: LeaderElector | None = None,
        metrics: AnnotatorMetrics | None = None,
        auth: DelegatedAuth | None = None,
        insecure: bool = False,
        cert_file: str | None = None,
        key_file: str | None = None,
        cert_dir: str | None = None,
    ) -> None:
        self.bind_address = bind_address
        self.port = port
        self.elector = elector
        self.metrics = metrics
        self._serving = SecureServing(
            self._app(),
            bind_address=bind_address,
            port=port,
            cert_file=cert_file,
            key_file=key_file,
            cert_dir=cert_dir,
            pair_name="kubesched-annotator",
            auth=auth,
            insecure=insecure,
        )

    @property
    def url(self) -> str:
        return self._serving.url

    def problems(self) -> list[str]:
        found = []
        if self.elector is not None and not self.elector.check(LEADER_HEALTH_TOLERANCE):
            found.append("leaderElection: the lease was not renewed in time")
        return found

    async def _healthz(self, request: web.Request) -> web.Response:
        problems = self.problems()
        if problems:
            return web.Response(status=500, text="\n".join(problems) + "\nhealthz check failed\n")
        return web.Response(text="ok")

    async def _metrics(self, request: web.Request) -> web.Response:
        body = self.metrics.exposition() if self.metrics is not None else b""
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    def _app(self) -> web.Application:
        app = web.Application()
        for path in ("/healthz", "/livez", "/readyz"):
            app.router.add_get(path, self._healthz)
        app.router.add_get("/metrics", self._metrics)
        return app

    async def start(self) -> None:
        await self._serving.start()
        self.port = self._serving.port

    async def stop(self) -> None:
        await self._serving.stop()


__all__ = [
    "DEFAULT_REFRESH_MARGIN",
    "FIELD_MANAGER",
    "Annotator",
    "HealthServer",
    "SyncReport",
    "run_annotator",
]
