"""End to end on the local cluster (a real ``kubesched cluster up`` process with control-plane-0, whose kubelet
runs the kubesched image as processes), the real ``kubectl`` and ``kubesched operator`` processes.

One scenario, in the order a person would live it:

1. From an empty cluster the operator installs revision 1: installer pod, static pod ``kube-scheduler`` on
   control-plane-0 (a process), which schedules a pod. ``kubectl get clusteroperator kube-scheduler`` says
   Available=True, Progressing=False, Degraded=False; ``kubectl get kubescheduler cluster -o yaml`` shows
   ``latestAvailableRevision: 1`` and the node at revision 1.
2. ``Scheduler/cluster`` ``spec.profile: HighNodeUtilization`` starts revision 2; the operator is killed (SIGKILL)
   as soon as the installer pod exists, and a new operator process finishes the rollout (restart mid-rollout).
   The running scheduler reads revision 2's config (``MostAllocated``) and packs the next pod beside the first.
3. An invalid ``unsupportedConfigOverrides`` is refused: Degraded=True with the reason, revision 2 keeps running.
4. ``managementState: Removed`` takes the static pod off the node.
"""

from __future__ import annotations

import json
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterproc import (
    ClusterProcess,
    Kubectl,
    find_kubectl,
    free_port,
    start_cluster,
    start_operator,
    wait_for,
)

from kubesched.serving.fetch import kubeconfig_get_sync

KUBECTL = find_kubectl()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]

OPERAND = "openshift-kube-scheduler"
OPERATOR_NS = "openshift-kube-scheduler-operator"
NODE = "control-plane-0"
NODE_IP = "127.0.1.1"
MIRROR = f"kube-scheduler-{NODE}"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ClusterProcess]:
    c = start_cluster(tmp_path / "data", "--nodes", "2", "--control-plane-nodes", "1", timeout=90)
    try:
        yield c
    finally:
        c.stop()


def get_json(kubectl: Kubectl, *args: str) -> Any:
    r = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def node_at(kubectl: Kubectl, revision: int) -> dict[str, Any] | None:
    ks = get_json(kubectl, "kubescheduler", "cluster")
    status = (ks or {}).get("status") or {}
    if status.get("latestAvailableRevision") != revision:
        return None
    nodes = {n["nodeName"]: n for n in status.get("nodeStatuses") or []}
    node = nodes.get(NODE) or {}
    return ks if node.get("currentRevision") == revision else None


def clusteroperator_columns(kubectl: Kubectl) -> dict[str, str]:
    out = kubectl("get", "clusteroperator", "kube-scheduler").stdout.splitlines()
    header, row = out[0].split(), out[1].split()
    return dict(zip(header, row, strict=False))


def mirror_pod(kubectl: Kubectl) -> dict[str, Any] | None:
    return get_json(kubectl, "pod", "-n", OPERAND, MIRROR)


def https_get(url: str, token: str | None) -> str:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the operator's self-signed serving certificate, on loopback
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), context=ctx, timeout=5) as r:
        return str(r.read().decode())


def test_operator_end_to_end(cluster: ClusterProcess, tmp_path: Path) -> None:
    assert KUBECTL is not None
    kubectl = Kubectl(KUBECTL, cluster.kubeconfig, tmp_path / "kcache")
    port = free_port(NODE_IP)  # not 10259: other clusters on this machine may use control-plane-0's default
    operator = start_operator(cluster.kubeconfig, port)
    try:
        # 1. revision 1 from an empty cluster
        wait_for(lambda: node_at(kubectl, 1), 180, "control-plane-0 at revision 1\n" + operator.log())
        mirror = mirror_pod(kubectl)
        assert mirror is not None and mirror["metadata"]["labels"]["revision"] == "1"
        assert mirror["spec"]["nodeName"] == NODE
        installer = get_json(kubectl, "pod", "-n", OPERAND, f"installer-1-{NODE}")
        assert installer["status"]["phase"] == "Succeeded"
        manifest = cluster.data_dir / "nodes" / NODE / "etc/kubernetes/manifests/kube-scheduler-pod.yaml"
        assert manifest.exists()
        cols = wait_for(
            lambda: (c := clusteroperator_columns(kubectl))["PROGRESSING"] == "False" and c,
            60,
            "the ClusterOperator to settle",
        )
        assert (cols["AVAILABLE"], cols["PROGRESSING"], cols["DEGRADED"]) == ("True", "False", "False")
        # The operator's metrics over HTTPS, read with a bearer token (TokenReview + SubjectAccessReview).
        kubectl("create", "serviceaccount", "e2e-metrics", "-n", "default")
        kubectl(
            "create",
            "clusterrolebinding",
            "e2e-metrics",
            "--clusterrole=cluster-admin",
            "--serviceaccount=default:e2e-metrics",
        )
        token = kubectl("create", "token", "e2e-metrics", "-n", "default").stdout.strip()
        url = next(
            line.rsplit(" ", 1)[1]
            for line in operator.output
            if line.startswith("serving /metrics and /healthz")
        )
        metrics = wait_for(
            lambda: (m := https_get(f"{url}/metrics", token)) and 'node="control-plane-0"} 1.0' in m and m,
            30,
            "the operator's metrics",
        )
        assert 'kubesched_operator_reconciles_total{controller="RevisionController"}' in metrics
        assert "kubesched_operator_latest_available_revision 1.0" in metrics
        assert https_get(f"{url}/healthz", None) == "ok"
        ks_yaml = kubectl("get", "kubescheduler", "cluster", "-o", "yaml").stdout
        assert "latestAvailableRevision: 1" in ks_yaml and "currentRevision: 1" in ks_yaml
        # The scheduler it started places a pod.
        kubectl(
            "run",
            "e2e-web",
            "--image=nginx:1.27",
            "--restart=Never",
            "--overrides",
            json.dumps(
                {
                    "spec": {
                        "containers": [
                            {
                                "name": "e2e-web",
                                "image": "nginx:1.27",
                                "resources": {"requests": {"cpu": "2", "memory": "4Gi"}},
                            }
                        ]
                    }
                }
            ),
        )
        pod = wait_for(
            lambda: (p := get_json(kubectl, "pod", "e2e-web")) and p["spec"].get("nodeName") and p,
            60,
            "the scheduler to place e2e-web",
        )
        assert pod["spec"]["nodeName"] != NODE

        # 2. a new profile → revision 2; the operator dies once the installer pod exists, another finishes
        kubectl(
            "patch",
            "scheduler",
            "cluster",
            "--type=merge",
            "-p",
            '{"spec":{"profile":"HighNodeUtilization"}}',
        )
        wait_for(
            lambda: get_json(kubectl, "pod", "-n", OPERAND, f"installer-2-{NODE}"),
            90,
            "the installer pod of revision 2\n" + operator.log(),
            interval=0.05,
        )
        operator.kill()
        first_log = operator.log()
        operator = start_operator(cluster.kubeconfig, port)
        ks = wait_for(lambda: node_at(kubectl, 2), 180, "control-plane-0 at revision 2\n" + operator.log())
        assert "became leader" in operator.log()
        assert ks["status"]["latestAvailableRevision"] == 2, first_log  # no extra revision after the restart
        # What the running static pod reads (its hostPath is this revision's folder) and what it decides:
        # MostAllocated packs the next pod beside e2e-web, where LeastAllocated spread it to the emptier node.
        config = cluster.data_dir / "nodes" / NODE / "etc/kubernetes/static-pod-resources"
        assert "MostAllocated" in (config / "kube-scheduler-pod-2/configmaps/config/config.yaml").read_text()
        assert (
            "MostAllocated" not in (config / "kube-scheduler-pod-1/configmaps/config/config.yaml").read_text()
        )

        # What the running scheduler says it runs: its /configz, read as the admin (the port is guarded).
        def fit_strategy() -> str | None:
            try:
                code, body = kubeconfig_get_sync(
                    f"https://{NODE_IP}:{port}/configz", str(cluster.kubeconfig), timeout=5
                )
            except OSError:
                return None
            if code != 200:
                return None
            (profile,) = json.loads(body)["componentconfig"]["profiles"]
            fit = next(c["args"] for c in profile["pluginConfig"] if c["name"] == "NodeResourcesFit")
            return str(fit["scoringStrategy"]["type"])

        assert wait_for(lambda: fit_strategy() == "MostAllocated" or None, 60, "the scheduler's /configz")
        kubectl(
            "run",
            "e2e-packed",
            "--image=busybox:1.36",
            "--restart=Never",
            "--overrides",
            json.dumps(
                {
                    "spec": {
                        "containers": [
                            {
                                "name": "e2e-packed",
                                "image": "busybox:1.36",
                                "resources": {"requests": {"cpu": "500m", "memory": "512Mi"}},
                            }
                        ]
                    }
                }
            ),
        )
        packed = wait_for(
            lambda: (p := get_json(kubectl, "pod", "e2e-packed")) and p["spec"].get("nodeName") and p,
            180,
            "the revision-2 scheduler to place e2e-packed",
        )
        assert packed["spec"]["nodeName"] == pod["spec"]["nodeName"]

        # 3. an invalid override is refused; revision 2 keeps running
        bad = {
            "spec": {
                "unsupportedConfigOverrides": {
                    "profiles": [
                        {
                            "schedulerName": "default-scheduler",
                            "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}},
                        }
                    ]
                }
            }
        }
        kubectl("patch", "kubescheduler", "cluster", "--type=merge", "-p", json.dumps(bad))
        co = wait_for(
            lambda: (
                (c := get_json(kubectl, "clusteroperator", "kube-scheduler"))
                and any(x["type"] == "Degraded" and x["status"] == "True" for x in c["status"]["conditions"])
                and c
            ),
            60,
            "Degraded=True",
        )
        degraded = next(x for x in co["status"]["conditions"] if x["type"] == "Degraded")
        assert degraded["reason"] == "TargetConfigController_InvalidConfig"
        assert "NoSuchPlugin" in degraded["message"]
        assert node_at(kubectl, 2) is not None
        mirror = mirror_pod(kubectl)
        assert mirror is not None and mirror["metadata"]["labels"]["revision"] == "2"
        assert clusteroperator_columns(kubectl)["AVAILABLE"] == "True"

        # 4. Removed takes the static pod away
        kubectl(
            "patch",
            "kubescheduler",
            "cluster",
            "--type=merge",
            "-p",
            '{"spec":{"managementState":"Removed"}}',
        )
        wait_for(lambda: mirror_pod(kubectl) is None, 90, "the static pod to go")
        assert not manifest.exists()
        cols = wait_for(
            lambda: (c := clusteroperator_columns(kubectl))["AVAILABLE"] == "False" and c,
            60,
            "Available=False",
        )
        assert "StaticPodInstallerCompleted" in kubectl("get", "events", "-n", OPERAND).stdout
        events = kubectl("get", "events", "-n", OPERATOR_NS).stdout
        for reason in ("RevisionTriggered", "NodeCurrentRevisionChanged", "OperatorStatusChanged"):
            assert reason in events
    finally:
        operator.stop()
