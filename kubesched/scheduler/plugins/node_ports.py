"""NodePorts: a pod's host ports must be free on the node. ``0.0.0.0`` (or no host IP) conflicts with the same
protocol and port on any IP; a specific IP conflicts with itself and with ``0.0.0.0``."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import (
    ClusterEvent,
    CycleState,
    Filtered,
    PreFilterResult,
    Status,
)

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "NodePorts"
REASON = "node(s) didn't have free ports for the requested pod ports"
ANY_IP = "0.0.0.0"
_PRE_FILTER_KEY = "PreFilter" + NAME

Port = tuple[str, str, int]  # (protocol, host IP, port)


def conflicts(wanted: Iterable[Port], used: set[Port]) -> bool:
    for proto, ip, port in wanted:
        if ip == ANY_IP:
            if any(u[0] == proto and u[2] == port for u in used):
                return True
        elif (proto, ip, port) in used or (proto, ANY_IP, port) in used:
            return True
    return False


class NodePorts:
    name = NAME

    def __init__(self, args: None = None, handle: Any = None) -> None:
        pass

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's host ports decide this plugin's answer."""
        return pod.host_ports

    def pre_filter(
        self, state: CycleState, pod: PodInfo, nodes: NodeTable
    ) -> tuple[PreFilterResult | None, Status]:
        if not pod.host_ports:
            return None, Status.skip()
        state.write(_PRE_FILTER_KEY, pod.host_ports)
        return None, Status.success()

    def filter(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> Filtered:
        wanted = state.read(_PRE_FILTER_KEY) or pod.host_ports
        if not wanted or not nodes.port_slots:
            return Filtered.all_pass(len(idx))
        users = np.fromiter(nodes.port_slots, dtype=np.intp, count=len(nodes.port_slots))
        hits = np.flatnonzero(np.isin(idx, users))
        bad = np.zeros(len(idx), dtype=np.uint64)
        for i in hits.tolist():
            used = nodes.used_ports[int(idx[i])]
            if used and conflicts(wanted, used):
                bad[i] = 1
        return Filtered(bad, (REASON,), (False,))

    def events_to_register(self) -> list[ClusterEvent]:
        return [ClusterEvent("Pod", "Delete"), ClusterEvent("Node", "Add")]


PLUGIN = PluginDefinition(NAME, NodePorts)
