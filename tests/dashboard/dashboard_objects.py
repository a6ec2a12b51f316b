"""Small builders of Kubernetes objects for the dashboard tests."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def node(
    name: str,
    cpu: str = "4",
    memory: str = "8Gi",
    *,
    zone: str = "a",
    ready: bool = True,
    annotations: dict[str, str] | None = None,
    unschedulable: bool = False,
) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"topology.kubernetes.io/zone": zone},
            "annotations": annotations or {},
        },
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
            "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def pod(
    name: str,
    cpu: str = "500m",
    memory: str = "1Gi",
    *,
    node_name: str | None = None,
    namespace: str = "default",
    phase: str | None = None,
    created: str = "2026-01-01T00:00:00Z",
    scheduler: str = "default-scheduler",
) -> Obj:
    spec: Obj = {
        "schedulerName": scheduler,
        "containers": [
            {"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
        ],
    }
    if node_name:
        spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{namespace}-{name}",
            "creationTimestamp": created,
        },
        "spec": spec,
        "status": {"phase": phase or ("Running" if node_name else "Pending")},
    }


def failed_scheduling(pod_name: str, message: str, when: str, namespace: str = "default") -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{pod_name}.{when}", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "namespace": namespace, "name": pod_name},
        "reason": "FailedScheduling",
        "message": message,
        "lastTimestamp": when,
    }


def lease(
    name: str,
    holder: str,
    *,
    namespace: str = "kube-system",
    renew: str = "2026-01-01T00:00:10.000000Z",
    acquire: str = "2026-01-01T00:00:00.000000Z",
    duration: int = 15,
) -> Obj:
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "holderIdentity": holder,
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseDurationSeconds": duration,
            "leaseTransitions": 2,
        },
    }
