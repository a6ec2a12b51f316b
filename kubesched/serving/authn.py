"""Delegated authentication: who is calling a component's HTTPS endpoint (k8s.io/apiserver's delegating
authenticator, as kube-scheduler runs it).

In order:

1. a client certificate the TLS layer verified against the client CA (``--client-ca-file``, or the
   ``client-ca-file`` key of ``kube-system/extension-apiserver-authentication``): CN is the user, every O a group;
2. a bearer token, asked of the API server with a ``TokenReview``; answers (yes and no) are cached for
   ``cache_ttl`` seconds (upstream's ``--authentication-token-webhook-cache-ttl``, 10 s), keyed by the token's
   SHA-256 so the cache holds no token;
3. otherwise ``system:anonymous`` in ``system:unauthenticated`` (upstream's delegating authenticator allows
   anonymous requests: the authorizer then decides, so a probe reaches ``/healthz`` and anyone else gets 403).

A token the API server rejects, or a TokenReview that cannot be made, is 401 ``Unauthorized``, never anonymous.
"""

from __future__ import annotations

import hashlib
import logging
import time
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp

from kubesched.client.rest import ApiError

if TYPE_CHECKING:
    from kubesched.client.rest import ApiClient

log = logging.getLogger(__name__)

ANONYMOUS_USER = "system:anonymous"
UNAUTHENTICATED = "system:unauthenticated"
AUTHENTICATED = "system:authenticated"
DEFAULT_CACHE_TTL = 10.0
_CACHE_LIMIT = 4096


class Unauthorized(Exception):
    """The request carried credentials that are not valid (answered 401)."""


@dataclass(frozen=True, slots=True)
class User:
    """An authenticated (or anonymous) caller, as a SubjectAccessReview names it."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)


ANONYMOUS = User(ANONYMOUS_USER, groups=(UNAUTHENTICATED,))
_NO_CERT = User("")  # sentinel: this connection's certificate was not looked at yet


def user_from_peercert(peercert: Mapping[str, Any] | None) -> User | None:
    """The user of a verified client certificate (``SSLObject.getpeercert()``): CN, and every O as a group."""
    if not peercert:
        return None
    name, groups = "", []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not name:
                name = value
            elif key == "organizationName":
                groups.append(value)
    if not name:
        return None
    if AUTHENTICATED not in groups:
        groups.append(AUTHENTICATED)
    return User(name, groups=tuple(groups))


def _user_from_review(status: Mapping[str, Any]) -> User:
    info = status.get("user") or {}
    extra = {str(k): tuple(str(x) for x in v or ()) for k, v in (info.get("extra") or {}).items()}
    return User(
        str(info.get("username") or ""),
        uid=str(info.get("uid") or ""),
        groups=tuple(str(g) for g in info.get("groups") or ()),
        extra=extra,
    )


class DelegatingAuthenticator:
    """Authenticates aiohttp requests. ``client`` reaches the API server for TokenReviews; without one, bearer
    tokens cannot be checked and are refused (401)."""

    def __init__(
        self,
        client: ApiClient | None,
        *,
        cache_ttl: float = DEFAULT_CACHE_TTL,
        anonymous: bool = True,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.cache_ttl = cache_ttl
        self.anonymous = anonymous
        self.clock = clock
        self._tokens: dict[bytes, tuple[float, User | None]] = {}
        self._by_connection: weakref.WeakKeyDictionary[Any, User | None] = weakref.WeakKeyDictionary()
        self.reviews = 0  # TokenReviews sent (tests and metrics)

    async def authenticate(self, request: Any) -> User:
        """The caller; raises :class:`Unauthorized` for bad credentials."""
        transport = request.transport
        conn = transport.get_extra_info("ssl_object") if transport is not None else None
        if conn is not None:
            # A connection's certificate cannot change: its user is worked out once per connection, keyed by
            # its SSLObject (uvloop's transports take no weak references; plain HTTP has no certificate).
            user = self._by_connection.get(conn, _NO_CERT)
            if user is _NO_CERT:
                try:
                    user = user_from_peercert(transport.get_extra_info("peercert"))
                except Exception:  # a closing transport
                    user = None
                self._by_connection[conn] = user
            if user is not None:
                return user
        header = request.headers.get("Authorization")
        if header:
            scheme, _, token = header.partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token:
                return await self.authenticate_token(token)
        if not self.anonymous:
            raise Unauthorized("no credentials")
        return ANONYMOUS

    async def authenticate_token(self, token: str) -> User:
        key = hashlib.sha256(token.encode()).digest()
        now = self.clock()
        cached = self._tokens.get(key)
        if cached is not None and cached[0] > now:
            if cached[1] is None:
                raise Unauthorized("invalid bearer token")
            return cached[1]
        if self.client is None:
            raise Unauthorized("bearer tokens cannot be checked: no authentication kubeconfig")
        self.reviews += 1
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        try:
            answer = await self.client.create("authentication.k8s.io/v1", "tokenreviews", body)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as e:
            # Not cached: the API server may answer the next time.
            log.warning("TokenReview failed: %s", e)
            raise Unauthorized("the token could not be reviewed") from None
        status = answer.get("status") or {}
        user = _user_from_review(status) if status.get("authenticated") else None
        if user is not None and not user.name:
            user = None
        if len(self._tokens) >= _CACHE_LIMIT:
            self._tokens = {k: v for k, v in self._tokens.items() if v[0] > now}
            if len(self._tokens) >= _CACHE_LIMIT:
                self._tokens.clear()
        self._tokens[key] = (now + self.cache_ttl, user)
        if user is None:
            raise Unauthorized(str(status.get("error") or "invalid bearer token"))
        return user
