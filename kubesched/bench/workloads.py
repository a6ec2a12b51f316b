"""The benchmark workloads, shaped like scheduler_perf's (``test/integration/scheduler_perf``).

Each workload is a set of nodes, initial pods (scheduled first, not measured) and measured pods, with upstream's
node and pod templates: nodes of 4 CPU / 32Gi / 110 pods; pods of 100m / 500Mi with the workload's constraints.
Every node carries ``kubernetes.io/hostname``; zone labels follow upstream's ``labelNodePrepareStrategy`` (all
``zone1`` for the node- and pod-affinity workloads, ``moon-1..3`` round robin for TopologySpreading).

Objects are plain dicts as the API would hold them; the in-process mode adds a uid and resourceVersion itself,
the end-to-end mode lets the API server do it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

HOSTNAME_LABEL = "kubernetes.io/hostname"
ZONE_LABEL = "topology.kubernetes.io/zone"
DEFAULT_NAMESPACE = "default"
NODE_CPU = "4"
NODE_MEMORY = "32Gi"
NODE_PODS = 110
PAUSE_IMAGE = "registry.k8s.io/pause:3.10.1"
# Load annotations the Dynamic plugin reads (crane's metric names), written as "<value>,<timestamp>".
LOAD_ANNOTATIONS = (
    "cpu_usage_avg_5m",
    "cpu_usage_max_avg_1h",
    "cpu_usage_max_avg_1d",
    "mem_usage_avg_5m",
    "mem_usage_max_avg_1h",
    "mem_usage_max_avg_1d",
)
DYNAMIC_PLUGIN = "Dynamic"
# Unschedulable: a pod that fits nowhere (9 CPU on 4-CPU nodes) arrives every this many seconds.
CHURN_INTERVAL = 0.2
# SteadyLoad keeps this many seconds of arrivals alive; older pods are deleted as new ones arrive.
STEADY_LIVE_SECONDS = 10.0


def node_name(index: int) -> str:
    return f"bench-node-{index:05d}"


def make_node(
    index: int, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> Obj:
    """upstream ``node-default.yaml``: capacity (and allocatable) 4 CPU, 32Gi, 110 pods; Ready."""
    name = node_name(index)
    capacity = {"cpu": NODE_CPU, "memory": NODE_MEMORY, "pods": str(NODE_PODS)}
    meta: Obj = {
        "name": name,
        "labels": {HOSTNAME_LABEL: name, "kubernetes.io/os": "linux", **(labels or {})},
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
            "phase": "Running",
        },
    }


def make_pod(
    name: str,
    namespace: str,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    labels: dict[str, str] | None = None,
    priority: int = 0,
    affinity: Obj | None = None,
    spread: list[Obj] | None = None,
    limits: bool = True,
    grace_period: int | None = None,
) -> Obj:
    """upstream ``pod-default.yaml`` (one pause container, requests = limits) plus the given constraints."""
    resources: Obj = {"requests": {"cpu": cpu, "memory": memory}}
    if limits:
        resources["limits"] = {"cpu": cpu, "memory": memory}
    spec: Obj = {
        "containers": [
            {"name": "pause", "image": PAUSE_IMAGE, "ports": [{"containerPort": 80}], "resources": resources}
        ],
        "priority": priority,
    }
    if affinity:
        spec["affinity"] = affinity
    if spread:
        spec["topologySpreadConstraints"] = spread
    if grace_period is not None:
        spec["terminationGracePeriodSeconds"] = grace_period
    meta: Obj = {"name": name, "namespace": namespace}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


# --- pod shapes (upstream templates) ------------------------------------------------------------------------


def default_pod(name: str, namespace: str) -> Obj:
    return make_pod(name, namespace)


def node_affinity_pod(name: str, namespace: str) -> Obj:
    """``pod-with-node-affinity.yaml``: zone In [zone1, zone2]."""
    term = {"matchExpressions": [{"key": ZONE_LABEL, "operator": "In", "values": ["zone1", "zone2"]}]}
    affinity = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}
    }
    return make_pod(name, namespace, affinity=affinity)


def topology_spreading_pod(name: str, namespace: str) -> Obj:
    """``pod-with-topology-spreading.yaml``: maxSkew 5 over zones, DoNotSchedule, selecting color=blue."""
    spread = [
        {
            "maxSkew": 5,
            "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"color": "blue"}},
        }
    ]
    return make_pod(name, namespace, labels={"color": "blue"}, spread=spread)


def pod_anti_affinity_pod(name: str, namespace: str) -> Obj:
    """``pod-with-pod-anti-affinity.yaml``: no two color=green pods (of sched-0/sched-1) on one host."""
    term = {
        "labelSelector": {"matchLabels": {"color": "green"}},
        "topologyKey": HOSTNAME_LABEL,
        "namespaces": ["sched-1", "sched-0"],
    }
    affinity = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return make_pod(name, namespace, labels={"color": "green"}, affinity=affinity)


def pod_affinity_pod(name: str, namespace: str) -> Obj:
    """``pod-with-pod-affinity.yaml``: in a zone holding a color=blue pod (of sched-0/sched-1)."""
    term = {
        "labelSelector": {"matchLabels": {"color": "blue"}},
        "topologyKey": ZONE_LABEL,
        "namespaces": ["sched-1", "sched-0"],
    }
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return make_pod(name, namespace, labels={"color": "blue"}, affinity=affinity)


def low_priority_pod(name: str, namespace: str) -> Obj:
    """``pod-low-priority.yaml``: 900m, so four fill a 4-CPU node; deleted at once when preempted."""
    return make_pod(name, namespace, cpu="900m", grace_period=0)


def high_priority_pod(name: str, namespace: str) -> Obj:
    """``pod-high-priority.yaml``: priority 10, 3 CPU: must preempt three low-priority pods to fit."""
    return make_pod(name, namespace, cpu="3000m", priority=10)


def unschedulable_pod(name: str, namespace: str) -> Obj:
    """``pod-high-priority-large-cpu.yaml``: priority 10, 9 CPU: fits no 4-CPU node, preemption cannot help."""
    return make_pod(name, namespace, cpu="9", priority=10, limits=False)


# --- workloads ----------------------------------------------------------------------------------------------

PodFactory = Callable[[str, str], Obj]
NodeLabels = Callable[[int], dict[str, str]]


# SchedulingWithPVCs: every pod mounts its own claim, bound to a CSI volume (scheduler_perf's SchedulingCSIPVs).
CSI_DRIVER = "ebs.csi.aws.com"
CSI_VOLUME_LIMIT = 39


def claim_name(pod_name: str) -> str:
    return f"pvc-{pod_name}"


def pvc_pod(name: str, namespace: str) -> Obj:
    """A default pod with one claim of its own (``pvc-<pod>``), as upstream's ``pod-with-pvc`` template."""
    pod = make_pod(name, namespace)
    pod["spec"]["volumes"] = [{"name": "vol", "persistentVolumeClaim": {"claimName": claim_name(name)}}]
    return pod


def bound_volume(pod_name: str, namespace: str) -> list[Obj]:
    """The PV and the PVC of one pod, bound to each other as the PV controller leaves them."""
    claim, volume = claim_name(pod_name), f"pv-{namespace}-{pod_name}"
    pv: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": volume, "annotations": {"pv.kubernetes.io/bound-by-controller": "yes"}},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "csi": {"driver": CSI_DRIVER, "volumeHandle": volume},
            "claimRef": {"kind": "PersistentVolumeClaim", "namespace": namespace, "name": claim},
        },
        "status": {"phase": "Bound"},
    }
    pvc: Obj = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": claim,
            "namespace": namespace,
            "annotations": {
                "pv.kubernetes.io/bind-completed": "yes",
                "pv.kubernetes.io/bound-by-controller": "yes",
            },
        },
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "",
            "volumeName": volume,
        },
        "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"}},
    }
    return [pv, pvc]


def csi_node(index: int) -> Obj:
    name = node_name(index)
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {
            "drivers": [{"name": CSI_DRIVER, "nodeID": name, "allocatable": {"count": CSI_VOLUME_LIMIT}}]
        },
    }


def _no_labels(index: int) -> dict[str, str]:
    return {}


def _zone1(index: int) -> dict[str, str]:
    return {ZONE_LABEL: "zone1"}


def _moon_zones(index: int) -> dict[str, str]:
    return {ZONE_LABEL: f"moon-{index % 3 + 1}"}


@dataclass(frozen=True)
class Workload:
    """One benchmark: nodes, initial pods (scheduled, not measured), measured pods, and what arrives beside."""

    name: str
    nodes: int
    init_pods: int
    measured_pods: int
    description: str
    init_pod: PodFactory = default_pod
    measured_pod: PodFactory = default_pod
    node_labels: NodeLabels = _no_labels
    init_namespace: str = DEFAULT_NAMESPACE
    measured_namespace: str = DEFAULT_NAMESPACE
    # Pods that fit nowhere, arriving every CHURN_INTERVAL seconds while the measured pods are scheduled.
    unschedulable_churn: bool = False
    # A plugin the workload needs beyond the default profile (skipped with a message when it is not registered).
    needs_plugin: str | None = None
    load_annotations: bool = False
    # When set, the default number of initial pods follows the node count (Preemption fills every node).
    init_pods_per_node: int | None = None
    # Steady load: measured pods arrive at this rate (pods/s) instead of all at once; with ``live_pods`` set,
    # the oldest bound measured pod is deleted as each new one arrives once that many exist (churn).
    arrival_rate: float = 0.0
    live_pods: int | None = None
    # Start-up: the initial pods are created already bound (spread round robin), the scheduler process is
    # started once everything exists, and the time from its start to its first binding is what is measured.
    startup: bool = False
    # Every pod has a claim of its own: ``volume_objects`` are the PVs, PVCs and CSINodes to create first.
    volumes: bool = False

    def sized(
        self,
        nodes: int | None = None,
        init_pods: int | None = None,
        pods: int | None = None,
        rate: float | None = None,
        duration: float | None = None,
    ) -> Workload:
        """The workload at another size; unset sizes keep the defaults (scaled with ``nodes`` where needed).
        ``rate`` and ``duration`` (seconds) apply to steady-load workloads: the measured pods are then
        ``rate * duration`` unless ``pods`` is given, and the live pods stay ten seconds' worth."""
        n = self.nodes if nodes is None else nodes
        if init_pods is None:
            init_pods = self.init_pods if self.init_pods_per_node is None else self.init_pods_per_node * n
        measured = self.measured_pods if pods is None else pods
        arrival, live = self.arrival_rate, self.live_pods
        if arrival and (rate is not None or duration is not None):
            arrival = rate if rate is not None else arrival
            if pods is None:
                seconds = duration if duration is not None else self.measured_pods / self.arrival_rate
                measured = max(1, round(arrival * seconds))
            if live is not None:
                live = max(1, round(arrival * STEADY_LIVE_SECONDS))
        return dataclasses.replace(
            self, nodes=n, init_pods=init_pods, measured_pods=measured, arrival_rate=arrival, live_pods=live
        )

    @property
    def namespaces(self) -> list[str]:
        names = [self.init_namespace, self.measured_namespace]
        if self.unschedulable_churn:
            names.append(DEFAULT_NAMESPACE)
        return sorted(set(names))

    def node_objects(self, annotations: Callable[[int], dict[str, str]] | None = None) -> list[Obj]:
        return [
            make_node(i, self.node_labels(i), annotations(i) if annotations is not None else None)
            for i in range(self.nodes)
        ]

    def init_pod_objects(self) -> list[Obj]:
        pods = [self.init_pod(f"init-{i:06d}", self.init_namespace) for i in range(self.init_pods)]
        if self.startup:
            for i, pod in enumerate(pods):
                pod["spec"]["nodeName"] = node_name(i % self.nodes)
        return pods

    def measured_pod_objects(self) -> list[Obj]:
        return [self.measured_pod(f"pod-{i:06d}", self.measured_namespace) for i in range(self.measured_pods)]

    def churn_pod(self, index: int) -> Obj:
        return unschedulable_pod(f"unschedulable-{index:06d}", DEFAULT_NAMESPACE)

    def volume_objects(self) -> list[Obj]:
        """PVs and PVCs of every initial and measured pod, and a CSINode per node (none without ``volumes``)."""
        if not self.volumes:
            return []
        out = [csi_node(i) for i in range(self.nodes)]
        for i in range(self.init_pods):
            out.extend(bound_volume(f"init-{i:06d}", self.init_namespace))
        for i in range(self.measured_pods):
            out.extend(bound_volume(f"pod-{i:06d}", self.measured_namespace))
        return out


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("SchedulingBasic", 5000, 1000, 10000, "default pods (100m/500Mi)"),
        Workload(
            "SchedulingNodeAffinity",
            5000,
            5000,
            10000,
            "required node affinity zone In [zone1, zone2]",
            init_pod=node_affinity_pod,
            measured_pod=node_affinity_pod,
            node_labels=_zone1,
        ),
        Workload(
            "TopologySpreading",
            5000,
            5000,
            5000,
            "zone spread maxSkew 5 (DoNotSchedule) over 3 zones",
            measured_pod=topology_spreading_pod,
            node_labels=_moon_zones,
        ),
        Workload(
            "SchedulingPodAntiAffinity",
            5000,
            1000,
            2000,
            "required pod anti-affinity per hostname",
            init_pod=pod_anti_affinity_pod,
            measured_pod=pod_anti_affinity_pod,
            init_namespace="sched-0",
            measured_namespace="sched-1",
        ),
        Workload(
            "SchedulingPodAffinity",
            5000,
            5000,
            5000,
            "required pod affinity per zone",
            init_pod=pod_affinity_pod,
            measured_pod=pod_affinity_pod,
            node_labels=_zone1,
            init_namespace="sched-0",
            measured_namespace="sched-1",
        ),
        Workload(
            "Preemption",
            5000,
            20000,
            5000,
            "nodes full of low-priority 900m pods; high-priority 3-CPU pods preempt three each",
            init_pod=low_priority_pod,
            measured_pod=high_priority_pod,
            init_pods_per_node=4,
        ),
        Workload(
            "Unschedulable",
            5000,
            100,
            10000,
            "default pods, with a 9-CPU high-priority pod that fits nowhere arriving every 200 ms",
            unschedulable_churn=True,
        ),
        Workload(
            "SteadyLoad",
            5000,
            0,
            18000,
            "default pods arriving at 300/s for 60 s, the oldest deleted as new ones arrive (3,000 live); "
            "create-to-bound latency",
            arrival_rate=300.0,
            live_pods=3000,
        ),
        Workload(
            "StartupLarge",
            5000,
            50000,
            1,
            "end to end: 50,000 pods already bound; time from the scheduler's process start to its first "
            "binding (informer sync through WatchList), and its peak RSS",
            startup=True,
        ),
        Workload(
            "SchedulingWithPVCs",
            5000,
            1000,
            1000,
            "every pod mounts its own claim, bound to a CSI volume; CSINode limit 39 (scheduler_perf's "
            "SchedulingCSIPVs)",
            init_pod=pvc_pod,
            measured_pod=pvc_pod,
            volumes=True,
        ),
        Workload(
            "LoadAware",
            5000,
            1000,
            10000,
            "SchedulingBasic with the Dynamic plugin reading node load annotations",
            needs_plugin=DYNAMIC_PLUGIN,
            load_annotations=True,
        ),
    )
}


def get_workload(name: str) -> Workload:
    for known, w in WORKLOADS.items():
        if known.lower() == name.lower():
            return w
    raise KeyError(f"unknown workload {name!r}; known: {', '.join(WORKLOADS)}")


def load_annotations(now: float) -> Callable[[int], dict[str, str]]:
    """Per-node load annotations as crane's annotator writes them (``"<value>,<local time>Z"`` in the plugin's
    default time zone), fresh at ``now`` and varied by node so that scores differ; all below crane's default
    filter thresholds, so the Dynamic filter runs on every node but rejects none."""
    from kubesched.loadaware.annotations import format_annotation, time_zone

    zone = time_zone(None)

    def annotate(index: int) -> dict[str, str]:
        base = (index * 37 % 100) / 100.0
        return {
            key: format_annotation(base * (0.1 + j / 10), now, zone) for j, key in enumerate(LOAD_ANNOTATIONS)
        }

    return annotate
