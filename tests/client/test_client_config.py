"""Client configuration: kubeconfig parsing and merging, --master, in-cluster, TLS and tokens."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from client_fakes import FakeServer, b64, json_response
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kubesched.client import ApiClient, ClientConfig, ConfigError, load_config, load_in_cluster_config
from kubesched.client.config import load_kubeconfig


def self_signed(common_name: str) -> tuple[bytes, bytes]:
    """A PEM certificate (valid for 127.0.0.1) and its key."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def write_kubeconfig(path: Path, doc: dict[str, Any]) -> str:
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def kubeconfig_doc(
    server: str = "https://k8s.example:6443",
    cluster: dict[str, Any] | None = None,
    user: dict[str, Any] | None = None,
    namespace: str | None = "team-a",
    name: str = "dev",
) -> dict[str, Any]:
    ctx: dict[str, Any] = {"cluster": f"{name}-cluster", "user": f"{name}-user"}
    if namespace:
        ctx["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": name,
        "clusters": [{"name": f"{name}-cluster", "cluster": {"server": server, **(cluster or {})}}],
        "users": [{"name": f"{name}-user", "user": user or {}}],
        "contexts": [{"name": name, "context": ctx}],
    }


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(var, raising=False)
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    return home


def test_kubeconfig_with_inline_data_and_token(tmp_path: Path, clean_env: Path) -> None:
    cert, key = self_signed("client")
    doc = kubeconfig_doc(
        cluster={"certificate-authority-data": b64(cert)},
        user={"client-certificate-data": b64(cert), "client-key-data": b64(key), "token": "abc"},
    )
    cfg = load_config(write_kubeconfig(tmp_path / "kc", doc))
    assert cfg.server == "https://k8s.example:6443"
    assert (cfg.ca_data, cfg.client_cert_data, cfg.client_key_data) == (cert, cert, key)
    assert cfg.bearer_token() == "abc" and cfg.namespace == "team-a"
    ctx = cfg.ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname


def test_relative_paths_resolve_from_the_kubeconfig_and_token_file_is_reread(
    tmp_path: Path, clean_env: Path
) -> None:
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "token").write_text("first\n")
    (conf_dir / "ca.crt").write_text(
        ""
    )  # certificate files must exist (client-go refuses the kubeconfig otherwise)
    doc = kubeconfig_doc(
        cluster={"certificate-authority": "ca.crt"}, user={"tokenFile": "token", "token": "static"}
    )
    cfg = load_config(write_kubeconfig(conf_dir / "kc", doc))
    assert cfg.ca_file == str(conf_dir / "ca.crt")
    assert cfg.token_file == str(conf_dir / "token")
    assert cfg.bearer_token(now=100.0) == "first"  # the file wins over the inline token
    (conf_dir / "token").write_text("rotated")
    assert cfg.bearer_token(now=130.0) == "first"  # re-read once a minute
    assert cfg.bearer_token(now=161.0) == "rotated"
    (conf_dir / "token").unlink()
    assert cfg.bearer_token(now=300.0) == "rotated"  # keep the last good value


def test_master_overrides_the_kubeconfig_server(tmp_path: Path, clean_env: Path) -> None:
    path = write_kubeconfig(tmp_path / "kc", kubeconfig_doc(user={"token": "t"}))
    cfg = load_config(path, master="https://other:443/")
    assert cfg.server == "https://other:443" and cfg.token == "t"


def test_master_alone_is_a_bare_url(clean_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # KUBECONFIG is not consulted when only --master is given (client-go's BuildConfigFromFlags).
    monkeypatch.setenv("KUBECONFIG", write_kubeconfig(tmp_path / "kc", kubeconfig_doc(user={"token": "t"})))
    cfg = load_config(None, "127.0.0.1:8080")
    assert cfg.server == "http://127.0.0.1:8080" and cfg.bearer_token() is None
    assert cfg.ssl_context() is None
    assert (
        ClientConfig(server="10.0.0.1:6443", insecure_skip_tls_verify=True).server == "https://10.0.0.1:6443"
    )


def test_kubeconfig_env_merges_files_first_wins(
    tmp_path: Path, clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = kubeconfig_doc(server="https://first:1", user={"token": "one"}, name="a")
    first.pop("current-context")
    second = kubeconfig_doc(server="https://second:2", user={"token": "two"}, name="b")
    # The second file also defines "a-cluster": the first definition must win.
    second["clusters"].append({"name": "a-cluster", "cluster": {"server": "https://shadowed:9"}})
    paths = [
        write_kubeconfig(tmp_path / "1", first),
        str(tmp_path / "missing"),
        write_kubeconfig(tmp_path / "2", second),
    ]
    monkeypatch.setenv("KUBECONFIG", ":".join(paths))
    cfg = load_config()
    assert (cfg.server, cfg.token) == ("https://second:2", "two")  # current-context comes from file 2
    cfg = load_config(context="a")
    assert (cfg.server, cfg.token) == ("https://first:1", "one")


def test_in_cluster_config(tmp_path: Path, clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("sa-token")
    (sa / "ca.crt").write_bytes(self_signed("ca")[0])
    (sa / "namespace").write_text("kube-system\n")
    cfg = load_in_cluster_config(
        str(sa), {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert cfg.server == "https://10.96.0.1:443"
    assert cfg.ca_file == str(sa / "ca.crt") and cfg.namespace == "kube-system"
    assert cfg.bearer_token() == "sa-token"
    v6 = load_in_cluster_config(
        str(sa), {"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
    )
    assert v6.server == "https://[fd00::1]:443"
    with pytest.raises(ConfigError, match="not running in a cluster"):
        load_in_cluster_config(str(sa), {})


def test_falls_back_to_home_kubeconfig(clean_env: Path) -> None:
    (clean_env / ".kube").mkdir()
    write_kubeconfig(clean_env / ".kube" / "config", kubeconfig_doc(server="https://home:6443"))
    assert load_config().server == "https://home:6443"


def test_no_configuration_is_a_clear_error(clean_env: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config()
    message = str(info.value)
    assert "--kubeconfig" in message and "KUBECONFIG" in message and "inside a cluster" in message


@pytest.mark.parametrize(
    ("doc", "context", "message"),
    [
        ({"contexts": []}, None, "no current-context"),
        (kubeconfig_doc(), "nope", "context 'nope' not found"),
        (kubeconfig_doc(user={"exec": {"command": "aws"}}), None, "exec/auth-provider"),
        (
            kubeconfig_doc(user={"client-certificate-data": "YQ=="}),
            None,
            "both a client certificate and a key",
        ),
        (kubeconfig_doc(cluster={"certificate-authority-data": "%%%"}), None, "not valid base64"),
        ({**kubeconfig_doc(), "clusters": []}, None, "cluster 'dev-cluster' of context 'dev' not found"),
    ],
)
def test_broken_kubeconfigs(
    tmp_path: Path, clean_env: Path, doc: dict[str, Any], context: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(write_kubeconfig(tmp_path / "kc", doc), context=context)


def test_unreadable_kubeconfigs(tmp_path: Path, clean_env: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "absent"))
    bad = tmp_path / "bad"
    bad.write_text("clusters: [unclosed")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_kubeconfig([str(bad)])


def test_insecure_skip_tls_verify(tmp_path: Path, clean_env: Path) -> None:
    doc = kubeconfig_doc(cluster={"insecure-skip-tls-verify": True})
    ctx = load_config(write_kubeconfig(tmp_path / "kc", doc)).ssl_context()
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE and not ctx.check_hostname


async def test_tls_with_client_certificate_end_to_end(tmp_path: Path, clean_env: Path) -> None:
    server_cert, server_key = self_signed("apiserver")
    client_cert, client_key = self_signed("kubesched")
    (tmp_path / "server.crt").write_bytes(server_cert)
    (tmp_path / "server.key").write_bytes(server_key)
    (tmp_path / "client-ca.crt").write_bytes(client_cert)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "client-ca.crt"))
    server_ctx.load_cert_chain(str(tmp_path / "server.crt"), str(tmp_path / "server.key"))
    server_ctx.verify_mode = ssl.CERT_REQUIRED  # reject clients without our certificate

    seen_peer: list[Any] = []

    async def handler(request: web.Request) -> web.Response:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        seen_peer.append(peer)
        return json_response({"major": "1", "minor": "32"})

    srv = FakeServer()
    srv.handler = handler
    await srv.start(ssl_context=server_ctx)
    try:
        doc = kubeconfig_doc(
            server=srv.url,
            cluster={"certificate-authority-data": b64(server_cert)},
            user={"client-certificate-data": b64(client_cert), "client-key-data": b64(client_key)},
        )
        cfg = load_config(write_kubeconfig(tmp_path / "kc", doc))
        async with ApiClient(cfg) as client:
            assert await client.raw_request("GET", "/version") == {"major": "1", "minor": "32"}
        assert seen_peer and seen_peer[0]["subject"] == ((("commonName", "kubesched"),),)
        # Without the CA the server certificate is refused.
        untrusting = ClientConfig(server=srv.url, client_cert_data=client_cert, client_key_data=client_key)
        async with ApiClient(untrusting) as client:
            with pytest.raises(Exception, match="certificate verify failed"):
                await client.raw_request("GET", "/version")
    finally:
        await srv.stop()
