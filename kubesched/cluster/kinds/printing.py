"""Helpers the kinds' table printers share: column definitions, kubectl-style ages and tolerant accessors.

(``tables.py`` assembles a ``meta.k8s.io/v1`` Table from a kind's columns and row printer.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

from kubesched.cluster.resources import Obj

Column = dict[str, Any]
Printer = Callable[[Obj, dt.datetime], list[Any]]


def human_duration(seconds: float) -> str:
    """An age the way kubectl prints one: ~2-3 significant figures ("45s", "3m2s", "2d3h", "400d", "3y12d")."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def parse_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 timestamp (Time or MicroTime) as an aware datetime, None if absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def age(timestamp: Any, now: dt.datetime) -> str:
    """Time since ``timestamp`` for an Age cell; "<unknown>" when there is none."""
    when = parse_time(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


def as_dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def meta_of(obj: Obj) -> dict[str, Any]:
    return as_dict(obj.get("metadata"))


def name_of(obj: Obj) -> str:
    return str(meta_of(obj).get("name") or "")


def created(obj: Obj, now: dt.datetime) -> str:
    return age(meta_of(obj).get("creationTimestamp"), now)


def col(name: str, description: str, *, type: str = "string", priority: int = 0, format: str = "") -> Column:
    return {"name": name, "type": type, "format": format, "description": description, "priority": priority}


NAME_COLUMN = col("Name", "Name of the object, unique within its namespace.", format="name")
AGE_COLUMN = col("Age", "Time since the object was created.")


def selector_string(selector: Any) -> str:
    """A LabelSelector in kubectl's text form ("app=web,tier in (a,b)"); "<none>" when empty."""
    selector = as_dict(selector)
    parts = [f"{k}={v}" for k, v in sorted(as_dict(selector.get("matchLabels")).items())]
    for expr in map(as_dict, as_list(selector.get("matchExpressions"))):
        key, op, values = expr.get("key"), expr.get("operator"), sorted(map(str, as_list(expr.get("values"))))
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"
