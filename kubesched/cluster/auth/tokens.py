"""Service-account tokens: signed, expiring, audience-bound JWTs shaped as upstream's bound tokens.

The cluster keeps one RSA key (``<data-dir>/pki/sa.key``, made at first start and reused, so tokens survive a
restart) and signs with RS256 as kube-apiserver does by default. JWT is small enough that the ``cryptography``
primitives suffice; no JWT library is needed. ``verify`` checks only what the token itself proves (signature,
issuer, audience, time); whether the ServiceAccount (and a bound Pod) still exist with the same uid is the
authenticator's job (``authn.py``), because only it can read the store.
"""

from __future__ import annotations

import base64
import hashlib
import os
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from kubesched.cluster.auth.user import (
    EXTRA_CREDENTIAL_ID,
    EXTRA_NODE_NAME,
    EXTRA_NODE_UID,
    EXTRA_POD_NAME,
    EXTRA_POD_UID,
    UserInfo,
    service_account_groups,
    service_account_username,
)

DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"
# kube-apiserver's --api-audiences defaults to the issuer: a TokenRequest without audiences is for the API server.
DEFAULT_AUDIENCES = (DEFAULT_ISSUER,)
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600
# go-jose's default leeway for exp/nbf/iat, which upstream's validator uses.
LEEWAY_SECONDS = 60
KEY_BITS = 2048

_HEADER_ALG = "RS256"


class TokenError(Exception):
    """The token is not a valid service-account token for these audiences (an authentication failure)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_or_create_key(path: Path) -> rsa.RSAPrivateKey:
    """The signing key at ``path``; a new one is written (0600, atomically) when the file is absent or unusable."""
    if path.exists():
        try:
            key = serialization.load_pem_private_key(path.read_bytes(), password=None)
            if isinstance(key, rsa.RSAPrivateKey):
                return key
        except ValueError:
            pass
    key = rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".sa.key.")
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, pem)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return key


def key_id(public_key: rsa.RSAPublicKey) -> str:
    """Upstream's ``kid``: base64url of the SHA-256 of the DER public key (so verifiers can pick the key)."""
    der = public_key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return _b64(hashlib.sha256(der).digest())


@dataclass(frozen=True, slots=True)
class BoundObject:
    """What a token is bound to besides its service account (a Pod, the Node it runs on)."""

    kind: str  # "Pod" or "Node"
    name: str
    uid: str


@dataclass(frozen=True, slots=True)
class ServiceAccountClaims:
    """The verified content of a token: whose it is, what it is bound to, which of the asked audiences it has."""

    namespace: str
    name: str
    uid: str
    audiences: tuple[str, ...]
    expiration: int
    jti: str = ""
    pod: BoundObject | None = None
    node: BoundObject | None = None

    def user(self) -> UserInfo:
        extra: dict[str, tuple[str, ...]] = {}
        if self.jti:
            extra[EXTRA_CREDENTIAL_ID] = (f"JTI={self.jti}",)
        if self.pod is not None:
            extra[EXTRA_POD_NAME] = (self.pod.name,)
            extra[EXTRA_POD_UID] = (self.pod.uid,)
        if self.node is not None:
            extra[EXTRA_NODE_NAME] = (self.node.name,)
            if self.node.uid:
                extra[EXTRA_NODE_UID] = (self.node.uid,)
        return UserInfo(
            service_account_username(self.namespace, self.name),
            uid=self.uid,
            groups=service_account_groups(self.namespace),
            extra=extra,
        )


class TokenIssuer:
    """Issues and verifies the cluster's service-account tokens with the key at ``key_path``."""

    def __init__(
        self,
        key_path: Path,
        *,
        issuer: str = DEFAULT_ISSUER,
        api_audiences: tuple[str, ...] = DEFAULT_AUDIENCES,
    ) -> None:
        self.key_path = key_path
        self.issuer = issuer
        self.api_audiences = api_audiences
        self._key = load_or_create_key(key_path)
        self._public = self._key.public_key()
        self._kid = key_id(self._public)
        self._header = _b64(orjson.dumps({"alg": _HEADER_ALG, "kid": self._kid}))

    def public_key_pem(self) -> bytes:
        return self._public.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def issue(
        self,
        namespace: str,
        sa_name: str,
        sa_uid: str,
        audiences: list[str] | tuple[str, ...] | None = None,
        expiration_seconds: int = DEFAULT_EXPIRATION_SECONDS,
        bound_pod: BoundObject | None = None,
        *,
        bound_node: BoundObject | None = None,
        now: float | None = None,
    ) -> tuple[str, int]:
        """A signed token and its expiration (Unix seconds). Empty ``audiences`` means the API server's own."""
        iat = int(time.time() if now is None else now)
        exp = iat + int(expiration_seconds)
        private: dict[str, Any] = {
            "namespace": namespace,
            "serviceaccount": {"name": sa_name, "uid": sa_uid},
        }
        if bound_pod is not None:
            private["pod"] = {"name": bound_pod.name, "uid": bound_pod.uid}
        if bound_node is not None:
            private["node"] = {"name": bound_node.name, "uid": bound_node.uid}
        claims = {
            "aud": list(audiences) if audiences else list(self.api_audiences),
            "exp": exp,
            "iat": iat,
            "iss": self.issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": private,
            "nbf": iat,
            "sub": service_account_username(namespace, sa_name),
        }
        signing_input = f"{self._header}.{_b64(orjson.dumps(claims))}"
        sig = self._key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(sig)}", exp

    def looks_like_ours(self, token: str) -> bool:
        """Cheap pre-check: three segments whose header names our key (a static token never does)."""
        head, _, _ = token.partition(".")
        return token.count(".") == 2 and head == self._header

    def verify_claims(
        self, token: str, audiences: list[str] | tuple[str, ...] | None = None, *, now: float | None = None
    ) -> ServiceAccountClaims:
        """The token's claims if it is ours, unexpired and meant for one of ``audiences`` (default: the API
        server's); raises ``TokenError`` otherwise."""
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("token is not a JWT")
        try:
            header = orjson.loads(_unb64(parts[0]))
            payload = orjson.loads(_unb64(parts[1]))
            sig = _unb64(parts[2])
        except (ValueError, orjson.JSONDecodeError):
            raise TokenError("token is malformed") from None
        if not isinstance(header, dict) or header.get("alg") != _HEADER_ALG:
            raise TokenError("unsupported signing algorithm")
        if header.get("kid") not in (None, self._kid):
            raise TokenError("token was signed by another key")
        try:
            self._public.verify(sig, f"{parts[0]}.{parts[1]}".encode(), padding.PKCS1v15(), hashes.SHA256())
        except InvalidSignature:
            raise TokenError("invalid signature") from None
        if not isinstance(payload, dict) or payload.get("iss") != self.issuer:
            raise TokenError("token issuer is not trusted")
        t = time.time() if now is None else now
        exp, nbf = payload.get("exp"), payload.get("nbf")
        if not isinstance(exp, int) or t > exp + LEEWAY_SECONDS:
            raise TokenError("service account token has expired")
        if isinstance(nbf, int) and t < nbf - LEEWAY_SECONDS:
            raise TokenError("service account token is not valid yet")
        aud = payload.get("aud")
        token_aud = [aud] if isinstance(aud, str) else list(aud or [])
        accepted = list(audiences) if audiences else list(self.api_audiences)
        matched = tuple(a for a in accepted if a in token_aud)
        if not matched:
            raise TokenError(
                "token audiences "
                + repr(token_aud)
                + " is invalid for the target audiences "
                + repr(accepted)
            )
        private = payload.get("kubernetes.io")
        if not isinstance(private, dict):
            raise TokenError("token has no kubernetes.io claims")
        sa = private.get("serviceaccount") or {}
        namespace, name, uid = private.get("namespace"), sa.get("name"), sa.get("uid")
        if not (isinstance(namespace, str) and isinstance(name, str) and isinstance(uid, str)):
            raise TokenError("token names no service account")
        if payload.get("sub") != service_account_username(namespace, name):
            raise TokenError("token subject does not match its service account")
        pod = _bound(private.get("pod"), "Pod")
        node = _bound(private.get("node"), "Node")
        return ServiceAccountClaims(
            namespace, name, uid, matched, exp, jti=str(payload.get("jti") or ""), pod=pod, node=node
        )

    def verify(
        self, token: str, audiences: list[str] | tuple[str, ...] | None = None, *, now: float | None = None
    ) -> UserInfo:
        """The service account's identity (see ``verify_claims``)."""
        return self.verify_claims(token, audiences, now=now).user()


def _bound(ref: Any, kind: str) -> BoundObject | None:
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    return BoundObject(kind, str(ref["name"]), str(ref.get("uid") or ""))
