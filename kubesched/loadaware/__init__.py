"""Load-aware scheduling compatible with crane-scheduler's ``Dynamic`` plugin.

To run a scheduler with it, register the plugin with the configuration loader and the plugin registry::

    from kubesched import loadaware
    registry = in_tree_registry()
    loadaware.register(registry)
    config = load_config(path, plugin_registry=loadaware.PLUGIN_SPECS)
    Scheduler(config, client, registry=registry)

Modules: ``policy`` (crane's DynamicSchedulerPolicy), ``annotations`` (``"<value>,<timestamp>"`` values and
their freshness), ``args`` (the plugin's args), ``sources`` (load values as slot columns, from annotations or
an in-memory store), ``hotvalue`` (recent bindings per node), ``scoring`` (crane's arithmetic), ``dynamic``
(the plugin), ``promql`` (query templates and instance matching for the Prometheus side).
"""

from __future__ import annotations

from collections.abc import MutableMapping

from kubesched.scheduler.config import PluginSpec
from kubesched.scheduler.framework.registry import Registry

from .annotations import LoadSample, parse_annotation, time_zone
from .args import DynamicArgs
from .dynamic import HOT_VALUES_KEY, LOAD_STORE_KEY, NAME, Dynamic, new
from .hotvalue import HotValueStore
from .policy import DynamicSchedulerPolicy, PolicyError, default_policy, load_policy, parse_policy
from .sources import AnnotationLoadSource, InMemoryLoadStore, LoadColumns, LoadSource, StoreLoadSource

# What the configuration loader needs to know about Dynamic: its points and its args.
PLUGIN_SPEC = PluginSpec(NAME, frozenset({"filter", "score", "postBind"}), args_model=DynamicArgs)
PLUGIN_SPECS: dict[str, PluginSpec] = {NAME: PLUGIN_SPEC}


def register(registry: Registry, plugin_specs: MutableMapping[str, PluginSpec] | None = None) -> None:
    """Add Dynamic's factory to a ``Registry`` (and its spec to ``plugin_specs`` when given, for
    ``load_config(..., plugin_registry=plugin_specs)``)."""
    registry.register(NAME, new)
    if plugin_specs is not None:
        plugin_specs[NAME] = PLUGIN_SPEC


__all__ = [
    "HOT_VALUES_KEY",
    "LOAD_STORE_KEY",
    "NAME",
    "PLUGIN_SPEC",
    "PLUGIN_SPECS",
    "AnnotationLoadSource",
    "Dynamic",
    "DynamicArgs",
    "DynamicSchedulerPolicy",
    "HotValueStore",
    "InMemoryLoadStore",
    "LoadColumns",
    "LoadSample",
    "LoadSource",
    "PolicyError",
    "StoreLoadSource",
    "default_policy",
    "load_policy",
    "new",
    "parse_annotation",
    "parse_policy",
    "register",
    "time_zone",
]
