"""ClusterModel: incremental aggregation, heat-map bucketing, pending-pod messages, lease holders."""

from __future__ import annotations

from datetime import UTC, datetime

from dashboard_objects import failed_scheduling, lease, node, pod

from kubesched.dashboard.model import CELL_FIELDS, ClusterModel, pod_requests
from kubesched.loadaware.annotations import format_annotation

NOW = datetime(2026, 1, 1, 0, 0, 20, tzinfo=UTC).timestamp()


def model(**kw: object) -> ClusterModel:
    return ClusterModel(clock=lambda: NOW, **kw)  # type: ignore[arg-type]


def test_requests_follow_pods_through_add_update_delete() -> None:
    m = model()
    m.on_node(node("n1", "4", "8Gi"))
    m.on_pod(pod("a", "500m", "1Gi", node_name="n1"))
    m.on_pod(pod("b", "1", "2Gi", node_name="n1"))
    tile = m.snapshot()["nodes"][0]
    assert tile["cpu"] == [1500, 4000]
    assert tile["memory"] == [3 * 2**30, 8 * 2**30]
    assert tile["pods"] == [2, 110]
    assert [k for k, _ in tile["podList"]] == ["default/a", "default/b"]
    # A pod that finishes stops counting; a deleted one too.
    m.on_pod(pod("a", node_name="n1"), pod("a", "500m", "1Gi", node_name="n1", phase="Succeeded"))
    m.on_pod_delete(pod("b", node_name="n1"))
    tile = m.snapshot()["nodes"][0]
    assert tile["cpu"] == [0, 4000] and tile["pods"][0] == 0


def test_pod_seen_before_its_node_counts_when_the_node_arrives() -> None:
    m = model()
    m.on_pod(pod("a", "2", "1Gi", node_name="late"))
    m.on_node(node("late"))
    assert m.snapshot()["nodes"][0]["cpu"] == [2000, 4000]


def test_pod_requests_take_the_init_peak_and_overhead() -> None:
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "100m", "memory": "1Mi"}}}],
        "initContainers": [{"resources": {"requests": {"cpu": "2", "memory": "1Mi"}}}],
        "overhead": {"cpu": "50m"},
    }
    assert pod_requests(spec) == (2050, 2**20)


def test_summary_and_generation() -> None:
    m = model()
    g0 = m.generation
    m.on_node(node("n1"))
    m.on_node(node("n2", ready=False))
    m.on_pod(pod("p", node_name="n1"))
    m.on_pod(pod("q"))
    s = m.snapshot()
    assert m.generation > g0
    assert s["summary"] == {
        "nodes": 2,
        "readyNodes": 1,
        "pods": 2,
        "boundPods": 1,
        "pending": 1,
        "cpu": [500, 8000],
        "memory": [2**30, 16 * 2**30],
        "withUsage": 0,
    }
    assert s["mode"] == "tiles"
    assert [n["ready"] for n in s["nodes"]] == [True, False]


def test_heat_map_beyond_the_tile_limit() -> None:
    m = model(tile_limit=10, max_cells=7)
    for i in range(30):
        m.on_node(node(f"n{i:02d}", "10", "10Gi", zone="b" if i >= 15 else "a"))
    m.on_pod(pod("hot", "9", "1Gi", node_name="n00"))
    s = m.snapshot()
    assert s["mode"] == "heatmap" and "nodes" not in s
    hm = s["heatmap"]
    assert hm["fields"] == list(CELL_FIELDS)
    # 30 nodes in at most 7 cells: 5 per cell, 6 cells, every node in exactly one.
    assert hm["nodesPerCell"] == 5 and len(hm["cells"]) == 6
    assert sum(c[2] for c in hm["cells"]) == 30
    first = dict(zip(CELL_FIELDS, hm["cells"][0], strict=True))
    assert first["first"] == "n00" and first["last"] == "n04"
    assert first["cpuMax"] == 0.9 and first["cpuAvg"] == 0.18 and first["pods"] == 1
    assert s["hottest"][0]["name"] == "n00"
    # Drilling into a cell gives its tiles.
    assert [t["name"] for t in m.nodes_between("n05", "n09")] == ["n05", "n06", "n07", "n08", "n09"]


def test_heat_map_of_5000_nodes_is_small() -> None:
    import orjson

    m = model()
    for i in range(5000):
        m.on_node(node(f"node-{i}", zone="abc"[i % 3]))
    body = orjson.dumps(m.snapshot())
    assert len(body) < 100_000
    assert len(m.snapshot()["heatmap"]["cells"]) <= 500


def test_pending_pods_carry_their_latest_failed_scheduling_message() -> None:
    m = model()
    m.on_pod(pod("p"))
    m.on_event(failed_scheduling("p", "0/3 nodes are available: 3 Insufficient cpu.", "2026-01-01T00:00:05Z"))
    m.on_event(failed_scheduling("p", "old news", "2026-01-01T00:00:01Z"))
    m.on_event(
        failed_scheduling("p", "0/3 nodes are available: 3 Insufficient memory.", "2026-01-01T00:00:09Z")
    )
    [item] = m.snapshot()["pending"]
    assert item["pod"] == "default/p"
    assert item["message"] == "0/3 nodes are available: 3 Insufficient memory."
    assert item["ageSeconds"] == 20.0
    # events.k8s.io/v1 shape: regarding + note.
    m.on_pod(pod("q"))
    m.on_event(
        {
            "reason": "FailedScheduling",
            "regarding": {"kind": "Pod", "namespace": "default", "name": "q"},
            "note": "gated",
            "eventTime": "2026-01-01T00:00:03.000000Z",
        }
    )
    assert {p["pod"]: p.get("message") for p in m.snapshot()["pending"]}["default/q"] == "gated"
    # Once scheduled, the pod is no longer pending and its message is gone.
    m.on_pod(pod("p"), pod("p", node_name="n1"))
    assert [p["pod"] for p in m.snapshot()["pending"]] == ["default/q"]
    assert "default/p" not in m.failed_scheduling


def test_other_events_are_ignored() -> None:
    m = model()
    m.on_pod(pod("p"))
    m.on_event({**failed_scheduling("p", "x", "2026-01-01T00:00:05Z"), "reason": "Scheduled"})
    assert "message" not in m.snapshot()["pending"][0]


def test_lease_holders_with_profiles_and_expiry() -> None:
    m = model(lease_profiles={"kube-system/kube-scheduler": ["default-scheduler", "batch"]})
    m.on_lease(lease("kube-scheduler", "host_1"))
    m.on_lease(lease("other", "host_2", renew="2025-12-31T23:00:00Z"))
    m.on_lease(lease("node-0", "node-0", namespace="kube-node-lease"))
    rows = {r["lease"]: r for r in m.snapshot()["leases"]}
    assert set(rows) == {"kube-system/kube-scheduler", "kube-system/other"}
    mine = rows["kube-system/kube-scheduler"]
    assert mine["holder"] == "host_1" and mine["since"] == "2026-01-01T00:00:00.000000Z"
    assert mine["profiles"] == ["default-scheduler", "batch"] and not mine["expired"]
    assert rows["kube-system/other"]["expired"]
    m.on_lease_delete(lease("other", "host_2"))
    assert [r["lease"] for r in m.snapshot()["leases"]] == ["kube-system/kube-scheduler"]


def test_usage_annotations_with_freshness() -> None:
    m = model()
    fresh = format_annotation(0.42, NOW - 60)  # RFC 3339: unambiguous whatever TZ says
    stale = format_annotation(0.9, NOW - 3600)
    m.on_node(node("n1", annotations={"cpu_usage_avg_5m": fresh, "mem_usage_avg_5m": stale}))
    m.on_node(node("n2", annotations={"cpu_usage_avg_5m": "garbage"}))
    tiles = {t["name"]: t for t in m.snapshot()["nodes"]}
    usage = tiles["n1"]["usage"]
    assert usage["cpu"] == {"value": 0.42, "ageSeconds": 60.0, "fresh": True}
    assert usage["memory"]["fresh"] is False and usage["memory"]["value"] == 0.9
    assert tiles["n2"]["usage"] is None
    assert m.snapshot()["summary"]["withUsage"] == 1
