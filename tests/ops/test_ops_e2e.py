"""takeover, doctor and chaos end to end on one local cluster with two control-plane nodes (shared: it runs
three scheduler processes, so it is started once; the tests run in file order and build on each other).

1. takeover: a ``kubesched scheduler`` static pod on control-plane-0 (label ``component=kube-scheduler``) holds
   ``kube-system/kube-scheduler`` as ``default-scheduler``; a Deployment of two kubesched replicas (placed by it)
   contends for the same Lease. ``takeover`` shows the holder, then ``--yes`` moves the static manifest out of
   the node's folder and waits: a replica wins, no overlap.
2. chaos: a workload's pods deleted for 20 s and the leading replica killed in the middle; every replacement
   (including the killed replica's) is scheduled, the report says so, exit 0.
3. doctor: a pod for an unserved schedulerName, an unschedulable pod and a cordoned node, in text and JSON;
   then with the replicas scaled to 0, "no scheduler is up" and the printed command places a pod.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from clusterproc import ClusterProcess, Kubectl, find_kubectl, start_cluster, wait_for
from clusterproc import free_port as port_on

KUBECTL = find_kubectl()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]
T = TypeVar("T")
# kubesched logs its leader-election identity at -v=1 and above; takeover and chaos find the holder's pod by it
# (all processes of the local cluster share this machine's hostname, the identity's first part).
LEASE_FLAGS = (
    "--leader-elect-lease-duration=4s",
    "--leader-elect-renew-deadline=3s",
    "--leader-elect-retry-period=1s",
)


def kubesched(kubeconfig: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kubesched.cli", *args, "--kubeconfig", str(kubeconfig)],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def get_json(kubectl: Kubectl, *args: str) -> Any:
    r = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def ready(pod: dict[str, Any]) -> bool:
    conds = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
    return pod["status"].get("phase") == "Running" and conds.get("Ready") == "True"


STATIC_DEFAULT = """apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
  labels: {{component: kube-scheduler, tier: control-plane}}
spec:
  hostNetwork: true
  containers:
  - name: kube-scheduler
    image: kubesched
    command: [kubesched, scheduler, --kubeconfig=/etc/kubernetes/scheduler.conf, --leader-elect=true,
              --bind-address=127.0.1.1, --secure-port={port}, -v=1, {flags}]
    volumeMounts:
    - {{name: kubeconfig, mountPath: /etc/kubernetes/scheduler.conf, readOnly: true}}
  volumes:
  - name: kubeconfig
    hostPath: {{path: /etc/kubernetes/scheduler.conf, type: File}}
"""

REPLICA_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection: {leaderElect: true, leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 1s,
                 resourceNamespace: kube-system, resourceName: kube-scheduler}
profiles:
- schedulerName: default-scheduler
"""


def replicas_deployment(port: int) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": "kubesched", "app.kubernetes.io/component": "scheduler"}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "kubesched", "namespace": "kube-system"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": "kubesched", "hostNetwork": True, "terminationGracePeriodSeconds": 5,
                "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}]}},
                "containers": [{
                    "name": "kubesched", "image": "kubesched", "command": ["kubesched"],
                    "args": ["scheduler", "--config=/etc/kubesched/config.yaml", "--bind-address=$(POD_IP)",
                             f"--secure-port={port}", "-v=1"],
                    "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": port, "scheme": "HTTPS"},
                                       "periodSeconds": 1},
                    "volumeMounts": [{"name": "config", "mountPath": "/etc/kubesched", "readOnly": True}],
                }],
                "volumes": [{"name": "config", "configMap": {"name": "kubesched-config"}}],
            },
        }},
    }  # fmt: skip


class Env:
    def __init__(self, cluster: ClusterProcess, kubectl: Kubectl) -> None:
        self.cluster = cluster
        self.kubectl = kubectl
        self.manifests = cluster.data_dir / "nodes" / "control-plane-0" / "etc" / "kubernetes" / "manifests"

    def run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return kubesched(self.cluster.kubeconfig, *args, timeout=timeout)

    def replicas(self) -> list[dict[str, Any]]:
        items = get_json(self.kubectl, "pods", "-n", "kube-system", "-l", "app.kubernetes.io/name=kubesched")[
            "items"
        ]
        return [p for p in items if not p["metadata"].get("deletionTimestamp")]

    def holder(self) -> str:
        lease = get_json(self.kubectl, "lease", "-n", "kube-system", "kube-scheduler")
        return (lease or {}).get("spec", {}).get("holderIdentity") or ""


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("ops")
    c = start_cluster(tmp / "data", "--nodes", "3", "--control-plane-nodes", "2")
    assert KUBECTL is not None
    try:
        yield Env(c, Kubectl(KUBECTL, c.kubeconfig, tmp / "kubectl-cache"))
    finally:
        rc = c.stop()
        assert rc == 0, "\n".join(c.output[-50:])


def test_takeover_from_a_static_default_scheduler(env: Env) -> None:
    kubectl = env.kubectl
    manifest = env.manifests / "kube-scheduler.yaml"
    tmp = env.manifests / ".kube-scheduler.yaml.tmp"
    tmp.write_text(STATIC_DEFAULT.format(port=port_on("127.0.1.1"), flags=", ".join(LEASE_FLAGS)))
    os.replace(tmp, manifest)
    wait_for(env.holder, 40, "the static default scheduler to take the Lease")

    kubectl("create", "serviceaccount", "kubesched", "-n", "kube-system")
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        kubectl("create", "clusterrolebinding", f"kubesched-{role.split(':')[1]}", f"--clusterrole={role}",
                "--serviceaccount=kube-system:kubesched")  # fmt: skip
    kubectl(
        "create",
        "configmap",
        "kubesched-config",
        "-n",
        "kube-system",
        f"--from-literal=config.yaml={REPLICA_CONFIG}",
    )
    kubectl("apply", "-f", "-", input=json.dumps(replicas_deployment(port_on("127.0.1.1"))))
    wait_for(lambda: len(ps := env.replicas()) == 2 and all(ready(p) for p in ps), 90, "two Ready replicas")
    old = env.holder()

    # Without --yes: the status and the plan, nothing changes.
    r = env.run("takeover")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"held by {old} (static pod kube-system/kube-scheduler-control-plane-0" in r.stdout, r.stdout
    assert "kubesched replicas contending for kube-system/kube-scheduler as default-scheduler: 2" in r.stdout
    assert "move " in r.stdout and "Plan (run with --yes" in r.stdout
    assert "static-pod route is the durable one" in r.stdout.replace("\n", " ") or "durable route" in r.stdout
    assert manifest.exists() and env.holder() == old

    r = env.run("takeover", "--yes", "-o", "json", timeout=90)
    assert r.returncode == 0, r.stdout + r.stderr
    out = json.loads(r.stdout)
    assert out["won"] and out["route"] == "static-pod" and out["attempts"] == 1
    assert out["winner"] == env.holder() != old
    assert out["winner_pod"].startswith("pod kube-system/kubesched-")
    assert out["handover_seconds"] is not None and out["handover_seconds"] < 30
    assert out["overlap_observed_seconds"] == 0  # the old leader stopped before a replica acquired
    assert (
        not manifest.exists()
        and (env.manifests.parent / "manifests-disabled-by-kubesched" / "kube-scheduler.yaml").exists()
    )
    wait_for(lambda: get_json(kubectl, "pod", "-n", "kube-system", "kube-scheduler-control-plane-0") is None, 30,
             "the static pod to go")  # fmt: skip

    # A second run: already held, nothing to do.
    r = env.run("takeover", "--yes")
    assert r.returncode == 0 and "kubesched already holds the Lease" in r.stdout, r.stdout + r.stderr


def test_chaos_kills_the_leader_while_pods_are_recreated(env: Env) -> None:
    kubectl = env.kubectl
    kubectl("create", "deployment", "web", "--image=registry.k8s.io/pause:3.10", "--replicas=4")
    wait_for(lambda: all(p["spec"].get("nodeName") for p in get_json(kubectl, "pods", "-l", "app=web")["items"])
             and len(get_json(kubectl, "pods", "-l", "app=web")["items"]) == 4, 40, "web's pods placed")  # fmt: skip
    leader_before = env.holder()
    r = env.run("chaos", "--duration", "20s", "--interval", "2s", "--workload", "deployment/web", "--kill-leader",
                "--schedule-timeout", "20s", "--seed", "1", "-o", "json", timeout=120)  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    rep = json.loads(r.stdout)
    assert rep["ok"] and rep["violations"] == []
    assert rep["deletions"] >= 5 and rep["leader_kills"] == 1
    # Every deleted pod was replaced and scheduled, the killed replica's replacement included.
    assert rep["replacements"] >= rep["deletions"] + 1 and rep["scheduled"] == rep["replacements"]
    assert rep["latency_p50"] is not None and rep["latency_p50"] <= rep["latency_p99"] <= 20
    assert rep["leader_changes"] >= 1 and rep["pending_at_end"] == []
    assert env.holder() != leader_before

    # The text report says the same; a bad flag is one line and exit 2.
    r = env.run("chaos", "--duration", "2h", "--workload", "deployment/web")
    assert r.returncode == 2 and "at most 3600s" in r.stderr and "Traceback" not in r.stderr
    r = env.run("chaos", "--duration", "5s", "--workload", "deployment/missing")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "not found" in r.stderr, r.stderr


def test_doctor(env: Env) -> None:
    kubectl = env.kubectl
    for pod in (
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "orphan"},
         "spec": {"schedulerName": "nobody-serves-this", "containers": [{"name": "c", "image": "pause"}]}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "huge"},
         "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1000"}}}]}},
    ):  # fmt: skip
        kubectl("apply", "-f", "-", input=json.dumps(pod))
    kubectl("cordon", "node-2")
    wait_for(lambda: any(e["reason"] == "FailedScheduling" and e["regarding"]["name"] == "huge"
                         for e in get_json(kubectl, "events.v1.events.k8s.io")["items"]), 30, "huge's FailedScheduling")  # fmt: skip

    r = env.run("doctor", "-o", "json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert not d["ok"] and not d["no_scheduler_up"]
    lease = next(le for le in d["leases"] if le["lease"] == "kube-system/kube-scheduler")
    assert lease["state"] == "fresh" and lease["holder"] == env.holder()
    assert "default-scheduler" in lease["scheduler_names"] and "default-scheduler" in d["schedulers"]
    assert [u["pod"] for u in d["unserved"]] == ["default/orphan"]
    assert d["unserved"][0]["scheduler_name"] == "nobody-serves-this"
    huge = next(p for p in d["pending"] if p["pod"] == "default/huge")
    assert "Insufficient cpu" in huge["message"]
    assert {"node": "node-2", "problems": ["unschedulable (cordoned)"]} in d["nodes"]
    assert d["hints"] and d["hints"][0]["pod"] == "default/orphan" and d["hints"][0]["node"] != "node-2"

    r = env.run("doctor")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    for needle in ("problem(s) found", "kube-system/kube-scheduler", "default/orphan", "nobody-serves-this",
                   "Insufficient cpu", "node-2", "unschedulable (cordoned)", "kubectl create --raw"):  # fmt: skip
        assert needle in text, (needle, text)
    assert env.run("doctor", "--strict").returncode == 3

    # No scheduler at all: say so, and the printed command places the pod.
    kubectl("scale", "deployment", "kubesched", "-n", "kube-system", "--replicas=0")
    wait_for(lambda: not env.replicas(), 40, "the replicas to stop")
    kubectl("run", "critical", "--image=pause")
    d = wait_for(lambda: (x := json.loads(env.run("doctor", "-o", "json").stdout))["no_scheduler_up"] and x, 30,
                 "doctor to see no scheduler")  # fmt: skip
    lease = next(le for le in d["leases"] if le["lease"] == "kube-system/kube-scheduler")
    assert lease["state"] in ("released", "expired")
    hint = next(h for h in d["hints"] if h["pod"] == "default/critical")
    cmd = hint["command"].replace("kubectl ", f"{KUBECTL} --kubeconfig {env.cluster.kubeconfig} ", 1)
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    assert get_json(kubectl, "pod", "critical")["spec"]["nodeName"] == hint["node"]
