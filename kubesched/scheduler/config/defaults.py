"""Per-version defaults: the default plugin sets and the scalar defaults kube-scheduler applies.

v1 is Kubernetes 1.36's default profile. v1beta3 and v1beta2 are gone upstream (removed in 1.29 and 1.28);
we accept them with the defaults of the last release that served each (1.28 and 1.27), with the feature
gates that were on by default there (PodSchedulingReadiness -> SchedulingGates).
"""

from __future__ import annotations

from collections.abc import Iterable

from .plugins import MULTI_POINT, ExtensionPoint
from .types import V1, V1BETA2, V1BETA3, PluginEntry, PluginSet

DEFAULT_PARALLELISM = 16
DEFAULT_PERCENTAGE_OF_NODES_TO_SCORE = 0
DEFAULT_POD_INITIAL_BACKOFF_SECONDS = 1
DEFAULT_POD_MAX_BACKOFF_SECONDS = 10
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
DEFAULT_RESOURCE_LOCK = "leases"
DEFAULT_LOCK_NAME = "kube-scheduler"
DEFAULT_LOCK_NAMESPACE = "kube-system"
DEFAULT_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_EXTENDER_HTTP_TIMEOUT = 5.0
# client-go's leader election requires renewDeadline > JITTER_FACTOR * retryPeriod.
LEADER_ELECTION_JITTER_FACTOR = 1.2


def _entries(*items: str | tuple[str, int]) -> tuple[PluginEntry, ...]:
    return tuple(PluginEntry(i) if isinstance(i, str) else PluginEntry(i[0], i[1]) for i in items)


# 1.36 getDefaultPlugins with its default-on gates: SchedulingGates first, DynamicResources before
# DefaultPreemption, NodeDeclaredFeatures last (order checked against the profile 1.36 logs at start).
_V1_MULTI_POINT = _entries(
    "SchedulingGates",
    "PrioritySort",
    "NodeUnschedulable",
    "NodeName",
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    "NodePorts",
    ("NodeResourcesFit", 1),
    "VolumeRestrictions",
    "NodeVolumeLimits",
    "VolumeBinding",
    "VolumeZone",
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    ("DynamicResources", 2),  # scores firstAvailable choices; observed 1.36: weight 2, 0 without claims
    "DefaultPreemption",
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    "DefaultBinder",
    "NodeDeclaredFeatures",
)

# 1.28: the v1 list of the day (with the cloud volume-limit plugins) plus SchedulingGates appended.
_V1BETA3_MULTI_POINT = _entries(
    "PrioritySort",
    "NodeUnschedulable",
    "NodeName",
    ("TaintToleration", 3),
    ("NodeAffinity", 2),
    "NodePorts",
    ("NodeResourcesFit", 1),
    "VolumeRestrictions",
    "EBSLimits",
    "GCEPDLimits",
    "NodeVolumeLimits",
    "AzureDiskLimits",
    "VolumeBinding",
    "VolumeZone",
    ("PodTopologySpread", 2),
    ("InterPodAffinity", 2),
    "DefaultPreemption",
    ("NodeResourcesBalancedAllocation", 1),
    ("ImageLocality", 1),
    "DefaultBinder",
    "SchedulingGates",
)

# 1.27: v1beta2 lists plugins per extension point (no multiPoint) and weighs scores differently.
_V1BETA2_POINTS: dict[str, tuple[PluginEntry, ...]] = {
    ExtensionPoint.PRE_ENQUEUE: _entries("SchedulingGates"),
    ExtensionPoint.QUEUE_SORT: _entries("PrioritySort"),
    ExtensionPoint.PRE_FILTER: _entries(
        "NodeResourcesFit",
        "NodePorts",
        "VolumeRestrictions",
        "PodTopologySpread",
        "InterPodAffinity",
        "VolumeBinding",
        "VolumeZone",
        "NodeAffinity",
    ),
    ExtensionPoint.FILTER: _entries(
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "VolumeRestrictions",
        "EBSLimits",
        "GCEPDLimits",
        "NodeVolumeLimits",
        "AzureDiskLimits",
        "VolumeBinding",
        "VolumeZone",
        "PodTopologySpread",
        "InterPodAffinity",
    ),
    ExtensionPoint.POST_FILTER: _entries("DefaultPreemption"),
    ExtensionPoint.PRE_SCORE: _entries(
        "InterPodAffinity", "PodTopologySpread", "TaintToleration", "NodeAffinity"
    ),
    ExtensionPoint.SCORE: _entries(
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("InterPodAffinity", 1),
        ("NodeResourcesFit", 1),
        ("NodeAffinity", 1),
        # Doubled upstream: a user preference, made comparable to NodeResourcesFit's LeastAllocated signal.
        ("PodTopologySpread", 2),
        ("TaintToleration", 1),
    ),
    ExtensionPoint.RESERVE: _entries("VolumeBinding"),
    ExtensionPoint.PRE_BIND: _entries("VolumeBinding"),
    ExtensionPoint.BIND: _entries("DefaultBinder"),
}


def default_plugin_sets(api_version: str) -> dict[str, PluginSet]:
    """The default ``plugins`` of a profile for a version, keyed by extension point (and ``multiPoint``)."""
    if api_version == V1:
        return {MULTI_POINT: PluginSet(enabled=_V1_MULTI_POINT)}
    if api_version == V1BETA3:
        return {MULTI_POINT: PluginSet(enabled=_V1BETA3_MULTI_POINT)}
    if api_version == V1BETA2:
        return {point: PluginSet(enabled=entries) for point, entries in _V1BETA2_POINTS.items()}
    raise ValueError(f"no defaults for {api_version!r}")


def keep_known(
    sets: dict[str, PluginSet], known: Iterable[str]
) -> tuple[dict[str, PluginSet], tuple[str, ...]]:
    """Drop default plugins the registry does not know; returns the trimmed sets and the dropped names."""
    known_names = set(known)
    dropped: dict[str, None] = {}
    trimmed: dict[str, PluginSet] = {}
    for point, plugin_set in sets.items():
        kept = []
        for entry in plugin_set.enabled:
            if entry.name in known_names:
                kept.append(entry)
            else:
                dropped.setdefault(entry.name, None)
        trimmed[point] = PluginSet(enabled=tuple(kept), disabled=plugin_set.disabled)
    return trimmed, tuple(dropped)
