"""The scheduler configuration a workload runs with, and whether the plugins it needs exist.

Most workloads run the default profile. LoadAware also needs crane's ``Dynamic`` plugin. It counts as
registered when it is in-tree (``KNOWN_PLUGINS`` and ``in_tree_registry()``), or when ``kubesched.loadaware``
exposes ``PLUGIN_SPEC`` (a config ``PluginSpec`` of that name) and ``new(args, handle)`` — the module
``kubesched scheduler`` registers too, so the end-to-end mode can use it.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass
from typing import Any

from kubesched.bench.workloads import Workload

API_VERSION = "kubescheduler.config.k8s.io/v1"
OUT_OF_TREE_MODULES = ("kubesched.loadaware",)


class WorkloadSkipped(Exception):
    """The workload cannot run in this build (a plugin it needs is not registered)."""


@dataclass
class PluginSource:
    """Where a plugin comes from: in-tree, or an out-of-tree module (``spec`` for the config, ``factory``)."""

    name: str
    in_tree: bool
    spec: Any = None
    factory: Any = None


def find_plugin(name: str) -> PluginSource | None:
    from kubesched.scheduler.config import KNOWN_PLUGINS
    from kubesched.scheduler.plugins import in_tree_registry

    if name in KNOWN_PLUGINS and name in in_tree_registry():
        return PluginSource(name, True)
    for module_name in OUT_OF_TREE_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as e:
            if e.name is not None and module_name.startswith(e.name):
                continue
            raise
        spec = getattr(module, "PLUGIN_SPEC", None)
        factory = getattr(module, "new", None)
        if spec is not None and getattr(spec, "name", None) == name and callable(factory):
            return PluginSource(name, False, spec, factory)
    return None


def config_document(workload: Workload, *, kubeconfig: str | None = None, qps: float = 0.0) -> dict[str, Any]:
    """The KubeSchedulerConfiguration for ``workload`` (leader election off)."""
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
    }
    if kubeconfig is not None:
        doc["clientConnection"] = {"kubeconfig": kubeconfig, "qps": qps, "burst": int(qps)}
    if workload.needs_plugin:
        doc["profiles"] = [{
            "schedulerName": "default-scheduler",
            "plugins": {"multiPoint": {"enabled": [{"name": workload.needs_plugin}]}},
        }]
    return doc


def required_plugin(workload: Workload, *, out_of_tree_ok: bool = True) -> PluginSource | None:
    """The extra plugin ``workload`` needs, or None; raises ``WorkloadSkipped`` when it is not registered.

    ``out_of_tree_ok=False`` (the end-to-end mode, whose scheduler process only knows in-tree plugins) skips
    the workload unless the plugin is in-tree.
    """
    if not workload.needs_plugin:
        return None
    source = find_plugin(workload.needs_plugin)
    if source is None:
        raise WorkloadSkipped(
            f"{workload.name} needs the {workload.needs_plugin} plugin, which is not registered in this build "
            f"(not in-tree, and no {' or '.join(OUT_OF_TREE_MODULES)} with PLUGIN_SPEC and new())"
        )
    if not source.in_tree and not out_of_tree_ok:
        raise WorkloadSkipped(
            f"{workload.name}: the {workload.needs_plugin} plugin is out-of-tree; `kubesched scheduler` cannot "
            "load it, so the end-to-end mode cannot run this workload"
        )
    return source


def inprocess_config(workload: Workload) -> tuple[Any, Any]:
    """(SchedulerConfiguration, plugin Registry) for the in-process mode."""
    from kubesched.scheduler.config import default_config, load_config
    from kubesched.scheduler.plugins import in_tree_registry

    source = required_plugin(workload)
    registry = in_tree_registry()
    if source is None:
        return default_config(), registry
    plugin_registry = None
    if not source.in_tree:
        plugin_registry = {source.name: source.spec}
        registry.register(source.name, source.factory)
    text = json.dumps(config_document(workload)).encode()
    return load_config(text, plugin_registry=plugin_registry), registry
