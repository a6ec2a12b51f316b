"""Reading a guarded endpoint (``/metrics``, ``/debug/decisions``, ...) with the credentials of a kubeconfig.

``GuardedClient(config)`` presents the kubeconfig user's client certificate in the TLS handshake and its bearer
token (if any) in ``Authorization``; the component then asks the API server who that is and whether they may.
The component's serving certificate is verified against ``ca_file`` when given; without one (the usual
self-signed certificate) verification is skipped for loopback hosts only, and any other host is refused, so a
token is never sent to a server nobody checked.

``await guarded_get(url, config)`` and ``guarded_get_sync(url, config)`` are one-shot forms: ``(status, body)``.
"""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import aiohttp

from .secure import is_loopback

if TYPE_CHECKING:
    from kubesched.client.config import ClientConfig


class UnverifiedServerError(ValueError):
    """Refused: no CA to verify a non-loopback server's certificate with."""


def client_ssl_context(
    url: str, config: ClientConfig | None, ca_file: str | None = None
) -> ssl.SSLContext | None:
    """TLS for ``url``: the server verified (see the module docstring), ``config``'s client certificate loaded.
    None for ``http://`` URLs."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{url!r}: expected https://host:port")
    if parts.scheme == "http":
        return None
    if ca_file:
        ctx = ssl.create_default_context(cafile=ca_file)
    elif is_loopback(parts.hostname):
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    else:
        raise UnverifiedServerError(
            f"{url}: give the CA of its serving certificate to send credentials to a host that is not loopback"
        )
    if config is not None and (config.client_cert_file or config.client_cert_data):
        from kubesched.client.config import load_client_certificate

        load_client_certificate(ctx, config)
    return ctx


def auth_headers(config: ClientConfig | None) -> dict[str, str]:
    token = config.bearer_token() if config is not None else None
    return {"Authorization": f"Bearer {token}"} if token else {}


class GuardedClient:
    """GETs against one component, with ``config``'s credentials. ``await get(path)``; ``await close()``."""

    def __init__(
        self, base_url: str, config: ClientConfig | None, *, ca_file: str | None = None, timeout: float = 5.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.config = config
        self._ssl = client_ssl_context(self.base_url, config, ca_file)
        self.timeout = timeout
        self._session: aiohttp.ClientSession | None = None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else False, limit=2)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=aiohttp.ClientTimeout(total=self.timeout)
            )
        return self._session

    async def get(self, path: str) -> tuple[int, bytes]:
        url = path if "://" in path else self.base_url + path
        async with self._get_session().get(url, headers=auth_headers(self.config)) as r:
            return r.status, await r.read()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def guarded_get(
    url: str, config: ClientConfig | None, *, ca_file: str | None = None, timeout: float = 5.0
) -> tuple[int, bytes]:
    client = GuardedClient(url, config, ca_file=ca_file, timeout=timeout)
    try:
        return await client.get(url)
    finally:
        await client.close()


def guarded_get_sync(
    url: str, config: ClientConfig | None, *, ca_file: str | None = None, timeout: float = 5.0
) -> tuple[int, bytes]:
    """The blocking form (urllib), for scripts and tests. Connection errors raise ``OSError``."""
    ctx = client_ssl_context(url, config, ca_file)
    request = urllib.request.Request(url, headers=auth_headers(config))
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=timeout) as r:
            return int(r.status), bytes(r.read())
    except urllib.error.HTTPError as e:
        return int(e.code), bytes(e.read())


def kubeconfig_get_sync(url: str, kubeconfig: str, *, timeout: float = 5.0) -> tuple[int, bytes]:
    """``guarded_get_sync`` with the credentials of the kubeconfig file ``kubeconfig``."""
    from kubesched.client.config import load_config

    return guarded_get_sync(url, load_config(kubeconfig), timeout=timeout)


__all__ = [
    "GuardedClient",
    "UnverifiedServerError",
    "auth_headers",
    "client_ssl_context",
    "guarded_get",
    "guarded_get_sync",
    "kubeconfig_get_sync",
]
