"""The delegated authentication and authorization flags (k8s.io/apiserver's ``DelegatingAuthenticationOptions``
and ``DelegatingAuthorizationOptions``, as kube-scheduler registers them) and what they build.

``add_flags(parser)`` adds ``--authentication-kubeconfig``, ``--authorization-kubeconfig``, ``--client-ca-file``,
``--authentication-tolerate-lookup-failure``, ``--authentication-token-webhook-cache-ttl``,
``--authorization-always-allow-paths``, ``--authorization-webhook-cache-authorized-ttl`` and
``--authorization-webhook-cache-unauthorized-ttl``. ``await delegated_auth(args, main_config)`` builds a
:class:`DelegatedAuth`. A kubeconfig flag left empty falls back to ``main_config`` (the component's own
``--kubeconfig``/in-cluster identity: kubeadm passes the same file for all three); with no configuration at all
tokens cannot be reviewed and only the always-allowed paths are served.

The client CA is ``--client-ca-file`` if given, else the ``client-ca-file`` key of the ConfigMap
``kube-system/extension-apiserver-authentication`` (absent ConfigMap: no client certificates, as upstream). A
lookup that fails otherwise (e.g. 403) is a warning with ``--authentication-tolerate-lookup-failure`` (kube-
scheduler's default, true) and an :class:`AuthSetupError` without it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aiohttp

from kubesched.client.rest import ApiError

from .authn import DEFAULT_CACHE_TTL, DelegatingAuthenticator
from .authz import DEFAULT_ALLOW_TTL, DEFAULT_ALWAYS_ALLOW_PATHS, DEFAULT_DENY_TTL, DelegatingAuthorizer

if TYPE_CHECKING:
    from kubesched.client.config import ClientConfig
    from kubesched.client.rest import ApiClient

log = logging.getLogger(__name__)

AUTHENTICATION_CONFIGMAP_NAMESPACE = "kube-system"
AUTHENTICATION_CONFIGMAP = "extension-apiserver-authentication"
CLIENT_CA_KEY = "client-ca-file"
LOOKUP_TIMEOUT = 10.0


class AuthSetupError(Exception):
    """The authentication/authorization configuration cannot be used; the message names the flag."""


@dataclass
class DelegatedAuth:
    """What :func:`kubesched.serving.secure.guard` checks requests with. ``close()`` the clients at the end."""

    authenticator: DelegatingAuthenticator
    authorizer: DelegatingAuthorizer
    client_ca: bytes | None = None
    clients: list[ApiClient] = field(default_factory=list)

    async def close(self) -> None:
        for client in self.clients:
            await client.close()
        self.clients.clear()


# -- argparse types, shared by the components' command lines -----------------------------------------------------


def go_bool(value: str) -> bool:
    """A Go ``strconv.ParseBool`` value (``true``, ``1``, ``t``, ``false``, ...)."""
    v = value.strip().lower()
    if v in ("true", "1", "t", "yes"):
        return True
    if v in ("false", "0", "f", "no"):
        return False
    raise argparse.ArgumentTypeError(f"invalid boolean value {value!r}")


def port_number(value: str) -> int:
    """A TCP port, 0 to 65535 (0: off, or any free port, as the flag says)."""
    try:
        port = int(value, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid port {value!r}: not a number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"invalid port {value!r}: must be between 0 and 65535")
    return port


def go_duration(value: str) -> float:
    """A Go duration (``10s``, ``1m30s``), as seconds; must not be negative."""
    from kubesched.apimachinery.duration import parse_duration

    try:
        seconds = parse_duration(value)
    except Exception as e:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: {e}") from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"invalid duration {value!r}: must not be negative")
    return seconds


def _path_list(value: str) -> list[str]:
    paths = [p.strip() for p in value.split(",") if p.strip()]
    for p in paths:
        if not p.startswith("/"):
            raise argparse.ArgumentTypeError(f"path {p!r} must start with '/'")
        if "*" in p[:-1]:
            raise argparse.ArgumentTypeError(f"path {p!r}: '*' is only allowed at the end")
    return paths


def add_flags(
    parser: argparse.ArgumentParser,
    *,
    always_allow_paths: Sequence[str] = DEFAULT_ALWAYS_ALLOW_PATHS,
    tolerate_lookup_failure: bool = True,
) -> None:
    g = parser.add_argument_group("authentication and authorization of the secure port")
    g.add_argument(
        "--authentication-kubeconfig",
        default=None,
        help="kubeconfig of the API server that reviews tokens (TokenReview) and holds the client CA "
        "(default: the component's own --kubeconfig or in-cluster identity)",
    )
    g.add_argument(
        "--authorization-kubeconfig",
        default=None,
        help="kubeconfig of the API server that answers SubjectAccessReviews (default as above)",
    )
    g.add_argument(
        "--client-ca-file",
        default=None,
        help="CA bundle that signs client certificates (default: the client-ca-file of "
        "kube-system/extension-apiserver-authentication)",
    )
    g.add_argument(
        "--authentication-tolerate-lookup-failure",
        type=go_bool,
        nargs="?",
        const=True,
        default=tolerate_lookup_failure,
        help="start even if the client CA cannot be read from the cluster "
        f"(default {str(tolerate_lookup_failure).lower()})",
    )
    g.add_argument(
        "--authentication-token-webhook-cache-ttl",
        type=go_duration,
        default=DEFAULT_CACHE_TTL,
        help="how long TokenReview answers are cached (default 10s)",
    )
    g.add_argument(
        "--authorization-always-allow-paths",
        type=_path_list,
        default=list(always_allow_paths),
        help="paths served without authorization, comma-separated, '*' at the end for a prefix "
        f"(default {','.join(always_allow_paths)})",
    )
    g.add_argument(
        "--authorization-webhook-cache-authorized-ttl",
        type=go_duration,
        default=DEFAULT_ALLOW_TTL,
        help="how long an allowed SubjectAccessReview is cached (default 10s)",
    )
    g.add_argument(
        "--authorization-webhook-cache-unauthorized-ttl",
        type=go_duration,
        default=DEFAULT_DENY_TTL,
        help="how long a denied SubjectAccessReview is cached (default 10s)",
    )


def _client_config(path: str | None, flag: str, main: ClientConfig | None) -> ClientConfig | None:
    if not path:
        return main
    from kubesched.client.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as e:
        raise AuthSetupError(f"{flag}: {e}") from None


def _read_client_ca(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise AuthSetupError(f"--client-ca-file {path}: {e.strerror}") from None
    _check_ca(data, f"--client-ca-file {path}")
    return data


def _check_ca(data: bytes, where: str) -> None:
    try:
        ssl.create_default_context(cadata=data.decode("ascii", "replace"))
    except (ssl.SSLError, ValueError) as e:
        raise AuthSetupError(f"{where}: not a PEM CA bundle ({e})") from None


async def _lookup_client_ca(client: ApiClient) -> bytes | None:
    try:
        cm = await asyncio.wait_for(
            client.get(
                "v1", "configmaps", AUTHENTICATION_CONFIGMAP, namespace=AUTHENTICATION_CONFIGMAP_NAMESPACE
            ),
            LOOKUP_TIMEOUT,
        )
    except ApiError as e:
        if e.is_not_found():
            return None  # the API server publishes no client CA: certificates do not authenticate
        raise
    ca = str((cm.get("data") or {}).get(CLIENT_CA_KEY) or "")
    if not ca:
        return None
    data = ca.encode()
    _check_ca(data, f"{CLIENT_CA_KEY} of {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP}")
    return data


async def delegated_auth(args: argparse.Namespace, main: ClientConfig | None) -> DelegatedAuth:
    """Build the authenticator and authorizer the flags describe (see the module docstring)."""
    from kubesched.client.rest import ApiClient

    authn_config = _client_config(args.authentication_kubeconfig, "--authentication-kubeconfig", main)
    authz_config = _client_config(args.authorization_kubeconfig, "--authorization-kubeconfig", main)
    clients: list[ApiClient] = []
    authn_client = ApiClient(authn_config) if authn_config is not None else None
    if authn_client is not None:
        clients.append(authn_client)
    if authz_config is None:
        authz_client = None
    elif authz_config is authn_config and authn_client is not None:
        authz_client = authn_client
    else:
        authz_client = ApiClient(authz_config)
        clients.append(authz_client)
    try:
        client_ca: bytes | None = None
        if args.client_ca_file:
            client_ca = _read_client_ca(args.client_ca_file)
        elif authn_client is not None:
            try:
                client_ca = await _lookup_client_ca(authn_client)
            except (ApiError, aiohttp.ClientError, OSError, TimeoutError, AuthSetupError) as e:
                if not args.authentication_tolerate_lookup_failure:
                    raise AuthSetupError(
                        f"cannot read {AUTHENTICATION_CONFIGMAP_NAMESPACE}/{AUTHENTICATION_CONFIGMAP}: {e} "
                        "(--authentication-tolerate-lookup-failure=true starts without client certificates)"
                    ) from None
                log.warning(
                    "error looking up the client CA in %s/%s: %s; continuing without client certificate "
                    "authentication",
                    AUTHENTICATION_CONFIGMAP_NAMESPACE,
                    AUTHENTICATION_CONFIGMAP,
                    e,
                )
        if authn_client is None:
            log.warning("no authentication kubeconfig: bearer tokens cannot be reviewed")
        if authz_client is None:
            log.warning(
                "no authorization kubeconfig: only %s are served", args.authorization_always_allow_paths
            )
    except BaseException:
        for c in clients:
            await c.close()
        raise
    return DelegatedAuth(
        authenticator=DelegatingAuthenticator(
            authn_client, cache_ttl=args.authentication_token_webhook_cache_ttl
        ),
        authorizer=DelegatingAuthorizer(
            authz_client,
            always_allow_paths=args.authorization_always_allow_paths,
            allow_ttl=args.authorization_webhook_cache_authorized_ttl,
            deny_ttl=args.authorization_webhook_cache_unauthorized_ttl,
        ),
        client_ca=client_ca,
        clients=clients,
    )


def defaults(**overrides: Any) -> argparse.Namespace:
    """The flags' defaults as a namespace (for callers without a command line, e.g. tests and the operator)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_flags(parser)
    ns = parser.parse_args([])
    for k, v in overrides.items():
        setattr(ns, k, v)
    return ns
