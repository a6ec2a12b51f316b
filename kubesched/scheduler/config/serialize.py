"""The effective configuration as a ``KubeSchedulerConfiguration`` v1 document, what kube-scheduler's ``/configz``
serves: every default filled in, the plugin sets as they run (defaults merged, multiPoint expanded) and every
enabled plugin's args. So a reader (the operator's tests, a person) sees e.g. ``MostAllocated`` where a profile
scores that way, not merely the profile's name."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from kubesched.apimachinery.duration import format_duration

from .plugins import EXTENSION_POINTS
from .types import SchedulerConfiguration, SchedulerProfile

API_VERSION = "kubescheduler.config.k8s.io/v1"


def _args(args: Any) -> Any:
    if isinstance(args, BaseModel):
        return args.model_dump(mode="json", by_alias=True)
    return args


def profile_document(profile: SchedulerProfile) -> dict[str, Any]:
    # Every point lists exactly what runs there, the defaults switched off with "*": the document means the
    # same configuration when it is loaded again (no default plugin comes back).
    plugins: dict[str, Any] = {}
    for point in EXTENSION_POINTS:
        refs = profile.plugins[point]
        plugins[str(point)] = {
            "enabled": [{"name": r.name, "weight": r.weight} if r.weight else {"name": r.name} for r in refs],
            "disabled": [{"name": "*"}],
        }
    doc: dict[str, Any] = {"schedulerName": profile.scheduler_name, "plugins": plugins}
    if profile.percentage_of_nodes_to_score is not None:
        doc["percentageOfNodesToScore"] = profile.percentage_of_nodes_to_score
    doc["pluginConfig"] = [
        {"name": name, "args": _args(args)}
        for name, args in sorted(profile.plugin_args.items())
        if args is not None
    ]
    return doc


def effective_document(config: SchedulerConfiguration) -> dict[str, Any]:
    le = config.leader_election
    cc = config.client_connection
    return {
        "apiVersion": API_VERSION,
        "kind": "KubeSchedulerConfiguration",
        "parallelism": config.parallelism,
        "leaderElection": {
            "leaderElect": le.leader_elect,
            "leaseDuration": format_duration(le.lease_duration),
            "renewDeadline": format_duration(le.renew_deadline),
            "retryPeriod": format_duration(le.retry_period),
            "resourceLock": le.resource_lock,
            "resourceName": le.resource_name,
            "resourceNamespace": le.resource_namespace,
        },
        "clientConnection": {
            "kubeconfig": cc.kubeconfig,
            "acceptContentTypes": cc.accept_content_types,
            "contentType": cc.content_type,
            "qps": cc.qps,
            "burst": cc.burst,
        },
        "percentageOfNodesToScore": config.percentage_of_nodes_to_score,
        "podInitialBackoffSeconds": config.pod_initial_backoff_seconds,
        "podMaxBackoffSeconds": config.pod_max_backoff_seconds,
        "enableProfiling": config.enable_profiling,
        "enableContentionProfiling": config.enable_contention_profiling,
        "delayCacheUntilActive": config.delay_cache_until_active,
        "profiles": [profile_document(p) for p in config.profiles],
    }
