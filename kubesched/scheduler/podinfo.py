"""``PodInfo``: what the scheduler needs from a pod, parsed once per pod object version.

Plugins read these fields instead of walking the pod dict on every cycle. A PodInfo is immutable once built;
a new object version (an informer update) gets a new PodInfo.

Resource requests follow upstream's ``PodRequests``: the sum of the regular containers, raised to the largest
init-container step (a restartable "sidecar" init container keeps running, so it adds to everything after it),
replaced by pod-level ``spec.resources.requests`` where set, plus ``spec.overhead``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

import numpy as np

from kubesched.scheduler.resources import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    PODS,
    ResourceIndex,
    is_hugepages,
    resource_amount,
)

DEFAULT_SCHEDULER_NAME = "default-scheduler"
DEFAULT_PREEMPTION_POLICY = "PreemptLowerPriority"
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})
_CORE_REQUESTS = frozenset({"cpu", "memory", "ephemeral-storage"})


@lru_cache(maxsize=4096)
def normalized_image_name(name: str) -> str:
    """Upstream ImageLocality's normalisation: add ``:latest`` when the reference has no tag or digest.

    Nothing else is rewritten (``nginx`` does not become ``docker.io/library/nginx``), exactly as upstream.
    """
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


def parse_timestamp(value: Any) -> float | None:
    """An RFC 3339 timestamp as seconds since the epoch (None if absent or unparsable)."""
    if not value or not isinstance(value, str):
        return None
    return _parse_timestamp(value)


@lru_cache(maxsize=4096)
def _parse_timestamp(value: str) -> float | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    reqs = (container.get("resources") or {}).get("requests") or {}
    return {name: resource_amount(name, q) for name, q in reqs.items() if name != "pods"}


def _nonzero_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """cpu/memory with upstream's defaults for a *missing* request (an explicit 0 stays 0)."""
    reqs = (container.get("resources") or {}).get("requests") or {}
    cpu = reqs.get("cpu")
    mem = reqs.get("memory")
    return {
        "cpu": DEFAULT_MILLI_CPU_REQUEST if cpu is None else resource_amount("cpu", cpu),
        "memory": DEFAULT_MEMORY_REQUEST if mem is None else resource_amount("memory", mem),
    }


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max_into(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if k not in into or v > into[k]:
            into[k] = v


def aggregate_requests(
    containers: Iterable[Mapping[str, Any]],
    init_containers: Iterable[Mapping[str, Any]],
    per_container: Any = _container_requests,
) -> dict[str, int]:
    """Sum of containers, raised to the peak init-container step (sidecar rules of KEP-753)."""
    total: dict[str, int] = {}
    for c in containers:
        _add(total, per_container(c))
    init_peak: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for c in init_containers:
        reqs = per_container(c)
        if c.get("restartPolicy") == "Always":
            # A sidecar runs alongside the regular containers and every later init container.
            _add(total, reqs)
            _add(sidecars, reqs)
            step = dict(sidecars)
        else:
            step = dict(reqs)
            _add(step, sidecars)
        _max_into(init_peak, step)
    _max_into(total, init_peak)
    return total


def _is_pod_level_resource(name: str) -> bool:
    return name in ("cpu", "memory") or is_hugepages(name)


def _has_cpu_or_memory(resources: Mapping[str, Any] | None) -> bool:
    if not resources:
        return False
    for section in ("requests", "limits"):
        for name, q in (resources.get(section) or {}).items():
            if name in ("cpu", "memory") and resource_amount(name, q) != 0:
                return True
    return False


@dataclass(frozen=True, slots=True)
class _Requests:
    vector: np.ndarray
    nonzero_cpu: int
    nonzero_mem: int
    scalar_names: tuple[str, ...]
    best_effort: bool


def _items(d: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...] | None:
    return tuple(d.items()) if d else None


def _resources_key(spec: Mapping[str, Any]) -> tuple[Any, ...]:
    """Everything compute_requests reads from a spec, as a hashable key (pods of one workload share it)."""
    parts: list[Any] = []
    for c in spec.get("containers") or ():
        r = c.get("resources")
        parts.append((_items(r.get("requests")), _items(r.get("limits"))) if r else None)
    for c in spec.get("initContainers") or ():
        r = c.get("resources")
        parts.append(
            (
                "init",
                c.get("restartPolicy"),
                _items(r.get("requests")) if r else None,
                _items(r.get("limits")) if r else None,
            )
        )
    pod_level = spec.get("resources")
    overhead = spec.get("overhead")
    if pod_level or overhead:
        parts.append(
            (
                "pod",
                _items((pod_level or {}).get("requests")),
                _items((pod_level or {}).get("limits")),
                _items(overhead),
            )
        )
    return tuple(parts)


def compute_requests(spec: Mapping[str, Any], res: ResourceIndex) -> _Requests:
    """``_compute_requests``, memoised per ResourceIndex on the resource fields of the spec."""
    try:
        key = ("requests", _resources_key(spec))
        hit = res.memo.get(key)
    except TypeError:  # an unhashable quantity: just compute
        return _compute_requests(spec, res)
    if hit is None:
        hit = _compute_requests(spec, res)
        if len(res.memo) > 8192:
            res.memo.clear()
        res.memo[key] = hit
    return hit


def _compute_requests(spec: Mapping[str, Any], res: ResourceIndex) -> _Requests:
    containers = spec.get("containers") or []
    inits = spec.get("initContainers") or []
    raw = aggregate_requests(containers, inits)
    nonzero = aggregate_requests(containers, inits, _nonzero_requests)
    pod_level = (spec.get("resources") or {}).get("requests") or {}
    for name, q in pod_level.items():
        if _is_pod_level_resource(name):
            raw[name] = nonzero[name] = resource_amount(name, q)
    for name, q in (spec.get("overhead") or {}).items():
        amount = resource_amount(name, q)
        raw[name] = raw.get(name, 0) + amount
        if name in nonzero:
            nonzero[name] += amount
    raw["pods"] = 1
    scalars = tuple(sorted(n for n, v in raw.items() if v and n not in _CORE_REQUESTS and n != "pods"))
    best_effort = not _has_cpu_or_memory(spec.get("resources")) and not any(
        _has_cpu_or_memory(c.get("resources")) for c in (*containers, *inits)
    )
    return _Requests(res.vector(raw), nonzero.get("cpu", 0), nonzero.get("memory", 0), scalars, best_effort)


def _host_ports(containers: Iterable[Mapping[str, Any]]) -> tuple[tuple[str, str, int], ...]:
    ports = []
    for c in containers:
        for p in c.get("ports") or ():
            hp = p.get("hostPort") or 0
            if hp > 0:
                ports.append((p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0", int(hp)))
    return tuple(ports)


def _owner_kind(meta: Mapping[str, Any]) -> str:
    owners = meta.get("ownerReferences") or []
    for o in owners:
        if o.get("controller"):
            return o.get("kind") or ""
    return owners[0].get("kind") or "" if owners else ""


class PodInfo:
    """A pod as the scheduler sees it. Build with ``PodInfo.from_pod``; treat as read-only (sequences are
    tuples for that reason)."""

    __slots__ = (
        "annotations",
        "creation_ts",
        "deletion_ts",
        "host_ports",
        "images",
        "is_best_effort",
        "key",
        "labels",
        "name",
        "namespace",
        "node_name",
        "node_selector",
        "nominated_node_name",
        "nonzero_cpu",
        "nonzero_mem",
        "num_containers",
        "owner_kind",
        "phase",
        "pod",
        "pod_affinity",
        "pod_anti_affinity",
        "preemption_policy",
        "preferred_node_affinity",
        "priority",
        "requests",
        "required_node_affinity",
        "resource_version",
        "scalar_names",
        "scheduler_name",
        "scheduling_gates",
        "tolerations",
        "tolerations_key",
        "topology_spread_constraints",
        "uid",
    )

    pod: dict[str, Any]
    uid: str
    namespace: str
    name: str
    key: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    resource_version: str
    node_name: str
    scheduler_name: str
    priority: int
    preemption_policy: str
    creation_ts: float
    deletion_ts: float | None
    scheduling_gates: tuple[str, ...]
    nominated_node_name: str
    phase: str
    requests: np.ndarray
    nonzero_cpu: int
    nonzero_mem: int
    is_best_effort: bool
    scalar_names: tuple[str, ...]
    host_ports: tuple[tuple[str, str, int], ...]
    images: tuple[str, ...]
    num_containers: int
    tolerations: list[dict[str, Any]]
    tolerations_key: tuple[tuple[str, str, str, str], ...]
    node_selector: Mapping[str, str]
    required_node_affinity: list[dict[str, Any]] | None
    preferred_node_affinity: list[tuple[int, dict[str, Any]]]
    topology_spread_constraints: list[dict[str, Any]]
    pod_affinity: dict[str, Any] | None
    pod_anti_affinity: dict[str, Any] | None
    owner_kind: str

    @classmethod
    def from_pod(cls, pod: dict[str, Any], res: ResourceIndex) -> PodInfo:
        spec = pod.get("spec") or {}
        proto = _template_of(spec, res)
        if proto is not None:
            # A pod of a known template (same spec but for nodeName): its spec-derived fields are the template's.
            self = _copy_slots(proto, object.__new__, cls)
            self._read_pod_fields(pod, spec)
            return self
        self = cls.__new__(cls)
        self._read_pod_fields(pod, spec)
        self._read_spec_fields(spec, res)
        _remember_template(spec, self, res)
        return self

    def _read_pod_fields(self, pod: dict[str, Any], spec: Mapping[str, Any]) -> None:
        """The fields read from metadata, status and ``spec.nodeName`` (everything but the rest of the spec)."""
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        self.pod = pod
        self.uid = meta.get("uid") or ""
        self.namespace = namespace = meta.get("namespace") or "default"
        self.name = name = meta.get("name") or ""
        self.key = f"{namespace}/{name}"
        self.labels = meta.get("labels") or {}
        self.annotations = meta.get("annotations") or {}
        self.resource_version = meta.get("resourceVersion") or ""
        self.node_name = spec.get("nodeName") or ""
        self.creation_ts = parse_timestamp(meta.get("creationTimestamp")) or 0.0
        self.deletion_ts = parse_timestamp(meta.get("deletionTimestamp"))
        self.nominated_node_name = status.get("nominatedNodeName") or ""
        self.phase = status.get("phase") or ""
        self.owner_kind = _owner_kind(meta)

    def _read_spec_fields(self, spec: Mapping[str, Any], res: ResourceIndex) -> None:
        """The fields derived from the spec except ``nodeName`` (what pods of one template share)."""
        self.scheduler_name = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        self.priority = int(spec.get("priority") or 0)
        self.preemption_policy = spec.get("preemptionPolicy") or DEFAULT_PREEMPTION_POLICY
        self.scheduling_gates = tuple(g.get("name", "") for g in spec.get("schedulingGates") or ())

        reqs = compute_requests(spec, res)
        self.requests = reqs.vector
        self.nonzero_cpu = reqs.nonzero_cpu
        self.nonzero_mem = reqs.nonzero_mem
        self.scalar_names = reqs.scalar_names
        self.is_best_effort = reqs.best_effort

        containers = spec.get("containers") or []
        inits = spec.get("initContainers") or []
        self.host_ports = _host_ports(containers)
        self.images = tuple(normalized_image_name(c.get("image") or "") for c in (*inits, *containers))
        self.num_containers = len(inits) + len(containers)

        self.tolerations = spec.get("tolerations") or []
        self.tolerations_key = tuple(
            (t.get("key") or "", t.get("operator") or "", t.get("value") or "", t.get("effect") or "")
            for t in self.tolerations
        )
        self.node_selector = spec.get("nodeSelector") or {}
        affinity = spec.get("affinity") or {}
        node_aff = affinity.get("nodeAffinity") or {}
        required = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
        self.required_node_affinity = (required.get("nodeSelectorTerms") or []) if required else None
        self.preferred_node_affinity = [
            (int(p.get("weight") or 0), p.get("preference") or {})
            for p in node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()
        ]
        self.topology_spread_constraints = spec.get("topologySpreadConstraints") or []
        self.pod_affinity = affinity.get("podAffinity")
        self.pod_anti_affinity = affinity.get("podAntiAffinity")

    # --- derived ------------------------------------------------------------------------------------------

    @property
    def is_terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    def request_row(self, width: int) -> np.ndarray:
        """``requests`` widened with zeros to ``width`` columns (the index may have grown since parsing)."""
        n = len(self.requests)
        if n >= width:
            return self.requests
        return np.concatenate((self.requests, np.zeros(width - n, dtype=np.int64)))

    def request_of(self, col: int) -> int:
        return int(self.requests[col]) if col < len(self.requests) else 0

    def assumed_on(self, node_name: str) -> PodInfo:
        """A copy with ``node_name`` set, as upstream's assumed pod (the raw ``pod`` dict is shared)."""
        clone = _copy_pod_info(self)
        clone.node_name = node_name
        return clone

    def bound_version(self, pod: dict[str, Any]) -> PodInfo | None:
        """The PodInfo of ``pod``, a later version of this pod that only differs in ``spec.nodeName`` (the
        binding the scheduler asked for), metadata and status: this one's spec-derived fields with the rest
        read afresh. None if the spec changed otherwise (then ``from_pod``)."""
        spec = pod.get("spec") or {}
        mine = self.pod.get("spec") or {}
        if len(spec) - ("nodeName" in spec) != len(mine) - ("nodeName" in mine):
            return None
        for key, value in spec.items():
            if key != "nodeName" and mine.get(key, _MISSING) != value:
                return None
        meta = pod.get("metadata") or {}
        if (meta.get("uid") or "") != self.uid:
            return None
        status = pod.get("status") or {}
        clone = _copy_pod_info(self)
        clone.pod = pod
        clone.labels = meta.get("labels") or {}
        clone.annotations = meta.get("annotations") or {}
        clone.resource_version = meta.get("resourceVersion") or ""
        clone.node_name = spec.get("nodeName") or ""
        clone.creation_ts = parse_timestamp(meta.get("creationTimestamp")) or 0.0
        clone.deletion_ts = parse_timestamp(meta.get("deletionTimestamp"))
        clone.nominated_node_name = status.get("nominatedNodeName") or ""
        clone.phase = status.get("phase") or ""
        clone.owner_kind = _owner_kind(meta)
        return clone

    def __repr__(self) -> str:
        return f"PodInfo({self.key}, uid={self.uid!r}, node={self.node_name!r})"


_MISSING = object()


def _make_copier(slots: tuple[str, ...]) -> Any:
    # A straight-line copy of every slot: several times faster than a getattr/setattr loop, and PodInfo is
    # copied once per scheduled pod (assume) and once per binding seen (bound_version).
    body = "".join(f"    c.{name} = src.{name}\n" for name in slots)
    namespace: dict[str, Any] = {}
    exec(f"def copy(src, new, cls):\n    c = new(cls)\n{body}    return c\n", namespace)
    return namespace["copy"]


_copy_slots: Callable[..., PodInfo] = _make_copier(PodInfo.__slots__)


def _copy_pod_info(src: PodInfo) -> PodInfo:
    return _copy_slots(src, object.__new__, PodInfo)


# --- spec templates ---------------------------------------------------------------------------------------------
#
# Pods of one Deployment, Job or benchmark share their spec but for ``nodeName``, and the spec-derived half of a
# PodInfo (requests, images, ports, tolerations, affinity...) is then the same. A template is the first PodInfo
# built from such a spec; a later pod whose spec is *equal* to the template's (a deep comparison, done in C by
# ``dict.__eq__``; ``nodeName`` aside) copies it and reads only its own metadata and status. The templates live in
# ``ResourceIndex.memo`` (the request vectors depend on the index), a few per set of top-level spec keys.

_TEMPLATES_PER_SHAPE = 4
_NODE_NAME = "nodeName"


def _same_spec(spec: Mapping[str, Any], template: Mapping[str, Any]) -> bool:
    """``spec == template`` with ``nodeName`` left out on both sides (the same keys are known to be present)."""
    if _NODE_NAME not in spec:
        return spec == template
    for key, value in spec.items():
        if key != _NODE_NAME:
            other = template[key]
            if other is not value and other != value:
                return False
    return True


def _template_of(spec: Mapping[str, Any], res: ResourceIndex) -> PodInfo | None:
    found = res.memo.get(("spec-template", *spec))
    if found is None:
        return None
    for template_spec, proto in found:
        if _same_spec(spec, template_spec):
            return proto
    return None


def _remember_template(spec: Mapping[str, Any], pi: PodInfo, res: ResourceIndex) -> None:
    key = ("spec-template", *spec)
    memo = res.memo
    found = memo.get(key)
    if found is None:
        if len(memo) > 8192:
            memo.clear()
        memo[key] = [(spec, pi)]
        return
    found.insert(0, (spec, pi))  # the newest first: pods of a workload tend to arrive together
    del found[_TEMPLATES_PER_SHAPE:]


@dataclass(slots=True)
class QueuedPodInfo:
    """A pod waiting in the scheduling queue, with its queueing history."""

    pod_info: PodInfo
    timestamp: float = 0.0
    attempts: int = 0
    initial_attempt_ts: float | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    pending_plugins: set[str] = field(default_factory=set)
    gated: bool = False

    @property
    def pod(self) -> PodInfo:
        return self.pod_info

    @property
    def priority(self) -> int:
        return self.pod_info.priority


__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "PODS",
    "PodInfo",
    "QueuedPodInfo",
    "aggregate_requests",
    "compute_requests",
    "normalized_image_name",
    "parse_timestamp",
]
