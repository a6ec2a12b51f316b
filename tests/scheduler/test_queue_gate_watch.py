"""Gated pods a PreEnqueue plugin's ``GateWatch`` tracks (queue.py) against the queue that re-asks PreEnqueue for
every gated pod on every matching event: over random sequences of pods arriving, failing, gates opening and
closing (as the plugin reports them), cluster events, backoff flushes, activations, updates and deletions, both
queues hold every pod in the same place with the same rejectors, and hand pods out in the same order."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from test_queue import FakeClock, make_pod, priority_sort

from kubesched.scheduler.framework.interface import ClusterEvent, Code, Status
from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.queue import GateWatch, Nominator, SchedulingQueue

POD_DELETE = ClusterEvent("AssignedPod", "Delete")
NODE_ADD = ClusterEvent("Node", "Add")
EVENTS = {
    "Fit": [NODE_ADD, ClusterEvent("Pod", "Delete")],
    "Gate": [POD_DELETE],
    "Other": [NODE_ADD],
}
PODS = 4


class World:
    """The PreEnqueue answers: ``Gate`` (the watched plugin) and ``Other`` (untracked) gates per pod."""

    def __init__(self) -> None:
        self.gate = [False] * PODS
        self.other = [False] * PODS
        self.unsettled: set[int] = set()

    def pre_enqueue(self, pi: PodInfo) -> Status:
        i = int(pi.name[1:])
        if self.other[i]:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["other"], "Other")
        if self.gate[i]:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["waiting"], "Gate")
        return Status.success()


def tracked(pi: PodInfo) -> bool:
    return int(pi.name[1:]) % 2 == 0  # odd pods may be gated by "Other" at any time: not tracked


def make_queue(world: World, clock: FakeClock, watch: GateWatch | None) -> SchedulingQueue:
    nominator = Nominator()
    if watch is not None:
        nominator.watch_gates(watch)
    return SchedulingQueue(
        priority_sort,
        pre_enqueue=world.pre_enqueue,
        plugin_events=EVENTS,
        clock=clock,
        nominator=nominator,
    )


def view(q: SchedulingQueue) -> Any:
    out = []
    for i in range(PODS):
        uid = f"uid-p{i}"
        qpi = q.get(uid)
        entry = q._entries.get(uid)
        out.append(
            (
                q.where(uid),
                None if qpi is None else sorted(qpi.unschedulable_plugins),
                None if entry is None else entry.gating_plugin,
                q.backoff_expiry(uid),
            )
        )
    return out, q.pending_counts()


steps = st.lists(
    st.tuples(
        st.sampled_from(
            (
                "add",
                "pop-fail",
                "gate",
                "ungate",
                "unsettle",
                "settle",
                "flip",
                "other",
                "delete-event",
                "node-event",
                "tick",
                "activate",
                "update",
                "delete",
            )
        ),
        st.integers(0, PODS - 1),
    ),
    max_size=80,
)


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps)
# A gate that opens while unsettled, unreported; one that opens when it settles; an untracked pod gated by another
# plugin; a tracked pod whose gating plugin changes.
@example([("gate", 0), ("add", 0), ("unsettle", 0), ("flip", 0), ("delete-event", 0)])
@example([("gate", 2), ("add", 2), ("unsettle", 2), ("delete-event", 0), ("flip", 2), ("settle", 2)] * 2)
@example([("other", 1), ("add", 1), ("other", 1), ("delete-event", 0), ("node-event", 0), ("pop-fail", 0)])
@example([("gate", 0), ("add", 0), ("ungate", 0), ("node-event", 0), ("delete-event", 0)])
@example([("gate", 0), ("add", 0), ("update", 0), ("ungate", 0), ("delete-event", 0), ("tick", 0)])
def test_watched_gates_give_the_same_queue_as_asking_every_gated_pod(ops: list[tuple[str, int]]) -> None:
    loop = asyncio.new_event_loop()
    try:
        _run(loop, ops)
    finally:
        loop.close()


def _run(loop: asyncio.AbstractEventLoop, ops: list[tuple[str, int]]) -> None:
    world = World()
    clock = FakeClock()
    watch = GateWatch("Gate", tracked)
    queues = [make_queue(world, clock, None), make_queue(world, clock, watch)]
    pods = [make_pod(f"p{i}", priority=i % 3) for i in range(PODS)]
    versions = [0] * PODS

    def mark(i: int) -> None:
        if tracked(pods[i]):
            watch.changed.add(pods[i].uid)

    for op, i in ops:
        uid = pods[i].uid
        if op == "add":
            for q in queues:
                q.add(pods[i])
        elif op == "pop-fail":
            popped = []
            for q in queues:
                if len(q._active) or len(q._backoff):
                    qpi = loop.run_until_complete(q.pop())
                    assert qpi is not None
                    qpi.unschedulable_plugins = {"Fit"}
                    q.add_unschedulable_if_not_present(qpi)
                    popped.append(qpi.pod_info.uid)
                else:
                    popped.append(None)
            assert popped[0] == popped[1]
        elif op in ("gate", "ungate"):
            world.gate[i] = op == "gate"
            if i not in world.unsettled:
                mark(i)
        elif op == "unsettle" and tracked(pods[i]):
            world.unsettled.add(i)
            watch.unsettled.add(uid)
        elif op == "settle" and i in world.unsettled:
            world.unsettled.discard(i)
            watch.unsettled.discard(uid)
            mark(i)
        elif op == "flip" and i in world.unsettled:
            world.gate[i] = not world.gate[i]  # no report: the watch said it may change at any time
        elif op == "other" and not tracked(pods[i]):
            world.other[i] = not world.other[i]
        elif op == "delete-event":
            for q in queues:
                q.move_all_to_active_or_backoff(POD_DELETE)
        elif op == "node-event":
            for q in queues:
                q.move_all_to_active_or_backoff(NODE_ADD)
        elif op == "tick":
            clock.advance(1.5)
            for q in queues:
                q.flush_backoff_completed()
        elif op == "activate":
            for q in queues:
                q.activate([uid])
        elif op == "update":
            versions[i] += 1
            new = make_pod(f"p{i}", priority=i % 3, labels={"v": str(versions[i])}, rv=str(versions[i] + 1))
            for q in queues:
                q.update(pods[i], new)
            pods[i] = new
        elif op == "delete":
            for q in queues:
                q.delete(uid)
        assert view(queues[0]) == view(queues[1]), (op, i)
    # Both hand out what is ready in the same order.
    order = []
    for q in queues:
        got = []
        while len(q._active) or len(q._backoff):
            qpi = loop.run_until_complete(q.pop())
            assert qpi is not None
            got.append(qpi.pod_info.uid)
        order.append(got)
    assert order[0] == order[1]


def test_a_deletion_asks_only_the_pods_whose_gate_may_have_opened() -> None:
    """Many pods gated by the watched plugin: an event asks PreEnqueue only for those reported changed."""
    asked: list[str] = []
    gated = {f"uid-p{i}" for i in range(0, PODS, 2)}

    def pre_enqueue(pi: PodInfo) -> Status:
        asked.append(pi.uid)
        if pi.uid in gated:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["waiting"], "Gate")
        return Status.success()

    watch = GateWatch("Gate", tracked)
    nominator = Nominator()
    nominator.watch_gates(watch)
    q = SchedulingQueue(
        priority_sort, pre_enqueue=pre_enqueue, plugin_events=EVENTS, clock=FakeClock(), nominator=nominator
    )
    for i in range(0, PODS, 2):
        q.add(make_pod(f"p{i}"))
    assert q.pending_counts()["gated"] == PODS // 2
    asked.clear()
    q.move_all_to_active_or_backoff(POD_DELETE)
    assert asked == []
    gated.discard("uid-p2")
    watch.changed.add("uid-p2")
    q.move_all_to_active_or_backoff(POD_DELETE)
    assert set(asked) == {"uid-p2"}  # in place, then again on the way into activeQ (as without the watch)
    assert q.where("uid-p2") == "active"
    assert q.pending_counts()["gated"] == PODS // 2 - 1
