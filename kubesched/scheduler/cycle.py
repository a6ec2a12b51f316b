"""One scheduling cycle of one pod (upstream ``schedulingCycle`` in ``schedule_one.go``), the one copy that the live
scheduler (``scheduler.py``) and ``kubesched simulate`` both run.

The cycle: the framework's algorithm (``Framework.schedule``: PreFilter, Filter, Score, pick). When no node fits,
PostFilter (preemption) runs, the pod is nominated to the node it names, and the FailedScheduling message is built
(upstream's FitError with the PostFilter part). When a node fits, the pod is assumed there and Reserve and Permit
run; a rejection or an error undoes both (Unreserve, forget), and a rejection reads as a FitError over that one
node, as upstream. A Permit WAIT passes: the wait belongs to the binding cycle (upstream's WaitOnPermit).

What comes after is the caller's own: the live scheduler's events, attempt metrics, PodScheduled condition, queue
and asynchronous binding cycle; simulate's placements, its immediate retry after preemption and PostBind in place of
PreBind/Bind.

Hot path: a successful cycle allocates nothing beyond what the framework does (the outcome is the assumed
``PodInfo`` in a 2-tuple); only a failure builds a ``CycleFailure``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kubesched.scheduler.framework.interface import Code, CycleState, NodeToStatus, Status
from kubesched.scheduler.framework.runtime import Framework, ScheduleResult, fit_error_message

if TYPE_CHECKING:
    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.framework.handle import Nominator
    from kubesched.scheduler.podinfo import PodInfo

__all__ = ["CycleFailure", "scheduling_cycle"]


@dataclass(slots=True)
class CycleFailure:
    """Why the cycle did not place the pod.

    ``status``: UNSCHEDULABLE / UNSCHEDULABLE_AND_UNRESOLVABLE (a rejection), or ERROR.
    ``message``: the FailedScheduling message (upstream's FitError: with PostFilter's part for a pod that fits
    nowhere, over the one node for a Reserve/Permit rejection; an error's own message).
    ``nominated_node``: the node PostFilter nominated the pod to (already recorded in the nominator), else None.
    ``unschedulable_plugins``: the plugins that rejected the pod (the queue requeues it on their events); None
    when the failure is not a FitError (an error, no nodes at all): the caller keeps what it had.
    """

    status: Status
    message: str
    nominated_node: str | None = None
    unschedulable_plugins: set[str] | None = None


async def scheduling_cycle(
    fw: Framework,
    state: CycleState,
    pod: PodInfo,
    cache: Cache,
    nominator: Nominator,
    *,
    start: float = 0.0,
    record_scores: bool = False,
    cycle: int | None = None,
) -> tuple[ScheduleResult, PodInfo | CycleFailure]:
    """Run the scheduling cycle of ``pod``: (the algorithm's result, the assumed PodInfo on ``result.node`` or a
    ``CycleFailure``). On success the pod stays assumed in ``cache`` with Reserve and Permit passed.

    ``start``: when the attempt began (``time.perf_counter()``); with metrics on the framework's handle the
    algorithm's latency is observed from it, as upstream: up to the choice of a node, or up to the end of
    PostFilter when none fits. ``record_scores``: keep per-node scores and rejections in the result (the decision
    log, simulate). ``cycle``: the queue's scheduling-cycle count (for opportunistic batching; None: the
    framework counts its own cycles).
    """
    result = fw.schedule(state, pod, record_scores=record_scores, cycle=cycle)
    metrics = fw.handle.metrics
    node = result.node
    if node is None:
        failure = await _unschedulable(fw, state, pod, result, cache, nominator)
        if metrics is not None:
            metrics.observe_algorithm(time.perf_counter() - start)
        return result, failure
    if metrics is not None:
        metrics.observe_algorithm(time.perf_counter() - start)
    assumed = cache.assume(pod, node)
    s = fw.run_reserve(state, assumed, node)
    if s.ok:
        s, _ = fw.run_permit(state, assumed, node)
        if s.ok or s.code == Code.WAIT:
            fw.pod_succeeded()
            return result, assumed
    fw.run_unreserve(state, assumed, node)
    cache.forget(pod.uid)
    if s.rejected:
        return result, _rejected_on(node, s)
    return result, CycleFailure(s, s.message())


def _rejected_on(node: str, status: Status) -> CycleFailure:
    """A Reserve or Permit rejection is upstream's FitError over the one node tried: the message reads
    ``0/1 nodes are available: 1 <reason>.`` and the rejecting plugin's events requeue the pod."""
    diagnosis = NodeToStatus(by_node={node: status})
    for reason in status.reasons:
        diagnosis.counts[reason] = diagnosis.counts.get(reason, 0) + 1
    plugins = {status.plugin} if status.plugin else set()
    return CycleFailure(status, fit_error_message(1, diagnosis), None, plugins)


async def _unschedulable(
    fw: Framework, state: CycleState, pod: PodInfo, result: ScheduleResult, cache: Cache, nominator: Nominator
) -> CycleFailure:
    """No node fits: PostFilter, nomination, the FitError message (upstream: the error branch of schedulingCycle)."""
    status = result.status
    num_nodes = cache.table.num_nodes
    if status.code == Code.ERROR or num_nodes == 0:
        # Not a FitError (a plugin failed; no nodes at all): no PostFilter, the status says it all.
        return CycleFailure(status, status.message())
    diagnosis = result.diagnosis
    nominated: str | None = None
    post_filter_message = ""
    if fw.has_post_filter_plugins:
        nominated, pf = await fw.run_post_filter(state, pod, diagnosis)
        # Upstream puts PostFilter's message after the FitError whatever its code, an ERROR's too.
        post_filter_message = pf.message()
        if nominated:
            nominator.add_nominated(pod, nominated)
    return CycleFailure(
        status,
        fit_error_message(num_nodes, diagnosis, post_filter_message),
        nominated or None,
        set(diagnosis.plugins),
    )
