"""A profile whose every PreFilter/Filter/PreScore/Score plugin can sign pods (opportunistic batching): the default
plugins without the volume and device ones; PodTopologySpread signs only without default constraints."""

from __future__ import annotations

from typing import Any

POINTS: dict[str, list[Any]] = {
    "PreFilter": ["NodeAffinity", "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity"],
    "Filter": [
        "NodeUnschedulable",
        "NodeName",
        "TaintToleration",
        "NodeAffinity",
        "NodePorts",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
    ],
    "PreScore": [
        "TaintToleration",
        "NodeAffinity",
        "NodeResourcesFit",
        "PodTopologySpread",
        "InterPodAffinity",
        "NodeResourcesBalancedAllocation",
    ],
    "Score": [
        ("NodeResourcesFit", 1),
        ("NodeResourcesBalancedAllocation", 1),
        ("ImageLocality", 1),
        ("TaintToleration", 3),
        ("NodeAffinity", 2),
        ("PodTopologySpread", 2),
        ("InterPodAffinity", 2),
    ],
}
