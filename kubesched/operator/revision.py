"""The revision controller (library-go's ``revisioncontroller``): numbered, immutable copies of the scheduler's
inputs, so a node can be moved to exactly one known set of files.

Each sync, when the operator is Managed (or Force):

1. The latest revision is the highest ``revision-status-<N>`` configmap marked ready
   (annotation ``operator.openshift.io/revision-ready: "true"``); ``status.latestAvailableRevision`` follows it.
2. Every revisioned input (``contract.REVISION_CONFIGMAPS``/``REVISION_SECRETS`` in the operand namespace) is
   compared with its copy ``<name>-<N>``. A required input that is missing means "wait": condition
   ``RevisionControllerDegraded`` (reason ``RequiredInputsMissing``) and no revision, never a partial one.
3. When something differs (or ``spec.forceRedeploymentReason`` changed and the pod configmap does not already carry
   it), revision N+1 is made: ``revision-status-<N+1>`` first (not ready; data ``revision``, ``reason``,
   ``status``), then the copies, each owned by that configmap (deleting it removes them), then the ready mark,
   ``status.latestAvailableRevision = N+1`` and events ``RevisionTriggered`` (why) and ``RevisionCreated``.

A crash between those steps leaves an unready ``revision-status-<N+1>``: the next sync sees N as latest, finds
the same difference and completes N+1 in place (copies are created or replaced), so no number is skipped.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesched.client.rest import ApiClient, ApiError
from kubesched.operator import contract as c
from kubesched.operator.status import condition, get_kubescheduler, is_managed, set_conditions, update_status

log = logging.getLogger(__name__)

Obj = dict[str, Any]

READY_ANNOTATION = "operator.openshift.io/revision-ready"
INSTANCE_LABEL = "operator.openshift.io/controller-instance-name"
INSTANCE_NAME = "kube-scheduler-RevisionController"
FORCE_KEY = "forceRedeploymentReason"
DEGRADED = "RevisionControllerDegraded"


@dataclass(frozen=True)
class Input:
    name: str
    optional: bool
    secret: bool

    @property
    def kind(self) -> str:
        return "secret" if self.secret else "configmap"

    @property
    def plural(self) -> str:
        return "secrets" if self.secret else "configmaps"

    def describe(self) -> str:
        return f"{'optional' if self.optional else 'required'} {self.kind}/{self.name}"


def revisioned_inputs() -> list[Input]:
    return [Input(n, o, False) for n, o in c.REVISION_CONFIGMAPS] + [
        Input(n, o, True) for n, o in c.REVISION_SECRETS
    ]


def revision_of(status_cm: Obj) -> int | None:
    """N of a ``revision-status-<N>`` configmap (from its data, else its name)."""
    data = status_cm.get("data") or {}
    name = str((status_cm.get("metadata") or {}).get("name", ""))
    raw = data.get("revision") or name.removeprefix(c.REVISION_STATUS_PREFIX)
    try:
        return int(raw)
    except (TypeError, ValueError):
        return None


def is_ready(status_cm: Obj) -> bool:
    return ((status_cm.get("metadata") or {}).get("annotations") or {}).get(READY_ANNOTATION) == "true"


def content(obj: Obj | None) -> tuple[Obj, Obj] | None:
    """What a revision compares: data and binaryData (None: the object does not exist)."""
    if obj is None:
        return None
    return (obj.get("data") or {}, obj.get("binaryData") or {})


async def get_or_none(client: ApiClient, plural: str, name: str, namespace: str) -> Obj | None:
    try:
        return await client.get("v1", plural, name, namespace=namespace)
    except ApiError as e:
        if e.is_not_found():
            return None
        raise


async def list_revision_statuses(client: ApiClient, namespace: str) -> dict[int, Obj]:
    """``{N: revision-status-N}`` in ``namespace``."""
    items = (await client.list_all("v1", "configmaps", namespace=namespace)).get("items") or []
    out: dict[int, Obj] = {}
    for cm in items:
        name = str(cm["metadata"]["name"])
        if not name.startswith(c.REVISION_STATUS_PREFIX):
            continue
        n = revision_of(cm)
        if n is not None:
            out[n] = cm
    return out


def latest_ready(statuses: dict[int, Obj]) -> int:
    return max((n for n, cm in statuses.items() if is_ready(cm)), default=0)


@dataclass
class RevisionController:
    """Creates revision N+1 when the inputs differ from revision N's copies."""

    name: str = "RevisionController"
    clock: Callable[[], float] = time.time
    # Why the last sync did nothing (for tests and logs): "", "unmanaged", "waiting", "current".
    last_outcome: str = field(default="", init=False)

    async def sync(self, ctx: c.OperatorContext) -> None:
        client, ns = ctx.client, ctx.operand_namespace
        ks = await get_kubescheduler(client)
        if ks is None or not is_managed(ks):
            self.last_outcome = "unmanaged"
            return
        statuses = await list_revision_statuses(client, ns)
        latest = latest_ready(statuses)
        await self._publish_latest(client, ks, latest)

        current: dict[Input, Obj | None] = {}
        missing: list[str] = []
        for inp in revisioned_inputs():
            obj = await get_or_none(client, inp.plural, inp.name, ns)
            current[inp] = obj
            if obj is None and not inp.optional:
                missing.append(f"{inp.kind}/{inp.name}")
        if missing:
            self.last_outcome = "waiting"
            await set_conditions(
                client,
                condition(
                    DEGRADED,
                    "True",
                    "RequiredInputsMissing",
                    f"waiting for {', '.join(missing)} in namespace {ns} before creating a revision",
                    self.clock,
                ),
            )
            return

        reasons = await self._differences(client, ns, latest, current, ks, statuses.get(latest))
        if not reasons:
            self.last_outcome = "current"
            await set_conditions(client, condition(DEGRADED, "False", "AsExpected", "", self.clock))
            return
        revision = latest + 1
        reason = ",".join(reasons)
        await self._create(ctx, ks, revision, reason, current)
        self.last_outcome = f"created {revision}"

    async def _publish_latest(self, client: ApiClient, ks: Obj, latest: int) -> None:
        have = int((ks.get("status") or {}).get("latestAvailableRevision") or 0)
        if latest > have:

            def mutate(status: Obj) -> None:
                if int(status.get("latestAvailableRevision") or 0) < latest:
                    status["latestAvailableRevision"] = latest

            await update_status(client, mutate)

    async def _differences(
        self,
        client: ApiClient,
        ns: str,
        latest: int,
        current: dict[Input, Obj | None],
        ks: Obj,
        latest_status: Obj | None,
    ) -> list[str]:
        if latest == 0:
            return ["initial revision"]
        reasons: list[str] = []
        for inp, obj in current.items():
            copy_ = await get_or_none(client, inp.plural, f"{inp.name}-{latest}", ns)
            now, then = content(obj), content(copy_)
            if now == then:
                continue
            if then is None:
                reasons.append(f"{inp.describe()} has been created")
            elif now is None:
                reasons.append(f"{inp.describe()} has been removed")
            else:
                reasons.append(f"{inp.describe()} has changed")
        pod_cm = current.get(Input(c.POD_CONFIGMAP, False, False))
        if pod_cm is not None and FORCE_KEY not in (pod_cm.get("data") or {}):
            wanted = str((ks.get("spec") or {}).get(FORCE_KEY) or "")
            recorded = str(((latest_status or {}).get("data") or {}).get(FORCE_KEY) or "")
            if wanted != recorded:
                reasons.append(
                    f"forced redeployment: {wanted!r}" if wanted else "forced redeployment cleared"
                )
        return reasons

    async def _create(
        self, ctx: c.OperatorContext, ks: Obj, revision: int, reason: str, current: dict[Input, Obj | None]
    ) -> None:
        client, ns = ctx.client, ctx.operand_namespace
        ctx.recorder.event(
            c.event_regarding(ctx),
            "Normal",
            "RevisionTriggered",
            "CreateRevision",
            f"new revision {revision} triggered by {reason!r}",
        )
        status_name = f"{c.REVISION_STATUS_PREFIX}{revision}"
        force = str((ks.get("spec") or {}).get(FORCE_KEY) or "")
        status_cm: Obj = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": status_name,
                "namespace": ns,
                "labels": {INSTANCE_LABEL: INSTANCE_NAME},
                "annotations": {READY_ANNOTATION: "false"},
            },
            "data": {"revision": str(revision), "reason": reason, "status": "InProgress", FORCE_KEY: force},
        }
        created = await _create_or_replace(client, "configmaps", status_cm, ns)
        owner = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": status_name,
            "uid": created["metadata"]["uid"],
        }
        for inp, obj in current.items():
            if obj is None:  # an optional input that does not exist: no copy
                continue
            copy_: Obj = {
                "apiVersion": "v1",
                "kind": "Secret" if inp.secret else "ConfigMap",
                "metadata": {
                    "name": f"{inp.name}-{revision}",
                    "namespace": ns,
                    "ownerReferences": [owner],
                },
            }
            for key in ("data", "binaryData", "type"):
                if obj.get(key):
                    copy_[key] = obj[key]
            await _create_or_replace(client, inp.plural, copy_, ns)
        created["metadata"].setdefault("annotations", {})[READY_ANNOTATION] = "true"
        await client.replace("v1", "configmaps", status_name, created, namespace=ns)

        def mutate(status: Obj) -> None:
            if int(status.get("latestAvailableRevision") or 0) < revision:
                status["latestAvailableRevision"] = revision

        await update_status(client, mutate)
        await set_conditions(client, condition(DEGRADED, "False", "AsExpected", "", self.clock))
        ctx.recorder.event(
            c.event_regarding(ctx),
            "Normal",
            "RevisionCreated",
            "CreateRevision",
            f"Created revision {revision}: {reason}",
        )
        log.info("created revision %d: %s", revision, reason)


async def _create_or_replace(client: ApiClient, plural: str, body: Obj, namespace: str) -> Obj:
    try:
        return await client.create("v1", plural, body, namespace=namespace)
    except ApiError as e:
        if not e.is_already_exists():
            raise
    existing = await client.get("v1", plural, body["metadata"]["name"], namespace=namespace)
    merged = dict(body)
    meta = dict(body["metadata"])
    meta["resourceVersion"] = existing["metadata"]["resourceVersion"]
    meta["uid"] = existing["metadata"]["uid"]
    merged["metadata"] = meta
    return await client.replace("v1", plural, meta["name"], merged, namespace=namespace)
