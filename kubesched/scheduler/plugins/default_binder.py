"""DefaultBinder: bind by POSTing a ``Binding`` to the pod's ``binding`` subresource."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import CycleState, Status

if TYPE_CHECKING:
    from kubesched.scheduler.podinfo import PodInfo

NAME = "DefaultBinder"


def binding_for(pod: PodInfo, node_name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": pod.name, "namespace": pod.namespace, "uid": pod.uid},
        "target": {"kind": "Node", "name": node_name},
    }


class DefaultBinder:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        self._handle = handle

    async def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        client = getattr(self._handle, "client", None)
        if client is None:
            return Status.error("no API client to bind with")
        try:
            await client.create_subresource(
                "v1", "pods", pod.name, "binding", binding_for(pod, node_name), namespace=pod.namespace
            )
        except Exception as exc:  # ApiError and transport errors alike become an error status
            return Status.error(getattr(exc, "message", None) or str(exc))
        return Status.success()


PLUGIN = PluginDefinition(NAME, DefaultBinder)
