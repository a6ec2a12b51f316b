"""ConfigMaps and Secrets: data validation (ConfigMap), the Secret type field selector, printers."""

from __future__ import annotations

from typing import Any

from kubesched.cluster import validation
from kubesched.cluster.kinds.printing import AGE_COLUMN, NAME_COLUMN, Column, as_dict, col, created, name_of
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import FieldGetter, Obj, ResourceType, field_path

CONFIGMAP_COLUMNS: list[Column] = [NAME_COLUMN, col("Data", "Number of entries.", type="integer"), AGE_COLUMN]
SECRET_COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Type", "The secret's type."),
    col("Data", "Number of entries.", type="integer"),
    AGE_COLUMN,
]
SECRET_FIELDS: dict[str, FieldGetter] = {"type": field_path("type")}


class ConfigMapStrategy(Strategy):
    columns = CONFIGMAP_COLUMNS
    owns_dependents = True

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_config_map(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return validation.validate_config_map_update(new, old)

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [
            name_of(obj),
            len(as_dict(obj.get("data"))) + len(as_dict(obj.get("binaryData"))),
            created(obj, now),
        ]


class SecretStrategy(Strategy):
    fields = SECRET_FIELDS
    columns = SECRET_COLUMNS
    owns_dependents = True

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return [name_of(obj), obj.get("type") or "", len(as_dict(obj.get("data"))), created(obj, now)]


CONFIGMAP = ConfigMapStrategy()
SECRET = SecretStrategy()
