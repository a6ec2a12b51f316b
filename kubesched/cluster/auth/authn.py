"""Who is asking: kube-apiserver's authenticators, in its order.

1. a client certificate verified by the TLS layer against the cluster CA (CN = user, O = groups);
2. a bearer token: the cluster's admin token, a token of ``--token-auth-file``, or a service-account JWT (valid
   signature, issuer, audience and time, and the ServiceAccount — and a bound Pod — still there with the same uid);
3. otherwise ``system:anonymous`` in ``system:unauthenticated``.

Authenticated users also get ``system:authenticated``. A bad bearer token is 401, never anonymous.

The hot path is a client that keeps its connection: the certificate cannot change on a connection, so the user
is worked out once per connection and cached (weakly, by transport). Verified service-account tokens are cached
too (their signature is what costs); the ServiceAccount lookup is a dict read per request.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import logging
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.cluster import errors
from kubesched.cluster.auth.tokens import ServiceAccountClaims, TokenError, TokenIssuer
from kubesched.cluster.auth.user import ANONYMOUS, AUTHENTICATED, SYSTEM_MASTERS, UserInfo

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

log = logging.getLogger("kubesched.authn")

ADMIN_TOKEN_USER = "kubesched-admin"
_TOKEN_CACHE_LIMIT = 10_000
_NO_CERT = UserInfo("")  # sentinel: this connection presented no certificate


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def with_authenticated(user: str, uid: str, groups: list[str] | tuple[str, ...]) -> UserInfo:
    """The user with ``system:authenticated`` appended unless present (upstream's AuthenticatedGroupAdder)."""
    g = tuple(groups)
    if AUTHENTICATED not in g:
        g = (*g, AUTHENTICATED)
    return UserInfo(user, uid=uid, groups=g)


def user_from_peercert(peercert: Mapping[str, Any] | None) -> UserInfo | None:
    """User (CN) and groups (every O) of a verified client certificate, as ``SSLObject.getpeercert()`` gives it."""
    if not peercert:
        return None
    name, groups = "", []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not name:
                name = value
            elif key == "organizationName":
                groups.append(value)
    return with_authenticated(name, "", groups) if name else None


def load_token_file(path: Path) -> dict[str, UserInfo]:
    """A ``--token-auth-file``: CSV rows ``token,user,uid[,"group1,group2"]`` (upstream's tokenfile format)."""
    out: dict[str, UserInfo] = {}
    with path.open(newline="") as f:
        for lineno, row in enumerate(csv.reader(f), 1):
            if not row or (len(row) == 1 and not row[0].strip()):
                continue
            if len(row) < 3:
                raise ValueError(f"{path}: line {lineno}: token file must have at least 3 columns")
            token, user, uid = (c.strip() for c in row[:3])
            if not token or not user:
                raise ValueError(f"{path}: line {lineno}: empty token or user")
            groups = [g.strip() for g in row[3].split(",") if g.strip()] if len(row) > 3 else []
            if token in out:
                log.warning("%s: line %d: duplicate token, the first one is kept", path, lineno)
                continue
            out[token] = with_authenticated(user, uid, groups)
    return out


class Authenticator:
    """Authenticates aiohttp requests (see the module docstring)."""

    def __init__(
        self,
        api: ClusterApi,
        issuer: TokenIssuer | None = None,
        *,
        static_tokens: Mapping[str, UserInfo] | None = None,
        admin_token: str | None = None,
        anonymous: bool = True,
    ) -> None:
        self.api = api
        self.issuer = issuer
        self.static_tokens: dict[str, UserInfo] = dict(static_tokens or {})
        if admin_token:
            self.static_tokens.setdefault(
                admin_token, UserInfo(ADMIN_TOKEN_USER, groups=(SYSTEM_MASTERS, AUTHENTICATED))
            )
        self.anonymous = anonymous
        # Static tokens looked up by their SHA-256 and confirmed with a constant-time comparison, so the time a
        # lookup takes says nothing about how much of a guessed token is right.
        self._static_by_digest: dict[bytes, tuple[str, UserInfo]] = {
            _digest(t): (t, u) for t, u in self.static_tokens.items()
        }
        self._by_connection: weakref.WeakKeyDictionary[Any, UserInfo] = weakref.WeakKeyDictionary()
        self._sa_tokens: dict[str, ServiceAccountClaims] = {}
        self._sa_type = api.registry.get("", "v1", "serviceaccounts")
        self._pod_type = api.registry.get("", "v1", "pods")

    def authenticate(self, request: Any) -> UserInfo:
        """The request's user; raises 401 for a bearer token that is not valid."""
        transport = request.transport
        if transport is not None:
            # Keyed by the connection's SSLObject: uvloop's transports take no weak references. Plain HTTP
            # connections have none and carry no certificate.
            conn = transport.get_extra_info("ssl_object")
            user = self._by_connection.get(conn) if conn is not None else _NO_CERT
            if user is None:
                user = self._certificate_user(transport) or _NO_CERT
                self._by_connection[conn] = user
            if user is not _NO_CERT:
                return user
        auth = request.headers.get("Authorization")
        if auth:
            scheme, _, token = auth.partition(" ")
            if scheme.lower() == "bearer" and token.strip():
                return self.authenticate_token(token.strip())
        if not self.anonymous:
            raise errors.unauthorized()
        return ANONYMOUS

    @staticmethod
    def _certificate_user(transport: Any) -> UserInfo | None:
        try:
            cert = transport.get_extra_info("peercert")
        except Exception:  # a closing transport
            return None
        return user_from_peercert(cert)

    def authenticate_token(self, token: str, audiences: list[str] | None = None) -> UserInfo:
        """The user of a bearer token (static or service account); raises 401 when it is neither."""
        user = self.static_token_user(token)
        if user is not None:
            return user
        claims = self.service_account_claims(token, audiences)
        if claims is None:
            raise errors.unauthorized()
        return claims.user()

    def static_token_user(self, token: str) -> UserInfo | None:
        """The user of a static token (``--token-auth-file``, the admin token), compared in constant time."""
        if len(self._static_by_digest) != len(self.static_tokens):  # tokens added after construction
            self._static_by_digest = {_digest(t): (t, u) for t, u in self.static_tokens.items()}
        found = self._static_by_digest.get(_digest(token))
        if found is None or not hmac.compare_digest(found[0].encode(), token.encode()):
            return None
        return found[1]

    def service_account_claims(
        self, token: str, audiences: list[str] | None = None
    ) -> ServiceAccountClaims | None:
        """The verified claims of a service-account token still backed by its objects, or None."""
        if self.issuer is None or not self.issuer.looks_like_ours(token):
            return None
        claims = self._sa_tokens.get(token) if audiences is None else None
        if claims is None:
            try:
                claims = self.issuer.verify_claims(token, audiences)
            except TokenError as e:
                log.debug("service account token rejected: %s", e)
                return None
            if audiences is None:
                if len(self._sa_tokens) >= _TOKEN_CACHE_LIMIT:
                    self._sa_tokens.clear()
                self._sa_tokens[token] = claims
        elif time.time() > claims.expiration + 60:
            self._sa_tokens.pop(token, None)
            return None
        return claims if self._still_backed(claims) else None

    def _still_backed(self, claims: ServiceAccountClaims) -> bool:
        """Upstream's token lookup: the ServiceAccount, and a bound Pod, exist with the uids in the token."""
        if self._sa_type is None:
            return False
        sa = self.api.lookup(self._sa_type, claims.namespace, claims.name)
        if sa is None or (sa.obj.get("metadata") or {}).get("uid") != claims.uid:
            log.debug("service account %s/%s is gone or was recreated", claims.namespace, claims.name)
            return False
        if claims.pod is not None and self._pod_type is not None:
            pod = self.api.lookup(self._pod_type, claims.namespace, claims.pod.name)
            if pod is None or (pod.obj.get("metadata") or {}).get("uid") != claims.pod.uid:
                log.debug("pod %s/%s bound to a token is gone", claims.namespace, claims.pod.name)
                return False
        return True
