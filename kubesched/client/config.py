"""Where the API server is and how to authenticate to it.

Sources, in the order :func:`load_config` tries them: an explicit kubeconfig path (``--kubeconfig``), a bare
``--master`` URL, the ``KUBECONFIG`` environment variable (a ``:``-separated list, merged as kubectl does), the
in-cluster service account (``KUBERNETES_SERVICE_HOST``/``PORT``), and ``~/.kube/config``.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# client-go re-reads bearer token files once a minute (projected service-account tokens rotate).
TOKEN_REREAD_SECONDS = 60.0
DEFAULT_BURST = 10  # client-go's DefaultBurst, used when qps > 0 and burst is unset


class ConfigError(Exception):
    """No usable client configuration. The message says what was tried; print it, not a traceback."""


def one_line(exc: BaseException) -> str:
    """An error's message on one line, for a command's stderr: a list-style message (``"invalid X:\n  - a\n
    - b"``, as configuration and policy errors print) becomes ``"invalid X: a; b"``."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    head, rest = lines[0], [ln.removeprefix("- ") for ln in lines[1:]]
    return f"{head.rstrip(':')}: {'; '.join(rest)}" if rest else head


@dataclass
class ClientConfig:
    """Everything needed to reach one API server. ``qps <= 0`` disables client-side rate limiting."""

    server: str
    ca_file: str | None = None
    ca_data: bytes | None = None
    client_cert_file: str | None = None
    client_cert_data: bytes | None = None
    client_key_file: str | None = None
    client_key_data: bytes | None = None
    token: str | None = None
    token_file: str | None = None
    insecure_skip_tls_verify: bool = False
    namespace: str = "default"
    qps: float = 0.0
    burst: int = 0
    user_agent: str | None = None
    # A ready-made context (e.g. from a component's own TLS flags); it wins over the CA/certificate fields.
    tls_context: ssl.SSLContext | None = field(default=None, repr=False)
    _file_token: str | None = field(default=None, init=False, repr=False, compare=False)
    _file_token_read_at: float | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.server = _normalize_server(self.server, self.has_tls_settings())

    def has_tls_settings(self) -> bool:
        return bool(
            self.tls_context
            or self.ca_file
            or self.ca_data
            or self.client_cert_file
            or self.client_cert_data
            or self.insecure_skip_tls_verify
        )

    @property
    def effective_burst(self) -> int:
        return self.burst if self.burst > 0 else DEFAULT_BURST

    def bearer_token(self, now: float | None = None) -> str | None:
        """The token to send. A token file wins over ``token`` once read, and is re-read every minute."""
        if self.token_file:
            now = time.monotonic() if now is None else now
            stale = self._file_token_read_at is None or now - self._file_token_read_at >= TOKEN_REREAD_SECONDS
            if stale:
                try:
                    self._file_token = Path(self.token_file).read_text().strip() or self._file_token
                except OSError:
                    pass  # keep the last good value; the server will say 401 if it expired
                self._file_token_read_at = now
            if self._file_token:
                return self._file_token
        return self.token or None

    def ssl_context(self) -> ssl.SSLContext | None:
        """TLS settings for an ``https`` server, or None for plain ``http``."""
        if not self.server.startswith("https://"):
            return None
        if self.tls_context is not None:
            return self.tls_context
        if self.insecure_skip_tls_verify:
            ctx = ssl.create_default_context()
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        else:
            cadata = self.ca_data.decode() if self.ca_data else None
            ctx = ssl.create_default_context(cafile=self.ca_file, cadata=cadata)
        if self.client_cert_file or self.client_cert_data:
            load_client_certificate(ctx, self)
        return ctx


def load_client_certificate(ctx: ssl.SSLContext, cfg: ClientConfig) -> None:
    """Load ``cfg``'s client certificate and key (files or inline data) into ``ctx``."""
    # ssl only loads certificates from files, so inline (-data) material goes through a private temp dir.
    with tempfile.TemporaryDirectory(prefix="kubesched-tls-") as tmp:
        cert_file = cfg.client_cert_file
        key_file = cfg.client_key_file
        if cfg.client_cert_data:
            cert_file = os.path.join(tmp, "client.crt")
            Path(cert_file).write_bytes(cfg.client_cert_data)
        if cfg.client_key_data:
            key_file = os.path.join(tmp, "client.key")
            Path(key_file).write_bytes(cfg.client_key_data)
        assert cert_file is not None
        ctx.load_cert_chain(cert_file, key_file)


def _normalize_server(server: str, tls: bool) -> str:
    server = server.strip().rstrip("/")
    if not server:
        raise ConfigError("the API server URL is empty")
    if "://" not in server:
        # client-go: a bare host:port means https when TLS settings are given, http otherwise.
        server = ("https://" if tls else "http://") + server
    return server


def load_config(
    kubeconfig: str | None = None, master: str | None = None, context: str | None = None
) -> ClientConfig:
    """Build a :class:`ClientConfig` from flags, the environment and the usual files.

    ``master`` overrides the server of the kubeconfig; alone it means "that URL, no credentials".
    Raises :class:`ConfigError` when nothing usable is found.
    """
    if kubeconfig:
        if not os.path.exists(kubeconfig):
            raise ConfigError(f"kubeconfig file {kubeconfig!r} does not exist")
        return load_kubeconfig([kubeconfig], context=context, master=master)
    if master:
        return ClientConfig(server=master)
    env_paths = [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if env_paths:
        existing = [p for p in env_paths if os.path.exists(p)]
        if not existing:
            raise ConfigError(f"none of the files in KUBECONFIG exist: {os.environ['KUBECONFIG']}")
        return load_kubeconfig(existing, context=context)
    if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT"):
        return load_in_cluster_config()
    home_config = Path.home() / ".kube" / "config"
    if home_config.exists():
        return load_kubeconfig([str(home_config)], context=context)
    raise ConfigError(
        "no Kubernetes configuration found: pass --kubeconfig or --master, set KUBECONFIG, create "
        "~/.kube/config, or run inside a cluster (KUBERNETES_SERVICE_HOST/KUBERNETES_SERVICE_PORT)"
    )


def load_in_cluster_config(
    sa_dir: str = SERVICE_ACCOUNT_DIR, environ: Mapping[str, str] | None = None
) -> ClientConfig:
    """The pod's service account: ``https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT``."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST", ""), env.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise ConfigError("not running in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set")
    token_file = os.path.join(sa_dir, "token")
    if not os.path.exists(token_file):
        raise ConfigError(f"in-cluster configuration: service account token {token_file} is missing")
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    ca_file = os.path.join(sa_dir, "ca.crt")
    namespace = "default"
    try:
        namespace = Path(sa_dir, "namespace").read_text().strip() or "default"
    except OSError:
        pass
    return ClientConfig(
        server=f"https://{host}:{port}",
        ca_file=ca_file if os.path.exists(ca_file) else None,
        token_file=token_file,
        namespace=namespace,
    )


@dataclass
class _Named:
    """One entry of a kubeconfig list, remembering which file defined it (relative paths resolve from there)."""

    body: dict[str, Any]
    base_dir: str
    where: str  # "<file>: users[name=admin].user", for messages


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _entries(doc: dict[str, Any], section: str, key: str, path: str) -> list[tuple[str, _Named]]:
    """The ``{name, <key>}`` entries of one list section, checked for shape (client-go refuses the file too)."""
    raw = doc.get(section)
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ConfigError(
            f"kubeconfig {path}: {section}: must be a list of {{name, {key}}} entries, not {_kind(raw)}"
        )
    base_dir = os.path.dirname(os.path.abspath(path))
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ConfigError(
                f"kubeconfig {path}: {section}[{i}]: must be a mapping with name and {key}, not {_kind(entry)}"
            )
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise ConfigError(f"kubeconfig {path}: {section}[{i}].name: must be a non-empty string")
        body = entry.get(key)
        if body is None:
            body = {}
        if not isinstance(body, dict):
            raise ConfigError(
                f"kubeconfig {path}: {section}[{i}].{key}: must be a mapping, not {_kind(body)}"
            )
        out.append((name, _Named(body, base_dir, f"{path}: {section}[name={name}].{key}")))
    return out


def _text(body: dict[str, Any], field_name: str, where: str) -> str | None:
    """A string field (None when absent or empty); anything else is a ConfigError naming it."""
    value = body.get(field_name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise ConfigError(f"kubeconfig {where}.{field_name}: must be a string, not {_kind(value)}")
    return value


def _file(body: dict[str, Any], field_name: str, named: _Named) -> str | None:
    """A path field, resolved against the kubeconfig's folder; it must exist (client-go fails on it too)."""
    path = _resolve(_text(body, field_name, named.where), named.base_dir)
    if path is not None and not os.path.isfile(path):
        raise ConfigError(f"kubeconfig {named.where}.{field_name}: {path}: no such file")
    return path


def load_kubeconfig(paths: list[str], context: str | None = None, master: str | None = None) -> ClientConfig:
    """Merge kubeconfig files as kubectl does (first definition of a name wins) and resolve one context."""
    clusters: dict[str, _Named] = {}
    users: dict[str, _Named] = {}
    contexts: dict[str, _Named] = {}
    current = ""
    for path in paths:
        doc = _read_yaml(path)
        for section, key, target in (
            ("clusters", "cluster", clusters),
            ("users", "user", users),
            ("contexts", "context", contexts),
        ):
            for name, named in _entries(doc, section, key, path):
                target.setdefault(name, named)
        current = current or (_text(doc, "current-context", path) or "")
    where = ", ".join(paths)
    name = context or current
    if not name:
        if master:
            return ClientConfig(server=master)
        raise ConfigError(f"kubeconfig {where} has no current-context; pass --context or set one")
    if name not in contexts:
        raise ConfigError(f"context {name!r} not found in kubeconfig {where}")
    ctx_named = contexts[name]
    ctx = ctx_named.body
    cluster_name = _text(ctx, "cluster", ctx_named.where) or ""
    cluster = clusters.get(cluster_name)
    if cluster is None and not master:
        raise ConfigError(f"cluster {cluster_name!r} of context {name!r} not found in kubeconfig {where}")
    user = users.get(_text(ctx, "user", ctx_named.where) or "")
    kwargs: dict[str, Any] = {"namespace": _text(ctx, "namespace", ctx_named.where) or "default"}
    server = master
    if cluster is not None:
        c = cluster.body
        server = server or _text(c, "server", cluster.where)
        skip = c.get("insecure-skip-tls-verify", False)
        if not isinstance(skip, bool):
            raise ConfigError(f"kubeconfig {cluster.where}.insecure-skip-tls-verify: must be true or false")
        kwargs["insecure_skip_tls_verify"] = skip
        kwargs["ca_file"] = _file(c, "certificate-authority", cluster)
        kwargs["ca_data"] = _b64(
            _text(c, "certificate-authority-data", cluster.where), "certificate-authority-data", where
        )
    if not server:
        raise ConfigError(f"cluster of context {name!r} in kubeconfig {where} has no server")
    if user is not None:
        kwargs.update(_user_credentials(user, name, where))
    return ClientConfig(server=server, **kwargs)


def _user_credentials(user: _Named, context: str, where: str) -> dict[str, Any]:
    u, at = user.body, user.where
    creds: dict[str, Any] = {
        "client_cert_file": _file(u, "client-certificate", user),
        "client_cert_data": _b64(_text(u, "client-certificate-data", at), "client-certificate-data", where),
        "client_key_file": _file(u, "client-key", user),
        "client_key_data": _b64(_text(u, "client-key-data", at), "client-key-data", where),
        "token": _text(u, "token", at),
        "token_file": _resolve(_text(u, "tokenFile", at), user.base_dir),
    }
    has_cert = creds["client_cert_file"] or creds["client_cert_data"]
    has_key = creds["client_key_file"] or creds["client_key_data"]
    if bool(has_cert) != bool(has_key):
        raise ConfigError(f"user of context {context!r} in {where} needs both a client certificate and a key")
    usable = has_cert or creds["token"] or creds["token_file"]
    if not usable and (u.get("exec") or u.get("auth-provider")):
        raise ConfigError(
            f"user of context {context!r} in {where} uses an exec/auth-provider plugin, which kubesched does "
            "not support; use a token, tokenFile or client certificate"
        )
    return creds


def _read_yaml(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise ConfigError(f"cannot read kubeconfig {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: {' '.join(str(e).split())}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"kubeconfig {path} is not valid YAML: not UTF-8 text") from None
    if doc is None:
        return {}
    if not isinstance(doc, dict):
        raise ConfigError(f"kubeconfig {path} is not a mapping (a Config object), but {_kind(doc)}")
    return doc


def _resolve(path: str | None, base_dir: str) -> str | None:
    if not path:
        return None
    return path if os.path.isabs(path) else os.path.join(base_dir, path)


def _b64(value: str | None, field_name: str, where: str) -> bytes | None:
    if not value:
        return None
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ConfigError(f"{field_name} in kubeconfig {where} is not valid base64") from None
