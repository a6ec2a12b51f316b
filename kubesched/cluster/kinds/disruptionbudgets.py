"""PodDisruptionBudgets (policy/v1): kubectl's columns (the status comes from controllers/disruption.py)."""

from __future__ import annotations

from typing import Any

from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, col, created, name_of
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType

COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Min Available", "The minimum number or percentage of available pods."),
    col("Max Unavailable", "The maximum number or percentage of unavailable pods."),
    col("Allowed Disruptions", "How many pods may be disrupted now.", type="integer"),
    AGE_COLUMN,
]


class DisruptionBudgetStrategy(Strategy):
    columns = COLUMNS

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return super().validate_object(rtype, obj) + validation.validate_disruption_budget(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_update(rtype, new, old) + validation.validate_disruption_budget(new)

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
        return [
            name_of(obj),
            "N/A" if min_available is None else str(min_available),
            "N/A" if max_unavailable is None else str(max_unavailable),
            int(status.get("disruptionsAllowed") or 0),
            created(obj, now),
        ]


STRATEGY = DisruptionBudgetStrategy()
