"""The scheduling framework: extension-point protocols (``interface``), the plugin ``Registry`` and ``Handle``
(``registry``), and the ``Framework`` that runs one profile's plugins (``runtime``)."""

from kubesched.scheduler.framework.interface import (
    EXTENSION_POINTS,
    MAX_NODE_SCORE,
    MIN_NODE_SCORE,
    ClusterEvent,
    Code,
    CycleState,
    Filtered,
    NodeToStatus,
    PreFilterResult,
    Status,
)
from kubesched.scheduler.framework.registry import Handle, Nominator, PluginFactory, Registry, get_arg
from kubesched.scheduler.framework.runtime import (
    NO_NODES_AVAILABLE,
    Framework,
    ScheduleResult,
    fit_error_message,
    num_feasible_nodes_to_find,
)

__all__ = [
    "EXTENSION_POINTS",
    "MAX_NODE_SCORE",
    "MIN_NODE_SCORE",
    "NO_NODES_AVAILABLE",
    "ClusterEvent",
    "Code",
    "CycleState",
    "Filtered",
    "Framework",
    "Handle",
    "NodeToStatus",
    "Nominator",
    "PluginFactory",
    "PreFilterResult",
    "Registry",
    "ScheduleResult",
    "Status",
    "fit_error_message",
    "get_arg",
    "num_feasible_nodes_to_find",
]
