"""Leases: spec validation (decoding of its typed fields stays in ``validation.decode_error``) and printer.
PUT creates a missing lease (``ResourceType.allow_create_on_update``)."""

from __future__ import annotations

from typing import Any

from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, as_dict, col, created, name_of
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType

COLUMNS: list[Column] = [NAME_COLUMN, col("Holder", "The current holder of the lease."), AGE_COLUMN]


class LeaseStrategy(Strategy):
    columns = COLUMNS

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_lease(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        causes = super().validate_update(rtype, new, old)
        causes.extend(validation.lease_spec_causes(new))
        return causes

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [name_of(obj), as_dict(obj.get("spec")).get("holderIdentity") or "", created(obj, now)]


STRATEGY = LeaseStrategy()
