"""The scheduler's credentials: ServiceAccount ``kube-scheduler`` in the operand namespace, bound to the
ClusterRoles kube-scheduler runs with (and to the Role that reads the client CA in kube-system), and a long-lived token for it in secret ``kube-scheduler-client-token``
(key ``token``), which the kubeconfig's ``tokenFile`` names under the revision's resource folder.

The token comes from the TokenRequest API (``serviceaccounts/<name>/token``); the local cluster has no legacy
``kubernetes.io/service-account-token`` secrets. It lives ``lifetime`` seconds (a year by default) and is renewed
once less than a fifth of that is left, or when the ServiceAccount was re-created (its UID changed, so the old token
no longer authenticates). A renewed token changes the secret, so it reaches the nodes as a new revision.

An API server without a token issuer (the local cluster over plain HTTP, which authenticates nobody) answers
TokenRequest with 404 (or 405): the secret then holds an empty token, which such a server accepts.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable
from typing import Any

from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator.resourceapply import (
    apply_cluster_role_binding,
    apply_role_binding,
    apply_secret,
    apply_service_account,
    decode_secret_value,
    get_or_none,
)

Obj = dict[str, Any]

SERVICE_ACCOUNT = "kube-scheduler"
CLUSTER_ROLES = ("system:kube-scheduler", "system:volume-scheduler", "system:auth-delegator")
# Delegated authentication reads the client CA from kube-system/extension-apiserver-authentication.
AUTH_READER_ROLE = "extension-apiserver-authentication-reader"
DEFAULT_TOKEN_LIFETIME = 365 * 24 * 3600
RENEW_FRACTION = 0.2  # renew once less than this share of the lifetime is left
SA_NAME_ANNOTATION = "kubernetes.io/service-account.name"
SA_UID_ANNOTATION = "kubernetes.io/service-account.uid"
EXPIRES_ANNOTATION = "kubesched.io/token-expires"


def binding_name(namespace: str, cluster_role: str) -> str:
    """``kubesched:operator:<namespace>:<role without system:>``, one per operand namespace."""
    return f"kubesched:operator:{namespace}:{cluster_role.removeprefix('system:')}"


def token_expiry(token: str) -> float | None:
    """The ``exp`` claim of a JWT (not verified: the operator only needs to know when to renew its own token)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, int | float) else None


def needs_renewal(secret: Obj | None, sa_uid: str, lifetime: float, now: float) -> str | None:
    """Why the stored token must be replaced, or None when it is good."""
    if secret is None:
        return "no token yet"
    annotations = (secret.get("metadata") or {}).get("annotations") or {}
    token = decode_secret_value(secret, "token")
    if token is None:
        return "the secret has no token"
    if annotations.get(SA_UID_ANNOTATION) != sa_uid:
        return "the ServiceAccount was re-created"
    if token == "":
        return None  # a server without a token issuer: nothing to renew
    exp = token_expiry(token)
    if exp is None:
        return "the token cannot be read"
    if exp - now < lifetime * RENEW_FRACTION:
        return "the token expires soon"
    return None


async def ensure_credentials(
    ctx: c.OperatorContext,
    *,
    lifetime: int = DEFAULT_TOKEN_LIFETIME,
    clock: Callable[[], float] = time.time,
) -> None:
    """ServiceAccount, ClusterRoleBindings and the token secret, created or repaired as needed."""
    ns = ctx.operand_namespace
    sa, _ = await apply_service_account(ctx, ns, SERVICE_ACCOUNT)
    subject = [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}]
    for role in CLUSTER_ROLES:
        await apply_cluster_role_binding(ctx, binding_name(ns, role), role, subject)
    await apply_role_binding(
        ctx, "kube-system", binding_name(ns, AUTH_READER_ROLE), AUTH_READER_ROLE, subject
    )
    sa_uid = str((sa.get("metadata") or {}).get("uid") or "")
    secret = await get_or_none(ctx.client, "v1", "secrets", c.CLIENT_TOKEN_SECRET, ns)
    if needs_renewal(secret, sa_uid, lifetime, clock()) is None:
        return
    token, expires = await request_token(ctx, ns, lifetime)
    annotations = {SA_NAME_ANNOTATION: SERVICE_ACCOUNT, SA_UID_ANNOTATION: sa_uid}
    if expires:
        annotations[EXPIRES_ANNOTATION] = expires
    await apply_secret(ctx, ns, c.CLIENT_TOKEN_SECRET, {"token": token}, annotations=annotations)


async def request_token(ctx: c.OperatorContext, namespace: str, lifetime: int) -> tuple[str, str]:
    """(token, expiration timestamp) from TokenRequest; ("", "") when the server issues no tokens."""
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": lifetime},
    }
    try:
        answer = await ctx.client.create_subresource(
            "v1", "serviceaccounts", SERVICE_ACCOUNT, "token", body, namespace=namespace
        )
    except ApiError as e:
        if e.status in (404, 405):  # no token issuer: a plain-HTTP server that authenticates nobody
            return "", ""
        raise
    status = answer.get("status") or {}
    return str(status.get("token") or ""), str(status.get("expirationTimestamp") or "")


__all__ = [
    "CLUSTER_ROLES",
    "SERVICE_ACCOUNT",
    "binding_name",
    "ensure_credentials",
    "needs_renewal",
    "token_expiry",
]
