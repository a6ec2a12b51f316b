"""resource.k8s.io/v1 (dynamic resource allocation): kubectl's columns for ResourceClaims (``STATE``:
``pending``, ``allocated``, ``allocated,reserved``, ``deleted``...), ResourceSlices (node, driver, pool),
DeviceClasses and ResourceClaimTemplates, as upstream's printers show them."""

from __future__ import annotations

from typing import Any

from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, col, created, name_of
from kubesched.cluster.kinds.strategy import Strategy
from kubesched.cluster.resources import Obj

CLAIM_COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("State", "A summary of the claim's state: pending, allocated, reserved, deleted, deallocating."),
    AGE_COLUMN,
]
SLICE_COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Node", "The node the devices are published for."),
    col("Driver", "The driver that publishes the devices."),
    col("Pool", "The pool the slice belongs to."),
    AGE_COLUMN,
]


def claim_state(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    deleted = bool(meta.get("deletionTimestamp"))
    states = ["deleted"] if deleted else []
    if not status.get("allocation"):
        if not deleted:
            states.append("pending")
    else:
        states.append("allocated")
        if status.get("reservedFor"):
            states.append("reserved")
        elif deleted:
            states.append("deallocating")
    return ",".join(states)


class ResourceClaimStrategy(Strategy):
    columns = CLAIM_COLUMNS

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [name_of(obj), claim_state(obj), created(obj, now)]


class ResourceSliceStrategy(Strategy):
    columns = SLICE_COLUMNS

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        spec = obj.get("spec") or {}
        return [
            name_of(obj),
            spec.get("nodeName") or "",
            spec.get("driver") or "",
            (spec.get("pool") or {}).get("name") or "",
            created(obj, now),
        ]


CLAIM = ResourceClaimStrategy()
SLICE = ResourceSliceStrategy()

__all__ = ["CLAIM", "SLICE", "claim_state"]
