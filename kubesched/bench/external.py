"""``kubesched bench --kubeconfig FILE --scheduler-command "CMD ..."``: a workload on somebody else's cluster.

The harness talks to any API server (kind, kubeadm, the local cluster) and starts any scheduler command,
kube-scheduler included, so the side-by-side comparison can be repeated on the user's own cluster. What it does
there, and why:

- **Fenced-off fake nodes.** Nodes are plain Node objects (no kubelet), named ``<prefix>-node-NNNNN``, labelled
  ``kubesched.io/bench=<run>`` and tainted ``kubesched.io/bench=<run>:NoSchedule``: nothing else lands on them.
  The workload's pods select that label (nodeSelector), tolerate that taint and the taints a node lifecycle
  controller puts on nodes that never report (``not-ready``, ``unreachable``), and name the scheduler under
  test (``schedulerName``), so the cluster's own scheduler leaves them alone and they never reach a real node.
- **Its own namespaces.** Workload namespace ``default`` becomes ``<prefix>``, any other ``ns`` becomes
  ``<prefix>-ns`` (pod-affinity namespace lists are rewritten alike). A namespace that already holds pods is
  refused unless ``--force``; so are nodes an earlier run left (``--force`` deletes them first).
- **Clean-up whatever happens.** Pods it created are deleted with a grace period of 0 (no kubelet will confirm
  a graceful deletion), then the namespaces it created, then its nodes; on success, failure, Ctrl-C or SIGTERM.
- **The scheduler command** is a template: ``{kubeconfig}`` (the file given), ``{config}`` (a
  KubeSchedulerConfiguration v1 the harness writes: that kubeconfig, leader election off, one profile named
  ``{scheduler_name}``, client QPS 5000), ``{port}`` (a free port for its secure port: ``/readyz`` is polled
  there), ``{scheduler_name}`` and ``{python}``. kube-scheduler reads the same file:
  ``kube-scheduler --config {config} --secure-port {port}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import shlex
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kubesched.bench.e2e import (
    CREATE_CONCURRENCY,
    SCHEDULER_QPS,
    BenchObjects,
    E2eOptions,
    Target,
    _free_port,
    _Process,
    drive,
)
from kubesched.bench.inprocess import Progress, _base_result
from kubesched.bench.profiles import config_document
from kubesched.bench.workloads import HOSTNAME_LABEL, Workload, node_name

BENCH_NODE_PREFIX = node_name(0).rstrip("0")

Obj = dict[str, Any]

BENCH_LABEL = "kubesched.io/bench"
DEFAULT_PREFIX = "kubesched-bench"
DEFAULT_SCHEDULER_NAME = "kubesched-bench"
DEFAULT_COMMAND = (
    "{python} -m kubesched.cli scheduler --config {config} --secure-port {port} --bind-address 127.0.0.1"
)
PLACEHOLDERS = ("kubeconfig", "config", "port", "scheduler_name", "python")
# Taints a node lifecycle controller adds to nodes whose kubelet never reports; fake nodes get them on a
# real cluster after its grace period, and a NoExecute one would evict the benchmark's pods.
LIFECYCLE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
CLEANUP_TIMEOUT = 120.0


class ExternalError(Exception):
    """A one-line reason to refuse the run (bad template, occupied namespace, leftover nodes)."""


def scheduler_argv(template: str, values: dict[str, str]) -> list[str]:
    """The command line of ``template`` with its placeholders filled; ExternalError names a bad one."""
    try:
        parts = shlex.split(template)
    except ValueError as e:
        raise ExternalError(f"--scheduler-command: {e}") from None
    if not parts:
        raise ExternalError("--scheduler-command is empty")
    out: list[str] = []
    for part in parts:
        try:
            out.append(part.format_map(values))
        except KeyError as e:
            known = ", ".join("{" + p + "}" for p in PLACEHOLDERS)
            raise ExternalError(
                f"--scheduler-command: unknown placeholder {{{e.args[0]}}} (known: {known})"
            ) from None
        except (ValueError, IndexError) as e:
            raise ExternalError(f"--scheduler-command: {part!r}: {e}") from None
    return out


class ExternalObjects(BenchObjects):
    """The workload's objects renamed, labelled, tainted and tolerated so they stay among themselves."""

    def __init__(self, workload: Workload, run_id: str, prefix: str, scheduler_name: str) -> None:
        super().__init__(workload)
        self.run_id = run_id
        self.prefix = prefix
        self.scheduler_name = scheduler_name
        self.namespace_map = {
            ns: prefix if ns == "default" else f"{prefix}-{ns}" for ns in workload.namespaces
        }
        self.to_create: list[str] = list(self.namespace_map.values())  # narrowed by the pre-flight check

    def node_name(self, index: int) -> str:
        return f"{self.prefix}-node-{index:05d}"

    def namespaces(self) -> list[str]:
        return list(self.to_create)

    def nodes(self, annotate: Callable[[int], dict[str, str]] | None) -> list[Obj]:
        out = super().nodes(annotate)
        for i, node in enumerate(out):
            meta = node["metadata"]
            meta["name"] = self.node_name(i)
            meta["labels"][HOSTNAME_LABEL] = meta["name"]
            meta["labels"][BENCH_LABEL] = self.run_id
            node["spec"]["taints"] = [{"key": BENCH_LABEL, "value": self.run_id, "effect": "NoSchedule"}]
        return out

    def pod(self, pod: Obj) -> Obj:
        meta = pod["metadata"]
        meta["namespace"] = self.namespace_map.get(meta["namespace"], meta["namespace"])
        meta.setdefault("labels", {})[BENCH_LABEL] = self.run_id
        spec = pod["spec"]
        if spec.get("nodeName", "").startswith(BENCH_NODE_PREFIX):  # created bound (StartupLarge)
            spec["nodeName"] = self.node_name(int(spec["nodeName"][len(BENCH_NODE_PREFIX) :]))
        spec["schedulerName"] = self.scheduler_name
        spec.setdefault("nodeSelector", {})[BENCH_LABEL] = self.run_id
        spec["tolerations"] = [
            *spec.get("tolerations", ()),
            {"key": BENCH_LABEL, "operator": "Equal", "value": self.run_id, "effect": "NoSchedule"},
            *({"key": key, "operator": "Exists"} for key in LIFECYCLE_TAINTS),
        ]
        for kind in ("podAffinity", "podAntiAffinity"):
            for term in ((spec.get("affinity") or {}).get(kind) or {}).get(
                "requiredDuringSchedulingIgnoredDuringExecution"
            ) or ():
                if term.get("namespaces"):
                    term["namespaces"] = [self.namespace_map.get(ns, ns) for ns in term["namespaces"]]
        return pod


async def preflight(client: Any, objects: ExternalObjects, force: bool) -> None:
    """Refuse occupied namespaces and leftover benchmark nodes (unless ``force``); decide what to create."""
    from kubesched.client.rest import ApiError

    existing: list[str] = []
    for ns in objects.namespace_map.values():
        try:
            await client.get("v1", "namespaces", ns)
        except ApiError as e:
            if e.status != 404:
                raise
            continue
        existing.append(ns)
        pods = await client.list("v1", "pods", namespace=ns, limit=1)
        if pods.get("items") and not force:
            raise ExternalError(
                f"namespace {ns} already has pods (e.g. {pods['items'][0]['metadata']['name']}); "
                "choose another --bench-namespace or pass --force"
            )
    objects.to_create = [ns for ns in objects.namespace_map.values() if ns not in existing]
    left = await client.list("v1", "nodes", label_selector=BENCH_LABEL, limit=1)
    if left.get("items"):
        if not force:
            raise ExternalError(
                f"nodes of an earlier benchmark run exist (e.g. {left['items'][0]['metadata']['name']}); "
                f"delete them (kubectl delete nodes -l {BENCH_LABEL}) or pass --force"
            )
        await client.raw_request("DELETE", "/api/v1/nodes", params={"labelSelector": BENCH_LABEL})
    clash = await client.list("v1", "nodes", field_selector=f"metadata.name={objects.node_name(0)}", limit=1)
    if clash.get("items"):
        raise ExternalError(
            f"a node named {objects.node_name(0)} exists already; choose another --bench-namespace"
        )


async def cleanup(client: Any, objects: ExternalObjects) -> list[str]:
    """Delete what this run created: its pods (grace period 0), the namespaces it created, its nodes.
    Returns what could not be deleted, as messages."""
    selector = f"{BENCH_LABEL}={objects.run_id}"
    problems: list[str] = []
    zero = {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0}
    for ns in objects.namespace_map.values():
        try:
            await client.raw_request(
                "DELETE", f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector}, body=zero
            )
        except Exception as e:
            if getattr(e, "status", None) != 404:
                problems.append(f"pods in {ns}: {e}")
    for ns in objects.to_create:
        try:
            await client.delete("v1", "namespaces", ns)
        except Exception as e:
            if getattr(e, "status", None) != 404:
                problems.append(f"namespace {ns}: {e}")
    try:
        await client.raw_request("DELETE", "/api/v1/nodes", params={"labelSelector": selector})
    except Exception as e:
        problems.append(f"nodes {selector}: {e}")
    return problems


def run_external(
    workload: Workload,
    options: E2eOptions,
    args: argparse.Namespace,
    progress: Progress | None = None,
) -> dict[str, Any]:
    return asyncio.run(_run(workload, options, args, progress or (lambda phase, done, total: None)))


async def _run(
    workload: Workload, options: E2eOptions, args: argparse.Namespace, progress: Progress
) -> dict[str, Any]:
    from kubesched.client.config import load_config
    from kubesched.client.rest import ApiClient

    result = _base_result(workload, "external")
    result["create"] = options.create
    kubeconfig = Path(args.kubeconfig).resolve()
    run_id = secrets.token_hex(4)
    scheduler_name = args.scheduler_name
    objects = ExternalObjects(workload, run_id, args.bench_namespace, scheduler_name)
    work = Path(tempfile.mkdtemp(prefix="kubesched-bench-"))
    config_path = work / "scheduler-config.json"
    doc = config_document(
        workload, kubeconfig=str(kubeconfig), qps=SCHEDULER_QPS, scheduler_name=scheduler_name
    )
    config_path.write_text(json.dumps(doc))
    schedulers: list[_Process] = []

    def start_scheduler() -> _Process:
        port = _free_port()
        values = {
            "kubeconfig": str(kubeconfig),
            "config": str(config_path),
            "port": str(port),
            "scheduler_name": scheduler_name,
            "python": sys.executable,
        }
        argv = scheduler_argv(args.scheduler_command, values)
        started = _Process("scheduler", argv, work / f"scheduler-{len(schedulers)}.log")
        started.port = port if "{port}" in args.scheduler_command else 0
        schedulers.append(started)
        return started

    loop = asyncio.get_running_loop()
    main_task = asyncio.current_task()
    if main_task is not None:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGTERM, main_task.cancel)
    client = ApiClient(load_config(str(kubeconfig)), max_connections=CREATE_CONCURRENCY)
    checked = False
    try:
        scheduler_argv(args.scheduler_command, dict.fromkeys(PLACEHOLDERS, "x"))  # a bad template: refuse now
        if workload.volumes:
            # its PVs, PVCs and CSINodes are not fenced off and cleaned up here yet
            raise ExternalError(
                f"{workload.name} cannot run with --kubeconfig yet (only on the local cluster)"
            )
        await preflight(client, objects, args.force)
        checked = True
        result.update(
            runId=run_id, namespaces=list(objects.namespace_map.values()), schedulerName=scheduler_name
        )
        target = Target(kubeconfig, start_scheduler, objects, pod_selector=f"{BENCH_LABEL}={run_id}")
        result.update(await drive(workload, options, progress, target, schedulers))
    except ExternalError as e:
        result.update(error=str(e), refused=not checked)
    except asyncio.CancelledError:
        result.update(error="interrupted")
    except Exception as e:
        result.update(error=f"{type(e).__name__}: {e}")
        for s in schedulers:
            result.setdefault("schedulerLog", s.tail())
    finally:
        for s in schedulers:
            s.stop()
        if checked:
            progress("cleaning up", 0, 1)
            try:
                problems = await asyncio.wait_for(asyncio.shield(cleanup(client, objects)), CLEANUP_TIMEOUT)
            except (TimeoutError, asyncio.CancelledError):
                problems = [f"clean-up did not finish; delete what is labelled {BENCH_LABEL}={run_id}"]
            if problems:
                result["cleanupProblems"] = problems
        await client.close()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGTERM)
        shutil.rmtree(work, ignore_errors=True)
    return result
