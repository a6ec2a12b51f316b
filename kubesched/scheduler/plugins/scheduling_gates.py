"""SchedulingGates: a pod with ``spec.schedulingGates`` waits outside the active queue until they are removed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import ClusterEvent, Code, Status

if TYPE_CHECKING:
    from kubesched.scheduler.podinfo import PodInfo

NAME = "SchedulingGates"


class SchedulingGates:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        pass

    def pre_enqueue(self, pod: PodInfo) -> Status:
        if not pod.scheduling_gates:
            return Status.success()
        gates = " ".join(pod.scheduling_gates)
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [f"waiting for scheduling gates: [{gates}]"])

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "UpdatePodSchedulingGatesEliminated")]


PLUGIN = PluginDefinition(NAME, SchedulingGates)
