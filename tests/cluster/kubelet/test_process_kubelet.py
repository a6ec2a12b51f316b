"""The control-plane kubelet in-process: a LocalCluster with one control-plane node, containers that are small
shell commands (fast to start), statuses read from the API. The scheduler as a static pod is in tests/e2e."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.cluster.kubelet.backoff import CrashLoopBackoff
from kubesched.cluster.local import ClusterOptions, LocalCluster

pytestmark = pytest.mark.slow

Obj = dict[str, Any]


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    c = LocalCluster(ClusterOptions(port=0, nodes=1, control_plane_nodes=1, data_dir=tmp_path))
    await c.start()
    assert c.process_kubelets is not None
    c.process_kubelets.backoff = CrashLoopBackoff(initial=0.6, maximum=2.4)
    try:
        yield c
    finally:
        await c.stop()


def manifests(c: LocalCluster) -> Path:
    return c.options.data_dir / "nodes" / "control-plane-0" / "etc" / "kubernetes" / "manifests"


def drop(c: LocalCluster, name: str, text: str) -> None:
    folder = manifests(c)
    (folder / f".{name}").write_text(text)
    os.replace(folder / f".{name}", folder / name)


def pod_manifest(name: str, script: str, extra: str = "", policy: str = "Always") -> str:
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: default}}
spec:
  restartPolicy: {policy}
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: kubesched
    command: [sh, -c, {script!r}]
{extra}"""


def get_pod(c: LocalCluster, name: str) -> Obj | None:
    st = c.api.store.get("/pods", ("default", name))
    return st.obj if st is not None else None


async def wait_for(fn: Callable[[], Any], timeout: float = 15.0) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        v = fn()
        if v:
            return v
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {fn}")
        await asyncio.sleep(0.05)


def cstatus(c: LocalCluster, name: str) -> Obj:
    pod = get_pod(c, name) or {}
    return ((pod.get("status") or {}).get("containerStatuses") or [{}])[0]


async def test_static_pod_mirror_and_restart_on_change_and_stop_on_removal(cluster: LocalCluster) -> None:
    drop(cluster, "p.yaml", pod_manifest("p", "echo v1; exec sleep 60"))
    mirror = await wait_for(
        lambda: (
            cstatus(cluster, "p-control-plane-0").get("state", {}).get("running")
            and get_pod(cluster, "p-control-plane-0")
        )
    )
    meta = mirror["metadata"]
    assert meta["annotations"]["kubernetes.io/config.mirror"]
    assert (
        meta["ownerReferences"][0]["kind"] == "Node"
        and meta["ownerReferences"][0]["name"] == "control-plane-0"
    )
    assert mirror["status"]["phase"] == "Running" and mirror["status"]["podIP"] == "127.0.1.1"
    pid1 = int(cstatus(cluster, "p-control-plane-0")["containerID"].rsplit("/", 1)[1])
    os.kill(pid1, 0)
    drop(cluster, "p.yaml", pod_manifest("p", "echo v2; exec sleep 60"))
    await wait_for(
        lambda: (
            get_pod(cluster, "p-control-plane-0")
            and get_pod(cluster, "p-control-plane-0")["spec"]["containers"][0]["command"][-1]
            == "echo v2; exec sleep 60"
            and cstatus(cluster, "p-control-plane-0").get("state", {}).get("running")
        )
    )
    with pytest.raises(ProcessLookupError):
        os.kill(pid1, 0)
    pid2 = int(cstatus(cluster, "p-control-plane-0")["containerID"].rsplit("/", 1)[1])
    (manifests(cluster) / "p.yaml").unlink()
    await wait_for(lambda: get_pod(cluster, "p-control-plane-0") is None)
    await wait_for(lambda: not _alive(pid2))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_malformed_manifest_is_an_event_on_the_node_and_others_keep_running(
    cluster: LocalCluster,
) -> None:
    drop(cluster, "good.yaml", pod_manifest("good", "exec sleep 60"))
    drop(cluster, "bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n")
    await wait_for(lambda: cstatus(cluster, "good-control-plane-0").get("state", {}).get("running"))

    def node_events() -> list[Obj]:
        items, _ = cluster.api.store.list("core/events", "default")
        return [st.obj for st in items if st.obj["involvedObject"].get("kind") == "Node"]

    (ev,) = await wait_for(node_events)
    assert ev["reason"] == "FailedStaticPodManifest" and ev["type"] == "Warning"
    assert ev["involvedObject"]["name"] == "control-plane-0" and ev["message"].startswith("bad.yaml: ")


async def test_crash_loop_backoff_restart_count_and_last_state(cluster: LocalCluster) -> None:
    drop(cluster, "crash.yaml", pod_manifest("crash", "echo crashing; exit 3"))
    name = "crash-control-plane-0"
    st = await wait_for(lambda: cstatus(cluster, name).get("restartCount", 0) >= 2 and cstatus(cluster, name))
    assert st["lastState"]["terminated"]["exitCode"] == 3
    assert st["lastState"]["terminated"]["reason"] == "Error"
    await wait_for(
        lambda: cstatus(cluster, name).get("state", {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
    )
    msg = cstatus(cluster, name)["state"]["waiting"]["message"]
    assert msg.startswith("back-off ") and "restarting failed container=main" in msg
    assert get_pod(cluster, name)["status"]["phase"] == "Running"
    log_dir = next(
        (cluster.options.data_dir / "nodes/control-plane-0/var/log/pods").glob(
            "default_crash-control-plane-0_*"
        )
    )
    assert sorted(p.name for p in (log_dir / "main").iterdir())[:2] == ["0.log", "1.log"]
    assert b"crashing" in (log_dir / "main" / "0.log").read_bytes()


async def test_restart_policy_never_reports_failed_and_on_failure_succeeds(cluster: LocalCluster) -> None:
    drop(cluster, "never.yaml", pod_manifest("never", "exit 7", policy="Never"))
    drop(cluster, "onfail.yaml", pod_manifest("onfail", "exit 0", policy="OnFailure"))
    pod = await wait_for(
        lambda: (
            (p := get_pod(cluster, "never-control-plane-0")) and p["status"].get("phase") == "Failed" and p
        )
    )
    st = pod["status"]["containerStatuses"][0]
    assert st["state"]["terminated"]["exitCode"] == 7 and st["restartCount"] == 0
    pod = await wait_for(
        lambda: (
            (p := get_pod(cluster, "onfail-control-plane-0"))
            and p["status"].get("phase") == "Succeeded"
            and p
        )
    )
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"


async def test_failed_liveness_probe_restarts_and_readiness_gates_ready(cluster: LocalCluster) -> None:
    probes = """    livenessProbe:
      exec: {command: [sh, -c, "test ! -e FLAG"]}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {command: [sh, -c, "exit 1"]}
      periodSeconds: 1
"""
    flag = Path(f"/tmp/kubesched-test-unhealthy-live-{os.getpid()}")
    drop(cluster, "live.yaml", pod_manifest("live", "exec sleep 60", probes.replace("FLAG", str(flag))))
    name = "live-control-plane-0"
    await wait_for(lambda: cstatus(cluster, name).get("state", {}).get("running"))
    await asyncio.sleep(1.5)
    pod = get_pod(cluster, name)
    assert pod is not None
    ready = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
    assert ready["Ready"] == "False" and cstatus(cluster, name)["restartCount"] == 0
    flag.touch()
    try:
        st = await wait_for(
            lambda: cstatus(cluster, name).get("restartCount", 0) >= 1 and cstatus(cluster, name)
        )
        assert st["lastState"]["terminated"]["exitCode"] == 128 + 15  # SIGTERM from the kubelet
    finally:
        flag.unlink()
    items, _ = cluster.api.store.list("core/events", "default")
    reasons = {st.obj["reason"] for st in items if st.obj["involvedObject"].get("name") == name}
    assert {"Unhealthy", "Killing", "Started"} <= reasons


async def test_static_pod_of_another_image_is_mirrored_and_simulated(cluster: LocalCluster) -> None:
    drop(
        cluster,
        "web.yaml",
        pod_manifest("web", "exec sleep 60").replace("image: kubesched", "image: nginx:1.27"),
    )
    name = "web-control-plane-0"
    pod = await wait_for(
        lambda: (p := get_pod(cluster, name)) and p["status"].get("phase") == "Running" and p
    )
    assert pod["metadata"]["annotations"]["kubernetes.io/config.mirror"]
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("kubesched://")
    assert cluster.process_kubelets is not None
    assert not cluster.process_kubelets.container_running(pod, "main")  # no process: simulated
    (manifests(cluster) / "web.yaml").unlink()
    await wait_for(lambda: get_pod(cluster, name) is None)


async def test_api_pod_of_the_process_image_runs_and_its_deletion_stops_it(cluster: LocalCluster) -> None:
    pods = cluster.api.rtype("", "v1", "pods")
    cluster.api.create(
        pods,
        {
            "metadata": {"name": "job"},
            "spec": {
                "nodeName": "control-plane-0",
                "automountServiceAccountToken": False,
                "terminationGracePeriodSeconds": 3,
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/kubesched:v1",
                        "command": ["sh", "-c", "echo node=$NODE; exec sleep 60"],
                        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                    }
                ],
            },
        },
        "default",
    )
    st = await wait_for(
        lambda: cstatus(cluster, "job").get("state", {}).get("running") and cstatus(cluster, "job")
    )
    pid = int(st["containerID"].rsplit("/", 1)[1])
    log_dir = next((cluster.options.data_dir / "nodes/control-plane-0/var/log/pods").glob("default_job_*"))
    await wait_for(lambda: b"node=control-plane-0" in (log_dir / "main" / "0.log").read_bytes())
    cluster.api.delete(pods, "default", "job", {})
    await wait_for(lambda: get_pod(cluster, "job") is None)
    assert not _alive(pid)


async def test_without_mount_namespaces_unmounted_volumes_are_reported_not_pretended(
    cluster: LocalCluster,
) -> None:
    pk = cluster.process_kubelets
    assert pk is not None
    await pk.namespaces_known.wait()
    pk.namespaces = False  # as on a machine where the cluster does not run as root
    drop(
        cluster,
        "vol.yaml",
        pod_manifest(
            "vol",
            "test -e /etc/kubesched-test-volume/x || echo not-mounted; exec sleep 60",
            """    volumeMounts: [{name: data, mountPath: /etc/kubesched-test-volume}]
  volumes: [{name: data, emptyDir: {}}]
""",
        ),
    )
    name = "vol-control-plane-0"
    pod = await wait_for(
        lambda: (
            (p := get_pod(cluster, name))
            and any(c["type"] == "kubesched.io/VolumesMounted" for c in p["status"].get("conditions") or [])
            and p
        )
    )
    cond = next(c for c in pod["status"]["conditions"] if c["type"] == "kubesched.io/VolumesMounted")
    assert cond["status"] == "False" and "/etc/kubesched-test-volume" in cond["message"]
    items, _ = cluster.api.store.list("core/events", "default")
    (ev,) = [st.obj for st in items if st.obj["reason"] == "VolumesNotMounted"]
    assert ev["type"] == "Warning" and "/etc/kubesched-test-volume" in ev["message"]
    assert not Path("/etc/kubesched-test-volume").exists()


async def test_init_containers_run_first_and_a_failed_one_fails_a_never_pod(cluster: LocalCluster) -> None:
    init = """  initContainers:
  - name: prepare
    image: kubesched
    command: [sh, -c, "echo preparing; sleep 0.3"]
"""
    drop(
        cluster,
        "withinit.yaml",
        pod_manifest("withinit", "exec sleep 60").replace("  containers:\n", init + "  containers:\n"),
    )
    name = "withinit-control-plane-0"
    pod = await wait_for(
        lambda: (
            (p := get_pod(cluster, name))
            and p["status"].get("phase") == "Running"
            and cstatus(cluster, name).get("state", {}).get("running")
            and p
        )
    )
    (ist,) = pod["status"]["initContainerStatuses"]
    assert ist["name"] == "prepare" and ist["state"]["terminated"]["exitCode"] == 0 and ist["ready"] is True
    assert {c["type"]: c["status"] for c in pod["status"]["conditions"]}["Initialized"] == "True"
    failing = init.replace("sleep 0.3", "exit 2")
    drop(
        cluster,
        "badinit.yaml",
        pod_manifest("badinit", "exec sleep 60", policy="Never").replace(
            "  containers:\n", failing + "  containers:\n"
        ),
    )
    pod = await wait_for(
        lambda: (
            (p := get_pod(cluster, "badinit-control-plane-0")) and p["status"].get("phase") == "Failed" and p
        )
    )
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["exitCode"] == 2
    assert "running" not in pod["status"]["containerStatuses"][0]["state"]


async def test_a_deleted_mirror_pod_comes_back_and_the_process_keeps_running(cluster: LocalCluster) -> None:
    drop(cluster, "keep.yaml", pod_manifest("keep", "exec sleep 60"))
    name = "keep-control-plane-0"
    st = await wait_for(
        lambda: cstatus(cluster, name).get("state", {}).get("running") and cstatus(cluster, name)
    )
    first = get_pod(cluster, name)
    assert first is not None
    cluster.api.delete(cluster.api.rtype("", "v1", "pods"), "default", name, {})
    again = await wait_for(
        lambda: (p := get_pod(cluster, name)) and p["metadata"]["uid"] != first["metadata"]["uid"] and p
    )
    assert (
        again["metadata"]["annotations"]["kubernetes.io/config.mirror"]
        == first["metadata"]["annotations"]["kubernetes.io/config.mirror"]
    )
    await wait_for(lambda: cstatus(cluster, name).get("containerID") == st["containerID"])
    assert _alive(int(st["containerID"].rsplit("/", 1)[1]))


def _log_text(c: LocalCluster, pod: str) -> str:
    root = c.options.data_dir / "nodes" / "control-plane-0" / "var" / "log" / "pods"
    return "".join(p.read_text() for p in root.glob(f"default_{pod}_*/main/*.log"))


async def test_a_process_sees_its_pod_name_as_hostname_and_the_node_name_with_host_network(
    cluster: LocalCluster,
) -> None:
    pk = cluster.process_kubelets
    assert pk is not None
    await pk.namespaces_known.wait()
    if not pk.namespaces:
        pytest.skip("UTS namespaces need root, as mount namespaces do")
    script = 'echo "uname=$(uname -n) env=$HOSTNAME"; exec sleep 60'
    drop(cluster, "named.yaml", pod_manifest("named", script))
    drop(cluster, "hostnet.yaml", pod_manifest("hostnet", script, extra="  hostNetwork: true\n"))
    await wait_for(lambda: "uname=" in _log_text(cluster, "named-control-plane-0"))
    await wait_for(lambda: "uname=" in _log_text(cluster, "hostnet-control-plane-0"))
    assert "uname=named-control-plane-0 env=named-control-plane-0" in _log_text(
        cluster, "named-control-plane-0"
    )
    assert "uname=control-plane-0 env=control-plane-0" in _log_text(cluster, "hostnet-control-plane-0")
    # The machine's own name is untouched.
    assert os.uname().nodename not in ("named-control-plane-0", "control-plane-0")


async def test_a_volume_over_tmp_hides_neither_later_volumes_nor_the_installation(
    cluster: LocalCluster,
) -> None:
    """The data dir (pytest's tmp_path) is under /tmp: an emptyDir mounted at /tmp covers the scratch space and the
    hostPath's source below it, which the launcher holds by file descriptor before the first mount."""
    pk = cluster.process_kubelets
    assert pk is not None
    await pk.namespaces_known.wait()
    if not pk.namespaces:
        pytest.skip("mount namespaces need root")
    assert str(cluster.options.data_dir).startswith("/tmp/")
    data = cluster.options.data_dir / "nodes" / "control-plane-0" / "srv" / "data"
    data.mkdir(parents=True)
    (data / "hello.txt").write_text("from the host\n")
    extra = """    volumeMounts:
    - {name: scratch, mountPath: /tmp}
    - {name: data, mountPath: /srv/data}
  volumes:
  - {name: scratch, emptyDir: {}}
  - {name: data, hostPath: {path: /srv/data}}
"""
    probe = f"/tmp/emptydir-probe-{os.getpid()}"
    script = (
        f'echo written > {probe} && echo "tmp=$(cat {probe}) data=$(cat /srv/data/hello.txt)"; exec sleep 60'
    )
    drop(cluster, "vols.yaml", pod_manifest("vols", script, extra=extra))
    await wait_for(lambda: "tmp=" in _log_text(cluster, "vols-control-plane-0"), timeout=20)
    assert "tmp=written data=from the host" in _log_text(cluster, "vols-control-plane-0")
    assert not Path(probe).exists()  # written to the emptyDir, not to the host's /tmp


def test_the_installation_is_bound_back_over_a_volume_that_covers_it(tmp_path: Path) -> None:
    """A venv under /tmp (as a CI clone may be) stays visible to the container when a volume is mounted at /tmp."""
    import subprocess
    import sys

    if os.geteuid() != 0:
        pytest.skip("mount namespaces need root")
    install = tmp_path / "venv"
    install.mkdir()
    (install / "marker").write_text("installed")
    empty = tmp_path / "empty"
    empty.mkdir()
    code = f"""
import os
from pathlib import Path
from kubesched.cluster.kubelet.launch import apply_mounts, enter_private_mount_namespace
enter_private_mount_namespace()
apply_mounts([{{"source": {str(empty)!r}, "target": "/tmp"}}], Path({str(tmp_path / "scratch")!r}), [{str(install)!r}])
print(open({str(install / "marker")!r}).read(), sorted(os.listdir("/tmp")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    marker, listing = out.stdout.split(" ", 1)
    assert marker == "installed"
    assert "pytest-of-root" in listing or tmp_path.parts[2] in listing  # the path to the venv exists again
