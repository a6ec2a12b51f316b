"""tests/deploy: one local cluster shared by the tests that apply deploy/ to it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from clusterproc import ClusterProcess, Kubectl, start_cluster
from deploy_helpers import KUBECTL


@pytest.fixture(scope="session")
def deploy_cluster() -> Iterator[ClusterProcess]:
    """One local cluster for tests/deploy: two simulated worker nodes and three control-plane nodes whose
    kubelet runs pods of the kubesched image as processes. Tests clean up what they create.

    Its data dir is not under /tmp: the manifests mount an emptyDir at /tmp (a read-only root file system
    needs a writable /tmp), and the local kubelet bind-mounts volumes in the container's mount namespace in
    order, so a /tmp mount would hide the node folders (volume sources, the launcher's scratch space) that
    the later mounts need when the node root is itself under /tmp."""
    if KUBECTL is None:
        pytest.skip("no kubectl binary on this machine")
    cache = Path.home() / ".cache"
    cache.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="kubesched-deploy-tests-", dir=cache))
    try:
        c = start_cluster(data / "data", "--nodes", "2", "--control-plane-nodes", "3")
        try:
            yield c
        finally:
            rc = c.stop()
            assert rc == 0, "\n".join(c.output[-50:])
    finally:
        shutil.rmtree(data, ignore_errors=True)


@pytest.fixture(scope="session")
def deploy_kubectl(deploy_cluster: ClusterProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    assert KUBECTL is not None
    return Kubectl(KUBECTL, deploy_cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
