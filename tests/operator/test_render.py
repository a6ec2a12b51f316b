"""``kubesched render``: the files it writes, same inputs same bytes, one-line errors, and every manifest accepted
by the local cluster through the real kubectl."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import yaml
from clusterproc import find_kubectl

from kubesched.client.config import load_kubeconfig
from kubesched.client.rest import ApiClient, ApiError
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.operator import contract as c
from kubesched.scheduler.config import load_config

KUBECTL = find_kubectl()


def render(tmp: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "kubesched.cli",
        "render",
        f"--asset-output-dir={tmp / 'out'}",
        f"--config-output-file={tmp / 'config.yaml'}",
        *extra,
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_inputs_same_bytes(tmp_path: Path) -> None:
    override = tmp_path / "o.yaml"
    override.write_text("percentageOfNodesToScore: 30\n")
    args = ("--manifest-image=reg.example/kubesched:v2", f"--config-override-files={override}")
    first, second = tmp_path / "a", tmp_path / "b"
    assert render(first, *args).returncode == 0
    assert render(second, *args).returncode == 0
    assert tree(first) == tree(second)
    files = tree(first)
    assert "out/bootstrap-manifests/kube-scheduler-pod.yaml" in files and "config.yaml" in files
    docs = [yaml.safe_load(v) for k, v in files.items() if k.endswith(".yaml")]
    kinds = sorted(d["kind"] for d in docs if "kind" in d)
    assert kinds.count("CustomResourceDefinition") == 3 and kinds.count("Namespace") == 3
    assert {"Deployment", "ServiceAccount", "ClusterRoleBinding", "KubeScheduler", "Scheduler", "Pod"} <= set(
        kinds
    )
    config = load_config((first / "config.yaml").read_text())
    assert config.percentage_of_nodes_to_score == 30
    assert config.leader_election.resource_namespace == c.OPERAND_NAMESPACE
    pod = yaml.safe_load(files["out/bootstrap-manifests/kube-scheduler-pod.yaml"])
    assert pod["spec"]["containers"][0]["image"] == "reg.example/kubesched:v2"
    deploy = next(d for d in docs if d["kind"] == "Deployment")
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    assert (
        container["command"] == ["kubesched", "operator"]
        and "--image=reg.example/kubesched:v2" in container["args"]
    )
    ks = next(d for d in docs if d["kind"] == "KubeScheduler")
    assert ks["spec"] == {"managementState": "Managed"} and ks["metadata"]["name"] == "cluster"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("kind: Other\n", "changes kind"),
        ("percentageOfNodesToScore: 500\n", "not in valid range"),
        ("[1]\n", "must be a mapping"),
    ],
)
def test_bad_overrides_are_one_line_errors(tmp_path: Path, content: str, message: str) -> None:
    override = tmp_path / "o.yaml"
    override.write_text(content)
    r = render(tmp_path, f"--config-override-files={override}")
    assert (
        r.returncode == 1
        and message in r.stderr
        and r.stderr.count("\n") == 1
        and "Traceback" not in r.stderr
    )
    assert not (tmp_path / "config.yaml").exists()


def test_missing_inputs(tmp_path: Path) -> None:
    r = render(tmp_path, "--config-override-files=/nonexistent.yaml")
    assert r.returncode == 1 and "No such file" in r.stderr
    r = render(tmp_path, f"--asset-input-dir={tmp_path}")
    assert r.returncode == 1 and "auth/kubeconfig is missing" in r.stderr


@pytest.fixture
async def https_cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    cluster = LocalCluster(
        ClusterOptions(port=0, data_dir=tmp_path / "c", nodes=1, heartbeat_interval=3600.0)
    )
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
async def test_kubectl_accepts_every_manifest(https_cluster: LocalCluster, tmp_path: Path) -> None:
    assert render(tmp_path).returncode == 0
    assert https_cluster.kubeconfig_path is not None and KUBECTL is not None
    base = [KUBECTL, "--kubeconfig", str(https_cluster.kubeconfig_path), "--cache-dir", str(tmp_path / "kc")]

    async def k(*args: str) -> str:
        r = await asyncio.to_thread(
            subprocess.run, [*base, *args], capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
        return r.stdout

    # The bootstrap pod is for a node's kubelet, not the API server: a server-side dry run checks it.
    await k("apply", "--dry-run=server", "-f", str(tmp_path / "out" / "bootstrap-manifests"))
    manifests = tmp_path / "out" / "manifests"
    # In file order, as cluster-bootstrap applies them: the CRDs come before the objects of their kinds.
    for path in sorted(manifests.iterdir()):
        await k("apply", "-f", str(path))
    out = await k("get", "kubescheduler", "cluster", "-o", "jsonpath={.spec.managementState}")
    assert out == "Managed"
    out = await k("get", "deployment", "-n", c.OPERATOR_NAMESPACE, "-o", "name")
    assert out.strip() == f"deployment.apps/{c.OPERATOR_DEPLOYMENT}"
    await k("get", "scheduler", "cluster")
    # Applying again changes nothing.
    for path in sorted(manifests.iterdir()):
        assert "unchanged" in await k("apply", "-f", str(path))


@pytest.mark.slow
async def test_bootstrap_scheduler_runs_on_a_control_plane_node(tmp_path: Path) -> None:
    """The rendered bootstrap pod and config, laid out on a control-plane node as the installer's bootkube.sh does
    (config into bootstrap-configs, the kubeconfig into bootstrap-secrets): the scheduler starts and takes the
    Lease the operator-installed schedulers will contend for."""
    assert render(tmp_path).returncode == 0
    cluster = LocalCluster(
        ClusterOptions(
            port=0, nodes=1, control_plane_nodes=1, data_dir=tmp_path / "c", heartbeat_interval=3600.0
        )
    )
    await cluster.start()
    try:
        node = cluster.control_plane[0]
        etc = node.root / "etc" / "kubernetes"
        (etc / "bootstrap-configs").mkdir(parents=True, exist_ok=True)
        (etc / "bootstrap-secrets").mkdir(parents=True, exist_ok=True)
        (etc / "bootstrap-configs" / "kube-scheduler-config.yaml").write_text(
            (tmp_path / "config.yaml").read_text()
        )
        # kubeadm's scheduler.conf (user system:kube-scheduler) stands in for the bootstrap kubeconfig.
        (etc / "bootstrap-secrets" / "kubeconfig").write_text((etc / "scheduler.conf").read_text())
        assert cluster.kubeconfig_path is not None
        async with ApiClient(load_kubeconfig([str(cluster.kubeconfig_path)])) as client:
            await client.create("v1", "namespaces", {"metadata": {"name": c.OPERAND_NAMESPACE}})
            manifest = etc / "manifests" / "kube-scheduler-pod.yaml"
            manifest.parent.mkdir(parents=True, exist_ok=True)
            manifest.write_text(
                (tmp_path / "out" / "bootstrap-manifests" / "kube-scheduler-pod.yaml").read_text()
            )

            async def holder() -> str:
                try:
                    lease = await client.get(
                        "coordination.k8s.io/v1", "leases", "kube-scheduler", namespace=c.OPERAND_NAMESPACE
                    )
                except ApiError:
                    return ""
                return str(lease["spec"].get("holderIdentity") or "")

            deadline = asyncio.get_running_loop().time() + 90
            while not await holder():
                assert asyncio.get_running_loop().time() < deadline, "the bootstrap scheduler took no Lease"
                await asyncio.sleep(0.3)
            mirror = await client.get(
                "v1", "pods", f"bootstrap-kube-scheduler-{node.name}", namespace="kube-system"
            )
            assert mirror["spec"]["nodeName"] == node.name
            manifest.unlink()
    finally:
        await cluster.stop()
