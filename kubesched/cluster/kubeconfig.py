"""Kubeconfig files for the local cluster, in the standard format kubectl and the Python clients read."""

from __future__ import annotations

import base64
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from kubesched.cluster.certs import Pki


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _write_private(path: Path, text: str) -> Path:
    # A kubeconfig with embedded credentials is as secret as the key inside it.
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def kubeconfig_dict(
    server_url: str,
    *,
    cluster_name: str,
    user: str,
    cluster: dict[str, Any],
    credentials: dict[str, Any],
    namespace: str | None = None,
) -> dict[str, Any]:
    """A one-cluster, one-user kubeconfig whose current context is that pair."""
    context: dict[str, Any] = {"cluster": cluster_name, "user": user}
    if namespace:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster_name, "cluster": {"server": server_url, **cluster}}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": cluster_name, "context": context}],
        "current-context": cluster_name,
        "preferences": {},
    }


def write_admin_kubeconfig(
    path: Path,
    server_url: str,
    pki: Pki,
    *,
    cluster_name: str = "kubesched",
    user: str = "kubesched-admin",
    use_token: bool = False,
) -> Path:
    """Write an admin kubeconfig (mode 0600) trusting the cluster CA; credentials are the admin client
    certificate, or the admin bearer token with ``use_token``. Returns the path."""
    credentials: dict[str, Any]
    if use_token:
        credentials = {"token": pki.token}
    else:
        credentials = {
            "client-certificate-data": _b64(pki.client_cert_pem),
            "client-key-data": _b64(pki.client_key_pem),
        }
    config = kubeconfig_dict(
        server_url,
        cluster_name=cluster_name,
        user=user,
        cluster={"certificate-authority-data": _b64(pki.ca_cert_pem)},
        credentials=credentials,
    )
    return _write_private(path, yaml.safe_dump(config, sort_keys=False))


def write_insecure_kubeconfig(
    path: Path, server_url: str, *, cluster_name: str = "kubesched", user: str = "kubesched-anonymous"
) -> Path:
    """Write a kubeconfig for a plain-HTTP server (``--insecure-http``): no CA, no credentials."""
    config = kubeconfig_dict(server_url, cluster_name=cluster_name, user=user, cluster={}, credentials={})
    return _write_private(path, yaml.safe_dump(config, sort_keys=False))


def write_client_kubeconfig(
    path: Path, server_url: str, pki: Pki, cert_pem: bytes, key_pem: bytes, *, user: str
) -> Path:
    """Write a kubeconfig (mode 0600) trusting the cluster CA with another client certificate than the admin's."""
    config = kubeconfig_dict(
        server_url,
        cluster_name="kubesched",
        user=user,
        cluster={"certificate-authority-data": _b64(pki.ca_cert_pem)},
        credentials={"client-certificate-data": _b64(cert_pem), "client-key-data": _b64(key_pem)},
    )
    return _write_private(path, yaml.safe_dump(config, sort_keys=False))
