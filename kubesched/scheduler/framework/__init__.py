"""The scheduling framework: extension-point protocols (``interface``), plugin definitions and the
``Catalogue`` of them (``catalogue``), the ``Handle`` plugins get (``handle``), and the ``Framework`` that runs
one profile's plugins (``runtime``)."""

from kubesched.scheduler.framework.catalogue import Catalogue, PluginDefinition, PluginFactory, PluginService
from kubesched.scheduler.framework.handle import Handle, Nominator, Singletons
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
    "Catalogue",
    "ClusterEvent",
    "Code",
    "CycleState",
    "Filtered",
    "Framework",
    "Handle",
    "NodeToStatus",
    "Nominator",
    "PluginDefinition",
    "PluginFactory",
    "PluginService",
    "PreFilterResult",
    "ScheduleResult",
    "Singletons",
    "Status",
    "fit_error_message",
    "num_feasible_nodes_to_find",
]
