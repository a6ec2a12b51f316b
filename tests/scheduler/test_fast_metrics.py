"""The per-pod metrics (attempts, algorithm latency, SLI, incoming pods) are kept as plain numbers and bound series;
a scrape must show exactly what prometheus_client's own Counter and Histogram show for the same observations."""

from __future__ import annotations

import random
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric

from kubesched.scheduler.metrics import FastCounter, SchedulerMetrics, exponential_buckets

RESULTS = ("scheduled", "unschedulable", "error")
PROFILES = ("default-scheduler", "other")
QUEUES = ("active", "backoff", "unschedulable", "gated")
EVENTS = ("PodAdd", "NodeAdd", "UnschedulableTimeout")

# Any duration, and the bucket bounds themselves (a value on a bound counts in that bucket).
seconds = st.one_of(
    st.floats(min_value=0.0, max_value=100.0, allow_nan=False),
    st.sampled_from(exponential_buckets(0.001, 2, 15) + exponential_buckets(0.01, 2, 20)),
)
calls = st.lists(
    st.one_of(
        st.tuples(st.just("attempt"), st.sampled_from(RESULTS), st.sampled_from(PROFILES), seconds),
        st.tuples(st.just("algorithm"), seconds),
        st.tuples(st.just("scheduled"), st.integers(min_value=1, max_value=40), seconds),
        st.tuples(st.just("incoming"), st.sampled_from(QUEUES), st.sampled_from(EVENTS), st.integers(0, 5)),
        st.tuples(st.just("scrape")),
    ),
    max_size=300,  # past the periodic fold (every 64 attempts) too
)


def families(registry: CollectorRegistry, names: set[str]) -> str:
    """The exposition of the families in ``names``, without ``_created`` lines (upstream has none)."""
    keep: list[Metric] = []
    for family in registry.collect():
        if family.name in names:
            family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            keep.append(family)

    class Only:
        def collect(self) -> list[Metric]:
            return keep

    return generate_latest(Only()).decode()


@given(calls)
def test_scrape_equals_prometheus_client_fed_the_same(ops: list[tuple[Any, ...]]) -> None:
    fast = SchedulerMetrics()
    ref = CollectorRegistry(auto_describe=True)
    attempts = Counter(
        "scheduler_schedule_attempts",
        fast.schedule_attempts.documentation,
        ["result", "profile"],
        registry=ref,
    )
    attempt_duration = Histogram(
        "scheduler_scheduling_attempt_duration_seconds",
        fast.scheduling_attempt_duration.documentation,
        ["result", "profile"],
        buckets=exponential_buckets(0.001, 2, 15),
        registry=ref,
    )
    algorithm = Histogram(
        "scheduler_scheduling_algorithm_duration_seconds",
        fast.scheduling_algorithm_duration.documentation,
        buckets=exponential_buckets(0.001, 2, 15),
        registry=ref,
    )
    sli = Histogram(
        "scheduler_pod_scheduling_sli_duration_seconds",
        fast.pod_scheduling_sli_duration.documentation,
        ["attempts"],
        buckets=exponential_buckets(0.01, 2, 20),
        registry=ref,
    )
    tries = Histogram(
        "scheduler_pod_scheduling_attempts",
        fast.pod_scheduling_attempts.documentation,
        buckets=exponential_buckets(1, 2, 5),
        registry=ref,
    )
    incoming = Counter(
        "scheduler_queue_incoming_pods",
        fast.queue_incoming_pods.documentation,
        ["queue", "event"],
        registry=ref,
    )
    for op in ops:
        kind = op[0]
        if kind == "attempt":
            _, result, profile, secs = op
            fast.observe_attempt(result, profile, secs)
            attempts.labels(result, profile).inc()
            attempt_duration.labels(result, profile).observe(secs)
        elif kind == "algorithm":
            fast.observe_algorithm(op[1])
            algorithm.observe(op[1])
        elif kind == "scheduled":
            _, n, secs = op
            fast.observe_pod_scheduled(n, secs)
            sli.labels(str(n)).observe(secs)
            tries.observe(n)
        elif kind == "scrape":  # a scrape between observations folds what is pending
            fast.exposition()
        else:
            _, queue, event, n = op
            fast.count_incoming(queue, event, n)
            incoming.labels(queue, event).inc(n)
    names = {
        "scheduler_schedule_attempts",
        "scheduler_scheduling_attempt_duration_seconds",
        "scheduler_scheduling_algorithm_duration_seconds",
        "scheduler_pod_scheduling_sli_duration_seconds",
        "scheduler_pod_scheduling_attempts",
        "scheduler_queue_incoming_pods",
    }
    assert families(fast.registry, names) == families(ref, names)
    # The full exposition (what /metrics serves) carries the same lines for these families.
    text = fast.exposition().decode()
    for line in families(ref, names).splitlines():
        assert line in text


@given(st.lists(st.tuples(st.sampled_from(("a", "b")), st.integers(0, 3)), max_size=20))
def test_fast_counter_reads_as_a_counter(incs: list[tuple[str, int]]) -> None:
    fast_reg, ref_reg = CollectorRegistry(), CollectorRegistry()
    fast = FastCounter("c_total", "help", ["k"], registry=fast_reg)
    ref = Counter("c_total", "help", ["k"], registry=ref_reg)
    for key, n in incs:
        fast.labels(key).inc(n)
        ref.labels(key).inc(n)
    assert families(fast_reg, {"c"}) == families(ref_reg, {"c"})
    unlabelled_reg = CollectorRegistry()
    FastCounter("u", "help", registry=unlabelled_reg)
    assert "u_total 0.0" in families(unlabelled_reg, {"u"})


def test_fast_counter_refuses_a_negative_increment() -> None:
    counter = FastCounter("c", "help", ["k"], registry=CollectorRegistry())
    try:
        counter.labels("a").inc(-1)
    except ValueError:
        pass
    else:
        raise AssertionError("a negative increment was accepted")
    assert counter.labels("a").value == 0


def test_many_attempts_fold_on_the_way_and_read_the_same() -> None:
    rng = random.Random(5)
    fast = SchedulerMetrics()
    ref = CollectorRegistry()
    attempts = Counter("scheduler_schedule_attempts", "x", ["result", "profile"], registry=ref)
    duration = Histogram(
        "scheduler_scheduling_attempt_duration_seconds",
        "x",
        ["result", "profile"],
        buckets=exponential_buckets(0.001, 2, 15),
        registry=ref,
    )
    bounds = exponential_buckets(0.001, 2, 15)
    for i in range(1000):
        secs = rng.choice(bounds) if i % 3 == 0 else rng.expovariate(100.0)
        result = rng.choice(RESULTS)
        fast.observe_attempt(result, "default-scheduler", secs)
        attempts.labels(result, "default-scheduler").inc()
        duration.labels(result, "default-scheduler").observe(secs)
        if i == 700:
            assert fast.exposition()  # a scrape on the way
    names = {"scheduler_schedule_attempts", "scheduler_scheduling_attempt_duration_seconds"}
    fast_text = families(fast.registry, names).replace(fast.schedule_attempts.documentation, "x")
    fast_text = fast_text.replace(fast.scheduling_attempt_duration.documentation, "x")
    assert fast_text == families(ref, names)
