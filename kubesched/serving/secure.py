"""Serving an aiohttp application over HTTPS behind delegated authentication and authorization.

``SecureServing(app, ...)`` listens on ``bind_address:port`` (0 picks a free port) with TLS from
``cert_file``/``key_file`` or, without them, a self-signed pair for ``localhost`` and ``127.0.0.1`` (kept in
``cert_dir`` when given, else in a temporary directory removed once loaded), as kube-scheduler does. With
``auth`` every request goes through :func:`guard`: authenticate (401 ``Unauthorized`` for bad credentials),
authorize (403 with kube-apiserver's ``forbidden: User "..." cannot get path "..."``), then the handler, which
finds the caller in ``request[USER_KEY]``. The client CA of ``auth`` is loaded into the TLS layer: a certificate
it signs authenticates its holder; a connection without one is still accepted (tokens, anonymous).

``insecure=True`` serves plain HTTP without authentication and refuses any bind address that is not loopback.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
import ssl
import tempfile
from pathlib import Path

import orjson
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from kubesched.cluster.certs import self_signed_pair

from .authn import Unauthorized, User
from .authz import forbidden_message
from .options import DelegatedAuth

log = logging.getLogger(__name__)

SELF_SIGNED_HOSTS = ("localhost", "127.0.0.1")
USER_KEY: web.RequestKey[User] = web.RequestKey("user", User)


def is_loopback(host: str) -> bool:
    """``localhost`` or a loopback IP (brackets allowed)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def require_loopback(bind_address: str, what: str) -> None:
    """``ValueError`` unless ``bind_address`` is loopback: plain HTTP without authentication stays on this host."""
    if not is_loopback(bind_address):
        raise ValueError(
            f"{what} serves without TLS or authentication and only on a loopback address "
            f"(127.0.0.1, ::1, localhost), not {bind_address or 'all addresses'!r}"
        )


def url_host(bind_address: str) -> str:
    """The host part of a URL that reaches a server bound to ``bind_address`` (a wildcard: this machine)."""
    if bind_address in ("", "0.0.0.0"):
        return "127.0.0.1"
    if bind_address == "::":
        return "[::1]"
    return f"[{bind_address}]" if ":" in bind_address else bind_address


def status_body(code: int, reason: str, message: str, *, details: bool = False) -> bytes:
    """A ``metav1.Status`` failure, as kube-apiserver's filters write it."""
    body: dict[str, object] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
    }
    if details:
        body["details"] = {}
    body["code"] = code
    return orjson.dumps(body)


def _status(code: int, reason: str, message: str, *, details: bool = False) -> web.Response:
    return web.Response(
        body=status_body(code, reason, message, details=details),
        status=code,
        headers={"Content-Type": "application/json", "X-Content-Type-Options": "nosniff"},
    )


def guard(auth: DelegatedAuth) -> Middleware:
    """An aiohttp middleware: authenticate, authorize, then the handler."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            user: User = await auth.authenticator.authenticate(request)
        except Unauthorized as e:
            log.debug("unauthorized %s %s: %s", request.method, request.path, e)
            return _status(401, "Unauthorized", "Unauthorized")
        verb = request.method.lower()
        decision = await auth.authorizer.authorize(user, verb, request.path)
        if not decision.allowed:
            return _status(
                403, "Forbidden", forbidden_message(user, verb, request.path, decision.reason), details=True
            )
        request[USER_KEY] = user
        return await handler(request)

    return middleware


class SecureServing:
    """``await start()``, then ``port``/``url``; ``await stop()``. See the module docstring."""

    def __init__(
        self,
        app: web.Application,
        *,
        bind_address: str,
        port: int,
        cert_file: str | Path | None = None,
        key_file: str | Path | None = None,
        cert_dir: str | Path | None = None,
        pair_name: str = "kubesched",
        auth: DelegatedAuth | None = None,
        insecure: bool = False,
    ) -> None:
        if (cert_file is None) != (key_file is None):
            raise ValueError("--tls-cert-file and --tls-private-key-file must be given together")
        if insecure:
            require_loopback(bind_address, "plain HTTP")
        if auth is not None and not insecure:
            app.middlewares.append(guard(auth))
        self.app = app
        self.bind_address = bind_address
        self.requested_port = port
        self.cert_file = Path(cert_file) if cert_file is not None else None
        self.key_file = Path(key_file) if key_file is not None else None
        self.cert_dir = Path(cert_dir) if cert_dir is not None else None
        self.pair_name = pair_name
        self.auth = auth
        self.insecure = insecure
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        # The certificate served (when it is a file a client may read to trust the server).
        self.serving_cert: Path | None = None

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("server not started")
        return self._port

    @property
    def url(self) -> str:
        scheme = "http" if self.insecure else "https"
        return f"{scheme}://{url_host(self.bind_address)}:{self.port}"

    async def start(self) -> None:
        context = None if self.insecure else self.ssl_context()
        family = socket.AF_INET6 if ":" in self.bind_address else socket.AF_INET
        try:
            sock = socket.create_server((self.bind_address, self.requested_port), family=family, backlog=128)
        except (OSError, OverflowError) as e:
            reason = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
            raise OSError(
                f"cannot listen on {url_host(self.bind_address)}:{self.requested_port}: {reason}"
            ) from None
        self._port = sock.getsockname()[1]
        runner = web.AppRunner(self.app, access_log=None, handle_signals=False)
        await runner.setup()
        await web.SockSite(runner, sock, ssl_context=context).start()
        self._runner = runner
        # The component logs its own "serving securely on ..." (kube-scheduler's line), once.
        log.debug(
            "serving %s on %s:%d", "insecurely" if self.insecure else "securely", self.bind_address, self.port
        )

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    def ssl_context(self) -> ssl.SSLContext:
        # A bare server context: create_default_context(CLIENT_AUTH) would trust the system's CAs for client
        # certificates, letting any publicly signed certificate authenticate.
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        if self.cert_file is not None and self.key_file is not None:
            context.load_cert_chain(self.cert_file, self.key_file)
            self.serving_cert = self.cert_file
        elif self.cert_dir is not None:
            cert, key = self_signed_pair(self.cert_dir, list(SELF_SIGNED_HOSTS), self.pair_name)
            context.load_cert_chain(cert, key)
            self.serving_cert = cert
        else:
            with tempfile.TemporaryDirectory(prefix="kubesched-serving-") as tmp:
                cert, key = self_signed_pair(Path(tmp), list(SELF_SIGNED_HOSTS), self.pair_name)
                context.load_cert_chain(cert, key)
            self.serving_cert = None
        if self.auth is not None and self.auth.client_ca:
            context.load_verify_locations(cadata=self.auth.client_ca.decode())
            context.verify_mode = ssl.CERT_OPTIONAL
        return context
