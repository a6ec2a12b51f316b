"""kubesched.serving against a real local cluster (HTTPS, RBAC): who may read a guarded endpoint.

Callers: anonymous (health only; 403 with kube-apiserver's words elsewhere), a bad token (401), a service account
token reviewed with TokenReview (403 until bound to system:monitoring, then 200), the admin's client certificate
(verified against --client-ca-file or the extension-apiserver-authentication ConfigMap). Answers are cached.
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from kubesched import serving
from kubesched.client.config import ClientConfig, load_config
from kubesched.client.rest import ApiClient
from kubesched.cluster.auth.bootstrap import ensure_authentication_configmap
from kubesched.cluster.local import ClusterOptions, LocalCluster


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    c = LocalCluster(ClusterOptions(port=0, nodes=0, data_dir=tmp_path, heartbeat_interval=3600))
    await c.start()
    yield c
    await c.stop()


def admin(cluster: LocalCluster) -> ClientConfig:
    assert cluster.kubeconfig_path is not None
    return load_config(str(cluster.kubeconfig_path))


def ca_file(cluster: LocalCluster) -> str:
    return str(cluster.options.data_dir / "pki" / "ca.crt")


def args(**overrides: object) -> argparse.Namespace:
    return serving.options.defaults(**overrides)


async def service_account_token(client: ApiClient, name: str, namespace: str = "default") -> str:
    await client.create("v1", "serviceaccounts", {"metadata": {"name": name}}, namespace=namespace)
    answer = await client.create_subresource(
        "v1", "serviceaccounts", name, "token", {"spec": {"expirationSeconds": 3600}}, namespace=namespace
    )
    return str(answer["status"]["token"])


def app() -> web.Application:
    async def ok(request: web.Request) -> web.Response:
        return web.Response(text=f"hello {request[serving.USER_KEY].name}")

    a = web.Application()
    for path in ("/healthz", "/readyz", "/metrics", "/debug/decisions"):
        a.router.add_get(path, ok)
    return a


@pytest.fixture
async def guarded(
    cluster: LocalCluster,
) -> AsyncIterator[tuple[serving.SecureServing, serving.DelegatedAuth]]:
    auth = await serving.delegated_auth(args(client_ca_file=ca_file(cluster)), admin(cluster))
    server = serving.SecureServing(app(), bind_address="127.0.0.1", port=0, auth=auth)
    await server.start()
    yield server, auth
    await server.stop()
    await auth.close()


def token_config(token: str) -> ClientConfig:
    return ClientConfig(server="https://127.0.0.1:1", token=token)


async def test_anonymous_reaches_health_only(
    guarded: tuple[serving.SecureServing, serving.DelegatedAuth],
) -> None:
    server, _ = guarded
    status, body = await serving.guarded_get(server.url + "/healthz", None)
    assert (status, body) == (200, b"hello system:anonymous")
    status, body = await serving.guarded_get(server.url + "/metrics", None)
    assert status == 403
    assert orjson.loads(body) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'forbidden: User "system:anonymous" cannot get path "/metrics"',
        "reason": "Forbidden",
        "details": {},
        "code": 403,
    }


async def test_bad_token_is_401_even_on_health(
    guarded: tuple[serving.SecureServing, serving.DelegatedAuth],
) -> None:
    server, auth = guarded
    for path in ("/metrics", "/healthz"):
        status, body = await serving.guarded_get(server.url + path, token_config("not-a-token"))
        assert status == 401
        assert orjson.loads(body)["reason"] == "Unauthorized"
    # The "no" is cached: one TokenReview for both requests.
    assert auth.authenticator.reviews == 1


async def test_service_account_needs_rbac_and_answers_are_cached(
    cluster: LocalCluster, guarded: tuple[serving.SecureServing, serving.DelegatedAuth]
) -> None:
    server, auth = guarded
    async with ApiClient(admin(cluster)) as client:
        token = await service_account_token(client, "prometheus")
        who = token_config(token)
        status, body = await serving.guarded_get(server.url + "/metrics", who)
        assert status == 403
        assert orjson.loads(body)["message"] == (
            'forbidden: User "system:serviceaccount:default:prometheus" cannot get path "/metrics"'
        )
        binding = {
            "metadata": {"name": "prometheus-monitoring"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:monitoring",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": "default"}],
        }
        await client.create("rbac.authorization.k8s.io/v1", "clusterrolebindings", binding)
        # The denial is cached for --authorization-webhook-cache-unauthorized-ttl (10 s): still 403.
        status, _ = await serving.guarded_get(server.url + "/metrics", who)
        assert status == 403
        auth.authorizer._cache.clear()
        status, body = await serving.guarded_get(server.url + "/metrics", who)
        assert (status, body) == (200, b"hello system:serviceaccount:default:prometheus")
        # system:monitoring grants /metrics, not /debug/decisions.
        status, _ = await serving.guarded_get(server.url + "/debug/decisions", who)
        assert status == 403
        reviews = auth.authorizer.reviews
        for _ in range(5):
            assert (await serving.guarded_get(server.url + "/metrics", who))[0] == 200
        assert auth.authorizer.reviews == reviews  # allowed answers cached
        assert auth.authenticator.reviews == 1  # one TokenReview for the whole test


async def test_admin_client_certificate(
    cluster: LocalCluster, guarded: tuple[serving.SecureServing, serving.DelegatedAuth]
) -> None:
    server, _ = guarded
    status, body = await serving.guarded_get(server.url + "/debug/decisions", admin(cluster))
    assert (status, body) == (200, b"hello kubesched-admin")


async def test_client_ca_from_the_cluster_configmap(cluster: LocalCluster) -> None:
    config = admin(cluster)
    ca = Path(ca_file(cluster)).read_bytes()
    # cluster up publishes it, as kube-apiserver does.
    assert not ensure_authentication_configmap(cluster.api, ca)
    async with ApiClient(config) as client:
        await client.delete("v1", "configmaps", "extension-apiserver-authentication", namespace="kube-system")
    # Without the ConfigMap, certificates do not authenticate (the admin would be anonymous).
    auth = await serving.delegated_auth(args(), config)
    assert auth.client_ca is None
    await auth.close()
    assert ensure_authentication_configmap(cluster.api, ca)
    auth = await serving.delegated_auth(args(), config)
    assert auth.client_ca == ca
    server = serving.SecureServing(app(), bind_address="127.0.0.1", port=0, auth=auth)
    await server.start()
    try:
        status, body = await serving.guarded_get(server.url + "/metrics", config)
        assert (status, body) == (200, b"hello kubesched-admin")
    finally:
        await server.stop()
        await auth.close()


async def test_lookup_failure_is_fatal_only_when_not_tolerated(cluster: LocalCluster) -> None:
    async with ApiClient(admin(cluster)) as client:
        token = await service_account_token(client, "nobody")
    nobody = ClientConfig(server=cluster.url, ca_file=ca_file(cluster), token=token)
    auth = await serving.delegated_auth(args(), nobody)  # 403 on the ConfigMap: tolerated by default
    assert auth.client_ca is None
    await auth.close()
    with pytest.raises(serving.AuthSetupError, match="extension-apiserver-authentication"):
        await serving.delegated_auth(args(authentication_tolerate_lookup_failure=False), nobody)


async def test_without_kubeconfig_only_always_allowed_paths() -> None:
    auth = await serving.delegated_auth(args(), None)
    server = serving.SecureServing(app(), bind_address="127.0.0.1", port=0, auth=auth)
    await server.start()
    try:
        assert (await serving.guarded_get(server.url + "/readyz", None))[0] == 200
        assert (await serving.guarded_get(server.url + "/metrics", None))[0] == 403
        assert (await serving.guarded_get(server.url + "/metrics", token_config("x")))[0] == 401
    finally:
        await server.stop()


def test_insecure_serving_is_loopback_only() -> None:
    for address in ("0.0.0.0", "::", "", "10.0.0.1", "example.com"):
        with pytest.raises(ValueError, match="loopback"):
            serving.SecureServing(app(), bind_address=address, port=0, insecure=True)
    for address in ("127.0.0.1", "::1", "localhost", "127.0.1.1"):
        serving.SecureServing(app(), bind_address=address, port=0, insecure=True)


async def test_insecure_serving_has_no_authentication() -> None:
    server = serving.SecureServing(app(), bind_address="127.0.0.1", port=0, insecure=True)
    await server.start()
    try:
        assert server.url.startswith("http://")
        # No guard: the handler sees no user.
        status, _ = await serving.guarded_get(server.url + "/healthz", None)
        assert status == 500
    finally:
        await server.stop()


def test_credentials_are_not_sent_to_an_unverified_remote_host() -> None:
    with pytest.raises(serving.UnverifiedServerError):
        serving.fetch.client_ssl_context("https://10.1.2.3:10259/metrics", token_config("t"))


def test_path_matcher_and_flags() -> None:
    match = serving.authz.PathMatcher(["/healthz", "/debug/*"])
    assert match("/healthz") and match("/debug/x") and not match("/healthz/ping") and not match("/metrics")
    parser = argparse.ArgumentParser()
    serving.add_flags(parser)
    ns = parser.parse_args(["--authorization-always-allow-paths", "/a,/b/*"])
    assert ns.authorization_always_allow_paths == ["/a", "/b/*"]
    assert parser.parse_args([]).authorization_always_allow_paths == ["/healthz", "/readyz", "/livez"]
    for bad in (
        ["--authorization-always-allow-paths", "x"],
        ["--authentication-token-webhook-cache-ttl", "-1s"],
    ):
        with pytest.raises(SystemExit):
            parser.parse_args(bad)


async def test_dashboard_watcher_presents_the_kubeconfig_credentials(
    cluster: LocalCluster, guarded: tuple[serving.SecureServing, serving.DelegatedAuth]
) -> None:
    from kubesched.dashboard.scheduler_view import SchedulerWatcher

    server, _ = guarded
    anonymous = SchedulerWatcher(server.url)
    await anonymous.poll_once()
    await anonymous.stop()
    assert 'User "system:anonymous" cannot get path "/metrics"' in anonymous.metrics_error
    assert "403" in anonymous.queue_error
    watcher = SchedulerWatcher(server.url, credentials=admin(cluster))
    await watcher.poll_once()
    await watcher.stop()
    # The test app answers text, not Prometheus metrics or JSON: what matters is that it let the admin in.
    assert "403" not in watcher.metrics_error and "401" not in watcher.metrics_error
    assert "403" not in watcher.queue_error


async def test_bootstrap_rbac_lets_the_scheduler_delegate_and_monitoring_read_metrics(
    cluster: LocalCluster,
) -> None:
    """kube-scheduler's identity may review tokens and access and read the client CA; system:monitoring may
    read /metrics (what a Prometheus scraping a secure port is bound to); neither may read /debug."""

    async def can(user: str, groups: list[str], **attrs: Any) -> bool:
        body = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": user, "groups": groups, **attrs},
        }
        answer = await client.create("authorization.k8s.io/v1", "subjectaccessreviews", body)
        return bool(answer["status"].get("allowed"))

    scheduler = ("system:kube-scheduler", ["system:authenticated"])
    async with ApiClient(admin(cluster)) as client:
        for group, resource in (
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ):
            assert await can(
                *scheduler, resourceAttributes={"group": group, "resource": resource, "verb": "create"}
            )
        configmap = {"namespace": "kube-system", "resource": "configmaps", "verb": "get"}
        assert await can(
            *scheduler, resourceAttributes={**configmap, "name": "extension-apiserver-authentication"}
        )
        assert not await can(*scheduler, resourceAttributes={**configmap, "name": "kube-proxy"})
        binding = {
            "metadata": {"name": "monitoring-group"},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:monitoring",
            },
            "subjects": [{"kind": "Group", "name": "monitoring", "apiGroup": "rbac.authorization.k8s.io"}],
        }
        await client.create("rbac.authorization.k8s.io/v1", "clusterrolebindings", binding)
        monitor = ("prometheus", ["monitoring", "system:authenticated"])
        assert await can(*monitor, nonResourceAttributes={"path": "/metrics", "verb": "get"})
        assert not await can(*monitor, nonResourceAttributes={"path": "/debug/decisions", "verb": "get"})
        assert not await can(*monitor, nonResourceAttributes={"path": "/configz", "verb": "get"})
