"""Server-side ``meta.k8s.io/v1`` Tables, what ``kubectl get`` asks for and prints as is.

A built-in kind's columns and row printer are part of its strategy (``kinds/<kind>.py``); this module assembles
Tables from them and prints custom resources from their CRD.

Like kube-apiserver, the server renders every column, wide ones included (``priority: 1``; kubectl shows them with
``-o wide``), and computes ages itself: an Age cell holds "5m2s", not a timestamp. Custom resources get
``additionalPrinterColumns`` (``date`` columns also rendered as ages), or Name and Age when the CRD declares none.
Kinds with no printer upstream (CustomResourceDefinition) get Name and "Created At", an RFC 3339 date column.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable
from typing import Any

from kubesched.cluster.discovery import media_ranges
from kubesched.cluster.kinds import strategy_for
from kubesched.cluster.kinds.printing import (
    AGE_COLUMN,
    NAME_COLUMN,
    Column,
    Printer,
    age,
    as_dict,
    as_list,
    created,
    meta_of,
    name_of,
    parse_time,
)
from kubesched.cluster.resources import Obj, ResourceType

Row = dict[str, Any]
DEFAULT_COLUMNS = [NAME_COLUMN, AGE_COLUMN]


def wants_table(accept_header: str) -> bool:
    """True when the client accepts a ``meta.k8s.io/v1`` Table (kubectl get does)."""
    if not accept_header or "Table" not in accept_header:
        return False  # ``as=Table`` spells it literally (parameter values are only stripped of quotes)
    for media_type, params in media_ranges(accept_header or ""):
        if (
            media_type in ("application/json", "*/*")
            and params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") == "v1"
        ):
            return True
    return False


# -- custom resources --------------------------------------------------------------------------------------------

_JSONPATH_TOKEN = re.compile(
    r"""\.(?P<field>(?:\\.|[^.\[\\])+)"""
    r"""|\[(?P<index>-?\d+)\]"""
    r"""|\['(?P<quoted>[^']*)'\]"""
    r"""|\[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*==\s*(?:"(?P<fdq>[^"]*)"|'(?P<fsq>[^']*)'|(?P<fnum>[^)\s]+))\s*\)\]"""
    r"""|\[\*\]"""
)


def jsonpath_get(obj: Any, path: str) -> tuple[bool, Any]:
    """The first value at a simple JSONPath (``.a.b``, ``[0]``, ``['k']``, ``[?(@.type=="Ready")]``, ``[*]``).

    Returns (found, value). This is the subset CRD printer columns use in practice.
    """
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current: list[Any] = [obj]
    pos = 0
    while pos < len(path):
        m = _JSONPATH_TOKEN.match(path, pos)
        if m is None:
            return False, None
        pos = m.end()
        nxt: list[Any] = []
        for value in current:
            if m.group("field") is not None or m.group("quoted") is not None:
                key = (
                    m.group("quoted")
                    if m.group("quoted") is not None
                    else m.group("field").replace("\\.", ".")
                )
                if isinstance(value, dict) and key in value:
                    nxt.append(value[key])
            elif m.group("index") is not None:
                i = int(m.group("index"))
                if isinstance(value, list) and -len(value) <= i < len(value):
                    nxt.append(value[i])
            elif m.group("fpath") is not None:
                wanted = next(g for g in (m.group("fdq"), m.group("fsq"), m.group("fnum")) if g is not None)
                for item in as_list(value):
                    ok, got = jsonpath_get(item, "." + m.group("fpath"))
                    if ok and _printed(got) == wanted:
                        nxt.append(item)
            else:  # [*]
                nxt.extend(as_list(value))
        current = nxt
        if not current:
            return False, None
    return True, current[0]


def _printed(value: Any) -> str:
    # kubectl's JSONPath printing: strings bare, booleans lowercase, objects and lists as JSON.
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _cell_for(column_type: str, value: Any, now: dt.datetime) -> Any:
    if value is None:
        return None
    if column_type == "string":
        return _printed(value)
    if column_type == "integer":
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if column_type == "number":
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    if column_type == "date":
        if not isinstance(value, str):
            return None
        return age(value, now) if parse_time(value) else "<invalid>"
    return None


def _crd_columns(rtype: ResourceType) -> list[dict[str, Any]]:
    assert rtype.crd is not None
    for version in as_list(as_dict(rtype.crd.get("spec")).get("versions")):
        if as_dict(version).get("name") == rtype.version:
            columns = as_list(as_dict(version).get("additionalPrinterColumns"))
            if columns:
                return [as_dict(c) for c in columns]
    return [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
             "description": "Time since the object was created."}]  # fmt: skip


def _custom_table(rtype: ResourceType) -> tuple[list[Column], Printer]:
    printer_columns = _crd_columns(rtype)
    columns = [NAME_COLUMN] + [
        {
            "name": c.get("name", ""),
            "type": c.get("type", "string"),
            "format": c.get("format", ""),
            "description": c.get("description")
            or f"Custom resource definition column (in JSONPath format): {c.get('jsonPath', '')}",
            "priority": int(c.get("priority") or 0),
        }
        for c in printer_columns
    ]

    def cells(obj: Obj, now: dt.datetime) -> list[Any]:
        out: list[Any] = [name_of(obj)]
        for c in printer_columns:
            found, value = jsonpath_get(obj, str(c.get("jsonPath", "")))
            out.append(_cell_for(str(c.get("type", "string")), value, now) if found else None)
        return out

    return columns, cells


def columns_and_printer(rtype: ResourceType) -> tuple[list[Column], Printer]:
    """The column definitions and row printer for a kind."""
    if rtype.crd is not None:
        return _custom_table(rtype)
    strategy = strategy_for(rtype)
    if strategy.columns is not None:
        return strategy.columns, strategy.print_row
    return DEFAULT_COLUMNS, lambda obj, now: [name_of(obj), created(obj, now)]


def _row_object(obj: Obj, include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    # PartialObjectMetadata (the default; "Metadata" on the wire)
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": meta_of(obj)}


def to_table(
    rtype: ResourceType,
    objects: Iterable[Obj],
    *,
    include_object: str = "PartialObjectMetadata",
    now: dt.datetime | None = None,
    resource_version: str = "",
    continue_token: str = "",
    include_columns: bool = True,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``objects`` (as seen through ``rtype``'s API).

    ``include_object`` is the ``includeObject`` query parameter: "PartialObjectMetadata" (or "Metadata"),
    "Object" or "None". ``include_columns=False`` leaves out the column definitions, as for watch events after
    the first one.
    """
    now = now or dt.datetime.now(dt.UTC)
    columns, printer = columns_and_printer(rtype)
    row_conditions = strategy_for(rtype).row_conditions
    rows: list[Row] = []
    for obj in objects:
        row: Row = {"cells": printer(obj, now)}
        conditions = row_conditions(obj)
        if conditions:
            row["conditions"] = conditions
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    table: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    table["columnDefinitions"] = columns if include_columns else []
    table["rows"] = rows
    return table
