"""The in-tree plugins, one module each; ``in_tree_catalogue()`` is the catalogue of them.

A plugin module declares ``PLUGIN``, its ``PluginDefinition`` (name, factory, typed args). Adding a plugin is
that module plus one line in ``IN_TREE_MODULES``.
"""

from __future__ import annotations

import functools
import importlib

from kubesched.scheduler.framework.catalogue import Catalogue, PluginDefinition

# Modules under kubesched.scheduler.plugins, in upstream's default-profile order.
IN_TREE_MODULES: tuple[str, ...] = (
    "scheduling_gates",
    "priority_sort",
    "node_unschedulable",
    "node_name",
    "taint_toleration",
    "node_affinity",
    "node_ports",
    "node_resources_fit",
    "volume_restrictions",
    "node_volume_limits",
    "volume_binding",
    "volume_zone",
    "pod_topology_spread",
    "inter_pod_affinity",
    "dynamic_resources",
    "default_preemption",
    "balanced_allocation",
    "image_locality",
    "default_binder",
)


def definition(module: str) -> PluginDefinition:
    """The ``PLUGIN`` of one in-tree module."""
    found = importlib.import_module(f"{__name__}.{module}").PLUGIN
    if not isinstance(found, PluginDefinition):
        raise TypeError(f"{__name__}.{module}.PLUGIN is not a PluginDefinition")
    return found


@functools.cache
def in_tree_catalogue() -> Catalogue:
    """Every in-tree plugin (imported on first use; the catalogue is immutable, so it is built once)."""
    return Catalogue(definition(module) for module in IN_TREE_MODULES)


__all__ = ["IN_TREE_MODULES", "definition", "in_tree_catalogue"]
