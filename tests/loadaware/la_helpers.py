"""Builders shared by the load-aware tests: nodes with crane annotations, pods, a fixed clock."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kubesched.loadaware.annotations import format_annotation, time_zone
from kubesched.scheduler.cache import Cache

SHANGHAI = time_zone("Asia/Shanghai")
# A fixed "now": 2023-10-17T15:10:00 in Shanghai (07:10:00 UTC).
NOW = datetime(2023, 10, 17, 7, 10, 0, tzinfo=UTC).timestamp()

CPU5, CPU1H, CPU1D = "cpu_usage_avg_5m", "cpu_usage_max_avg_1h", "cpu_usage_max_avg_1d"
MEM5, MEM1H, MEM1D = "mem_usage_avg_5m", "mem_usage_max_avg_1h", "mem_usage_max_avg_1d"
ALL_METRICS = (CPU5, CPU1H, CPU1D, MEM5, MEM1H, MEM1D)


def crane(value: float, age: float = 60.0) -> str:
    """An annotation as crane's controller writes it, ``age`` seconds before NOW."""
    return format_annotation(value, NOW - age, SHANGHAI)


def loads(value: float | None = None, age: float = 60.0, **metrics: float) -> dict[str, str]:
    """Annotations: every default metric at ``value`` (if given), overridden per metric by keyword."""
    out = {m: crane(value, age) for m in ALL_METRICS} if value is not None else {}
    out.update({m: crane(v, age) for m, v in metrics.items()})
    return out


def node(name: str, annotations: Mapping[str, str] | None = None, cpu: str = "4") -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": dict(annotations or {}),
        },
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
    }


def pod(name: str = "p", owner_kind: str | None = None, node_name: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": f"uid-{name}"}
    if owner_kind:
        meta["ownerReferences"] = [
            {"apiVersion": "apps/v1", "kind": owner_kind, "name": "owner", "uid": "o", "controller": True}
        ]
    spec: dict[str, Any] = {
        "containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "100m"}}}]
    }
    if node_name:
        spec["nodeName"] = node_name
    return {"metadata": meta, "spec": spec, "status": {}}


def cluster(*nodes: dict[str, Any]) -> Cache:
    cache = Cache()
    for n in nodes:
        cache.on_node_add(n)
    return cache
