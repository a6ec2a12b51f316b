"""``make demo``: the main job, end to end, on one machine.

1. ``kubesched cluster up`` — a local HTTPS API server with simulated nodes in three zones and one control-plane
   node, ``control-plane-0``, whose kubelet runs pods of the kubesched image as real processes.
2. ``kubesched operator`` installs the scheduler as upstream's cluster-kube-scheduler-operator does: it creates
   its CRDs, ``KubeScheduler/cluster`` and ``Scheduler/cluster``, renders the config, cuts revision 1 and runs
   an installer pod on control-plane-0 that writes the static pod manifest; the node's kubelet starts it (mirror
   pod ``openshift-kube-scheduler/kube-scheduler-control-plane-0``), it takes its Lease and schedules.
   ``kubectl get clusteroperator kube-scheduler`` tells the state.
3. A workload submitted with the real ``kubectl`` (or the Python client when kubectl is absent).
4. Where each pod landed, the scheduler's events, and *why* for a few pods: per-plugin scores (from the live
   scheduler's decision log when it keeps one, else replayed with ``kubesched simulate`` and the installed
   revision's config).
5. ``Scheduler/cluster`` ``spec.profile: HighNodeUtilization``: the operator rolls out revision 2, the
   restarted scheduler packs new pods (MostAllocated); the operator's events tell what happened.
6. Load-aware scheduling, when ``prometheus`` is installed: a real Prometheus records crane's metrics from the
   simulated nodes' node-exporter endpoint, ``kubesched annotator`` writes them on the nodes, and a second
   scheduler with crane's ``Dynamic`` profile places pods beside the default one; a table compares the two.
   Without Prometheus the step is skipped with a one-line hint.
7. Everything stopped cleanly.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

console = Console()

WORKLOAD = """
apiVersion: v1
kind: Namespace
metadata: {name: demo}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: batch-low}
value: 100
description: Best-effort batch work; may be preempted.
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: online-high}
value: 10000
description: Customer-facing services.
"""


def _pod(
    name: str,
    *,
    cpu: str,
    mem: str,
    labels: dict[str, str],
    priority: str | None = None,
    spread: bool = False,
    zone: str | None = None,
    image: str = "nginx:1.27",
) -> str:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "main", "image": image, "resources": {"requests": {"cpu": cpu, "memory": mem}}}
        ]
    }
    if priority:
        spec["priorityClassName"] = priority
    if spread:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": "topology.kubernetes.io/zone",
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": labels["app"]}},
            }
        ]
    if zone:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}
                            ]
                        }
                    ]
                }
            }
        }
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": "demo", "labels": labels},
            "spec": spec,
        }
    )


def workload_pods() -> list[str]:
    pods = [
        _pod(f"web-{i}", cpu="500m", mem="512Mi", labels={"app": "web"}, priority="online-high", spread=True)
        for i in range(6)
    ]
    pods += [
        _pod(f"batch-{i}", cpu="2", mem="4Gi", labels={"app": "batch"}, priority="batch-low")
        for i in range(4)
    ]
    pods.append(
        _pod("db-0", cpu="1", mem="8Gi", labels={"app": "db"}, priority="online-high", zone="local-b")
    )
    pods.append(_pod("huge-0", cpu="64", mem="1Gi", labels={"app": "huge"}))
    return pods


SHORT = {
    "NodeResourcesFit": "Fit",
    "NodeResourcesBalancedAllocation": "Balanced",
    "TaintToleration": "Taints",
    "PodTopologySpread": "Spread",
    "InterPodAffinity": "PodAff",
    "NodeAffinity": "NodeAff",
    "ImageLocality": "Image",
}


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def find_kubectl() -> str | None:
    for c in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.32", shutil.which("kubectl")):
        if c and os.access(c, os.X_OK):
            return c
    return None


OPERATOR_NS = "openshift-kube-scheduler-operator"
OPERAND_NS = "openshift-kube-scheduler"
CONTROL_PLANE_NODE = "control-plane-0"
LOAD_NS = "demo-load"
LOAD_AWARE = "load-aware"
HOG_USAGE = "6"  # cores used by the pod that makes a node busy (of 8): 0.75, above crane's 0.65


def load_aware_config(policy: Path) -> dict[str, Any]:
    """A second scheduler: the v1 default profile plus Dynamic as crane ships it, under its own name."""
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [
            {
                "schedulerName": LOAD_AWARE,
                "plugins": {
                    "filter": {"enabled": [{"name": "Dynamic"}]},
                    "score": {"enabled": [{"name": "Dynamic", "weight": 3}]},
                    "postBind": {"enabled": [{"name": "Dynamic"}]},
                },
                "pluginConfig": [{"name": "Dynamic", "args": {"policyConfigPath": str(policy)}}],
            }
        ],
    }


class Demo:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen[str]] = []
        self.kubectl = find_kubectl()
        self.kubeconfig = workdir / "admin.kubeconfig"
        self.sched_host = "127.0.1.1"  # control-plane-0's address: the static pod binds its secure port there
        self.sched_port = free_port(self.sched_host)
        self.load_sched_port = free_port()
        self.prometheus: Any = None  # a PrometheusServer, with the event loop that started it
        self.loop: asyncio.AbstractEventLoop | None = None

    def start(
        self, args: list[str], log: Path, ready: str | None, timeout: float = 60
    ) -> subprocess.Popen[str]:
        f = log.open("w")
        proc = subprocess.Popen(
            [sys.executable, "-m", "kubesched.cli", *args], stdout=f, stderr=subprocess.STDOUT, text=True
        )
        self.procs.append(proc)
        if ready is None:
            return proc
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready in log.read_text():
                return proc
            if proc.poll() is not None:
                raise RuntimeError(f"{args[0]} exited early:\n{log.read_text()}")
            time.sleep(0.1)
        raise RuntimeError(f"{args[0]} did not become ready:\n{log.read_text()}")

    def k(self, *args: str, input: str | None = None) -> str:
        assert self.kubectl
        r = subprocess.run(
            [
                self.kubectl,
                "--kubeconfig",
                str(self.kubeconfig),
                "--cache-dir",
                str(self.workdir / "kcache"),
                *args,
            ],
            input=input,
            capture_output=True,
            text=True,
            timeout=60,
        )
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def api(self) -> Any:
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))

    def stop(self) -> None:
        if self.prometheus is not None and self.loop is not None:
            self.loop.run_until_complete(self.prometheus.stop())
            self.prometheus = None
        if self.loop is not None:
            self.loop.close()
            self.loop = None
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()

    def decisions(self, port: int | None = None) -> list[dict[str, Any]]:
        from kubesched.serving import kubeconfig_get_sync  # the secure port checks who asks (admin here)

        host = self.sched_host if port is None else "127.0.0.1"
        url = f"https://{host}:{port or self.sched_port}/debug/decisions"
        try:
            status, body = kubeconfig_get_sync(url, str(self.kubeconfig))
            return list(json.loads(body).get("decisions", [])) if status == 200 else []
        except Exception:
            return []

    def run(self) -> None:
        console.rule("[bold]kubesched demo")
        console.print(
            "1. [bold]kubesched cluster up[/bold] — API server (HTTPS) + 6 simulated nodes in 3 zones "
            "+ control-plane-0 (runs kubesched pods as processes)"
        )
        self.start(
            [
                "cluster",
                "up",
                "--port",
                "0",
                "--nodes",
                "6",
                "--node-cpu",
                "8",
                "--node-memory",
                "32Gi",
                "--data-dir",
                str(self.workdir),
                "--kubeconfig-out",
                str(self.kubeconfig),
                "--node-metrics-port",
                "0",
            ],
            self.workdir / "cluster.log",
            "ready",
        )
        console.print(f"   kubeconfig: {self.kubeconfig}")
        self.operator_installs_scheduler()
        if self.kubectl:
            holder = self.k(
                "get", "lease", "-n", OPERAND_NS, "kube-scheduler", "-o", "jsonpath={.spec.holderIdentity}"
            )
            console.print(f"   lease {OPERAND_NS}/kube-scheduler holder: {holder}")
            console.print(self.k("get", "nodes", "-L", "topology.kubernetes.io/zone"))
        console.print(
            "3. Submitting the workload "
            + ("with [bold]kubectl apply[/bold]" if self.kubectl else "with the Python client")
        )
        manifests = WORKLOAD + "".join("---\n" + p + "\n" for p in workload_pods())
        if self.kubectl:
            console.print(self.k("apply", "-f", "-", input=manifests))
        else:
            self._apply_without_kubectl(manifests)
        self.wait_scheduled(expected=11)
        self.show()
        self.profile_rollout()
        self.load_aware()

    # --- 2. the operator installs the scheduler ---------------------------------------------------------------

    def custom(self) -> Any:
        from kubernetes import client, config

        return client.CustomObjectsApi(config.new_client_from_config(config_file=str(self.kubeconfig)))

    def kubescheduler(self) -> dict[str, Any]:
        return dict(
            self.custom().get_cluster_custom_object(
                "operator.openshift.io", "v1", "kubeschedulers", "cluster"
            )
        )

    def wait_revision(self, revision: int, timeout: float = 180) -> dict[str, Any]:
        """Until control-plane-0 runs ``revision`` (its static pod Ready at that revision)."""
        deadline = time.monotonic() + timeout
        status: dict[str, Any] = {}
        while time.monotonic() < deadline:
            try:
                status = self.kubescheduler().get("status") or {}
            except Exception:
                status = {}
            nodes = {n.get("nodeName"): n for n in status.get("nodeStatuses") or []}
            if (nodes.get(CONTROL_PLANE_NODE) or {}).get("currentRevision") == revision:
                return status
            time.sleep(0.3)
        raise RuntimeError(
            f"control-plane-0 did not reach revision {revision} (status {status}); see {self.workdir / 'operator.log'}"
        )

    def operator_installs_scheduler(self) -> None:
        """Step 2: ``kubesched operator`` installs revision 1 of the scheduler as a static pod on control-plane-0."""
        self.start(
            [
                "operator",
                "--kubeconfig",
                str(self.kubeconfig),
                "--secure-port",
                "0",
                "--bind-address",
                "127.0.0.1",
                "--scheduler-secure-port",
                str(self.sched_port),
                "--resync-period",
                "10s",
                "--leader-elect-lease-duration",
                "15s",
                "--leader-elect-renew-deadline",
                "10s",
                "--leader-elect-retry-period",
                "2s",
            ],
            self.workdir / "operator.log",
            "became leader",
        )
        console.print(
            "2. [bold]kubesched operator[/bold] — CRDs, KubeScheduler/cluster and Scheduler/cluster created; "
            "it leads on its Lease and installs the scheduler"
        )
        status = self.wait_revision(1)
        console.print(
            f"   revision {status.get('latestAvailableRevision')}: configmaps config-1, kube-scheduler-pod-1, ... "
            f"in {OPERAND_NS}; pod installer-1-{CONTROL_PLANE_NODE} wrote the static pod manifest"
        )
        manifest = (
            self.workdir / "nodes" / CONTROL_PLANE_NODE / "etc/kubernetes/manifests/kube-scheduler-pod.yaml"
        )
        console.print(f"   {manifest}")
        name = f"kube-scheduler-{CONTROL_PLANE_NODE}"
        core = self.api()
        deadline = time.monotonic() + 180
        log = ""
        while time.monotonic() < deadline:
            try:
                log = core.read_namespaced_pod_log(name, OPERAND_NS)
            except Exception:
                log = ""
            if "successfully acquired lease" in log or "became leader" in log:
                break
            time.sleep(0.3)
        else:
            raise RuntimeError(f"the operator's scheduler did not become leader:\n{log}")
        mirror = core.read_namespaced_pod(name, OPERAND_NS)
        status_ = mirror.status.container_statuses[0]
        console.print(
            f"   the control-plane-0 kubelet runs it: pod {OPERAND_NS}/{name} {mirror.status.phase} on "
            f"{mirror.spec.node_name} ({mirror.status.pod_ip}), revision {mirror.metadata.labels.get('revision')}, "
            f"process {status_.container_id}"
        )
        if self.kubectl:
            console.print(self.k("get", "clusteroperator", "kube-scheduler"))
            console.print(
                self.k(
                    "get",
                    "kubescheduler",
                    "cluster",
                    "-o",
                    "jsonpath=   latestAvailableRevision: {.status.latestAvailableRevision}"
                    "   nodeStatuses: {.status.nodeStatuses}",
                )
            )
            console.print(self.k("get", "pods", "-n", OPERAND_NS, "-o", "wide"))
            console.print(f"   [bold]kubectl logs -n {OPERAND_NS} {name} --tail=2[/bold]")
            for line in self.k("logs", "-n", OPERAND_NS, name, "--tail=2").splitlines():
                console.print(f"   [dim]{escape(line[:160])}[/dim]")

    def profile_rollout(self) -> None:
        import yaml

        console.print(
            "6. [bold]Scheduler/cluster spec.profile: HighNodeUtilization[/bold] — the operator observes it, "
            "renders a new config and rolls out revision 2"
        )
        started = time.monotonic()
        self.custom().patch_cluster_custom_object(
            "config.openshift.io", "v1", "schedulers", "cluster", {"spec": {"profile": "HighNodeUtilization"}}
        )
        status = self.wait_revision(2)
        console.print(
            f"   control-plane-0 at revision {status.get('latestAvailableRevision')} after "
            f"{time.monotonic() - started:.1f}s (installer-2-{CONTROL_PLANE_NODE}, new static pod Ready)"
        )
        config = (
            self.workdir
            / "nodes"
            / CONTROL_PLANE_NODE
            / "etc/kubernetes/static-pod-resources/kube-scheduler-pod-2/configmaps/config/config.yaml"
        )
        profile = (yaml.safe_load(config.read_text()).get("profiles") or [{}])[0]
        fit: dict[str, Any] = next(
            (pc for pc in profile.get("pluginConfig") or [] if pc.get("name") == "NodeResourcesFit"), {}
        )
        strategy = ((fit.get("args") or {}).get("scoringStrategy") or {}).get("type", "?")
        score = (profile.get("plugins") or {}).get("score") or {}
        console.print(f"   the restarted scheduler reads {config.relative_to(self.workdir)}:")
        console.print(
            f"   NodeResourcesFit scoringStrategy {strategy}, score enabled "
            f"{[(p['name'], p.get('weight')) for p in score.get('enabled') or []]}, disabled "
            f"{[p['name'] for p in score.get('disabled') or []]}"
        )
        if self.kubectl:
            events = self.k(
                "get",
                "events",
                "-n",
                OPERATOR_NS,
                "--sort-by=.metadata.creationTimestamp",
                "-o",
                "custom-columns=REASON:.reason,MESSAGE:.message",
            ).splitlines()
            wanted = (
                "ObservedConfigChanged",
                "RevisionTriggered",
                "NodeTargetRevisionChanged",
                "NodeCurrentRevisionChanged",
                "OperatorStatusChanged",
            )
            console.print(f"   [bold]kubectl get events -n {OPERATOR_NS}[/bold] (revision 2):")
            shown = [line for line in events if line.split(" ", 1)[0] in wanted][-7:]
            for line in shown:
                console.print(f"   [dim]{escape(line[:150])}[/dim]")
        # Packing: the same three pods now go to the busiest node that fits (MostAllocated, weight 5).
        core = self.api()
        for i in range(3):
            core.create_namespaced_pod(
                "demo",
                {
                    "metadata": {"name": f"pack-{i}", "labels": {"app": "pack"}},
                    "spec": {
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox:1.36",
                                "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                            }
                        ]
                    },
                },
            )
        self.wait_scheduled(3, prefix="pack-", timeout=120)
        placed = {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod("demo").items}
        nodes = [placed.get(f"pack-{i}") or "<pending>" for i in range(3)]
        console.print(
            f"   three new pods (250m each) under revision 2: {', '.join(nodes)} — packed, not spread"
        )
        console.print("   (the default scheduler keeps this profile for the rest of the demo)")
        if self.kubectl:
            console.print(self.k("get", "clusteroperator", "kube-scheduler"))

    def _apply_without_kubectl(self, manifests: str) -> None:
        import yaml
        from kubernetes import client, config, utils

        api = config.new_client_from_config(config_file=str(self.kubeconfig))
        docs = [d for d in yaml.safe_load_all(manifests) if d]
        for d in docs:
            if d["kind"] == "PriorityClass":
                client.SchedulingV1Api(api).create_priority_class(d)
            else:
                utils.create_from_dict(api, d)

    def wait_scheduled(
        self, expected: int, timeout: float = 30, namespace: str = "demo", prefix: str = ""
    ) -> None:
        core = self.api()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pods = [
                p for p in core.list_namespaced_pod(namespace).items if p.metadata.name.startswith(prefix)
            ]
            if sum(1 for p in pods if p.spec.node_name) >= expected:
                return
            time.sleep(0.5)

    def replay(self, names: tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """Each pod's decision as the running scheduler would make it: ``kubesched simulate`` with the installed
        revision's config, on the nodes and every other bound pod, that pod pending."""
        import yaml

        core = self.api()
        api = core.api_client
        nodes = [api.sanitize_for_serialization(n) for n in core.list_node().items]
        pods = [api.sanitize_for_serialization(p) for p in core.list_pod_for_all_namespaces().items]
        config = (
            self.workdir
            / "nodes"
            / CONTROL_PLANE_NODE
            / "etc/kubernetes/static-pod-resources/kube-scheduler-pod-1/configmaps/config/config.yaml"
        )
        out: dict[str, dict[str, Any]] = {}
        for full in names:
            ns, name = full.split("/", 1)
            items: list[dict[str, Any]] = [{**n, "apiVersion": "v1", "kind": "Node"} for n in nodes]
            for p in pods:
                meta = p.get("metadata") or {}
                if not (p.get("spec") or {}).get("nodeName"):
                    continue
                p = {**p, "apiVersion": "v1", "kind": "Pod"}
                if (meta.get("namespace"), meta.get("name")) == (ns, name):
                    p = {**p, "spec": {k: v for k, v in p["spec"].items() if k != "nodeName"}, "status": {}}
                    items.append(p)  # last: the one pending pod
                    continue
                items.insert(len(nodes), p)
            snapshot = self.workdir / "replay.yaml"
            snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}))
            args = ["simulate", "--cluster", str(snapshot), "-o", "json"]
            if config.exists():
                args += ["--config", str(config)]
            r = subprocess.run(
                [sys.executable, "-m", "kubesched.cli", *args], capture_output=True, text=True, timeout=120
            )
            if r.returncode != 0:
                continue
            actual = next(
                (
                    (p.get("spec") or {}).get("nodeName")
                    for p in pods
                    if ((p.get("metadata") or {}).get("namespace"), (p.get("metadata") or {}).get("name"))
                    == (ns, name)
                ),
                None,
            )
            for d in json.loads(r.stdout).get("placements", []):
                if d.get("pod") == full:
                    # Equal totals are broken at random: title the table with where the pod really went.
                    out[full] = {**d, "node": actual or d.get("node")}
        return out

    def show(self) -> None:
        core = self.api()
        nodes = {n.metadata.name: n for n in core.list_node().items}
        pods = sorted(core.list_namespaced_pod("demo").items, key=lambda p: p.metadata.name)
        table = Table(title="4. Where each pod landed")
        for col in ("pod", "priority", "requests", "node", "zone", "phase"):
            table.add_column(col)
        for p in pods:
            req = p.spec.containers[0].resources.requests or {}
            node = p.spec.node_name or ""
            zone = nodes[node].metadata.labels.get("topology.kubernetes.io/zone", "") if node in nodes else ""
            table.add_row(
                p.metadata.name,
                str(p.spec.priority or 0),
                f"{req.get('cpu')} / {req.get('memory')}",
                node or "[red]<pending>[/red]",
                zone,
                p.status.phase,
            )
        console.print(table)
        events = core.list_namespaced_event("demo").items
        failed = [e for e in events if e.reason == "FailedScheduling"]
        console.print(
            f"   events: {sum(1 for e in events if e.reason == 'Scheduled')} Scheduled, "
            f"{len(failed)} FailedScheduling"
        )
        for e in failed[:2]:
            console.print(f"   [yellow]{e.involved_object.name}[/yellow]: {e.message}")
        decisions = {d["pod"]: d for d in self.decisions()}
        if decisions:
            console.print(
                "5. [bold]Why[/bold] — the live scheduler's scores (normalized score x weight) for a few pods"
            )
        else:
            wanted = ("demo/web-5", "demo/batch-3", "demo/db-0")
            decisions = self.replay(wanted)
            console.print(
                "5. [bold]Why[/bold] — scores (normalized score x weight) for a few pods, replayed with "
                "[bold]kubesched simulate[/bold] and revision 1's config on the cluster as it was"
            )
        for name in ("demo/web-5", "demo/batch-3", "demo/db-0"):
            d = decisions.get(name)
            if not d:
                continue
            t = Table(title=f"{name} → {d.get('node')}")
            plugins = sorted({k for s in d.get("scores", {}).values() for k in s if k != "total"})
            t.add_column("node")
            for pl in plugins:
                t.add_column(SHORT.get(pl, pl))
            t.add_column("total", style="bold")
            ranked = sorted(d.get("scores", {}).items(), key=lambda kv: -kv[1].get("total", 0))
            for node, s in ranked[:4]:
                t.add_row(node, *[str(s.get(pl, 0)) for pl in plugins], str(s.get("total", 0)))
            console.print(t)
            by_reason: dict[str, list[str]] = {}
            for node, reasons in d.get("filtered", {}).items():
                by_reason.setdefault("; ".join(reasons), []).append(node)
            for reason, nodes_ in by_reason.items():
                console.print(f"   [dim]filtered out ({', '.join(sorted(nodes_))}): {reason}[/dim]")

    # --- 6. load-aware ------------------------------------------------------------------------------------

    def load_aware(self) -> None:
        from kubesched.loadaware.prometheus import INSTALL_HINT, installed

        if not installed():
            console.print(f"7. [bold]Load-aware scheduling[/bold]: skipped. {INSTALL_HINT}.")
            return
        import yaml

        from kubesched.cluster.nodemetrics import CPU_USAGE_ANNOTATION
        from kubesched.loadaware.policy import DEFAULT_POLICY_DOCUMENT
        from kubesched.loadaware.prometheus import PrometheusServer

        console.print(
            "7. [bold]Load-aware scheduling[/bold] — Prometheus + kubesched annotator + crane's Dynamic"
        )
        metrics_url = next(
            line.split("node metrics ", 1)[1].strip()
            for line in (self.workdir / "cluster.log").read_text().splitlines()
            if "node metrics " in line
        )
        core = self.api()
        # Make the two nodes that look emptiest by requests the busiest by usage: one pod each that asks for
        # 100m but uses 6 of the 8 cores (the simulated node-exporter follows the usage annotation).
        # The simulated nodes (those the node-exporter endpoint covers); control-plane-0 runs no workload.
        requested: dict[str, float] = {
            n.metadata.name: 0.0
            for n in core.list_node().items
            if "node-role.kubernetes.io/control-plane" not in (n.metadata.labels or {})
        }
        for p in core.list_pod_for_all_namespaces().items:
            if p.spec.node_name in requested:
                cpu = (p.spec.containers[0].resources.requests or {}).get("cpu", "0")
                requested[p.spec.node_name] += float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
        hot = sorted(requested, key=lambda n: (requested[n], n))[:2]
        core.create_namespace({"metadata": {"name": LOAD_NS}})
        for node in hot:
            core.create_namespaced_pod(
                LOAD_NS,
                {
                    "metadata": {"name": f"hog-{node}", "annotations": {CPU_USAGE_ANNOTATION: HOG_USAGE}},
                    "spec": {
                        "nodeName": node,
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox:1.36",
                                "resources": {"requests": {"cpu": "100m"}},
                            }
                        ],
                    },
                },
            )
        console.print(f"   {', '.join(hot)}: a pod requesting 100m but using {HOG_USAGE} of 8 cores on each")

        self.loop = asyncio.new_event_loop()
        self.prometheus = PrometheusServer(
            [metrics_url], scrape_interval=1.0, workdir=self.workdir / "prometheus"
        )
        self.loop.run_until_complete(self.prometheus.start())
        console.print(
            f"   prometheus {self.prometheus.url}: scraping {metrics_url}, crane's recording rules "
            "(evaluated every second here)"
        )
        self.loop.run_until_complete(
            self.prometheus.wait_for("cpu_usage_max_avg_1d", count=len(requested), timeout=45)
        )
        policy = self.workdir / "policy.yaml"
        policy.write_text(yaml.safe_dump(DEFAULT_POLICY_DOCUMENT, sort_keys=False))
        self.start(
            [
                "annotator",
                "--policy-config-path",
                str(policy),
                "--prometheus-address",
                self.prometheus.url,
                "--kubeconfig",
                str(self.kubeconfig),
                "--leader-elect=false",
                "--health-port",
                "0",
            ],
            self.workdir / "annotator.log",
            None,
        )
        loads = self._wait_for_annotations(list(requested))
        console.print(
            "   kubesched annotator wrote cpu_usage_avg_5m & co. on every node (crane's default policy)"
        )
        config = self.workdir / "load-aware.yaml"
        config.write_text(yaml.safe_dump(load_aware_config(policy), sort_keys=False))
        self.start(
            [
                "scheduler",
                "--kubeconfig",
                str(self.kubeconfig),
                "--config",
                str(config),
                "--secure-port",
                str(self.load_sched_port),
                "--bind-address",
                "127.0.0.1",
                "--explain",
                "-v",
                "2",
            ],
            self.workdir / "load-aware-scheduler.log",
            "serving securely",
        )
        console.print(
            f"   second scheduler [bold]{LOAD_AWARE}[/bold]: default profile + Dynamic (filter, score "
            "weight 3, postBind)"
        )
        for scheduler, prefix in (("default-scheduler", "web-default"), (LOAD_AWARE, "web-aware")):
            for i in range(6):
                core.create_namespaced_pod(
                    LOAD_NS,
                    {
                        "metadata": {"name": f"{prefix}-{i}"},
                        "spec": {
                            "schedulerName": scheduler,
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "nginx:1.27",
                                    "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}},
                                }
                            ],
                        },
                    },
                )
            self.wait_scheduled(6, namespace=LOAD_NS, prefix=prefix)
        self._show_load_aware(loads)

    def _wait_for_annotations(self, nodes: list[str], timeout: float = 30) -> dict[str, float]:
        core = self.api()
        deadline = time.monotonic() + timeout
        while True:
            found = {n: (core.read_node(n).metadata.annotations or {}).get("cpu_usage_avg_5m") for n in nodes}
            if all(found.values()):
                return {n: float(v.split(",")[0]) for n, v in found.items() if v}
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the annotator wrote no load annotations in {timeout:g}s "
                    f"(see {self.workdir / 'annotator.log'})"
                )
            time.sleep(0.3)

    def _show_load_aware(self, loads: dict[str, float]) -> None:
        core = self.api()
        per_node: dict[str, dict[str, int]] = {n: {"web-default": 0, "web-aware": 0} for n in loads}
        for p in core.list_namespaced_pod(LOAD_NS).items:
            prefix = p.metadata.name.rsplit("-", 1)[0]
            if p.spec.node_name in per_node and prefix in per_node[p.spec.node_name]:
                per_node[p.spec.node_name][prefix] += 1
        table = Table(title="8. Same 6 pods, two schedulers (CPU load from Prometheus via the annotations)")
        for col in ("node", "cpu_usage_avg_5m", "default-scheduler", LOAD_AWARE):
            table.add_column(col, justify="left" if col == "node" else "right")
        for node in sorted(loads):
            load = f"{loads[node]:.2f}" + (" [red](> 0.65)[/red]" if loads[node] > 0.65 else "")
            table.add_row(node, load, str(per_node[node]["web-default"]), str(per_node[node]["web-aware"]))
        console.print(table)
        hot = [n for n, v in loads.items() if v > 0.65]
        on_hot = {k: sum(per_node[n][k] for n in hot) for k in ("web-default", "web-aware")}
        console.print(
            f"   pods placed on nodes above 0.65: default-scheduler {on_hot['web-default']} of 6, "
            f"{LOAD_AWARE} {on_hot['web-aware']} of 6"
        )
        aware = [
            d for d in self.decisions(self.load_sched_port) if d["pod"].startswith(f"{LOAD_NS}/web-aware")
        ]
        if aware:
            for node, reasons in sorted(aware[0].get("filtered", {}).items()):
                console.print(
                    f"   [dim]{aware[0]['pod']}: filtered out {node}: {escape('; '.join(reasons))}[/dim]"
                )
        console.print(
            "   (the same comparison, measured at 20 nodes: kubesched bench --load-aware-comparison)"
        )


def main() -> int:
    workdir = Path(tempfile.mkdtemp(prefix="kubesched-demo-"))
    demo = Demo(workdir)
    try:
        demo.run()
        console.rule("done — stopping the scheduler and the cluster")
        return 0
    except Exception as e:
        console.print(f"[red]demo failed:[/red] {e}")
        console.print(f"logs are in {workdir}")
        return 1
    finally:
        demo.stop()


if __name__ == "__main__":
    sys.exit(main())
