"""Create-or-update of the objects the config side owns, with library-go's ``resourceapply`` events
(``ConfigMapCreated``, ``ConfigMapUpdated``, ``SecretCreated``, ...), and the sub-conditions it writes on
``KubeScheduler/cluster`` (``ConfigObservationDegraded``, ``TargetConfigControllerDegraded``).

Every apply reads the object first and writes only when what we own differs, so a resync that finds everything
in place costs one GET per object and writes nothing.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from typing import Any

from kubesched.client.rest import ApiClient, ApiError
from kubesched.operator import contract as c
from kubesched.operator import status as operator_status

Obj = dict[str, Any]

MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "kubesched-operator"


def record(
    ctx: c.OperatorContext, reason: str, note: str, *, warning: bool = False, action: str = ""
) -> None:
    """One event about the operator (``contract.event_regarding``), as library-go's recorder writes them."""
    ctx.recorder.event(
        c.event_regarding(ctx), "Warning" if warning else "Normal", reason, action or reason, note
    )


async def get_or_none(
    client: ApiClient, api_version: str, plural: str, name: str, namespace: str | None = None
) -> Obj | None:
    try:
        return await client.get(api_version, plural, name, namespace=namespace)
    except ApiError as e:
        if e.is_not_found():
            return None
        raise


def _metadata_missing(existing: Obj, wanted: Mapping[str, Any]) -> bool:
    meta = existing.get("metadata") or {}
    for field in ("labels", "annotations"):
        have = meta.get(field) or {}
        if any(have.get(k) != v for k, v in (wanted.get(field) or {}).items()):
            return True
    return False


def _merged_metadata(existing: Obj, wanted: Mapping[str, Any]) -> Obj:
    meta = dict(existing.get("metadata") or {})
    for field in ("labels", "annotations"):
        if wanted.get(field):
            meta[field] = {**(meta.get(field) or {}), **wanted[field]}
    return meta


async def _apply(
    ctx: c.OperatorContext,
    api_version: str,
    plural: str,
    kind: str,
    body: Obj,
    owned: tuple[str, ...],
    *,
    describe: str = "",
) -> tuple[Obj, bool]:
    """Create ``body``, or update the fields in ``owned`` (and the labels/annotations it names) when they
    differ. Returns (object, changed)."""
    meta = body["metadata"]
    name, namespace = meta["name"], meta.get("namespace")
    existing = await get_or_none(ctx.client, api_version, plural, name, namespace)
    where = f"{namespace}/{name}" if namespace else name
    if existing is None:
        try:
            created = await ctx.client.create(api_version, plural, body, namespace=namespace)
        except ApiError as e:
            record(ctx, f"{kind}CreateFailed", f"Failed to create {kind}/{where}: {e}", warning=True)
            raise
        record(ctx, f"{kind}Created", f"Created {kind}/{where}{describe}")
        return created, True
    changed = [f for f in owned if existing.get(f) != body.get(f)]
    if not changed and not _metadata_missing(existing, meta):
        return existing, False
    update = copy.deepcopy(existing)
    update["metadata"] = _merged_metadata(existing, meta)
    for f in owned:
        if f in body:
            update[f] = copy.deepcopy(body[f])
        else:
            update.pop(f, None)
    try:
        updated = await ctx.client.replace(api_version, plural, name, update, namespace=namespace)
    except ApiError as e:
        record(ctx, f"{kind}UpdateFailed", f"Failed to update {kind}/{where}: {e}", warning=True)
        raise
    detail = _changed_keys(existing, body, changed)
    record(ctx, f"{kind}Updated", f"Updated {kind}/{where}{describe}{detail}")
    return updated, True


def _changed_keys(existing: Obj, body: Obj, fields: list[str]) -> str:
    keys: list[str] = []
    for f in fields:
        old, new = existing.get(f), body.get(f)
        if isinstance(old, dict) and isinstance(new, dict):
            keys += [f"{f}.{k}" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
        else:
            keys.append(f)
    return f":\ncause by changes in {','.join(keys)}" if keys else ""


def _meta(
    name: str, namespace: str | None, labels: Mapping[str, str] | None, annotations: Mapping[str, str] | None
) -> Obj:
    meta: Obj = {"name": name, "labels": {MANAGED_BY_LABEL: MANAGED_BY, **(labels or {})}}
    if namespace:
        meta["namespace"] = namespace
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


async def apply_configmap(
    ctx: c.OperatorContext,
    namespace: str,
    name: str,
    data: Mapping[str, str],
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
) -> tuple[Obj, bool]:
    body = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(name, namespace, labels, annotations),
        "data": dict(data),
    }
    return await _apply(ctx, "v1", "configmaps", "ConfigMap", body, ("data",))


def encode_secret_data(data: Mapping[str, str | bytes]) -> dict[str, str]:
    out: dict[str, str] = {}
    for k, v in data.items():
        raw = v.encode() if isinstance(v, str) else v
        out[k] = base64.b64encode(raw).decode()
    return out


def decode_secret_value(secret: Obj | None, key: str) -> str | None:
    value = ((secret or {}).get("data") or {}).get(key)
    if not isinstance(value, str):
        return None
    try:
        return base64.b64decode(value).decode()
    except (ValueError, UnicodeDecodeError):
        return None


async def apply_secret(
    ctx: c.OperatorContext,
    namespace: str,
    name: str,
    data: Mapping[str, str | bytes],
    *,
    secret_type: str = "Opaque",
    annotations: Mapping[str, str] | None = None,
) -> tuple[Obj, bool]:
    body = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(name, namespace, None, annotations),
        "type": secret_type,
        "data": encode_secret_data(data),
    }
    return await _apply(ctx, "v1", "secrets", "Secret", body, ("data",))


async def apply_namespace(
    ctx: c.OperatorContext, name: str, labels: Mapping[str, str] | None = None
) -> tuple[Obj, bool]:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": _meta(name, None, labels, None)}
    return await _apply(ctx, "v1", "namespaces", "Namespace", body, ())


async def apply_service_account(ctx: c.OperatorContext, namespace: str, name: str) -> tuple[Obj, bool]:
    body = {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta(name, namespace, None, None)}
    return await _apply(ctx, "v1", "serviceaccounts", "ServiceAccount", body, ())


async def apply_cluster_role_binding(
    ctx: c.OperatorContext, name: str, cluster_role: str, subjects: list[Obj]
) -> tuple[Obj, bool]:
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": _meta(name, None, None, None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
        "subjects": subjects,
    }
    return await _apply(
        ctx, "rbac.authorization.k8s.io/v1", "clusterrolebindings", "ClusterRoleBinding", body, ("subjects",)
    )


async def apply_role_binding(
    ctx: c.OperatorContext, namespace: str, name: str, role: str, subjects: list[Obj]
) -> tuple[Obj, bool]:
    body = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": _meta(name, namespace, None, None),
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
        "subjects": subjects,
    }
    return await _apply(
        ctx, "rbac.authorization.k8s.io/v1", "rolebindings", "RoleBinding", body, ("subjects",)
    )


# -- sub-conditions on KubeScheduler/cluster ----------------------------------------------------------------------


async def set_condition(
    client: ApiClient, type_: str, status: str, reason: str = "", message: str = ""
) -> None:
    """Set one condition on ``KubeScheduler/cluster`` by type with the status helpers every controller shares
    (its lastTransitionTime moves only when the status does; nothing is written when nothing changed; nothing
    happens when the object does not exist)."""
    await operator_status.set_conditions(client, operator_status.condition(type_, status, reason, message))
