"""``kubectl apply -k deploy/<mode>`` on the local cluster, for real: the scheduler runs as processes of the
``kubesched`` image on control-plane nodes, under the overlay's ServiceAccount and RBAC, configured from the
overlay's ConfigMap.

The local cluster runs no scheduler of its own, so the overlays' replicas (pods with the default
``schedulerName``) are placed by kubesched running as the static pod of deploy/static-pod, the cluster's
"default scheduler" here; it is stopped (its manifest removed, the kubelet stops it and it releases the Lease)
before what each mode claims is checked:

- static pod: the manifest rendered by ``kubectl kustomize deploy/static-pod`` in control-plane-0's manifest
  folder (its config and kubeconfig as hostPath files under the node's root) becomes a Running, Ready mirror
  pod; it takes ``kube-system/kube-scheduler`` and places a pod naming ``default-scheduler``;
- second scheduler: two Ready replicas, one leads on ``kubesched/kubesched``; with no default scheduler
  running, a pod naming ``kubesched`` is placed while a pod naming ``default-scheduler`` stays Pending;
- takeover: three Ready replicas, one per control-plane node, all candidates for ``kube-system/kube-scheduler``
  while the static pod holds it; once it stops, one replica takes the Lease and places a pod naming
  ``default-scheduler``.

The overlays are applied through a test overlay (a temporary kustomization whose only resource is
deploy/<mode>) that changes what this machine needs: a free secure port (every process pod shares the
machine's network, and other tests may run beside) and, for the second scheduler, placement on the
control-plane nodes (only they run processes). No scheduler log may mention ``forbidden``: the RBAC is enough.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from clusterproc import ClusterProcess, Kubectl, wait_for
from deploy_helpers import DEPLOY, KUBECTL, render

pytestmark = [
    pytest.mark.slow,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine"),
]

T = TypeVar("T")
CONTROL_PLANE_IPS = ("127.0.1.1", "127.0.1.2", "127.0.1.3")
PAUSE = "registry.k8s.io/pause:3.10"


def free_port(*ips: str) -> int:
    """A port free on every address in ``ips`` right now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((ips[0], 0))
            port = int(s.getsockname()[1])
        try:
            for ip in ips[1:]:
                with socket.socket() as s:
                    s.bind((ip, port))
        except OSError:
            continue
        return port
    raise AssertionError("no free port")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def get_json(kubectl: Kubectl, *args: str) -> Any:
    r = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def running_and_ready(pod: dict[str, Any] | None) -> bool:
    if not pod or pod["status"].get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
        return False
    conds = {c["type"]: c["status"] for c in pod["status"].get("conditions") or []}
    return conds.get("Ready") == "True"


def pid_of(pod: dict[str, Any]) -> int:
    return int(pod["status"]["containerStatuses"][0]["containerID"].rsplit("/", 1)[1])


def logs(kubectl: Kubectl, ns: str, pod: str) -> str:
    return kubectl("logs", "-n", ns, pod, check=False).stdout


def assert_not_forbidden(text: str, who: str) -> None:
    bad = [ln for ln in text.splitlines() if "forbidden" in ln.lower()]
    assert not bad, f"{who} was denied something:\n" + "\n".join(bad[:10])


def create_pod(kubectl: Kubectl, name: str, scheduler_name: str | None) -> None:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": PAUSE}]}
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }
    kubectl("apply", "-f", "-", input=json.dumps(pod))


def node_of(kubectl: Kubectl, name: str) -> Callable[[], str | None]:
    return lambda: get_json(kubectl, "pod", "-n", "default", name)["spec"].get("nodeName")


# --- the static pod -----------------------------------------------------------------------------------------

MIRROR = "kubesched-control-plane-0"


def static_pod_manifest(port: int) -> str:
    """``kubectl kustomize deploy/static-pod`` with the secure port (flag and probes) moved to ``port``."""
    (pod,) = render("static-pod")
    c = pod["spec"]["containers"][0]
    c["args"] = [f"--secure-port={port}" if a.startswith("--secure-port=") else a for a in c["args"]]
    for kind in ("startupProbe", "livenessProbe", "readinessProbe"):
        c[kind]["httpGet"]["port"] = port
    return yaml.safe_dump(pod)


@contextlib.contextmanager
def static_scheduler(cluster: ClusterProcess, kubectl: Kubectl) -> Iterator[dict[str, Any]]:
    """deploy/static-pod installed on control-plane-0 as its comment says (paths under the node's root)."""
    root = cluster.data_dir / "nodes" / "control-plane-0"
    etc = root / "etc" / "kubernetes"
    (etc / "kubesched").mkdir(exist_ok=True)
    shutil.copyfile(DEPLOY / "static-pod" / "config.yaml", etc / "kubesched" / "config.yaml")
    shutil.copyfile(etc / "scheduler.conf", etc / "kubesched" / "scheduler.conf")
    tmp = etc / ".kubesched.yaml"
    tmp.write_text(static_pod_manifest(free_port("127.0.0.1")))
    os.replace(tmp, etc / "manifests" / "kubesched.yaml")
    mirror = wait_for(
        lambda: (p := get_json(kubectl, "pod", "-n", "kube-system", MIRROR)) and running_and_ready(p) and p,
        45,
        "the static pod's Running, Ready mirror pod",
    )
    pid = pid_of(mirror)
    try:
        yield mirror
        assert_not_forbidden(logs(kubectl, "kube-system", MIRROR), "the static pod")
    finally:
        (etc / "manifests" / "kubesched.yaml").unlink()
        wait_for(
            lambda: get_json(kubectl, "pod", "-n", "kube-system", MIRROR) is None, 30, "the mirror pod to go"
        )
        wait_for(lambda: not alive(pid), 15, "the static pod's process to stop")


# --- overlays -----------------------------------------------------------------------------------------------

ON_CONTROL_PLANE = {
    "nodeSelector": {"node-role.kubernetes.io/control-plane": ""},
    "tolerations": [
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}
    ],
}


def local_overlay(tmp_path: Path, mode: str, port: int, control_plane: bool) -> Path:
    folder = tmp_path / f"local-{mode}"
    folder.mkdir()
    (deployment,) = [d for d in render(mode) if d["kind"] == "Deployment"]
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[3].startswith("--secure-port="), args  # what the patch below replaces
    ops = [
        {
            "op": "replace",
            "path": "/spec/template/spec/containers/0/args/3",
            "value": f"--secure-port={port}",
        },
        {"op": "replace", "path": "/spec/template/spec/containers/0/ports/0/containerPort", "value": port},
    ]
    if control_plane:
        ops += [
            {"op": "add", "path": f"/spec/template/spec/{k}", "value": v} for k, v in ON_CONTROL_PLANE.items()
        ]
    kustomization = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": [os.path.relpath(DEPLOY / mode, folder)],
        "patches": [{"target": {"kind": "Deployment", "name": "kubesched"}, "patch": json.dumps(ops)}],
    }
    (folder / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))
    return folder


def replicas(kubectl: Kubectl, ns: str, n: int) -> Callable[[], list[dict[str, Any]] | None]:
    def ready() -> list[dict[str, Any]] | None:
        items = get_json(kubectl, "pods", "-n", ns, "-l", "app.kubernetes.io/name=kubesched")["items"]
        live = [
            p
            for p in items
            if not p["metadata"].get("deletionTimestamp") and not p["spec"].get("hostNetwork")
        ]
        return live if len(live) == n and all(running_and_ready(p) for p in live) else None

    return ready


def leaders(kubectl: Kubectl, ns: str, pods: list[dict[str, Any]], lease: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in pods
        if f"successfully acquired lease {lease}" in logs(kubectl, ns, p["metadata"]["name"])
    ]


@contextlib.contextmanager
def applied(kubectl: Kubectl, overlay: Path, pods: tuple[str, ...]) -> Iterator[None]:
    kubectl("apply", "-k", str(overlay))
    try:
        yield
    finally:
        for name in pods:
            kubectl("delete", "pod", "-n", "default", name, "--ignore-not-found", "--wait=false")
        kubectl("delete", "-k", str(overlay), "--ignore-not-found", "--wait=true", timeout=90)


def test_static_pod_mode(deploy_cluster: ClusterProcess, deploy_kubectl: Kubectl) -> None:
    kubectl = deploy_kubectl
    started = time.monotonic()
    try:
        with static_scheduler(deploy_cluster, kubectl) as mirror:
            spec = mirror["spec"]
            assert spec["nodeName"] == "control-plane-0" and spec["hostNetwork"] is True
            assert not any(
                "serviceaccount" in (m.get("mountPath") or "") for m in spec["containers"][0]["volumeMounts"]
            )
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
            create_pod(kubectl, "static-placed", None)
            node = wait_for(node_of(kubectl, "static-placed"), 30, "the static pod to place a pod")
            assert node.startswith("node-")
            assert "successfully acquired lease kube-system/kube-scheduler" in logs(
                kubectl, "kube-system", MIRROR
            )
    finally:
        kubectl("delete", "pod", "-n", "default", "static-placed", "--ignore-not-found", "--wait=false")
    print(f"static pod mode: {time.monotonic() - started:.1f}s")


def test_second_scheduler_mode(
    deploy_cluster: ClusterProcess, deploy_kubectl: Kubectl, tmp_path: Path
) -> None:
    kubectl = deploy_kubectl
    started = time.monotonic()
    overlay = local_overlay(tmp_path, "second-scheduler", free_port(*CONTROL_PLANE_IPS), control_plane=True)
    with applied(kubectl, overlay, ("for-kubesched", "for-default")):
        with static_scheduler(deploy_cluster, kubectl):
            pods = wait_for(replicas(kubectl, "kubesched", 2), 60, "two Running, Ready replicas")
        assert len({p["spec"]["nodeName"] for p in pods}) == 2  # anti-affinity: one per node
        # The default scheduler is gone: only kubesched's profile is served.
        create_pod(kubectl, "for-default", None)
        create_pod(kubectl, "for-kubesched", "kubesched")
        assert wait_for(node_of(kubectl, "for-kubesched"), 30, "kubesched to place its pod").startswith(
            "node-"
        )
        (_leader,) = wait_for(
            lambda: leaders(kubectl, "kubesched", pods, "kubesched/kubesched"), 20, "a leader"
        )
        time.sleep(1.5)  # a scheduler serving default-scheduler would have placed it by now
        assert node_of(kubectl, "for-default")() is None
        lease = get_json(kubectl, "lease", "-n", "kubesched", "kubesched")
        assert lease["spec"]["holderIdentity"]
        assert get_json(kubectl, "lease", "-n", "kube-system", "kube-scheduler")["spec"].get(
            "holderIdentity"
        ) in (
            None,
            "",
        )  # released by the static pod, never taken by the second scheduler
        for p in pods:
            assert_not_forbidden(logs(kubectl, "kubesched", p["metadata"]["name"]), p["metadata"]["name"])
    print(f"second-scheduler mode: {time.monotonic() - started:.1f}s")


def test_takeover_mode(deploy_cluster: ClusterProcess, deploy_kubectl: Kubectl, tmp_path: Path) -> None:
    kubectl = deploy_kubectl
    started = time.monotonic()
    overlay = local_overlay(tmp_path, "takeover", free_port(*CONTROL_PLANE_IPS), control_plane=False)
    with applied(kubectl, overlay, ("taken-over",)):
        with static_scheduler(deploy_cluster, kubectl):
            pods = wait_for(replicas(kubectl, "kube-system", 3), 60, "three Running, Ready replicas")
            assert sorted(p["spec"]["nodeName"] for p in pods) == [f"control-plane-{i}" for i in range(3)]
            assert {p["spec"]["priority"] for p in pods} == {2000000000}  # system-cluster-critical
            # All three contend for kube-scheduler's Lease; none holds it while the static pod does.
            for p in pods:
                wait_for(
                    lambda p=p: (
                        "for the leader lease kube-system/kube-scheduler"
                        in logs(kubectl, "kube-system", p["metadata"]["name"])
                    ),
                    20,
                    f"{p['metadata']['name']} to campaign",
                )
            assert leaders(kubectl, "kube-system", pods, "kube-system/kube-scheduler") == []
            stopping = time.monotonic()
        (leader,) = wait_for(
            lambda: leaders(kubectl, "kube-system", pods, "kube-system/kube-scheduler"),
            30,
            "a replica to lead",
        )
        print(f"takeover: {leader} leads {time.monotonic() - stopping:.1f}s after the static pod was removed")
        create_pod(kubectl, "taken-over", None)
        assert wait_for(node_of(kubectl, "taken-over"), 30, "the new leader to place a pod").startswith(
            "node-"
        )
        for p in pods:
            assert_not_forbidden(logs(kubectl, "kube-system", p["metadata"]["name"]), p["metadata"]["name"])
    print(f"takeover mode: {time.monotonic() - started:.1f}s")
