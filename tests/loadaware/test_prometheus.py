"""The Prometheus side: the HTTP API client (against a tiny aiohttp server), crane's recording rules, and a
real ``prometheus`` scraping the local cluster's node metrics and reading backfilled history. The tests that
need the binaries skip when they are not installed (``scripts/ensure-prometheus.sh`` installs them)."""

from __future__ import annotations

import asyncio
import base64
import io
import subprocess
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from kubesched.cluster import certs
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.kubelet import NodeShape, SimulatedKubelets
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.cluster.nodemetrics import CPU_USAGE_ANNOTATION, MEMORY_USAGE_ANNOTATION, NodeMetrics
from kubesched.loadaware.prometheus import (
    INSTALL_HINT,
    PrometheusClient,
    PrometheusError,
    PrometheusServer,
    PrometheusTimeout,
    installed,
    write_backfill,
)
from kubesched.loadaware.promql import DEFAULT_QUERY_TEMPLATE, parse_instance_match, render_query, selectors
from kubesched.loadaware.rules import LOAD_METRICS, RECORDED_METRICS, rules_document, rules_yaml

GI = 2**30
needs_prometheus = pytest.mark.skipif(not installed(), reason=INSTALL_HINT)

# -- a tiny Prometheus API -----------------------------------------------------------------------------------


class FakeApi:
    """Answers /api/v1/query with ``answer`` and records each request's method, headers and form."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], dict[str, str]]] = []
        self.answer: Any = {"status": "success", "data": {"resultType": "vector", "result": []}}
        self.status = 200
        self.delay = 0.0
        self.post_allowed = True

    async def query(self, request: web.Request) -> web.Response:
        form = dict(await request.post()) if request.method == "POST" else dict(request.query)
        self.requests.append((request.method, dict(request.headers), {k: str(v) for k, v in form.items()}))
        if request.method == "POST" and not self.post_allowed:
            return web.Response(status=405)
        await asyncio.sleep(self.delay)
        return web.json_response(self.answer, status=self.status)


@pytest.fixture
async def fake() -> AsyncIterator[tuple[FakeApi, str]]:
    api = FakeApi()
    app = web.Application()
    app.router.add_route("*", "/api/v1/query", api.query)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    yield api, f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


VECTOR = {
    "status": "success",
    "data": {
        "resultType": "vector",
        "result": [
            {"metric": {"instance": "172.20.0.1:9100"}, "value": [1700000000.5, "37.5"]},
            {"metric": {"instance": "172.20.0.2:9100"}, "value": [1700000000.5, "NaN"]},
        ],
    },
    "warnings": ["careful"],
}


async def test_query_decodes_a_vector_and_sends_the_form(fake: tuple[FakeApi, str]) -> None:
    api, url = fake
    api.answer = VECTOR
    async with PrometheusClient(url + "/", timeout=3) as client:
        result = await client.query('cpu_usage_avg_5m{instance=~"a"} / 100', at=1700000000.0)
    assert result.result_type == "vector" and result.warnings == ("careful",)
    assert result.samples[0].labels == {"instance": "172.20.0.1:9100"}
    assert (result.samples[0].value, result.samples[0].timestamp) == (37.5, 1700000000.5)
    assert result.samples[1].value != result.samples[1].value  # NaN kept: the caller applies crane's rule
    method, headers, form = api.requests[0]
    assert method == "POST" and "Authorization" not in headers
    assert form == {
        "query": 'cpu_usage_avg_5m{instance=~"a"} / 100',
        "time": "1700000000.000",
        "timeout": "3s",
    }


@pytest.mark.parametrize(
    ("answer", "kind", "values"),
    [
        ({"resultType": "scalar", "result": [1.0, "2.5"]}, "scalar", [2.5]),
        (
            {"resultType": "matrix", "result": [{"metric": {"a": "b"}, "values": [[1, "1"], [2, "7"]]}]},
            "matrix",
            [7.0],
        ),
    ],
)
async def test_query_decodes_scalars_and_matrices(
    fake: tuple[FakeApi, str], answer: dict[str, Any], kind: str, values: list[float]
) -> None:
    api, url = fake
    api.answer = {"status": "success", "data": answer}
    async with PrometheusClient(url) as client:
        result = await client.query("x")
    assert result.result_type == kind and [s.value for s in result.samples] == values


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"bearer_token": "s3cret"}, "Bearer s3cret"),
        ({"username": "crane", "password": "pw"}, "Basic " + base64.b64encode(b"crane:pw").decode()),
    ],
)
async def test_auth_headers(fake: tuple[FakeApi, str], kwargs: dict[str, str], expected: str) -> None:
    api, url = fake
    async with PrometheusClient(url, headers={"X-Scope-OrgID": "t1"}, **kwargs) as client:
        await client.query("up")
    headers = api.requests[0][1]
    assert headers["Authorization"] == expected and headers["X-Scope-OrgID"] == "t1"


async def test_credential_files_are_reread_on_each_query(fake: tuple[FakeApi, str], tmp_path: Path) -> None:
    api, url = fake
    token, password = tmp_path / "token", tmp_path / "password"
    token.write_text("one\n")
    password.write_text("pw1\n")
    async with (
        PrometheusClient(url, bearer_token_file=token) as bearer,
        PrometheusClient(url, username="u", password_file=password) as basic,
    ):
        await bearer.query("up")
        await basic.query("up")
        token.write_text("two")
        password.write_text("pw2")
        await bearer.query("up")
        await basic.query("up")
    seen = [headers["Authorization"] for _m, headers, _f in api.requests]
    b64 = base64.b64encode
    assert seen == [
        "Bearer one",
        "Basic " + b64(b"u:pw1").decode(),
        "Bearer two",
        "Basic " + b64(b"u:pw2").decode(),
    ]


async def test_errors_timeouts_and_get_fallback(fake: tuple[FakeApi, str]) -> None:
    api, url = fake
    api.status, api.answer = (
        400,
        {"status": "error", "errorType": "bad_data", "error": "parse error at char 3"},
    )
    async with PrometheusClient(url, timeout=0.3) as client:
        with pytest.raises(PrometheusError, match="parse error") as err:
            await client.query("1 +")
        assert (err.value.error_type, err.value.status) == ("bad_data", 400)

        api.status, api.answer = 502, None
        with pytest.raises(PrometheusError, match="not a Prometheus API answer"):
            await client.query("up")

        api.status, api.answer, api.delay = 200, VECTOR, 1.0
        started = time.monotonic()
        with pytest.raises(PrometheusTimeout):
            await client.query("up")
        assert time.monotonic() - started < 0.9
        with pytest.raises(PrometheusTimeout):
            await client.query("up", timeout=0.1)

        api.delay, api.post_allowed = 0.0, False
        result = await client.query("up")
        assert len(result.samples) == 2 and [m for m, _h, _f in api.requests[-2:]] == ["POST", "GET"]


async def test_connection_refused_is_a_prometheus_error() -> None:
    async with PrometheusClient("http://127.0.0.1:9", timeout=2) as client:
        with pytest.raises(PrometheusError) as err:
            await client.query("up")
    assert err.value.error_type == "connection"


async def test_https_with_a_ca_file(tmp_path: Path) -> None:
    pki = certs.generate_pki(tmp_path / "pki", [])
    app = web.Application()

    async def answer(_request: web.Request) -> web.Response:
        return web.json_response(VECTOR)

    app.router.add_post("/api/v1/query", answer)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=pki.server_ssl_context())
    await site.start()
    url = f"https://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with PrometheusClient(url, ca_file=pki.ca_cert_path) as client:
            assert len((await client.query("up")).samples) == 2
        async with PrometheusClient(url) as untrusted:  # the system CAs do not know ours
            with pytest.raises(PrometheusError, match="certificate"):
                await untrusted.query("up")
        async with PrometheusClient(url, insecure_skip_verify=True) as insecure:
            assert len((await insecure.query("up")).samples) == 2
    finally:
        await runner.cleanup()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"bearer_token": "t", "username": "u"},
        {"bearer_token": "t", "bearer_token_file": "/f"},
        {"password": "p"},
        {"timeout": 0},
    ],
)
def test_client_refuses_conflicting_settings(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        PrometheusClient("http://prometheus:9090", **kwargs)
    with pytest.raises(ValueError, match="http"):
        PrometheusClient("prometheus:9090")


# -- rules -------------------------------------------------------------------------------------------------


def test_rules_are_crane_s() -> None:
    doc = rules_document()
    groups = {g["name"]: g for g in doc["groups"]}
    assert {n: g["interval"] for n, g in groups.items()} == {
        "cpu_mem_usage_active": "30s",
        "cpu-usage-1m": "1m",
        "cpu-usage-5m": "5m",
        "mem-usage-1m": "1m",
        "mem-usage-5m": "5m",
    }
    rules = {r["record"]: r["expr"] for g in doc["groups"] for r in g["rules"]}
    assert (
        rules["cpu_usage_active"]
        == '100 - (avg by (instance) (irate(node_cpu_seconds_total{mode="idle"}[30s])) * 100)'
    )
    assert rules["cpu_usage_max_avg_1d"] == "max_over_time(cpu_usage_avg_5m[1d])"
    assert set(LOAD_METRICS) == {
        f"{r}_usage_{w}" for r in ("cpu", "mem") for w in ("avg_5m", "max_avg_1h", "max_avg_1d")
    }
    assert {g["interval"] for g in yaml.safe_load(rules_yaml(1.5))["groups"]} == {"1500ms"}


@needs_prometheus
def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    path = tmp_path / "rules.yml"
    path.write_text(rules_yaml())
    done = subprocess.run(
        ["promtool", "check", "rules", str(path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(RECORDED_METRICS)} rules found" in done.stdout


def test_backfill_file_carries_raw_and_recorded_series() -> None:
    api = ClusterApi()
    api.bootstrap()
    SimulatedKubelets(api).register_nodes(["n0"], NodeShape(cpu="4", memory="8Gi"))
    metrics = NodeMetrics(api, cpu_series="one")
    metrics.start()
    out = io.StringIO()
    end = 1_800_000_000.0
    write_backfill(
        metrics.history(end - 900, end, 60, lambda _n, t: (3.0 if t > end - 300 else 1.0, 2 * GI)), out
    )
    assert out.getvalue().endswith("# EOF\n")
    families = {f.name: f for f in parse_openmetrics(out.getvalue())}
    active = [s.value for s in families["cpu_usage_active"].samples]
    avg = [s.value for s in families["cpu_usage_avg_5m"].samples]
    assert active[0] == pytest.approx(25.0) and active[-1] == pytest.approx(75.0)
    assert avg[-1] == pytest.approx(75.0) and avg[-5] == pytest.approx((25 * 4 + 75) / 5)
    assert families["cpu_usage_active"].samples[0].labels == {"instance": metrics.instance("n0")}
    mem = families["mem_usage_avg_5m"].samples[0]
    assert mem.labels == {"instance": metrics.instance("n0"), "job": "node-exporter", "node": "n0"}
    assert mem.value == pytest.approx(25.0)


# -- a real Prometheus -------------------------------------------------------------------------------------


def by_instance(samples: Any) -> dict[str, float]:
    return {s.labels["instance"]: s.value for s in samples}


@needs_prometheus
async def test_prometheus_records_crane_metrics_from_the_local_cluster(tmp_path: Path) -> None:
    options = ClusterOptions(
        port=0,
        insecure_http=True,
        data_dir=tmp_path,
        nodes=3,
        heartbeat_interval=3600.0,
        node_shape=NodeShape(cpu="4", memory="8Gi"),
        node_metrics_port=0,
        node_usage_share=0.6,
    )
    async with LocalCluster(options) as cluster:
        api, metrics = cluster.api, cluster.node_metrics
        assert metrics is not None
        pods = api.rtype("", "v1", "pods")
        annotated = {
            "name": "a",
            "annotations": {CPU_USAGE_ANNOTATION: "1500m", MEMORY_USAGE_ANNOTATION: "2Gi"},
        }
        requests = {"cpu": "2", "memory": "4Gi"}
        api.create(
            pods, {"metadata": annotated, "spec": {"containers": [{"name": "c", "image": "x"}]}}, "default"
        )
        api.bind("default", "a", {"metadata": {"name": "a"}, "target": {"kind": "Node", "name": "node-0"}})
        api.create(
            pods,
            {
                "metadata": {"name": "b"},
                "spec": {
                    "nodeName": "node-1",
                    "containers": [{"name": "c", "image": "x", "resources": {"requests": requests}}],
                },
            },
            "default",
        )
        expected = {
            "node-0": (37.5, 25.0),
            "node-1": (30.0, 30.0),
            "node-2": (0.0, 0.0),
        }  # percent (cpu, mem)
        await _until(lambda: all(metrics.usage(n) != (0.0, 0.0) for n in ("node-0", "node-1")))

        async with (
            PrometheusServer([cluster.node_metrics_url], scrape_interval=0.5) as prom,
            prom.client() as client,
        ):
            # Prometheus 2.42 hands new targets to the scraper after ~5 s; the rules follow each 0.5 s.
            await prom.wait_for("count_over_time(cpu_usage_active[1m]) >= 2", count=3, timeout=30)
            for metric, column in (
                ("cpu_usage_avg_5m", 0),
                ("mem_usage_avg_5m", 1),
                ("cpu_usage_max_avg_1h", 0),
            ):
                got = by_instance((await prom.wait_for(metric, count=3, timeout=10)).samples)  # groups lag
                for node, values in expected.items():
                    assert got[metrics.instance(node)] == pytest.approx(values[column], abs=2.0), (
                        metric,
                        node,
                    )
            # crane's own lookup, "<metric>{instance=~"<InternalIP>:.+"} / 100", finds each node's series
            match = parse_instance_match("ip:port")
            for node, (cpu, _mem) in expected.items():
                ip = metrics.instance(node).rsplit(":", 1)[0]
                query = render_query(
                    DEFAULT_QUERY_TEMPLATE, "cpu_usage_avg_5m", selectors(match, node, ip)[0]
                )
                result = await client.query(query)
                assert len(result.samples) == 1 and result.samples[0].value == pytest.approx(
                    cpu / 100, abs=0.02
                )


async def _until(check: Callable[[], bool], timeout: float = 3.0) -> None:
    for _ in range(int(timeout / 0.02)):
        if check():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition not reached")


@needs_prometheus
async def test_backfilled_history_feeds_the_1h_and_1d_rules() -> None:
    api = ClusterApi()
    api.bootstrap()
    SimulatedKubelets(api).register_nodes(["n0", "n1"], NodeShape(cpu="4", memory="8Gi"))
    metrics = NodeMetrics(api, cpu_series="one")
    metrics.start()
    now = time.time()

    def profile(node: str, t: float) -> tuple[float, float]:
        age = now - t
        if node == "n0" and 1800 <= age < 2400:  # half an hour ago: 3.6 of 4 cores for 10 minutes
            return 3.6, 2 * GI
        if node == "n1" and 5 * 3600 <= age < 6 * 3600:  # five hours ago: 7 GiB of 8 for an hour
            return 1.0, 7 * GI
        return 1.0, 2 * GI

    prom = PrometheusServer()  # no scrape targets: everything it knows comes from the backfill
    await prom.backfill(metrics.history(now - 25 * 3600, now, 300, profile))
    async with prom, prom.client() as client:
        await prom.wait_for("mem_usage_max_avg_1d", count=2, timeout=15)
        await prom.wait_for("cpu_usage_max_avg_1d", count=2, timeout=15)
        got = {m: by_instance((await client.query(m)).samples) for m in LOAD_METRICS}
        n0, n1 = metrics.instance("n0"), metrics.instance("n1")
        assert got["cpu_usage_avg_5m"] == pytest.approx({n0: 25.0, n1: 25.0})
        assert got["cpu_usage_max_avg_1h"] == pytest.approx({n0: 90.0, n1: 25.0})
        assert got["cpu_usage_max_avg_1d"] == pytest.approx({n0: 90.0, n1: 25.0})
        assert got["mem_usage_max_avg_1h"] == pytest.approx({n0: 25.0, n1: 25.0})
        assert got["mem_usage_max_avg_1d"] == pytest.approx({n0: 25.0, n1: 87.5})
        # the raw counters are there too: the idle rate of n0's averaged core an hour ago
        rate = await client.query(
            f'rate(node_cpu_seconds_total{{instance="{n0}",mode="idle"}}[30m] offset 1h)'
        )
        assert rate.samples[0].value == pytest.approx(0.75, abs=0.01)
