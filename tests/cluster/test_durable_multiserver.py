"""Two API server processes over one etcd (``--storage etcd --etcd-servers URL``).

The first server starts its own etcd; the second one (no nodes, no controllers: one set of kubelets and
controllers per cluster) is pointed at it. Objects written through either are read and watched through the
other, with the same resourceVersions, and a precondition taken on one server is checked against writes made
through the other.
"""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from clusterproc import ClusterProcess, start_cluster, wait_for
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

pytestmark = pytest.mark.skipif(
    shutil.which("etcd") is None,
    reason="etcd is not installed (Debian: apt-get install etcd-server; make test installs it)",
)


def core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def test_two_servers_over_one_etcd(tmp_path: Path) -> None:
    servers: list[ClusterProcess] = []
    try:
        first = start_cluster(tmp_path / "a", "--storage", "etcd", "--nodes", "2", timeout=120)
        servers.append(first)
        ports = json.loads((tmp_path / "a" / "etcd" / "ports.json").read_text())
        etcd_url = f"http://127.0.0.1:{ports['client']}"
        tokens = tmp_path / "tokens.csv"
        tokens.write_text("alice-token,alice,uid-alice\n")
        second = start_cluster(
            tmp_path / "b",
            *("--storage", "etcd", "--etcd-servers", etcd_url),
            *("--nodes", "0", "--no-controllers", "--token-auth-file", str(tokens)),
            timeout=120,
        )
        servers.append(second)
        a, b = core(first.kubeconfig), core(second.kubeconfig)

        # What the first server wrote before the second started: read at start.
        assert sorted(n.metadata.name for n in b.list_node().items) == ["node-0", "node-1"]

        # The second server watches; the first one writes: the event arrives with the first one's version.
        seen: list[tuple[str, str, str]] = []
        rv = b.list_namespaced_config_map("default").metadata.resource_version

        def follow() -> None:
            w = watch.Watch()
            for ev in w.stream(
                b.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=60
            ):
                obj: Any = ev["object"]
                seen.append((ev["type"], obj.metadata.name, obj.metadata.resource_version))
                if len(seen) >= 2:
                    w.stop()

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        made = a.create_namespaced_config_map("default", {"metadata": {"name": "from-a"}, "data": {"x": "1"}})
        made2 = a.patch_namespaced_config_map("from-a", "default", {"data": {"x": "2"}})
        t.join(60)
        assert seen == [
            ("ADDED", "from-a", made.metadata.resource_version),
            ("MODIFIED", "from-a", made2.metadata.resource_version),
        ]

        # Written through the second, read through the first.
        b.create_namespaced_config_map("default", {"metadata": {"name": "from-b"}})
        got = wait_for(lambda: _get(a, "from-b"), 30, "the first server to see the second one's configmap")
        assert got.metadata.name == "from-b"

        # Optimistic concurrency holds across servers: an update with a version read on the second server
        # fails once the first server has changed the object.
        stale = b.read_namespaced_config_map("from-a", "default")
        a.patch_namespaced_config_map("from-a", "default", {"data": {"x": "3"}})
        stale.data = {"x": "stale"}
        with pytest.raises(ApiException) as err:
            b.replace_namespaced_config_map("from-a", "default", stale)
        assert err.value.status == 409
        # And a name taken through one server is taken for the other.
        with pytest.raises(ApiException) as err:
            b.create_namespaced_config_map("default", {"metadata": {"name": "from-a"}})
        assert err.value.status == 409

        # What the second server's in-process observers learn from the first one's writes: a binding made
        # through the first authorizes on the second, a CRD made through the first is served by the second.
        alice = alice_client(second, tmp_path / "b")
        with pytest.raises(ApiException) as err:
            alice.list_namespaced_config_map("default")
        assert err.value.status == 403
        client.RbacAuthorizationV1Api(
            config.new_client_from_config(config_file=str(first.kubeconfig))
        ).create_cluster_role_binding(
            {
                "metadata": {"name": "alice-view"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}],
            }
        )
        listed = wait_for(
            lambda: _try(lambda: alice.list_namespaced_config_map("default")), 30, "alice allowed"
        )
        assert {"from-a", "from-b"} <= {cm.metadata.name for cm in listed.items}

        first_api = config.new_client_from_config(config_file=str(first.kubeconfig))
        client.ApiextensionsV1Api(first_api).create_custom_resource_definition(WIDGETS_CRD)
        client.CustomObjectsApi(first_api)
        custom_b = client.CustomObjectsApi(config.new_client_from_config(config_file=str(second.kubeconfig)))
        wait_for(
            lambda: _try(
                lambda: custom_b.list_namespaced_custom_object("example.com", "v1", "default", "widgets")
            ),
            30,
            "the second server to serve the first one's CRD",
        )
        custom_a = client.CustomObjectsApi(first_api)
        wait_for(
            lambda: _try(
                lambda: custom_a.create_namespaced_custom_object(
                    "example.com",
                    "v1",
                    "default",
                    "widgets",
                    {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}},
                )
            ),
            30,
            "a widget created through the first server",
        )
        got_w = wait_for(
            lambda: _try(
                lambda: custom_b.get_namespaced_custom_object("example.com", "v1", "default", "widgets", "w1")
            ),
            30,
            "the widget through the second server",
        )
        assert got_w["metadata"]["name"] == "w1"
    finally:
        for s in reversed(servers):
            s.stop()


def _get(api: client.CoreV1Api, name: str) -> Any:
    try:
        return api.read_namespaced_config_map(name, "default")
    except ApiException as e:
        if e.status == 404:
            return None
        raise


WIDGETS_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {
        "group": "example.com",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [
            {
                "name": "v1",
                "served": True,
                "storage": True,
                "schema": {
                    "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                },
            }
        ],
    },
}


def _try(fn: Any) -> Any:
    """``fn()``, or None while it answers 403/404 (not yet propagated)."""
    try:
        return fn()
    except ApiException as e:
        if e.status in (403, 404):
            return None
        raise


def alice_client(server: ClusterProcess, data_dir: Path) -> client.CoreV1Api:
    conf = client.Configuration()
    conf.host = server.url
    conf.ssl_ca_cert = str(data_dir / "pki" / "ca.crt")
    conf.api_key = {"authorization": "Bearer alice-token"}
    return client.CoreV1Api(client.ApiClient(conf))
