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
        second = start_cluster(
            tmp_path / "b",
            *("--storage", "etcd", "--etcd-servers", etcd_url),
            *("--nodes", "0", "--no-controllers"),
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
