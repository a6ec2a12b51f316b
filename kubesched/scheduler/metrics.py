"""The scheduler's Prometheus metrics, named, typed, labelled and bucketed as kube-scheduler's
(``pkg/scheduler/metrics``), plus client-go's ``leader_election_master_status``.

Every ``SchedulerMetrics`` owns its own ``CollectorRegistry``, so tests and several schedulers in one process do
not clash. Labelled children are cached per label tuple: a call costs a dict lookup and a lock-free-ish observe,
cheap enough for every pod. Gauges that mirror state the scheduler already keeps (queue lengths, cache sizes) are
read at scrape time through callbacks instead of being updated on every change.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.metrics_core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from kubesched.scheduler.framework.interface import Code

SUBSYSTEM = "scheduler"
# The content type kube-scheduler's /metrics answers with (Prometheus text format 0.0.4).
CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4

# ``queue`` label values of pending_pods / queue_incoming_pods_total.
QUEUE_ACTIVE = "active"
QUEUE_BACKOFF = "backoff"
QUEUE_UNSCHEDULABLE = "unschedulable"
QUEUE_GATED = "gated"
PENDING_QUEUES = (QUEUE_ACTIVE, QUEUE_BACKOFF, QUEUE_UNSCHEDULABLE, QUEUE_GATED)

# Upstream samples per-plugin durations in 10% of the scheduling cycles (``pluginMetricsSamplePercent``).
DEFAULT_PLUGIN_SAMPLE_PERCENT = 10

_STATUS_LABELS = {
    Code.SUCCESS: "Success",
    Code.ERROR: "Error",
    Code.UNSCHEDULABLE: "Unschedulable",
    Code.UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    Code.WAIT: "Wait",
    Code.SKIP: "Skip",
    Code.PENDING: "Pending",
}


def status_label(code: Code | int) -> str:
    """The ``status`` label for a status code, spelled as upstream's ``Code.String()``."""
    return _STATUS_LABELS.get(Code(code), "Unknown")


def exponential_buckets(start: float, factor: float, count: int) -> list[float]:
    """``count`` bucket bounds ``start * factor**i``, computed by repeated multiplication like upstream so the
    ``le`` labels are the same floats."""
    bounds: list[float] = []
    bound = start
    for _ in range(count):
        bounds.append(bound)
        bound *= factor
    return bounds


# Scheduling attempts between two folds of the histograms' pending observations into their buckets
# (``SchedulerMetrics.observe_attempt``): an attempt observes about a dozen, so a few hundred wait at most.
FOLD_EVERY_ATTEMPTS = 64


class _Series:
    """One label set of a ``FastHistogram``: per-bucket (non-cumulative) counts and the sum, and the observations
    not yet counted in them (``pending``, in the order they were made).

    An observation is an append to ``pending`` (the hot callers keep ``pending.append`` itself: a C call, where a
    bisect and two additions in a Python method cost five times as much); ``fold`` counts them into the buckets
    and adds them to the sum in that order, so the sum is the same float as when each was added at once. Every
    read (``collect``) folds first."""

    __slots__ = ("_bounds", "bounds", "counts", "pending", "total")

    def __init__(self, bounds: list[float], bounds_array: np.ndarray) -> None:
        self.bounds = bounds
        self._bounds = bounds_array
        self.counts = [0] * len(bounds)
        self.total = 0.0
        self.pending: list[float] = []

    def observe(self, amount: float) -> None:
        self.pending.append(amount)

    def fold(self) -> None:
        pending = self.pending
        if not pending:
            return
        counts = self.counts
        per_bucket: list[int] = []
        if len(pending) >= 8:
            # The first bucket whose bound is >= amount, as bisect_left below (a NaN falls past the end there:
            # then the general path, which puts it first).
            at = np.searchsorted(self._bounds, np.array(pending, dtype=np.float64), side="left")
            per_bucket = np.bincount(at, minlength=len(counts)).tolist()
        if len(per_bucket) == len(counts):
            for i, n in enumerate(per_bucket):
                if n:
                    counts[i] += n
        else:
            # The first bucket whose bound is >= amount, as prometheus_client's ``amount <= bound``.
            for amount in pending:
                counts[bisect_left(self.bounds, amount)] += 1
        total = self.total
        for amount in pending:
            total += amount
        self.total = total
        pending.clear()  # the same list: callers keep its ``append``


class FastHistogram:
    """A histogram exposed exactly like prometheus_client's (same samples, no ``_created``), observed with a
    bisect and two additions and no lock: the scheduling loop observes several per pod, and
    ``Histogram.observe`` (a locked increment per bucket walk) was a tenth of a cycle. Single-threaded use."""

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        *,
        buckets: Iterable[float],
        registry: CollectorRegistry,
    ) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        bounds = [float(b) for b in buckets]
        if bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self.bounds = bounds
        self._bounds = np.array(bounds, dtype=np.float64)
        self._le = [floatToGoString(b) for b in bounds]
        self._series: dict[tuple[str, ...], _Series] = {}
        if not self.labelnames:
            self.labels()  # an unlabelled histogram is exposed (all zero) from the start
        registry.register(self)

    def labels(self, *values: str) -> _Series:
        series = self._series.get(values)
        if series is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
            series = self._series[values] = _Series(self.bounds, self._bounds)
        return series

    def observe(self, amount: float) -> None:
        self.labels().observe(amount)

    def fold(self) -> None:
        """Count every series' pending observations into its buckets."""
        for series in list(self._series.values()):
            series.fold()

    def describe(self) -> list[Metric]:
        return [HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = HistogramMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, series in list(self._series.items()):
            series.fold()
            acc = 0.0
            cumulative = []
            for le, count in zip(self._le, series.counts, strict=True):
                acc += count
                cumulative.append((le, acc))
            family.add_metric(list(values), cumulative, series.total)
        return [family]


class _Count:
    """One label set of a ``FastCounter``: a plain number."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value: float = 0

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self.value += amount


class FastCounter:
    """A counter exposed exactly like prometheus_client's ``Counter`` (``<name>_total`` samples, float values, no
    ``_created``) whose series are plain numbers: counted with an addition and no lock, as the scheduling loop and
    the queue count every pod. Single-threaded use."""

    def __init__(
        self, name: str, documentation: str, labelnames: Iterable[str] = (), *, registry: CollectorRegistry
    ) -> None:
        self.name = name[:-6] if name.endswith("_total") else name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self._series: dict[tuple[str, ...], _Count] = {}
        if not self.labelnames:
            self.labels()  # an unlabelled counter is exposed (zero) from the start
        registry.register(self)

    def labels(self, *values: str) -> _Count:
        count = self._series.get(values)
        if count is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
            count = self._series[values] = _Count()
        return count

    def inc(self, amount: float = 1) -> None:
        self.labels().inc(amount)

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for values, count in list(self._series.items()):
            family.add_metric(list(values), float(count.value))
        return [family]


class BatchCounts(Protocol):
    attempts: dict[str, int]
    flushes: dict[str, int]


class _BatchCollector:
    """``scheduler_batch_attempts_total{profile,result}`` and ``scheduler_batch_cache_flushed_total{profile,reason}``
    (upstream's help texts) from the counts each profile's batch keeps."""

    def __init__(self, batches: Mapping[str, BatchCounts]) -> None:
        self._batches = batches

    def describe(self) -> list[Metric]:
        return []

    def collect(self) -> Iterator[Metric]:
        attempts = CounterMetricFamily(
            f"{SUBSYSTEM}_batch_attempts",
            "Counts of results when we attempt to use batching.",
            labels=["profile", "result"],
        )
        flushed = CounterMetricFamily(
            f"{SUBSYSTEM}_batch_cache_flushed",
            "Counts of cache flushes by reason.",
            labels=["profile", "reason"],
        )
        for profile, batch in self._batches.items():
            for result, n in batch.attempts.items():
                if n:
                    attempts.add_metric([profile, result], n)
            for reason, n in batch.flushes.items():
                flushed.add_metric([profile, reason], n)
        yield attempts
        yield flushed


def _reader(source: Callable[[], Mapping[str, int]], key: str) -> Callable[[], float]:
    """A scrape-time callback reading ``source()[key]`` (0 when absent)."""
    return lambda: float(source().get(key, 0))


class _WithoutCreated:
    """Exposes a registry without the ``*_created`` samples prometheus_client adds (upstream has none)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Iterator[Metric]:
        for family in self._registry.collect():
            samples = [s for s in family.samples if not s.name.endswith("_created")]
            if len(samples) != len(family.samples):
                family.samples = samples
            yield family


class SchedulerMetrics:
    """All scheduler metrics in one registry, with helpers the scheduling loop, framework and queue call."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        plugin_sample_percent: int = DEFAULT_PLUGIN_SAMPLE_PERCENT,
        rng: random.Random | None = None,
    ) -> None:
        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        self.plugin_sample_percent = plugin_sample_percent
        self._rng = rng or random.Random()
        reg = self.registry

        def name(short: str) -> str:
            return f"{SUBSYSTEM}_{short}"

        # prometheus_client appends ``_total`` to counters itself.
        self.schedule_attempts = FastCounter(
            name("schedule_attempts"),
            "Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could not be "
            "scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=reg,
        )
        self.scheduling_attempt_duration = FastHistogram(
            name("scheduling_attempt_duration_seconds"),
            "Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=reg,
        )
        self.scheduling_algorithm_duration = FastHistogram(
            name("scheduling_algorithm_duration_seconds"),
            "Scheduling algorithm latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=reg,
        )
        self.preemption_victims = Histogram(
            name("preemption_victims"),
            "Number of selected preemption victims",
            buckets=exponential_buckets(1, 2, 7),
            registry=reg,
        )
        self.preemption_attempts = Counter(
            name("preemption_attempts"), "Total preemption attempts in the cluster till now", registry=reg
        )
        self.pending_pods = Gauge(
            name("pending_pods"),
            "Number of pending pods, by the queue type. 'active' means number of pods in activeQ; 'backoff' means "
            "number of pods in backoffQ; 'unschedulable' means number of pods in unschedulablePods that the "
            "scheduler attempted to schedule and failed; 'gated' is the number of unschedulable pods that the "
            "scheduler never attempted to schedule because they are gated.",
            ["queue"],
            registry=reg,
        )
        # Registered for upstream's metric set; nothing updates it yet (a known gap).
        self.goroutines = Gauge(
            name("goroutines"),
            "Number of running goroutines split by the work they do such as binding.",
            ["operation"],
            registry=reg,
        )
        self.pod_scheduling_sli_duration = FastHistogram(
            name("pod_scheduling_sli_duration_seconds"),
            "E2e latency for a pod being scheduled, from the time the pod enters the scheduling queue and might "
            "involve multiple scheduling attempts.",
            ["attempts"],
            buckets=exponential_buckets(0.01, 2, 20),
            registry=reg,
        )
        self.pod_scheduling_attempts = FastHistogram(
            name("pod_scheduling_attempts"),
            "Number of attempts to successfully schedule a pod.",
            buckets=exponential_buckets(1, 2, 5),
            registry=reg,
        )
        self.framework_extension_point_duration = FastHistogram(
            name("framework_extension_point_duration_seconds"),
            "Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=exponential_buckets(0.0001, 2, 12),
            registry=reg,
        )
        # Fed only by ``observe_plugin``/``sample_plugins``, which the framework runtime does not call yet.
        self.plugin_execution_duration = FastHistogram(
            name("plugin_execution_duration_seconds"),
            "Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=exponential_buckets(0.00001, 1.5, 20),
            registry=reg,
        )
        self.queue_incoming_pods = FastCounter(
            name("queue_incoming_pods"),
            "Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=reg,
        )
        # Registered for upstream's metric set; nothing updates it yet (a known gap).
        self.permit_wait_duration = Histogram(
            name("permit_wait_duration_seconds"),
            "Duration of waiting on permit.",
            ["result"],
            buckets=exponential_buckets(0.001, 2, 15),
            registry=reg,
        )
        self.cache_size = Gauge(
            name("scheduler_cache_size"),
            "Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=reg,
        )
        self.unschedulable_pods = Gauge(
            name("unschedulable_pods"),
            "The number of unschedulable pods broken down by plugin name. A pod will increment the gauge for all "
            "plugins that caused it to not schedule and so this metric have meaning only when broken down by "
            "plugin.",
            ["plugin", "profile"],
            registry=reg,
        )
        # Registered for upstream's metric set; nothing updates it yet (a known gap).
        self.plugin_evaluation = Counter(
            name("plugin_evaluation"),
            "Number of attempts to schedule pods by each plugin and the extension point (available only in "
            "PreFilter and Filter.).",
            ["plugin", "extension_point", "profile"],
            registry=reg,
        )
        # Opportunistic batching (KEP-5598): upstream's scheduler_batch_* counters, read from the frameworks'
        # batches at scrape time.
        self._batches: dict[str, BatchCounts] = {}
        reg.register(_BatchCollector(self._batches))
        # client-go's leader election metric (no ``scheduler_`` prefix).
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates "
            "master. 'name' is the string used to identify the lease. Please make sure to group by name.",
            ["name"],
            registry=reg,
        )
        self._children: dict[tuple[object, ...], object] = {}
        self._extension_series: dict[tuple[str, Code | int, str], _Series] = {}
        # The series the scheduling loop and the queue record into for every pod, found once per label set.
        self._attempt_series: dict[tuple[str, str], tuple[_Count, _Series]] = {}
        self._sli_series: dict[int, _Series] = {}
        self._incoming: dict[tuple[str, str], _Count] = {}
        self._algorithm_series = self.scheduling_algorithm_duration.labels()
        self._attempts_series = self.pod_scheduling_attempts.labels()
        self._histograms = [
            self.scheduling_attempt_duration,
            self.scheduling_algorithm_duration,
            self.pod_scheduling_sli_duration,
            self.pod_scheduling_attempts,
            self.framework_extension_point_duration,
            self.plugin_execution_duration,
        ]
        # Attempts until the pending observations are folded (``observe_attempt``).
        self._until_fold = FOLD_EVERY_ATTEMPTS
        self._without_created = _WithoutCreated(reg)

    # -- child cache --------------------------------------------------------------------------------------------

    def _child(self, metric: Counter | Gauge | Histogram | FastHistogram | FastCounter, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = metric.labels(*labels)
            self._children[key] = child
        return child

    # -- scheduling cycle ---------------------------------------------------------------------------------------

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt ended with ``result`` (scheduled / unschedulable / error)."""
        pair = self._attempt_series.get((result, profile))
        if pair is None:
            pair = (
                self.schedule_attempts.labels(result, profile),
                self.scheduling_attempt_duration.labels(result, profile),
            )
            self._attempt_series[result, profile] = pair
        count, series = pair
        count.value += 1
        series.pending.append(seconds)
        self._until_fold -= 1
        if not self._until_fold:
            self.fold()

    def fold(self) -> None:
        """Count the pending observations of every histogram into its buckets (a scrape folds them too; this keeps
        them few between scrapes)."""
        self._until_fold = FOLD_EVERY_ATTEMPTS
        for histogram in self._histograms:
            histogram.fold()

    def observe_algorithm(self, seconds: float) -> None:
        self._algorithm_series.pending.append(seconds)

    def observe_pod_scheduled(self, attempts: int, sli_seconds: float) -> None:
        """A pod got bound after ``attempts`` attempts, ``sli_seconds`` after it first entered the queue."""
        series = self._sli_series.get(attempts)
        if series is None:
            series = self._sli_series[attempts] = self.pod_scheduling_sli_duration.labels(str(attempts))
        series.pending.append(sli_seconds)
        self._attempts_series.pending.append(attempts)

    def observe_extension_point(self, point: str, status: Code | int, profile: str, seconds: float) -> None:
        self.extension_point_observer(point, status, profile)(seconds)

    def extension_point_observer(
        self, point: str, status: Code | int, profile: str
    ) -> Callable[[float], None]:
        """The ``observe`` of one ``framework_extension_point_duration_seconds`` series, for a caller to keep:
        the framework observes several per pod and binds each (point, status) once. The series is exposed from
        this call on, so bind on first use."""
        key = (point, status, profile)
        series = self._extension_series.get(key)
        if series is None:
            series = self.framework_extension_point_duration.labels(point, status_label(status), profile)
            self._extension_series[key] = series
        return series.pending.append

    def sample_plugins(self) -> bool:
        """Whether this cycle records per-plugin durations (upstream samples 10% of the cycles)."""
        return self._rng.randrange(100) < self.plugin_sample_percent

    def observe_plugin(self, plugin: str, point: str, status: Code | int, seconds: float) -> None:
        self._child(self.plugin_execution_duration, plugin, point, status_label(status)).observe(seconds)

    def observe_preemption(self, victims: int) -> None:
        """One preemption attempt; ``victims`` is recorded only when some were selected (as upstream)."""
        self.preemption_attempts.inc()
        if victims > 0:
            self.preemption_victims.observe(victims)

    def watch_batch(self, profile: str, batch: BatchCounts) -> None:
        """Expose ``batch.attempts``/``batch.flushes`` as ``scheduler_batch_attempts_total`` and
        ``scheduler_batch_cache_flushed_total`` for ``profile``."""
        self._batches[profile] = batch

    # -- queue --------------------------------------------------------------------------------------------------

    def count_incoming(self, queue: str, event: str, n: int = 1) -> None:
        count = self._incoming.get((queue, event))
        if count is None:
            count = self._incoming[queue, event] = self.queue_incoming_pods.labels(queue, event)
        count.inc(n)

    def add_unschedulable_reasons(self, plugins: Iterable[str], profile: str, delta: int) -> None:
        for plugin in plugins:
            self._child(self.unschedulable_pods, plugin, profile).inc(delta)

    def watch_pending(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Read ``pending_pods`` from ``counts()`` (keys active/backoff/unschedulable/gated) at scrape time."""
        for queue in PENDING_QUEUES:
            self.pending_pods.labels(queue).set_function(_reader(counts, queue))

    # -- cache, leader election ---------------------------------------------------------------------------------

    def set_cache_size(self, nodes: int, pods: int, assumed_pods: int) -> None:
        self._child(self.cache_size, "nodes").set(nodes)
        self._child(self.cache_size, "pods").set(pods)
        self._child(self.cache_size, "assumed_pods").set(assumed_pods)

    def watch_cache_size(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        """Read ``scheduler_cache_size`` from ``sizes()`` (keys nodes/pods/assumed_pods) at scrape time."""
        for kind in ("nodes", "pods", "assumed_pods"):
            self.cache_size.labels(kind).set_function(_reader(sizes, kind))

    def set_leader(self, lease_name: str, is_leader: bool) -> None:
        self._child(self.leader_election_master_status, lease_name).set(1 if is_leader else 0)

    # -- exposition ---------------------------------------------------------------------------------------------

    def exposition(self) -> bytes:
        """The registry in Prometheus text format 0.0.4, without ``*_created`` series."""
        return generate_latest(self._without_created)
