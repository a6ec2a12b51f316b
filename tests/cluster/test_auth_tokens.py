"""Service-account tokens: issue and verify, as upstream's bound tokens behave."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import orjson
import pytest

from kubesched.cluster.auth.tokens import (
    DEFAULT_ISSUER,
    LEEWAY_SECONDS,
    BoundObject,
    TokenError,
    TokenIssuer,
)


@pytest.fixture(scope="module")
def issuer(tmp_path_factory: pytest.TempPathFactory) -> TokenIssuer:
    return TokenIssuer(tmp_path_factory.mktemp("pki") / "sa.key")


def _claims(token: str) -> dict:
    body = token.split(".")[1]
    return orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))


def test_claims_are_upstreams_bound_token_shape(issuer: TokenIssuer) -> None:
    token, exp = issuer.issue(
        "ns", "sa", "uid-1", ["api"], 3600, BoundObject("Pod", "p", "pod-uid"), now=1000
    )
    c = _claims(token)
    assert exp == 4600
    assert c["iss"] == DEFAULT_ISSUER
    assert c["sub"] == "system:serviceaccount:ns:sa"
    assert c["aud"] == ["api"]
    assert (c["iat"], c["nbf"], c["exp"]) == (1000, 1000, 4600)
    assert c["kubernetes.io"] == {
        "namespace": "ns",
        "serviceaccount": {"name": "sa", "uid": "uid-1"},
        "pod": {"name": "p", "uid": "pod-uid"},
    }
    header = orjson.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header["alg"] == "RS256" and header["kid"]


def test_verify_gives_the_service_account_identity(issuer: TokenIssuer) -> None:
    token, _ = issuer.issue("ns", "sa", "uid-1", ["api"], 3600, BoundObject("Pod", "p", "pod-uid"))
    user = issuer.verify(token, ["other", "api"])
    assert user.name == "system:serviceaccount:ns:sa"
    assert user.uid == "uid-1"
    assert user.groups == ("system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated")
    assert user.extra["authentication.kubernetes.io/pod-name"] == ("p",)
    assert user.extra["authentication.kubernetes.io/pod-uid"] == ("pod-uid",)
    assert user.extra["authentication.kubernetes.io/credential-id"][0].startswith("JTI=")
    claims = issuer.verify_claims(token, ["other", "api"])
    assert claims.audiences == ("api",)


def test_default_audience_is_the_api_server(issuer: TokenIssuer) -> None:
    token, _ = issuer.issue("ns", "sa", "u", None, 3600)
    assert _claims(token)["aud"] == [DEFAULT_ISSUER]
    assert issuer.verify(token).name == "system:serviceaccount:ns:sa"


def test_wrong_audience_is_rejected(issuer: TokenIssuer) -> None:
    token, _ = issuer.issue("ns", "sa", "u", ["vault"], 3600)
    with pytest.raises(TokenError, match="audiences"):
        issuer.verify(token)


def test_expiry_with_upstreams_leeway(issuer: TokenIssuer) -> None:
    token, exp = issuer.issue("ns", "sa", "u", None, 600, now=10_000)
    assert issuer.verify(token, now=exp + LEEWAY_SECONDS).name.endswith(":sa")
    with pytest.raises(TokenError, match="expired"):
        issuer.verify(token, now=exp + LEEWAY_SECONDS + 1)
    with pytest.raises(TokenError, match="not valid yet"):
        issuer.verify(token, now=10_000 - LEEWAY_SECONDS - 1)


def test_tampered_payload_or_signature_is_rejected(issuer: TokenIssuer) -> None:
    token, _ = issuer.issue("ns", "sa", "u", None, 3600)
    head, body, sig = token.split(".")
    c = _claims(token)
    c["kubernetes.io"]["serviceaccount"]["name"] = "admin"
    c["sub"] = "system:serviceaccount:ns:admin"
    forged = base64.urlsafe_b64encode(orjson.dumps(c)).rstrip(b"=").decode()
    with pytest.raises(TokenError, match="signature"):
        issuer.verify(f"{head}.{forged}.{sig}")
    flipped = sig[:-2] + ("A" if sig[-2] != "A" else "B") + sig[-1]
    with pytest.raises(TokenError):
        issuer.verify(f"{head}.{body}.{flipped}")
    with pytest.raises(TokenError):
        issuer.verify("not-a-jwt")


def test_another_clusters_key_is_rejected(issuer: TokenIssuer, tmp_path: Path) -> None:
    other = TokenIssuer(tmp_path / "sa.key")
    token, _ = other.issue("ns", "sa", "u", None, 3600)
    with pytest.raises(TokenError):
        issuer.verify(token)


def test_key_is_kept_across_restarts(tmp_path: Path) -> None:
    path = tmp_path / "pki" / "sa.key"
    token, _ = TokenIssuer(path).issue("ns", "sa", "u", None, 3600)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert TokenIssuer(path).verify(token).name == "system:serviceaccount:ns:sa"
