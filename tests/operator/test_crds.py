"""The operator's CRDs: the local cluster accepts them, ensure_crds is idempotent, objects round-trip through
the status subresource, ``kubectl explain`` shows the fields, and ``kubectl get clusteroperator`` prints columns."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from clusterproc import find_kubectl

from kubesched.client.config import load_kubeconfig
from kubesched.client.rest import ApiClient
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.operator import contract as c
from kubesched.operator.crds import CRD_FILES, crd_objects, differs, ensure_crds, is_established

KUBECTL = find_kubectl()


def test_differs_ignores_server_defaults() -> None:
    (crd, *_) = crd_objects()
    installed = {**crd, "spec": {**crd["spec"], "conversion": {"strategy": "None"}}}
    installed["spec"]["names"] = {**crd["spec"]["names"], "extra": "x"}
    assert not differs(installed, crd)
    assert differs({**crd, "spec": {**crd["spec"], "scope": "Namespaced"}}, crd)


def test_files_are_complete_crds() -> None:
    objs = crd_objects()
    assert [o["metadata"]["name"] + ".yaml" for o in objs] == list(CRD_FILES)
    for o in objs:
        version = o["spec"]["versions"][0]
        assert o["spec"]["scope"] == "Cluster" and version["subresources"] == {"status": {}}
        props = version["schema"]["openAPIV3Schema"]["properties"]
        assert {"spec", "status", "metadata"} <= set(props)
    ks = objs[0]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    spec = ks["spec"]["properties"]
    assert {
        "managementState",
        "logLevel",
        "operatorLogLevel",
        "unsupportedConfigOverrides",
        "observedConfig",
        "forceRedeploymentReason",
        "failedRevisionLimit",
        "succeededRevisionLimit",
    } <= set(spec)
    status = ks["status"]["properties"]
    assert {"conditions", "latestAvailableRevision", "nodeStatuses", "readyReplicas", "generations"} <= set(
        status
    )
    assert {"currentRevision", "targetRevision", "lastFailedRevision"} <= set(
        status["nodeStatuses"]["items"]["properties"]
    )


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


async def kubectl(cluster: LocalCluster, tmp_path: Path, *args: str) -> str:
    assert KUBECTL is not None and cluster.kubeconfig_path is not None
    cmd = [KUBECTL, "--kubeconfig", str(cluster.kubeconfig_path), "--cache-dir", str(tmp_path / "kc"), *args]
    r = await asyncio.to_thread(subprocess.run, cmd, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
    return r.stdout


async def test_ensure_crds_installs_once_and_objects_round_trip(https_cluster: LocalCluster) -> None:
    assert https_cluster.kubeconfig_path is not None
    async with ApiClient(load_kubeconfig([str(https_cluster.kubeconfig_path)])) as client:
        created = await ensure_crds(client)
        assert sorted(created) == sorted(f.removesuffix(".yaml") for f in CRD_FILES)
        assert await ensure_crds(client) == []  # already there: nothing created or updated
        # An older release's schema (no LoadAware) is brought up to date.
        name = "schedulers.config.openshift.io"
        old = await client.get("apiextensions.k8s.io/v1", "customresourcedefinitions", name)
        profile = old["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        profile["profile"]["enum"].remove("LoadAware")
        await client.replace("apiextensions.k8s.io/v1", "customresourcedefinitions", name, old)
        assert await ensure_crds(client) == [name]
        new = await client.get("apiextensions.k8s.io/v1", "customresourcedefinitions", name)
        spec_props = new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"][
            "properties"
        ]
        assert "LoadAware" in spec_props["profile"]["enum"]
        assert await ensure_crds(client) == []
        for name in created:
            crd = await client.get("apiextensions.k8s.io/v1", "customresourcedefinitions", name)
            assert is_established(crd)
        body: dict[str, Any] = {
            "apiVersion": c.KUBESCHEDULER_API_VERSION,
            "kind": "KubeScheduler",
            "metadata": {"name": c.SINGLETON_NAME},
            "spec": {
                "managementState": "Managed",
                "logLevel": "Debug",
                "observedConfig": {"profiles": [{"schedulerName": "default-scheduler"}]},
                "unsupportedConfigOverrides": None,
                "forceRedeploymentReason": "because",
                "succeededRevisionLimit": 3,
            },
            "status": {"latestAvailableRevision": 99},  # ignored on create: status subresource
        }
        ks = await client.create(c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, body)
        assert ks["spec"] == body["spec"] and "latestAvailableRevision" not in (ks.get("status") or {})
        ks["status"] = {
            "latestAvailableRevision": 2,
            "nodeStatuses": [{"nodeName": "control-plane-0", "currentRevision": 1, "targetRevision": 2}],
            "conditions": [
                {"type": "NodeInstallerProgressing", "status": "True", "reason": "X", "message": "m"}
            ],
        }
        got = await client.replace(
            c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME, ks, subresource="status"
        )
        assert got["status"] == ks["status"]
        sched = await client.create(
            c.SCHEDULER_CONFIG_API_VERSION,
            c.SCHEDULER_CONFIG_PLURAL,
            {
                "apiVersion": c.SCHEDULER_CONFIG_API_VERSION,
                "kind": "Scheduler",
                "metadata": {"name": c.SINGLETON_NAME},
                "spec": {"profile": "LoadAware", "defaultNodeSelector": "a=b", "mastersSchedulable": False},
            },
        )
        assert sched["spec"]["profile"] == "LoadAware"


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl not installed")
async def test_kubectl_explain_and_get(https_cluster: LocalCluster, tmp_path: Path) -> None:
    assert https_cluster.kubeconfig_path is not None
    async with ApiClient(load_kubeconfig([str(https_cluster.kubeconfig_path)])) as client:
        await ensure_crds(client)
        await client.create(
            c.CLUSTEROPERATOR_API_VERSION,
            c.CLUSTEROPERATOR_PLURAL,
            {
                "apiVersion": c.CLUSTEROPERATOR_API_VERSION,
                "kind": "ClusterOperator",
                "metadata": {"name": c.CLUSTEROPERATOR_NAME},
                "spec": {},
            },
        )
        co = await client.get(c.CLUSTEROPERATOR_API_VERSION, c.CLUSTEROPERATOR_PLURAL, c.CLUSTEROPERATOR_NAME)
        co["status"] = {
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": "2026-12-03T10:00:00Z", "reason": "AsExpected"}
                for t, s in (("Available", "True"), ("Progressing", "False"), ("Degraded", "False"))
            ],
            "versions": [{"name": "operator", "version": "1.2.3"}],
        }
        await client.replace(
            c.CLUSTEROPERATOR_API_VERSION,
            c.CLUSTEROPERATOR_PLURAL,
            c.CLUSTEROPERATOR_NAME,
            co,
            subresource="status",
        )
    out = await kubectl(https_cluster, tmp_path, "explain", "kubescheduler.spec")
    assert "KIND:       KubeScheduler" in out
    for field in ("managementState", "logLevel", "unsupportedConfigOverrides", "forceRedeploymentReason"):
        assert field in out
    out = await kubectl(https_cluster, tmp_path, "explain", "kubescheduler.status.nodeStatuses")
    assert "currentRevision" in out and "lastFailedRevision" in out
    out = await kubectl(https_cluster, tmp_path, "explain", "scheduler.spec.profile")
    assert "LoadAware" in out
    table = await kubectl(https_cluster, tmp_path, "get", "clusteroperator", c.CLUSTEROPERATOR_NAME)
    header, row = table.splitlines()[:2]
    assert header.split() == ["NAME", "VERSION", "AVAILABLE", "PROGRESSING", "DEGRADED", "SINCE"]
    assert row.split()[:5] == ["kube-scheduler", "1.2.3", "True", "False", "False"]
