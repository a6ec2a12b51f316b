"""Load-aware scheduling compatible with crane-scheduler's ``Dynamic`` plugin.

``PLUGIN`` is Dynamic's ``PluginDefinition``. The application's catalogue (``full_catalogue()`` at the edge,
in ``kubesched/catalogue.py``) adds it to the in-tree plugins and hands the result to the configuration loader
and the scheduler, so a configuration may enable ``Dynamic`` like any in-tree plugin.

Modules: ``policy`` (crane's DynamicSchedulerPolicy), ``annotations`` (``"<value>,<timestamp>"`` values and
their freshness), ``args`` (the plugin's args), ``sources`` (load values as slot columns, from annotations or
an in-memory store), ``hotvalue`` (recent bindings per node), ``scoring`` (crane's arithmetic), ``dynamic``
(the plugin), ``promql`` (query templates and instance matching for the Prometheus side), ``poller`` (direct
mode's pollers and the hot-value rebuild, run by ``DynamicService`` beside the scheduler).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from kubesched.scheduler.framework.catalogue import PluginDefinition

from .annotations import LoadSample, parse_annotation, time_zone
from .args import DynamicArgs
from .dynamic import NAME, Dynamic
from .hotvalue import HotValueStore
from .policy import DynamicSchedulerPolicy, PolicyError, default_policy, load_policy, parse_policy
from .sources import AnnotationLoadSource, InMemoryLoadStore, LoadColumns, LoadSource, StoreLoadSource


class DynamicService:
    """What Dynamic needs beside the cycle in ``kubesched scheduler``: direct mode's Prometheus pollers (on
    standbys too, so a new leader has values at once), and hot values rebuilt from recent ``Scheduled`` events
    before scheduling starts (bindings the previous leader made recently still count)."""

    def __init__(self) -> None:
        self._pollers: list[asyncio.Task[None]] = []

    async def start(
        self, client: Any, frameworks: Mapping[str, Any], list_nodes: Callable[[], list[dict[str, Any]]]
    ) -> None:
        from .poller import start_pollers

        self._pollers = start_pollers(frameworks, list_nodes)

    async def leading(self, client: Any, frameworks: Mapping[str, Any]) -> None:
        from .poller import rebuild_hot_values_from_api

        await rebuild_hot_values_from_api(client, frameworks)

    async def stop(self) -> None:
        from .poller import stop_pollers

        await stop_pollers(self._pollers)
        self._pollers = []


PLUGIN = PluginDefinition(NAME, Dynamic, DynamicArgs, service=DynamicService)

__all__ = [
    "NAME",
    "PLUGIN",
    "AnnotationLoadSource",
    "Dynamic",
    "DynamicArgs",
    "DynamicSchedulerPolicy",
    "DynamicService",
    "HotValueStore",
    "InMemoryLoadStore",
    "LoadColumns",
    "LoadSample",
    "LoadSource",
    "PolicyError",
    "StoreLoadSource",
    "default_policy",
    "load_policy",
    "parse_annotation",
    "parse_policy",
    "time_zone",
]
