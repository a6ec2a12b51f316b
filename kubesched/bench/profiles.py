"""The scheduler configuration a workload runs with, and whether the plugins it needs exist.

Most workloads run the default profile. LoadAware also needs crane's ``Dynamic`` plugin: a workload runs when
the plugin it needs is in the catalogue the benchmark was given (``kubesched.catalogue.full_catalogue()`` from
the command line, which is also what the ``kubesched scheduler`` process of the end-to-end mode loads).
"""

from __future__ import annotations

import json
from typing import Any

from kubesched.bench.workloads import Workload
from kubesched.scheduler.framework.catalogue import Catalogue

API_VERSION = "kubescheduler.config.k8s.io/v1"


class WorkloadSkipped(Exception):
    """The workload cannot run in this build (a plugin it needs is not registered)."""


def config_document(
    workload: Workload,
    *,
    kubeconfig: str | None = None,
    qps: float = 0.0,
    scheduler_name: str = "default-scheduler",
) -> dict[str, Any]:
    """The KubeSchedulerConfiguration for ``workload`` (leader election off), one profile ``scheduler_name``."""
    doc: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
    }
    if kubeconfig is not None:
        doc["clientConnection"] = {"kubeconfig": kubeconfig, "qps": qps, "burst": int(qps)}
    profile: dict[str, Any] = {"schedulerName": scheduler_name}
    if workload.needs_plugin:
        profile["plugins"] = {"multiPoint": {"enabled": [{"name": workload.needs_plugin}]}}
    if workload.needs_plugin or scheduler_name != "default-scheduler":
        doc["profiles"] = [profile]
    return doc


def require_plugin(workload: Workload, catalogue: Catalogue) -> None:
    """Raises ``WorkloadSkipped`` when ``workload`` needs a plugin the catalogue does not have."""
    if workload.needs_plugin and workload.needs_plugin not in catalogue:
        raise WorkloadSkipped(
            f"{workload.name} needs the {workload.needs_plugin} plugin, which is not registered in this build "
            f"(the catalogue has {', '.join(catalogue)})"
        )


def inprocess_config(workload: Workload, catalogue: Catalogue) -> Any:
    """The SchedulerConfiguration of the in-process mode, loaded against ``catalogue``."""
    from kubesched.scheduler.config import default_config, load_config

    require_plugin(workload, catalogue)
    if not workload.needs_plugin:
        return default_config(catalogue=catalogue)
    text = json.dumps(config_document(workload)).encode()
    return load_config(text, catalogue=catalogue)
