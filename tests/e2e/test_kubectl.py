"""The local cluster driven by the real kubectl, as a user would."""

from __future__ import annotations

import json
import time

import pytest
from clusterproc import Kubectl

pytestmark = pytest.mark.kubectl

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: web}}
spec:
  {node}
  containers:
  - name: web
    image: nginx:1.27
    resources:
      requests: {{cpu: 100m, memory: 64Mi}}
"""


def pod_yaml(name: str, node: str | None = None) -> str:
    return POD.format(name=name, node=f"nodeName: {node}" if node else "")


def test_version_and_nodes(kubectl: Kubectl) -> None:
    out = kubectl("version", "-o", "json").stdout
    server = json.loads(out)["serverVersion"]
    assert server["major"] == "1"
    nodes = json.loads(kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert len(nodes) == 3
    for n in nodes:
        labels = n["metadata"]["labels"]
        assert labels["kubernetes.io/hostname"] == n["metadata"]["name"]
        assert labels["kubernetes.io/os"] == "linux"
        assert labels["topology.kubernetes.io/zone"]
        ready = [c for c in n["status"]["conditions"] if c["type"] == "Ready"]
        assert ready and ready[0]["status"] == "True"
        assert n["status"]["allocatable"]["pods"] == "110"
    table = kubectl("get", "nodes").stdout
    assert "Ready" in table and "node-0" in table
    leases = kubectl("get", "leases", "-n", "kube-node-lease", "-o", "name").stdout.split()
    assert sorted(leases) == [f"lease.coordination.k8s.io/node-{i}" for i in range(3)]


def test_default_namespaces(kubectl: Kubectl) -> None:
    names = kubectl("get", "namespaces", "-o", "name").stdout.split()
    for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
        assert f"namespace/{ns}" in names


def test_create_get_delete_pod(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=pod_yaml("c1"))
    pod = json.loads(kubectl("get", "pod", "c1", "-o", "json").stdout)
    assert pod["spec"]["schedulerName"] == "default-scheduler"
    assert pod["status"]["phase"] == "Pending"
    again = kubectl("create", "-f", "-", input=pod_yaml("c1"), check=False)
    assert again.returncode != 0 and "AlreadyExists" in again.stderr
    kubectl("delete", "pod", "c1")
    gone = kubectl("get", "pod", "c1", check=False)
    assert gone.returncode != 0 and 'pods "c1" not found' in gone.stderr


def test_bound_pod_runs_and_wait(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=pod_yaml("r1", node="node-1"))
    kubectl("wait", "--for=condition=Ready", "pod/r1", "--timeout=20s")
    pod = json.loads(kubectl("get", "pod", "r1", "-o", "json").stdout)
    assert pod["status"]["phase"] == "Running"
    assert pod["status"]["podIP"]
    assert pod["status"]["containerStatuses"][0]["ready"] is True
    # Graceful deletion completes through the simulated kubelet; kubectl waits for it by default.
    kubectl("delete", "pod", "r1", "--timeout=20s")
    assert kubectl("get", "pod", "r1", check=False).returncode != 0


def test_wait_for_delete(kubectl: Kubectl) -> None:
    kubectl("create", "-f", "-", input=pod_yaml("w1", node="node-2"))
    kubectl("wait", "--for=condition=Ready", "pod/w1", "--timeout=20s")
    kubectl("delete", "pod", "w1", "--wait=false")
    kubectl("wait", "--for=delete", "pod/w1", "--timeout=20s")


def test_apply_twice_and_server_side(kubectl: Kubectl) -> None:
    cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: '1'\n  b: '2'\n"
    assert "created" in kubectl("apply", "-f", "-", input=cm).stdout
    cm2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  a: '1'\n  c: '3'\n"
    assert "configured" in kubectl("apply", "-f", "-", input=cm2).stdout
    data = json.loads(kubectl("get", "cm", "app", "-o", "json").stdout)["data"]
    assert data == {"a": "1", "c": "3"}  # b removed by the three-way merge
    ssa = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  x: '1'\n"
    out = kubectl("apply", "--server-side", "-f", "-", input=ssa).stdout
    assert "serverside-applied" in out
    obj = json.loads(kubectl("get", "cm", "ssa", "-o", "json", "--show-managed-fields").stdout)
    managers = {m["manager"] for m in obj["metadata"]["managedFields"]}
    assert "kubectl" in managers
    ssa2 = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ssa\ndata:\n  z: '2'\n"
    kubectl("apply", "--server-side", "-f", "-", input=ssa2)
    data = json.loads(kubectl("get", "cm", "ssa", "-o", "json").stdout)["data"]
    assert data == {"z": "2"}  # x was owned only by this manager and is gone


def test_apply_deployment_strategic(kubectl: Kubectl) -> None:
    dep = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.27"}
      - {name: side, image: "busybox:1.36"}
"""
    kubectl("apply", "-f", "-", input=dep)
    kubectl("apply", "-f", "-", input=dep.replace("nginx:1.27", "nginx:1.28"))
    obj = json.loads(kubectl("get", "deployment", "web", "-o", "json").stdout)
    images = [c["image"] for c in obj["spec"]["template"]["spec"]["containers"]]
    assert images == ["nginx:1.28", "busybox:1.36"]
    assert obj["metadata"]["generation"] == 2


def test_patch_and_label(kubectl: Kubectl) -> None:
    kubectl("create", "configmap", "p1", "--from-literal=k=v")
    kubectl("patch", "configmap", "p1", "--type=merge", "-p", '{"data":{"k2":"v2"}}')
    kubectl("patch", "configmap", "p1", "--type=json", "-p", '[{"op":"remove","path":"/data/k"}]')
    kubectl("patch", "configmap", "p1", "-p", '{"metadata":{"annotations":{"a":"b"}}}')  # strategic
    kubectl("label", "configmap", "p1", "tier=gold")
    obj = json.loads(kubectl("get", "cm", "p1", "-o", "json").stdout)
    assert obj["data"] == {"k2": "v2"}
    assert obj["metadata"]["annotations"]["a"] == "b"
    assert obj["metadata"]["labels"]["tier"] == "gold"
    names = kubectl("get", "cm", "-l", "tier=gold", "-o", "name").stdout.split()
    assert names == ["configmap/p1"]
    bad = kubectl("label", "configmap", "p1", "tier=silver", check=False)
    assert bad.returncode != 0 and "already has a value" in bad.stderr
    kubectl("label", "configmap", "p1", "tier=silver", "--overwrite")
    assert kubectl("get", "cm", "-l", "tier!=silver", "-o", "name").stdout.split().count("configmap/p1") == 0


def test_get_watch_streams_changes(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "watched")
    proc = kubectl.popen("get", "configmaps", "-n", "watched", "-w", "-o", "name")
    try:
        time.sleep(1.5)
        kubectl("create", "configmap", "seen", "-n", "watched")
        deadline = time.monotonic() + 15
        line = ""
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if "seen" in line:
                break
        assert "configmap/seen" in line
    finally:
        proc.kill()
        proc.wait()


def test_invalid_name_message(kubectl: Kubectl) -> None:
    r = kubectl("create", "configmap", "Bad_Name", check=False)
    assert r.returncode != 0
    assert (
        'ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain'
        in r.stderr
    )


def test_namespace_delete_cascades(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "doomed")
    kubectl("create", "configmap", "x", "-n", "doomed")
    kubectl("delete", "namespace", "doomed", "--timeout=30s")
    assert kubectl("get", "namespace", "doomed", check=False).returncode != 0


def test_crd_serves_custom_resources(kubectl: Kubectl) -> None:
    crd = """
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wd]}
  versions:
  - name: v1
    served: true
    storage: true
    subresources: {status: {}}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
    kubectl("apply", "-f", "-", input=crd)
    kubectl("wait", "--for=condition=Established", "crd/widgets.example.com", "--timeout=20s")
    w = "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n"
    kubectl("apply", "-f", "-", input=w)
    kubectl("apply", "-f", "-", input=w.replace("size: 3", "size: 4"))
    obj = json.loads(kubectl("get", "wd", "w1", "-o", "json").stdout)
    assert obj["spec"]["size"] == 4
    assert obj["metadata"]["generation"] == 2
    kubectl(
        "patch", "widget", "w1", "--subresource=status", "--type=merge", "-p", '{"status":{"ready":true}}'
    )
    obj = json.loads(kubectl("get", "widget", "w1", "-o", "json").stdout)
    assert obj["status"] == {"ready": True}
    assert obj["metadata"]["generation"] == 2  # status writes do not bump generation


def test_typed_create_commands_send_protobuf(kubectl: Kubectl) -> None:
    # kubectl's create generators use client-go's typed clients, which send protobuf bodies.
    kubectl("create", "namespace", "typed")
    kubectl("create", "deployment", "web", "--image=nginx:1.27", "--replicas=2", "--port=80", "-n", "typed")
    kubectl("create", "secret", "generic", "s1", "--from-literal=password=hunter2", "-n", "typed")
    kubectl("create", "priorityclass", "high", "--value=1000")
    dep = json.loads(kubectl("get", "deployment", "web", "-n", "typed", "-o", "json").stdout)
    assert dep["spec"]["replicas"] == 2
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.27"
    assert dep["spec"]["template"]["spec"]["containers"][0]["ports"][0]["containerPort"] == 80
    secret = json.loads(kubectl("get", "secret", "s1", "-n", "typed", "-o", "json").stdout)
    assert secret["data"]["password"] == "aHVudGVyMg=="
    pc = json.loads(kubectl("get", "priorityclass", "high", "-o", "json").stdout)
    assert pc["value"] == 1000
