"""The local cluster's PKI: a CA, the API server's serving certificate, an admin client certificate and token.

Everything is ECDSA P-256, written under one directory (keys and the token 0600) and reused across restarts while
it is still valid for the requested hosts, so kubeconfigs written earlier keep working. If only the serving
certificate no longer covers the hosts, just that one is reissued under the same CA.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
import secrets
import ssl
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_NAME = "kubesched-ca"
ADMIN_USER = "kubesched-admin"
ADMIN_GROUP = "system:masters"
SERVER_NAME = "kubesched-apiserver"

CA_VALIDITY = dt.timedelta(days=3650)
LEAF_VALIDITY = dt.timedelta(days=365)
# Reissue a certificate this long before it expires rather than let a long-running cluster hit the date.
RENEW_BEFORE = dt.timedelta(days=30)

# Names the in-cluster clients of a real cluster use for the API server; harmless to include.
_DEFAULT_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc")
_DEFAULT_IPS = ("127.0.0.1", "::1")

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True)
class Pki:
    """Paths and PEM contents of the cluster's CA, serving pair, admin client pair and admin token."""

    dir: Path
    ca_cert_path: Path
    ca_key_path: Path
    server_cert_path: Path
    server_key_path: Path
    client_cert_path: Path
    client_key_path: Path
    token_path: Path
    ca_cert_pem: bytes
    server_cert_pem: bytes
    client_cert_pem: bytes
    client_key_pem: bytes
    token: str

    def server_ssl_context(self) -> ssl.SSLContext:
        """TLS for the API server: asks for a client certificate, verifies one if offered, accepts none.

        Requests without a certificate then authenticate by bearer token (or are anonymous).
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.server_cert_path, self.server_key_path)
        ctx.load_verify_locations(cadata=self.ca_cert_pem.decode())
        ctx.verify_mode = ssl.CERT_OPTIONAL
        return ctx

    def client_ssl_context(self, *, with_client_cert: bool = True) -> ssl.SSLContext:
        """TLS for our own clients: trusts only the cluster CA and presents the admin certificate."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_verify_locations(cadata=self.ca_cert_pem.decode())
        if with_client_cert:
            ctx.load_cert_chain(self.client_cert_path, self.client_key_path)
        return ctx


def identity_from_peercert(peercert: dict[str, Any] | None) -> tuple[str, list[str]] | None:
    """User (CN) and groups (O) of a verified client certificate, as ``SSLObject.getpeercert()`` returns it.

    This is how kube-apiserver maps X.509 client certificates to users. None when there is no certificate.
    """
    if not peercert:
        return None
    user, groups = "", []
    for rdn in peercert.get("subject", ()):
        for key, value in rdn:
            if key == "commonName" and not user:
                user = value
            elif key == "organizationName":
                groups.append(value)
    return (user, groups) if user else None


# ------------------------------------------------------------------------------------------------------------
# Generation
# ------------------------------------------------------------------------------------------------------------


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def _split_hosts(hosts: Iterable[str]) -> tuple[list[str], list[IpAddress]]:
    dns: list[str] = []
    ips: list[IpAddress] = []
    for host in [*_DEFAULT_DNS, *_DEFAULT_IPS, *hosts]:
        host = host.strip().strip("[]")
        if not host:
            continue
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            if host not in dns:
                dns.append(host)
        else:
            if ip not in ips:
                ips.append(ip)
    return dns, ips


def _make_ca(common_name: str) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = _now()
    subject = _name(common_name)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + CA_VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def _make_leaf(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    *,
    server_hosts: Iterable[str] | None = None,
    client: bool = False,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _new_key()
    now = _now()
    usages = [ExtendedKeyUsageOID.CLIENT_AUTH] if client else [ExtendedKeyUsageOID.SERVER_AUTH]
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + LEAF_VALIDITY, ca_cert.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=False,
                crl_sign=False,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
    )
    if server_hosts is not None:
        dns, ips = _split_hosts(server_hosts)
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names.extend(x509.IPAddress(ip) for ip in ips)
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(ca_key, hashes.SHA256()), key


# ------------------------------------------------------------------------------------------------------------
# Files
# ------------------------------------------------------------------------------------------------------------


def _write(path: Path, data: bytes, mode: int) -> None:
    """Write atomically, with the final mode set before any byte lands (keys are never world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _load_cert(path: Path) -> x509.Certificate | None:
    try:
        return x509.load_pem_x509_certificate(path.read_bytes())
    except (OSError, ValueError):
        return None


def _load_key(path: Path) -> ec.EllipticCurvePrivateKey | None:
    try:
        key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    return key if isinstance(key, ec.EllipticCurvePrivateKey) else None


def _same_key(cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bool:
    fmt = (serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return cert.public_key().public_bytes(*fmt) == key.public_key().public_bytes(*fmt)


def _fresh(cert: x509.Certificate) -> bool:
    now = _now()
    return cert.not_valid_before_utc <= now and cert.not_valid_after_utc - now > RENEW_BEFORE


def _signed_by(cert: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        cert.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def _covers(cert: x509.Certificate, hosts: Iterable[str]) -> bool:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return False
    have_dns = set(san.get_values_for_type(x509.DNSName))
    have_ips = set(san.get_values_for_type(x509.IPAddress))
    dns, ips = _split_hosts(hosts)
    return set(dns) <= have_dns and set(ips) <= have_ips


def _usable_pair(cert_path: Path, key_path: Path, ca: x509.Certificate | None) -> x509.Certificate | None:
    cert, key = _load_cert(cert_path), _load_key(key_path)
    if cert is None or key is None or not _same_key(cert, key) or not _fresh(cert):
        return None
    if ca is not None and not _signed_by(cert, ca):
        return None
    return cert


def generate_pki(dir: Path, hosts: list[str]) -> Pki:
    """Create (or reuse) the cluster PKI under ``dir``; ``hosts`` are extra DNS names or IPs to serve on."""
    dir = Path(dir)
    dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "ca_cert": dir / "ca.crt",
        "ca_key": dir / "ca.key",
        "server_cert": dir / "apiserver.crt",
        "server_key": dir / "apiserver.key",
        "client_cert": dir / "admin.crt",
        "client_key": dir / "admin.key",
        "token": dir / "token",
    }

    ca_cert = _usable_pair(paths["ca_cert"], paths["ca_key"], None)
    ca_key = _load_key(paths["ca_key"]) if ca_cert is not None else None
    renewed_ca = ca_cert is None or ca_key is None
    if renewed_ca:
        ca_cert, ca_key = _make_ca(CA_NAME)
        _write(paths["ca_key"], _key_pem(ca_key), 0o600)
        _write(paths["ca_cert"], _cert_pem(ca_cert), 0o644)
    assert ca_cert is not None and ca_key is not None

    server = None if renewed_ca else _usable_pair(paths["server_cert"], paths["server_key"], ca_cert)
    if server is None or not _covers(server, hosts):
        cert, key = _make_leaf(ca_cert, ca_key, _name(SERVER_NAME), server_hosts=hosts)
        _write(paths["server_key"], _key_pem(key), 0o600)
        _write(paths["server_cert"], _cert_pem(cert), 0o644)

    if renewed_ca or _usable_pair(paths["client_cert"], paths["client_key"], ca_cert) is None:
        cert, key = _make_leaf(ca_cert, ca_key, _name(ADMIN_USER, ADMIN_GROUP), client=True)
        _write(paths["client_key"], _key_pem(key), 0o600)
        _write(paths["client_cert"], _cert_pem(cert), 0o644)

    token = ""
    if paths["token"].exists():
        token = paths["token"].read_text().strip()
    if len(token) < 32:
        token = secrets.token_urlsafe(32)
        _write(paths["token"], (token + "\n").encode(), 0o600)

    return Pki(
        dir=dir,
        ca_cert_path=paths["ca_cert"],
        ca_key_path=paths["ca_key"],
        server_cert_path=paths["server_cert"],
        server_key_path=paths["server_key"],
        client_cert_path=paths["client_cert"],
        client_key_path=paths["client_key"],
        token_path=paths["token"],
        ca_cert_pem=paths["ca_cert"].read_bytes(),
        server_cert_pem=paths["server_cert"].read_bytes(),
        client_cert_pem=paths["client_cert"].read_bytes(),
        client_key_pem=paths["client_key"].read_bytes(),
        token=token,
    )


def self_signed_pair(dir: Path, hosts: list[str], name: str) -> tuple[Path, Path]:
    """A throwaway serving pair ``<name>.crt``/``<name>.key`` for a component without one of its own.

    Like kube-scheduler's fallback, a private CA signs the certificate and the certificate file carries both
    (leaf first), so a client may trust either. Reused while valid for ``hosts``.
    """
    dir = Path(dir)
    cert_path, key_path = dir / f"{name}.crt", dir / f"{name}.key"
    existing = _usable_pair(cert_path, key_path, None)
    if existing is not None and _covers(existing, hosts):
        return cert_path, key_path
    ca_cert, ca_key = _make_ca(f"{name}-ca@{int(_now().timestamp())}")
    cert, key = _make_leaf(ca_cert, ca_key, _name(f"{name}@{int(_now().timestamp())}"), server_hosts=hosts)
    _write(key_path, _key_pem(key), 0o600)
    _write(cert_path, _cert_pem(cert) + _cert_pem(ca_cert), 0o644)
    return cert_path, key_path


def client_pair(pki: Pki, name: str, user: str, group: str | None = None) -> tuple[bytes, bytes]:
    """PEM certificate and key of a client ``user`` (organisation ``group``) signed by the cluster CA, as
    kubeadm makes for its components (``scheduler.conf``: ``system:kube-scheduler``). Kept as
    ``<pki>/<name>.crt``/``.key`` and reused while valid."""
    cert_path, key_path = pki.dir / f"{name}.crt", pki.dir / f"{name}.key"
    ca_cert = _load_cert(pki.ca_cert_path)
    ca_key = _load_key(pki.ca_key_path)
    if ca_cert is None or ca_key is None:
        raise ValueError(f"no cluster CA in {pki.dir}")
    if _usable_pair(cert_path, key_path, ca_cert) is None:
        cert, key = _make_leaf(ca_cert, ca_key, _name(user, group), client=True)
        _write(key_path, _key_pem(key), 0o600)
        _write(cert_path, _cert_pem(cert), 0o644)
    return cert_path.read_bytes(), key_path.read_bytes()
