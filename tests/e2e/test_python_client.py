"""The local cluster through the official ``kubernetes`` Python client."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterproc import ClusterProcess, start_cluster
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException


def make_client(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))


@pytest.fixture(scope="module")
def core(cluster: ClusterProcess) -> client.CoreV1Api:
    return client.CoreV1Api(make_client(cluster.kubeconfig))


def test_list_nodes(core: client.CoreV1Api) -> None:
    nodes = core.list_node()
    assert len(nodes.items) == 3
    assert int(nodes.metadata.resource_version) > 0
    assert all(n.status.allocatable["cpu"] for n in nodes.items)


def pod_body(name: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels={"suite": "pyclient"}),
        spec=client.V1PodSpec(
            scheduler_name="nobody",  # keep any scheduler away: the test binds by hand
            containers=[client.V1Container(name="c", image="busybox:1.36")],
        ),
    )


def test_binding_sets_node_and_condition_and_conflicts(core: client.CoreV1Api) -> None:
    pod = core.create_namespaced_pod("default", pod_body("bind-me"))
    assert pod.spec.node_name is None
    body = client.V1Binding(
        metadata=client.V1ObjectMeta(name="bind-me", uid=pod.metadata.uid),
        target=client.V1ObjectReference(kind="Node", name="node-0"),
    )
    # The generated client cannot deserialize the Status response into V1Binding; read it raw.
    resp = core.create_namespaced_pod_binding("bind-me", "default", body, _preload_content=False)
    assert resp.status == 201
    bound = core.read_namespaced_pod("bind-me", "default")
    assert bound.spec.node_name == "node-0"
    cond = [c for c in bound.status.conditions if c.type == "PodScheduled"]
    assert cond and cond[0].status == "True"
    with pytest.raises(ApiException) as e:
        core.create_namespaced_pod_binding("bind-me", "default", body, _preload_content=False)
    assert e.value.status == 409
    status = json.loads(e.value.body)
    assert status["reason"] == "Conflict"
    assert status["message"] == (
        'Operation cannot be fulfilled on pods/binding "bind-me": pod bind-me is already assigned to node "node-0"'
    )


def test_stale_update_conflicts(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="sc"), data={"a": "1"})
    )
    cm.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("sc", "default", cm)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as e:
        core.replace_namespaced_config_map("sc", "default", cm)
    assert e.value.status == 409
    assert json.loads(e.value.body)["message"] == (
        'Operation cannot be fulfilled on configmaps "sc": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )


def test_watch_from_resource_version(core: client.CoreV1Api) -> None:
    start = core.list_namespaced_config_map("default").metadata.resource_version
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="wa")))
    core.patch_namespaced_config_map("wa", "default", {"data": {"k": "v"}})
    core.delete_namespaced_config_map("wa", "default")
    seen = []
    w = watch.Watch()
    for ev in w.stream(core.list_namespaced_config_map, "default", resource_version=start, timeout_seconds=5):
        if ev["object"].metadata.name == "wa":
            seen.append(ev["type"])
        if len(seen) == 3:
            w.stop()
    assert seen == ["ADDED", "MODIFIED", "DELETED"]


def test_watch_sees_live_events(core: client.CoreV1Api) -> None:
    rv = core.list_namespaced_config_map("default").metadata.resource_version
    got: list[str] = []

    def watcher() -> None:
        w = watch.Watch()
        for ev in w.stream(
            core.list_namespaced_config_map,
            "default",
            resource_version=rv,
            label_selector="live=yes",
            timeout_seconds=10,
        ):
            got.append(f"{ev['type']}:{ev['object'].metadata.name}")
            w.stop()

    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="not-me"))
    )
    core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name="me", labels={"live": "yes"}))
    )
    t.join(15)
    assert got == ["ADDED:me"]


@pytest.fixture(scope="module")
def small_history_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    c = start_cluster(tmp_path_factory.mktemp("small"), "--nodes", "1", "--watch-history", "5")
    yield c
    c.stop()


def test_expired_watch_gets_410(small_history_cluster: ClusterProcess) -> None:
    core = client.CoreV1Api(make_client(small_history_cluster.kubeconfig))
    old_rv = core.list_namespaced_config_map("default").metadata.resource_version
    for i in range(10):
        core.create_namespaced_config_map(
            "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(name=f"h{i}"))
        )
    resp = core.list_namespaced_config_map(
        "default", watch=True, resource_version=old_rv, timeout_seconds=5, _preload_content=False
    )
    first = json.loads(resp.readline() if hasattr(resp, "readline") else resp.data.splitlines()[0])
    assert first["type"] == "ERROR"
    assert first["object"]["code"] == 410
    assert first["object"]["reason"] == "Expired"
    assert first["object"]["message"].startswith(f"too old resource version: {old_rv} (")
    # The client's own watch helper surfaces it as an ApiException(410) once its single retry also fails.
    w = watch.Watch()
    with pytest.raises(ApiException) as e:
        for _ in w.stream(core.list_namespaced_config_map, "default", resource_version=old_rv):
            pass
    assert e.value.status == 410
