"""SchedulerMetrics (upstream names, types, buckets) and the HTTPS health/metrics/configz server."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass

import aiohttp
import pytest

from kubesched.scheduler.framework.interface import Code
from kubesched.scheduler.metrics import SchedulerMetrics, exponential_buckets, status_label
from kubesched.scheduler.server import LeaderHealthzAdaptor, SecureServer

UPSTREAM_NAMES = (
    "scheduler_schedule_attempts_total",
    "scheduler_scheduling_attempt_duration_seconds",
    "scheduler_scheduling_algorithm_duration_seconds",
    "scheduler_pending_pods",
    "scheduler_pod_scheduling_sli_duration_seconds",
    "scheduler_pod_scheduling_attempts",
    "scheduler_framework_extension_point_duration_seconds",
    "scheduler_plugin_execution_duration_seconds",
    "scheduler_queue_incoming_pods_total",
    "scheduler_preemption_attempts_total",
    "scheduler_preemption_victims",
    "scheduler_permit_wait_duration_seconds",
    "scheduler_scheduler_cache_size",
    "scheduler_unschedulable_pods",
    "scheduler_plugin_evaluation_total",
    "scheduler_goroutines",
    "leader_election_master_status",
)


# -- metrics --------------------------------------------------------------------------------------------------


def test_metric_families_have_upstream_names_and_types() -> None:
    m = SchedulerMetrics()
    text = m.exposition().decode()
    for name in UPSTREAM_NAMES:
        assert f"# TYPE {name} " in text, name
    assert "# TYPE scheduler_schedule_attempts_total counter" in text
    assert "# TYPE scheduler_pending_pods gauge" in text
    assert "# TYPE scheduler_plugin_execution_duration_seconds histogram" in text
    assert "_created" not in text


def test_helpers_record_with_upstream_labels_and_buckets() -> None:
    m = SchedulerMetrics()
    m.observe_attempt("scheduled", "default-scheduler", 0.003)
    m.observe_attempt("unschedulable", "default-scheduler", 0.5)
    m.observe_extension_point("Filter", Code.UNSCHEDULABLE, "default-scheduler", 0.0002)
    m.observe_plugin("NodeResourcesFit", "Filter", Code.SUCCESS, 0.00002)
    m.observe_pod_scheduled(attempts=3, sli_seconds=1.5)
    m.observe_preemption(victims=2)
    m.set_cache_size(nodes=5, pods=7, assumed_pods=1)
    m.set_leader("kube-scheduler", True)
    reg = m.registry
    get = reg.get_sample_value
    assert (
        get("scheduler_schedule_attempts_total", {"result": "scheduled", "profile": "default-scheduler"}) == 1
    )
    # 1 ms doubling buckets: 0.003 s falls in le=0.004.
    assert (
        get(
            "scheduler_scheduling_attempt_duration_seconds_bucket",
            {"result": "scheduled", "profile": "default-scheduler", "le": "0.004"},
        )
        == 1
    )
    assert (
        get(
            "scheduler_scheduling_attempt_duration_seconds_bucket",
            {"result": "scheduled", "profile": "default-scheduler", "le": "0.002"},
        )
        == 0
    )
    assert (
        get(
            "scheduler_framework_extension_point_duration_seconds_count",
            {"extension_point": "Filter", "status": "Unschedulable", "profile": "default-scheduler"},
        )
        == 1
    )
    assert (
        get(
            "scheduler_plugin_execution_duration_seconds_count",
            {"plugin": "NodeResourcesFit", "extension_point": "Filter", "status": "Success"},
        )
        == 1
    )
    assert get("scheduler_pod_scheduling_sli_duration_seconds_count", {"attempts": "3"}) == 1
    assert get("scheduler_pod_scheduling_attempts_bucket", {"le": "4.0"}) == 1
    assert get("scheduler_preemption_attempts_total") == 1
    assert get("scheduler_preemption_victims_sum") == 2
    assert get("scheduler_scheduler_cache_size", {"type": "assumed_pods"}) == 1
    assert get("leader_election_master_status", {"name": "kube-scheduler"}) == 1

    text = m.exposition().decode()
    # Bucket layouts: 15 doubling buckets from 1 ms, 20 buckets growing by 1.5 from 10 µs, 12 doubling from 0.1 ms.
    assert text.count('scheduler_scheduling_algorithm_duration_seconds_bucket{le="') == 16
    assert 'le="16.384"' in text
    assert text.count("scheduler_plugin_execution_duration_seconds_bucket{") == 21
    assert exponential_buckets(0.0001, 2, 12)[-1] == pytest.approx(0.2048)


def test_two_instances_do_not_clash_and_sampling_is_about_ten_percent() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.observe_algorithm(0.01)
    assert b.registry.get_sample_value("scheduler_scheduling_algorithm_duration_seconds_count") == 0
    import random

    m = SchedulerMetrics(rng=random.Random(7))
    sampled = sum(m.sample_plugins() for _ in range(10_000))
    assert 800 < sampled < 1200
    assert status_label(Code.UNSCHEDULABLE_AND_UNRESOLVABLE) == "UnschedulableAndUnresolvable"


# -- server ---------------------------------------------------------------------------------------------------


@dataclass
class Served:
    server: SecureServer
    metrics: SchedulerMetrics
    session: aiohttp.ClientSession

    async def get(self, path: str) -> tuple[int, str, str]:
        async with self.session.get(self.server.url + path) as resp:
            return resp.status, await resp.text(), resp.headers.get("Content-Type", "")


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    metrics = SchedulerMetrics()
    server = SecureServer(
        bind_address="127.0.0.1",
        port=0,
        metrics=metrics,
        configz={"parallelism": 16, "profiles": [{"schedulerName": "default-scheduler"}]},
    )
    await server.start()
    # Self-signed: check the handshake works without verifying the chain.
    client_ctx = ssl.create_default_context()
    client_ctx.check_hostname = False
    client_ctx.verify_mode = ssl.CERT_NONE
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_ctx))
    try:
        yield Served(server, metrics, session)
    finally:
        await session.close()
        await server.stop()


async def test_health_endpoints_answer_ok_over_https(served: Served) -> None:
    assert served.server.port > 0 and served.server.url.startswith("https://127.0.0.1:")
    status, body, ctype = await served.get("/healthz")
    assert (status, body) == (200, "ok") and ctype.startswith("text/plain")
    assert (await served.get("/livez"))[:2] == (200, "ok")
    assert (await served.get("/livez/ping"))[:2] == (200, "ok")
    assert (await served.get("/healthz?verbose"))[1] == "[+]ping ok\nhealthz check passed\n"
    assert (await served.get("/nope"))[:2] == (404, "404 page not found\n")


async def test_readyz_waits_for_handler_sync(served: Served) -> None:
    status, body, _ = await served.get("/readyz")
    assert status == 500
    assert body == ("[+]shutdown ok\n[-]sched-handler-sync failed: reason withheld\nreadyz check failed\n")
    status, body, _ = await served.get("/readyz/sched-handler-sync")
    assert (status, body) == (500, "internal server error: waiting for handlers to sync\n")
    served.server.mark_handlers_synced()
    assert (await served.get("/readyz"))[:2] == (200, "ok")


async def test_failing_check_gives_500_with_upstream_body(served: Served) -> None:
    healthy = {"ok": False}
    served.server.add_check("leaderElection", lambda: None if healthy["ok"] else "lease not renewed")
    status, body, ctype = await served.get("/healthz")
    assert status == 500
    assert body == "[-]leaderElection failed: reason withheld\nhealthz check failed\n"
    assert ctype.startswith("text/plain")
    # livez does not run leader election's check.
    assert (await served.get("/livez"))[:2] == (200, "ok")
    status, body, _ = await served.get("/healthz?exclude=leaderElection&exclude=bogus&verbose")
    assert status == 200
    assert body == (
        "[+]leaderElection excluded: ok\n"
        'warn: some health checks cannot be excluded: no matches for "bogus"\n'
        "healthz check passed\n"
    )
    healthy["ok"] = True
    assert (await served.get("/healthz"))[:2] == (200, "ok")


async def test_metrics_and_configz(served: Served) -> None:
    served.metrics.observe_attempt("scheduled", "default-scheduler", 0.01)
    status, body, ctype = await served.get("/metrics")
    assert status == 200 and ctype.startswith("text/plain") and "version=0.0.4" in ctype
    for name in UPSTREAM_NAMES:
        assert name in body, name
    assert 'scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 1.0' in body

    async with served.session.get(served.server.url + "/configz") as resp:
        assert resp.status == 200
        assert await resp.json() == {
            "componentconfig": {"parallelism": 16, "profiles": [{"schedulerName": "default-scheduler"}]}
        }


def test_leader_healthz_adaptor_fails_only_for_a_stale_leader() -> None:
    now = [100.0]
    leading = [True]
    renewed = [95.0]
    adaptor = LeaderHealthzAdaptor(timeout=20.0)
    assert adaptor() is None  # not attached yet
    adaptor.attach(
        is_leader=lambda: leading[0],
        observed_time=lambda: renewed[0],
        lease_duration=15.0,
        lease_name="kube-scheduler",
        clock=lambda: now[0],
    )
    assert adaptor() is None
    now[0] = 95.0 + 35.0
    assert adaptor() is None  # exactly lease duration + timeout
    now[0] += 0.1
    assert adaptor() == "failed election to renew leadership on lease kube-scheduler"
    leading[0] = False
    assert adaptor() is None


async def test_given_certificate_files_are_used(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from kubesched.cluster.certs import self_signed_pair

    cert, key = self_signed_pair(tmp_path, ["localhost", "127.0.0.1"], "given")
    server = SecureServer(bind_address="127.0.0.1", port=0, cert_file=cert, key_file=key)
    await server.start()
    try:
        ctx = ssl.create_default_context(cafile=str(cert))
        ctx.check_hostname = False  # the chain must verify against the given file
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=ctx)) as session:
            async with session.get(server.url + "/livez") as resp:
                assert resp.status == 200 and await resp.text() == "ok"
    finally:
        await server.stop()
    with pytest.raises(ValueError):
        SecureServer(cert_file=cert)
