"""The real kubectl against the local cluster: ``explain`` over the published schemas served at ``/openapi/v3``,
server-side field validation (Strict by default, Warn with ``--validate=warn``) and 422s with field paths."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from clusterproc import find_kubectl

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.apiserver import ApiServer, start_server

KUBECTL = find_kubectl()
pytestmark = [pytest.mark.kubectl, pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")]


class Served:
    """A ClusterApi served over HTTP on loopback, without the kubelets and controllers of a full cluster."""

    def __init__(self, api: ClusterApi, url: str) -> None:
        self.api = api
        self.url = url


@pytest.fixture
async def cluster() -> AsyncIterator[Served]:
    api = ClusterApi()
    api.bootstrap()
    runner = await start_server(ApiServer(api, require_auth=False), "127.0.0.1", 0, None)
    host, port = runner.addresses[0][:2]
    yield Served(api, f"http://{host}:{port}")
    await runner.cleanup()


async def kubectl(
    cluster: Served, tmp_path: Path, *args: str, stdin: bytes | None = None
) -> tuple[int, str, str]:
    assert KUBECTL is not None
    proc = await asyncio.create_subprocess_exec(
        KUBECTL, "--server", cluster.url, "--cache-dir", str(tmp_path / "cache"), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_explain_walks_the_published_schemas(cluster: Served, tmp_path: Path) -> None:
    code, out, err = await kubectl(cluster, tmp_path, "explain", "pod.spec")
    assert code == 0, err
    assert "KIND:       Pod" in out and "FIELD: spec <PodSpec>" in out
    assert "containers\t<[]Container> -required-" in out
    assert "tolerations\t<[]Toleration>" in out
    code, out, err = await kubectl(
        cluster, tmp_path, "explain", "deployment.spec.strategy.rollingUpdate.maxSurge"
    )
    assert code == 0, err
    assert "FIELD: maxSurge <" in out and "maximum number of pods that can be scheduled above" in out
    code, out, err = await kubectl(cluster, tmp_path, "explain", "pods.spec.containers.ports.hostPort")
    assert code == 0, err
    assert "FIELD: hostPort <integer>" in out


POD_WITH_UNKNOWN_FIELD = b"""
apiVersion: v1
kind: Pod
metadata: {name: strict, namespace: default}
spec:
  containers: [{name: c, image: busybox, imagePullPolice: Always}]
"""


async def test_kubectl_field_validation(cluster: Served, tmp_path: Path) -> None:
    # Default --validate=strict: kubectl leaves validation to the server, which refuses the unknown field.
    code, _out, err = await kubectl(cluster, tmp_path, "create", "-f", "-", stdin=POD_WITH_UNKNOWN_FIELD)
    assert code != 0
    assert 'strict decoding error: unknown field "spec.containers[0].imagePullPolice"' in err, err
    # --validate=warn: created, the field dropped, the server's warning printed.
    code, out, err = await kubectl(
        cluster, tmp_path, "create", "--validate=warn", "-f", "-", stdin=POD_WITH_UNKNOWN_FIELD
    )
    assert code == 0, err
    assert 'Warning: unknown field "spec.containers[0].imagePullPolice"' in err
    assert "pod/strict created" in out


async def test_kubectl_shows_the_field_path_of_a_422(cluster: Served, tmp_path: Path) -> None:
    manifest = b"""
apiVersion: v1
kind: Pod
metadata: {name: ports, namespace: default}
spec:
  containers: [{name: c, image: busybox, ports: [{containerPort: 80, hostPort: 99999}]}]
"""
    code, _out, err = await kubectl(cluster, tmp_path, "apply", "-f", "-", stdin=manifest)
    assert code != 0
    assert 'The Pod "ports" is invalid: spec.containers[0].ports[0].hostPort: Invalid value: 99999' in err, (
        err
    )
