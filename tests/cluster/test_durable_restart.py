"""Restarting ``kubesched cluster up`` on the same data dir, through the real HTTP API (issue 13).

- sqlite and etcd: SIGTERM or SIGKILL while a client creates objects as fast as it can, then the same command:
  every acknowledged object is back with its resourceVersion, the revision never goes backwards, and the
  kubeconfig written before still works.
- memory: nothing is kept, but a client resuming a watch from the old server's resourceVersion gets 410 and
  relists instead of silently missing everything.
- A running scheduler (its informers) carries on across an API server SIGKILLed mid-workload: no pod lost, none
  bound twice, and its cache is right afterwards (pods deleted after the restart free their room).
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterproc import ClusterProcess, free_port, start_cluster, start_scheduler, wait_for
from kubernetes import client, config
from kubernetes.client.rest import ApiException

NEEDS_ETCD = pytest.mark.skipif(
    shutil.which("etcd") is None,
    reason="etcd is not installed (Debian: apt-get install etcd-server; make test installs it)",
)
DURABLE = [pytest.param("sqlite"), pytest.param("etcd", marks=NEEDS_ETCD)]


def up(data_dir: Path, storage: str, port: int, *extra: str) -> ClusterProcess:
    return start_cluster(
        data_dir, "--port", str(port), "--storage", storage, "--no-controllers", *extra, timeout=120
    )


def core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def stop(c: ClusterProcess, sig: signal.Signals) -> None:
    c.proc.send_signal(sig)
    c.proc.wait(60)


@pytest.fixture
def clusters() -> Iterator[list[ClusterProcess]]:
    started: list[ClusterProcess] = []
    yield started
    for c in started:
        c.stop()


def configmap(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "data": {"k": name}}


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
@pytest.mark.parametrize("storage", DURABLE)
def test_restart_keeps_every_acknowledged_object(
    tmp_path: Path, storage: str, sig: signal.Signals, clusters: list[ClusterProcess]
) -> None:
    port = free_port()
    first = up(tmp_path, storage, port, "--nodes", "2")
    clusters.append(first)
    kubeconfig_before = first.kubeconfig.read_text()
    saved = tmp_path / "kubeconfig-written-before"
    saved.write_text(kubeconfig_before)
    api = core(saved)
    nodes_before = {n.metadata.name: n.metadata.resource_version for n in api.list_node().items}

    acked: dict[str, str] = {}  # name -> resourceVersion, for every create the server answered
    stop_writing = threading.Event()

    def writer() -> None:
        w = core(saved)
        i = 0
        while not stop_writing.is_set():
            try:
                got = w.create_namespaced_config_map("default", configmap(f"cm-{i}"))
            except Exception:  # the server went away mid-request: not acknowledged
                return
            acked[got.metadata.name] = got.metadata.resource_version
            i += 1

    t = threading.Thread(target=writer, daemon=True)
    t.start()
    wait_for(lambda: len(acked) >= 150, 120, "150 acknowledged creates")
    stop(first, sig)  # while the writer is still going
    stop_writing.set()
    t.join(30)
    newest_before = max(int(rv) for rv in [*acked.values(), *nodes_before.values()])

    second = up(tmp_path, storage, port, "--nodes", "2")
    clusters.append(second)
    assert second.kubeconfig.read_text() == kubeconfig_before  # same address, same credentials
    assert any(f"storage {storage}, revision" in line for line in second.output)
    api = core(saved)  # the kubeconfig written before the restart
    listed = api.list_namespaced_config_map("default")
    kept = {cm.metadata.name: cm.metadata.resource_version for cm in listed.items}
    missing = sorted(set(acked) - set(kept))
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged objects lost: {missing[:5]}"
    assert all(kept[name] == rv for name, rv in acked.items())
    assert int(listed.metadata.resource_version) >= newest_before
    # Nodes were kept too (and re-registered by the same names, not duplicated).
    assert sorted(n.metadata.name for n in api.list_node().items) == sorted(nodes_before)
    # The next write continues above everything issued before.
    after = api.create_namespaced_config_map("default", configmap("after-restart"))
    assert int(after.metadata.resource_version) > newest_before


def test_memory_restart_makes_a_resumed_watch_relist(tmp_path: Path, clusters: list[ClusterProcess]) -> None:
    port = free_port()
    first = up(tmp_path, "memory", port, "--nodes", "1")
    clusters.append(first)
    api = core(first.kubeconfig)
    for i in range(30):
        api.create_namespaced_config_map("default", configmap(f"cm-{i}"))
    old_rv = api.list_namespaced_config_map("default").metadata.resource_version
    stop(first, signal.SIGTERM)

    second = up(tmp_path, "memory", port, "--nodes", "1")
    clusters.append(second)
    api = core(second.kubeconfig)
    for i in range(40):  # the new server's revision passes the old one's by far
        api.create_namespaced_config_map("default", configmap(f"new-{i}"))
    assert int(api.list_namespaced_config_map("default").metadata.resource_version) > int(old_rv)
    # A client that resumes from the old server's resourceVersion is told its view is gone.
    for attempt in ("watch", "list"):
        try:
            if attempt == "watch":
                resp = api.list_namespaced_config_map(
                    "default", watch=True, resource_version=old_rv, timeout_seconds=2, _preload_content=False
                )
                first_line = resp.readline() if hasattr(resp, "readline") else resp.data.splitlines()[0]
                event = json.loads(first_line)
                assert event["type"] == "ERROR" and event["object"]["code"] == 410, event
            else:
                api.list_namespaced_config_map(
                    "default", resource_version=old_rv, resource_version_match="Exact"
                )
                raise AssertionError("an exact list at the old server's resourceVersion answered 200")
        except ApiException as e:
            assert e.status == 410, (attempt, e.status, e.body)


def bound(api: client.CoreV1Api, ns: str) -> dict[str, str]:
    return {p.metadata.name: p.spec.node_name for p in api.list_namespaced_pod(ns).items if p.spec.node_name}


def make_pods(api: client.CoreV1Api, ns: str, prefix: str, n: int) -> None:
    for i in range(n):
        api.create_namespaced_pod(
            ns,
            {
                "metadata": {"name": f"{prefix}-{i}"},
                "spec": {
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "100m"}}}
                    ],
                },
            },
        )


def scheduled_events(api: client.CoreV1Api, ns: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ev in api.list_namespaced_event(ns).items:
        if ev.reason == "Scheduled":
            counts[ev.involved_object.name] = counts.get(ev.involved_object.name, 0) + 1
    return counts


@pytest.mark.parametrize("storage", [*DURABLE, pytest.param("memory")])
def test_scheduler_carries_on_across_an_api_server_restart(
    tmp_path: Path, storage: str, clusters: list[ClusterProcess]
) -> None:
    """4 nodes x 3 pods: the cluster is full after 12 pods, so the next pods bind only if the scheduler's cache
    saw the old ones go."""
    port = free_port()
    flags = ("--nodes", "4", "--node-pods", "3")
    first = up(tmp_path, storage, port, *flags)
    clusters.append(first)
    saved = tmp_path / "kubeconfig"
    saved.write_text(first.kubeconfig.read_text())
    api = core(saved)
    sched = start_scheduler(saved, "--leader-elect=false")
    try:
        ns = "default"
        make_pods(api, ns, "old", 12)
        # SIGKILL the API server mid-workload: some bindings are done, others in flight.
        wait_for(lambda: len(bound(api, ns)) >= 4, 120, "some pods bound")
        stop(first, signal.SIGKILL)
        second = up(tmp_path, storage, port, *flags)
        clusters.append(second)
        api = core(saved)
        if storage != "memory":
            # No acknowledged pod lost; every one ends up bound, exactly once.
            names = {p.metadata.name for p in api.list_namespaced_pod(ns).items}
            assert names == {f"old-{i}" for i in range(12)}
            placed = wait_for(lambda: len(b := bound(api, ns)) == 12 and b, 120, "all 12 old pods bound")
            per_node: dict[str, int] = {}
            for node in placed.values():
                per_node[node] = per_node.get(node, 0) + 1
            assert max(per_node.values()) <= 3, per_node
            assert all(n <= 1 for n in scheduled_events(api, ns).values()), scheduled_events(api, ns)
            for i in range(12):
                api.delete_namespaced_pod(f"old-{i}", ns, grace_period_seconds=0)
            wait_for(lambda: not api.list_namespaced_pod(ns).items, 60, "old pods gone")
        # The cluster is empty again as far as the API says: 12 new pods must all fit, which they do only if
        # the scheduler's cache has no ghost of the old ones (the memory server forgot them at the restart).
        make_pods(api, ns, "new", 12)
        placed = wait_for(
            lambda: len(b := bound(api, ns)) == 12 and b, 120, "all 12 new pods bound after the restart"
        )
        per_node = {}
        for node in placed.values():
            per_node[node] = per_node.get(node, 0) + 1
        assert sorted(per_node.values()) == [3, 3, 3, 3]
        # The scheduler records its events in the background: wait for them, then none may be there twice.
        counts = wait_for(
            lambda: (
                all(c.get(f"new-{i}") for i in range(12)) and c if (c := scheduled_events(api, ns)) else None
            ),
            120,
            "a Scheduled event for every new pod",
        )
        assert all(counts[f"new-{i}"] == 1 for i in range(12)), counts
        assert sched.proc.poll() is None, sched.log()
    finally:
        sched.stop()
