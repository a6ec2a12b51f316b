"""Deployments, ReplicaSets and PodDisruptionBudgets end to end: ``kubesched cluster up`` (its controllers and
simulated kubelets) and a ``kubesched scheduler`` process, driven and observed with the real kubectl."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from clusterproc import (
    ClusterProcess,
    Kubectl,
    SchedulerProcess,
    find_kubectl,
    start_cluster,
    start_scheduler,
)

KUBECTL = find_kubectl()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {value!r})")
        time.sleep(0.2)


@pytest.fixture
def env(tmp_path: Path) -> Iterator[tuple[ClusterProcess, SchedulerProcess, Kubectl]]:
    assert KUBECTL is not None
    cluster = start_cluster(tmp_path / "cluster", "--nodes", "3")
    sched: SchedulerProcess | None = None
    try:
        sched = start_scheduler(cluster.kubeconfig)
        yield cluster, sched, Kubectl(KUBECTL, cluster.kubeconfig, tmp_path / "kubectl-cache")
    finally:
        if sched is not None:
            sched.stop()
        assert cluster.stop() == 0, "\n".join(cluster.output[-50:])


def get(k: Kubectl, *args: str) -> Any:
    return json.loads(k("get", *args, "-o", "json").stdout)


def running_pods(k: Kubectl, selector: str) -> list[dict[str, Any]]:
    items = get(k, "pods", "-l", selector)["items"]
    return [
        p
        for p in items
        if not p["metadata"].get("deletionTimestamp")
        and p["status"].get("phase") == "Running"
        and p["spec"].get("nodeName")
    ]


def test_deployment_lifecycle_with_kubectl(env: tuple[ClusterProcess, SchedulerProcess, Kubectl]) -> None:
    _, _, k = env
    k("create", "deployment", "web", "--image=nginx", "--replicas=3")
    out = k("rollout", "status", "deployment/web", "--timeout=60s", timeout=90).stdout
    assert 'deployment "web" successfully rolled out' in out
    pods = running_pods(k, "app=web")
    assert len(pods) == 3  # scheduled by the scheduler process, made Running by the simulated kubelets
    (rs,) = get(k, "rs", "-l", "app=web")["items"]
    h = rs["metadata"]["labels"]["pod-template-hash"]
    assert rs["metadata"]["name"] == f"web-{h}" and all(
        p["metadata"]["name"].startswith(f"web-{h}-") for p in pods
    )
    d = get(k, "deployment", "web")
    assert d["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "1"
    conds = {c["type"]: c["reason"] for c in d["status"]["conditions"]}
    assert conds == {"Available": "MinimumReplicasAvailable", "Progressing": "NewReplicaSetAvailable"}

    # kubectl scale goes through the scale subresource.
    k("scale", "deployment/web", "--replicas=5")
    k("rollout", "status", "deployment/web", "--timeout=60s", timeout=90)
    wait_for("five running pods", lambda: len(running_pods(k, "app=web")) == 5)

    # A deleted pod is replaced.
    victim = running_pods(k, "app=web")[0]["metadata"]["name"]
    k("delete", "pod", victim, "--wait=true")
    wait_for(
        "a replacement pod",
        lambda: (
            len(names := {p["metadata"]["name"] for p in running_pods(k, "app=web")}) == 5
            and victim not in names
        ),
    )

    # kubectl set image: a rolling update to a new ReplicaSet; the old one ends at zero.
    k("set", "image", "deployment/web", "nginx=nginx:1.27")
    out = k("rollout", "status", "deployment/web", "--timeout=60s", timeout=90).stdout
    assert "successfully rolled out" in out
    rows = k("get", "rs", "-l", "app=web", "--no-headers").stdout.split("\n")
    sizes = sorted(tuple(r.split()[1:4]) for r in rows if r.strip())
    assert sizes == [("0", "0", "0"), ("5", "5", "5")], rows
    images = {p["spec"]["containers"][0]["image"] for p in running_pods(k, "app=web")}
    assert images == {"nginx:1.27"}

    # kubectl rollout undo brings back the first template as revision 3.
    k("rollout", "undo", "deployment/web")
    k("rollout", "status", "deployment/web", "--timeout=60s", timeout=90)
    wait_for(
        "the first image back",
        lambda: {p["spec"]["containers"][0]["image"] for p in running_pods(k, "app=web")} == {"nginx"},
    )
    assert get(k, "deployment", "web")["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "3"

    # A PodDisruptionBudget over the Deployment's pods: its status in kubectl get pdb.
    k("create", "pdb", "web", "--selector=app=web", "--min-available=60%")

    def pdb_row() -> list[str] | None:
        row = k("get", "pdb", "web", "--no-headers").stdout.split()
        return row if row[:4] == ["web", "60%", "N/A", "2"] else None

    wait_for("the PDB to allow 2 disruptions", pdb_row)
    status = get(k, "pdb", "web")["status"]
    assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"]) == (5, 5, 3)


def test_three_scheduler_replicas_on_the_control_plane_nodes(
    env: tuple[ClusterProcess, SchedulerProcess, Kubectl],
) -> None:
    """A Deployment of three scheduler pods pinned to control-plane nodes runs three; a deleted one comes back."""
    _, _, k = env
    for node in ("node-0", "node-1", "node-2"):
        k("label", "node", node, "node-role.kubernetes.io/control-plane=")
    manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kubesched-scheduler", "namespace": "kube-system"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"component": "kubesched-scheduler"}},
            "template": {
                "metadata": {"labels": {"component": "kubesched-scheduler"}},
                "spec": {
                    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                    "containers": [
                        {
                            "name": "scheduler",
                            "image": "kubesched:latest",
                            "command": ["kubesched", "scheduler", "--leader-elect=true"],
                        }
                    ],
                },
            },
        },
    }
    k("apply", "-f", "-", input=json.dumps(manifest))
    k("-n", "kube-system", "rollout", "status", "deployment/kubesched-scheduler", "--timeout=60s", timeout=90)

    def pods() -> list[dict[str, Any]]:
        items = get(k, "-n", "kube-system", "pods", "-l", "component=kubesched-scheduler")["items"]
        return [p for p in items if not p["metadata"].get("deletionTimestamp") and p["spec"].get("nodeName")]

    assert len(pods()) == 3
    victim = pods()[0]["metadata"]["name"]
    k("-n", "kube-system", "delete", "pod", victim, "--wait=true")
    wait_for(
        "a replacement scheduler pod",
        lambda: len(names := {p["metadata"]["name"] for p in pods()}) == 3 and victim not in names,
    )
