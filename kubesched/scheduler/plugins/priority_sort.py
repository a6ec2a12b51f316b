"""PrioritySort: the queue pops higher ``spec.priority`` first, and among equals the pod queued earliest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubesched.scheduler.podinfo import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def __init__(self, args: Any = None, handle: Any = None) -> None:
        pass

    def sort_key(self, qpod: QueuedPodInfo) -> tuple[int, float]:
        return (-qpod.pod_info.priority, qpod.timestamp)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Upstream's ``Less``: does ``a`` pop before ``b``."""
        return self.sort_key(a) < self.sort_key(b)


def new(args: Any, handle: Any) -> PrioritySort:
    return PrioritySort(args, handle)
