"""PrioritySort: the queue pops higher ``spec.priority`` first, and among equals the pod queued earliest."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.scheduler.framework.catalogue import PluginDefinition

if TYPE_CHECKING:
    from kubesched.scheduler.podinfo import QueuedPodInfo

NAME = "PrioritySort"


class PrioritySort:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        pass

    def sort_key(self, qpod: QueuedPodInfo) -> tuple[int, float]:
        return (-qpod.pod_info.priority, qpod.timestamp)

    def less(self, a: QueuedPodInfo, b: QueuedPodInfo) -> bool:
        """Upstream's ``Less``: does ``a`` pop before ``b``."""
        return self.sort_key(a) < self.sort_key(b)


PLUGIN = PluginDefinition(NAME, PrioritySort)
