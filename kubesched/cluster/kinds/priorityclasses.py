"""PriorityClasses: preemptionPolicy default and printer (pods read them in ``pods.py``'s admission)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, col, created, name_of
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Value", "The priority value.", type="integer"),
    col("Global-Default", "Whether this is the default for pods without a class.", type="boolean"),
    AGE_COLUMN,
    col("Preemption-Policy", "Whether pods of this class may preempt others.", priority=1),
]


class PriorityClassStrategy(Strategy):
    columns = COLUMNS

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return super().validate_object(rtype, obj) + validation.validate_priority_class(obj)

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [
            name_of(obj),
            int(obj.get("value") or 0),
            bool(obj.get("globalDefault")),
            created(obj, now),
            obj.get("preemptionPolicy") or "PreemptLowerPriority",
        ]


STRATEGY = PriorityClassStrategy()
