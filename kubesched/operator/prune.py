"""Pruning old revisions (library-go's ``prune`` controller).

What is kept follows upstream: with ``succeededRevisionLimit`` s and ``failedRevisionLimit`` f (0 or unset: 5;
-1: keep everything), the revisions ``[latest-max(s,f)+1 .. latest]`` while some node is not at the latest, and for
every node ``[current-s+1 .. current]``, ``[target-max(s,f)+1 .. target]`` and ``[lastFailed-f+1 .. lastFailed]`` —
so the current and target revision of every node always stay.

In the API, ``revision-status-<n>`` configmaps not kept are deleted; their copies (``config-<n>``, ...) are owned
by them and go with them. On the nodes, folders ``kube-scheduler-pod-<n>`` not kept are removed by the installer
right after it installs (``--protected-revisions``) and by a pruner pod per node once the node runs the latest
revision (``kubesched installer --prune-only``), as upstream's pruner pods.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator.revision import list_revision_statuses
from kubesched.operator.status import get_kubescheduler, is_managed

log = logging.getLogger(__name__)

Obj = dict[str, Any]

DEFAULT_LIMIT = 5


def revision_limit(value: Any) -> int | None:
    """A spec limit: 0/unset → 5, -1 (any negative) → None (unlimited)."""
    try:
        n = int(value or 0)
    except (TypeError, ValueError):
        n = 0
    if n < 0:
        return None
    return n or DEFAULT_LIMIT


def _span(top: int, count: int) -> set[int]:
    return set(range(max(1, top - count + 1), top + 1)) if top > 0 else set()


def kept_revisions(latest: int, node_statuses: list[Obj], spec: Obj) -> set[int] | None:
    """The revisions to keep, or None to keep all (a limit of -1)."""
    succeeded = revision_limit(spec.get("succeededRevisionLimit"))
    failed = revision_limit(spec.get("failedRevisionLimit"))
    if succeeded is None or failed is None:
        return None
    widest = max(succeeded, failed)
    keep: set[int] = set()
    currents = [int(ns.get("currentRevision") or 0) for ns in node_statuses]
    if latest > 0 and (not currents or any(cur < latest for cur in currents)):
        keep |= _span(latest, widest)
    for ns in node_statuses:
        keep |= _span(int(ns.get("currentRevision") or 0), succeeded)
        keep |= _span(int(ns.get("targetRevision") or 0), widest)
        keep |= _span(int(ns.get("lastFailedRevision") or 0), failed)
    if latest > 0:
        keep.add(latest)
    return keep


PRUNER_LABEL = {"app": "pruner"}


@dataclass
class PruneController:
    """Deletes the revisions not kept from the API and, once a node runs the latest revision, starts a pruner pod
    ``revision-pruner-<latest>-<node>`` there that removes the other revision folders (``kubesched installer
    --prune-only``), as upstream's pruner pods."""

    image: str = "kubesched"
    name: str = "PruneController"
    deleted: list[int] = field(default_factory=list, init=False)

    async def sync(self, ctx: c.OperatorContext) -> None:
        self.deleted = []
        ks = await get_kubescheduler(ctx.client)
        if ks is None or not is_managed(ks):
            return
        status = ks.get("status") or {}
        latest = int(status.get("latestAvailableRevision") or 0)
        keep = kept_revisions(latest, status.get("nodeStatuses") or [], ks.get("spec") or {})
        if keep is None or latest == 0:
            return
        statuses = await list_revision_statuses(ctx.client, ctx.operand_namespace)
        for n in sorted(statuses):
            if n > latest or n in keep:
                continue
            try:
                await ctx.client.delete(
                    "v1",
                    "configmaps",
                    f"{c.REVISION_STATUS_PREFIX}{n}",
                    namespace=ctx.operand_namespace,
                    propagation_policy="Background",
                )
            except ApiError as e:
                if not e.is_not_found():
                    raise
            self.deleted.append(n)
        await self._prune_nodes(ctx, latest, keep, status.get("nodeStatuses") or [], statuses.get(latest))
        if self.deleted:
            log.info("pruned revisions %s (keeping %s)", self.deleted, sorted(keep))
            ctx.recorder.event(
                c.event_regarding(ctx),
                "Normal",
                "RevisionsPruned",
                "Prune",
                f"Pruned revisions {', '.join(map(str, self.deleted))}; kept {', '.join(map(str, sorted(keep)))}",
            )

    async def _prune_nodes(
        self, ctx: c.OperatorContext, latest: int, keep: set[int], nodes: list[Obj], latest_status: Obj | None
    ) -> None:
        from kubesched.operator.installer_cmd import node_pod

        for ns in nodes:
            node = str(ns.get("nodeName") or "")
            if (
                not node
                or int(ns.get("currentRevision") or 0) != latest
                or int(ns.get("targetRevision") or 0)
            ):
                continue  # only once the node is done with the latest revision
            name = f"revision-pruner-{latest}-{node}"
            args = [
                "-v=2",
                "--prune-only",
                f"--max-eligible-revision={latest}",
                f"--protected-revisions={','.join(map(str, sorted(keep)))}",
                f"--resource-dir={c.RESOURCE_DIR}",
                f"--pod={c.POD_CONFIGMAP}",
            ]
            pod = node_pod(ctx.operand_namespace, name, node, self.image, args, PRUNER_LABEL)
            if latest_status is not None:
                pod["metadata"]["ownerReferences"] = [
                    {
                        "apiVersion": "v1",
                        "kind": "ConfigMap",
                        "name": latest_status["metadata"]["name"],
                        "uid": latest_status["metadata"]["uid"],
                    }
                ]
            try:
                await ctx.client.create("v1", "pods", pod, namespace=ctx.operand_namespace)
            except ApiError as e:
                if e.is_already_exists():
                    continue
                raise
            ctx.recorder.event(
                c.event_regarding(ctx),
                "Normal",
                "PodCreated",
                "Prune",
                f"Created Pod/{name} -n {ctx.operand_namespace}",
            )
