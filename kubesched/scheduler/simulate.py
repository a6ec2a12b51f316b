"""``kubesched simulate``: schedule the pending pods of a cluster dump offline and explain every decision.

Reads nodes and pods (a YAML stream, or a ``v1 List`` as ``kubectl get nodes,pods -A -o yaml`` prints), loads the
scheduler configuration, and runs every pod without ``spec.nodeName`` whose ``schedulerName`` a profile serves
through the very same framework code as the live scheduler — in queue order, each placement counting against the
next — with no API server involved. Output is JSON (``-o json``) or a table for a person.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

Obj = dict[str, Any]


@dataclass
class Placement:
    pod: str
    node: str | None
    message: str = ""
    filtered: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    nominated: str | None = None

    def to_json(self) -> Obj:
        out: Obj = {"pod": self.pod, "node": self.node}
        if self.node is None:
            out["message"] = self.message
        if self.nominated:
            out["nominatedNode"] = self.nominated
        out["filtered"] = self.filtered
        out["scores"] = self.scores
        return out


def read_objects(path: str | Path) -> list[Obj]:
    """Every object in a YAML/JSON stream, with ``v1 List`` (and ``*List``) items flattened."""
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text()
    out: list[Obj] = []
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: not valid YAML: {e}") from None
    stack = [d for d in docs if d]
    while stack:
        doc = stack.pop(0)
        if not isinstance(doc, dict):
            raise ValueError(f"{path}: expected Kubernetes objects, found {type(doc).__name__}")
        if doc.get("kind", "").endswith("List") and isinstance(doc.get("items"), list):
            stack[0:0] = [i for i in doc["items"] if i]
            continue
        out.append(doc)
    return out


def _normalize_pod(pod: Obj, index: int) -> Obj:
    """What the API server would have filled in, so a hand-written pod behaves like a stored one."""
    pod = dict(pod)
    meta = dict(pod.get("metadata") or {})
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", f"sim-{index}-{meta.get('namespace')}-{meta.get('name')}")
    meta.setdefault("creationTimestamp", f"2000-01-01T00:00:{index % 60:02d}Z")
    pod["metadata"] = meta
    spec = dict(pod.get("spec") or {})
    spec.setdefault("schedulerName", "default-scheduler")
    pod["spec"] = spec
    return pod


def _normalize_node(node: Obj) -> Obj:
    node = dict(node)
    status = dict(node.get("status") or {})
    if "allocatable" not in status and "capacity" in status:
        status["allocatable"] = status["capacity"]
    node["status"] = status
    return node


async def simulate(config: Any, objects: list[Obj], *, seed: int | None = None) -> list[Placement]:
    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.framework.interface import CycleState
    from kubesched.scheduler.framework.registry import Handle
    from kubesched.scheduler.framework.runtime import Framework, fit_error_message
    from kubesched.scheduler.plugins import in_tree_registry
    from kubesched.scheduler.podinfo import QueuedPodInfo
    from kubesched.scheduler.queue import Nominator

    cache = Cache()
    nominator = Nominator()
    handle = Handle(cache=cache, client=None, nominator=nominator, parallelism=config.parallelism,
                    shared={} if seed is None else {"seed": seed})
    registry = in_tree_registry()
    frameworks = {
        p.scheduler_name: Framework.from_profile(
            p, registry, handle, percentage_of_nodes_to_score=config.percentage_of_nodes_to_score or None, seed=seed
        )
        for p in config.profiles
    }
    nodes = [_normalize_node(o) for o in objects if o.get("kind") == "Node"]
    pods = [_normalize_pod(o, i) for i, o in enumerate(objects) if o.get("kind") == "Pod"]
    for n in nodes:
        cache.on_node_add(n)
    pending: list[QueuedPodInfo] = []
    for order, p in enumerate(pods):
        if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if (p.get("spec") or {}).get("nodeName"):
            cache.on_pod_add(p)
            continue
        pi = cache.pod_info(p)
        if pi.scheduler_name in frameworks and pi.deletion_ts is None:
            pending.append(QueuedPodInfo(pi, timestamp=float(order)))
    if not pending:
        return []
    first = next(iter(frameworks.values()))
    pending.sort(key=first.queue_sort_key)
    placements: list[Placement] = []
    retried: set[str] = set()
    queue = list(pending)
    while queue:
        qpi = queue.pop(0)
        pi = qpi.pod_info
        fw = frameworks[pi.scheduler_name]
        gate = fw.run_pre_enqueue(pi)
        if not gate.ok:
            placements.append(Placement(pi.key, None, f"pod is gated: {gate.message()}"))
            continue
        state = CycleState()
        result = fw.schedule(state, pi, record_scores=True)
        filtered = result.filtered or {}
        if result.node is None:
            message = result.status.message()
            nominated = None
            if result.diagnosis is not None and result.status.code != 1 and fw.has_post_filter_plugins:
                nominated, pf = await fw.run_post_filter(state, pi, result.diagnosis)
                message = fit_error_message(cache.table.num_nodes, result.diagnosis, ", ".join(pf.reasons))
                if nominated:
                    nominator.add_nominated(pi, nominated)
                    if pi.uid not in retried:
                        # Offline, the victims are gone at once: try again right away, as the live
                        # scheduler does once their deletions are observed.
                        retried.add(pi.uid)
                        queue.insert(0, qpi)
                        continue
            placements.append(Placement(pi.key, None, message, filtered, {}, nominated))
            continue
        node = result.node
        assumed = cache.assume(pi, node)
        s = fw.run_reserve(state, assumed, node)
        if not s.ok:
            fw.run_unreserve(state, assumed, node)
            cache.forget(pi.uid)
            placements.append(Placement(pi.key, None, s.message(), filtered))
            continue
        fw.run_post_bind(state, assumed, node)
        nominator.delete_nominated(pi.uid)
        scores: dict[str, dict[str, int]] = {}
        for name, per_plugin in (result.scores or {}).items():
            entry = dict(per_plugin)
            entry["total"] = (result.total_scores or {}).get(name, sum(per_plugin.values()))
            scores[name] = entry
        placements.append(Placement(pi.key, node, "", filtered, scores))
    return placements


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="KubeSchedulerConfiguration file (default: the v1 default profile)")
    p.add_argument("--cluster", required=True,
                   help="nodes and pods: a YAML stream or a v1 List (kubectl get nodes,pods -A -o yaml); - for stdin")
    p.add_argument("--seed", type=int, default=None, help="seed for random tie-breaking (reproducible output)")
    p.add_argument("-o", "--output", choices=("json", "table"), default="table")
    p.add_argument("--top", type=int, default=3, help="nodes to show per pod in the table (default 3)")


def run(args: argparse.Namespace) -> int:
    from kubesched.scheduler.config import default_config, load_config

    try:
        config = load_config(args.config) if args.config else default_config()
    except Exception as e:
        print(f"kubesched simulate: invalid configuration: {e}", file=sys.stderr)
        return 1
    try:
        objects = read_objects(args.cluster)
    except (OSError, ValueError) as e:
        print(f"kubesched simulate: cannot read the cluster: {e}", file=sys.stderr)
        return 1
    placements = asyncio.run(simulate(config, objects, seed=args.seed))
    if args.output == "json":
        sys.stdout.buffer.write(
            orjson.dumps({"placements": [p.to_json() for p in placements]}, option=orjson.OPT_INDENT_2) + b"\n"
        )
    else:
        print_table(placements, top=args.top)
    return 0


def print_table(placements: list[Placement], *, top: int = 3) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"{len(placements)} pods scheduled offline", show_lines=True)
    table.add_column("pod")
    table.add_column("node")
    table.add_column("why: best-scored nodes (plugin score x weight)")
    for p in placements:
        if p.node is None:
            why = p.message + (f"\nnominated for preemption on {p.nominated}" if p.nominated else "")
            table.add_row(p.pod, "[red]<none>[/red]", why)
            continue
        ranked = sorted(p.scores.items(), key=lambda kv: -kv[1].get("total", 0))[:top]
        lines = []
        for node, s in ranked:
            parts = ", ".join(f"{k} {v}" for k, v in s.items() if k != "total" and v)
            lines.append(f"{node}: {s.get('total', 0)}" + (f"  ({parts})" if parts else ""))
        if p.filtered:
            lines.append(f"{len(p.filtered)} node(s) filtered out")
        table.add_row(p.pod, p.node, "\n".join(lines) or "only feasible node")
    console.print(table)
