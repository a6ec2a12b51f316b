"""The in-tree plugins, one module each. ``in_tree_registry()`` lists them for ``Framework``.

Convention for a plugin module: it defines a class named exactly as the plugin (``NodeAffinity``), built as
``Cls(args, handle)``, and may define ``new(args, handle)``, which the registry prefers. Modules are imported
when a plugin is first built, so a plugin whose module is missing is simply not registered.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from kubesched.scheduler.framework.registry import Handle, PluginFactory, Registry

# Plugin name -> module under kubesched.scheduler.plugins, in upstream's default-profile order.
IN_TREE_PLUGINS: dict[str, str] = {
    "SchedulingGates": "scheduling_gates",
    "PrioritySort": "priority_sort",
    "NodeUnschedulable": "node_unschedulable",
    "NodeName": "node_name",
    "TaintToleration": "taint_toleration",
    "NodeAffinity": "node_affinity",
    "NodePorts": "node_ports",
    "NodeResourcesFit": "node_resources_fit",
    "PodTopologySpread": "pod_topology_spread",
    "InterPodAffinity": "inter_pod_affinity",
    "DynamicResources": "dynamic_resources",
    "DefaultPreemption": "default_preemption",
    "NodeResourcesBalancedAllocation": "balanced_allocation",
    "ImageLocality": "image_locality",
    "DefaultBinder": "default_binder",
}


def _lazy_factory(name: str, module: str) -> PluginFactory:
    def build(args: Any, handle: Handle) -> Any:
        mod = importlib.import_module(f"{__name__}.{module}")
        factory = getattr(mod, "new", None) or getattr(mod, name)
        return factory(args, handle)

    build.__name__ = f"new_{name}"
    return build


def in_tree_registry() -> Registry:
    """A registry of every in-tree plugin whose module exists."""
    registry = Registry()
    for name, module in IN_TREE_PLUGINS.items():
        if importlib.util.find_spec(f"{__name__}.{module}") is not None:
            registry.register(name, _lazy_factory(name, module))
    return registry


__all__ = ["IN_TREE_PLUGINS", "in_tree_registry"]
