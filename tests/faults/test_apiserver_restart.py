"""The API server SIGKILLed and restarted with the same command (issue 13, "Faults"): the annotator and the
operator, as processes that the test does not restart, carry on. The annotator's restart runs on embedded (sqlite,
the default of ``cluster up``) and etcd storage; the tests whose point is a component's own behaviour run on sqlite
(each storage's restart is covered in tests/cluster/test_durable_*.py).

- Annotator: ``kubesched annotator`` (leader election on, a renew deadline longer than the outage) reads a fake
  Prometheus on loopback whose values the test sets. The API server is SIGKILLed, the values change, the API
  server comes back: the annotator writes the new values on every node, renews its Lease, and never crashes.
- Operator: ``kubesched operator`` on a cluster with a control-plane node rolls out revision 1; the API server is
  SIGKILLed (the control-plane node's kubelet and its static pod die with it: they live in the cluster process)
  and restarted; the kubelet restarts the static pod from its manifest folder; the same operator process then
  rolls out revision 2 for ``Scheduler/cluster`` ``profile: HighNodeUtilization``, exactly once, and the static
  pod's scheduler places a pod.

Each test prints its recovery times (``-s`` shows them).
"""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from clusterproc import (
    ClusterProcess,
    ComponentProcess,
    Kubectl,
    find_kubectl,
    free_port,
    start_cluster,
    start_operator,
    wait_for,
)
from kubernetes import client, config

from kubesched.serving.fetch import kubeconfig_get_sync

pytestmark = [pytest.mark.slow]

NEEDS_ETCD = pytest.mark.skipif(
    shutil.which("etcd") is None,
    reason="etcd is not installed (scripts/ensure-etcd.sh installs Debian's etcd-server)",
)
STORAGES = [pytest.param("sqlite"), pytest.param("etcd", marks=NEEDS_ETCD)]
CPU = "cpu_usage_avg_5m"
MEM = "mem_usage_avg_5m"
LEASE_NS = "kube-system"
LEASE_NAME = "crane-scheduler-controller"


# --- processes -------------------------------------------------------------------------------------------------


def no_traceback(p: ComponentProcess) -> None:
    text = "\n".join(p.output)
    assert "Traceback" not in text, p.log(120)
    assert p.proc.poll() is None, f"exited with {p.proc.returncode}:\n{p.log(120)}"


@pytest.fixture
def clusters() -> Iterator[list[ClusterProcess]]:
    started: list[ClusterProcess] = []
    yield started
    for c in started:
        c.stop()


def sigkill(c: ClusterProcess) -> None:
    c.proc.send_signal(signal.SIGKILL)
    c.proc.wait(60)


# --- a fake Prometheus -----------------------------------------------------------------------------------------


class FakePrometheus:
    """Answers ``/api/v1/query`` (GET or POST) with one series per instance in ``values[metric]``; the metric is
    the first of ``values``' keys named in the query."""

    def __init__(self) -> None:
        self.values: dict[str, dict[str, float]] = {}
        self.queries = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _answer(self, query: str) -> None:
                fake.queries += 1
                metric = next((m for m in fake.values if m in query), None)
                now = time.time()
                result = [
                    {"metric": {"__name__": metric, "instance": instance}, "value": [now, repr(value)]}
                    for instance, value in (fake.values.get(metric, {}) if metric else {}).items()
                ]
                body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}})
                data = body.encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._answer(" ".join(parse_qs(urlparse(self.path).query).get("query", [""])))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode())
                self._answer(" ".join(form.get("query", [""])))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def prometheus() -> Iterator[FakePrometheus]:
    p = FakePrometheus()
    yield p
    p.close()


# --- the annotator ---------------------------------------------------------------------------------------------


def core(kubeconfig: Path) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def coordination(kubeconfig: Path) -> client.CoordinationV1Api:
    return client.CoordinationV1Api(config.new_client_from_config(config_file=str(kubeconfig)))


def node_ips(api: client.CoreV1Api) -> dict[str, str]:
    nodes: list[Any] = api.list_node().items
    return {
        n.metadata.name: next(a.address for a in n.status.addresses if a.type == "InternalIP") for n in nodes
    }


def load_values(api: client.CoreV1Api) -> dict[str, dict[str, str]]:
    """``node -> metric -> value`` (the value part of crane's ``value,timestamp`` annotation)."""
    out: dict[str, dict[str, str]] = {}
    nodes: list[Any] = api.list_node().items
    for n in nodes:
        ann = n.metadata.annotations or {}
        out[n.metadata.name] = {m: ann[m].split(",", 1)[0] for m in (CPU, MEM) if m in ann}
    return out


def expected(values: dict[str, dict[str, float]], ips: dict[str, str]) -> dict[str, dict[str, str]]:
    by_ip = {ip: name for name, ip in ips.items()}
    out: dict[str, dict[str, str]] = {name: {} for name in ips}
    for metric, per_instance in values.items():
        for ip, value in per_instance.items():
            out[by_ip[ip]][metric] = f"{value:.5f}"
    return out


def lease_renew_time(kubeconfig: Path) -> tuple[str, Any] | None:
    try:
        lease: Any = coordination(kubeconfig).read_namespaced_lease(LEASE_NAME, LEASE_NS)
    except Exception:
        return None
    return lease.spec.holder_identity, lease.spec.renew_time


POLICY = f"""\
apiVersion: scheduler.policy.crane.io/v1alpha1
kind: DynamicSchedulerPolicy
spec:
  syncPolicy:
  - {{name: {CPU}, period: 2s}}
  - {{name: {MEM}, period: 2s}}
  predicate:
  - {{name: {CPU}, maxLimitPecent: 0.65}}
  priority:
  - {{name: {CPU}, weight: 1}}
"""


@pytest.mark.parametrize("storage", STORAGES)
def test_annotator_writes_new_values_after_an_api_server_sigkill(
    tmp_path: Path, storage: str, clusters: list[ClusterProcess], prometheus: FakePrometheus
) -> None:
    port = free_port()
    cmd = ("--port", str(port), "--storage", storage, "--no-controllers", "--nodes", "3")
    first = start_cluster(tmp_path / "data", *cmd, timeout=120)
    clusters.append(first)
    kubeconfig = tmp_path / "kubeconfig"  # written before the restart, used after it too
    kubeconfig.write_text(first.kubeconfig.read_text())
    api = core(kubeconfig)
    ips = node_ips(api)
    prometheus.values = {
        CPU: {ip: 0.11 + i / 100 for i, ip in enumerate(sorted(ips.values()))},
        MEM: {ip: 0.21 + i / 100 for i, ip in enumerate(sorted(ips.values()))},
    }
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    # Leader election on, with a renew deadline longer than the outage: the leader keeps its Lease across the
    # restart (a shorter deadline ends the process with status 1, as crane's: the next test).
    annotator = start_annotator(
        kubeconfig,
        policy,
        prometheus,
        *("--leader-elect-lease-duration", "120s"),
        *("--leader-elect-renew-deadline", "90s"),
        *("--leader-elect-retry-period", "1s"),
    )
    try:
        want = expected(prometheus.values, ips)
        wait_for(lambda: load_values(api) == want, 120, f"the first values on every node\n{annotator.log()}")
        holder, _ = wait_for(lambda: lease_renew_time(kubeconfig), 30, "the annotator's Lease")

        sigkill(first)
        prometheus.values = {
            CPU: {ip: 0.71 + i / 100 for i, ip in enumerate(sorted(ips.values()))},
            MEM: {ip: 0.41 + i / 100 for i, ip in enumerate(sorted(ips.values()))},
        }
        want = expected(prometheus.values, ips)
        time.sleep(3)  # the annotator's syncs and renewals fail meanwhile
        second = start_cluster(tmp_path / "data", *cmd, timeout=120)
        clusters.append(second)
        back = time.monotonic()
        api = core(kubeconfig)
        wait_for(lambda: load_values(api) == want, 120, f"the new values on every node\n{annotator.log()}")
        written = time.monotonic() - back
        # The same leader renews its Lease on the restarted server.
        renewed_at = wait_for(
            lambda: (h := lease_renew_time(kubeconfig)) and h[0] == holder and h[1] is not None and h[1],
            60,
            "the Lease renewed by the same holder",
        )
        wait_for(
            lambda: (h := lease_renew_time(kubeconfig)) and h[1] is not None and h[1] > renewed_at,
            60,
            "a renewal after the restart",
        )
        renewed = time.monotonic() - back
        no_traceback(annotator)
        print(
            f"\n[{storage}] annotator: API server back -> new values on all 3 nodes {written:.1f}s,"
            f" Lease renewed by the same holder {renewed:.1f}s"
        )
    finally:
        code = annotator.stop()
    assert code == 0, annotator.log(120)


def start_annotator(
    kubeconfig: Path, policy: Path, prometheus: FakePrometheus, *election: str
) -> ComponentProcess:
    return ComponentProcess.start(
        "annotator",
        "--policy-config-path",
        str(policy),
        "--prometheus-address",
        prometheus.url,
        "--kubeconfig",
        str(kubeconfig),
        "--health-port",
        "0",
        "--leader-elect=true",
        "--leader-elect-resource-namespace",
        LEASE_NS,
        *election,
    )


# sqlite only: what this test adds (the annotator's Lease lost and taken over) does not depend on the storage; the
# test above restarts the API server on both, and tests/cluster/test_durable_*.py cover each storage's restart.
@pytest.mark.parametrize("storage", ["sqlite"])
def test_annotator_that_loses_its_lease_exits_and_its_successor_takes_over(
    tmp_path: Path, storage: str, clusters: list[ClusterProcess], prometheus: FakePrometheus
) -> None:
    """An outage longer than the renew deadline: the annotator exits with status 1 and one line, as crane's
    controller (its Deployment restarts it); the test starts a new one, which takes the Lease once the dead
    holder's expires and writes the values."""
    port = free_port()
    cmd = ("--port", str(port), "--storage", storage, "--no-controllers", "--nodes", "2")
    first = start_cluster(tmp_path / "data", *cmd, timeout=120)
    clusters.append(first)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(first.kubeconfig.read_text())
    api = core(kubeconfig)
    ips = node_ips(api)
    prometheus.values = {CPU: {ip: 0.31 for ip in ips.values()}, MEM: {ip: 0.32 for ip in ips.values()}}
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    election = [
        *("--leader-elect-lease-duration", "6s"),
        *("--leader-elect-renew-deadline", "4s"),
        *("--leader-elect-retry-period", "1s"),
    ]
    annotator = start_annotator(kubeconfig, policy, prometheus, *election)
    successor: ComponentProcess | None = None
    try:
        wait_for(lambda: load_values(api) == expected(prometheus.values, ips), 120, "the first values")
        holder, _ = wait_for(lambda: lease_renew_time(kubeconfig), 30, "the annotator's Lease")
        sigkill(first)
        prometheus.values = {CPU: {ip: 0.51 for ip in ips.values()}, MEM: {ip: 0.52 for ip in ips.values()}}
        code = annotator.proc.wait(60)  # the renew deadline passes while the API server is down
        assert code == 1, annotator.log(120)
        assert "Traceback" not in "\n".join(annotator.output), annotator.log(120)
        assert annotator.output[-1] == "kubesched annotator: leaderelection lost", annotator.log(20)
        second = start_cluster(tmp_path / "data", *cmd, timeout=120)
        clusters.append(second)
        back = time.monotonic()
        successor = start_annotator(kubeconfig, policy, prometheus, *election)  # as its Deployment would
        api = core(kubeconfig)
        want = expected(prometheus.values, ips)
        wait_for(lambda: load_values(api) == want, 120, f"the successor's values\n{successor.log()}")
        took = time.monotonic() - back
        new_holder, _ = wait_for(lambda: lease_renew_time(kubeconfig), 30, "the successor's Lease")
        assert new_holder != holder
        no_traceback(successor)
        print(f"\n[{storage}] annotator lost its Lease: API server back -> successor's values {took:.1f}s")
    finally:
        annotator.stop()
        if successor is not None:
            assert successor.stop() == 0, successor.log(120)


# --- the operator ----------------------------------------------------------------------------------------------

KUBECTL = find_kubectl()
OPERAND = "openshift-kube-scheduler"
NODE = "control-plane-0"
NODE_IP = "127.0.1.1"
MIRROR = f"kube-scheduler-{NODE}"

# The operator's default leader election for the scheduler is OpenShift's (lease 137s, retry 26s). Killing the
# cluster process kills the static pod's scheduler with it (the kubelet is in that process), without releasing its
# Lease, so the restarted scheduler would wait out the dead holder's 137s before scheduling. The test shortens
# them through spec.unsupportedConfigOverrides, set on KubeScheduler/cluster before the operator starts (it
# creates the singleton only when missing), so revision 1 already has them.
SHORT_ELECTION = {"leaderElection": {"leaseDuration": "15s", "renewDeadline": "10s", "retryPeriod": "2s"}}
CRDS = Path(__file__).parents[2] / "kubesched" / "operator" / "crds"


def prepare_kubescheduler(kubectl: Kubectl) -> None:
    for crd in sorted(CRDS.glob("*.yaml")):
        kubectl("apply", "-f", str(crd))
    kubectl("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    body = {
        "apiVersion": "operator.openshift.io/v1",
        "kind": "KubeScheduler",
        "metadata": {"name": "cluster"},
        "spec": {"managementState": "Managed", "unsupportedConfigOverrides": SHORT_ELECTION},
    }
    kubectl("create", "-f", "-", input=json.dumps(body))


def get_json(kubectl: Kubectl, *args: str) -> Any:
    r = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def node_at(kubectl: Kubectl, revision: int) -> dict[str, Any] | None:
    ks = get_json(kubectl, "kubescheduler", "cluster")
    status = (ks or {}).get("status") or {}
    if status.get("latestAvailableRevision") != revision:
        return None
    nodes = {n["nodeName"]: n for n in status.get("nodeStatuses") or []}
    return ks if (nodes.get(NODE) or {}).get("currentRevision") == revision else None


def available(kubectl: Kubectl) -> bool:
    co = get_json(kubectl, "clusteroperator", "kube-scheduler") or {}
    conds = {c["type"]: c["status"] for c in (co.get("status") or {}).get("conditions") or []}
    return conds.get("Available") == "True" and conds.get("Progressing") == "False"


def mirror_running(kubectl: Kubectl, revision: int) -> bool:
    pod = get_json(kubectl, "pod", "-n", OPERAND, MIRROR) or {}
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return labels.get("revision") == str(revision) and (pod.get("status") or {}).get("phase") == "Running"


def container_id(kubectl: Kubectl) -> str | None:
    pod = get_json(kubectl, "pod", "-n", OPERAND, MIRROR) or {}
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return next((s.get("containerID") for s in statuses if "running" in (s.get("state") or {})), None)


def operator_successes(url: str, kubeconfig: Path) -> float:
    """Syncs that ended without an error, over every operator controller, from its /metrics."""
    code, body = kubeconfig_get_sync(f"{url}/metrics", str(kubeconfig), timeout=5)
    assert code == 200, (code, body[:200])
    total = 0.0
    for line in body.decode().splitlines():
        if line.startswith("kubesched_operator_reconciles_total{"):
            total += float(line.rsplit(" ", 1)[1])
        elif line.startswith("kubesched_operator_reconcile_errors_total{"):
            total -= float(line.rsplit(" ", 1)[1])
    return total


def scheduled_events(kubectl: Kubectl) -> dict[str, int]:
    events = get_json(kubectl, "events", "-n", "default", "--field-selector", "reason=Scheduled") or {}
    counts: dict[str, int] = {}
    for e in events.get("items") or []:
        name = e["involvedObject"]["name"]
        counts[name] = counts.get(name, 0) + 1
    return counts


def run_pod(kubectl: Kubectl, name: str) -> None:
    overrides = {
        "spec": {
            "containers": [
                {"name": name, "image": "busybox:1.36", "resources": {"requests": {"cpu": "100m"}}}
            ]
        }
    }
    kubectl("run", name, "--image=busybox:1.36", "--restart=Never", "--overrides", json.dumps(overrides))


def placed(kubectl: Kubectl, name: str) -> str | None:
    pod = get_json(kubectl, "pod", name) or {}
    return (pod.get("spec") or {}).get("nodeName")


def operator_cluster(
    tmp_path: Path, storage: str, clusters: list[ClusterProcess]
) -> tuple[tuple[str, ...], Path]:
    """A cluster with control-plane-0 and KubeScheduler/cluster prepared: (its command, kubeconfig)."""
    port = free_port()
    cmd = ("--port", str(port), "--storage", storage, "--nodes", "2", "--control-plane-nodes", "1")
    first = start_cluster(tmp_path / "data", *cmd, timeout=120)
    clusters.append(first)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(first.kubeconfig.read_text())
    assert KUBECTL is not None
    kubectl = Kubectl(KUBECTL, kubeconfig, tmp_path / "kcache")
    prepare_kubescheduler(kubectl)
    return cmd, kubeconfig


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine")
# sqlite (cluster up's default) only: the operator and the kubelet's side do not depend on the storage; the
# annotator's restart test runs on both, and tests/cluster/test_durable_informer.py resumes informers across
# restarts of each storage.
@pytest.mark.parametrize("storage", ["sqlite"])
def test_operator_rolls_out_revision_2_after_an_api_server_sigkill(
    tmp_path: Path, storage: str, clusters: list[ClusterProcess]
) -> None:
    assert KUBECTL is not None
    cmd, kubeconfig = operator_cluster(tmp_path, storage, clusters)
    first = clusters[0]
    kubectl = Kubectl(KUBECTL, kubeconfig, tmp_path / "kcache")
    sched_port = free_port(NODE_IP)
    # A renew deadline longer than the outage: the same process carries on (a shorter one ends it, as
    # upstream's, for its Deployment to restart: the next test).
    operator = start_operator(kubeconfig, sched_port, lease="120s", renew="90s", retry="1s")
    try:
        wait_for(lambda: node_at(kubectl, 1), 240, f"{NODE} at revision 1\n{operator.log()}")
        wait_for(lambda: available(kubectl), 90, "the ClusterOperator Available, not Progressing")
        wait_for(lambda: mirror_running(kubectl, 1), 90, "the static pod of revision 1 running")
        resources = tmp_path / "data" / "nodes" / NODE / "etc/kubernetes/static-pod-resources"
        config1 = (resources / "kube-scheduler-pod-1/configmaps/config/config.yaml").read_text()
        assert '"leaseDuration":"15s"' in config1.replace(" ", ""), config1
        run_pod(kubectl, "before")
        before = wait_for(lambda: placed(kubectl, "before"), 120, "revision 1's scheduler to place a pod")

        url = next(
            line.rsplit(" ", 1)[1] for line in operator.output if "serving /metrics and /healthz" in line
        )
        old_container = container_id(kubectl)
        assert old_container is not None

        successes = operator_successes(url, kubeconfig)  # read as the admin: not while the API server is down
        sigkill(first)
        second = start_cluster(tmp_path / "data", *cmd, timeout=120)
        clusters.append(second)
        back = time.monotonic()
        # The operator's next successful sync (it is not restarted: its renew deadline outlasts the outage).
        wait_for(lambda: operator_successes(url, kubeconfig) > successes, 120, "a successful operator sync")
        synced = time.monotonic() - back
        # The control-plane node's kubelet (inside the cluster process, killed with it) starts the static pod
        # again from its manifest folder: a new container, whose scheduler places a pod once it holds the Lease
        # (the killed one did not release it: up to 15s).
        wait_for(
            lambda: (cid := container_id(kubectl)) and cid != old_container,
            120,
            "the static pod's scheduler started again",
        )
        static_back = time.monotonic() - back
        assert mirror_running(kubectl, 1)
        run_pod(kubectl, "after-restart")
        wait_for(lambda: placed(kubectl, "after-restart"), 120, "the restarted static pod to place a pod")
        scheduling = time.monotonic() - back
        assert node_at(kubectl, 1) and available(kubectl)

        kubectl(
            "patch",
            "scheduler",
            "cluster",
            "--type=merge",
            "-p",
            '{"spec":{"profile":"HighNodeUtilization"}}',
        )
        patched = time.monotonic()
        ks = wait_for(lambda: node_at(kubectl, 2), 240, f"{NODE} at revision 2\n{operator.log()}")
        assert ks["status"]["latestAvailableRevision"] == 2  # no duplicate revision
        wait_for(lambda: mirror_running(kubectl, 2), 120, "the static pod of revision 2 running")
        rolled = time.monotonic() - patched
        config2 = (resources / "kube-scheduler-pod-2/configmaps/config/config.yaml").read_text()
        assert "MostAllocated" in config2 and '"leaseDuration":"15s"' in config2.replace(" ", ""), config2
        revisions = kubectl("get", "configmaps", "-n", OPERAND, "-o", "name").stdout.split()
        assert sorted(r for r in revisions if r.startswith("configmap/revision-status-")) == [
            "configmap/revision-status-1",
            "configmap/revision-status-2",
        ], revisions
        run_pod(kubectl, "after-revision-2")
        wait_for(lambda: placed(kubectl, "after-revision-2"), 120, "revision 2's scheduler to place a pod")
        # No pod lost, none bound twice: the one bound before the kill kept its node, each has one Scheduled event.
        assert placed(kubectl, "before") == before
        pods = ("before", "after-restart", "after-revision-2")
        counts = wait_for(
            lambda: all((c := scheduled_events(kubectl)).get(p) for p in pods) and c,
            60,
            "a Scheduled event for every pod",
        )
        assert all(counts[p] == 1 for p in pods), counts
        assert operator.proc.poll() is None, "the operator exited:\n" + operator.log(120)
        no_traceback(operator)
        print(
            f"\n[{storage}] operator: API server back -> successful operator sync {synced:.1f}s, static pod"
            f" restarted {static_back:.1f}s, a pod placed by it {scheduling:.1f}s;"
            f" profile patched -> revision 2 running {rolled:.1f}s"
        )
    finally:
        operator.stop()


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="no kubectl binary on this machine")
def test_operator_that_loses_its_lease_exits_and_its_successor_rolls_out_once(
    tmp_path: Path, clusters: list[ClusterProcess]
) -> None:
    """An outage longer than the operator's renew deadline: it exits with status 1 ("leader election lost"), as
    upstream's; the test starts a new one as its Deployment would, which takes the Lease once the dead holder's
    expires and rolls out revision 2 exactly once. sqlite only, as the test above."""
    assert KUBECTL is not None
    cmd, kubeconfig = operator_cluster(tmp_path, "sqlite", clusters)
    kubectl = Kubectl(KUBECTL, kubeconfig, tmp_path / "kcache")
    sched_port = free_port(NODE_IP)
    short = {"lease": "6s", "renew": "4s", "retry": "1s"}
    operator = start_operator(kubeconfig, sched_port, **short)
    successor: ComponentProcess | None = None
    try:
        wait_for(lambda: node_at(kubectl, 1), 240, f"{NODE} at revision 1\n{operator.log()}")
        wait_for(lambda: available(kubectl), 90, "the ClusterOperator Available, not Progressing")
        sigkill(clusters[0])
        assert operator.proc.wait(60) == 1, operator.log(120)
        assert "Traceback" not in "\n".join(operator.output), operator.log(120)
        assert operator.output[-1] == "leader election lost", operator.log(20)
        second = start_cluster(tmp_path / "data", *cmd, timeout=120)
        clusters.append(second)
        back = time.monotonic()
        successor = start_operator(kubeconfig, sched_port, **short)  # as its Deployment would
        kubectl(
            "patch",
            "scheduler",
            "cluster",
            "--type=merge",
            "-p",
            '{"spec":{"profile":"HighNodeUtilization"}}',
        )
        ks = wait_for(lambda: node_at(kubectl, 2), 240, f"{NODE} at revision 2\n{successor.log()}")
        assert ks["status"]["latestAvailableRevision"] == 2  # no duplicate revision
        wait_for(lambda: mirror_running(kubectl, 2), 120, "the static pod of revision 2 running")
        rolled = time.monotonic() - back
        assert any(line.startswith("became leader") for line in successor.output), successor.log()
        run_pod(kubectl, "after-revision-2")
        wait_for(lambda: placed(kubectl, "after-revision-2"), 120, "revision 2's scheduler to place a pod")
        no_traceback(successor)
        print(
            f"\n[sqlite] operator lost its Lease: API server back -> successor's revision 2 running {rolled:.1f}s"
        )
    finally:
        operator.stop()
        if successor is not None:
            successor.stop()
