from __future__ import annotations

from collections.abc import Iterator

import pytest
from clusterproc import ClusterProcess, Kubectl, find_kubectl, start_cluster


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), "--nodes", "3", "--bookmark-interval", "2")
    yield c
    rc = c.stop()
    assert rc == 0, "\n".join(c.output[-50:])


@pytest.fixture(scope="session")
def kubectl(cluster: ClusterProcess, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    binary = find_kubectl()
    if binary is None:
        pytest.skip("no kubectl binary on this machine")
    return Kubectl(binary, cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
