"""The installer controller (library-go's ``installer`` controller): moves the control-plane nodes, one at a time,
to the latest revision by running an installer pod on each, and keeps ``status.nodeStatuses[]`` truthful.

Each sync recomputes everything from what it observes (the ``KubeScheduler``, the control-plane nodes, the pods
in the operand namespace), so a restarted operator resumes a rollout where it stood:

- ``nodeStatuses[]`` gets one entry per control-plane node (label ``node-role.kubernetes.io/control-plane`` or
  ``master``); entries of vanished nodes are dropped.
- The node being worked on is the one with a ``targetRevision``; else the first (lowest current revision, then
  name) that is not at the latest revision, or whose static pod is missing. Its target becomes the latest
  revision (event ``NodeTargetRevisionChanged``). Only that node is touched until it is done.
- Its installer pod ``installer-<N>-<node>`` (retries: ``installer-<N>-retry-<k>-<node>``) is pinned to the node,
  runs ``kubesched installer`` as service account ``installer-sa``, tolerates everything, at
  ``system-node-critical``. A newer revision preempts a running installer of an older one.
- Installer Succeeded and the mirror pod ``kube-scheduler-<node>`` Ready with label ``revision=<N>``: the node's
  ``currentRevision`` becomes N, target 0 (``NodeCurrentRevisionChanged``), ``revision-status-N`` says
  ``Succeeded``.
- Installer Failed: ``lastFailedRevision``, ``lastFailedTime``, ``lastFailedCount``, ``lastFailedReason``
  (``InstallerFailed``), ``lastFailedRevisionErrors``; warning ``InstallerPodFailed``; retried after
  10 s * 1.5^(failures-1), at most 10 min. The node keeps running its current revision and no other node is
  touched, so a bad revision never takes a second node down.
- The new static pod restarting ``operand_restart_limit`` (3) times without becoming Ready: ``lastFailedReason``
  ``OperandFailed``, the target cleared, and the revision goes to no other node until a newer one exists.
- Conditions on the ``KubeScheduler``: ``StaticPodsAvailable``, ``NodeInstallerProgressing``,
  ``NodeInstallerDegraded``, ``InstallerControllerDegraded``.

``managementState: Removed`` runs ``kubesched installer --remove`` on every control-plane node that still has the
scheduler's static pod (upstream only stops reconciling; see ``status.py``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kubesched.client.rest import ApiClient, ApiError
from kubesched.operator import contract as c
from kubesched.operator.installer_cmd import INSTALLER_SA, node_pod
from kubesched.operator.prune import kept_revisions
from kubesched.operator.revision import get_or_none
from kubesched.operator.status import (
    condition,
    get_kubescheduler,
    is_managed,
    management_state,
    merge_conditions,
    now_rfc3339,
    parse_rfc3339,
    update_status,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
INSTALLER_ROLE = "kube-scheduler-installer"
INSTALLER_LABEL = {"app": "installer"}
REMOVER_LABEL = {"app": "remover"}
BACKOFF_BASE = 10.0
BACKOFF_MAX = 600.0


def is_control_plane(node: Obj) -> bool:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return any(k in labels for k in CONTROL_PLANE_LABELS)


def mirror_pod_name(node: str) -> str:
    return f"{c.STATIC_POD_NAME}-{node}"


def installer_pod_name(revision: int, node: str, retry: int = 0) -> str:
    if retry:
        return f"{c.INSTALLER_POD_PREFIX}{revision}-retry-{retry}-{node}"
    return f"{c.INSTALLER_POD_PREFIX}{revision}-{node}"


def backoff_seconds(failures: int, base: float = BACKOFF_BASE, cap: float = BACKOFF_MAX) -> float:
    """Wait before retry number ``failures`` (1: base)."""
    if failures <= 0:
        return 0.0
    return float(min(cap, base * 1.5 ** (failures - 1)))


def pod_ready(pod: Obj | None) -> bool:
    if pod is None:
        return False
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def pod_revision(pod: Obj | None) -> int:
    try:
        return int(((pod or {}).get("metadata") or {}).get("labels", {}).get("revision") or 0)
    except (TypeError, ValueError):
        return 0


def pod_phase(pod: Obj | None) -> str:
    return str(((pod or {}).get("status") or {}).get("phase") or "")


def termination_errors(pod: Obj) -> list[str]:
    """One line per failed container: its terminated message, else reason and exit code."""
    out: list[str] = []
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        if not term or term.get("exitCode") == 0:
            continue
        msg = str(term.get("message") or "").strip()
        what = msg or f"{term.get('reason') or 'Error'} (exit code {term.get('exitCode')})"
        out.append(f"{cs.get('name')}: {what}")
    return out or ["installer pod failed"]


def operand_failure(mirror: Obj, restart_limit: int) -> list[str]:
    """Why a static pod counts as failed (restarted ``restart_limit`` times, not Ready), else []."""
    if pod_ready(mirror):
        return []
    out: list[str] = []
    for cs in (mirror.get("status") or {}).get("containerStatuses") or []:
        if int(cs.get("restartCount") or 0) < restart_limit:
            continue
        term = (
            (cs.get("lastState") or {}).get("terminated") or (cs.get("state") or {}).get("terminated") or {}
        )
        msg = str(term.get("message") or "").strip().splitlines()
        what = msg[-1] if msg else f"exit code {term.get('exitCode')}"
        out.append(f"{cs.get('name')}: restarted {cs.get('restartCount')} times; last: {what}")
    if (mirror.get("status") or {}).get("phase") == "Failed" and not out:
        out.append("static pod failed")
    return out


def operand_failed_on(ns: Obj, revision: int) -> bool:
    return (
        int(ns.get("lastFailedRevision") or 0) == revision
        and ns.get("lastFailedReason") == "OperandFailed"
        and int(ns.get("currentRevision") or 0) < revision
    )


def plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def progress_message(node_statuses: list[Obj], latest: int) -> str:
    """E.g. "1 node is at revision 1; 0 nodes have achieved new revision 2"."""
    by_rev: dict[int, int] = {}
    for ns in node_statuses:
        cur = int(ns.get("currentRevision") or 0)
        by_rev[cur] = by_rev.get(cur, 0) + 1
    parts = []
    for rev in sorted(by_rev, reverse=True):
        n = by_rev[rev]
        verb = "is" if n == 1 else "are"
        parts.append(f"{plural(n, 'node')} {verb} at revision {rev}")
    at_latest = by_rev.get(latest, 0)
    return (
        "; ".join(parts)
        + f"; {at_latest} {'node has' if at_latest == 1 else 'nodes have'} achieved new revision {latest}"
    )


@dataclass
class InstallerController:
    """Runs installer pods, one node at a time, and writes ``nodeStatuses`` and the node installer conditions."""

    image: str = "kubesched"
    name: str = "InstallerController"
    clock: Callable[[], float] = time.time
    backoff_base: float = BACKOFF_BASE
    backoff_max: float = BACKOFF_MAX
    log_verbosity: int = 2
    # A new static pod restarted this many times without becoming Ready is a failed revision (OperandFailed).
    operand_restart_limit: int = 3
    # Set by sync when it is waiting for time to pass (a back-off): the runtime syncs again after that long.
    requeue_after: float | None = field(default=None, init=False)

    async def sync(self, ctx: c.OperatorContext) -> None:
        self.requeue_after = None
        client = ctx.client
        ks = await get_kubescheduler(client)
        if ks is None:
            return
        nodes = await self._control_plane_nodes(client)
        if management_state(ks) == "Removed":
            await self._remove(ctx, ks, nodes)
            return
        if not is_managed(ks):
            return
        await self._ensure_backing_resources(ctx)
        status = ks.get("status") or {}
        latest = int(status.get("latestAvailableRevision") or 0)
        statuses = self._reconcile_nodes(ctx, status.get("nodeStatuses") or [], nodes)
        pods = await self._operand_pods(ctx)
        events: list[tuple[str, str, str]] = []
        installer_degraded: Obj = condition(
            "InstallerControllerDegraded", "False", "AsExpected", "", self.clock
        )

        if latest > 0:
            missing = await get_or_none(
                client, "configmaps", f"{c.POD_CONFIGMAP}-{latest}", ctx.operand_namespace
            )
            if missing is None:
                installer_degraded = condition(
                    "InstallerControllerDegraded",
                    "True",
                    "RequiredInstallerResourcesMissing",
                    f"configmaps: {c.POD_CONFIGMAP}-{latest}",
                    self.clock,
                )
                events.append(
                    (
                        "Warning",
                        "RequiredInstallerResourcesMissing",
                        f"configmaps: {c.POD_CONFIGMAP}-{latest}",
                    )
                )
            else:
                await self._advance(ctx, ks, statuses, latest, pods, events)

        conditions = [*self._conditions(statuses, latest), installer_degraded]

        def mutate(st: Obj) -> None:
            st["nodeStatuses"] = statuses
            st["conditions"] = merge_conditions(st.get("conditions") or [], conditions)

        await update_status(client, mutate)
        for etype, reason, note in events:
            ctx.recorder.event(c.event_regarding(ctx), etype, reason, "Install", note)

    # ---- observation ----------------------------------------------------------------------------------------

    async def _control_plane_nodes(self, client: ApiClient) -> list[Obj]:
        items = (await client.list_all("v1", "nodes")).get("items") or []
        return sorted((n for n in items if is_control_plane(n)), key=lambda n: n["metadata"]["name"])

    async def _operand_pods(self, ctx: c.OperatorContext) -> dict[str, Obj]:
        items = (await ctx.client.list_all("v1", "pods", namespace=ctx.operand_namespace)).get("items") or []
        return {p["metadata"]["name"]: p for p in items}

    def _reconcile_nodes(self, ctx: c.OperatorContext, existing: list[Obj], nodes: list[Obj]) -> list[Obj]:
        by_name = {str(ns.get("nodeName")): dict(ns) for ns in existing}
        out: list[Obj] = []
        for node in nodes:
            name = node["metadata"]["name"]
            entry = by_name.pop(name, None)
            if entry is None:
                entry = {"nodeName": name, "currentRevision": 0}
                log.info("control-plane node %s observed", name)
            out.append(entry)
        for gone in by_name:
            log.info("control-plane node %s removed", gone)
        return out

    # ---- the rollout ----------------------------------------------------------------------------------------

    async def _advance(
        self,
        ctx: c.OperatorContext,
        ks: Obj,
        statuses: list[Obj],
        latest: int,
        pods: dict[str, Obj],
        events: list[tuple[str, str, str]],
    ) -> None:
        working = next((ns for ns in statuses if int(ns.get("targetRevision") or 0)), None)
        if working is None:
            working = self._next_node(statuses, latest, pods)
            if working is None:
                return
            prev = int(working.get("currentRevision") or 0)
            working["targetRevision"] = latest
            why = "its static pod is missing" if prev == latest else f"new revision {latest} is available"
            events.append(
                (
                    "Normal",
                    "NodeTargetRevisionChanged",
                    f"Updating node {working['nodeName']!r} from revision {prev} to {latest} because {why}",
                )
            )
            if prev == latest:  # a reinstall: the earlier installer pods of this revision are history
                await self._delete_installers(ctx, working["nodeName"], latest, pods)
        node = str(working["nodeName"])
        target = int(working["targetRevision"])
        if target < latest:
            # A newer revision preempts the one being installed.
            await self._delete_installers(ctx, node, target, pods)
            events.append(
                (
                    "Normal",
                    "NodeTargetRevisionChanged",
                    f"Updating node {node!r} from revision {target} to {latest}: a newer revision is available",
                )
            )
            working["targetRevision"] = target = latest
        retry = (
            int(working.get("lastFailedCount") or 0)
            if int(working.get("lastFailedRevision") or 0) == target
            else 0
        )
        pod_name = installer_pod_name(target, node, retry)
        pod = pods.get(pod_name)
        mirror = pods.get(mirror_pod_name(node))
        if pod is None:
            if retry:
                failed_at = parse_rfc3339(working.get("lastFailedTime")) or 0.0
                wait = failed_at + backoff_seconds(retry, self.backoff_base, self.backoff_max) - self.clock()
                if wait > 0:
                    self.requeue_after = wait
                    return
            await self._create_installer(ctx, ks, pod_name, node, target, statuses, latest)
            events.append(("Normal", "PodCreated", f"Created Pod/{pod_name} -n {ctx.operand_namespace}"))
            return
        phase = pod_phase(pod)
        if phase == "Failed":
            errors = termination_errors(pod)
            working["lastFailedRevision"] = target
            working["lastFailedTime"] = now_rfc3339(self.clock)
            working["lastFailedCount"] = retry + 1
            working["lastFailedReason"] = "InstallerFailed"
            working["lastFailedRevisionErrors"] = errors
            events.append(
                (
                    "Warning",
                    "InstallerPodFailed",
                    f"installer pod {pod_name} on node {node} failed: {'; '.join(errors)}",
                )
            )
            await self._record_revision_status(ctx, target, "Failed", "; ".join(errors))
            self.requeue_after = backoff_seconds(retry + 1, self.backoff_base, self.backoff_max)
            return
        if phase == "Succeeded" and pod_revision(mirror) == target and pod_ready(mirror):
            prev = int(working.get("currentRevision") or 0)
            working["currentRevision"] = target
            working.pop("targetRevision", None)
            events.append(
                (
                    "Normal",
                    "NodeCurrentRevisionChanged",
                    f"Updated node {node!r} from revision {prev} to {target} because static pod is ready",
                )
            )
            await self._record_revision_status(ctx, target, "Succeeded", "")
            return
        if phase == "Succeeded" and pod_revision(mirror) == target and mirror is not None:
            crash = operand_failure(mirror, self.operand_restart_limit)
            if crash:
                # The new static pod crash-loops: upstream's OperandFailed. Reinstalling would not help; the node
                # waits for a newer revision, and no other node is given this one.
                working["lastFailedRevision"] = target
                working["lastFailedTime"] = now_rfc3339(self.clock)
                working["lastFailedCount"] = int(working.get("lastFailedCount") or 0) + 1
                working["lastFailedReason"] = "OperandFailed"
                working["lastFailedRevisionErrors"] = crash
                working.pop("targetRevision", None)
                events.append(
                    (
                        "Warning",
                        "OperandFailed",
                        f"the static pod of revision {target} on node {node} keeps failing: {'; '.join(crash)}",
                    )
                )
                await self._record_revision_status(ctx, target, "Failed", "; ".join(crash))
                return
        # Installer still running, or the new static pod not ready yet: wait for the next change.

    def _next_node(self, statuses: list[Obj], latest: int, pods: dict[str, Obj]) -> Obj | None:
        if any(operand_failed_on(ns, latest) for ns in statuses):
            return None  # the latest revision broke its static pod somewhere: roll it out nowhere else
        behind = [ns for ns in statuses if int(ns.get("currentRevision") or 0) < latest]
        if behind:
            return min(behind, key=lambda ns: (int(ns.get("currentRevision") or 0), ns["nodeName"]))
        missing = [ns for ns in statuses if mirror_pod_name(ns["nodeName"]) not in pods]
        return missing[0] if missing else None

    async def _delete_installers(
        self, ctx: c.OperatorContext, node: str, revision: int, pods: dict[str, Obj]
    ) -> None:
        prefix = f"{c.INSTALLER_POD_PREFIX}{revision}-"
        for name in list(pods):
            if not name.startswith(prefix) or not name.endswith(f"-{node}"):
                continue
            # Terminated ones too: a reinstall reuses their names.
            try:
                await ctx.client.delete(
                    "v1", "pods", name, namespace=ctx.operand_namespace, grace_period_seconds=0
                )
            except ApiError as e:
                if not e.is_not_found():
                    raise
            pods.pop(name, None)

    def _installer_pod(
        self, ctx: c.OperatorContext, name: str, node: str, revision: int, protected: set[int] | None
    ) -> Obj:
        required_cms = [n for n, opt in c.REVISION_CONFIGMAPS if not opt and n != c.POD_CONFIGMAP]
        optional_cms = [n for n, opt in c.REVISION_CONFIGMAPS if opt]
        required_secrets = [n for n, opt in c.REVISION_SECRETS if not opt]
        optional_secrets = [n for n, opt in c.REVISION_SECRETS if opt]
        args = [
            f"-v={self.log_verbosity}",
            f"--revision={revision}",
            f"--namespace={ctx.operand_namespace}",
            f"--pod={c.POD_CONFIGMAP}",
            f"--configmaps={','.join(required_cms)}",
        ]
        if optional_cms:
            args.append(f"--optional-configmaps={','.join(optional_cms)}")
        if required_secrets:
            args.append(f"--secrets={','.join(required_secrets)}")
        if optional_secrets:
            args.append(f"--optional-secrets={','.join(optional_secrets)}")
        args += [f"--resource-dir={c.RESOURCE_DIR}", f"--pod-manifest-dir={c.POD_MANIFEST_DIR}"]
        if protected is not None:
            args.append(f"--protected-revisions={','.join(map(str, sorted(protected)))}")
        return node_pod(ctx.operand_namespace, name, node, self.image, args, INSTALLER_LABEL)

    async def _create_installer(
        self,
        ctx: c.OperatorContext,
        ks: Obj,
        name: str,
        node: str,
        revision: int,
        statuses: list[Obj],
        latest: int,
    ) -> None:
        protected = kept_revisions(latest, statuses, ks.get("spec") or {})
        pod = self._installer_pod(ctx, name, node, revision, protected)
        status_cm = await get_or_none(
            ctx.client, "configmaps", f"{c.REVISION_STATUS_PREFIX}{revision}", ctx.operand_namespace
        )
        if status_cm is not None:
            pod["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "name": status_cm["metadata"]["name"],
                    "uid": status_cm["metadata"]["uid"],
                }
            ]
        try:
            await ctx.client.create("v1", "pods", pod, namespace=ctx.operand_namespace)
        except ApiError as e:
            if not e.is_already_exists():
                raise
        log.info("created installer pod %s for revision %d on %s", name, revision, node)

    async def _record_revision_status(
        self, ctx: c.OperatorContext, revision: int, status: str, reason: str
    ) -> None:
        name = f"{c.REVISION_STATUS_PREFIX}{revision}"
        patch: Obj = {"data": {"status": status}}
        if reason:
            patch["data"]["installerErrors"] = reason
        try:
            await ctx.client.patch("v1", "configmaps", name, patch, namespace=ctx.operand_namespace)
        except ApiError as e:
            if not e.is_not_found():
                raise

    async def _ensure_backing_resources(self, ctx: c.OperatorContext) -> None:
        """The installer pods' service account and what it may read (least privilege, unlike upstream's
        cluster-admin binding): configmaps, secrets and pods of the operand namespace."""
        ns = ctx.operand_namespace
        objects: list[tuple[str, str, Obj]] = [
            ("v1", "serviceaccounts", {"metadata": {"name": INSTALLER_SA, "namespace": ns}}),
            (
                "rbac.authorization.k8s.io/v1",
                "roles",
                {
                    "metadata": {"name": INSTALLER_ROLE, "namespace": ns},
                    "rules": [
                        {
                            "apiGroups": [""],
                            "resources": ["configmaps", "secrets", "pods"],
                            "verbs": ["get", "list"],
                        },
                        {
                            "apiGroups": ["", "events.k8s.io"],
                            "resources": ["events"],
                            "verbs": ["create", "patch"],
                        },
                    ],
                },
            ),
            (
                "rbac.authorization.k8s.io/v1",
                "rolebindings",
                {
                    "metadata": {"name": INSTALLER_ROLE, "namespace": ns},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": INSTALLER_ROLE,
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": INSTALLER_SA, "namespace": ns}],
                },
            ),
        ]
        for api_version, res, body in objects:
            if await _exists(ctx.client, api_version, res, body["metadata"]["name"], ns):
                continue
            try:
                await ctx.client.create(api_version, res, body, namespace=ns)
            except ApiError as e:
                if not e.is_already_exists():
                    raise

    # ---- conditions -----------------------------------------------------------------------------------------

    def _conditions(self, statuses: list[Obj], latest: int) -> list[Obj]:
        active = [ns for ns in statuses if int(ns.get("currentRevision") or 0) > 0]
        out: list[Obj] = []
        if active:
            out.append(
                condition(
                    "StaticPodsAvailable",
                    "True",
                    "AsExpected",
                    f"{plural(len(active), 'node')} {'is' if len(active) == 1 else 'are'} active; "
                    + progress_message(statuses, latest).split("; ")[0],
                    self.clock,
                )
            )
        else:
            out.append(
                condition("StaticPodsAvailable", "False", "ZeroNodesActive", "0 nodes are active", self.clock)
            )
        if latest == 0:
            out.append(
                condition(
                    "NodeInstallerProgressing",
                    "True",
                    "WaitingForRevision",
                    "waiting for the first revision of the scheduler's configuration",
                    self.clock,
                )
            )
        elif not statuses:
            out.append(
                condition(
                    "NodeInstallerProgressing",
                    "False",
                    "NoControlPlaneNodes",
                    "no node is labelled node-role.kubernetes.io/control-plane or node-role.kubernetes.io/master",
                    self.clock,
                )
            )
        elif all(int(ns.get("currentRevision") or 0) == latest for ns in statuses):
            out.append(
                condition(
                    "NodeInstallerProgressing",
                    "False",
                    "AllNodesAtLatestRevision",
                    f"{plural(len(statuses), 'node')} {'is' if len(statuses) == 1 else 'are'} at revision {latest}",
                    self.clock,
                )
            )
        else:
            out.append(
                condition(
                    "NodeInstallerProgressing",
                    "True",
                    "NodeInstaller",
                    progress_message(statuses, latest),
                    self.clock,
                )
            )
        failing = [
            ns
            for ns in statuses
            if int(ns.get("lastFailedRevision") or 0) > int(ns.get("currentRevision") or 0)
            and (
                int(ns.get("lastFailedRevision") or 0) == int(ns.get("targetRevision") or 0)
                or operand_failed_on(ns, latest)
            )
        ]
        if failing:
            revs = sorted({int(ns["lastFailedRevision"]) for ns in failing})
            lines = [
                f"{plural(len(failing), 'node')} {'is' if len(failing) == 1 else 'are'} failing on revision "
                + ", ".join(map(str, revs))
                + ":"
            ]
            for ns in failing:
                lines += [f"{ns['nodeName']}: {e}" for e in ns.get("lastFailedRevisionErrors") or []]
            reason = (
                "OperandFailed"
                if all(ns.get("lastFailedReason") == "OperandFailed" for ns in failing)
                else ("InstallerPodFailed")
            )
            out.append(condition("NodeInstallerDegraded", "True", reason, "\n".join(lines), self.clock))
        else:
            out.append(condition("NodeInstallerDegraded", "False", "AsExpected", "", self.clock))
        return out

    # ---- Removed ----------------------------------------------------------------------------------------------

    async def _remove(self, ctx: c.OperatorContext, ks: Obj, nodes: list[Obj]) -> None:
        pods = await self._operand_pods(ctx)
        generation = int((ks.get("metadata") or {}).get("generation") or 0)
        for node in nodes:
            name = node["metadata"]["name"]
            if mirror_pod_name(name) not in pods:
                continue
            pod_name = f"remover-{generation}-{name}"
            if pod_name in pods:
                continue
            await self._ensure_backing_resources(ctx)
            pod = self._installer_pod(ctx, pod_name, name, 1, None)
            pod["metadata"]["labels"] = dict(REMOVER_LABEL)
            container = pod["spec"]["containers"][0]
            container["args"] = [
                f"-v={self.log_verbosity}",
                "--remove",
                f"--pod={c.POD_CONFIGMAP}",
                f"--pod-manifest-dir={c.POD_MANIFEST_DIR}",
            ]
            try:
                await ctx.client.create("v1", "pods", pod, namespace=ctx.operand_namespace)
            except ApiError as e:
                if not e.is_already_exists():
                    raise
            ctx.recorder.event(
                c.event_regarding(ctx),
                "Normal",
                "StaticPodRemovalStarted",
                "Remove",
                f"managementState is Removed: removing the scheduler's static pod from node {name} (pod {pod_name})",
            )


async def _exists(client: ApiClient, api_version: str, plural_: str, name: str, namespace: str) -> bool:
    try:
        await client.get(api_version, plural_, name, namespace=namespace)
    except ApiError as e:
        if e.is_not_found():
            return False
        raise
    return True
