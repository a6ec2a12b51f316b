"""Load values from Prometheus: series matched to nodes as crane's selectors would, the metric schedule, direct
mode's poller feeding the Dynamic plugin of a real Scheduler over a local cluster, and the hot values seeded
from ``Scheduled`` events. Prometheus is a tiny aiohttp fake answering ``/api/v1/query``."""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.catalogue import full_catalogue
from kubesched.client.rest import ApiClient
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.loadaware.args import DynamicArgs
from kubesched.loadaware.dynamic import Dynamic
from kubesched.loadaware.poller import (
    LoadQuerier,
    MetricSchedule,
    NodeAddress,
    QuerySettings,
    VectorQuerier,
    build_pollers,
    match_series,
    prometheus_from_args,
    rebuild_hot_values_from_api,
    start_pollers,
    stop_pollers,
)
from kubesched.loadaware.prometheus import PrometheusError, QueryResult, Sample
from kubesched.loadaware.promql import DEFAULT_QUERY_TEMPLATE, InstanceMatch, render_query, selectors
from kubesched.loadaware.sources import InMemoryLoadStore
from kubesched.scheduler.config import load_config
from kubesched.scheduler.framework import CycleState
from kubesched.scheduler.scheduler import Scheduler

CPU5, MEM5, CPU1H = "cpu_usage_avg_5m", "mem_usage_avg_5m", "cpu_usage_max_avg_1h"

# --- a fake Prometheus --------------------------------------------------------------------------------------

_QUERY = re.compile(r"\s*(\w+)\{(.*)\}\s*(/\s*100)?\s*")
_MATCHER = re.compile(r'(\w+)\s*(=~|!=|=)\s*"((?:[^"\\]|\\.)*)"')


def _unquote(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


class FakePrometheus:
    """Series per metric (values in percent, as crane's recording rules give them); evaluates
    ``<metric>{<matchers>} [/ 100]`` with ``=``, ``!=`` and ``=~`` matchers, records every query."""

    def __init__(self) -> None:
        self.series: dict[str, list[tuple[dict[str, str], float]]] = {}
        self.queries: list[str] = []
        self.failing: set[str] = set()  # metrics answered with HTTP 500
        self.url = ""
        self._runner: web.AppRunner | None = None

    def set(self, metric: str, percent: float, **labels: str) -> None:
        """Add or replace the series of ``metric`` with exactly these labels."""
        rows = [r for r in self.series.setdefault(metric, []) if r[0] != labels]
        self.series[metric] = [*rows, (labels, percent)]

    def evaluate(self, promql: str) -> list[tuple[dict[str, str], float]]:
        m = _QUERY.fullmatch(promql)
        assert m is not None, f"unexpected query {promql!r}"
        metric, body, per_cent = m.groups()
        out = []
        for labels, value in self.series.get(metric, []):
            ok = True
            for name, op, raw in _MATCHER.findall(body):
                have, want = labels.get(name, ""), _unquote(raw)
                if op == "=":
                    ok &= have == want
                elif op == "!=":
                    ok &= have != want
                else:
                    ok &= re.fullmatch(want, have) is not None
            if ok:
                out.append(({"__name__": metric, **labels}, value / 100 if per_cent else value))
        return out

    async def _query(self, request: web.Request) -> web.Response:
        form = await request.post() if request.method == "POST" else request.query
        promql = str(form["query"])
        self.queries.append(promql)
        if any(promql.lstrip().startswith(f"{metric}{{") for metric in self.failing):
            return web.json_response(
                {"status": "error", "errorType": "execution", "error": "boom"}, status=500
            )
        result = [
            {"metric": labels, "value": [time.time(), "NaN" if math.isnan(v) else repr(v)]}
            for labels, v in self.evaluate(promql)
        ]
        return web.json_response({"status": "success", "data": {"resultType": "vector", "result": result}})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/api/v1/query", self._query)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


@pytest.fixture
async def prom() -> AsyncIterator[FakePrometheus]:
    fake = FakePrometheus()
    await fake.start()
    yield fake
    await fake.stop()


@pytest.fixture
async def querier(prom: FakePrometheus) -> AsyncIterator[VectorQuerier]:
    q = prometheus_from_args(DynamicArgs(promeAddr=prom.url))
    yield q
    await q.close()


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    c = LocalCluster(
        ClusterOptions(port=0, insecure_http=True, nodes=3, data_dir=tmp_path, heartbeat_interval=3600)
    )
    await c.start()
    yield c
    await c.stop()


@pytest.fixture
async def client(cluster: LocalCluster) -> AsyncIterator[ApiClient]:
    async with ApiClient(cluster.url) as c:
        yield c


def node_ips(cluster: LocalCluster) -> dict[str, str]:
    """node name -> InternalIP, as the simulated kubelets registered them."""
    out = {}
    rtype = cluster.api.rtype("", "v1", "nodes")
    for name in cluster.node_names:
        node = cluster.api.get(rtype, None, name).obj
        out[name] = next(a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP")
    return out


async def eventually(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


# --- series to nodes ----------------------------------------------------------------------------------------

NODES = [
    NodeAddress("a", "10.0.0.1"),
    NodeAddress("b", "10.0.0.2"),
    NodeAddress("c", ""),
    NodeAddress("d", "fd00::4"),
]


def labelled(*pairs: tuple[str, float]) -> list[tuple[dict[str, str], float]]:
    return [({"instance": instance}, value) for instance, value in pairs]


def test_auto_prefers_ip_then_ip_port_then_node_name() -> None:
    series = labelled(
        ("10.0.0.1:9100", 0.1), ("10.0.0.1", 0.2), ("10.0.0.2:9100", 0.3), ("c", 0.4), ("b", 0.9)
    )
    assert match_series(series, NODES, InstanceMatch("auto")) == {"a": 0.2, "b": 0.3, "c": 0.4}


def test_each_fixed_mode_uses_only_its_own_rule() -> None:
    series = labelled(
        ("10.0.0.1:9100", 0.1), ("10.0.0.2", 0.2), ("b", 0.5), ("[fd00::4]:9100", 0.6), ("c", 0.7)
    )
    assert match_series(series, NODES, InstanceMatch("ip")) == {"b": 0.2, "c": 0.7}  # c has no IP: its name
    assert match_series(series, NODES, InstanceMatch("ip:port")) == {"a": 0.1, "d": 0.6}
    assert match_series(series, NODES, InstanceMatch("nodename")) == {"b": 0.5, "c": 0.7}


def test_label_mode_matches_the_node_name_and_the_last_series_wins() -> None:
    series = [({"node": "a"}, 0.1), ({"node": "a"}, 0.3), ({"instance": "b"}, 0.5)]
    assert match_series(series, NODES, InstanceMatch("label", "node")) == {"a": 0.3}


def test_negative_values_become_zero_as_in_crane_and_non_finite_ones_are_skipped() -> None:
    series = labelled(
        ("10.0.0.1", math.nan), ("10.0.0.2", -0.5), ("[fd00::4]:9100", math.inf), ("c", -math.inf)
    )
    skipped: list[str] = []
    assert match_series(series, NODES, InstanceMatch("auto"), skipped) == {"b": 0.0}
    assert sorted(skipped) == ["a", "c", "d"]
    by_label = [({"node": "a"}, math.nan), ({"node": "b"}, 0.25)]
    assert match_series(by_label, NODES, InstanceMatch("label", "node")) == {"b": 0.25}


async def test_default_template_asks_once_per_metric_whatever_the_node_count(
    prom: FakePrometheus, querier: VectorQuerier
) -> None:
    prom.set(CPU5, 40, instance="10.0.0.1:9100", cluster="east")
    prom.set(CPU5, 70, instance="10.0.0.1:9100", cluster="west")
    prom.set(CPU5, 20, instance="b", cluster="east")
    q = LoadQuerier(querier, QuerySettings(cluster="east"))
    assert await q.query_metric(CPU5, NODES) == {"a": 0.4, "b": 0.2}
    assert prom.queries == [f'{CPU5}{{instance=~".+",cluster="east"}} / 100']


async def test_a_template_naming_the_node_is_asked_per_node_in_cranes_order(
    prom: FakePrometheus, querier: VectorQuerier
) -> None:
    prom.set(CPU5, 50, instance="10.0.0.2:9100")
    prom.set(CPU5, 30, instance="c")
    template = '$metric{$selector,job!="$node"} / 100'
    q = LoadQuerier(querier, QuerySettings(template=template))
    found = await q.query_metric(CPU5, NODES[:3])
    assert found == {"b": 0.5, "c": 0.3}
    asked_for_b = [x for x in prom.queries if 'job!="b"' in x]
    assert asked_for_b == [
        f'{CPU5}{{instance="10.0.0.2",job!="b"}} / 100',
        f'{CPU5}{{instance=~"10\\\\.0\\\\.0\\\\.2:[0-9]+",job!="b"}} / 100',
    ]


async def test_a_failing_prometheus_raises(prom: FakePrometheus, querier: VectorQuerier) -> None:
    prom.failing.add(CPU5)
    with pytest.raises(PrometheusError, match="500: boom"):
        await LoadQuerier(querier).query_metric(CPU5, NODES)


# --- the schedule -------------------------------------------------------------------------------------------


def test_schedule_runs_each_metric_on_its_period_and_coalesces_coinciding_ticks() -> None:
    s = MetricSchedule({CPU5: 180.0, CPU1H: 900.0}, start=0.0)
    assert s.due(0.0) == [CPU5, CPU1H]
    s.completed([CPU5, CPU1H], 0.2)
    assert s.next_wake() == 180.0 and s.due(100.0) == []
    for tick in (180.0, 360.0, 540.0, 720.0):
        assert s.due(tick) == [CPU5]
        s.completed([CPU5], tick + 0.5)
    assert s.due(900.0) == [CPU5, CPU1H]  # both due at 900: one round, one patch per node
    assert s.upcoming(CPU1H, 900.0) == 1800.0


def test_schedule_retries_failures_with_backoff_but_not_past_the_next_tick() -> None:
    s = MetricSchedule({CPU5: 180.0}, start=0.0)
    delays = []
    now = 0.0
    for _ in range(6):
        s.failed([CPU5], now)
        delays.append(s.next_attempt(CPU5) - now)
        now = s.next_attempt(CPU5)
    assert delays[:4] == [10.0, 20.0, 40.0, 80.0]
    assert all(d <= 180.0 for d in delays)
    s.completed([CPU5], now)
    assert s.next_attempt(CPU5) % 180.0 == 0.0  # back on the regular ticks
    s.failed([CPU5], s.next_attempt(CPU5))
    assert s.next_attempt(CPU5) % 180.0 == 10.0  # and the backoff started over


def test_a_late_round_skips_the_ticks_it_missed() -> None:
    s = MetricSchedule({CPU5: 60.0}, start=0.0)
    s.completed([CPU5], 250.0)
    assert s.next_attempt(CPU5) == 300.0


# --- direct mode in a real scheduler ------------------------------------------------------------------------


def direct_mode_config(prom_url: str, policy: Path, **extra: Any) -> Any:
    args = "".join(f"\n          {k}: {v}" for k, v in extra.items())
    text = f"""\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {{leaderElect: false}}
profiles:
  - schedulerName: default-scheduler
    plugins:
      filter: {{enabled: [{{name: Dynamic}}]}}
      score: {{enabled: [{{name: Dynamic, weight: 3}}]}}
      postBind: {{enabled: [{{name: Dynamic}}]}}
    pluginConfig:
      - name: Dynamic
        args:
          loadSource: prometheus
          promeAddr: "{prom_url}"
          policyConfigPath: {policy}{args}
  - schedulerName: annotation-scheduler
    plugins:
      filter: {{enabled: [{{name: Dynamic}}]}}
"""
    return load_config(text, catalogue=full_catalogue())


POLICY = """\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy: [{name: cpu_usage_avg_5m, period: 200ms}, {name: mem_usage_avg_5m, period: 3m}]
  predicate: [{name: cpu_usage_avg_5m, maxLimitPecent: 0.65}]
  priority: [{name: cpu_usage_avg_5m, weight: 1}, {name: mem_usage_avg_5m, weight: 1}]
  hotValue: [{timeRange: 5m, count: 5}, {timeRange: 1m, count: 2}]
"""


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "policy.yaml"
    path.write_text(POLICY)
    return path


def scheduler(client: ApiClient, config: Any) -> Scheduler:
    return Scheduler(config, client, catalogue=full_catalogue())


async def test_direct_mode_poller_fills_the_store_and_the_plugin_filters_on_it(
    cluster: LocalCluster, client: ApiClient, prom: FakePrometheus, policy_file: Path
) -> None:
    ips = node_ips(cluster)
    n0, n1, n2 = cluster.node_names
    prom.set(CPU5, 90, instance=f"{ips[n0]}:9100")
    prom.set(CPU5, 10, instance=f"{ips[n1]}:9100")
    prom.set(MEM5, 20, instance=f"{ips[n0]}:9100")
    sched = scheduler(client, direct_mode_config(prom.url, policy_file))
    sched.start_informers()
    try:
        assert await sched.wait_for_cache_sync(5)
        tasks = start_pollers(sched.frameworks, sched.informers["nodes"].list)
        assert len(tasks) == 1  # the annotation-mode profile needs no poller
        dyn: Dynamic = sched.frameworks["default-scheduler"].plugin("Dynamic")
        store = sched.frameworks["default-scheduler"].handle.singletons.find(InMemoryLoadStore)
        assert dyn.source.store is store
        await eventually(lambda: store.sample(n0, MEM5) is not None)
        assert store.sample(n0, CPU5)[0] == pytest.approx(0.9)
        assert store.sample(n2, CPU5) is None  # no series, nothing stored

        table = sched.cache.table
        idx = np.array([table.index[n] for n in (n0, n1, n2)], dtype=np.intp)
        pod = sched.cache.pod_info(
            {"metadata": {"name": "p", "namespace": "default", "uid": "u"}, "spec": {}}
        )
        verdict = dyn.filter(CycleState(), pod, table, idx)
        assert verdict.reason_bits.tolist()[1:] == [0, 0] and verdict.reason_bits[0] != 0
        assert f"node[{n0}] is too high" in verdict.reasons[0]
        explained = dyn.explain(table, n1)
        assert (
            explained["metrics"][CPU5]["value"] == pytest.approx(0.1) and explained["metrics"][CPU5]["fresh"]
        )

        # The 200ms metric keeps being polled: a new value reaches the plugin without any node write.
        prom.set(CPU5, 95, instance=f"{ips[n1]}:9100")
        await eventually(lambda: store.sample(n1, CPU5)[0] == pytest.approx(0.95))
        assert dyn.filter(CycleState(), pod, table, idx).reason_bits[1] != 0
        mem_queries = [q for q in prom.queries if q.startswith(MEM5)]
        assert len(mem_queries) == 1  # the 3m metric was asked once so far
        await stop_pollers(tasks)
        assert all(t.done() for t in tasks)
    finally:
        await sched.stop()


async def test_metrics_update_period_overrides_the_policy_periods_and_gone_nodes_leave_the_store(
    prom: FakePrometheus, querier: VectorQuerier, policy_file: Path
) -> None:
    config = direct_mode_config(prom.url, policy_file, metricsUpdatePeriodBySeconds="5m", clusterName="east")
    sched = scheduler(None, config)  # type: ignore[arg-type]
    nodes = [
        {"metadata": {"name": "a"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.1"}]}},
        {"metadata": {"name": "b"}, "status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}},
    ]
    prom.set(CPU5, 50, instance="10.0.0.1", cluster="east")
    prom.set(CPU5, 60, instance="10.0.0.2", cluster="east")
    pollers = build_pollers(sched.frameworks, lambda: list(nodes), prometheus_factory=lambda _a: querier)
    assert len(pollers) == 1
    poller = pollers[0]
    assert poller.periods == {CPU5: 300.0, MEM5: 300.0}
    assert await poller.poll([CPU5]) == set()
    assert poller.store.sample("b", CPU5)[0] == pytest.approx(0.6)
    assert 'cluster="east"' in prom.queries[-1]
    nodes.pop()
    prom.failing.add(MEM5)
    assert await poller.poll([CPU5, MEM5]) == {MEM5}
    assert poller.store.sample("b", CPU5) is None and poller.store.sample("a", CPU5) is not None


# --- hot values from events ---------------------------------------------------------------------------------


def scheduled_event(name: str, pod: str, node: str, when: float, reason: str = "Scheduled") -> dict[str, Any]:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(when))
    return {
        "metadata": {"name": name, "namespace": "default"},
        "involvedObject": {"kind": "Pod", "namespace": "default", "name": pod},
        "reason": reason,
        "type": "Normal",
        "message": f"Successfully assigned default/{pod} to {node}",
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": "default-scheduler"},
    }


async def test_rebuild_hot_values_from_recent_scheduled_events(
    cluster: LocalCluster, client: ApiClient, prom: FakePrometheus, policy_file: Path
) -> None:
    n0, n1, _ = cluster.node_names
    now = time.time()
    for i in range(5):
        await client.create(
            "v1", "events", scheduled_event(f"e{i}", f"p{i}", n0, now - 10), namespace="default"
        )
    await client.create("v1", "events", scheduled_event("old", "q", n1, now - 3600), namespace="default")
    await client.create(
        "v1", "events", scheduled_event("x", "r", n1, now - 5, reason="Pulled"), namespace="default"
    )
    sched = scheduler(client, direct_mode_config(prom.url, policy_file))
    added = await rebuild_hot_values_from_api(client, sched.frameworks)
    assert added == 5  # one shared store; the hour-old binding and the Pulled event are not counted
    dyn: Dynamic = sched.frameworks["default-scheduler"].plugin("Dynamic")
    assert dyn.hot_values is sched.frameworks["annotation-scheduler"].plugin("Dynamic").hot_values
    windows = dyn.policy.spec.hot_value
    assert dyn.hot_values.hot_value(n0, windows, time.time()) == 5 // 5 + 5 // 2
    assert dyn.hot_values.hot_value(n1, windows, time.time()) == 0
    plain = load_config(
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
        catalogue=full_catalogue(),
    )
    assert await rebuild_hot_values_from_api(client, scheduler(client, plain).frameworks) == 0


async def test_rebuild_is_best_effort_when_the_api_fails(prom: FakePrometheus, policy_file: Path) -> None:
    async with ApiClient("http://127.0.0.1:1") as dead:  # nothing listens there
        sched = scheduler(dead, direct_mode_config(prom.url, policy_file))
        assert await rebuild_hot_values_from_api(dead, sched.frameworks) == 0
        await sched.stop()


# --- one query for all nodes == crane's per-node queries ----------------------------------------------------

_IPS = ["10.0.0.1", "10.0.0.2", "10.0.0.12", "fd00::1"]
_NAMES = ["a", "b", "n-1"]
_INSTANCES = [*_IPS, *_NAMES, "10.0.0.1:9100", "10.0.0.2:8080", "10.0.0.12:9100", "[fd00::1]:9100", "a:9100"]


@settings(max_examples=150, deadline=None)
@given(
    ips=st.lists(st.sampled_from(["", *_IPS]), min_size=3, max_size=3),
    series=st.lists(
        st.tuples(st.sampled_from(_INSTANCES), st.integers(0, 100).map(float)), min_size=0, max_size=8
    ),
    mode=st.sampled_from(
        [InstanceMatch("auto"), InstanceMatch("ip"), InstanceMatch("ip:port"), InstanceMatch("nodename")]
    ),
)
def test_matching_one_answer_to_nodes_equals_asking_per_node(
    ips: list[str], series: list[tuple[str, float]], mode: InstanceMatch
) -> None:
    fake = FakePrometheus()
    fake.series[CPU5] = [({"instance": instance}, value) for instance, value in series]
    nodes = [NodeAddress(name, ip) for name, ip in zip(_NAMES, ips, strict=True)]
    bulk = match_series(fake.evaluate(f'{CPU5}{{instance=~".+"}} / 100'), nodes, mode)
    per_node = {}
    for node in nodes:
        for selector in selectors(mode, node.name, node.ip):
            found = fake.evaluate(render_query(DEFAULT_QUERY_TEMPLATE, CPU5, selector))
            if found:
                per_node[node.name] = found[-1][1]
                break
    assert bulk == per_node


async def test_vector_querier_refuses_warnings_and_non_vectors() -> None:
    class Stub:
        def __init__(self, result: QueryResult) -> None:
            self.result = result

        async def query(self, promql: str) -> QueryResult:
            return self.result

    ok = QueryResult("vector", (Sample({"instance": "x"}, 0.5, 1.0),))
    assert await VectorQuerier(Stub(ok)).query("m") == [({"instance": "x"}, 0.5)]  # type: ignore[arg-type]
    for bad in (QueryResult("vector", (), ("partial data",)), QueryResult("scalar", (Sample({}, 1.0, 1.0),))):
        with pytest.raises(PrometheusError):
            await VectorQuerier(Stub(bad)).query("m")  # type: ignore[arg-type]
