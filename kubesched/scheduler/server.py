"""The scheduler's secure serving endpoint (kube-scheduler's ``--secure-port``, 10259 by default).

Paths, as upstream's ``newHealthEndpointsAndMetricsHandler``:
- ``/healthz`` (deprecated upstream, kept), ``/livez``, ``/readyz``: ``ok``, or 500 with one line per check
  (``[+]name ok`` / ``[-]name failed: reason withheld``) and ``<endpoint> check failed``. ``?verbose`` lists the
  checks on success too, ``?exclude=name`` skips one; ``/<endpoint>/<check>`` runs a single check.
  What each endpoint checks: ``/healthz`` the checks added for it (leader election's, else ``ping``), ``/livez``
  just ``ping`` unless checks are added for it, ``/readyz`` the added checks then ``shutdown`` (fails once
  ``stop()`` begins) and ``sched-handler-sync`` (fails until ``mark_handlers_synced()``).
- ``/metrics``: the ``SchedulerMetrics`` registry in Prometheus text format.
- ``/configz``: ``{"componentconfig": <the effective configuration>}`` as JSON.

TLS comes from ``cert_file``/``key_file`` or, without them, from a self-signed pair for ``localhost`` and
``127.0.0.1`` (kept in ``cert_dir`` if given, else generated in a temporary directory that is removed once
loaded), as kube-scheduler does. With ``auth`` (``kubesched.serving.DelegatedAuth``) every path is authenticated
and authorized as kube-scheduler's: ``/healthz``, ``/readyz``, ``/livez`` for anyone (the default
``--authorization-always-allow-paths``), ``/metrics``, ``/configz`` and ``/debug/*`` only for callers a
SubjectAccessReview allows (401/403 otherwise). Serving is ``kubesched.serving.SecureServing``.
"""

from __future__ import annotations

import inspect
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from aiohttp import web

from kubesched.scheduler.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.serving import DelegatedAuth, SecureServing
from kubesched.serving import url_host as url_host

log = logging.getLogger(__name__)

DEFAULT_BIND_ADDRESS = "0.0.0.0"
DEFAULT_SECURE_PORT = 10259
SELF_SIGNED_PAIR_NAME = "kube-scheduler"

HEALTHZ = "healthz"
LIVEZ = "livez"
READYZ = "readyz"
ENDPOINTS = (HEALTHZ, LIVEZ, READYZ)

PING = "ping"
SHUTDOWN = "shutdown"
HANDLER_SYNC = "sched-handler-sync"
LEADER_ELECTION = "leaderElection"

_TEXT = "text/plain; charset=utf-8"
_NOSNIFF = {"X-Content-Type-Options": "nosniff"}

# A check answers None when healthy, or a reason (a string, or by raising) when not. It may be a coroutine.
Check = Callable[[], "str | Awaitable[str | None] | None"]


@dataclass(frozen=True, slots=True)
class _NamedCheck:
    name: str
    fn: Check


async def _run_check(check: _NamedCheck) -> str | None:
    try:
        result = check.fn()
        if inspect.isawaitable(result):
            result = await result
    except Exception as e:  # a crashing check is a failing check
        return str(e) or type(e).__name__
    return None if result is None else str(result)


class LeaderHealthzAdaptor:
    """Fails while this process leads but has not renewed the lease for ``lease_duration + timeout`` seconds
    (client-go ``NewLeaderHealthzAdaptor``; kube-scheduler uses a 20 s timeout). Healthy before ``attach`` and
    while not leading."""

    name = LEADER_ELECTION

    def __init__(self, timeout: float = 20.0) -> None:
        self.timeout = timeout
        self._is_leader: Callable[[], bool] | None = None
        self._observed_time: Callable[[], float | None] = lambda: None
        self._lease_duration = 0.0
        self._lease_name = ""
        self._clock: Callable[[], float] = time.monotonic

    def attach(
        self,
        *,
        is_leader: Callable[[], bool],
        observed_time: Callable[[], float | None],
        lease_duration: float,
        lease_name: str,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Wire the elector: ``observed_time()`` is when the lease was last renewed/observed, in ``clock``."""
        self._is_leader = is_leader
        self._observed_time = observed_time
        self._lease_duration = lease_duration
        self._lease_name = lease_name
        self._clock = clock

    def __call__(self) -> str | None:
        if self._is_leader is None or not self._is_leader():
            return None
        observed = self._observed_time()
        if observed is not None and self._clock() - observed <= self._lease_duration + self.timeout:
            return None
        return f"failed election to renew leadership on lease {self._lease_name}"


def _text(body: str, status: int = 200) -> web.Response:
    return web.Response(body=body.encode(), status=status, headers={"Content-Type": _TEXT, **_NOSNIFF})


def _http_error(message: str, status: int) -> web.Response:
    # Go's http.Error: the message plus a newline, as plain text.
    return _text(message + "\n", status)


def _json_default(obj: Any) -> Any:
    for attr in ("model_dump", "to_dict", "as_dict"):
        method = getattr(obj, attr, None)
        if callable(method):
            return method()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"cannot serialise {type(obj).__name__}")


class SecureServer:
    """HTTPS server for health, metrics and configz. ``await start()`` then ``await stop()``."""

    def __init__(
        self,
        *,
        bind_address: str = DEFAULT_BIND_ADDRESS,
        port: int = DEFAULT_SECURE_PORT,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        cert_dir: str | Path | None = None,
        metrics: SchedulerMetrics | None = None,
        configz: Any = None,
        handler_sync_check: bool = True,
        auth: DelegatedAuth | None = None,
    ) -> None:
        if (cert_file is None) != (key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
        self.auth = auth
        self._serving: SecureServing | None = None
        self.bind_address = bind_address
        self.requested_port = port
        self.cert_file = Path(cert_file) if cert_file is not None else None
        self.key_file = Path(key_file) if key_file is not None else None
        self.cert_dir = Path(cert_dir) if cert_dir is not None else None
        self.metrics = metrics
        self._configz = configz
        self._json_routes: dict[str, Callable[[], Any]] = {}
        self._checks: dict[str, list[_NamedCheck]] = {e: [] for e in ENDPOINTS}
        self._handler_sync_check = handler_sync_check
        self._handlers_synced = False
        self._shutting_down = False
        self._port: int | None = None
        # The files the server was started with (generated ones included), for clients that want to trust it.
        self.serving_cert: Path | None = None

    # -- configuration ------------------------------------------------------------------------------------------

    def add_check(
        self, name: str, fn: Check, *, healthz: bool = True, livez: bool = False, readyz: bool = True
    ) -> None:
        """Add a named check to the chosen endpoints (by default /healthz and /readyz, as leader election's)."""
        for endpoint, wanted in ((HEALTHZ, healthz), (LIVEZ, livez), (READYZ, readyz)):
            if wanted:
                checks = self._checks[endpoint]
                if any(c.name == name for c in checks):
                    raise ValueError(f"{endpoint} check {name!r} already added")
                checks.append(_NamedCheck(name, fn))

    def add_json_route(self, path: str, fn: Callable[[], Any]) -> None:
        """Serve ``fn()`` as JSON at ``path`` (debug endpoints; register before ``start``)."""
        self._json_routes[path] = fn

    def set_configz(self, config: Any) -> None:
        """The effective configuration for /configz: JSON-ready data, a dataclass, or a zero-argument callable."""
        self._configz = config

    def mark_handlers_synced(self) -> None:
        """The informers have synced and the event handlers are in place: /readyz may pass."""
        self._handlers_synced = True

    def checks(self, endpoint: str) -> list[str]:
        """Names of the checks an endpoint runs, in order."""
        return [c.name for c in self._endpoint_checks(endpoint)]

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        return f"https://{url_host(self.bind_address)}:{self.port}"

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def build_app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/configz", self._configz_handler)
        for path, fn in self._json_routes.items():
            app.router.add_get(path, self._json_handler(fn))
        for endpoint in ENDPOINTS:
            app.router.add_get(f"/{endpoint}", self._root_health(endpoint))
            app.router.add_get(f"/{endpoint}/{{check}}", self._single_health(endpoint))
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        return app

    @staticmethod
    def _json_handler(fn: Callable[[], Any]) -> Callable[[web.Request], Any]:
        async def handler(request: web.Request) -> web.Response:
            return web.Response(body=orjson.dumps(fn()), content_type="application/json")

        return handler

    async def start(self) -> None:
        serving = SecureServing(
            self.build_app(),
            bind_address=self.bind_address,
            port=self.requested_port,
            cert_file=self.cert_file,
            key_file=self.key_file,
            cert_dir=self.cert_dir,
            pair_name=SELF_SIGNED_PAIR_NAME,
            auth=self.auth,
        )
        self._shutting_down = False
        await serving.start()
        self._serving = serving
        self._port = serving.port
        self.serving_cert = serving.serving_cert

    async def stop(self) -> None:
        self._shutting_down = True
        if self._serving is not None:
            serving, self._serving = self._serving, None
            await serving.stop()

    # -- handlers -----------------------------------------------------------------------------------------------

    def _endpoint_checks(self, endpoint: str) -> list[_NamedCheck]:
        checks = list(self._checks[endpoint])
        if endpoint == READYZ:
            checks.append(_NamedCheck(SHUTDOWN, self._shutdown_check))
            if self._handler_sync_check:
                checks.append(_NamedCheck(HANDLER_SYNC, self._handler_sync))
        if not checks:
            checks.append(_NamedCheck(PING, lambda: None))
        return checks

    def _shutdown_check(self) -> str | None:
        return "process is shutting down" if self._shutting_down else None

    def _handler_sync(self) -> str | None:
        return None if self._handlers_synced else "waiting for handlers to sync"

    def _root_health(self, endpoint: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            excluded = set(request.query.getall("exclude", []))
            lines: list[str] = []
            failed: list[str] = []
            for check in self._endpoint_checks(endpoint):
                if check.name in excluded:
                    excluded.discard(check.name)
                    lines.append(f"[+]{check.name} excluded: ok\n")
                    continue
                reason = await _run_check(check)
                if reason is None:
                    lines.append(f"[+]{check.name} ok\n")
                else:
                    # The reason stays out of the public answer, as upstream; it goes to the log.
                    lines.append(f"[-]{check.name} failed: reason withheld\n")
                    failed.append(f"{check.name}: {reason}")
            if excluded:
                names = ",".join(f'"{n}"' for n in sorted(excluded))
                lines.append(f"warn: some health checks cannot be excluded: no matches for {names}\n")
            if failed:
                log.info("%s check failed: %s", endpoint, "; ".join(failed))
                return _http_error(f"{''.join(lines)}{endpoint} check failed", 500)
            if "verbose" not in request.query:
                return _text("ok")
            return _text(f"{''.join(lines)}{endpoint} check passed\n")

        return handler

    def _single_health(self, endpoint: str) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def handler(request: web.Request) -> web.Response:
            name = request.match_info["check"]
            for check in self._endpoint_checks(endpoint):
                if check.name == name:
                    reason = await _run_check(check)
                    if reason is None:
                        return _text("ok")
                    return _http_error(f"internal server error: {reason}", 500)
            return await self._not_found(request)

        return handler

    async def _metrics(self, request: web.Request) -> web.Response:
        body = self.metrics.exposition() if self.metrics is not None else b""
        return web.Response(body=body, headers={"Content-Type": METRICS_CONTENT_TYPE})

    async def _configz_handler(self, request: web.Request) -> web.Response:
        config = self._configz() if callable(self._configz) else self._configz
        try:
            body = orjson.dumps(
                {"componentconfig": config},
                default=_json_default,
                option=orjson.OPT_NON_STR_KEYS,
            )
        except TypeError as e:
            log.warning("cannot serve /configz: %s", e)
            return _http_error(str(e), 500)
        return web.Response(body=body, headers={"Content-Type": "application/json", **_NOSNIFF})

    async def _not_found(self, request: web.Request) -> web.Response:
        return _http_error("404 page not found", 404)
