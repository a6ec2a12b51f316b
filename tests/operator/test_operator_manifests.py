"""The scheduler's static pod manifest: fields, the logLevel mapping, and the process kubelet running it from a
revision folder laid out as the installer lays it out (the scheduler starts, takes its Lease, serves /healthz)."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.client.config import load_kubeconfig
from kubesched.client.events import EventRecorder
from kubesched.client.rest import ApiClient, ApiError
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.operator import contract as c
from kubesched.operator import manifests as m
from kubesched.operator.targetconfig import TargetConfigController

Obj = dict[str, Any]


@pytest.mark.parametrize(
    ("level", "v"), [("", 2), (None, 2), ("Normal", 2), ("Debug", 4), ("Trace", 6), ("TraceAll", 10)]
)
def test_log_level_mapping(level: str | None, v: int) -> None:
    assert m.verbosity(level) == v
    args = m.scheduler_pod(log_level=level)["spec"]["containers"][0]["args"]
    assert args[-1] == f"-v={v}"


def test_unknown_log_level_and_bad_port_are_errors() -> None:
    with pytest.raises(
        m.ManifestError, match=r"spec\.logLevel 'Loud' not recognized: use one of Normal, Debug"
    ):
        m.verbosity("Loud")
    with pytest.raises(m.ManifestError, match="out of range"):
        m.scheduler_pod(secure_port=70000)


def test_pod_fields() -> None:
    pod = m.scheduler_pod(
        image="reg.example/kubesched:1", namespace="ns", secure_port=10300, serving_cert=True
    )
    meta, spec = pod["metadata"], pod["spec"]
    assert meta["name"] == c.STATIC_POD_NAME and meta["namespace"] == "ns"
    assert meta["labels"]["revision"] == "REVISION"
    assert spec["hostNetwork"] is True and spec["automountServiceAccountToken"] is False
    assert spec["priorityClassName"] == "system-node-critical" and "serviceAccountName" not in spec
    (container,) = spec["containers"]
    assert container["image"] == "reg.example/kubesched:1" and container["command"] == [
        "kubesched",
        "scheduler",
    ]
    args = container["args"]
    assert f"--config={m.CONFIG_PATH}" in args and f"--kubeconfig={m.KUBECONFIG_PATH}" in args
    assert f"--authentication-kubeconfig={m.KUBECONFIG_PATH}" in args
    assert f"--authorization-kubeconfig={m.KUBECONFIG_PATH}" in args
    assert "--secure-port=10300" in args and "--bind-address=$(HOST_IP)" in args
    assert any(
        a.startswith("--tls-cert-file=/etc/kubernetes/static-pod-resources/secrets/serving-cert/")
        for a in args
    )
    assert container["env"][0]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"scheme": "HTTPS", "port": 10300, "path": "/healthz"}
    assert container["resources"]["requests"] == {"cpu": "15m", "memory": "50Mi"}
    (volume,) = spec["volumes"]
    assert volume["hostPath"]["path"] == "/etc/kubernetes/static-pod-resources/kube-scheduler-pod-REVISION"
    assert container["volumeMounts"][0]["mountPath"] == "/etc/kubernetes/static-pod-resources"
    # Without a serving certificate the scheduler uses its own self-signed pair.
    assert not any("--tls-" in a for a in m.scheduler_pod()["spec"]["containers"][0]["args"])
    # Same input, same text; the placeholder quoted, so the installer's substitution leaves strings.
    text = m.to_yaml(m.scheduler_pod())
    assert text == m.to_yaml(m.scheduler_pod()) and 'revision: "REVISION"' in text
    assert yaml.safe_load(text.replace("REVISION", "7"))["metadata"]["labels"]["revision"] == "7"


def install_revision(node_root: Path, namespace_objects: dict[str, Obj], revision: int) -> Path:
    """What the installer does, reduced to its file layout: each input under
    ``kube-scheduler-pod-N/{configmaps,secrets}/<name>/<key>`` with REVISION replaced, then the manifest."""
    resource_dir = node_root / c.RESOURCE_DIR.lstrip("/") / f"{c.POD_CONFIGMAP}-{revision}"
    for name, obj in namespace_objects.items():
        secret = obj["kind"] == "Secret"
        folder = resource_dir / ("secrets" if secret else "configmaps") / name
        folder.mkdir(parents=True, exist_ok=True)
        for key, value in (obj.get("data") or {}).items():
            text = base64.b64decode(value).decode() if secret else value
            (folder / key).write_text(text.replace("REVISION", str(revision)))
    pod_yaml = namespace_objects[c.POD_CONFIGMAP]["data"]["pod.yaml"].replace("REVISION", str(revision))
    manifests_dir = node_root / c.POD_MANIFEST_DIR.lstrip("/")
    manifests_dir.mkdir(parents=True, exist_ok=True)
    tmp = manifests_dir / ".kube-scheduler-pod.yaml"
    tmp.write_text(pod_yaml)
    os.replace(tmp, manifests_dir / "kube-scheduler-pod.yaml")
    return resource_dir


@pytest.mark.slow
async def test_process_kubelet_runs_the_manifest(tmp_path: Path, kit: Any) -> None:
    cluster = LocalCluster(
        ClusterOptions(
            port=0, nodes=1, control_plane_nodes=1, data_dir=tmp_path / "c", heartbeat_interval=3600.0
        )
    )
    await cluster.start()
    try:
        assert cluster.kubeconfig_path is not None
        async with ApiClient(load_kubeconfig([str(cluster.kubeconfig_path)])) as client:
            await kit.install_crds(client)
            await kit.ensure_namespace(client, c.OPERATOR_NAMESPACE)
            recorder = EventRecorder(client, "kube-scheduler-operator", "test")
            ctx = c.OperatorContext(client=client, recorder=recorder)
            await kit.create_kubescheduler(client)
            await TargetConfigController().sync(ctx)
            inputs: dict[str, Obj] = {}
            for name, optional in c.REVISION_CONFIGMAPS:
                try:
                    inputs[name] = await client.get("v1", "configmaps", name, namespace=c.OPERAND_NAMESPACE)
                except ApiError:
                    assert optional, name
            for name, optional in c.REVISION_SECRETS:
                try:
                    inputs[name] = await client.get("v1", "secrets", name, namespace=c.OPERAND_NAMESPACE)
                except ApiError:
                    assert optional, name
            for obj in inputs.values():
                obj.setdefault("kind", "Secret" if "type" in obj else "ConfigMap")
            node = cluster.control_plane[0]
            install_revision(node.root, inputs, 1)
            mirror = f"{c.STATIC_POD_NAME}-{node.name}"

            async def ready() -> bool:
                try:
                    pod = await client.get("v1", "pods", mirror, namespace=c.OPERAND_NAMESPACE)
                except ApiError:
                    return False
                conds = {x["type"]: x["status"] for x in (pod.get("status") or {}).get("conditions") or []}
                return pod["metadata"]["labels"].get("revision") == "1" and conds.get("Ready") == "True"

            await kit.eventually(ready, "the scheduler's mirror pod Ready at revision 1", timeout=120)

            async def leader() -> str:
                try:
                    lease = await client.get(
                        "coordination.k8s.io/v1", "leases", "kube-scheduler", namespace=c.OPERAND_NAMESPACE
                    )
                except ApiError:
                    return ""
                return str(lease["spec"].get("holderIdentity") or "")

            try:
                holder = await kit.eventually(
                    leader, "the scheduler holding its Lease in the operand namespace"
                )
            except AssertionError:
                path = f"/api/v1/namespaces/{c.OPERAND_NAMESPACE}/pods/{mirror}/log"
                raise AssertionError(await client.raw_request("GET", path)) from None
            assert holder
            # The scheduler authenticated as its service account (the token from TokenRequest) and schedules.
            await client.create(
                "v1",
                "pods",
                {
                    "metadata": {"name": "w", "namespace": "default"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
                namespace="default",
            )

            async def bound() -> str:
                pod = await client.get("v1", "pods", "w", namespace="default")
                return str(pod["spec"].get("nodeName") or "")

            assert await kit.eventually(bound, "the workload pod bound by the static scheduler")
            await recorder.close()
            # Leave no process behind: remove the manifest and let the kubelet stop it.
            (node.root / c.POD_MANIFEST_DIR.lstrip("/") / "kube-scheduler-pod.yaml").unlink()
            await asyncio.sleep(0)
    finally:
        await cluster.stop()


def test_manifest_is_valid_yaml() -> None:
    assert (
        yaml.safe_load(m.to_yaml(m.bootstrap_scheduler_pod()))["metadata"]["name"]
        == "bootstrap-kube-scheduler"
    )
