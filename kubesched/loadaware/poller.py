"""Load values from Prometheus: per-node metric queries, their schedule, and direct mode's poller.

- ``LoadQuerier`` answers "what is ``metric`` on each of these nodes" with as few queries as it can: when the
  query template does not mention the node (the default ``$metric{$selector} / 100``), one query per metric
  fetches every node's series and they are matched to nodes here, with the same ``instanceMatch`` rules the
  per-node selectors use; otherwise each node is asked for in turn (crane's way, up to 3 queries for ``auto``).
- ``MetricSchedule``: which metrics are due, each on its own period, failures retried with backoff.
- ``DirectPoller``: direct mode (``loadSource: prometheus``): the scheduler polls Prometheus itself and keeps
  the values in the ``InMemoryLoadStore`` the Dynamic plugin reads; no node PATCH traffic.
- ``start_pollers``/``stop_pollers``: the scheduler's side of direct mode; ``rebuild_hot_values_from_api``
  seeds the hot values from recent ``Scheduled`` events.

The annotator (``annotator.py``) reuses ``LoadQuerier`` and ``MetricSchedule``.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from string import Template
from typing import TYPE_CHECKING, Any, Protocol

from .args import PROMETHEUS, DynamicArgs
from .hotvalue import HotValueStore
from .metrics import QueryMetrics, direct_mode_metrics
from .policy import DynamicSchedulerPolicy
from .promql import DEFAULT_QUERY_TEMPLATE, InstanceMatch, parse_instance_match, render_query, selectors
from .sources import InMemoryLoadStore, StoreLoadSource

if TYPE_CHECKING:
    from kubesched.client.rest import ApiClient

    from .prometheus import PrometheusClient

log = logging.getLogger(__name__)

Sample = tuple[dict[str, str], float]
NodeLister = Callable[[], Iterable[Mapping[str, Any]]]

DEFAULT_CONCURRENCY = 16
# crane's node queue: ItemExponentialFailureRateLimiter(10s, 360s).
RETRY_INITIAL = 10.0
RETRY_MAX = 360.0
# Metrics falling due within this many seconds of each other are synced in one round.
COALESCE_WINDOW = 1.0
# Placeholders that make a query node-specific: with none of them, one query serves every node.
_PER_NODE_PLACEHOLDERS = frozenset({"node", "ip"})


class PromQuerier(Protocol):
    """An instant query: the result vector as ``(labels, value)`` pairs. Raises on any failure."""

    async def query(self, promql: str) -> list[Sample]: ...


@dataclass(frozen=True, slots=True)
class NodeAddress:
    name: str
    ip: str = ""  # the first InternalIP; "" when the node has none


def node_address(node: Mapping[str, Any]) -> NodeAddress:
    name = (node.get("metadata") or {}).get("name") or ""
    for address in (node.get("status") or {}).get("addresses") or ():
        if address.get("type") == "InternalIP" and address.get("address"):
            return NodeAddress(name, address["address"])
    return NodeAddress(name)


def clean_value(value: float) -> float | None:
    """What Prometheus answered, as load: negative becomes 0 (crane's rule); NaN and ±Inf are no value at all
    (None): written as ``0.00000`` a NaN would make a node look idle, and ``inf`` is not a load."""
    if not math.isfinite(value):
        return None
    return 0.0 if value < 0 else value


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class QuerySettings:
    """How a metric's query is written: template (per metric or default), instance matching, cluster label."""

    template: str = DEFAULT_QUERY_TEMPLATE
    templates: Mapping[str, str] = field(default_factory=dict)
    instance_match: InstanceMatch = field(default_factory=lambda: InstanceMatch("auto"))
    cluster: str = ""
    concurrency: int = DEFAULT_CONCURRENCY

    @classmethod
    def from_args(cls, args: DynamicArgs) -> QuerySettings:
        return cls(
            template=args.prome_query_template,
            templates=dict(args.prome_query_templates),
            instance_match=parse_instance_match(args.instance_match),
            cluster=args.cluster_name or "",
        )

    def template_for(self, metric: str) -> str:
        return self.templates.get(metric, self.template)


class LoadQuerier:
    """Each node's value of a metric, from Prometheus."""

    def __init__(
        self,
        prometheus: PromQuerier,
        settings: QuerySettings | None = None,
        *,
        on_non_finite: Callable[[str, list[str]], None] | None = None,
    ) -> None:
        self.prometheus = prometheus
        self.settings = settings or QuerySettings()
        self.queries = 0  # sent so far, for tests and logs
        # Told (metric, nodes) when Prometheus answered NaN or ±Inf for nodes: they get no value this round.
        self.on_non_finite = on_non_finite
        self.non_finite = 0  # node values skipped so far because they were NaN or ±Inf

    def _skipped(self, metric: str, nodes: list[str]) -> None:
        if not nodes:
            return
        self.non_finite += len(nodes)
        log.warning(
            "%s: Prometheus answered NaN or Inf for %d node(s) (%s); their value is left as it was",
            metric,
            len(nodes),
            ", ".join(sorted(nodes)[:5]) + (", ..." if len(nodes) > 5 else ""),
        )
        if self.on_non_finite is not None:
            self.on_non_finite(metric, nodes)

    async def query_metric(self, metric: str, nodes: Sequence[NodeAddress]) -> dict[str, float]:
        """``node name -> value`` for the nodes Prometheus has a series for. Raises when Prometheus fails."""
        template = self.settings.template_for(metric)
        if _PER_NODE_PLACEHOLDERS.isdisjoint(Template(template).get_identifiers()):
            return await self._query_all(metric, template, nodes)
        return await self._query_each(metric, template, nodes)

    async def _ask(self, promql: str) -> list[Sample]:
        self.queries += 1
        return await self.prometheus.query(promql)

    async def _query_all(self, metric: str, template: str, nodes: Sequence[NodeAddress]) -> dict[str, float]:
        match, cluster = self.settings.instance_match, self.settings.cluster
        label = match.label if match.mode == "label" else "instance"
        selector = f'{label}=~".+"' + (f",cluster={_quote(cluster)}" if cluster else "")
        series = await self._ask(render_query(template, metric, selector, cluster=cluster))
        skipped: list[str] = []
        found = match_series(series, nodes, match, skipped)
        self._skipped(metric, skipped)
        return found

    async def _query_each(self, metric: str, template: str, nodes: Sequence[NodeAddress]) -> dict[str, float]:
        gate = asyncio.Semaphore(max(1, self.settings.concurrency))
        settings = self.settings

        skipped: list[str] = []

        async def one(node: NodeAddress) -> tuple[str, float | None]:
            queries = [
                render_query(template, metric, s, node=node.name, ip=node.ip, cluster=settings.cluster)
                for s in selectors(settings.instance_match, node.name, node.ip, settings.cluster)
            ]
            async with gate:
                for promql in dict.fromkeys(queries):  # a template without $selector renders one query
                    series = await self._ask(promql)
                    if series:
                        value = clean_value(series[-1][1])  # crane: the last series wins
                        if value is None:
                            skipped.append(node.name)
                        return node.name, value
            return node.name, None

        found = await asyncio.gather(*(one(n) for n in nodes))
        self._skipped(metric, skipped)
        return {name: value for name, value in found if value is not None}


def match_series(
    series: Iterable[Sample],
    nodes: Sequence[NodeAddress],
    match: InstanceMatch,
    non_finite: list[str] | None = None,
) -> dict[str, float]:
    """Assign the series of a metric to nodes as the per-node selectors would (later series win, as in crane).
    A node whose value is NaN or ±Inf gets none; its name is appended to ``non_finite``."""
    out: dict[str, float] = {}
    if match.mode == "label":
        by_label = {labels[match.label]: v for labels, v in series if match.label in labels}
        for n in nodes:
            if n.name in by_label:
                _keep(out, n.name, by_label[n.name], non_finite)
        return out
    exact: dict[str, float] = {}
    by_host: dict[str, float] = {}  # "<host>:<port>" instances by host ("[v6]:port" by the bare address)
    for labels, value in series:
        instance = labels.get("instance")
        if instance is None:
            continue
        exact[instance] = value
        host, colon, port = instance.rpartition(":")
        if colon and port.isdigit() and host:
            if host.startswith("[") and host.endswith("]"):
                by_host[host[1:-1]] = value
            elif ":" not in host:
                by_host[host] = value
    hit: float | None
    for node in nodes:
        address = node.ip or node.name
        if match.mode == "ip":
            hit = exact.get(address)
        elif match.mode == "ip:port":
            hit = by_host.get(address)
        elif match.mode == "nodename":
            hit = exact.get(node.name)
        else:  # auto: crane's order
            hit = exact.get(address)
            if hit is None:
                hit = by_host.get(address)
            if hit is None:
                hit = exact.get(node.name)
        if hit is not None:
            _keep(out, node.name, hit, non_finite)
    return out


def _keep(out: dict[str, float], node: str, value: float, non_finite: list[str] | None) -> None:
    cleaned = clean_value(value)
    if cleaned is not None:
        out[node] = cleaned
    elif non_finite is not None:
        non_finite.append(node)


class MetricSchedule:
    """Each metric synced every ``periods[metric]`` seconds, all of them first at ``start``; a failed sync is
    retried after 10 s, doubling up to 6 min, but never later than the metric's next regular tick."""

    def __init__(
        self,
        periods: Mapping[str, float],
        start: float,
        *,
        coalesce: float = COALESCE_WINDOW,
        retry_initial: float = RETRY_INITIAL,
        retry_max: float = RETRY_MAX,
    ) -> None:
        self.periods = dict(periods)
        self._tick = dict.fromkeys(self.periods, start)  # the next regular tick
        self._next = dict(self._tick)  # the next attempt (a retry may come before the tick)
        self._failures = dict.fromkeys(self.periods, 0)
        self.coalesce = coalesce
        self.retry_initial = retry_initial
        self.retry_max = retry_max

    def _window(self, metric: str) -> float:
        # Never so wide that a short period loses ticks to it.
        return min(self.coalesce, self.periods[metric] / 4)

    def due(self, now: float) -> list[str]:
        return [m for m, at in self._next.items() if at <= now + self._window(m)]

    def next_wake(self) -> float:
        return min(self._next.values(), default=math.inf)

    def next_attempt(self, metric: str) -> float:
        return self._next[metric]

    def upcoming(self, metric: str, now: float) -> float:
        """The first regular tick of ``metric`` after the round running at ``now``."""
        period, tick = self.periods[metric], self._tick[metric]
        while tick <= now + self._window(metric):
            tick += period
        return tick

    def completed(self, metrics: Iterable[str], now: float) -> None:
        for m in metrics:
            self._advance(m, now)
            self._failures[m] = 0
            self._next[m] = self._tick[m]

    def failed(self, metrics: Iterable[str], now: float) -> None:
        for m in metrics:
            self._advance(m, now)
            delay = min(self.retry_initial * 2 ** self._failures[m], self.retry_max)
            self._failures[m] += 1
            self._next[m] = min(now + delay, self._tick[m])

    def _advance(self, metric: str, now: float) -> None:
        # A fixed-rate ticker that skips the ticks it missed.
        self._tick[metric] = self.upcoming(metric, now)


async def sleep_until(when: float, clock: Callable[[], float]) -> None:
    await asyncio.sleep(max(0.0, when - clock()))


class DirectPoller:
    """Direct mode: polls Prometheus for ``periods``' metrics and keeps every node's values in ``store``."""

    def __init__(
        self,
        querier: LoadQuerier,
        store: InMemoryLoadStore,
        periods: Mapping[str, float],
        nodes: NodeLister,
        *,
        clock: Callable[[], float] = time.time,
        metrics: QueryMetrics | None = None,
    ) -> None:
        self.querier = querier
        self.metrics = metrics
        if metrics is not None and querier.on_non_finite is None:
            querier.on_non_finite = metrics.non_finite_seen
        self.store = store
        self.periods = dict(periods)
        self.nodes = nodes
        self.clock = clock
        self.first_round = asyncio.Event()
        self._written: set[str] = set()

    async def poll(self, metrics: Sequence[str]) -> set[str]:
        """Query ``metrics`` for every node and store the answers; returns the metrics whose query failed."""
        addresses = [node_address(n) for n in self.nodes()]
        addresses = [a for a in addresses if a.name]
        results = await asyncio.gather(
            *(self.querier.query_metric(m, addresses) for m in metrics), return_exceptions=True
        )
        now = self.clock()
        failed: set[str] = set()
        for metric, result in zip(metrics, results, strict=True):
            if isinstance(result, BaseException):
                if isinstance(result, asyncio.CancelledError):
                    raise result
                log.warning("direct mode: querying %s from Prometheus failed: %s", metric, result)
                failed.add(metric)
                if self.metrics is not None:
                    self.metrics.query_failures.labels(metric).inc()
                continue
            if self.metrics is not None:
                self.metrics.last_success.labels(metric).set(now)
            self.store.update_many((node, metric, value, now) for node, value in result.items())
            self._written.update(result)
        present = {a.name for a in addresses}
        for gone in self._written - present:
            self.store.remove_node(gone)
        self._written &= present
        return failed

    async def run(self) -> None:
        """Poll until cancelled; then close the Prometheus client (the poller owns it)."""
        schedule = MetricSchedule(self.periods, self.clock())
        try:
            while True:
                now = self.clock()
                due = schedule.due(now)
                if due:
                    failed = await self.poll(due)
                    now = self.clock()
                    schedule.completed([m for m in due if m not in failed], now)
                    schedule.failed(failed, now)
                    self.first_round.set()
                await sleep_until(schedule.next_wake(), self.clock)
        finally:
            close = getattr(self.querier.prometheus, "close", None)
            if close is not None:
                await close()


# --- the scheduler's side -----------------------------------------------------------------------------------


def _dynamic_plugins(frameworks: Mapping[str, Any]) -> list[Any]:
    from .dynamic import Dynamic

    found: dict[int, Any] = {}
    for fw in frameworks.values():
        for plugin in getattr(fw, "plugins", {}).values():
            if isinstance(plugin, Dynamic):
                found[id(plugin)] = plugin
    return list(found.values())


def _connection_key(args: DynamicArgs) -> tuple[Any, ...]:
    """Plugins whose args agree on everything that shapes the queries share one poller."""
    auth = args.prome_basic_auth
    return (
        args.prome_addr,
        args.cluster_name,
        args.prome_bearer_token.get_secret_value() if args.prome_bearer_token else None,
        args.prome_bearer_token_file,
        (auth.username, auth.password.get_secret_value() if auth.password else None, auth.password_file)
        if auth
        else None,
        args.prome_ca_file,
        args.prome_insecure_skip_verify,
        args.prome_query_timeout,
        args.prome_query_template,
        tuple(sorted(args.prome_query_templates.items())),
        args.instance_match,
        args.metrics_update_period_by_seconds,
    )


def poll_periods(policy: DynamicSchedulerPolicy, every: float | None) -> dict[str, float]:
    """The metrics direct mode polls (those with a ``syncPolicy``; the others are never fresh) and how often:
    ``every`` seconds when given (``metricsUpdatePeriodBySeconds``), else each metric's sync period."""
    periods: dict[str, float] = {}
    for sync in policy.spec.sync_policy:
        if sync.name in periods:
            continue  # crane uses the first entry for a name
        periods[sync.name] = every if every is not None else sync.period
        if every is not None and every >= sync.active_duration:
            log.warning(
                "direct mode: metricsUpdatePeriodBySeconds (%gs) is not shorter than how long %s stays fresh "
                "(%gs = its syncPolicy period + 5m): the value will be stale between polls",
                every,
                sync.name,
                sync.active_duration,
            )
    return periods


class VectorQuerier:
    """``PromQuerier`` over ``prometheus.PrometheusClient``, with crane's checks: the answer must be a vector
    and carry no warnings."""

    def __init__(self, client: PrometheusClient) -> None:
        self.client = client

    async def query(self, promql: str) -> list[Sample]:
        from .prometheus import PrometheusError

        result = await self.client.query(promql)
        if result.warnings:
            raise PrometheusError(f"{promql}: warnings: {'; '.join(result.warnings)}")
        if result.result_type != "vector":
            raise PrometheusError(f"{promql}: expected a vector, got a {result.result_type}")
        return [(s.labels, s.value) for s in result.samples]

    async def close(self) -> None:
        await self.client.close()


def prometheus_from_args(args: DynamicArgs) -> VectorQuerier:
    """A Prometheus client configured by the plugin's ``prome*`` args (``promeAddr`` must be set)."""
    from .prometheus import PrometheusClient

    if not args.prome_addr:
        raise ValueError("promeAddr is not set")
    auth = args.prome_basic_auth
    client = PrometheusClient(
        args.prome_addr,
        bearer_token=args.prome_bearer_token.get_secret_value() if args.prome_bearer_token else None,
        bearer_token_file=args.prome_bearer_token_file,
        username=auth.username if auth else None,
        password=auth.password.get_secret_value() if auth and auth.password else None,
        password_file=auth.password_file if auth else None,
        ca_file=args.prome_ca_file,
        insecure_skip_verify=args.prome_insecure_skip_verify,
        timeout=args.prome_query_timeout,
    )
    return VectorQuerier(client)


def build_pollers(
    frameworks: Mapping[str, Any],
    nodes: NodeLister,
    *,
    prometheus_factory: Callable[[DynamicArgs], PromQuerier] = prometheus_from_args,
    clock: Callable[[], float] = time.time,
) -> list[DirectPoller]:
    """One poller per distinct Prometheus set-up among the profiles' Dynamic plugins in direct mode."""
    groups: dict[tuple[Any, ...], tuple[DynamicArgs, dict[str, float], InMemoryLoadStore]] = {}
    for plugin in _dynamic_plugins(frameworks):
        args: DynamicArgs = plugin.args
        if args.load_source != PROMETHEUS or not isinstance(plugin.source, StoreLoadSource):
            continue
        key = _connection_key(args)
        periods = poll_periods(plugin.policy, args.metrics_update_period_by_seconds)
        if key not in groups:
            groups[key] = (args, {}, plugin.source.store)
        merged = groups[key][1]
        for metric, period in periods.items():
            merged[metric] = min(period, merged.get(metric, math.inf))
    polled: dict[str, int] = {}
    pollers = []
    # Failures and NaNs counted in the scheduler's own registry (its /metrics), when it has one.
    registry = next(
        (
            fw.handle.metrics.registry
            for fw in frameworks.values()
            if getattr(getattr(fw, "handle", None), "metrics", None) is not None
        ),
        None,
    )
    metrics = direct_mode_metrics(registry) if registry is not None else None
    for args, periods, store in groups.values():
        for metric in periods:
            polled[metric] = polled.get(metric, 0) + 1
        querier = LoadQuerier(prometheus_factory(args), QuerySettings.from_args(args))
        pollers.append(DirectPoller(querier, store, periods, nodes, clock=clock, metrics=metrics))
    shared = sorted(m for m, n in polled.items() if n > 1)
    if shared:
        log.warning(
            "direct mode: profiles poll %s from different Prometheus set-ups into one store; the last answer wins",
            ", ".join(shared),
        )
    return pollers


def start_pollers(
    frameworks: Mapping[str, Any],
    nodes: NodeLister,
    *,
    prometheus_factory: Callable[[DynamicArgs], PromQuerier] = prometheus_from_args,
    clock: Callable[[], float] = time.time,
) -> list[asyncio.Task[None]]:
    """Start direct mode's pollers (none when no profile runs Dynamic with ``loadSource: prometheus``).
    ``nodes`` lists the current Node objects (the scheduler's node informer: ``informers["nodes"].list``)."""
    pollers = build_pollers(frameworks, nodes, prometheus_factory=prometheus_factory, clock=clock)
    return [asyncio.create_task(p.run(), name=f"direct-mode poller {i}") for i, p in enumerate(pollers)]


async def stop_pollers(tasks: Iterable[asyncio.Task[None]]) -> None:
    tasks = list(tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def rebuild_hot_values_from_api(
    client: ApiClient, frameworks: Mapping[str, Any], *, clock: Callable[[], float] = time.time
) -> int:
    """Seed every Dynamic plugin's hot-value store from recent core/v1 ``Scheduled`` events (any scheduler's:
    the hot value is about the node). Returns the bindings recorded; no request when no profile runs Dynamic.
    Best effort: a failed LIST is logged and gives 0 (scheduling must not wait on it)."""
    stores: dict[int, HotValueStore] = {id(p.hot_values): p.hot_values for p in _dynamic_plugins(frameworks)}
    if not stores:
        return 0
    try:
        listed = await client.list_all("v1", "events", field_selector="reason=Scheduled")
    except Exception as exc:  # ApiError or connection trouble alike
        log.warning("Dynamic: cannot list Scheduled events to rebuild the hot values: %s", exc)
        return 0
    events = listed.get("items") or []
    now = clock()
    return sum(store.rebuild_from_events(events, now) for store in stores.values())


__all__ = [
    "DirectPoller",
    "LoadQuerier",
    "MetricSchedule",
    "NodeAddress",
    "PromQuerier",
    "QuerySettings",
    "VectorQuerier",
    "build_pollers",
    "clean_value",
    "match_series",
    "node_address",
    "poll_periods",
    "prometheus_from_args",
    "rebuild_hot_values_from_api",
    "start_pollers",
    "stop_pollers",
]
