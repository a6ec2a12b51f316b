"""Control-plane nodes whose kubelet runs processes, driven with the real kubectl over HTTPS.

- ``kubesched scheduler`` as a static pod: manifest dropped into control-plane-0's folder -> Running mirror pod,
  the Lease taken, pods placed, ``kubectl logs`` (plain, ``--tail``, ``-f``); an edited manifest restarts it with
  the new flags; a removed manifest stops the process and removes the mirror pod.
- A Deployment of three ``kubesched scheduler`` replicas on the three control-plane nodes, configured from a
  ConfigMap volume, connecting in-cluster (no kubeconfig) as a service account bound to system:kube-scheduler:
  one leader; a killed process is restarted; a deleted pod is replaced; the lease moves when the leader dies.

Each test starts its own cluster; every process it starts is stopped by the cluster's shutdown (checked).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from clusterproc import ClusterProcess, Kubectl, find_kubectl, start_cluster, wait_for
from clusterproc import free_port as free_port_on

KUBECTL = find_kubectl()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]

T = TypeVar("T")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def read_in_mount_namespace(pid: int, path: str) -> str:
    r = subprocess.run(
        ["nsenter", f"--target={pid}", "--mount", "--", "cat", path], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def pid_of(pod: dict[str, Any]) -> int:
    return int(pod["status"]["containerStatuses"][0]["containerID"].rsplit("/", 1)[1])


@dataclass
class Env:
    cluster: ClusterProcess
    kubectl: Kubectl
    pids: list[int] = field(default_factory=list)  # container processes seen; all must end with the cluster


@pytest.fixture
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    n = getattr(request, "param", 1)  # control-plane nodes
    c = start_cluster(tmp_path / "data", "--nodes", "2", "--control-plane-nodes", str(n))
    assert KUBECTL is not None
    e = Env(c, Kubectl(KUBECTL, c.kubeconfig, tmp_path / "kubectl-cache"))
    try:
        yield e
    finally:
        rc = c.stop()
        for pid in e.pids:
            wait_for(lambda pid=pid: not alive(pid), 10, f"process {pid} to end with the cluster")
        assert rc == 0, "\n".join(c.output[-50:])


def get_json(kubectl: Kubectl, *args: str) -> Any:
    r = kubectl("get", *args, "-o", "json", check=False)
    if r.returncode != 0:
        return None
    return json.loads(r.stdout)


def write_manifest(folder: Path, name: str, text: str) -> None:
    """As kubeadm does: write a hidden file, then rename it into place (the kubelet never sees half a file)."""
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, folder / name)


STATIC_SCHEDULER = """apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
  labels: {{component: kube-scheduler, tier: control-plane}}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  containers:
  - name: kube-scheduler
    image: kubesched
    command:
    - kubesched
    - scheduler
    - --kubeconfig=/etc/kubernetes/scheduler.conf
    - --leader-elect={leader_elect}
    - --bind-address=127.0.1.1
    - --secure-port={port}
    - -v={v}
    livenessProbe:
      httpGet: {{host: 127.0.1.1, path: /healthz, port: {port}, scheme: HTTPS}}
      initialDelaySeconds: 10
      periodSeconds: 5
    readinessProbe:
      httpGet: {{host: 127.0.1.1, path: /healthz, port: {port}, scheme: HTTPS}}
      periodSeconds: 1
    volumeMounts:
    - {{name: kubeconfig, mountPath: /etc/kubernetes/scheduler.conf, readOnly: true}}
  volumes:
  - name: kubeconfig
    hostPath: {{path: /etc/kubernetes/scheduler.conf, type: File}}
"""


def running_and_ready(pod: dict[str, Any] | None) -> bool:
    if not pod or pod["status"].get("phase") != "Running":
        return False
    conds = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
    return conds.get("Ready") == "True"


def test_scheduler_as_a_static_pod(env: Env) -> None:
    cluster, kubectl, pids = env.cluster, env.kubectl, env.pids
    manifests = cluster.data_dir / "nodes" / "control-plane-0" / "etc" / "kubernetes" / "manifests"
    assert manifests.is_dir()
    node = get_json(kubectl, "node", "control-plane-0")
    assert node["metadata"]["labels"]["node-role.kubernetes.io/control-plane"] == ""
    assert node["spec"]["taints"] == [
        {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
    ]
    assert {"type": "InternalIP", "address": "127.0.1.1"} in node["status"]["addresses"]

    port = free_port_on("127.0.1.1")
    write_manifest(
        manifests, "kube-scheduler.yaml", STATIC_SCHEDULER.format(port=port, v=2, leader_elect="true")
    )
    started = time.monotonic()
    name = "kube-scheduler-control-plane-0"
    mirror = wait_for(
        lambda: (p := get_json(kubectl, "pod", "-n", "kube-system", name)) and running_and_ready(p) and p,
        30,
        "a Running, Ready mirror pod",
    )
    print(f"static scheduler Running and Ready {time.monotonic() - started:.1f}s after the manifest")
    meta = mirror["metadata"]
    assert (
        meta["annotations"]["kubernetes.io/config.mirror"] == meta["annotations"]["kubernetes.io/config.hash"]
    )
    assert (
        meta["ownerReferences"][0]["kind"] == "Node"
        and meta["ownerReferences"][0]["name"] == "control-plane-0"
    )
    assert mirror["spec"]["nodeName"] == "control-plane-0" and mirror["status"]["podIP"] == "127.0.1.1"
    pid = pid_of(mirror)
    pids.append(pid)
    assert alive(pid)

    lease = wait_for(
        lambda: (
            (ls := get_json(kubectl, "lease", "-n", "kube-system", "kube-scheduler"))
            and ls["spec"].get("holderIdentity")
            and ls
        ),
        30,
        "the kube-scheduler Lease",
    )
    assert lease["spec"]["holderIdentity"]
    kubectl("run", "web", "--image=registry.k8s.io/pause:3.10")
    placed = wait_for(
        lambda: get_json(kubectl, "pod", "web")["spec"].get("nodeName"), 30, "the pod to be placed"
    )
    assert placed.startswith("node-")  # the control-plane taint keeps it off control-plane-0

    logs = kubectl("logs", "-n", "kube-system", name).stdout
    assert "successfully acquired lease kube-system/kube-scheduler" in logs, logs
    assert "forbidden" not in logs.lower(), logs  # scheduler.conf is system:kube-scheduler, as kubeadm's
    assert len(kubectl("logs", "-n", "kube-system", name, "--tail=1").stdout.splitlines()) == 1
    stamped = kubectl("logs", "-n", "kube-system", name, "--tail=1", "--timestamps").stdout
    assert stamped[:4].isdigit() and stamped[10] == "T" and stamped.split(" ", 1)[0].endswith("Z")
    assert len(kubectl("logs", "-n", "kube-system", name, "--limit-bytes=10").stdout) == 10
    follow = kubectl.popen("logs", "-n", "kube-system", name, "-f", "--tail=2")
    try:
        assert follow.stdout is not None
        first = follow.stdout.readline()
        assert first.strip(), "kubectl logs -f printed nothing"
        kubectl("delete", "pod", "web", "--wait=false")
        # The deletion is not the scheduler's business; what it logs next is unknown, so only check that the
        # stream stays open (it follows) until we stop it.
        time.sleep(1.0)
        assert follow.poll() is None
    finally:
        follow.terminate()
        follow.wait(10)

    # An edited manifest: the old process stops, a new one runs with the new flags.
    write_manifest(
        manifests, "kube-scheduler.yaml", STATIC_SCHEDULER.format(port=port, v=3, leader_elect="true")
    )
    mirror2 = wait_for(
        lambda: (
            (p := get_json(kubectl, "pod", "-n", "kube-system", name))
            and "-v=3" in p["spec"]["containers"][0]["command"]
            and running_and_ready(p)
            and p
        ),
        40,
        "the restarted static pod",
    )
    pid2 = pid_of(mirror2)
    pids.append(pid2)
    assert pid2 != pid and not alive(pid)
    assert "-v=3" in Path(f"/proc/{pid2}/cmdline").read_bytes().decode().split("\0")

    # A removed manifest: the process stops and the mirror pod goes away.
    (manifests / "kube-scheduler.yaml").unlink()
    wait_for(lambda: get_json(kubectl, "pod", "-n", "kube-system", name) is None, 30, "the mirror pod to go")
    wait_for(lambda: not alive(pid2), 10, "the process to stop")

    # A malformed manifest is an event on the node; the kubelet carries on.
    write_manifest(manifests, "broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    events = wait_for(
        lambda: [
            e
            for e in get_json(kubectl, "events", "-n", "default")["items"]
            if e["reason"] == "FailedStaticPodManifest"
        ],
        20,
        "an event about the malformed manifest",
    )
    assert events[0]["involvedObject"]["kind"] == "Node" and "broken.yaml" in events[0]["message"]


HA_CONFIG = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
leaderElection:
  leaderElect: true
  leaseDuration: 4s
  renewDeadline: 3s
  retryPeriod: 1s
  resourceName: kube-scheduler
  resourceNamespace: kube-system
profiles:
- schedulerName: kubesched-ha
"""


def deployment(port: int) -> dict[str, Any]:
    labels = {"app": "kubesched-ha"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "kubesched-ha", "namespace": "kube-system"},
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": "kube-scheduler",
                    "hostNetwork": True,
                    "terminationGracePeriodSeconds": 5,
                    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
                    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
                    "affinity": {
                        "podAntiAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": [
                                {
                                    "labelSelector": {"matchLabels": labels},
                                    "topologyKey": "kubernetes.io/hostname",
                                }
                            ]
                        }
                    },
                    "containers": [
                        {
                            "name": "scheduler",
                            "image": "kubesched:latest",
                            "command": ["kubesched", "scheduler"],
                            "args": [
                                "--config=/etc/kubesched/config.yaml",
                                "--bind-address=$(POD_IP)",
                                f"--secure-port={port}",
                                "-v=2",
                            ],
                            "env": [
                                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
                            ],
                            "readinessProbe": {
                                "httpGet": {"path": "/healthz", "port": port, "scheme": "HTTPS"},
                                "periodSeconds": 1,
                            },
                            "volumeMounts": [
                                {"name": "config", "mountPath": "/etc/kubesched", "readOnly": True}
                            ],
                        }
                    ],
                    "volumes": [{"name": "config", "configMap": {"name": "kubesched-ha"}}],
                },
            },
        },
    }


@pytest.mark.parametrize("env", [3], indirect=True, ids=["3-control-plane-nodes"])
def test_deployment_of_three_schedulers_in_cluster(env: Env) -> None:
    cluster, kubectl, pids = env.cluster, env.kubectl, env.pids
    # The cluster's default scheduler: a static pod on control-plane-0 (places the replicas).
    manifests = cluster.data_dir / "nodes" / "control-plane-0" / "etc" / "kubernetes" / "manifests"
    static_port = free_port_on("127.0.1.1")
    write_manifest(
        manifests, "kube-scheduler.yaml", STATIC_SCHEDULER.format(port=static_port, v=1, leader_elect="false")
    )

    # A service account bound as kubeadm binds kube-scheduler, and the configuration in a ConfigMap.
    kubectl("create", "serviceaccount", "kube-scheduler", "-n", "kube-system")
    for role in ("system:kube-scheduler", "system:volume-scheduler"):
        kubectl("create", "clusterrolebinding", f"ha-{role.split(':')[1]}", f"--clusterrole={role}",
                "--serviceaccount=kube-system:kube-scheduler")  # fmt: skip
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubesched-ha", "namespace": "kube-system"},
          "data": {"config.yaml": HA_CONFIG}}  # fmt: skip
    kubectl("apply", "-f", "-", input=json.dumps(cm))
    port = free_port_on("127.0.1.1")
    kubectl("apply", "-f", "-", input=json.dumps(deployment(port)))

    def replicas() -> list[dict[str, Any]] | None:
        items = get_json(kubectl, "pods", "-n", "kube-system", "-l", "app=kubesched-ha")["items"]
        live = [p for p in items if not p["metadata"].get("deletionTimestamp")]
        if len(live) == 3 and all(running_and_ready(p) for p in live):
            return live
        return None

    pods = wait_for(replicas, 90, "three Running, Ready replicas")
    nodes = sorted(p["spec"]["nodeName"] for p in pods)
    assert nodes == ["control-plane-0", "control-plane-1", "control-plane-2"]
    by_pid = {pid_of(p): p for p in pods}
    pids.extend(by_pid)
    assert len(by_pid) == 3 and all(alive(pid) for pid in by_pid)
    for pid, p in by_pid.items():
        # In-cluster identity: the service-account folder exists in the process' own mount namespace only.
        sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
        assert read_in_mount_namespace(pid, f"{sa_dir}/namespace") == "kube-system"
        assert read_in_mount_namespace(pid, f"{sa_dir}/token").count(".") == 2
        assert "BEGIN CERTIFICATE" in read_in_mount_namespace(pid, f"{sa_dir}/ca.crt")
        assert "--kubeconfig" not in Path(f"/proc/{pid}/cmdline").read_text()
        assert f"--bind-address={p['status']['podIP']}" in Path(f"/proc/{pid}/cmdline").read_text()
    assert not Path("/var/run/secrets/kubernetes.io/serviceaccount").exists()  # the host's path is untouched

    def leader() -> str | None:
        lease = get_json(kubectl, "lease", "-n", "kube-system", "kube-scheduler")
        return lease["spec"].get("holderIdentity") if lease else None

    def leading_pods() -> list[str]:
        out = []
        for p in get_json(kubectl, "pods", "-n", "kube-system", "-l", "app=kubesched-ha")["items"]:
            r = kubectl("logs", "-n", "kube-system", p["metadata"]["name"], check=False)
            if "successfully acquired lease kube-system/kube-scheduler" in r.stdout:
                out.append(p["metadata"]["name"])
        return out

    wait_for(leader, 30, "a leader")
    (first_leader,) = wait_for(leading_pods, 30, "one replica to log that it leads")

    def bound(name: str) -> Callable[[], str | None]:
        return lambda: get_json(kubectl, "pod", name)["spec"].get("nodeName")

    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ha-1"},
        "spec": {"schedulerName": "kubesched-ha", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }))  # fmt: skip
    assert wait_for(bound("ha-1"), 30, "the leader to place a pod").startswith("node-")

    # Killing the leader's process: the kubelet restarts it, and the lease moves on (or comes back).
    leader_pod = next(p for p in pods if p["metadata"]["name"] == first_leader)
    killed = pid_of(leader_pod)
    os.kill(killed, signal.SIGKILL)
    restarted = wait_for(
        lambda: (
            (p := get_json(kubectl, "pod", "-n", "kube-system", first_leader))
            and p["status"]["containerStatuses"][0]["restartCount"] >= 1
            and running_and_ready(p)
            and p
        ),
        60,
        "the killed replica to be restarted",
    )
    st = restarted["status"]["containerStatuses"][0]
    assert st["lastState"]["terminated"]["exitCode"] == 137
    previous = kubectl("logs", "-n", "kube-system", first_leader, "--previous").stdout
    assert "successfully acquired lease kube-system/kube-scheduler" in previous
    pids.append(pid_of(restarted))
    kubectl("apply", "-f", "-", input=json.dumps({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ha-2"},
        "spec": {"schedulerName": "kubesched-ha", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
    }))  # fmt: skip
    assert wait_for(bound("ha-2"), 60, "a new leader to place a pod")

    # Deleting a replica's pod: its process stops, the ReplicaSet replaces the pod, the new one runs.
    victim = next(p for p in pods if p["metadata"]["name"] != first_leader)
    victim_pid = pid_of(victim)
    kubectl("delete", "pod", "-n", "kube-system", victim["metadata"]["name"], "--wait=true", timeout=60)
    assert not alive(victim_pid)
    pods2 = wait_for(replicas, 90, "three replicas again")
    names = {p["metadata"]["name"] for p in pods2}
    assert victim["metadata"]["name"] not in names and len(names) == 3
    pids.extend(pid_of(p) for p in pods2)


def test_scheduler_deployment_without_rbac_binding_logs_403(env: Env) -> None:
    """The same Deployment under a service account nobody bound: its first list is refused with upstream's 403,
    and `kubectl logs` shows it (tests/e2e/test_auth_e2e.py shows the bound account leading)."""
    cluster, kubectl, pids = env.cluster, env.kubectl, env.pids
    manifests = cluster.data_dir / "nodes" / "control-plane-0" / "etc" / "kubernetes" / "manifests"
    write_manifest(
        manifests,
        "kube-scheduler.yaml",
        STATIC_SCHEDULER.format(port=free_port_on("127.0.1.1"), v=1, leader_elect="false"),
    )
    kubectl("create", "serviceaccount", "unbound-scheduler", "-n", "kube-system")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kubesched-ha", "namespace": "kube-system"},
          "data": {"config.yaml": HA_CONFIG}}  # fmt: skip
    kubectl("apply", "-f", "-", input=json.dumps(cm))
    d = deployment(free_port_on("127.0.1.1"))
    d["spec"]["replicas"] = 1
    d["spec"]["template"]["spec"]["serviceAccountName"] = "unbound-scheduler"
    kubectl("apply", "-f", "-", input=json.dumps(d))

    def replica() -> dict[str, Any] | None:
        items = get_json(kubectl, "pods", "-n", "kube-system", "-l", "app=kubesched-ha")["items"]
        running = [p for p in items if ((p.get("status") or {}).get("containerStatuses") or [{}])[0].get("state", {})
                   .get("running")]  # fmt: skip
        return running[0] if running else None

    pod = wait_for(replica, 90, "the replica running")
    pids.append(pid_of(pod))
    name = pod["metadata"]["name"]
    sa = "system:serviceaccount:kube-system:unbound-scheduler"

    def denied_in_logs() -> str | None:
        out = kubectl("logs", "-n", "kube-system", name, check=False).stdout
        return out if f'User "{sa}" cannot list resource' in out else None

    logs = wait_for(denied_in_logs, 60, "the 403 in kubectl logs")
    assert "forbidden" in logs
