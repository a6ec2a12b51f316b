"""The pure parts of takeover, doctor and chaos on fixture objects: no cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.apimachinery.labels import LabelSelector
from kubesched.ops.chaosreport import ChaosBook, leader_changes
from kubesched.ops.common import (
    LeaseInfo,
    SchedulerConfig,
    SchedulerInstance,
    config_from,
    parse_flags,
    parse_time,
    percentile,
    scheduler_kind,
    schedulers_in_pods,
)
from kubesched.ops.diagnose import Snapshot, diagnose, placement_command
from kubesched.ops.takeover import classify, find_manifest, plan_moves
from kubesched.ops.timeline import LeaseSample, SchedEvent, concurrent_instances, handover

T0 = 1_800_000_000.0


# ---- timelines and overlap ----------------------------------------------------------------------------------


def test_safe_handover_has_no_overlap() -> None:
    samples = [
        LeaseSample(T0, "old", renew=T0, acquire=T0 - 100, duration=15),
        LeaseSample(T0 + 1, "", renew=T0 + 1, acquire=T0 + 1, duration=1),  # released on shutdown
        LeaseSample(T0 + 3, "new", renew=T0 + 2.5, acquire=T0 + 2.5, duration=15),
    ]
    h = handover(samples, [], "old", action_t=T0 + 0.5)
    assert h.won and h.new_holder == "new"
    assert h.handover_seconds == pytest.approx(2.5)
    assert h.old_released and h.overlap_observed == 0 and h.overlap_bound == 0


def test_deleted_lease_overlap_from_renewals_and_events() -> None:
    samples = [
        LeaseSample(T0, "old", renew=T0, duration=15),
        LeaseSample(T0 + 1, ""),  # deleted
        LeaseSample(T0 + 2, "new", renew=T0 + 2, acquire=T0 + 2, duration=15),
    ]
    events = [
        SchedEvent(T0 - 5, "default-scheduler", "default-scheduler-a", "Scheduled", "u1"),
        SchedEvent(T0 + 3, "default-scheduler", "default-scheduler-b", "Scheduled", "u2"),
        # The old leader still binds 7 s after the new one acquired, and a binding loses a race.
        SchedEvent(T0 + 9, "default-scheduler", "default-scheduler-a", "Scheduled", "u3"),
        SchedEvent(
            T0 + 4,
            "default-scheduler",
            "default-scheduler-b",
            "FailedScheduling",
            "u3",
            note='Binding rejected: pod p is already assigned to node "n1"',
        ),
    ]
    h = handover(samples, events, "old", action_t=T0 + 0.5, scheduler_name="default-scheduler")
    assert h.events_distinguish and h.old_events_after == 1 and h.new_events_after == 2
    assert h.overlap_observed == pytest.approx(7.0)
    assert h.overlap_bound == pytest.approx(13.0)  # last renewal T0 + 15 s duration - acquire at T0+2
    assert h.conflicts_after == 1 and not h.old_released


def test_handover_to_a_non_replica_is_not_a_win() -> None:
    samples = [LeaseSample(T0, "old", renew=T0, duration=15), LeaseSample(T0 + 2, "intruder", acquire=T0 + 2)]
    h = handover(samples, [], "old", T0, is_new=lambda who: who.startswith("kubesched"))
    assert not h.won and h.overlap_observed == 0


def test_concurrent_instances_only_when_interleaved() -> None:
    failover = [SchedEvent(T0 + i, "s", "a", "Scheduled") for i in range(3)] + [
        SchedEvent(T0 + 10 + i, "s", "b", "Scheduled") for i in range(3)
    ]
    assert concurrent_instances(failover) == []
    both = [*failover, SchedEvent(T0 + 11, "s", "a", "Scheduled")]
    ((a, b),) = concurrent_instances(both)
    assert {a.instance, b.instance} == {"a", "b"}


def test_sched_event_from_object() -> None:
    ev = {
        "reason": "FailedScheduling", "reportingController": "default-scheduler", "reportingInstance": "x",
        "regarding": {"uid": "u", "namespace": "ns", "name": "p"}, "note": "0/3 nodes are available",
        "eventTime": "2027-01-15T08:00:00.123456Z", "series": {"count": 4, "lastObservedTime": "2027-01-15T08:01:00.000000Z"},
    }  # fmt: skip
    e = SchedEvent.from_object(ev)
    assert e is not None and e.pod == "ns/p" and e.count == 4 and e.t == parse_time("2027-01-15T08:01:00Z")
    assert SchedEvent.from_object({**ev, "reason": "Pulled"}) is None


# ---- report arithmetic ----------------------------------------------------------------------------------------


def test_percentile_nearest_rank() -> None:
    assert percentile([], 50) is None
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([float(i) for i in range(1, 101)], 99) == 99.0
    assert percentile([5.0], 99) == 5.0


def test_chaos_book_report() -> None:
    b = ChaosBook(T0, schedule_timeout=5)
    b.observe_pod(T0, "i1", "ns/web-1", "w", "node-a", False, initial=True)
    b.deleted(T0 + 1, "ns/web-1", "workload")
    b.observe_deleted(T0 + 1.5, "i1")
    b.observe_pod(T0 + 1.1, "r1", "ns/web-2", "w", "", False, initial=False)
    b.observe_pod(T0 + 1.6, "r1", "ns/web-2", "w", "node-b", False, initial=False)  # 0.5 s
    b.observe_pod(T0 + 2.0, "r2", "ns/web-3", "w", "", False, initial=False)
    b.observe_pod(T0 + 9.0, "r2", "ns/web-3", "w", "node-a", False, initial=False)  # 7 s: too slow
    b.observe_pod(T0 + 3.0, "r3", "ns/web-4", "w", "node-a", False, initial=False)
    b.observe_pod(T0 + 4.0, "r3", "ns/web-4", "w", "node-b", False, initial=False)  # rebound!
    b.observe_pod(T0 + 5.0, "r4", "ns/web-5", "w", "", False, initial=False)  # never bound
    b.observe_scheduled_event("r1", "ev1", 1)
    b.observe_scheduled_event("r1", "ev2", 1)  # two Scheduled events for one pod
    b.deleted(T0 + 3, "kube-system/kubesched-x", "leader")
    for t, h in [(T0, "a"), (T0 + 3, ""), (T0 + 4, "b"), (T0 + 6, "a")]:
        b.observe_holder(t, h)
    r = b.finish(T0 + 20, pending_now={"r4": "ns/web-5"})
    assert (r.deletions, r.leader_kills, r.replacements, r.scheduled) == (1, 1, 4, 3)
    assert r.latency_p50 == pytest.approx(0.5) and r.latency_max == pytest.approx(7.0)
    assert r.leader_changes == 2 and r.pending_at_end == ["ns/web-5"]
    assert not r.ok
    text = "\n".join(r.violations)
    assert "ns/web-4 (uid r3) bound twice: to node-a, then to node-b" in text
    assert "ns/web-3 scheduled after 7.0s" in text
    assert "ns/web-2 has 2 Scheduled events" in text
    assert "ns/web-5 left Pending at the end" in text and "web-5 not scheduled within" not in text


def test_leader_changes_ignore_releases() -> None:
    assert leader_changes(["a", "", "b", "b", "", "a"]) == 2
    assert leader_changes(["a"]) == 0


# ---- recognising schedulers -----------------------------------------------------------------------------------


def test_scheduler_kind_and_flags() -> None:
    assert scheduler_kind(["kube-scheduler", "--config=/x"]) == "kube-scheduler"
    assert scheduler_kind(["/usr/local/bin/kube-scheduler"]) == "kube-scheduler"
    assert scheduler_kind(["kubesched", "scheduler"]) == "kubesched"
    assert scheduler_kind(["python", "-m", "kubesched.cli", "scheduler"]) == "kubesched"
    assert scheduler_kind(["scheduler", "--config=/c"], image="ghcr.io/x/kubesched:0.1") == "kubesched"
    assert scheduler_kind(["kubesched", "annotator"]) is None
    assert scheduler_kind(["nginx"]) is None
    flags = parse_flags(["--leader-elect", "--config", "/c.yaml", "--leader-elect-resource-name=x", "-v=2"])
    assert flags == {"leader-elect": "true", "config": "/c.yaml", "leader-elect-resource-name": "x", "v": "2"}


def test_config_from_file_and_flags() -> None:
    text = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: true, resourceNamespace: kubesched, resourceName: kubesched}
profiles: [{schedulerName: kubesched}, {}]
"""
    c = config_from("kubesched", {"config": "/c"}, text)
    assert c.names == ("kubesched", "default-scheduler") and c.lease == ("kubesched", "kubesched")
    assert config_from("kube-scheduler", {}, None) == SchedulerConfig("kube-scheduler")
    assert not config_from("kubesched", {"config": "/c"}, None).config_known
    assert not config_from("kubesched", {"leader-elect": "false"}, None).leader_elect


def _pod(name: str, ns: str = "default", **spec: Any) -> dict[str, Any]:
    meta = spec.pop("meta", {})
    status = spec.pop("status", {"phase": "Pending"})
    return {
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", **meta},
        "spec": spec,
        "status": status,
    }


RUNNING = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}


def test_schedulers_in_pods_read_the_configmap() -> None:
    pod = _pod(
        "ks-1", "kube-system", nodeName="cp-0", status=RUNNING,
        meta={"labels": {"app.kubernetes.io/name": "kubesched"}},
        containers=[{"name": "c", "image": "kubesched:0.1", "args": ["scheduler", "--config=/etc/ks/config.yaml"],
                     "volumeMounts": [{"name": "cfg", "mountPath": "/etc/ks"}]}],
        volumes=[{"name": "cfg", "configMap": {"name": "ks"}}],
    )  # fmt: skip
    cms = {
        ("kube-system", "ks"): {"data": {"config.yaml": "profiles: [{schedulerName: default-scheduler}]\n"}}
    }
    (s,) = schedulers_in_pods([pod], cms)
    assert s.config.names == ("default-scheduler",) and s.config.config_known and s.ready and s.node == "cp-0"
    (s2,) = schedulers_in_pods([pod], {})
    assert not s2.config.config_known


def _inst(
    pod: str, kind: str = "kubesched", labels: dict[str, str] | None = None, **cfg: Any
) -> SchedulerInstance:
    return SchedulerInstance(f"pod kube-system/{pod}", SchedulerConfig(kind, **cfg), "kube-system", pod, "cp-0",
                             labels=labels or {}, static=pod.startswith("kube-scheduler"))  # fmt: skip


def test_classify_replicas_and_incumbents() -> None:
    default = _inst("kube-scheduler-cp-0", labels={"component": "kube-scheduler"})
    good = _inst("ks-a")
    other_name = _inst("ks-b", names=("kubesched",))
    other_lease = _inst("ks-c", lease=("kube-system", "kubesched"))
    no_le = _inst("ks-d", leader_elect=False)
    replicas, others, incumbents = classify(
        [default, good, other_name, other_lease, no_le], ("kube-system", "kube-scheduler"), "default-scheduler",
        None, LabelSelector.parse("component=kube-scheduler"),
    )  # fmt: skip
    assert replicas == [good] and incumbents == [default]
    why = {s.pod: w for s, w in others}
    assert "not default-scheduler" in why["ks-b"] and "contends for kube-system/kubesched" in why["ks-c"]
    assert "leader election is off" in why["ks-d"]


def test_manifest_found_and_planned(tmp_path: Path) -> None:
    folder = tmp_path / "etc" / "kubernetes" / "manifests"
    folder.mkdir(parents=True)
    (folder / "etcd.yaml").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: etcd}\n")
    (folder / "kube-scheduler.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: kube-scheduler}\n"
    )
    assert find_manifest(folder, "kube-scheduler-cp-0", "cp-0") == folder / "kube-scheduler.yaml"
    default = _inst("kube-scheduler-cp-0", labels={"component": "kube-scheduler"})
    remote = SchedulerInstance("pod kube-system/kube-scheduler-cp-1", SchedulerConfig("kube-scheduler"),
                               "kube-system", "kube-scheduler-cp-1", "cp-1", static=True)  # fmt: skip
    moves = plan_moves([default, remote], {"cp-0": [folder]})
    assert moves[0].possible and moves[0].target.endswith(
        "manifests-disabled-by-kubesched/kube-scheduler.yaml"
    )
    assert not moves[1].possible and moves[1].instruction.startswith("on node cp-1: sudo mkdir")


# ---- doctor's rules -------------------------------------------------------------------------------------------


def _node(
    name: str, ready: bool = True, unschedulable: bool = False, cpu: str = "4", taints: Any = None
) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": unschedulable, "taints": taints or []},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "Unknown", "reason": "NodeStatusUnknown"}],
                   "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }  # fmt: skip


def _lease(holder: str, renew_ago: float, duration: float = 15) -> LeaseInfo:
    return LeaseInfo("kube-system", "kube-scheduler", holder, T0 - 100, T0 - renew_ago, duration, 1)


def _req(cpu: str) -> list[dict[str, Any]]:
    return [{"name": "c", "image": "i", "resources": {"requests": {"cpu": cpu}}}]


def test_doctor_rules() -> None:
    nodes = [_node("n-full", cpu="1"), _node("n-cordoned", unschedulable=True), _node("n-down", ready=False),
             _node("n-ok"), _node("cp", taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}])]  # fmt: skip
    pods = [
        _pod("busy", nodeName="n-full", containers=_req("900m"), status=RUNNING),
        _pod("orphan", schedulerName="nobody", containers=_req("500m")),
        _pod("huge", containers=_req("100")),
        _pod("gated", schedulingGates=[{"name": "wait"}], containers=_req("1")),
    ]
    events = [
        SchedEvent(T0 - 50, "default-scheduler", "i1", "FailedScheduling", "uid-huge", note="old message"),
        SchedEvent(T0 - 5, "default-scheduler", "i1", "FailedScheduling", "uid-huge", note="0/5 nodes: Insufficient cpu"),
        SchedEvent(T0 - 4, "default-scheduler", "i2", "FailedScheduling", "uid-x",
                   note='pods "x" is forbidden... Operation cannot be fulfilled on pods/binding "x"'),
        SchedEvent(T0 - 20, "default-scheduler", "i1", "Scheduled", "uid-busy"),
        SchedEvent(T0 - 10, "default-scheduler", "i2", "Scheduled", "uid-busy"),
        SchedEvent(T0 - 3, "default-scheduler", "i1", "Scheduled", "uid-y"),
        SchedEvent(T0 - 5000, "default-scheduler", "i9", "Scheduled", "uid-z"),  # history, not recent
    ]  # fmt: skip
    snap = Snapshot(T0, [_lease("h_1", renew_ago=2)], pods, nodes, events, [])
    d = diagnose(snap)
    assert d["schedulers"] == {"default-scheduler": ["Lease kube-system/kube-scheduler held and fresh"]}
    assert [u["pod"] for u in d["unserved"]] == ["default/orphan"]
    pending = {p["pod"]: p["message"] for p in d["pending"]}
    assert pending == {
        "default/gated": "scheduling gates: wait",
        "default/huge": "0/5 nodes: Insufficient cpu",
    }
    kinds = sorted(c["kind"] for c in d["conflicts"])
    assert kinds == ["binding-conflict", "scheduled-twice", "two-active-instances"]
    assert {n["node"]: n["problems"][0] for n in d["nodes"]} == {
        "n-cordoned": "unschedulable (cordoned)", "n-down": "NotReady (Ready=Unknown: NodeStatusUnknown)",
    }  # fmt: skip
    # n-full has 100m left, n-cordoned/n-down are out, cp is tainted: n-ok.
    (hint,) = d["hints"]
    assert hint["node"] == "n-ok" and hint["command"] == placement_command(pods[1], "n-ok")
    assert "/api/v1/namespaces/default/pods/orphan/binding" in hint["command"]
    assert not d["no_scheduler_up"] and not d["ok"]


def test_doctor_no_scheduler_up_and_stale_lease() -> None:
    d = diagnose(
        Snapshot(T0, [_lease("h_1", renew_ago=60)], [_pod("p", containers=_req("1"))], [_node("n")], [], [])
    )
    assert d["no_scheduler_up"] and d["leases"][0]["state"] == "expired"
    assert d["unserved"][0]["pod"] == "default/p" and d["hints"][0]["node"] == "n"


def test_doctor_running_scheduler_without_leader_election_serves() -> None:
    s = _inst("ks", names=("mine",), leader_elect=False)
    d = diagnose(Snapshot(T0, [], [_pod("p", schedulerName="mine")], [_node("n")], [], [s]))
    assert (
        "mine" in d["schedulers"]
        and d["unserved"] == []
        and d["pending"][0]["message"] == "not attempted yet"
    )
    # Contending for a Lease nobody holds: it is not serving yet.
    s2 = _inst("ks2", names=("mine",), lease=("ns", "l"))
    d = diagnose(Snapshot(T0, [], [_pod("p", schedulerName="mine")], [_node("n")], [], [s2]))
    assert d["unserved"] and d["no_scheduler_up"]
