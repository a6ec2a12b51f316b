"""The operator's status: helpers every controller uses to read the ``KubeScheduler`` and write its sub-conditions,
and the status controller that combines those into ``ClusterOperator/kube-scheduler``, as library-go's
``status`` package does.

Sub-conditions (``<Controller>Degraded``, ``...Progressing``, ``...Available``, ``...Upgradeable``) are written on
``KubeScheduler/cluster`` by the controller that owns them. The status controller unions them by suffix:

- Degraded (good: False), Progressing (good: False), Available (good: True), Upgradeable (good: True).
- No matching sub-condition: Unknown, reason ``NoData``. None bad: the good status, reason ``AsExpected``.
  Some bad: the bad status, reason ``<Prefix>_<Reason>`` sorted and joined with ``::``, one message line
  ``<Type>: <message line>`` per bad sub-condition.
- A Degraded sub-condition counts only once it has been True longer than its inertia (2 min by default, a flag),
  so a transient failure does not flap the ClusterOperator.
- ``managementState: Unmanaged`` (and ``Removed`` once the operand is gone): every condition Unknown, reason
  ``Unmanaged``/``Removed``.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

from kubesched.client.rest import ApiClient, ApiError
from kubesched.operator import contract as c

log = logging.getLogger(__name__)

Obj = dict[str, Any]

MANAGED_STATES = ("Managed", "Force")
KUBESCHEDULER_RESOURCE = "kubeschedulers"


def now_rfc3339(clock: Callable[[], float] = time.time) -> str:
    return datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


def management_state(ks: Obj | None) -> str:
    return str(((ks or {}).get("spec") or {}).get("managementState") or "Managed")


def is_managed(ks: Obj | None) -> bool:
    """Managed and Force reconcile (library-go treats Force as Managed)."""
    return management_state(ks) in MANAGED_STATES


async def get_kubescheduler(client: ApiClient) -> Obj | None:
    """``KubeScheduler/cluster``, or None when it does not exist."""
    try:
        return await client.get(c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME)
    except ApiError as e:
        if e.is_not_found():
            return None
        raise


def condition(
    type_: str, status: str, reason: str = "", message: str = "", clock: Callable[[], float] = time.time
) -> Obj:
    return {
        "type": type_,
        "status": status,
        "lastTransitionTime": now_rfc3339(clock),
        "reason": reason,
        "message": message,
    }


def merge_conditions(existing: list[Obj], updates: Iterable[Obj]) -> list[Obj]:
    """``existing`` with each update set by type; an unchanged status keeps its lastTransitionTime."""
    out = [dict(x) for x in existing]
    index = {x.get("type"): i for i, x in enumerate(out)}
    for u in updates:
        i = index.get(u["type"])
        if i is None:
            index[u["type"]] = len(out)
            out.append(dict(u))
            continue
        prev = out[i]
        new = dict(u)
        if prev.get("status") == new.get("status") and prev.get("lastTransitionTime"):
            new["lastTransitionTime"] = prev["lastTransitionTime"]
        out[i] = new
    return out


def find_condition(conditions: Iterable[Obj], type_: str) -> Obj | None:
    return next((x for x in conditions if x.get("type") == type_), None)


async def update_status(client: ApiClient, mutate: Callable[[Obj], None], *, attempts: int = 5) -> Obj | None:
    """Read ``KubeScheduler/cluster``, let ``mutate`` change its ``status`` (a dict, created if absent) and write
    it back through the status subresource with optimistic concurrency; retried on conflict. Nothing is written
    when ``mutate`` leaves the status as it was. None when the object does not exist."""
    for attempt in range(attempts):
        ks = await get_kubescheduler(client)
        if ks is None:
            return None
        status = copy.deepcopy(ks.get("status") or {})
        before = copy.deepcopy(status)
        mutate(status)
        if status == before:
            return ks
        ks["status"] = status
        try:
            return await client.replace(
                c.KUBESCHEDULER_API_VERSION,
                c.KUBESCHEDULER_PLURAL,
                c.SINGLETON_NAME,
                ks,
                subresource="status",
            )
        except ApiError as e:
            if not e.is_conflict() or attempt == attempts - 1:
                raise
            await asyncio.sleep(0.05 * (attempt + 1))
    return None


async def set_conditions(client: ApiClient, *conditions: Obj) -> Obj | None:
    """Set sub-conditions on ``KubeScheduler/cluster`` (by type; transition times kept when unchanged)."""

    def mutate(status: Obj) -> None:
        merged = merge_conditions(status.get("conditions") or [], conditions)
        if merged != (status.get("conditions") or []):
            status["conditions"] = merged

    return await update_status(client, mutate)
