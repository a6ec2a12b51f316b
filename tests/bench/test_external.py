"""``kubesched bench --kubeconfig FILE --scheduler-command CMD``: against a cluster the benchmark did not start
(the local cluster as a separate process), with ``kubesched scheduler`` as the command: the run passes its
check, its objects are fenced off, and everything it created is gone afterwards: after success, failure,
Ctrl-C and SIGTERM; occupied namespaces are refused."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from clusterproc import ClusterProcess, start_cluster, wait_for

from kubesched.bench.external import BENCH_LABEL, ExternalError, ExternalObjects, scheduler_argv
from kubesched.bench.workloads import WORKLOADS
from kubesched.cli import main

SIZES = ["--nodes", "5", "--init-pods", "3", "--pods", "20"]
KUBESCHED = (
    "{python} -m kubesched.cli scheduler --config {config} --secure-port {port} --bind-address 127.0.0.1"
)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterProcess]:
    c = start_cluster(tmp_path_factory.mktemp("cluster"), "--nodes", "1", "--storage", "memory")
    try:
        yield c
    finally:
        c.stop()


def _get(c: ClusterProcess, path: str) -> dict[str, Any]:
    import asyncio

    from kubesched.client.config import load_config
    from kubesched.client.rest import ApiClient

    async def go() -> dict[str, Any]:
        client = ApiClient(load_config(str(c.kubeconfig)))
        try:
            out: dict[str, Any] = await client.raw_request("GET", path)
            return out
        finally:
            await client.close()

    return asyncio.run(go())


def _names(c: ClusterProcess, path: str) -> set[str]:
    return {o["metadata"]["name"] for o in _get(c, path)["items"]}


def _leftovers(c: ClusterProcess) -> tuple[set[str], set[str], set[str]]:
    nodes = {n for n in _names(c, "/api/v1/nodes") if n.startswith("kubesched-bench")}
    namespaces = {n for n in _names(c, "/api/v1/namespaces") if n.startswith("kubesched-bench")}
    pods = {
        p["metadata"]["name"]
        for p in _get(c, "/api/v1/pods")["items"]
        if BENCH_LABEL in (p["metadata"].get("labels") or {})
    }
    return nodes, namespaces, pods


def test_a_run_on_another_cluster_passes_and_leaves_nothing(
    cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--kubeconfig", str(cluster.kubeconfig), "--scheduler-command", KUBESCHED, *SIZES]
    assert main([*argv, "-o", "json", "--no-progress", "--timeout", "120"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["mode"] == "external" and result["check"]["passed"], result
    assert result["namespaces"] == ["kubesched-bench"] and result["schedulerName"] == "kubesched-bench"
    assert result["throughput"]["average"] > 0 and result["schedulerCPUSeconds"] > 0
    assert "cleanupProblems" not in result
    assert _leftovers(cluster) == (set(), set(), set())
    assert "node-0" in _names(cluster, "/api/v1/nodes")  # the cluster's own node is untouched


def test_a_workload_with_its_own_namespaces_and_affinity_terms(
    cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--kubeconfig", str(cluster.kubeconfig), "-w", "SchedulingPodAntiAffinity"]
    assert (
        main([*argv, "--nodes", "8", "--init-pods", "2", "--pods", "5", "-o", "json", "--no-progress"]) == 0
    )
    result = json.loads(capsys.readouterr().out)
    assert result["check"]["passed"], result
    assert sorted(result["namespaces"]) == ["kubesched-bench-sched-0", "kubesched-bench-sched-1"]
    assert _leftovers(cluster) == (set(), set(), set())


def test_objects_are_fenced_off() -> None:
    objects = ExternalObjects(WORKLOADS["SchedulingPodAffinity"].sized(3, 1, 1), "abc123", "kb", "my-sched")
    node = objects.nodes(None)[0]
    assert node["metadata"]["name"] == "kb-node-00000"
    assert node["metadata"]["labels"][BENCH_LABEL] == "abc123"
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == "kb-node-00000"
    assert node["spec"]["taints"] == [{"key": BENCH_LABEL, "value": "abc123", "effect": "NoSchedule"}]
    pod = objects.measured_pods()[0]
    assert pod["metadata"]["namespace"] == "kb-sched-1"
    assert pod["spec"]["schedulerName"] == "my-sched"
    assert pod["spec"]["nodeSelector"] == {BENCH_LABEL: "abc123"}
    assert {"key": BENCH_LABEL, "operator": "Equal", "value": "abc123", "effect": "NoSchedule"} in pod[
        "spec"
    ]["tolerations"]
    term = pod["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["namespaces"] == ["kb-sched-1", "kb-sched-0"]


def test_scheduler_command_template() -> None:
    values = {"config": "/c.yaml", "port": "1234", "kubeconfig": "/k", "scheduler_name": "s", "python": "py"}
    assert scheduler_argv("kube-scheduler --config {config} --secure-port={port} -v 2", values) == [
        "kube-scheduler",
        "--config",
        "/c.yaml",
        "--secure-port=1234",
        "-v",
        "2",
    ]
    with pytest.raises(ExternalError, match=r"unknown placeholder \{nope\}"):
        scheduler_argv("x {nope}", values)
    with pytest.raises(ExternalError, match="empty"):
        scheduler_argv("  ", values)


def test_namespace_with_pods_is_refused_unless_forced(
    cluster: ClusterProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio

    from kubesched.client.config import load_config
    from kubesched.client.rest import ApiClient

    async def make(ns: str) -> None:
        client = ApiClient(load_config(str(cluster.kubeconfig)))
        try:
            await client.create("v1", "namespaces", {"metadata": {"name": ns}})
            pod = {"metadata": {"name": "real"}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}
            await client.create("v1", "pods", pod, namespace=ns)
        finally:
            await client.close()

    asyncio.run(make("occupied"))
    argv = ["bench", "--kubeconfig", str(cluster.kubeconfig), "--bench-namespace", "occupied", *SIZES]
    assert main([*argv, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "kubesched bench: namespace occupied already has pods (e.g. real); choose another --bench-namespace "
        "or pass --force"
    )
    assert main([*argv, "--force", "-o", "json", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["check"]["passed"]
    # a namespace it did not create is kept, with its pod; its own pods and nodes are gone
    assert "occupied" in _names(cluster, "/api/v1/namespaces")
    assert _names(cluster, "/api/v1/namespaces/occupied/pods") == {"real"}
    assert not {n for n in _names(cluster, "/api/v1/nodes") if n.startswith("occupied")}


def test_bad_options_are_one_line_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--kubeconfig", str(tmp_path / "missing")]) == 2
    assert (
        capsys.readouterr().err.strip()
        == f"kubesched bench: --kubeconfig {tmp_path / 'missing'}: no such file"
    )
    assert main(["bench", "--scheduler-command", "x"]) == 2
    assert capsys.readouterr().err.strip() == "kubesched bench: --scheduler-command need(s) --kubeconfig"
    kc = tmp_path / "kc"
    kc.write_text("{}")
    assert main(["bench", "--kubeconfig", str(kc), "--scheduler-command", "x {nope}"]) == 2
    assert "unknown placeholder {nope}" in capsys.readouterr().err


def test_a_scheduler_that_exits_fails_the_run_and_cleans_up(
    cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["bench", "--kubeconfig", str(cluster.kubeconfig), "--scheduler-command", "false", *SIZES]
    assert main([*argv, "-o", "json", "--no-progress", "--timeout", "30"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert not result["check"]["passed"]
    assert "the scheduler process exited" in result["check"]["problems"][0]
    assert _leftovers(cluster) == (set(), set(), set())


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupted_run_cleans_up(cluster: ClusterProcess, sig: signal.Signals) -> None:
    # a "scheduler" that never binds: the run waits until it is interrupted
    cmd = [
        sys.executable,
        "-m",
        "kubesched.cli",
        "bench",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "--scheduler-command",
        "sleep 300",
        *SIZES,
        "--no-progress",
        "--timeout",
        "300",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: _leftovers(cluster)[2] or None, 60, "the benchmark's pods")
        time.sleep(0.5)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode in (1, 130), err
    assert "Traceback" not in err
    assert _leftovers(cluster) == (set(), set(), set())


def test_a_workload_with_volume_objects_is_refused(
    cluster: ClusterProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "bench",
        "--kubeconfig",
        str(cluster.kubeconfig),
        "-w",
        "SchedulingWithPVCs",
        *SIZES,
        "--no-progress",
    ]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "kubesched bench: SchedulingWithPVCs cannot run with --kubeconfig yet (only on the local cluster)"
    )
    assert _leftovers(cluster) == (set(), set(), set())
