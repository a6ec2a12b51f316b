"""A custom resource checked against its CRD's structural schema (``openAPIV3Schema``), as kube-apiserver's
apiextensions validation does for the parts clients most often get wrong: JSON types, required properties and
numeric bounds. Each finding is a 422 cause with upstream's wording, e.g.
``spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"``.

``null`` is accepted everywhere: upstream prunes nulls of non-nullable fields before it validates. Fields the
schema does not declare are left alone (pruning is not done here); ``metadata``, ``apiVersion`` and ``kind`` are
the API server's own (``metadata`` is checked as ObjectMeta elsewhere). Enumerations are not enforced yet: the
operator's tests store a Scheduler with a profile outside its CRD's enum to exercise its degraded path.
"""

from __future__ import annotations

import json
from typing import Any

Cause = dict[str, str]
_MAX_DEPTH = 64
_SERVER_FIELDS = ("apiVersion", "kind", "metadata")


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fits(value: Any, kind: str, schema: dict[str, Any]) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    actual = _type_name(value)
    if kind == "number":
        return actual in ("number", "integer")
    return actual == kind


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


def _walk(value: Any, schema: Any, path: str, depth: int, causes: list[Cause]) -> None:
    if value is None or not isinstance(schema, dict) or depth > _MAX_DEPTH:
        return
    kind = schema.get("type")
    if schema.get("x-kubernetes-int-or-string"):
        kind = "integer,string"
    if isinstance(kind, str) and kind and not _fits(value, kind, schema):
        actual = _type_name(value)
        causes.append(
            {
                "reason": "FieldValueInvalid",
                "message": f'Invalid value: "{actual}": {path} in body must be of type {kind}: "{actual}"',
                "field": path,
            }
        )
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            causes.append(_bound(path, value, f"should be greater than or equal to {_shown(low)}"))
        if isinstance(high, int | float) and value > high:
            causes.append(_bound(path, value, f"should be less than or equal to {_shown(high)}"))
    if isinstance(value, dict):
        props = schema.get("properties")
        props = props if isinstance(props, dict) else {}
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if depth == 0 and key in _SERVER_FIELDS:
                continue
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                _walk(item, sub, f"{path}.{key}" if path else key, depth + 1, causes)
        for key in schema.get("required") or ():
            if isinstance(key, str) and value.get(key) is None and not (depth == 0 and key in _SERVER_FIELDS):
                causes.append(
                    {
                        "reason": "FieldValueRequired",
                        "message": "Required value",
                        "field": f"{path}.{key}" if path else key,
                    }
                )
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            _walk(item, schema["items"], f"{path}[{i}]", depth + 1, causes)


def _bound(path: str, value: Any, detail: str) -> Cause:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_shown(value)}: {path} in body {detail}",
        "field": path,
    }


def validate_custom_resource(schema: Any, obj: dict[str, Any]) -> list[Cause]:
    """The 422 causes of ``obj`` under a CRD version's ``openAPIV3Schema`` (empty when it conforms)."""
    causes: list[Cause] = []
    if isinstance(schema, dict):
        _walk(obj, schema, "", 0, causes)
    return causes
