"""The scheduler as a process against the local cluster as a process, driven and observed with the real kubectl.

Each test starts its own small cluster (about a second) so node capacity and the leader Lease start clean.
What is asserted is what a user of kube-scheduler would see: where pods land, the events and conditions written,
the Lease, the secure port, the exit status and stderr of a broken configuration.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import pytest
from clusterproc import (
    ClusterProcess,
    Kubectl,
    SchedulerProcess,
    find_kubectl,
    free_port,
    start_cluster,
    start_scheduler,
)
from cryptography import x509
from prometheus_client.parser import text_string_to_metric_families

KUBECTL = find_kubectl()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]

NS = "default"
IMAGE = "registry.k8s.io/pause:3.10"
# Nodes of 4 CPU / 8Gi, and pods asking for CPU and memory in the same proportion, so that
# NodeResourcesBalancedAllocation scores every node alike and the NodeResourcesFit strategy decides.
SMALL_NODES = ("--nodes", "3", "--node-cpu", "4", "--node-memory", "8Gi")

LEASE_DURATION = 4.0
RENEW_DEADLINE = 3.0
RETRY_PERIOD = 1.0
LEADER_FLAGS = (
    "--leader-elect=true",
    f"--leader-elect-lease-duration={LEASE_DURATION:g}s",
    f"--leader-elect-renew-deadline={RENEW_DEADLINE:g}s",
    f"--leader-elect-retry-period={RETRY_PERIOD:g}s",
    "-v",
    "2",  # logs the candidate identity, to match the Lease holder with a process
)
# client-go's acquire loop sleeps retryPeriod * [1, 2.2) between attempts (JitterFactor 1.2).
MAX_RETRY_SLEEP = RETRY_PERIOD * 2.2
LEADER_METRIC = 'leader_election_master_status{name="kube-scheduler"} 1.0'

T = TypeVar("T")
# Waits last up to this many times their nominal timeout (CI runs two test workers on two cores).
WAIT_SLACK = 4.0


# --- helpers ----------------------------------------------------------------------------------------------------


def wait_for(what: str, probe: Callable[[], T], timeout: float = 20.0, interval: float = 0.2) -> T:
    """Call ``probe`` until it returns something truthy; fail with ``what`` after ``timeout`` seconds, stretched by
    ``WAIT_SLACK`` (a passing wait returns as soon as it can: the slack only spares a loaded machine a false
    failure; the timed bounds this module asserts are asserted apart)."""
    timeout *= WAIT_SLACK
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)


def pod(
    name: str,
    *,
    cpu: str = "100m",
    memory: str = "64Mi",
    scheduler: str | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": IMAGE, "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
    }
    if scheduler is not None:
        spec["schedulerName"] = scheduler
    if priority_class is not None:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": NS}, "spec": spec}


@dataclass
class Env:
    cluster: ClusterProcess
    kubectl: Kubectl
    schedulers: list[SchedulerProcess] = field(default_factory=list)

    def scheduler(self, *flags: str) -> SchedulerProcess:
        s = start_scheduler(self.cluster.kubeconfig, *flags)
        self.schedulers.append(s)
        return s

    def create(self, *objs: dict[str, Any]) -> None:
        # A stream of JSON objects: a kind: List would make kubectl fetch /openapi/v2, which the local cluster
        # does not serve.
        self.kubectl("create", "-f", "-", input="\n".join(json.dumps(o) for o in objs))

    def get(self, *args: str) -> Any:
        return json.loads(self.kubectl("get", *args, "-o", "json").stdout)

    def pods(self) -> dict[str, dict[str, Any]]:
        return {p["metadata"]["name"]: p for p in self.get("pods", "-n", NS)["items"]}

    def node_of(self, name: str) -> str:
        return self.pods()[name]["spec"].get("nodeName") or ""

    def bound(self, *names: str) -> dict[str, str] | None:
        """{pod: node} once every named pod is bound, else None."""
        pods = self.pods()
        nodes = {n: (pods.get(n) or {}).get("spec", {}).get("nodeName") or "" for n in names}
        return nodes if all(nodes.values()) else None

    def events(self) -> list[dict[str, Any]]:
        """events.k8s.io/v1 Events in the namespace (the API the scheduler writes)."""
        return self.get("events.v1.events.k8s.io", "-n", NS)["items"]

    def events_about(self, name: str, reason: str | None = None) -> list[dict[str, Any]]:
        return [
            e
            for e in self.events()
            if e["regarding"].get("name") == name and (reason is None or e.get("reason") == reason)
        ]

    def lease(self) -> dict[str, Any]:
        return self.get("lease", "-n", "kube-system", "kube-scheduler")


@pytest.fixture
def make_env(tmp_path: Path) -> Iterator[Callable[..., Env]]:
    envs: list[Env] = []

    def make(*cluster_flags: str) -> Env:
        assert KUBECTL is not None
        data = tmp_path / f"cluster{len(envs)}"
        cluster = start_cluster(data, *cluster_flags)
        env = Env(cluster, Kubectl(KUBECTL, cluster.kubeconfig, tmp_path / f"kubectl-cache{len(envs)}"))
        envs.append(env)
        return env

    yield make
    for env in envs:
        for s in env.schedulers:
            s.stop()
        env.cluster.stop()


class PodWatch:
    """``kubectl get pods -w --output-watch-events -o json`` in the background: every state of every pod seen."""

    def __init__(self, kubectl: Kubectl) -> None:
        self.proc = kubectl.popen("get", "pods", "-n", NS, "-w", "--output-watch-events", "-o", "json")
        self.events: list[tuple[float, str, dict[str, Any]]] = []
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        decoder = json.JSONDecoder()
        buf = ""
        for line in self.proc.stdout:
            buf += line
            while buf.strip():
                try:
                    obj, end = decoder.raw_decode(buf.lstrip())
                except json.JSONDecodeError:
                    break  # the object is not complete yet
                buf = buf.lstrip()[end:]
                self.events.append((time.monotonic(), obj["type"], obj["object"]))

    def states(self, name: str) -> list[dict[str, Any]]:
        return [o for _, _, o in list(self.events) if o["metadata"]["name"] == name]

    def names(self) -> set[str]:
        return {o["metadata"]["name"] for _, _, o in list(self.events)}

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(5)


def condition(p: dict[str, Any], ctype: str) -> dict[str, Any] | None:
    return next((c for c in (p.get("status") or {}).get("conditions") or () if c["type"] == ctype), None)


def metric_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Prometheus text → {(sample name, labels): value}."""
    out: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def sample(
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str
) -> float | None:
    return samples.get((name, frozenset(labels.items())))


def leaders(scheds: list[SchedulerProcess]) -> list[SchedulerProcess]:
    """The processes whose /metrics say they hold the lease."""
    found = []
    for s in scheds:
        if s.proc.poll() is None:
            try:
                if LEADER_METRIC in s.metrics():
                    found.append(s)
            except OSError:
                pass
    return found


def identity_of(s: SchedulerProcess) -> str:
    line = wait_for(
        "the candidate identity in the log",
        lambda: next((ln for ln in s.output if " for the leader lease " in ln), ""),
        timeout=5,
    )
    return line.split("candidate ", 1)[1].split(" for the leader lease", 1)[0]


def start_schedulers(env: Env, count: int, *flags: str) -> list[SchedulerProcess]:
    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(lambda _: env.scheduler(*flags), range(count)))


# --- 1. profiles --------------------------------------------------------------------------------------------------

TWO_PROFILES = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: false
profiles:
- schedulerName: default-scheduler
- schedulerName: packer
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
"""


def test_two_profiles_place_their_pods_and_an_unknown_scheduler_name_is_left_alone(
    make_env: Callable[..., Env], tmp_path: Path
) -> None:
    env = make_env(*SMALL_NODES)
    config = tmp_path / "profiles.yaml"
    config.write_text(TWO_PROFILES)
    env.scheduler("--config", str(config))

    packed = [f"packed-{i}" for i in range(4)]
    env.create(
        *(pod(n, cpu="500m", memory="1Gi", scheduler="packer") for n in packed),
        pod("orphan", scheduler="no-such-scheduler"),
    )
    packed_nodes = wait_for("packer's pods to be bound", lambda: env.bound(*packed))
    # MostAllocated: after the first pod every other one goes where the most is already requested.
    assert len(set(packed_nodes.values())) == 1, packed_nodes
    packer_node = packed_nodes[packed[0]]

    spread = [f"spread-{i}" for i in range(3)]
    env.create(*(pod(n, cpu="500m", memory="1Gi") for n in spread))
    spread_nodes = wait_for("default-scheduler's pods to be bound", lambda: env.bound(*spread))
    # LeastAllocated keeps off the node the packer filled (2 of 4 CPU) while the others hold at most 1 CPU.
    assert packer_node not in spread_nodes.values(), (packer_node, spread_nodes)
    assert len(set(spread_nodes.values())) == 2

    expected = {
        **{n: ("packer", packed_nodes[n]) for n in packed},
        **{n: ("default-scheduler", spread_nodes[n]) for n in spread},
    }
    pods = env.pods()

    def scheduled_events() -> dict[str, dict[str, Any]] | None:
        by_pod = {e["regarding"]["name"]: e for e in env.events() if e["reason"] == "Scheduled"}
        return by_pod if set(expected) <= set(by_pod) else None

    by_pod = wait_for("a Scheduled event for every pod", scheduled_events, timeout=10)
    for name, (profile, node) in expected.items():
        e = by_pod[name]
        assert e["type"] == "Normal" and e["action"] == "Binding"
        assert e["reportingController"] == profile
        assert (
            e["reportingInstance"] == f"{profile}-{socket.gethostname()}"
        )  # client-go's "<controller>-<host>"
        assert e["note"] == f"Successfully assigned {NS}/{name} to {node}"
        assert e["regarding"]["uid"] == pods[name]["metadata"]["uid"]
    # The same events through core/v1, as `kubectl get events` shows them: source is the profile.
    core = {
        e["involvedObject"]["name"]: e
        for e in env.get("events", "-n", NS)["items"]
        if e["reason"] == "Scheduled"
    }
    assert {n: core[n]["source"]["component"] for n in expected} == {n: p for n, (p, _) in expected.items()}
    assert all(
        core[n]["message"] == f"Successfully assigned {NS}/{n} to {node}" for n, (_, node) in expected.items()
    )

    # No profile is named no-such-scheduler: the pod is nobody's to touch, not even with a condition or event.
    orphan = env.pods()["orphan"]
    assert not orphan["spec"].get("nodeName")
    assert orphan["status"]["phase"] == "Pending"
    assert condition(orphan, "PodScheduled") is None
    assert env.events_about("orphan") == []


# --- 2. unschedulable, then placed ---------------------------------------------------------------------------------


def test_unschedulable_pod_reports_why_and_is_placed_when_room_appears(make_env: Callable[..., Env]) -> None:
    env = make_env(*SMALL_NODES)
    env.scheduler("--leader-elect=false")
    hogs = [f"hog-{i}" for i in range(3)]
    env.create(*(pod(n, cpu="3", memory="1Gi") for n in hogs))
    hog_nodes = wait_for("the hogs to be bound", lambda: env.bound(*hogs))
    assert len(set(hog_nodes.values())) == 3  # one per node: each node has 1 CPU left

    env.create(pod("big", cpu="2", memory="1Gi"))
    # Every node is short of CPU (a Filter rejection preemption might resolve). The PostFilter plugins of the
    # 1.36 default profile answer in order: DynamicResources has no claims to free, and DefaultPreemption finds
    # nothing of lower priority than the pod on any of the three nodes.
    expected = (
        "0/3 nodes are available: 3 Insufficient cpu. no new claims to deallocate, "
        "preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
    )
    failed = wait_for("a FailedScheduling event", lambda: env.events_about("big", "FailedScheduling"))
    assert [(e["type"], e["action"], e["reportingController"]) for e in failed] == [
        ("Warning", "Scheduling", "default-scheduler")
    ]
    assert failed[0]["note"] == expected
    # The same message in the pod's PodScheduled condition, which `kubectl describe` and autoscalers read.
    cond = wait_for("PodScheduled=False on the pod", lambda: condition(env.pods()["big"], "PodScheduled"))
    assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", expected)

    # Room appears when an assigned pod goes: the AssignedPod Delete event moves the pod back to the queue.
    freed = hog_nodes["hog-1"]
    started = time.monotonic()
    env.kubectl("delete", "pod", "hog-1", "--wait=false")
    placed = wait_for("big to be bound", lambda: env.bound("big"), timeout=15, interval=0.1)
    took = time.monotonic() - started
    print(f"big placed {took:.2f}s after hog-1 was deleted")
    assert placed == {"big": freed}
    # Graceful deletion on the simulated kubelet, the delete event, then at most the 1 s initial backoff.
    assert took < 5.0, f"placed {took:.1f}s after the room appeared"
    big = env.pods()["big"]
    assert condition(big, "PodScheduled")["status"] == "True"  # type: ignore[index]
    scheduled = wait_for("a Scheduled event", lambda: env.events_about("big", "Scheduled"), timeout=10)
    assert [e["note"] for e in scheduled] == [f"Successfully assigned {NS}/big to {freed}"]


# --- 3. preemption --------------------------------------------------------------------------------------------------


def test_preemption_evicts_one_victim_nominates_and_binds(make_env: Callable[..., Env]) -> None:
    env = make_env(*SMALL_NODES)
    for name, value in (("low", 10), ("high", 1000)):
        env.kubectl("create", "priorityclass", name, f"--value={value}")
    env.scheduler("--leader-elect=false")
    lows = [f"low-{i}" for i in range(6)]
    env.create(*(pod(n, cpu="2", memory="1Gi", priority_class="low") for n in lows))
    low_nodes = wait_for("the low-priority pods to be bound", lambda: env.bound(*lows))
    assert sorted(Counter(low_nodes.values()).values()) == [2, 2, 2]  # every node full
    assert {p["spec"]["priority"] for n, p in env.pods().items()} == {10}

    watch = PodWatch(env.kubectl)
    try:
        wait_for("the pod watch to list the pods", lambda: watch.names() >= set(lows))
        env.create(pod("vip", cpu="2", memory="1Gi", priority_class="high"))
        node = wait_for("vip to be bound", lambda: env.bound("vip"), timeout=20)["vip"]
        vip_uid = env.pods()["vip"]["metadata"]["uid"]

        # Exactly one victim, from the node vip went to; the other five stay.
        remaining = env.pods()
        victims = [n for n in lows if n not in remaining]
        assert len(victims) == 1, victims
        victim = victims[0]
        assert low_nodes[victim] == node
        assert all(remaining[n]["spec"]["nodeName"] == low_nodes[n] for n in lows if n != victim)

        # vip carried status.nominatedNodeName before the binding (the API server clears it on binding).
        nominated = {s["status"].get("nominatedNodeName") for s in watch.states("vip")}
        assert node in nominated, nominated
        before_binding = [s for s in watch.states("vip") if not s["spec"].get("nodeName")]
        assert before_binding and before_binding[-1]["status"].get("nominatedNodeName") == node
        # The victim was marked with why it goes, then deleted.
        last = watch.states(victim)[-1]
        target = condition(last, "DisruptionTarget")
        assert target is not None and (target["status"], target["reason"]) == (
            "True",
            "PreemptionByScheduler",
        )
        assert target["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
        assert any(s["metadata"].get("deletionTimestamp") for s in watch.states(victim))
    finally:
        watch.stop()

    preempted = wait_for("a Preempted event", lambda: env.events_about(victim, "Preempted"), timeout=10)
    assert len(preempted) == 1
    e = preempted[0]
    assert (e["type"], e["action"], e["reportingController"]) == ("Normal", "Preempting", "default-scheduler")
    assert e["note"] == f"Preempted by pod {vip_uid} on node {node}"
    assert (e["related"]["name"], e["related"]["uid"]) == ("vip", vip_uid)
    # vip's first attempt failed; preemption succeeded, so the message has no "preemption:" part.
    failed = env.events_about("vip", "FailedScheduling")
    assert [f["note"] for f in failed] == ["0/3 nodes are available: 3 Insufficient cpu."]
    assert [f["note"] for f in env.events_about("vip", "Scheduled")] == [
        f"Successfully assigned {NS}/vip to {node}"
    ]


# --- 4. leader election --------------------------------------------------------------------------------------------


def test_leader_election_failover_binds_every_pod_exactly_once(make_env: Callable[..., Env]) -> None:
    env = make_env("--nodes", "3")
    scheds = start_schedulers(env, 3, *LEADER_FLAGS)
    leader = wait_for("a leader", lambda: leaders(scheds), timeout=15)
    assert len(leader) == 1
    old = leader[0]
    time.sleep(2 * RETRY_PERIOD)  # long enough for a second leader to show, if the election were broken
    assert leaders(scheds) == [old]
    lease = env.lease()
    assert lease["spec"]["holderIdentity"] == identity_of(old)
    assert lease["spec"]["leaseDurationSeconds"] == int(LEASE_DURATION)
    followers = [s for s in scheds if s is not old]

    watch = PodWatch(env.kubectl)
    try:
        # A pod nobody schedules: once the watch shows it, the watch is live and sees every later change.
        env.create(pod("sentinel", scheduler="nobody"))
        wait_for("the pod watch", lambda: "sentinel" in watch.names())
        names = [f"p-{i:02d}" for i in range(60)]
        batches = [names[i : i + 5] for i in range(0, len(names), 5)]
        killed_at = 0.0
        for i, batch in enumerate(batches):
            env.create(*(pod(n) for n in batch))
            if i == 4:
                wait_for("the leader to bind some pods", lambda: env.bound(*names[:10]), timeout=10)
                killed_at = time.monotonic()
                killed_wall = time.time()
                old.kill()
            time.sleep(0.25)

        new = wait_for("a new leader", lambda: leaders(followers), timeout=3 * LEASE_DURATION, interval=0.05)
        takeover = time.monotonic() - killed_at
        assert len(new) == 1
        # The new holder waits out the lease from when it *saw* the last renewal, and polls every
        # retryPeriod * [1, 2.2): seeing the renewal and noticing the expiry each cost up to one poll.
        bound_s = LEASE_DURATION + 2 * MAX_RETRY_SLEEP + 0.5
        print(f"takeover after SIGKILL of the leader: {takeover:.2f}s (bound {bound_s:.1f}s)")
        assert takeover <= bound_s
        lease = env.lease()
        assert lease["spec"]["holderIdentity"] == identity_of(new[0])
        assert lease["spec"]["leaseTransitions"] >= 1

        nodes = wait_for("every pod to be bound", lambda: env.bound(*names), timeout=30)
        time.sleep(0.5)  # let the last watch events and Scheduled events arrive
    finally:
        watch.stop()

    # Bound exactly once: each pod's nodeName went from empty to one node and never changed.
    for n in names:
        seen = [s["spec"].get("nodeName") or "" for s in watch.states(n)]
        assert seen, n
        assert {x for x in seen if x} == {nodes[n]}, (n, seen)
        first_bound = next(i for i, x in enumerate(seen) if x)
        assert all(seen[first_bound:]), (n, seen)  # never unbound again

    # One Scheduled event per pod: a binder records it only after the API server answered 201, so two
    # events for one pod would mean two bindings succeeded.
    scheduled = [e for e in env.events() if e["reason"] == "Scheduled"]
    per_pod = Counter(e["regarding"]["name"] for e in scheduled)
    assert max(per_pod.values()) == 1, per_pod.most_common(3)
    assert all((e.get("series") or {}).get("count", 1) == 1 for e in scheduled)
    assert "sentinel" not in per_pod
    # Who bound what, from each process's log ("Scheduled <pod>: Successfully assigned ..." once bound):
    # the old leader before it died, the new one after, the third process nothing, and no pod both.
    claims = {
        id(s): {ln.split("Scheduled ", 1)[1].split(":", 1)[0] for ln in s.output if "] Scheduled " in ln}
        for s in scheds
    }
    by_old, by_new = claims[id(old)], claims[id(new[0])]
    third = next(s for s in followers if s is not new[0])
    assert claims[id(third)] == set()
    assert not by_old & by_new, by_old & by_new
    assert len(by_old) >= 10 and by_new
    assert set(per_pod) <= by_old | by_new
    # A Scheduled event or log line can only be missing if the killed leader bound the pod and died before
    # writing it.
    missing = [n for n in names if n not in per_pod or n not in by_old | by_new]
    pods = env.pods()
    for n in missing:
        bound_at = (
            datetime.strptime(
                condition(pods[n], "PodScheduled")["lastTransitionTime"],  # type: ignore[index]
                "%Y-%m-%dT%H:%M:%SZ",
            )
            .replace(tzinfo=UTC)
            .timestamp()
        )
        assert bound_at <= killed_wall + 1, (n, bound_at, killed_wall)
    assert len(missing) <= 3, missing
    print(
        f"pods bound by the old leader: {len(by_old)}, by the new one: {len(by_new)}; "
        f"{len(missing)} without event or log line"
    )


def test_leader_that_loses_the_lease_exits_and_schedules_nothing(make_env: Callable[..., Env]) -> None:
    env = make_env("--nodes", "2")
    scheds = start_schedulers(env, 3, *LEADER_FLAGS)
    first = wait_for("a leader", lambda: leaders(scheds), timeout=15)[0]

    # A clean stop hands the lease back (empty holder), so a follower takes over without waiting it out.
    stopped_at = time.monotonic()
    assert first.stop() == 0
    second = wait_for("a second leader", lambda: leaders(scheds), timeout=10, interval=0.05)[0]
    handover = time.monotonic() - stopped_at
    print(f"handover after SIGTERM of the leader: {handover:.2f}s")
    assert handover < LEASE_DURATION
    env.create(pod("before"))
    wait_for("the new leader to schedule", lambda: env.bound("before"))
    third = next(s for s in scheds if s is not first and s is not second)

    # Someone else takes the lease for an hour: the leader must notice at its next renewal and exit 1.
    lease = env.lease()
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    lease["spec"].update(
        holderIdentity="thief",
        leaseDurationSeconds=3600,
        acquireTime=now,
        renewTime=now,
        leaseTransitions=lease["spec"].get("leaseTransitions", 0) + 1,
    )
    del lease["metadata"]["resourceVersion"]  # unconditional: the leader renews every second
    stolen_at = time.monotonic()
    env.kubectl("replace", "-f", "-", input=json.dumps(lease))
    rc = second.proc.wait(RETRY_PERIOD + RENEW_DEADLINE + 5)
    noticed = time.monotonic() - stolen_at
    print(f"leader exited {noticed:.2f}s after the lease was taken")
    assert rc == 1
    assert noticed < RETRY_PERIOD + 2.0
    log = second.log()
    assert "leaderelection lost" in log
    assert "Traceback" not in log

    env.create(*(pod(f"after-{i}") for i in range(3)))
    time.sleep(3 * RETRY_PERIOD)
    pods = env.pods()
    assert all(not pods[f"after-{i}"]["spec"].get("nodeName") for i in range(3))
    assert all(not env.events_about(f"after-{i}") for i in range(3))
    assert third.proc.poll() is None and leaders([third]) == []
    assert env.lease()["spec"]["holderIdentity"] == "thief"


def test_two_active_schedulers_never_bind_a_pod_twice(make_env: Callable[..., Env]) -> None:
    """Without leader election two schedulers race for every pod: the API server's 409 on a second binding
    ("already assigned") must leave each pod bound once, and the loser must drop the pod quietly."""
    env = make_env("--nodes", "3")
    scheds = start_schedulers(env, 2, "--leader-elect=false", "-v", "2")
    watch = PodWatch(env.kubectl)
    try:
        env.create(pod("sentinel", scheduler="nobody"))
        wait_for("the pod watch", lambda: "sentinel" in watch.names())
        names = [f"r-{i:02d}" for i in range(40)]
        env.create(*(pod(n) for n in names))
        nodes = wait_for("every pod to be bound", lambda: env.bound(*names), timeout=20)
        time.sleep(0.5)
    finally:
        watch.stop()
    for n in names:
        assert {s["spec"].get("nodeName") for s in watch.states(n)} - {None, ""} == {nodes[n]}, n
    scheduled = wait_for(
        "one Scheduled event per pod",
        lambda: (lambda ev: ev if len(ev) >= len(names) else None)(
            [e for e in env.events() if e["reason"] == "Scheduled"]
        ),
        timeout=10,
    )
    per_pod = Counter(e["regarding"]["name"] for e in scheduled)
    assert per_pod == Counter(names)
    assert all((e.get("series") or {}).get("count", 1) == 1 for e in scheduled)
    # The loser of a race neither retries nor complains.
    assert [e for e in env.events() if e["reason"] == "FailedScheduling"] == []
    refused = sum(ln.count("was bound by someone else") for s in scheds for ln in s.output)
    assert 0 < refused <= len(names)  # the race did happen, and only a loser of a race logs it
    claims = [
        {ln.split("Scheduled ", 1)[1].split(":", 1)[0] for ln in s.output if "] Scheduled " in ln}
        for s in scheds
    ]
    assert not claims[0] & claims[1] and claims[0] | claims[1] == set(names)
    print(f"bindings refused with 409 and dropped: {refused}; pods bound by each: {[len(c) for c in claims]}")


# --- 5. the secure port -------------------------------------------------------------------------------------------


def test_secure_port_serves_health_and_metrics(make_env: Callable[..., Env]) -> None:
    env = make_env(*SMALL_NODES)
    s = env.scheduler("--leader-elect=false")
    assert s.get("/healthz") == (200, "ok")
    assert s.get("/livez") == (200, "ok")
    wait_for("/readyz", lambda: s.get("/readyz") == (200, "ok"), timeout=10)
    status, body = s.get("/readyz?verbose")
    assert status == 200 and "[+]sched-handler-sync ok" in body and "[+]shutdown ok" in body

    # TLS only, with a generated certificate for localhost and 127.0.0.1, signed by a CA made with it
    # (as client-go's GenerateSelfSignedCertKey: "<host>@<time>" signed by "<host>-ca@<time>").
    pem = ssl.get_server_certificate(("127.0.0.1", s.port))
    cert = x509.load_pem_x509_certificate(pem.encode())
    subject_cn = cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
    issuer_cn = cert.issuer.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value
    host, _, stamp = str(subject_cn).partition("@")
    assert issuer_cn == f"{host}-ca@{stamp}", (subject_cn, issuer_cn)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in san.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in [str(ip) for ip in san.get_values_for_type(x509.IPAddress)]
    plain = http.client.HTTPConnection("127.0.0.1", s.port, timeout=3)
    with pytest.raises((http.client.HTTPException, OSError)):
        plain.request("GET", "/healthz")
        response = plain.getresponse()
        assert response.status >= 400  # a TLS server may answer clear text with an error page; never "ok"
        raise http.client.HTTPException(f"clear text answered {response.status}")

    names = [f"m-{i}" for i in range(5)]
    env.create(*(pod(n) for n in names))
    wait_for("the pods to be bound", lambda: env.bound(*names))
    env.create(pod("too-big", cpu="16"))
    wait_for("too-big to fail", lambda: env.events_about("too-big", "FailedScheduling"))

    def settled() -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        m = metric_samples(s.metrics())
        pending = {
            q: sample(m, "scheduler_pending_pods", queue=q)
            for q in ("active", "backoff", "unschedulable", "gated")
        }
        ok = sample(
            m, "scheduler_schedule_attempts_total", profile="default-scheduler", result="scheduled"
        ) == 5 and pending == {"active": 0, "backoff": 0, "unschedulable": 1, "gated": 0}
        return m if ok else None

    m = wait_for("the metrics to show 5 scheduled and 1 unschedulable pod", settled, timeout=10)
    assert (
        sample(m, "scheduler_schedule_attempts_total", profile="default-scheduler", result="unschedulable")
        == 1
    )
    assert sample(m, "scheduler_schedule_attempts_total", profile="default-scheduler", result="error") in (
        None,
        0,
    )
    assert (
        sample(
            m,
            "scheduler_scheduling_attempt_duration_seconds_count",
            profile="default-scheduler",
            result="scheduled",
        )
        == 5
    )
    assert (
        sample(
            m,
            "scheduler_scheduling_attempt_duration_seconds_count",
            profile="default-scheduler",
            result="unschedulable",
        )
        == 1
    )
    assert sample(m, "scheduler_pod_scheduling_sli_duration_seconds_count", attempts="1") == 5
    assert sample(m, "scheduler_pod_scheduling_sli_duration_seconds_bucket", attempts="1", le="+Inf") == 5

    def extension_point(point: str, status: str) -> float | None:
        return sample(
            m,
            "scheduler_framework_extension_point_duration_seconds_count",
            extension_point=point,
            profile="default-scheduler",
            status=status,
        )

    # Six cycles passed PreFilter and Filter (Filter counts once per cycle over all nodes); five pods with
    # several feasible nodes were scored and went through Reserve, Permit, PreBind, Bind and PostBind; the last
    # one went to PostFilter, which could not help.
    assert extension_point("PreFilter", "Success") == 6
    assert extension_point("Filter", "Success") == 6
    assert extension_point("PreScore", "Success") == extension_point("Score", "Success") == 5
    for point in ("Reserve", "Permit", "PreBind", "Bind", "PostBind"):
        assert extension_point(point, "Success") == 5, point
    assert extension_point("PostFilter", "Unschedulable") == 1
    _, raw = s.get("/metrics")
    assert "# TYPE scheduler_pending_pods gauge" in raw
    assert "# TYPE scheduler_scheduling_attempt_duration_seconds histogram" in raw

    # Delegated authentication and authorization, as kube-scheduler: health for anyone; /metrics and /configz
    # for callers the API server allows (the admin's client certificate here), 403 in upstream's words otherwise.
    assert s.get("/healthz", anonymous=True) == (200, "ok")
    for path in ("/metrics", "/configz"):
        status, body = s.get(path, anonymous=True)
        assert status == 403, (path, status, body)
        assert json.loads(body)["message"] == f'forbidden: User "system:anonymous" cannot get path "{path}"'
    assert s.get("/configz")[0] == 200
    # kubectl reads the secure port as the admin (its client certificate), and as a service account without RBAC
    # (its token, checked with a TokenReview) it gets upstream's 403.
    port_url = f"https://127.0.0.1:{s.port}"
    raw = env.kubectl(
        "--server", port_url, "--insecure-skip-tls-verify=true", "get", "--raw", "/metrics"
    ).stdout
    assert "# TYPE scheduler_pending_pods gauge" in raw
    env.kubectl("create", "serviceaccount", "nobody", "-n", "default")
    token = env.kubectl("create", "token", "nobody", "-n", "default").stdout.strip()
    assert KUBECTL is not None
    # Only the token: a kubeconfig-less kubectl (the admin kubeconfig's client certificate would win).
    only_token = ["--kubeconfig", os.devnull, "--server", port_url, "--insecure-skip-tls-verify=true"]
    denied = subprocess.run(
        [KUBECTL, *only_token, "--token", token, "get", "--raw", "/metrics"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert denied.returncode != 0
    assert 'User "system:serviceaccount:default:nobody" cannot get path "/metrics"' in denied.stderr.replace(
        '\\"', '"'
    ), denied.stderr


# --- 6. invalid configuration -------------------------------------------------------------------------------------

_CONFIG_HEAD = "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
INVALID_CONFIGS = {
    "unknown-plugin": (
        _CONFIG_HEAD + "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n"
        "      enabled:\n      - name: NoSuchPlugin\n",
        ['profiles[0].plugins.score.enabled[0].name: Invalid value: "NoSuchPlugin": unknown plugin'],
    ),
    "bad-weight": (
        _CONFIG_HEAD + "profiles:\n- schedulerName: default-scheduler\n  plugins:\n    score:\n"
        "      enabled:\n      - name: ImageLocality\n        weight: 101\n",
        ["profiles[0].plugins.score.enabled[0].weight: Invalid value: 101"],
    ),
    "unknown-api-version": (
        "apiVersion: kubescheduler.config.k8s.io/v9\nkind: KubeSchedulerConfiguration\n",
        ['apiVersion: Unsupported value: "kubescheduler.config.k8s.io/v9"'],
    ),
    "malformed-yaml": (
        _CONFIG_HEAD + "profiles:\n- schedulerName: [unclosed\n",
        ["line 5"],
    ),
    "bad-plugin-args": (
        _CONFIG_HEAD + "profiles:\n- schedulerName: default-scheduler\n  pluginConfig:\n"
        "  - name: DefaultPreemption\n    args:\n      minCandidateNodesPercentage: 200\n",
        ["profiles[0].pluginConfig[0].args.minCandidateNodesPercentage: Invalid value: 200"],
    ),
}

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters:
- name: tripwire
  cluster: {{server: "https://127.0.0.1:{port}", insecure-skip-tls-verify: true}}
users:
- name: u
  user: {{token: nothing}}
contexts:
- name: c
  context: {{cluster: tripwire, user: u}}
current-context: c
"""


class Tripwire:
    """A listening socket standing in for the API server: it counts who connected to it, answering nothing."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.setblocking(False)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0

    def poll(self) -> int:
        while True:
            try:
                conn, _ = self.sock.accept()
            except BlockingIOError:
                return self.connections
            conn.close()
            self.connections += 1

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def tripwire(tmp_path: Path) -> Iterator[tuple[Tripwire, Path]]:
    t = Tripwire()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG.format(port=t.port))
    yield t, kubeconfig
    t.close()


def run_scheduler(*args: str, timeout: float = 20) -> tuple[int, str, str, float]:
    started = time.monotonic()
    r = subprocess.run(
        [sys.executable, "-m", "kubesched.cli", "scheduler", "--secure-port", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return r.returncode, r.stdout, r.stderr, time.monotonic() - started


@pytest.mark.parametrize("case", sorted(INVALID_CONFIGS))
def test_invalid_configuration_fails_fast_without_contacting_the_cluster(
    case: str, tmp_path: Path, tripwire: tuple[Tripwire, Path]
) -> None:
    wire, kubeconfig = tripwire
    text, fragments = INVALID_CONFIGS[case]
    config = tmp_path / f"{case}.yaml"
    config.write_text(text)
    rc, out, err, took = run_scheduler("--config", str(config), "--kubeconfig", str(kubeconfig))
    assert rc != 0
    assert took < 10, f"took {took:.1f}s to refuse the configuration"
    assert err.startswith("kubesched scheduler: invalid configuration:"), err
    assert str(config) in err or config.name in err
    for fragment in fragments:
        assert fragment in err, err
    assert "Traceback" not in err + out
    assert wire.poll() == 0


def test_invalid_leader_election_flags_fail_without_contacting_the_cluster(
    tripwire: tuple[Tripwire, Path],
) -> None:
    wire, kubeconfig = tripwire
    rc, out, err, _ = run_scheduler(
        "--kubeconfig",
        str(kubeconfig),
        "--leader-elect=true",
        "--leader-elect-lease-duration=2s",
        "--leader-elect-renew-deadline=3s",
    )
    assert rc != 0
    assert "leaseDuration must be greater than renewDeadline" in err
    assert "Traceback" not in err + out
    assert wire.poll() == 0


def test_tripwire_sees_a_scheduler_with_a_valid_configuration(tripwire: tuple[Tripwire, Path]) -> None:
    """The control for the tests above: with a valid configuration the same kubeconfig is used at once."""
    wire, kubeconfig = tripwire
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "kubesched.cli",
            "scheduler",
            "--kubeconfig",
            str(kubeconfig),
            "--secure-port",
            str(port),
            "--bind-address",
            "127.0.0.1",
            "--leader-elect=false",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for("a connection to the API server address", wire.poll, timeout=15, interval=0.05)
    finally:
        proc.terminate()
        proc.wait(10)
