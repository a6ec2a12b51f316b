"""Workload controllers' objects (apps/v1 and ReplicationController): replicas default, ownership of their pods,
Deployment and ReplicaSet printers."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import (
    AGE_COLUMN,
    NAME_COLUMN,
    Column,
    Printer,
    as_dict,
    as_list,
    col,
    created,
    name_of,
    selector_string,
)
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

DEPLOYMENT_COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Ready", "Ready replicas out of desired."),
    col("Up-to-date", "Replicas running the latest template."),
    col("Available", "Replicas available to serve."),
    AGE_COLUMN,
    col("Containers", "Container names in the template.", priority=1),
    col("Images", "Container images in the template.", priority=1),
    col("Selector", "The label selector for the pods.", priority=1),
]
REPLICASET_COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Desired", "Desired replicas.", type="integer"),
    col("Current", "Replicas that exist.", type="integer"),
    col("Ready", "Ready replicas.", type="integer"),
    AGE_COLUMN,
    col("Containers", "Container names in the template.", priority=1),
    col("Images", "Container images in the template.", priority=1),
    col("Selector", "The label selector for the pods.", priority=1),
]


def _template_containers(obj: Obj) -> tuple[str, str]:
    containers = [
        as_dict(c)
        for c in as_list(
            as_dict(as_dict(as_dict(obj.get("spec")).get("template")).get("spec")).get("containers")
        )
    ]
    return ",".join(str(c.get("name") or "") for c in containers), ",".join(
        str(c.get("image") or "") for c in containers
    )


def deployment_row(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    desired = spec.get("replicas", 1)
    names, images = _template_containers(obj)
    return [
        name_of(obj),
        f"{int(status.get('readyReplicas') or 0)}/{int(desired if desired is not None else 1)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        created(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def replicaset_row(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status = as_dict(obj.get("spec")), as_dict(obj.get("status"))
    desired = spec.get("replicas", 1)
    names, images = _template_containers(obj)
    return [
        name_of(obj),
        int(desired if desired is not None else 1),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        created(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


class ReplicatedStrategy(Strategy):
    """Deployments, ReplicaSets, StatefulSets: spec.replicas defaults to 1."""

    owns_dependents = True

    def __init__(self, columns: list[Column] | None = None, printer: Printer | None = None) -> None:
        super().__init__(columns=columns, printer=printer)

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        spec = dict(obj.get("spec") or {})
        spec.setdefault("replicas", 1)
        obj["spec"] = spec

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return super().validate_object(rtype, obj) + validation.validate_replicated(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_update(rtype, new, old) + validation.validate_replicated(new)


class DeploymentStrategy(ReplicatedStrategy):
    """apps/v1 Deployment defaults (upstream SetDefaults_Deployment): the rollout controllers read them."""

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        super().prepare_for_create(api, rtype, obj)
        spec = obj["spec"]
        strategy = dict(spec.get("strategy") or {})
        strategy.setdefault("type", "RollingUpdate")
        if strategy["type"] == "RollingUpdate":
            rolling = dict(strategy.get("rollingUpdate") or {})
            rolling.setdefault("maxUnavailable", "25%")
            rolling.setdefault("maxSurge", "25%")
            strategy["rollingUpdate"] = rolling
        spec["strategy"] = strategy
        spec.setdefault("revisionHistoryLimit", 10)
        spec.setdefault("progressDeadlineSeconds", 600)


DEPLOYMENT = DeploymentStrategy(DEPLOYMENT_COLUMNS, deployment_row)
REPLICASET = ReplicatedStrategy(REPLICASET_COLUMNS, replicaset_row)
STATEFULSET = ReplicatedStrategy()


class OwnerStrategy(Strategy):
    """DaemonSets and ReplicationControllers: they own pods and validate their template, no defaults here."""

    owns_dependents = True

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return super().validate_object(rtype, obj) + validation.validate_replicated(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_update(rtype, new, old) + validation.validate_replicated(new)


OWNER = OwnerStrategy()
# ServiceAccounts own their token Secrets; nothing else of theirs is checked here.
SERVICE_ACCOUNT = Strategy(owns_dependents=True)
