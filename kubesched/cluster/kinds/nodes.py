"""Nodes: allocatable defaults to capacity, taint validation on update, field selectors, printer."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import (
    AGE_COLUMN,
    NAME_COLUMN,
    Column,
    as_dict,
    as_list,
    col,
    created,
    meta_of,
    name_of,
)
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import FieldGetter, Obj, ResourceType, field_path

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

FIELDS: dict[str, FieldGetter] = {"spec.unschedulable": field_path("spec.unschedulable", "false")}

COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Status", "Node readiness, and whether scheduling is disabled."),
    col("Roles", "Roles from node-role.kubernetes.io/* labels."),
    AGE_COLUMN,
    col("Version", "The kubelet version the node reports."),
    col("Internal-IP", "First internal address.", priority=1),
    col("External-IP", "First external address.", priority=1),
    col("OS-Image", "Operating system image.", priority=1),
    col("Kernel-Version", "Kernel version.", priority=1),
    col("Container-Runtime", "Container runtime and version.", priority=1),
]


def node_roles(node: Obj) -> list[str]:
    roles: set[str] = set()
    for key, value in as_dict(meta_of(node).get("labels")).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return sorted(roles)


def print_row(node: Obj, now: dt.datetime) -> list[Any]:
    status = as_dict(node.get("status"))
    states = []
    for c in map(as_dict, as_list(status.get("conditions"))):
        if c.get("type") == "Ready":
            states = ["Ready" if c.get("status") == "True" else "NotReady"]
    states = states or ["Unknown"]
    if as_dict(node.get("spec")).get("unschedulable"):
        states.append("SchedulingDisabled")
    info = as_dict(status.get("nodeInfo"))

    def address(kind: str) -> str:
        for a in map(as_dict, as_list(status.get("addresses"))):
            if a.get("type") == kind:
                return str(a.get("address") or "")
        return "<none>"

    return [
        name_of(node),
        ",".join(states),
        ",".join(node_roles(node)) or "<none>",
        created(node, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


class NodeStrategy(Strategy):
    fields = FIELDS
    columns = COLUMNS
    owns_dependents = True  # node leases

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        status = dict(obj.get("status") or {})
        if "capacity" in status and "allocatable" not in status:
            status["allocatable"] = dict(status["capacity"])
        obj["status"] = status

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_node(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate_update(rtype, new, old)
        causes.extend(validation.validate_node_taints(as_dict(new.get("spec")).get("taints")))
        return causes

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return print_row(obj, now)


STRATEGY = NodeStrategy()
