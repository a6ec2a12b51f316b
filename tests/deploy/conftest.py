"""tests/deploy: one local cluster shared by the tests that apply deploy/ to it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from clusterproc import ClusterProcess, Kubectl, start_cluster
from deploy_helpers import KUBECTL


@pytest.fixture(scope="session")
def deploy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    """One local cluster for tests/deploy: two simulated worker nodes and three control-plane nodes whose
    kubelet runs pods of the kubesched image as processes. Tests clean up what they create."""
    if KUBECTL is None:
        pytest.skip("no kubectl binary on this machine")
    c = start_cluster(tmp_path_factory.mktemp("deploy-cluster"), "--nodes", "2", "--control-plane-nodes", "3")
    try:
        yield c
    finally:
        rc = c.stop()
        assert rc == 0, "\n".join(c.output[-50:])


@pytest.fixture(scope="session")
def deploy_kubectl(deploy_cluster: ClusterProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    assert KUBECTL is not None
    return Kubectl(KUBECTL, deploy_cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
