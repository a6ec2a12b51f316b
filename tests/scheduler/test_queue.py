"""SchedulingQueue: ordering, backoff, unschedulable pods and events, gating, in-flight events, nominator."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.scheduler.framework.interface import ClusterEvent, Code, Status
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.podinfo import PodInfo, QueuedPodInfo
from kubesched.scheduler.queue import (
    ACTIVE,
    BACKOFF,
    GATED,
    UNSCHEDULABLE,
    WILDCARD_EVENT,
    SchedulingQueue,
    event_matches,
)
from kubesched.scheduler.resources import ResourceIndex

RES = ResourceIndex()
NODE_ADD = ClusterEvent("Node", "Add")
NODE_LABEL = ClusterEvent("Node", "UpdateNodeLabel")
PLUGIN_EVENTS = {
    "NodeResourcesFit": [ClusterEvent("Node", "Add"), ClusterEvent("Pod", "Delete")],
    "NodeAffinity": [ClusterEvent("Node", "Add"), ClusterEvent("Node", "UpdateNodeLabel")],
    "InterPodAffinity": [ClusterEvent("Pod", "Add"), ClusterEvent("Pod", "UpdatePodLabel")],
    "PodTopologySpread": [ClusterEvent("Pod", "Add"), ClusterEvent("Node", "Add")],
    "SchedulingGates": [ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")],
    "Quiet": [],
}


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_pod(
    name: str,
    *,
    priority: int = 0,
    labels: dict[str, str] | None = None,
    gates: list[str] | None = None,
    nominated: str = "",
    affinity: dict[str, Any] | None = None,
    namespace: str = "default",
    rv: str = "1",
) -> PodInfo:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "pause"}], "priority": priority}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if affinity:
        spec["affinity"] = affinity
    pod = {
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "labels": labels or {},
            "resourceVersion": rv,
        },
        "spec": spec,
        "status": {"nominatedNodeName": nominated} if nominated else {},
    }
    return PodInfo.from_pod(pod, RES)


def priority_sort(qpi: QueuedPodInfo) -> tuple[int, float]:
    return (-qpi.pod_info.priority, qpi.timestamp)


def gates_pre_enqueue(pi: PodInfo) -> Status:
    if pi.scheduling_gates:
        return Status(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["waiting for scheduling gates"], "SchedulingGates"
        )
    return Status.success()


def new_queue(clock: FakeClock, **kw: Any) -> SchedulingQueue:
    kw.setdefault("plugin_events", PLUGIN_EVENTS)
    kw.setdefault("pre_enqueue", gates_pre_enqueue)
    return SchedulingQueue(priority_sort, clock=clock, **kw)


async def pop_now(q: SchedulingQueue) -> QueuedPodInfo:
    qpi = await asyncio.wait_for(q.pop(), 1)
    assert qpi is not None
    return qpi


async def fail(q: SchedulingQueue, *plugins: str) -> tuple[QueuedPodInfo, str]:
    """Pop the head and hand it back rejected by ``plugins``."""
    qpi = await pop_now(q)
    qpi.unschedulable_plugins = set(plugins)
    return qpi, q.add_unschedulable_if_not_present(qpi, q.scheduling_cycle)


# -- ordering -------------------------------------------------------------------------------------------------


async def test_pops_by_priority_then_enqueue_time() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    for name, prio in (("low", 0), ("high-1", 10), ("mid", 5), ("high-2", 10)):
        q.add(make_pod(name, priority=prio))
        clock.advance(1)
    assert q.pending_counts() == {ACTIVE: 4, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
    order = [(await pop_now(q)).pod_info.name for _ in range(4)]
    assert order == ["high-1", "high-2", "mid", "low"]
    assert q.scheduling_cycle == 4


async def test_pop_waits_until_a_pod_arrives_and_close_wakes_with_none() -> None:
    q = new_queue(FakeClock())
    waiter = asyncio.ensure_future(q.pop())
    await asyncio.sleep(0)
    assert not waiter.done()
    q.add(make_pod("a"))
    qpi = await asyncio.wait_for(waiter, 1)
    assert qpi is not None and qpi.pod_info.name == "a" and qpi.attempts == 1

    waiter = asyncio.ensure_future(q.pop())
    await asyncio.sleep(0)
    q.close()
    assert await asyncio.wait_for(waiter, 1) is None


async def test_update_changes_position_and_delete_removes() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add(make_pod("a", priority=1))
    q.add(make_pod("b", priority=2))
    q.update(make_pod("a", priority=1), make_pod("a", priority=3, rv="2"))
    assert (await pop_now(q)).pod_info.name == "a"
    q.add(make_pod("c"))
    q.delete(make_pod("b"))
    assert (await pop_now(q)).pod_info.name == "c"
    assert len(q) == 0


# -- backoff --------------------------------------------------------------------------------------------------


def test_backoff_durations_double_up_to_the_maximum() -> None:
    q = new_queue(FakeClock())
    assert [q.backoff_duration(n) for n in range(1, 8)] == [1, 2, 4, 8, 10, 10, 10]
    assert q.backoff_duration(0) == 0
    custom = new_queue(FakeClock(), initial_backoff=2, max_backoff=5)
    assert [custom.backoff_duration(n) for n in range(1, 5)] == [2, 4, 5, 5]


async def test_failed_pods_back_off_1_2_4_8_10_10_seconds() -> None:
    """Every failure during which a rejecting plugin's event happened sends the pod to backoffQ for one more
    doubling; the flush releases it once its (1-second aligned) backoff window is over."""
    clock = FakeClock(1000.0)
    q = new_queue(clock)
    q.add(make_pod("p"))
    waited = []
    for _ in range(6):
        qpi = await pop_now(q)
        q.move_all_to_active_or_backoff(NODE_ADD)  # happens while the pod is in flight
        qpi.unschedulable_plugins = {"NodeResourcesFit"}
        assert q.add_unschedulable_if_not_present(qpi) == BACKOFF
        start = clock.now
        while q.where("uid-p") == BACKOFF:
            clock.advance(0.25)
            q.flush_backoff_completed()
        assert q.where("uid-p") == ACTIVE
        # Released at the first flush after the window holding timestamp + backoff has passed.
        waited.append(clock.now - start - 1)
    assert waited == [1, 2, 4, 8, 10, 10]


async def test_pop_takes_from_backoff_when_active_is_empty() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    qpi = await pop_now(q)
    q.move_all_to_active_or_backoff(NODE_ADD)
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == BACKOFF
    again = await pop_now(q)  # SchedulerPopFromBackoffQ: no need to wait for the backoff
    assert again.pod_info.name == "p" and again.attempts == 2

    strict = new_queue(clock, pop_from_backoff=False)
    strict.add(make_pod("s"))
    qpi = await pop_now(strict)
    strict.move_all_to_active_or_backoff(NODE_ADD)
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert strict.add_unschedulable_if_not_present(qpi) == BACKOFF
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(strict.pop(), 0.05)


async def test_errors_go_to_error_backoff_which_pop_does_not_take_early() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    qpi = await pop_now(q)
    assert q.add_unschedulable_if_not_present(qpi) == BACKOFF  # no rejecting plugin: an error
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(q.pop(), 0.05)
    clock.advance(2)
    assert q.flush_backoff_completed() == 1
    assert (await pop_now(q)).attempts == 2


# -- unschedulable pods and events ----------------------------------------------------------------------------


async def test_unschedulable_pod_moves_only_on_an_event_its_rejector_registered() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    _, queue = await fail(q, "NodeAffinity")
    assert queue == UNSCHEDULABLE
    assert q.pending_counts()[UNSCHEDULABLE] == 1

    q.move_all_to_active_or_backoff(ClusterEvent("Pod", "Delete"))  # NodeAffinity does not care
    q.move_all_to_active_or_backoff(ClusterEvent("Node", "UpdateNodeTaint"))
    assert q.where("uid-p") == UNSCHEDULABLE

    q.move_all_to_active_or_backoff(NODE_LABEL)
    assert q.where("uid-p") == BACKOFF  # still within its 1 s backoff
    clock.advance(3)
    q.flush_backoff_completed()
    assert q.where("uid-p") == ACTIVE


async def test_event_after_backoff_expired_goes_straight_to_active_and_pre_check_filters() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add(make_pod("a"))
    q.add(make_pod("b"))
    await fail(q, "NodeResourcesFit")
    await fail(q, "NodeResourcesFit")
    clock.advance(5)
    q.move_all_to_active_or_backoff(NODE_ADD, pre_check=lambda pi: pi.name == "a")
    assert q.where("uid-a") == ACTIVE
    assert q.where("uid-b") == UNSCHEDULABLE


async def test_plugin_without_registration_wants_everything_and_empty_registration_nothing() -> None:
    q = new_queue(FakeClock())
    q.add(make_pod("unknown"))
    q.add(make_pod("quiet"))
    await fail(q, "SomeOutOfTreePlugin")
    await fail(q, "Quiet")
    q.move_all_to_active_or_backoff(ClusterEvent("StorageClass", "Add"))
    assert q.where("uid-unknown") == BACKOFF
    assert q.where("uid-quiet") == UNSCHEDULABLE
    q.move_all_to_active_or_backoff(WILDCARD_EVENT)
    assert q.where("uid-quiet") == BACKOFF


async def test_unschedulable_pods_are_flushed_after_five_minutes() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    q.add(make_pod("p"))
    await fail(q, "Quiet")
    clock.advance(299)
    q.flush_unschedulable_leftover()
    assert q.where("uid-p") == UNSCHEDULABLE
    clock.advance(2)
    q.flush_unschedulable_leftover()
    assert q.where("uid-p") == ACTIVE  # backoff long over


async def test_pod_update_requeues_an_unschedulable_pod_but_status_only_changes_do_not() -> None:
    clock = FakeClock()
    q = new_queue(clock)
    old = make_pod("p")
    q.add(old)
    await fail(q, "Quiet")
    status_only = make_pod("p", rv="2")
    status_only.pod["status"] = {"conditions": [{"type": "PodScheduled", "status": "False"}]}
    q.update(old, status_only)
    assert q.where("uid-p") == UNSCHEDULABLE
    relabelled = make_pod("p", labels={"x": "y"}, rv="3")
    q.update(status_only, relabelled)
    assert q.where("uid-p") == BACKOFF
    assert q.get("uid-p") is not None and q.get("uid-p").pod_info.labels == {"x": "y"}  # type: ignore[union-attr]


# -- events while the pod was being scheduled ----------------------------------------------------------------


async def test_matching_event_during_the_attempt_sends_the_pod_to_backoff() -> None:
    q = new_queue(FakeClock())
    q.add(make_pod("a"))
    q.add(make_pod("b"))
    q.add(make_pod("c"))

    qpi = await pop_now(q)
    cycle = q.scheduling_cycle
    q.move_all_to_active_or_backoff(NODE_ADD)
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi, cycle) == BACKOFF

    qpi = await pop_now(q)
    q.move_all_to_active_or_backoff(NODE_LABEL)  # NodeResourcesFit did not register it
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == UNSCHEDULABLE

    # An event from before the attempt began does not count.
    q.move_all_to_active_or_backoff(NODE_ADD)
    qpi = await pop_now(q)
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == UNSCHEDULABLE


async def test_in_flight_pod_deleted_or_bound_is_forgotten() -> None:
    q = new_queue(FakeClock())
    q.add(make_pod("gone"))
    q.add(make_pod("bound"))
    qpi = await pop_now(q)
    q.delete(qpi.pod_info)
    qpi.unschedulable_plugins = {"NodeResourcesFit"}
    assert q.add_unschedulable_if_not_present(qpi) == ""
    assert q.where("uid-gone") is None

    qpi = await pop_now(q)
    q.done(qpi.pod_info.uid)
    assert q.where("uid-bound") is None and len(q) == 0


async def test_activate_moves_pods_to_active_and_marks_in_flight_ones() -> None:
    q = new_queue(FakeClock())
    q.add(make_pod("waiting"))
    q.add(make_pod("flying"))
    await fail(q, "Quiet")
    flying = await pop_now(q)
    q.activate(["uid-waiting", "uid-flying", "uid-unknown"])
    assert q.where("uid-waiting") == ACTIVE
    flying.unschedulable_plugins = {"Quiet"}
    assert q.add_unschedulable_if_not_present(flying) in (ACTIVE, BACKOFF)


# -- gated pods -----------------------------------------------------------------------------------------------


async def test_gated_pods_wait_aside_until_their_gates_are_removed() -> None:
    q = new_queue(FakeClock())
    gated = make_pod("g", gates=["example.com/wait"])
    q.add(gated)
    assert q.pending_counts() == {ACTIVE: 0, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 1}
    assert q.where("uid-g") == GATED

    q.move_all_to_active_or_backoff(NODE_ADD)  # not an event the gate cares about
    assert q.where("uid-g") == GATED

    still = make_pod("g", gates=["example.com/wait"], labels={"a": "b"}, rv="2")
    q.update(gated, still)
    assert q.where("uid-g") == GATED

    open_ = make_pod("g", labels={"a": "b"}, rv="3")
    q.update(still, open_)
    assert q.pending_counts() == {ACTIVE: 1, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
    qpi = await pop_now(q)
    assert qpi.pod_info.scheduling_gates == () and not qpi.gated


# -- assigned pods --------------------------------------------------------------------------------------------


async def test_assigned_pod_moves_pods_waiting_for_affinity_or_spread() -> None:
    from kubesched.scheduler.plugins.inter_pod_affinity import InterPodAffinity, InterPodAffinityArgs
    from kubesched.scheduler.plugins.pod_topology_spread import PodTopologySpread
    from kubesched.scheduler.plugins.pod_topology_spread_args import PodTopologySpreadArgs

    # The plugins' queueing hints decide which waiting pods a bound pod may help.
    hints = (InterPodAffinity(InterPodAffinityArgs(), None), PodTopologySpread(PodTopologySpreadArgs(), None))
    q = new_queue(FakeClock(), assigned_pod_hints=hints)
    affinity = {
        "podAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}
            ]
        }
    }
    q.add(make_pod("wants-db", affinity=affinity))
    q.add(make_pod("spread"))
    q.add(make_pod("spread-elsewhere", namespace="other"))
    q.add(make_pod("fit"))
    await fail(q, "InterPodAffinity")
    await fail(q, "PodTopologySpread")
    await fail(q, "PodTopologySpread")
    await fail(q, "NodeResourcesFit")

    q.assigned_pod_added(make_pod("web", labels={"app": "web"}))
    assert q.where("uid-wants-db") == UNSCHEDULABLE
    assert q.where("uid-spread") == BACKOFF  # same namespace
    assert q.where("uid-spread-elsewhere") == UNSCHEDULABLE

    q.assigned_pod_added(make_pod("db", labels={"app": "db"}))
    assert q.where("uid-wants-db") == BACKOFF
    assert q.where("uid-fit") == UNSCHEDULABLE


def test_event_matching_rules() -> None:
    assert event_matches(ClusterEvent("Pod", "Add"), ClusterEvent("AssignedPod", "Add"))
    assert event_matches(ClusterEvent("Node", "Update"), ClusterEvent("Node", "UpdateNodeTaint"))
    assert event_matches(ClusterEvent("Node", "UpdateNodeLabel"), ClusterEvent("Node", "Update"))
    assert event_matches(ClusterEvent("*", "Add"), ClusterEvent("Node", "Add"))
    assert event_matches(ClusterEvent("Node", "All"), ClusterEvent("Node", "Delete"))
    assert event_matches(ClusterEvent("Node", "Add"), WILDCARD_EVENT)
    assert not event_matches(ClusterEvent("Node", "UpdateNodeLabel"), ClusterEvent("Node", "UpdateNodeTaint"))
    assert not event_matches(ClusterEvent("Node", "Add"), ClusterEvent("Pod", "Add"))


# -- nominator ------------------------------------------------------------------------------------------------


async def test_nominator_tracks_nominated_pods_per_node() -> None:
    q = new_queue(FakeClock())
    nom = q.nominator
    a, b = make_pod("a", priority=5), make_pod("b")
    nom.add_nominated(a, "n1")
    nom.add_nominated(b, "n1")
    assert [p.name for p in nom.nominated_pods_for_node("n1")] == ["a", "b"]
    nom.add_nominated(a, "n2")  # re-nomination moves it
    assert [p.name for p in nom.nominated_pods_for_node("n1")] == ["b"]
    assert [p.name for p in nom.nominated_pods_for_node("n2")] == ["a"]
    # An update without status.nominatedNodeName keeps the in-memory nomination.
    a2 = make_pod("a", priority=6, rv="2")
    nom.update_nominated(a, a2)
    assert nom.nominated_pods_for_node("n2")[0].priority == 6
    nom.delete_nominated(b)
    assert nom.nominated_pods_for_node("n1") == [] and len(nom) == 1

    # A pod added with status.nominatedNodeName is nominated; deleting it from the queue drops that.
    q.add(make_pod("c", nominated="n3"))
    assert [p.name for p in nom.nominated_pods_for_node("n3")] == ["c"]
    q.delete("uid-c")
    assert nom.nominated_pods_for_node("n3") == []


# -- loops and metrics ----------------------------------------------------------------------------------------


async def test_flush_loops_run_with_injected_periods_and_stop_on_close() -> None:
    clock = FakeClock()
    q = new_queue(clock, backoff_flush_period=0.01, unschedulable_flush_period=0.01)
    q.add(make_pod("b"))
    q.add(make_pod("u"))
    qpi = await pop_now(q)
    assert q.add_unschedulable_if_not_present(qpi) == BACKOFF  # error backoff: pop does not take it
    await fail(q, "Quiet")
    clock.advance(400)
    q.start()
    for _ in range(100):
        if q.pending_counts()[ACTIVE] == 2:
            break
        await asyncio.sleep(0.01)
    assert q.pending_counts() == {ACTIVE: 2, BACKOFF: 0, UNSCHEDULABLE: 0, GATED: 0}
    q.close()
    await q.wait_closed()
    assert await q.pop() is None


async def test_queue_reports_incoming_pods_and_unschedulable_reasons() -> None:
    metrics = SchedulerMetrics()
    q = new_queue(FakeClock(), metrics=metrics)
    metrics.watch_pending(q.pending_counts)
    q.add(make_pod("p"))
    q.add(make_pod("g", gates=["x"]))
    await fail(q, "NodeAffinity")
    reg = metrics.registry
    assert (
        reg.get_sample_value(
            "scheduler_queue_incoming_pods_total", {"queue": "active", "event": "UnschedulablePodAdd"}
        )
        == 1
    )
    assert (
        reg.get_sample_value(
            "scheduler_queue_incoming_pods_total",
            {"queue": "unschedulable", "event": "ScheduleAttemptFailure"},
        )
        == 1
    )
    assert (
        reg.get_sample_value(
            "scheduler_unschedulable_pods", {"plugin": "NodeAffinity", "profile": "default-scheduler"}
        )
        == 1
    )
    assert reg.get_sample_value("scheduler_pending_pods", {"queue": "gated"}) == 1
    assert reg.get_sample_value("scheduler_pending_pods", {"queue": "unschedulable"}) == 1


async def test_a_pod_its_gate_still_holds_stays_put_on_each_event() -> None:
    """DefaultPreemption's shape: a preemptor gated while its victims go. Each victim deletion re-asks
    PreEnqueue once; while the gate holds the pod stays in unschedulablePods (not re-counted as incoming), and the
    event after the gate opens moves it."""
    metrics = SchedulerMetrics()
    clock = FakeClock()
    gated: set[str] = set()
    asked: list[str] = []

    def pre_enqueue(pi: PodInfo) -> Status:
        asked.append(pi.uid)
        if pi.uid in gated:
            return Status(
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["waiting for preemption"], "DefaultPreemption"
            )
        return Status.success()

    events = {**PLUGIN_EVENTS, "DefaultPreemption": [ClusterEvent("Pod", "Delete")]}
    q = new_queue(clock, pre_enqueue=pre_enqueue, plugin_events=events, metrics=metrics)
    q.add(make_pod("p"))
    await fail(q, "NodeResourcesFit")
    gated.add("uid-p")
    clock.advance(3)  # past its backoff: an event sends it towards activeQ, where the gate stops it
    victim_gone = ClusterEvent("Pod", "Delete")
    q.move_all_to_active_or_backoff(victim_gone)
    assert q.where("uid-p") == GATED and q.pending_counts()[GATED] == 1
    counted = gated_incoming(metrics)
    assert counted == 1
    asked.clear()
    for _ in range(3):
        q.move_all_to_active_or_backoff(victim_gone)
        assert q.where("uid-p") == GATED and q.pending_counts()[GATED] == 1
    assert asked == ["uid-p"] * 3
    assert gated_incoming(metrics) == counted
    gated.clear()
    q.move_all_to_active_or_backoff(victim_gone)
    assert q.where("uid-p") == ACTIVE and q.pending_counts()[GATED] == 0


def gated_incoming(metrics: SchedulerMetrics) -> float:
    """Pods counted into the gated queue, over every event."""
    return sum(
        sample.value
        for family in metrics.registry.collect()
        if family.name == "scheduler_queue_incoming_pods"
        for sample in family.samples
        if sample.name.endswith("_total") and sample.labels.get("queue") == "gated"
    )
