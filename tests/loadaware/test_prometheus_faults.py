"""Prometheus down, slow, answering garbage or NaN/±Inf: the client fails with a ``PrometheusError`` (never
another exception), the annotator counts the failure in a metric and retries with back-off, non-finite values are
never written as load, and the Dynamic plugin fails open (nodes without fresh load are neither filtered nor
penalised), as crane's does. A fake Prometheus HTTP server on loopback plays each fault."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubesched.client.rest import ApiClient
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.loadaware.annotator import Annotator, HealthServer
from kubesched.loadaware.args import DynamicArgs
from kubesched.loadaware.metrics import AnnotatorMetrics
from kubesched.loadaware.policy import parse_policy
from kubesched.loadaware.poller import (
    RETRY_INITIAL,
    DirectPoller,
    LoadQuerier,
    MetricSchedule,
    prometheus_from_args,
)
from kubesched.loadaware.prometheus import PrometheusClient, PrometheusError, PrometheusTimeout
from kubesched.loadaware.sources import InMemoryLoadStore

CPU = "cpu_usage_avg_5m"
POLICY = parse_policy(
    f"""\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy: [{{name: {CPU}, period: 1m}}]
  predicate: [{{name: {CPU}, maxLimitPecent: 0.5}}]
  priority: [{{name: {CPU}, weight: 1}}]
"""
)


class FaultyPrometheus:
    """``mode``: ``ok`` (``values`` per instance), ``garbage``, ``half-json``, ``slow``, ``error``."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.values: dict[str, str] = {}
        self.calls = 0
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _query(self, request: web.Request) -> web.Response:
        self.calls += 1
        if self.mode == "garbage":
            return web.Response(text="<html>502 Bad Gateway</html>", status=200)
        if self.mode == "half-json":
            body = {"status": "success", "data": {"resultType": "vector", "result": [{"value": ["x", "y"]}]}}
            return web.json_response(body)
        if self.mode == "slow":
            await asyncio.sleep(5)
        if self.mode == "error":
            return web.json_response(
                {"status": "error", "errorType": "execution", "error": "query timed out"}, status=503
            )
        result = [
            {"metric": {"instance": instance}, "value": [time.time(), value]}
            for instance, value in self.values.items()
        ]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/v1/query", self._query)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def prom() -> AsyncIterator[FaultyPrometheus]:
    p = FaultyPrometheus()
    await p.start()
    yield p
    await p.stop()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("mode", "error", "words"),
    [
        ("garbage", PrometheusError, "not a Prometheus API answer"),
        ("half-json", PrometheusError, "not a Prometheus query result"),
        ("slow", PrometheusTimeout, "within 0.3s"),
        ("error", PrometheusError, "query timed out"),
    ],
)
async def test_every_fault_is_a_prometheus_error(
    prom: FaultyPrometheus, mode: str, error: type[Exception], words: str
) -> None:
    prom.mode = mode
    async with PrometheusClient(prom.url, timeout=0.3) as client:
        with pytest.raises(error, match=words):
            await client.query(CPU)


async def test_down_is_a_prometheus_error() -> None:
    async with PrometheusClient(f"http://127.0.0.1:{closed_port()}", timeout=2) as client:
        with pytest.raises(PrometheusError, match="cannot query"):
            await client.query(CPU)


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    c = LocalCluster(
        ClusterOptions(port=0, insecure_http=True, nodes=3, data_dir=tmp_path, heartbeat_interval=3600)
    )
    await c.start()
    yield c
    await c.stop()


def node_ips(cluster: LocalCluster) -> dict[str, str]:
    rtype = cluster.api.rtype("", "v1", "nodes")
    out = {}
    for name in cluster.node_names:
        node = cluster.api.get(rtype, None, name).obj
        out[name] = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    return out


def annotations(cluster: LocalCluster, name: str) -> dict[str, str]:
    node = cluster.api.get(cluster.api.rtype("", "v1", "nodes"), None, name).obj
    return dict(node["metadata"].get("annotations") or {})


def sample(metrics: AnnotatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


async def test_annotator_counts_failures_skips_non_finite_values_and_backs_off(
    cluster: LocalCluster, prom: FaultyPrometheus
) -> None:
    ips = node_ips(cluster)
    busy, idle, broken = cluster.node_names
    metrics = AnnotatorMetrics()
    querier = prometheus_from_args(DynamicArgs(promeAddr=prom.url, promeQueryTimeout=0.5))
    async with ApiClient(cluster.url) as client:
        ann = Annotator(client, LoadQuerier(querier), POLICY, zone=None, metrics=metrics)
        ann.start_informers()
        try:
            assert await ann.wait_for_sync(10)
            # NaN and +Inf are not load: that node gets nothing (it used to get 0.00000 and "inf").
            prom.values = {ips[busy]: "70", ips[idle]: "NaN", ips[broken]: "+Inf"}
            report = await ann.sync([CPU])
            assert report.failed_metrics == set() and report.patched >= 1
            assert annotations(cluster, busy)[CPU].startswith("70.00000,")
            assert CPU not in annotations(cluster, idle) and CPU not in annotations(cluster, broken)
            assert sample(metrics, "kubesched_annotator_prometheus_non_finite_values_total", metric=CPU) == 2
            assert sample(metrics, "kubesched_annotator_node_patches_total", result="success") == 1
            assert sample(metrics, "kubesched_annotator_last_successful_query_timestamp_seconds", metric=CPU)
            # Each fault: the sync reports the metric failed, the counter grows, nothing is written.
            for n, mode in enumerate(("garbage", "half-json", "slow", "error"), 1):
                prom.mode = mode
                report = await ann.sync([CPU])
                assert report.failed_metrics == {CPU}, mode
                assert report.patched == 0
                assert sample(metrics, "kubesched_annotator_prometheus_query_failures_total", metric=CPU) == n
            assert annotations(cluster, busy)[CPU].startswith("70.00000,")  # the old value stays, ages
        finally:
            await ann.stop()
            await querier.close()
    # Exposed on the annotator's endpoint.
    server = HealthServer("127.0.0.1", 0, metrics=metrics, insecure=True)
    await server.start()
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        writer.write(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        text = (await reader.read()).decode()
        writer.close()
        assert f'kubesched_annotator_prometheus_query_failures_total{{metric="{CPU}"}} 4.0' in text
        assert f'kubesched_annotator_prometheus_non_finite_values_total{{metric="{CPU}"}} 2.0' in text
    finally:
        await server.stop()


def test_a_failed_metric_is_retried_with_back_off_capped_by_its_next_tick() -> None:
    schedule = MetricSchedule({CPU: 3600.0}, start=0.0)
    assert schedule.due(0.0) == [CPU]
    delays = []
    now = 0.0
    for _ in range(6):
        schedule.failed([CPU], now)
        delays.append(schedule.next_attempt(CPU) - now)
        now = schedule.next_attempt(CPU)
    assert delays == [RETRY_INITIAL * 2**i for i in range(6)]  # 10 s, 20 s, ... 320 s
    schedule.completed([CPU], now)
    assert schedule.next_attempt(CPU) == 3600.0  # back on the regular tick


async def test_direct_mode_fails_open_when_prometheus_is_down_or_answers_nan(prom: FaultyPrometheus) -> None:
    """Direct mode: a NaN leaves the node without a value, a failed poll leaves the values as they were (they go
    stale in time). Dynamic filters only on fresh values over the limit and scores missing ones as 0 load
    contribution, as crane: a broken Prometheus never blocks a node nor makes a NaN node look idle."""
    from la_helpers import cluster as cache_of
    from la_helpers import node
    from test_dynamic_plugin import run_filter, run_score

    from kubesched.loadaware.dynamic import Dynamic, overload_reason
    from kubesched.scheduler.framework import Handle

    def with_ip(name: str, ip: str) -> dict[str, Any]:
        n = node(name)
        n["status"]["addresses"] = [{"type": "InternalIP", "address": ip}]
        return n

    nodes = [with_ip("a", "10.0.0.1"), with_ip("b", "10.0.0.2"), with_ip("c", "10.0.0.3")]
    cache = cache_of(*nodes)
    handle = Handle(cache=cache)
    now = time.time()
    args = DynamicArgs.model_validate({"loadSource": "prometheus", "promeAddr": prom.url})
    dyn = Dynamic(args, handle, policy=POLICY, clock=lambda: now)
    store = handle.singletons.find(InMemoryLoadStore)
    assert isinstance(store, InMemoryLoadStore)
    querier = prometheus_from_args(DynamicArgs(promeAddr=prom.url, promeQueryTimeout=0.5))
    from prometheus_client import CollectorRegistry

    from kubesched.loadaware.metrics import direct_mode_metrics

    registry = CollectorRegistry()
    metrics = direct_mode_metrics(registry)
    assert direct_mode_metrics(registry) is metrics  # once per registry
    poller = DirectPoller(
        LoadQuerier(querier), store, {CPU: 60.0}, lambda: nodes, clock=lambda: now, metrics=metrics
    )
    try:
        prom.values = {"10.0.0.1": "NaN", "10.0.0.2": "0.9", "10.0.0.3": "0.2"}
        assert await poller.poll([CPU]) == set()
        assert store.sample("a", CPU) is None and store.sample("b", CPU) == (0.9, now)
        for mode in ("slow", "garbage"):
            prom.mode = mode
            assert await poller.poll([CPU]) == {CPU}
        assert store.sample("b", CPU) == (0.9, now)  # kept: fresh until its period + 5 min
        value = registry.get_sample_value
        assert value("kubesched_dynamic_prometheus_query_failures_total", {"metric": CPU}) == 2
        assert value("kubesched_dynamic_prometheus_non_finite_values_total", {"metric": CPU}) == 1
        assert value("kubesched_dynamic_last_successful_query_timestamp_seconds", {"metric": CPU}) == now
    finally:
        await querier.close()
    assert run_filter(cache, dyn, ["a", "b", "c"]) == {"b": [overload_reason(CPU, "b")]}
    score_a, score_b, score_c = run_score(cache, dyn, ["a", "b", "c"])
    assert score_c > score_b and score_a == 0  # a: no data, scored as crane scores a node without load values
    # Once b's value is stale (period 1m + 5m), it is neither filtered nor scored by it.
    later = now + 60 + 300 + 1
    dyn.clock = lambda: later
    assert run_filter(cache, dyn, ["a", "b", "c"]) == {}
