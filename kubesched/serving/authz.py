"""Delegated authorization: may this caller do this (k8s.io/apiserver's delegating authorizer).

Paths in ``always_allow_paths`` (kube-scheduler's ``--authorization-always-allow-paths``, default ``/healthz``,
``/readyz``, ``/livez``; an entry ending in ``*`` is a prefix) pass without a question; so does a member of an
``always_allow_groups`` group. Everything else is a ``SubjectAccessReview`` with ``nonResourceAttributes``
(the path and the lower-cased HTTP method as the verb), whose answer is cached: allowed for ``allow_ttl``,
denied for ``deny_ttl`` seconds (upstream's webhook cache TTLs, 10 s each). Without a client to ask,
everything outside the always-allowed paths is denied, as upstream when no authorization kubeconfig is found.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiohttp

from kubesched.client.rest import ApiError

from .authn import User

if TYPE_CHECKING:
    from kubesched.client.rest import ApiClient

log = logging.getLogger(__name__)

DEFAULT_ALWAYS_ALLOW_PATHS = ("/healthz", "/readyz", "/livez")
DEFAULT_ALLOW_TTL = 10.0
DEFAULT_DENY_TTL = 10.0
_CACHE_LIMIT = 4096


@dataclass(frozen=True, slots=True)
class Decision:
    allowed: bool
    reason: str = ""


_ALWAYS = Decision(True, "")


def forbidden_message(user: User, verb: str, path: str, reason: str = "") -> str:
    """kube-apiserver's wording for a denied non-resource request."""
    message = f'forbidden: User "{user.name}" cannot {verb} path "{path}"'
    return f"{message}: {reason}" if reason else message


class PathMatcher:
    """Exact paths, and prefixes written with a trailing ``*``."""

    def __init__(self, patterns: Iterable[str]) -> None:
        self.exact: frozenset[str] = frozenset()
        self.prefixes: tuple[str, ...] = ()
        exact, prefixes = set(), []
        for p in patterns:
            p = p.strip()
            if not p:
                continue
            if p.endswith("*"):
                prefixes.append(p[:-1])
            else:
                exact.add(p)
        self.exact, self.prefixes = frozenset(exact), tuple(prefixes)

    def __call__(self, path: str) -> bool:
        return path in self.exact or (bool(self.prefixes) and path.startswith(self.prefixes))


class DelegatingAuthorizer:
    """``await authorize(user, verb, path)`` → :class:`Decision`."""

    def __init__(
        self,
        client: ApiClient | None,
        *,
        always_allow_paths: Iterable[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
        always_allow_groups: Iterable[str] = (),
        allow_ttl: float = DEFAULT_ALLOW_TTL,
        deny_ttl: float = DEFAULT_DENY_TTL,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.client = client
        self.always_allow = PathMatcher(always_allow_paths)
        self.always_allow_groups = frozenset(always_allow_groups)
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.clock = clock
        self._cache: dict[tuple[str, str, tuple[str, ...], str, str], tuple[float, Decision]] = {}
        self.reviews = 0  # SubjectAccessReviews sent

    async def authorize(self, user: User, verb: str, path: str) -> Decision:
        if self.always_allow(path):
            return _ALWAYS
        if self.always_allow_groups and not self.always_allow_groups.isdisjoint(user.groups):
            return _ALWAYS
        if self.client is None:
            return Decision(False, "")
        key = (user.name, user.uid, user.groups, verb, path)
        now = self.clock()
        cached = self._cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        spec: dict[str, object] = {
            "user": user.name,
            "groups": list(user.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if user.uid:
            spec["uid"] = user.uid
        if user.extra:
            spec["extra"] = {k: list(v) for k, v in user.extra.items()}
        body = {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "spec": spec}
        self.reviews += 1
        try:
            answer = await self.client.create("authorization.k8s.io/v1", "subjectaccessreviews", body)
        except (ApiError, aiohttp.ClientError, OSError, TimeoutError) as e:
            log.warning("SubjectAccessReview for %s %s failed: %s", verb, path, e)
            return Decision(False, "")  # not cached: the next request asks again
        status = answer.get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        reason = str(status.get("reason") or "") if not allowed else ""
        decision = Decision(allowed, reason)
        if len(self._cache) >= _CACHE_LIMIT:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
        self._cache[key] = (now + (self.allow_ttl if allowed else self.deny_ttl), decision)
        return decision
