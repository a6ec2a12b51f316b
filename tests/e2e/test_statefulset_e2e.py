"""Issue 15, volumes, end to end: the local cluster's StatefulSet controller, PV controller and simulated
provisioner with kubesched scheduling, through the real HTTP API with the real kubectl.

A StatefulSet whose ``volumeClaimTemplates`` use the shipped ``WaitForFirstConsumer`` class ``standard`` gets
each claim provisioned in the zone of the node its pod landed on (the scheduler's ``selected-node``), and its
pods Running; a deleted pod comes back to a node of its volume's zone. With the ``local`` class the volume is
on one node, and the recreated pod goes back to exactly that node.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
from clusterproc import ClusterProcess, Kubectl, find_kubectl, start_cluster, start_scheduler

NS = "default"
NODES = 6  # zones local-a, local-b, local-c: two nodes each
ZONE = "topology.kubernetes.io/zone"
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T], timeout: float = 90.0, interval: float = 0.3) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(interval)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ClusterProcess, Kubectl]]:
    binary = find_kubectl()
    if binary is None:
        pytest.skip("no kubectl binary on this machine")
    c = start_cluster(
        tmp_path_factory.mktemp("sts-cluster"), "--nodes", str(NODES), "--bookmark-interval", "2"
    )
    try:
        yield c, Kubectl(binary, c.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
    finally:
        rc = c.stop()
        assert rc == 0, "\n".join(c.output[-50:])


def get(kubectl: Kubectl, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def statefulset(name: str, replicas: int, storage_class: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "db",
                            "image": "db:1",
                            "resources": {"requests": {"cpu": "100m"}},
                            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/db"}],
                        }
                    ]
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "storageClassName": storage_class,
                        "resources": {"requests": {"storage": "1Gi"}},
                    },
                }
            ],
        },
    }


def running_pods(kubectl: Kubectl, app: str, n: int) -> dict[str, dict[str, Any]] | None:
    pods = {
        p["metadata"]["name"]: p
        for p in get(kubectl, "pods", "-n", NS, "-l", f"app={app}")["items"]
        if not p["metadata"].get("deletionTimestamp")
    }
    running = [p for p in pods.values() if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) == n and len(running) == n else None


def volume_of(kubectl: Kubectl, claim: str) -> tuple[dict[str, Any], dict[str, Any]]:
    pvc = get(kubectl, "pvc", claim, "-n", NS)
    return pvc, get(kubectl, "pv", pvc["spec"]["volumeName"])


def affinity_term(pv: dict[str, Any]) -> dict[str, Any]:
    terms = pv["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert len(terms) == 1 and len(terms[0]["matchExpressions"]) == 1
    term: dict[str, Any] = terms[0]["matchExpressions"][0]
    return term


def test_statefulset_volumes_follow_their_pods(cluster: tuple[ClusterProcess, Kubectl]) -> None:
    c, kubectl = cluster
    classes = {sc["metadata"]["name"]: sc for sc in get(kubectl, "storageclasses")["items"]}
    assert classes["standard"]["volumeBindingMode"] == "WaitForFirstConsumer"
    table = kubectl("get", "storageclass").stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "PROVISIONER",
        "RECLAIMPOLICY",
        "VOLUMEBINDINGMODE",
        "ALLOWVOLUMEEXPANSION",
        "AGE",
    ]
    assert table[2].split()[:5] == [
        "standard",
        "(default)",
        "simulated.csi.kubesched.io",
        "Delete",
        "WaitForFirstConsumer",
    ]
    assert len(get(kubectl, "csinodes")["items"]) == NODES
    nodes = {n["metadata"]["name"]: n["metadata"]["labels"] for n in get(kubectl, "nodes")["items"]}
    sched = start_scheduler(c.kubeconfig, "--leader-elect=false")
    try:
        kubectl("create", "-f", "-", input=json.dumps(statefulset("zonal", 3, "standard")))
        pods = wait_for("3 zonal pods Running", lambda: running_pods(kubectl, "zonal", 3))
        assert sorted(pods) == ["zonal-0", "zonal-1", "zonal-2"]
        for name, pod in pods.items():
            pvc, pv = volume_of(kubectl, f"data-{name}")
            node = pod["spec"]["nodeName"]
            # The scheduler chose a node (selected-node), the provisioner put the volume in that node's zone, and
            # the pod runs in that zone.
            selected = pvc["metadata"]["annotations"]["volume.kubernetes.io/selected-node"]
            assert nodes[selected][ZONE] == nodes[node][ZONE]
            assert pvc["status"]["phase"] == "Bound" and pv["status"]["phase"] == "Bound"
            assert affinity_term(pv) == {"key": ZONE, "operator": "In", "values": [nodes[node][ZONE]]}
            assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]

        victim = pods["zonal-1"]
        _, pv = volume_of(kubectl, "data-zonal-1")
        zone = affinity_term(pv)["values"][0]
        kubectl("delete", "pod", "zonal-1", "-n", NS, "--wait=false")
        back = wait_for(
            "zonal-1 recreated and Running",
            lambda: (
                lambda ps: (
                    ps if ps and ps["zonal-1"]["metadata"]["uid"] != victim["metadata"]["uid"] else None
                )
            )(running_pods(kubectl, "zonal", 3)),
        )
        assert nodes[back["zonal-1"]["spec"]["nodeName"]][ZONE] == zone
        assert volume_of(kubectl, "data-zonal-1")[1]["metadata"]["name"] == pv["metadata"]["name"]

        # The local class: the volume is on one node, and the pod comes back to exactly that node.
        kubectl("create", "-f", "-", input=json.dumps(statefulset("pinned", 2, "local")))
        pods = wait_for("2 pinned pods Running", lambda: running_pods(kubectl, "pinned", 2))
        first = pods["pinned-0"]
        _, pv = volume_of(kubectl, "data-pinned-0")
        host = nodes[first["spec"]["nodeName"]]["kubernetes.io/hostname"]
        assert affinity_term(pv) == {"key": "kubernetes.io/hostname", "operator": "In", "values": [host]}
        kubectl("delete", "pod", "pinned-0", "-n", NS, "--wait=false")
        back = wait_for(
            "pinned-0 recreated and Running",
            lambda: (
                lambda ps: (
                    ps if ps and ps["pinned-0"]["metadata"]["uid"] != first["metadata"]["uid"] else None
                )
            )(running_pods(kubectl, "pinned", 2)),
        )
        assert back["pinned-0"]["spec"]["nodeName"] == first["spec"]["nodeName"]
        status = get(kubectl, "statefulset", "zonal", "-n", NS)["status"]
        assert (status["replicas"], status["readyReplicas"]) == (3, 3)
    except BaseException:
        print(sched.log()[-6000:])
        print("\n".join(c.output[-60:]))
        raise
    finally:
        sched.stop()


def test_static_local_volume_binds_where_it_lives(cluster: tuple[ClusterProcess, Kubectl]) -> None:
    """A WaitForFirstConsumer class without a provisioner: the scheduler picks the node of the one PV that fits,
    writes its claimRef at PreBind, the PV controller completes the binding, the pod runs there."""
    c, kubectl = cluster
    objects = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "manual"},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "disk-on-node-4"},
            "spec": {
                "capacity": {"storage": "5Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "manual",
                "local": {"path": "/mnt/disk"},
                "nodeAffinity": {
                    "required": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-4"]}
                                ]
                            }
                        ]
                    }
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "scratch", "namespace": NS},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": "manual",
                "resources": {"requests": {"storage": "2Gi"}},
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "uses-scratch", "namespace": NS, "labels": {"app": "scratch"}},
            "spec": {
                "containers": [{"name": "c", "image": "busybox"}],
                "volumes": [{"name": "s", "persistentVolumeClaim": {"claimName": "scratch"}}],
            },
        },
    ]
    sched = start_scheduler(c.kubeconfig, "--leader-elect=false")
    try:
        kubectl("create", "-f", "-", input="\n".join(json.dumps(o) for o in objects))
        pods = wait_for("the pod Running", lambda: running_pods(kubectl, "scratch", 1))
        assert pods["uses-scratch"]["spec"]["nodeName"] == "node-4"
        pvc, pv = volume_of(kubectl, "scratch")
        assert pv["metadata"]["name"] == "disk-on-node-4" and pv["status"]["phase"] == "Bound"
        assert pv["spec"]["claimRef"]["uid"] == pvc["metadata"]["uid"]
        assert pvc["status"]["phase"] == "Bound"
        assert pvc["metadata"]["annotations"]["pv.kubernetes.io/bind-completed"] == "yes"
        # A second claim of the class finds nothing left: the pod stays Pending with upstream's message.
        second = [
            {**objects[2], "metadata": {"name": "scratch-2", "namespace": NS}},
            {
                **objects[3],
                "metadata": {"name": "wants-scratch", "namespace": NS, "labels": {"app": "scratch2"}},
                "spec": {
                    "containers": [{"name": "c", "image": "busybox"}],
                    "volumes": [{"name": "s", "persistentVolumeClaim": {"claimName": "scratch-2"}}],
                },
            },
        ]
        kubectl("create", "-f", "-", input="\n".join(json.dumps(o) for o in second))

        def unschedulable() -> str | None:
            pod = get(kubectl, "pod", "wants-scratch", "-n", NS)
            cond = next(
                (x for x in pod["status"].get("conditions") or () if x["type"] == "PodScheduled"), None
            )
            return cond["message"] if cond and cond.get("reason") == "Unschedulable" else None

        message = wait_for("wants-scratch Unschedulable", unschedulable)
        assert message == (
            f"0/{NODES} nodes are available: {NODES} node(s) didn't find available persistent volumes to bind. "
            f"no new claims to deallocate, preemption: 0/{NODES} nodes are available: {NODES} Preemption is not "
            "helpful for scheduling."
        )
    except BaseException:
        print(sched.log()[-6000:])
        raise
    finally:
        sched.stop()
