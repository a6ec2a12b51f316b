"""PKI and kubeconfigs: files, reuse, certificate contents, and real TLS handshakes with our own client, the
official Python client and (when installed) kubectl 1.32."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import socket
import ssl
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubesched.cluster.certs import Pki, generate_pki, identity_from_peercert, self_signed_pair
from kubesched.cluster.discovery import version_info
from kubesched.cluster.kubeconfig import write_admin_kubeconfig, write_insecure_kubeconfig

KUBECTL = Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.32")


def cert_of(pem: bytes) -> x509.Certificate:
    return x509.load_pem_x509_certificate(pem)


def sans(cert: x509.Certificate) -> tuple[set[str], set[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return set(san.get_values_for_type(x509.DNSName)), {
        str(i) for i in san.get_values_for_type(x509.IPAddress)
    }


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture(scope="module")
def pki_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("pki")


@pytest.fixture(scope="module")
def pki(pki_dir: Path) -> Pki:
    return generate_pki(pki_dir, ["kubesched.local", "10.1.2.3"])


def test_files_and_permissions(pki: Pki) -> None:
    for path in (pki.ca_key_path, pki.server_key_path, pki.client_key_path, pki.token_path):
        assert mode(path) == 0o600, path
    for path in (pki.ca_cert_path, pki.server_cert_path, pki.client_cert_path):
        assert mode(path) == 0o644, path
    assert pki.ca_cert_path.read_bytes() == pki.ca_cert_pem
    assert len(pki.token) >= 32 and pki.token_path.read_text().strip() == pki.token


def test_certificate_contents(pki: Pki) -> None:
    ca, server, admin = cert_of(pki.ca_cert_pem), cert_of(pki.server_cert_pem), cert_of(pki.client_cert_pem)
    assert ca.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubesched-ca"
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    for cert in (ca, server, admin):
        assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
        assert cert.public_key().curve.name == "secp256r1"
    server.verify_directly_issued_by(ca)
    admin.verify_directly_issued_by(ca)
    dns, ips = sans(server)
    assert {"localhost", "kubesched.local"} <= dns
    assert {"127.0.0.1", "::1", "10.1.2.3"} <= ips
    assert (
        ExtendedKeyUsageOID.SERVER_AUTH
        in server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )
    assert admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kubesched-admin"
    assert admin.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == "system:masters"
    assert (
        ExtendedKeyUsageOID.CLIENT_AUTH
        in admin.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    )


def test_reuse_and_reissue(tmp_path: Path) -> None:
    first = generate_pki(tmp_path, [])
    again = generate_pki(tmp_path, ["127.0.0.1"])  # already covered: nothing changes
    assert again == first
    wider = generate_pki(tmp_path, ["[fd00::1]", "api.example"])
    assert wider.ca_cert_pem == first.ca_cert_pem and wider.client_cert_pem == first.client_cert_pem
    assert wider.token == first.token
    assert wider.server_cert_pem != first.server_cert_pem
    dns, ips = sans(cert_of(wider.server_cert_pem))
    assert "api.example" in dns and "fd00::1" in ips
    # a damaged CA key means a new CA, and every certificate signed again
    first.ca_key_path.write_text("garbage")
    fresh = generate_pki(tmp_path, [])
    assert fresh.ca_cert_pem != first.ca_cert_pem
    cert_of(fresh.client_cert_pem).verify_directly_issued_by(cert_of(fresh.ca_cert_pem))
    cert_of(fresh.server_cert_pem).verify_directly_issued_by(cert_of(fresh.ca_cert_pem))


def test_self_signed_pair(tmp_path: Path) -> None:
    cert_path, key_path = self_signed_pair(
        tmp_path, ["127.0.0.1", "localhost", "sched.local"], "kube-scheduler"
    )
    assert cert_path.name == "kube-scheduler.crt" and mode(key_path) == 0o600
    leaf, ca = x509.load_pem_x509_certificates(cert_path.read_bytes())
    leaf.verify_directly_issued_by(ca)
    assert "sched.local" in sans(leaf)[0]
    assert self_signed_pair(tmp_path, ["sched.local"], "kube-scheduler") == (cert_path, key_path)
    assert x509.load_pem_x509_certificates(cert_path.read_bytes())[0] == leaf  # reused, not regenerated
    ctx = ssl.create_default_context(cafile=str(cert_path))
    ctx.load_cert_chain(cert_path, key_path)  # the pair loads as a server identity


def test_identity_from_peercert() -> None:
    peer = {"subject": ((("organizationName", "system:masters"),), (("commonName", "kubesched-admin"),))}
    assert identity_from_peercert(peer) == ("kubesched-admin", ["system:masters"])
    assert identity_from_peercert(None) is None and identity_from_peercert({}) is None


# -- live TLS ----------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def tls_server(pki: Pki) -> AsyncIterator[str]:
    """A tiny HTTPS server with the cluster's TLS settings, answering /version with who the caller is."""

    async def version(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        who = identity_from_peercert(peer)
        if who is None and request.headers.get("Authorization") != f"Bearer {pki.token}":
            return web.json_response({"kind": "Status", "code": 401, "reason": "Unauthorized"}, status=401)
        # the caller's identity rides in gitCommit so that typed clients see it too
        body = {**version_info(), "gitCommit": who[0] if who else "token"}
        return web.json_response(body)

    app = web.Application()
    app.router.add_get("/version", version)
    app.router.add_get("/version/", version)  # the official client asks with a trailing slash
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=pki.server_ssl_context())
    await site.start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


async def test_our_client_context_authenticates_with_the_admin_certificate(pki: Pki, tls_server: str) -> None:
    async with aiohttp.ClientSession() as session:
        async with session.get(tls_server + "/version", ssl=pki.client_ssl_context()) as resp:
            assert resp.status == 200 and (await resp.json())["gitCommit"] == "kubesched-admin"
        no_cert = pki.client_ssl_context(with_client_cert=False)
        async with session.get(tls_server + "/version", ssl=no_cert) as resp:
            assert resp.status == 401  # the handshake accepts a client without a certificate
        headers = {"Authorization": f"Bearer {pki.token}"}
        async with session.get(tls_server + "/version", ssl=no_cert, headers=headers) as resp:
            assert resp.status == 200 and (await resp.json())["gitCommit"] == "token"
        with pytest.raises(aiohttp.ClientConnectorCertificateError):
            await session.get(tls_server + "/version", ssl=ssl.create_default_context())


def official_client_version(kubeconfig: Path) -> dict[str, Any]:
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        info = client.VersionApi(api_client).get_code()
        return {"minor": info.minor, "user": info.git_commit}
    finally:
        api_client.close()


@pytest.mark.parametrize("use_token", [False, True])
async def test_official_python_client_accepts_the_kubeconfig(
    pki: Pki, tls_server: str, tmp_path: Path, use_token: bool
) -> None:
    path = write_admin_kubeconfig(tmp_path / "admin.kubeconfig", tls_server, pki, use_token=use_token)
    assert mode(path) == 0o600
    cfg = yaml.safe_load(path.read_text())
    assert cfg["current-context"] == "kubesched"
    assert cfg["contexts"][0]["context"] == {"cluster": "kubesched", "user": "kubesched-admin"}
    user = cfg["users"][0]["user"]
    assert set(user) == ({"token"} if use_token else {"client-certificate-data", "client-key-data"})
    result = await asyncio.to_thread(official_client_version, path)
    assert result["minor"] == "32"
    assert result["user"] == ("token" if use_token else "kubesched-admin")


def test_insecure_kubeconfig(tmp_path: Path) -> None:
    path = write_insecure_kubeconfig(tmp_path / "k", "http://127.0.0.1:8080")
    cfg = yaml.safe_load(path.read_text())
    assert cfg["clusters"] == [{"name": "kubesched", "cluster": {"server": "http://127.0.0.1:8080"}}]
    assert cfg["users"] == [{"name": "kubesched-anonymous", "user": {}}]
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)
    assert configuration.host == "http://127.0.0.1:8080"


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.32 not installed")
@pytest.mark.parametrize("use_token", [False, True])
async def test_kubectl_accepts_the_certificates(
    pki: Pki, tls_server: str, tmp_path: Path, use_token: bool
) -> None:
    path = write_admin_kubeconfig(tmp_path / "admin.kubeconfig", tls_server, pki, use_token=use_token)
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--kubeconfig", str(path), "--cache-dir", str(tmp_path / "cache"), "get", "--raw", "/version",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err.decode()
    assert json.loads(out)["gitCommit"] == ("token" if use_token else "kubesched-admin")


def test_ip_literals_are_ip_sans(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path, ["192.0.2.7", "2001:db8::1"])
    dns, ips = sans(cert_of(pki.server_cert_pem))
    assert {"192.0.2.7", "2001:db8::1"} <= ips
    assert not any(_is_ip(d) for d in dns)


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True
