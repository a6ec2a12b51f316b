"""The dashboard's view of the cluster, kept current by informer callbacks (nodes, pods, events, leases).

Everything the browser shows is aggregated here, on the server, so the page receives compact JSON: per-node
requested/allocatable totals are maintained incrementally as pods come and go, and ``snapshot()`` turns them
into either one tile per node or, beyond ``tile_limit`` nodes, a heat map of buckets (5,000 tiles would be
unreadable and slow to draw). The raw objects are kept too: the explanation and the what-if panel hand them to
``kubesched simulate``'s engine.

Handlers run on the event loop (informers call them synchronously); ``generation`` counts changes so that the
server recomputes a snapshot only when something moved.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from kubesched.loadaware.annotations import (
    AnnotationError,
    active_duration,
    is_fresh,
    parse_annotation,
    time_zone,
)
from kubesched.scheduler.podinfo import aggregate_requests
from kubesched.scheduler.resources import resource_amount

Obj = dict[str, Any]

ZONE_LABEL = "topology.kubernetes.io/zone"
NODE_LEASE_NAMESPACE = "kube-node-lease"
# crane's annotations of the 5-minute averages, refreshed every 3 minutes in crane's default policy.
CPU_USAGE_KEY = "cpu_usage_avg_5m"
MEM_USAGE_KEY = "mem_usage_avg_5m"
DEFAULT_USAGE_PERIOD = 180.0
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})

DEFAULT_TILE_LIMIT = 300  # more nodes than this: heat map
DEFAULT_MAX_CELLS = 500  # heat-map buckets at most
MAX_PODS_PER_TILE = 60
MAX_PENDING_LISTED = 200
HOTTEST_LISTED = 12
# Heat-map cell fields, in the order of each cell's array (documented once instead of repeated 500 times).
CELL_FIELDS = (
    "first",
    "last",
    "nodes",
    "cpuAvg",
    "cpuMax",
    "memAvg",
    "memMax",
    "pods",
    "usageCpuAvg",
    "notReady",
)


def parse_time(value: Any) -> float | None:
    """RFC 3339 (as the API server writes it) to Unix seconds; None when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def pod_key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def pod_requests(spec: Mapping[str, Any]) -> tuple[int, int]:
    """(millicores, bytes) the pod requests, as the scheduler counts it (containers, init peak, pod-level
    requests, overhead)."""
    total = aggregate_requests(spec.get("containers") or (), spec.get("initContainers") or ())
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name in ("cpu", "memory"):
        if name in pod_level:
            total[name] = resource_amount(name, pod_level[name])
    for name, q in (spec.get("overhead") or {}).items():
        if name in ("cpu", "memory"):
            total[name] = total.get(name, 0) + resource_amount(name, q)
    return total.get("cpu", 0), total.get("memory", 0)


@dataclass(slots=True)
class NodeView:
    name: str
    zone: str = ""
    ready: bool = True
    unschedulable: bool = False
    cpu_alloc: int = 0  # millicores
    mem_alloc: int = 0  # bytes
    pods_alloc: int = 0
    cpu_req: int = 0
    mem_req: int = 0
    pods: set[str] = field(default_factory=set)
    # crane-style load: (fraction, annotation timestamp) or None.
    cpu_usage: tuple[float, float] | None = None
    mem_usage: tuple[float, float] | None = None

    def cpu_ratio(self) -> float:
        return self.cpu_req / self.cpu_alloc if self.cpu_alloc else 0.0

    def mem_ratio(self) -> float:
        return self.mem_req / self.mem_alloc if self.mem_alloc else 0.0


@dataclass(slots=True)
class PodView:
    key: str
    node: str
    phase: str
    scheduler: str
    cpu: int
    mem: int
    created: float
    deleting: bool


def _counts_on_node(p: PodView) -> bool:
    return bool(p.node) and p.phase not in TERMINAL_PHASES


class ClusterModel:
    def __init__(
        self,
        *,
        tile_limit: int = DEFAULT_TILE_LIMIT,
        max_cells: int = DEFAULT_MAX_CELLS,
        usage_period: float = DEFAULT_USAGE_PERIOD,
        lease_profiles: Mapping[str, list[str]] | None = None,
        clock: Any = time.time,
    ) -> None:
        self.tile_limit = tile_limit
        self.max_cells = max_cells
        self.usage_active = active_duration(usage_period)
        # "namespace/name" of a leader-election Lease -> the profiles (schedulerNames) its holder serves.
        self.lease_profiles = dict(lease_profiles or {})
        self.clock = clock
        self.zone = time_zone()
        self.nodes: dict[str, NodeView] = {}
        self.node_objects: dict[str, Obj] = {}
        self.pods: dict[str, PodView] = {}
        self.pod_objects: dict[str, Obj] = {}
        self.failed_scheduling: dict[str, tuple[str, str]] = {}  # pod key -> (event time, message)
        self.leases: dict[str, Obj] = {}
        self.generation = 0
        self.changed = asyncio.Event() if _has_loop() else None
        self._ts_memo: dict[str, float] = {}

    # -- bookkeeping --------------------------------------------------------------------------------------------

    def _bump(self) -> None:
        self.generation += 1
        if self.changed is not None:
            self.changed.set()

    def bind_loop(self) -> None:
        """Create the change event on the running loop (the model may be built before the loop runs)."""
        if self.changed is None:
            self.changed = asyncio.Event()

    # -- nodes --------------------------------------------------------------------------------------------------

    def on_node(self, obj: Obj, new: Obj | None = None) -> None:
        """Add or update handler (``new`` set: called as on_update(old, new))."""
        if new is not None:
            obj = new
        name = str((obj.get("metadata") or {}).get("name") or "")
        if not name:
            return
        view = self.nodes.get(name)
        if view is None:
            view = self.nodes[name] = NodeView(name)
            # Pods seen before their node (a relist can order them so) count as soon as it arrives.
            for p in self.pods.values():
                if p.node == name and _counts_on_node(p):
                    view.pods.add(p.key)
                    view.cpu_req += p.cpu
                    view.mem_req += p.mem
        meta = obj.get("metadata") or {}
        status = obj.get("status") or {}
        alloc = status.get("allocatable") or status.get("capacity") or {}
        view.zone = str((meta.get("labels") or {}).get(ZONE_LABEL) or "")
        view.unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
        view.ready = any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or ()
        )
        view.cpu_alloc = resource_amount("cpu", alloc.get("cpu", 0))
        view.mem_alloc = resource_amount("memory", alloc.get("memory", 0))
        view.pods_alloc = resource_amount("pods", alloc.get("pods", 0))
        annotations = meta.get("annotations") or {}
        view.cpu_usage = self._usage(annotations, CPU_USAGE_KEY)
        view.mem_usage = self._usage(annotations, MEM_USAGE_KEY)
        self.node_objects[name] = obj
        self._bump()

    def _usage(self, annotations: Mapping[str, str], key: str) -> tuple[float, float] | None:
        text = annotations.get(key)
        if not text:
            return None
        try:
            sample = parse_annotation(text, self.zone, timestamp_memo=self._ts_memo)
        except AnnotationError:
            return None
        if len(self._ts_memo) > 10_000:
            self._ts_memo.clear()
        return sample.value, sample.timestamp

    def on_node_delete(self, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if self.nodes.pop(name, None) is not None:
            self.node_objects.pop(name, None)
            self._bump()

    # -- pods ---------------------------------------------------------------------------------------------------

    def on_pod(self, obj: Obj, new: Obj | None = None) -> None:
        if new is not None:
            obj = new
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        key = pod_key(obj)
        cpu, mem = pod_requests(spec)
        view = PodView(
            key=key,
            node=str(spec.get("nodeName") or ""),
            phase=str((obj.get("status") or {}).get("phase") or "Pending"),
            scheduler=str(spec.get("schedulerName") or "default-scheduler"),
            cpu=cpu,
            mem=mem,
            created=parse_time(meta.get("creationTimestamp")) or 0.0,
            deleting=bool(meta.get("deletionTimestamp")),
        )
        self._forget_pod(key)
        self.pods[key] = view
        self.pod_objects[key] = obj
        if view.node:
            # Scheduled: an older FailedScheduling message no longer describes it.
            self.failed_scheduling.pop(key, None)
        if _counts_on_node(view):
            node = self.nodes.get(view.node)
            if node is not None:
                node.pods.add(key)
                node.cpu_req += view.cpu
                node.mem_req += view.mem
        self._bump()

    def _forget_pod(self, key: str) -> None:
        old = self.pods.pop(key, None)
        self.pod_objects.pop(key, None)
        if old is None or not _counts_on_node(old):
            return
        node = self.nodes.get(old.node)
        if node is not None and key in node.pods:
            node.pods.discard(key)
            node.cpu_req -= old.cpu
            node.mem_req -= old.mem

    def on_pod_delete(self, obj: Obj) -> None:
        key = pod_key(obj)
        self._forget_pod(key)
        self.failed_scheduling.pop(key, None)
        self._bump()

    # -- events -------------------------------------------------------------------------------------------------

    def on_event(self, obj: Obj, new: Obj | None = None) -> None:
        """A FailedScheduling event (core/v1 or events.k8s.io/v1 shape): remember the latest per pod."""
        if new is not None:
            obj = new
        if obj.get("reason") != "FailedScheduling":
            return
        regarding = obj.get("regarding") or obj.get("involvedObject") or {}
        if regarding.get("kind", "Pod") != "Pod":
            return
        key = f"{regarding.get('namespace') or 'default'}/{regarding.get('name') or ''}"
        pod = self.pods.get(key)
        if pod is not None and pod.node:
            return  # an old attempt's event arriving after the pod was bound
        series = obj.get("series") or {}
        when = str(
            series.get("lastObservedTime")
            or obj.get("lastTimestamp")
            or obj.get("eventTime")
            or (obj.get("metadata") or {}).get("creationTimestamp")
            or ""
        )
        message = str(obj.get("note") or obj.get("message") or "")
        known = self.failed_scheduling.get(key)
        if known is not None and known[0] > when:
            return
        self.failed_scheduling[key] = (when, message)
        self._bump()

    def on_event_delete(self, obj: Obj) -> None:
        """Events expire; the message stays while the pod is pending (it is still the latest word)."""

    # -- leases -------------------------------------------------------------------------------------------------

    def on_lease(self, obj: Obj, new: Obj | None = None) -> None:
        if new is not None:
            obj = new
        meta = obj.get("metadata") or {}
        if meta.get("namespace") == NODE_LEASE_NAMESPACE:
            return  # node heartbeats, not leader election
        self.leases[f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"] = obj
        self._bump()

    def on_lease_delete(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if self.leases.pop(f"{meta.get('namespace') or ''}/{meta.get('name') or ''}", None) is not None:
            self._bump()

    # -- views --------------------------------------------------------------------------------------------------

    def sorted_nodes(self) -> list[NodeView]:
        """Nodes by zone then name: neighbours in the heat map share a zone."""
        return sorted(self.nodes.values(), key=lambda n: (n.zone, n.name))

    def tile(self, n: NodeView, now: float) -> Obj:
        pods = sorted(n.pods)
        return {
            "name": n.name,
            "zone": n.zone,
            "ready": n.ready,
            "unschedulable": n.unschedulable,
            "cpu": [n.cpu_req, n.cpu_alloc],
            "memory": [n.mem_req, n.mem_alloc],
            "pods": [len(pods), n.pods_alloc],
            "usage": self._usage_json(n, now),
            "podList": [[k, self.pods[k].phase] for k in pods[:MAX_PODS_PER_TILE] if k in self.pods],
        }

    def _usage_json(self, n: NodeView, now: float) -> Obj | None:
        if n.cpu_usage is None and n.mem_usage is None:
            return None
        out: Obj = {}
        for name, sample in (("cpu", n.cpu_usage), ("memory", n.mem_usage)):
            if sample is None:
                continue
            value, stamp = sample
            out[name] = {
                "value": round(value, 4),
                "ageSeconds": round(max(0.0, now - stamp), 1),
                "fresh": is_fresh(stamp, self.usage_active, now),
            }
        return out

    def heatmap(self, nodes: list[NodeView]) -> Obj:
        """Buckets of consecutive nodes (zone, name order): averages and maxima of requested CPU and memory."""
        size = max(1, math.ceil(len(nodes) / self.max_cells))
        cells: list[list[Any]] = []
        for start in range(0, len(nodes), size):
            group = nodes[start : start + size]
            cpu = [n.cpu_ratio() for n in group]
            mem = [n.mem_ratio() for n in group]
            usage = [n.cpu_usage[0] for n in group if n.cpu_usage is not None]
            cells.append(
                [
                    group[0].name,
                    group[-1].name,
                    len(group),
                    round(sum(cpu) / len(group), 4),
                    round(max(cpu), 4),
                    round(sum(mem) / len(group), 4),
                    round(max(mem), 4),
                    sum(len(n.pods) for n in group),
                    round(sum(usage) / len(usage), 4) if usage else None,
                    sum(1 for n in group if not n.ready or n.unschedulable),
                ]
            )
        return {"nodesPerCell": size, "fields": list(CELL_FIELDS), "cells": cells}

    def nodes_between(self, first: str, last: str) -> list[Obj]:
        """Tiles of the nodes from ``first`` to ``last`` in heat-map order (drilling into one cell)."""
        now = self.clock()
        out: list[Obj] = []
        inside = False
        for n in self.sorted_nodes():
            if n.name == first:
                inside = True
            if inside:
                out.append(self.tile(n, now))
                if len(out) >= self.tile_limit:
                    break
            if n.name == last and inside:
                break
        return out

    def pending(self, now: float) -> tuple[int, list[Obj]]:
        waiting = [p for p in self.pods.values() if not p.node and p.phase not in TERMINAL_PHASES]
        waiting.sort(key=lambda p: (p.created, p.key))
        out: list[Obj] = []
        for p in waiting[:MAX_PENDING_LISTED]:
            item: Obj = {
                "pod": p.key,
                "scheduler": p.scheduler,
                "ageSeconds": round(max(0.0, now - p.created), 1) if p.created else None,
                "cpu": p.cpu,
                "memory": p.mem,
            }
            failed = self.failed_scheduling.get(p.key)
            if failed is not None:
                item["message"] = failed[1]
                item["since"] = failed[0]
            if p.deleting:
                item["deleting"] = True
            out.append(item)
        return len(waiting), out

    def lease_rows(self, now: float) -> list[Obj]:
        rows: list[Obj] = []
        for key, lease in sorted(self.leases.items()):
            spec = lease.get("spec") or {}
            renew = parse_time(spec.get("renewTime"))
            duration = spec.get("leaseDurationSeconds")
            expired = (
                renew is not None and isinstance(duration, int | float) and now > renew + float(duration)
            )
            rows.append(
                {
                    "lease": key,
                    "holder": spec.get("holderIdentity") or "",
                    "since": spec.get("acquireTime") or "",
                    "renewed": spec.get("renewTime") or "",
                    "durationSeconds": duration,
                    "transitions": spec.get("leaseTransitions") or 0,
                    "expired": bool(expired) or not spec.get("holderIdentity"),
                    "profiles": list(self.lease_profiles.get(key, [])),
                }
            )
        return rows

    def snapshot(self) -> Obj:
        """Everything the page shows, compact: tiles up to ``tile_limit`` nodes, else a heat map."""
        now = self.clock()
        nodes = self.sorted_nodes()
        pending_total, pending = self.pending(now)
        cpu_req = sum(n.cpu_req for n in nodes)
        cpu_alloc = sum(n.cpu_alloc for n in nodes)
        mem_req = sum(n.mem_req for n in nodes)
        mem_alloc = sum(n.mem_alloc for n in nodes)
        out: Obj = {
            "generation": self.generation,
            "time": now,
            "summary": {
                "nodes": len(nodes),
                "readyNodes": sum(1 for n in nodes if n.ready),
                "pods": len(self.pods),
                "boundPods": sum(len(n.pods) for n in nodes),
                "pending": pending_total,
                "cpu": [cpu_req, cpu_alloc],
                "memory": [mem_req, mem_alloc],
                "withUsage": sum(1 for n in nodes if n.cpu_usage is not None),
            },
            "pending": pending,
            "leases": self.lease_rows(now),
        }
        if len(nodes) <= self.tile_limit:
            out["mode"] = "tiles"
            out["nodes"] = [self.tile(n, now) for n in nodes]
        else:
            out["mode"] = "heatmap"
            out["heatmap"] = self.heatmap(nodes)
            hottest = sorted(nodes, key=lambda n: (-n.cpu_ratio(), n.name))[:HOTTEST_LISTED]
            out["hottest"] = [self.tile(n, now) for n in hottest]
        return out

    # -- raw objects for the simulation -------------------------------------------------------------------------

    def node_list(self) -> list[Obj]:
        return list(self.node_objects.values())

    def pod_list(self) -> list[Obj]:
        return list(self.pod_objects.values())

    def pod_object(self, key: str) -> Obj | None:
        return self.pod_objects.get(key)

    def pending_keys(self) -> Iterable[str]:
        return (p.key for p in self.pods.values() if not p.node and p.phase not in TERMINAL_PHASES)


def _has_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
