"""Secure serving for kubesched's components (scheduler, annotator, operator), as k8s.io/apiserver gives
kube-scheduler: HTTPS, delegated authentication, delegated authorization.

Serving a component's endpoints::

    from kubesched import serving

    serving.add_flags(parser)                       # --authentication-kubeconfig, --client-ca-file, ...
    ...
    auth = await serving.delegated_auth(args, client_config)   # AuthSetupError: print it, exit 1
    server = serving.SecureServing(app, bind_address=..., port=..., cert_file=..., key_file=...,
                                   cert_dir=..., pair_name="kube-scheduler", auth=auth)
    await server.start()            # server.port, server.url
    ...
    await server.stop(); await auth.close()

Every request is authenticated (a client certificate signed by the client CA, a bearer token checked with a
``TokenReview``, else ``system:anonymous``; bad credentials: 401) and authorized (the always-allowed paths,
``/healthz``, ``/readyz``, ``/livez`` by default; else a ``SubjectAccessReview`` on the path and verb; 403
``forbidden: User "..." cannot get path "..."``). Handlers find the caller in ``request[serving.USER_KEY]``.
``SecureServing(..., insecure=True)`` is plain HTTP without authentication, on loopback addresses only.

Reading a guarded endpoint as a kubeconfig's user::

    status, body = await serving.guarded_get("https://127.0.0.1:10259/metrics", client_config)
    status, body = serving.guarded_get_sync(url, client_config)       # blocking
    client = serving.GuardedClient(base_url, client_config)           # repeated GETs; await client.close()

Modules: ``authn.py`` (DelegatingAuthenticator), ``authz.py`` (DelegatingAuthorizer), ``options.py`` (flags,
``delegated_auth``, argparse types ``port_number``/``go_bool``/``go_duration``), ``secure.py`` (SecureServing,
the ``guard`` middleware, ``require_loopback``), ``fetch.py`` (the client side).
"""

from __future__ import annotations

from .authn import ANONYMOUS, DelegatingAuthenticator, Unauthorized, User
from .authz import DEFAULT_ALWAYS_ALLOW_PATHS, Decision, DelegatingAuthorizer, forbidden_message
from .fetch import GuardedClient, UnverifiedServerError, guarded_get, guarded_get_sync, kubeconfig_get_sync
from .options import (
    AuthSetupError,
    DelegatedAuth,
    add_flags,
    delegated_auth,
    go_bool,
    go_duration,
    port_number,
)
from .secure import USER_KEY, SecureServing, guard, is_loopback, require_loopback, url_host

__all__ = [
    "ANONYMOUS",
    "DEFAULT_ALWAYS_ALLOW_PATHS",
    "USER_KEY",
    "AuthSetupError",
    "Decision",
    "DelegatedAuth",
    "DelegatingAuthenticator",
    "DelegatingAuthorizer",
    "GuardedClient",
    "SecureServing",
    "Unauthorized",
    "UnverifiedServerError",
    "User",
    "add_flags",
    "delegated_auth",
    "forbidden_message",
    "go_bool",
    "go_duration",
    "guard",
    "guarded_get",
    "guarded_get_sync",
    "is_loopback",
    "kubeconfig_get_sync",
    "port_number",
    "require_loopback",
    "url_host",
]
