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
from dataclasses import dataclass, field
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


# ---- the status controller ----------------------------------------------------------------------------------

TOP_LEVEL = ("Available", "Progressing", "Degraded", "Upgradeable")
GOOD = {"Available": "True", "Progressing": "False", "Degraded": "False", "Upgradeable": "True"}
DEFAULT_DEGRADED_INERTIA = 120.0
# Upstream's longer inertia for conditions that flap while nodes reboot.
SLOW_DEGRADED = {"NodeControllerDegraded": 600.0, "StaticPodsDegraded": 600.0}


def kubesched_version() -> str:
    from importlib import metadata

    try:
        return metadata.version("kubesched")
    except metadata.PackageNotFoundError:
        return "0.0.0"


def union_condition(
    type_: str,
    sub_conditions: list[Obj],
    now: float,
    inertia: Callable[[str], float] = lambda _t: 0.0,
) -> Obj:
    """One ClusterOperator condition from the sub-conditions whose type ends with ``type_``."""
    good = GOOD[type_]
    bad_status = "False" if good == "True" else "True"
    matching = [sc for sc in sub_conditions if sc.get("type", "").endswith(type_) and sc.get("type") != type_]
    if not matching:
        return {"type": type_, "status": "Unknown", "reason": "NoData", "message": ""}
    bad = []
    for sc in matching:
        if sc.get("status") == good:
            continue
        if type_ == "Degraded" and sc.get("status") == "True":
            since = parse_rfc3339(sc.get("lastTransitionTime"))
            if since is not None and now - since < inertia(sc["type"]):
                continue  # not bad for long enough yet
        bad.append(sc)
    if not bad:
        lines = [
            f"{sc['type']}: {line}"
            for sc in sorted(matching, key=lambda s: s["type"])
            for line in str(sc.get("message") or "").splitlines()
            if line
        ]
        return {
            "type": type_,
            "status": good,
            "reason": "AsExpected",
            "message": "\n".join(lines) or "All is well",
        }
    status = bad_status if any(sc.get("status") == bad_status for sc in bad) else "Unknown"
    reasons = sorted(f"{sc['type'].removesuffix(type_)}_{sc.get('reason') or 'Error'}" for sc in bad)
    lines = [
        f"{sc['type']}: {line}"
        for sc in sorted(bad, key=lambda s: s["type"])
        for line in (str(sc.get("message") or "").splitlines() or [""])
    ]
    return {"type": type_, "status": status, "reason": "::".join(reasons), "message": "\n".join(lines)}


def related_objects(ctx: c.OperatorContext) -> list[Obj]:
    return [
        {"group": "operator.openshift.io", "resource": "kubeschedulers", "name": c.SINGLETON_NAME},
        {"group": "config.openshift.io", "resource": "schedulers", "name": ""},
        {"group": "", "resource": "namespaces", "name": ctx.user_config_namespace},
        {"group": "", "resource": "namespaces", "name": c.MANAGED_CONFIG_NAMESPACE},
        {"group": "", "resource": "namespaces", "name": ctx.operator_namespace},
        {"group": "", "resource": "namespaces", "name": ctx.operand_namespace},
    ]


def describe_changes(old: list[Obj], new: list[Obj]) -> str:
    """E.g. 'Progressing changed from True to False ("...")'; '' when nothing a person sees changed."""
    before = {x.get("type"): x for x in old}
    parts = []
    for cond in new:
        prev = before.get(cond["type"])
        if prev is None:
            parts.append(f"{cond['type']} set to {cond['status']} ({cond.get('reason', '')})")
        elif prev.get("status") != cond["status"]:
            parts.append(
                f"{cond['type']} changed from {prev.get('status')} to {cond['status']} "
                f"({cond.get('reason', '')}: {(str(cond.get('message') or '').splitlines() or [''])[0]})"
            )
        elif prev.get("message") != cond.get("message") or prev.get("reason") != cond.get("reason"):
            parts.append(f"{cond['type']} message changed to {cond.get('message')!r}")
    return ", ".join(parts)


@dataclass
class StatusController:
    """Writes ``ClusterOperator/kube-scheduler`` (created when missing) and the top-level conditions, versions,
    ``readyReplicas`` and ``observedGeneration`` of ``KubeScheduler/cluster``."""

    name: str = "StatusController"
    clock: Callable[[], float] = time.time
    degraded_inertia: float = DEFAULT_DEGRADED_INERTIA
    version: str = field(default_factory=kubesched_version)

    def _inertia(self, type_: str) -> float:
        return max(self.degraded_inertia, SLOW_DEGRADED.get(type_, 0.0)) if self.degraded_inertia else 0.0

    async def sync(self, ctx: c.OperatorContext) -> None:
        client = ctx.client
        ks = await get_kubescheduler(client)
        if ks is None:
            return
        state = management_state(ks)
        spec = ks.get("spec") or {}
        if state in MANAGED_STATES:
            overrides = spec.get("unsupportedConfigOverrides")
            if overrides:
                keys = sorted(overrides) if isinstance(overrides, dict) else []
                upgradeable = condition(
                    "UnsupportedConfigOverridesUpgradeable",
                    "False",
                    "UnsupportedConfigOverridesSet",
                    f"setting: {keys}",
                    self.clock,
                )
            else:
                upgradeable = condition(
                    "UnsupportedConfigOverridesUpgradeable",
                    "True",
                    "NoUnsupportedConfigOverrides",
                    "",
                    self.clock,
                )
            ks = await set_conditions(client, upgradeable) or ks
        status = ks.get("status") or {}
        subs = [x for x in status.get("conditions") or [] if x.get("type") not in TOP_LEVEL]
        now = self.clock()
        if state == "Unmanaged":
            top = [
                {
                    "type": t,
                    "status": "Unknown",
                    "reason": "Unmanaged",
                    "message": "managementState is Unmanaged",
                }
                for t in TOP_LEVEL
            ]
        elif state == "Removed":
            msg = "managementState is Removed: the scheduler's static pods are taken off the control-plane nodes"
            top = [
                {"type": "Available", "status": "False", "reason": "Removed", "message": msg},
                {"type": "Progressing", "status": "False", "reason": "Removed", "message": msg},
                {"type": "Degraded", "status": "False", "reason": "Removed", "message": msg},
                {"type": "Upgradeable", "status": "True", "reason": "Removed", "message": msg},
            ]
        else:
            top = [union_condition(t, subs, now, self._inertia) for t in TOP_LEVEL]
        for x in top:
            x["lastTransitionTime"] = now_rfc3339(self.clock)
        pods = (await client.list_all("v1", "pods", namespace=ctx.operand_namespace)).get("items") or []
        ready = sum(
            1
            for p in pods
            if p["metadata"]["name"].startswith(f"{c.STATIC_POD_NAME}-")
            and any(
                x.get("type") == "Ready" and x.get("status") == "True"
                for x in (p.get("status") or {}).get("conditions") or []
            )
        )
        generation = int((ks.get("metadata") or {}).get("generation") or 0)
        nodes = status.get("nodeStatuses") or []
        latest = int(status.get("latestAvailableRevision") or 0)
        all_at_latest = (
            bool(nodes) and latest > 0 and all(int(n.get("currentRevision") or 0) == latest for n in nodes)
        )
        versions = [{"name": "operator", "version": self.version}]
        if all_at_latest:
            versions.append({"name": "kube-scheduler", "version": self.version})

        def mutate(st: Obj) -> None:
            st["conditions"] = merge_conditions(st.get("conditions") or [], top)
            st["readyReplicas"] = ready
            st["observedGeneration"] = generation
            st.setdefault("generations", [])
            if all_at_latest:
                st["version"] = self.version

        await update_status(client, mutate)
        await self._write_cluster_operator(ctx, top, versions)

    async def _write_cluster_operator(
        self, ctx: c.OperatorContext, top: list[Obj], versions: list[Obj]
    ) -> None:
        client = ctx.client
        try:
            co = await client.get(
                c.CLUSTEROPERATOR_API_VERSION, c.CLUSTEROPERATOR_PLURAL, c.CLUSTEROPERATOR_NAME
            )
        except ApiError as e:
            if not e.is_not_found():
                raise
            co = await client.create(
                c.CLUSTEROPERATOR_API_VERSION,
                c.CLUSTEROPERATOR_PLURAL,
                {
                    "apiVersion": c.CLUSTEROPERATOR_API_VERSION,
                    "kind": "ClusterOperator",
                    "metadata": {"name": c.CLUSTEROPERATOR_NAME},
                    "spec": {},
                },
            )
        old_status = co.get("status") or {}
        old_conditions = old_status.get("conditions") or []
        new_status = copy.deepcopy(old_status)
        new_status["conditions"] = merge_conditions(old_conditions, top)
        new_status["relatedObjects"] = related_objects(ctx)
        # Keep the operand's version once reached, as upstream's version recorder does.
        known = {v["name"]: v for v in old_status.get("versions") or []}
        for v in versions:
            known[v["name"]] = v
        new_status["versions"] = [known[k] for k in sorted(known)]
        if new_status == old_status:
            return
        co["status"] = new_status
        await client.replace(
            c.CLUSTEROPERATOR_API_VERSION,
            c.CLUSTEROPERATOR_PLURAL,
            c.CLUSTEROPERATOR_NAME,
            co,
            subresource="status",
        )
        diff = describe_changes(old_conditions, new_status["conditions"])
        if diff:
            ctx.recorder.event(
                c.event_regarding(ctx),
                "Normal",
                "OperatorStatusChanged",
                "UpdateStatus",
                f"Status for clusteroperator/{c.CLUSTEROPERATOR_NAME} changed: {diff}",
            )
