"""Simulated nodes: what KWOK does for a real API server, done in-process against ``ClusterApi``.

Each simulated node is a Node object with capacity, the usual labels and a Ready condition, plus a heartbeat Lease in
``kube-node-lease``. Pods bound to a simulated node start "running" (phase, conditions, container statuses, pod IP)
within a fraction of a second, and pods deleted on it finish their graceful deletion shortly after, as a kubelet
would once the containers stopped. Work is batched on a short tick so a burst of bindings costs one pass.

The kubelet talks to the API in-process (no HTTP): at 5,000 nodes, heartbeats and status updates through the
network stack would cost the API server more than the scheduler it is serving.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kubesched.apimachinery.timefmt import now_micro, now_rfc3339
from kubesched.cluster import errors
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.background import cancel_and_wait
from kubesched.cluster.devices import claims_prepared
from kubesched.cluster.resources import ResourceType

log = logging.getLogger("kubesched.kubelet")

SIMULATED_ANNOTATION = "kubesched.io/simulated"
KUBELET_VERSION = "v1.36.0-kubesched"
ZONES_DEFAULT = 3
# The CSI driver of the local cluster's simulated provisioner and the volumes a simulated node can attach.
SIMULATED_CSI_DRIVER = "simulated.csi.kubesched.io"
SIMULATED_CSI_VOLUME_LIMIT = 39

Obj = dict[str, Any]


@dataclass(frozen=True)
class NodeShape:
    cpu: str = "32"
    memory: str = "256Gi"
    pods: int = 110
    ephemeral_storage: str = "100Gi"


def node_object(
    index: int, name: str, shape: NodeShape, zones: int = ZONES_DEFAULT, region: str = "local"
) -> Obj:
    """The Node a simulated kubelet registers: capacity, labels, addresses, Ready."""
    zone = f"{region}-{chr(ord('a') + index % max(zones, 1))}" if zones <= 26 else f"{region}-{index % zones}"
    capacity = {
        "cpu": shape.cpu,
        "memory": shape.memory,
        "pods": str(shape.pods),
        "ephemeral-storage": shape.ephemeral_storage,
    }
    ts = now_rfc3339()
    ip = str(ipaddress.IPv4Address(int(ipaddress.IPv4Address("172.20.0.0")) + index + 1))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": zone,
                "topology.kubernetes.io/region": region,
                "node.kubernetes.io/instance-type": "kubesched-sim",
            },
            "annotations": {SIMULATED_ANNOTATION: "true", "node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": _pod_cidr(index), "podCIDRs": [_pod_cidr(index)]},
        "status": {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "conditions": [
                _cond(
                    "MemoryPressure",
                    "False",
                    "KubeletHasSufficientMemory",
                    "kubelet has sufficient memory available",
                    ts,
                ),
                _cond(
                    "DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure", ts
                ),
                _cond(
                    "PIDPressure",
                    "False",
                    "KubeletHasSufficientPID",
                    "kubelet has sufficient PID available",
                    ts,
                ),
                _cond("Ready", "True", "KubeletReady", "kubelet is posting ready status", ts),
            ],
            "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": KUBELET_VERSION,
                "kubeProxyVersion": KUBELET_VERSION,
                "containerRuntimeVersion": "kubesched://simulated",
                "osImage": "kubesched simulated node",
                "kernelVersion": "simulated",
                "machineID": f"{index:032x}",
                "systemUUID": f"{index:032x}",
                "bootID": f"{index:032x}",
            },
            "images": [],
        },
    }


CONTROL_PLANE_ROLE = "node-role.kubernetes.io/control-plane"


def control_plane_node_object(index: int, name: str, shape: NodeShape, ip: str, root: str) -> Obj:
    """A control-plane node as kubeadm makes one: role label, NoSchedule taint; its own loopback InternalIP."""
    node = node_object(index, name, shape, zones=1)
    meta = node["metadata"]
    meta["labels"] = dict(
        meta["labels"],
        **{CONTROL_PLANE_ROLE: "", "node.kubernetes.io/exclude-from-external-load-balancers": ""},
    )
    meta["labels"]["node.kubernetes.io/instance-type"] = "kubesched-process"
    # No zone or region (as kind's and kubeadm's nodes without a cloud provider): a node that takes no
    # workload must not become a zone in topology spreading.
    del meta["labels"]["topology.kubernetes.io/zone"], meta["labels"]["topology.kubernetes.io/region"]
    meta["annotations"] = {"kubesched.io/node-root": root, "node.alpha.kubernetes.io/ttl": "0"}
    node["spec"] = dict(node["spec"], taints=[{"key": CONTROL_PLANE_ROLE, "effect": "NoSchedule"}])
    node["spec"]["podCIDR"] = node["spec"]["podCIDRs"][0] = f"10.244.{index}.0/24"
    status = node["status"]
    status["addresses"] = [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}]
    status["nodeInfo"] = dict(
        status["nodeInfo"],
        containerRuntimeVersion="kubesched://process",
        osImage="kubesched process node",
        kernelVersion="host",
        machineID=f"cp{index:030x}",
        systemUUID=f"cp{index:030x}",
        bootID=f"cp{index:030x}",
    )
    return node


def _cond(ctype: str, status: str, reason: str, message: str, ts: str) -> Obj:
    return {
        "type": ctype,
        "status": status,
        "lastHeartbeatTime": ts,
        "lastTransitionTime": ts,
        "reason": reason,
        "message": message,
    }


def _pod_cidr(index: int) -> str:
    return f"10.{64 + index // 256}.{index % 256}.0/24"


class SimulatedKubelets:
    """All simulated nodes of the local cluster, driven from one event loop."""

    def __init__(
        self,
        api: ClusterApi,
        *,
        lease_duration: int = 40,
        heartbeat_interval: float = 10.0,
        tick: float = 0.05,
    ) -> None:
        self.api = api
        self.lease_duration = lease_duration
        self.heartbeat_interval = heartbeat_interval
        self.tick = tick
        self._pods_t = api.rtype("", "v1", "pods")
        self._nodes_t = api.rtype("", "v1", "nodes")
        self._leases_t = api.rtype("coordination.k8s.io", "v1", "leases")
        self._csinodes_t = api.rtype("storage.k8s.io", "v1", "csinodes")
        self._pvcs_t = api.rtype("", "v1", "persistentvolumeclaims")
        # Pods whose PersistentVolumeClaims are not bound yet: retried on claim writes.
        self._awaiting_volumes: set[tuple[str, str]] = set()
        self._claims_t = api.rtype("resource.k8s.io", "v1", "resourceclaims")
        # Pods whose ResourceClaims are not allocated and reserved for them yet: retried on claim writes.
        self._awaiting_claims: set[tuple[str, str]] = set()
        self._nodes: dict[str, int] = {}  # simulated node name → index (for IPs)
        self._next_ip: dict[str, int] = {}
        self._to_start: dict[tuple[str, str], None] = {}
        self._to_finish: dict[tuple[str, str], float] = {}
        self._tasks: list[asyncio.Task[None]] = []
        # Nodes whose pods of the process image run as processes (``runtime.ProcessKubelets``): pods that
        # ``claim`` says are its own are left alone here. Only looked at for pods on those nodes.
        self.process_nodes: set[str] = set()
        self.claim: Callable[[Obj], bool] | None = None
        api.observers.append(self._observe)

    # -- registration -----------------------------------------------------------------------------------

    def register_nodes(self, names: Iterable[str], shape: NodeShape, zones: int = ZONES_DEFAULT) -> None:
        """Create the Node objects and their leases, synchronously.

        Every node is stamped from one template, so the first node and lease are validated and the rest skip
        validation (half the cost of registering 5,000 nodes).
        """
        validated = False
        for name in names:
            index = len(self._nodes)
            existing = self.api.store.get(self._nodes_t.storage_key, ("", name))
            if existing is None:
                self.api.create(
                    self._nodes_t, node_object(index, name, shape, zones), None, trusted=validated
                )
            if self.api.store.get(self._csinodes_t.storage_key, ("", name)) is None:
                self.api.create(self._csinodes_t, csi_node_object(name), None, trusted=validated)
            self._nodes[name] = index
            self._renew_lease(name, trusted=validated)
            validated = True

    def register_node_objects(self, nodes: Iterable[Obj]) -> None:
        """Create (or take over) nodes built elsewhere (the control-plane nodes) and give them leases."""
        for obj in nodes:
            name = obj["metadata"]["name"]
            if self.api.store.get(self._nodes_t.storage_key, ("", name)) is None:
                self.api.create(self._nodes_t, obj, None)
            self._nodes[name] = len(self._nodes)
            self._renew_lease(name)

    def adopt_existing(self) -> None:
        """Take over Node objects created through the API with the simulated annotation."""
        items, _ = self.api.store.list(self._nodes_t.storage_key)
        for st in items:
            self._maybe_adopt(st.obj)

    def _maybe_adopt(self, node: Obj) -> None:
        meta = node.get("metadata") or {}
        name = meta.get("name", "")
        if name in self._nodes:
            return
        if (meta.get("annotations") or {}).get(SIMULATED_ANNOTATION) == "true":
            self._nodes[name] = len(self._nodes)

    @property
    def node_names(self) -> list[str]:
        return list(self._nodes)

    # -- reacting to API writes ---------------------------------------------------------------------------

    def _observe(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        if rtype is self._pods_t and new is not None:
            node = (new.get("spec") or {}).get("nodeName")
            if not node or node not in self._nodes:
                return
            if node in self.process_nodes and self.claim is not None and self.claim(new):
                return  # a pod the process kubelet runs
            meta = new["metadata"]
            key = (meta.get("namespace", ""), meta["name"])
            if meta.get("deletionTimestamp"):
                self._to_start.pop(key, None)
                if key not in self._to_finish:
                    self._to_finish[key] = asyncio.get_event_loop().time() + min(
                        0.2, float(meta.get("deletionGracePeriodSeconds") or 0)
                    )
            elif (new.get("status") or {}).get("phase") in (None, "Pending") and not _pod_started(new):
                self._to_start[key] = None
        elif rtype is self._claims_t and self._awaiting_claims:
            self._to_start.update(dict.fromkeys(self._awaiting_claims))
            self._awaiting_claims.clear()
        elif rtype is self._pvcs_t and self._awaiting_volumes:
            self._to_start.update(dict.fromkeys(self._awaiting_volumes))
            self._awaiting_volumes.clear()
        elif rtype is self._nodes_t and new is not None and etype == "ADDED":
            self._maybe_adopt(new)
        elif rtype is self._nodes_t and etype == "DELETED" and old is not None:
            self._nodes.pop(old["metadata"]["name"], None)

    # -- loops --------------------------------------------------------------------------------------------

    def start(self) -> None:
        self.adopt_existing()
        # Pods bound before we started (a restart) get started too.
        items, _ = self.api.store.list(self._pods_t.storage_key)
        for st in items:
            self._observe(self._pods_t, "ADDED", st.obj, None)
        self._tasks = [
            asyncio.create_task(self._pod_loop(), name="kubelet-pods"),
            asyncio.create_task(self._heartbeat_loop(), name="kubelet-heartbeats"),
        ]

    async def stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []

    async def _pod_loop(self) -> None:
        loop = asyncio.get_event_loop()
        while True:
            await asyncio.sleep(self.tick)
            try:
                if self._to_start:
                    batch, self._to_start = list(self._to_start), {}
                    for key in batch:
                        self._start_pod(*key)
                if self._to_finish:
                    now = loop.time()
                    due = [k for k, t in self._to_finish.items() if t <= now]
                    for key in due:
                        del self._to_finish[key]
                        self.api.finish_graceful_delete(self._pods_t, key[0], key[1])
            except Exception:  # the simulator must survive one bad object
                log.exception("simulated kubelet pod loop")

    async def _heartbeat_loop(self) -> None:
        while True:
            # Spread renewals over the interval so 5,000 nodes do not renew in one burst.
            names = list(self._nodes)
            if not names:
                await asyncio.sleep(self.heartbeat_interval)
                continue
            slices = max(1, int(self.heartbeat_interval / 0.5))
            per_slice = max(1, (len(names) + slices - 1) // slices)
            for i in range(0, len(names), per_slice):
                for name in names[i : i + per_slice]:
                    if name in self._nodes:
                        try:
                            self._renew_lease(name)
                        except Exception:
                            log.exception("lease renewal for %s", name)
                await asyncio.sleep(self.heartbeat_interval / slices)

    # -- actions ------------------------------------------------------------------------------------------

    def _renew_lease(self, node: str, *, trusted: bool = False) -> None:
        existing = self.api.store.get(self._leases_t.storage_key, ("kube-node-lease", node))
        spec = {"holderIdentity": node, "leaseDurationSeconds": self.lease_duration, "renewTime": now_micro()}
        if existing is None:
            node_st = self.api.store.get(self._nodes_t.storage_key, ("", node))
            owner = []
            if node_st is not None:
                owner = [
                    {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_st.obj["metadata"]["uid"]}
                ]
            self.api.create(
                self._leases_t,
                {
                    "metadata": {"name": node, "namespace": "kube-node-lease", "ownerReferences": owner},
                    "spec": spec,
                },
                "kube-node-lease",
                trusted=trusted,
            )
            return
        new = dict(existing.obj)
        new["spec"] = dict(existing.obj.get("spec") or {}, **spec)
        self.api.store.update(self._leases_t.storage_key, new, existing)

    def _volumes_bound(self, pod: Obj) -> bool:
        """A kubelet mounts a claim's volume only once the claim is bound (``volumeName`` + ``bind-completed``)."""
        ns = (pod.get("metadata") or {}).get("namespace") or ""
        for vol in (pod.get("spec") or {}).get("volumes") or ():
            src = vol.get("persistentVolumeClaim")
            if src is None:
                continue
            st = self.api.store.get(self._pvcs_t.storage_key, (ns, src.get("claimName") or ""))
            if st is None:
                return False
            claim = st.obj
            annotations = (claim.get("metadata") or {}).get("annotations") or {}
            if (
                not (claim.get("spec") or {}).get("volumeName")
                or "pv.kubernetes.io/bind-completed" not in annotations
            ):
                return False
        return True

    def _pod_ip(self, node: str) -> tuple[str, str]:
        index = self._nodes.get(node, 0)
        n = self._next_ip.get(node, 2)
        self._next_ip[node] = 2 if n >= 254 else n + 1
        pod_ip = f"10.{64 + index // 256}.{index % 256}.{n}"
        node_st = self.api.store.get(self._nodes_t.storage_key, ("", node))
        host_ip = ""
        if node_st is not None:
            for a in (node_st.obj.get("status") or {}).get("addresses") or []:
                if a.get("type") == "InternalIP":
                    host_ip = a.get("address", "")
        return pod_ip, host_ip

    def _start_pod(self, namespace: str, name: str) -> None:
        st = self.api.store.get(self._pods_t.storage_key, (namespace, name))
        if st is None:
            return
        pod = st.obj
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if not node or node not in self._nodes or (pod.get("metadata") or {}).get("deletionTimestamp"):
            return
        if _pod_started(pod):
            return
        if spec.get("volumes") and not self._volumes_bound(pod):
            self._awaiting_volumes.add((namespace, name))
            return
        if spec.get("resourceClaims") and not claims_prepared(self.api, pod):
            self._awaiting_claims.add((namespace, name))
            return
        ts = now_rfc3339()
        if spec.get("hostNetwork"):
            pod_ip, host_ip = self._pod_ip(node)
            pod_ip = host_ip or pod_ip
        else:
            pod_ip, host_ip = self._pod_ip(node)
        status = dict(pod.get("status") or {})
        conditions = {c.get("type"): c for c in status.get("conditions") or []}
        for ctype in ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"):
            prev = conditions.get(ctype)
            if prev is not None and prev.get("status") == "True":
                continue
            conditions[ctype] = {
                "type": ctype,
                "status": "True",
                "lastProbeTime": None,
                "lastTransitionTime": ts,
            }
        status.update(
            {
                "phase": "Running",
                "conditions": list(conditions.values()),
                "hostIP": host_ip,
                "hostIPs": [{"ip": host_ip}] if host_ip else [],
                "podIP": pod_ip,
                "podIPs": [{"ip": pod_ip}],
                "startTime": ts,
                "containerStatuses": [
                    _container_status(c, ts, i) for i, c in enumerate(spec.get("containers") or [])
                ],
            }
        )
        if spec.get("initContainers"):
            status["initContainerStatuses"] = [
                _init_status(c, ts, i) for i, c in enumerate(spec.get("initContainers") or [])
            ]
        new = dict(pod)
        new["status"] = status
        try:
            self.api.update(self._pods_t, new, namespace, name, subresource="status")
        except errors.ApiError as e:
            if e.code != 404:
                raise


def csi_node_object(name: str) -> Obj:
    """The CSINode a simulated node's kubelet registers: the simulated CSI driver with its volume limit."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "CSINode",
        "metadata": {"name": name},
        "spec": {
            "drivers": [
                {
                    "name": SIMULATED_CSI_DRIVER,
                    "nodeID": name,
                    "topologyKeys": ["topology.kubernetes.io/zone"],
                    "allocatable": {"count": SIMULATED_CSI_VOLUME_LIMIT},
                }
            ]
        },
    }


def _pod_started(pod: Obj) -> bool:
    st = pod.get("status") or {}
    return st.get("phase") == "Running" and bool(st.get("containerStatuses"))


def _container_status(c: Obj, ts: str, i: int) -> Obj:
    image = c.get("image", "")
    return {
        "name": c.get("name", f"c{i}"),
        "state": {"running": {"startedAt": ts}},
        "lastState": {},
        "ready": True,
        "started": True,
        "restartCount": 0,
        "image": image,
        "imageID": f"kubesched://{image}",
        "containerID": f"kubesched://{random.getrandbits(64):016x}",
    }


def _init_status(c: Obj, ts: str, i: int) -> Obj:
    image = c.get("image", "")
    return {
        "name": c.get("name", f"init{i}"),
        "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": ts, "finishedAt": ts}},
        "lastState": {},
        "ready": True,
        "restartCount": 0,
        "image": image,
        "imageID": f"kubesched://{image}",
    }
