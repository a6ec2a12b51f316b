"""The dashboard's HTTP API through aiohttp's test client; the scheduler-view helpers; the queue snapshot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest
from aiohttp.test_utils import TestClient, TestServer
from dashboard_objects import lease, node, pod

from kubesched.dashboard.explain import Explainer, as_pending, dump_for
from kubesched.dashboard.model import ClusterModel
from kubesched.dashboard.scheduler_view import SchedulerUrlError, parse_metrics, series, ssl_context_for
from kubesched.dashboard.server import DashboardServer
from kubesched.scheduler.config import default_config
from kubesched.scheduler.simulate import placements_json, simulate


@pytest.fixture
async def setup() -> AsyncIterator[tuple[TestClient, ClusterModel]]:
    model = ClusterModel()
    model.on_node(node("n1", "4", "8Gi", zone="a"))
    model.on_node(node("n2", "8", "8Gi", zone="b"))
    model.on_node(node("n3", "1", "1Gi", zone="c"))
    model.on_pod(pod("running", "1", "2Gi", node_name="n1"))
    model.on_pod(pod("waiting", "2", "1Gi"))
    model.on_lease(lease("kube-scheduler", "me"))
    explainer = Explainer(default_config(), None, seed=1)
    server = DashboardServer(model, explainer)
    client = TestClient(TestServer(server.build_app(), host="127.0.0.1"))
    await client.start_server()
    yield client, model
    await client.close()


async def test_page_and_static_files(setup: tuple[TestClient, ClusterModel]) -> None:
    client, _ = setup
    r = await client.get("/")
    assert r.status == 200 and "kubesched" in await r.text()
    for name in ("app.js", "style.css"):
        assert (await client.get(f"/static/{name}")).status == 200
    assert (await client.get("/static/../server.py")).status in (403, 404)


async def test_state(setup: tuple[TestClient, ClusterModel]) -> None:
    client, model = setup
    r = await client.get("/api/state")
    assert r.status == 200 and float(r.headers["X-Compute-Seconds"]) >= 0
    body = await r.json()
    assert [n["name"] for n in body["nodes"]] == ["n1", "n2", "n3"]
    assert body["pending"][0]["pod"] == "default/waiting"
    assert body["leases"][0]["holder"] == "me"
    model.on_pod(pod("another"))
    assert (await (await client.get("/api/state")).json())["summary"]["pending"] == 2


async def test_stream_sends_the_state_then_changes(setup: tuple[TestClient, ClusterModel]) -> None:
    client, model = setup
    r = await client.get("/api/stream")
    assert r.headers["Content-Type"].startswith("text/event-stream")

    async def next_state() -> dict[str, object]:
        buf = b""
        while b"\n\n" not in buf:
            buf += await r.content.readany()
        event = buf.split(b"\n\n", 1)[0]
        assert event.startswith(b"event: state\ndata: ")
        return orjson.loads(event.split(b"data: ", 1)[1])

    first = await next_state()
    model.on_pod(pod("waiting"), pod("waiting", "2", "1Gi", node_name="n2"))
    second = await next_state()
    assert second["generation"] > first["generation"]  # type: ignore[operator]
    assert second["summary"]["pending"] == 0  # type: ignore[index]
    r.close()


async def test_explain_matches_simulate(setup: tuple[TestClient, ClusterModel]) -> None:
    client, model = setup
    r = await client.get("/api/pods/default/running/explain")
    assert r.status == 200
    got = await r.json()
    assert got["boundTo"] == "n1" and got["profile"] == "default-scheduler"
    # The same dump through simulate() directly: same placement, same numbers.
    expected = await simulate(
        default_config(), dump_for(model, as_pending(model.pod_object("default/running") or {})), seed=1
    )
    want = placements_json(expected)["placements"][0]
    assert (
        got["node"] == want["node"]
        and got["scores"] == want["scores"]
        and got["filtered"] == want["filtered"]
    )
    assert set(got["filtered"]) == {"n3"}  # 1 CPU/1Gi node cannot take 1 CPU + 2Gi
    assert (await client.get("/api/pods/default/nope/explain")).status == 404


async def test_explain_a_pod_that_fits_nowhere(setup: tuple[TestClient, ClusterModel]) -> None:
    client, model = setup
    model.on_pod(pod("huge", "100", "1Gi"))
    got = await (await client.get("/api/pods/default/huge/explain")).json()
    assert got["node"] is None and "Insufficient cpu" in got["message"]


async def test_what_if_with_a_pending_pod_and_a_manifest(setup: tuple[TestClient, ClusterModel]) -> None:
    client, _ = setup
    r = await client.post("/api/whatif", json={"pod": "default/waiting", "profile": "default-scheduler"})
    assert r.status == 200
    body = await r.json()
    assert body["whatIf"] and body["node"] in ("n1", "n2") and "n3" in body["filtered"]
    manifest = "kind: Pod\nmetadata: {name: probe}\nspec:\n  containers:\n  - name: c\n    resources: {requests: {cpu: '6'}}\n"
    body = await (await client.post("/api/whatif", json={"manifest": manifest})).json()
    assert body["pod"] == "default/probe" and body["node"] == "n2"
    assert set(body["filtered"]) == {"n1", "n3"}


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        ({"manifest": "kind: Pod\nspec: [unclosed"}, "not valid YAML or JSON"),
        ({"manifest": "just words"}, "expected a Pod object, found str"),
        ({"manifest": "kind: Deployment\nspec: {}"}, "expected kind: Pod"),
        (
            {"manifest": "kind: Pod\nspec: {containers: []}"},
            "spec.containers must list at least one container",
        ),
        (
            {"manifest": "kind: Pod\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}"},
            "invalid quantity 'lots'",
        ),
        ({"manifest": "kind: Pod\nmetadata: []\nspec: {}"}, "metadata must be a mapping"),
        ({"manifest": "kind: Pod\nspec: {containers: [{name: c}], affinity: 7}"}, "cannot be simulated"),
        ({"manifest": "---\nkind: Pod\n---\nkind: Pod\n"}, "exactly one Pod"),
        ({"manifest": ""}, "paste a Pod manifest"),
        ({"pod": "default/ghost"}, "no pod default/ghost"),
        ({"pod": "default/waiting", "profile": "nobody"}, "unknown profile"),
        ({}, "pick a pending pod"),
        ([1, 2], "expected a JSON object"),
    ],
)
async def test_what_if_rejects_bad_input_with_400(
    setup: tuple[TestClient, ClusterModel], payload: object, message: str
) -> None:
    client, _ = setup
    r = await client.post("/api/whatif", json=payload)
    assert r.status == 400, await r.text()
    assert message in (await r.json())["error"]


async def test_what_if_needs_json(setup: tuple[TestClient, ClusterModel]) -> None:
    client, _ = setup
    r = await client.post("/api/whatif", data=b"kind: Pod", headers={"Content-Type": "text/plain"})
    assert r.status == 415
    r = await client.post("/api/whatif", data=b"{not json", headers={"Content-Type": "application/json"})
    assert r.status == 400 and "not JSON" in (await r.json())["error"]


async def test_read_only(setup: tuple[TestClient, ClusterModel]) -> None:
    client, _ = setup
    for method in ("PUT", "DELETE", "PATCH"):
        assert (await client.request(method, "/api/state")).status == 405


async def test_foreign_host_names_are_refused(setup: tuple[TestClient, ClusterModel]) -> None:
    client, _ = setup
    r = await client.get("/api/state", headers={"Host": "evil.example:80"})
    assert r.status == 403


async def test_nodes_of_a_cell_and_profiles_and_scheduler(setup: tuple[TestClient, ClusterModel]) -> None:
    client, _ = setup
    body = await (await client.get("/api/nodes", params={"first": "n2", "last": "n3"})).json()
    assert [n["name"] for n in body["nodes"]] == ["n2", "n3"]
    assert (await client.get("/api/nodes")).status == 400
    assert (await (await client.get("/api/profiles")).json()) == {"profiles": ["default-scheduler"]}
    assert (await (await client.get("/api/scheduler")).json())["configured"] is False


METRICS_1 = """\
scheduler_schedule_attempts_total{profile="default-scheduler",result="scheduled"} 10
scheduler_schedule_attempts_total{profile="default-scheduler",result="unschedulable"} 1
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.001",profile="p",result="scheduled"} 0
scheduler_scheduling_attempt_duration_seconds_bucket{le="0.01",profile="p",result="scheduled"} 10
scheduler_scheduling_attempt_duration_seconds_bucket{le="+Inf",profile="p",result="scheduled"} 11
scheduler_scheduling_attempt_duration_seconds_sum{profile="p",result="scheduled"} 0.05
scheduler_scheduling_attempt_duration_seconds_count{profile="p",result="scheduled"} 11
"""


def test_metrics_series() -> None:
    a = parse_metrics(METRICS_1, 100.0)
    b_text = METRICS_1.replace("} 10\n", "} 30\n").replace("} 11\n", "} 31\n").replace("0.05", "0.15")
    b = parse_metrics(b_text, 110.0)
    assert a.attempts == {"scheduled": 10.0, "unschedulable": 1.0}
    [point] = series([a, b])
    assert point["scheduledPerSecond"] == 2.0
    assert point["meanLatencySeconds"] == 0.005  # 0.1 s over 20 attempts
    assert 0.001 < point["p90LatencySeconds"] <= 0.01
    # A restart (counters went down) is skipped, not drawn as a negative rate.
    assert series([b, parse_metrics(METRICS_1, 120.0)]) == []


def test_scheduler_url_tls_rules(tmp_path: object) -> None:
    assert ssl_context_for("https://127.0.0.1:10259", None) is not None
    assert ssl_context_for("http://127.0.0.1:10251", None) is None
    with pytest.raises(SchedulerUrlError, match="not a loopback address"):
        ssl_context_for("https://10.0.0.5:10259", None)
    with pytest.raises(SchedulerUrlError):
        ssl_context_for("ftp://x", None)


async def test_queue_snapshot_lists_rejecting_plugins() -> None:
    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.queue import SchedulingQueue

    cache = Cache()
    clock = [1000.0]
    q = SchedulingQueue(lambda qpi: qpi.timestamp, clock=lambda: clock[0])
    for name in ("a", "b", "c"):
        q.add(cache.pod_info(pod(name)))
    first = await q.pop()
    second = await q.pop()
    assert first is not None and second is not None
    first.unschedulable_plugins.add("NodeResourcesFit")
    q.add_unschedulable_if_not_present(first)
    second.unschedulable_plugins.add("TaintToleration")
    clock[0] += 0.5
    snap = q.snapshot()
    assert snap["counts"] == {"active": 1, "backoff": 0, "unschedulable": 1, "gated": 0}
    assert [p["pod"] for p in snap["active"]] == ["default/c"]
    [rejected] = snap["unschedulable"]
    assert rejected["pod"] == first.pod_info.key and rejected["plugins"] == ["NodeResourcesFit"]
    assert rejected["attempts"] == 1 and rejected["profile"] == "default-scheduler"
    assert snap["backoff"] == [] and snap["gated"] == [] and not snap["truncated"]
    # The in-flight pod is in no list; a limit truncates.
    assert q.snapshot(limit=0)["truncated"] is True


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--port", "99999", "not a port number"),
        ("--port", "x", "not a port number"),
        ("--tile-limit", "0", "must be a positive number"),
        ("--scheduler-poll-interval", "-1", "must be a positive number"),
    ],
)
def test_bad_flags_are_one_line_not_a_traceback(flag: str, value: str, message: str) -> None:
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-m", "kubesched.cli", "dashboard", flag, value, "--kubeconfig", "/nonexistent"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert f"argument {flag}: {message}" in out.stderr and "Traceback" not in out.stderr
