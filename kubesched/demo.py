"""``make demo``: the main job, end to end, on one machine.

1. ``kubesched cluster up`` — a local HTTPS API server with simulated nodes in three zones.
2. ``kubesched scheduler --leader-elect`` — takes the ``kube-system/kube-scheduler`` Lease, then schedules.
3. A workload submitted with the real ``kubectl`` (or the Python client when kubectl is absent).
4. Where each pod landed, the scheduler's events, and *why* for a few pods: per-plugin scores from the live
   scheduler's decision log (``/debug/decisions`` on its secure port).
5. Everything stopped cleanly.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from rich.console import Console
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


def _pod(name: str, *, cpu: str, mem: str, labels: dict[str, str], priority: str | None = None,
         spread: bool = False, zone: str | None = None, image: str = "nginx:1.27") -> str:
    spec: dict[str, Any] = {
        "containers": [{"name": "main", "image": image, "resources": {"requests": {"cpu": cpu, "memory": mem}}}]
    }
    if priority:
        spec["priorityClassName"] = priority
    if spread:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": labels["app"]}},
        }]
    if zone:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [zone]}]}]}}}
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": name, "namespace": "demo", "labels": labels}, "spec": spec})


def workload_pods() -> list[str]:
    pods = [_pod(f"web-{i}", cpu="500m", mem="512Mi", labels={"app": "web"}, priority="online-high", spread=True)
            for i in range(6)]
    pods += [_pod(f"batch-{i}", cpu="2", mem="4Gi", labels={"app": "batch"}, priority="batch-low") for i in range(4)]
    pods.append(_pod("db-0", cpu="1", mem="8Gi", labels={"app": "db"}, priority="online-high", zone="local-b"))
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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def find_kubectl() -> str | None:
    for c in ("/usr/lib/google-cloud-sdk/bin/kubectl.1.32", shutil.which("kubectl")):
        if c and os.access(c, os.X_OK):
            return c
    return None


class Demo:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.procs: list[subprocess.Popen[str]] = []
        self.kubectl = find_kubectl()
        self.kubeconfig = workdir / "admin.kubeconfig"
        self.sched_port = free_port()

    def start(self, args: list[str], log: Path, ready: str | None, timeout: float = 60) -> subprocess.Popen[str]:
        f = log.open("w")
        proc = subprocess.Popen([sys.executable, "-m", "kubesched.cli", *args], stdout=f, stderr=subprocess.STDOUT,
                                text=True)
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
        r = subprocess.run([self.kubectl, "--kubeconfig", str(self.kubeconfig), "--cache-dir",
                            str(self.workdir / "kcache"), *args], input=input, capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {r.stderr.strip()}")
        return r.stdout

    def api(self) -> Any:
        from kubernetes import client, config

        return client.CoreV1Api(config.new_client_from_config(config_file=str(self.kubeconfig)))

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.procs):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()

    def decisions(self) -> list[dict[str, Any]]:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # the scheduler's self-signed serving certificate, on loopback
        url = f"https://127.0.0.1:{self.sched_port}/debug/decisions"
        try:
            with urllib.request.urlopen(url, context=ctx, timeout=5) as r:
                return list(json.loads(r.read()).get("decisions", []))
        except Exception:
            return []

    def run(self) -> None:
        console.rule("[bold]kubesched demo")
        console.print("1. [bold]kubesched cluster up[/bold] — API server (HTTPS) + 6 simulated nodes in 3 zones")
        self.start(["cluster", "up", "--port", "0", "--nodes", "6", "--node-cpu", "8", "--node-memory", "32Gi",
                    "--data-dir", str(self.workdir), "--kubeconfig-out", str(self.kubeconfig)],
                   self.workdir / "cluster.log", "ready")
        console.print(f"   kubeconfig: {self.kubeconfig}")
        console.print("2. [bold]kubesched scheduler --leader-elect[/bold] — campaigns for kube-system/kube-scheduler")
        self.start(["scheduler", "--kubeconfig", str(self.kubeconfig), "--leader-elect=true",
                    "--secure-port", str(self.sched_port), "--bind-address", "127.0.0.1", "--explain", "-v", "2"],
                   self.workdir / "scheduler.log", "became leader")
        if self.kubectl:
            holder = self.k("get", "lease", "-n", "kube-system", "kube-scheduler", "-o",
                            "jsonpath={.spec.holderIdentity}")
            console.print(f"   lease holder: {holder}")
            console.print(self.k("get", "nodes", "-L", "topology.kubernetes.io/zone"))
        console.print("3. Submitting the workload "
                      + ("with [bold]kubectl apply[/bold]" if self.kubectl else "with the Python client"))
        manifests = WORKLOAD + "".join("---\n" + p + "\n" for p in workload_pods())
        if self.kubectl:
            console.print(self.k("apply", "-f", "-", input=manifests))
        else:
            self._apply_without_kubectl(manifests)
        self.wait_scheduled(expected=11)
        self.show()

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

    def wait_scheduled(self, expected: int, timeout: float = 30) -> None:
        core = self.api()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pods = core.list_namespaced_pod("demo").items
            if sum(1 for p in pods if p.spec.node_name) >= expected:
                return
            time.sleep(0.5)

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
            table.add_row(p.metadata.name, str(p.spec.priority or 0), f"{req.get('cpu')} / {req.get('memory')}",
                          node or "[red]<pending>[/red]", zone, p.status.phase)
        console.print(table)
        events = core.list_namespaced_event("demo").items
        failed = [e for e in events if e.reason == "FailedScheduling"]
        console.print(f"   events: {sum(1 for e in events if e.reason == 'Scheduled')} Scheduled, "
                      f"{len(failed)} FailedScheduling")
        for e in failed[:2]:
            console.print(f"   [yellow]{e.involved_object.name}[/yellow]: {e.message}")
        decisions = {d["pod"]: d for d in self.decisions()}
        console.print("5. [bold]Why[/bold] — the live scheduler's scores (normalized score x weight) for a few pods")
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
