"""``kubesched simulate``: schedule the pending pods of a cluster dump offline and explain every decision.

Reads nodes and pods (a YAML/JSON stream, or a ``v1 List`` as ``kubectl get nodes,pods -A -o yaml`` prints;
Services, ReplicaSets, StatefulSets, ReplicationControllers, Namespaces, PodDisruptionBudgets,
PriorityClasses, PersistentVolumes, PersistentVolumeClaims, StorageClasses, CSINodes, CSIDrivers and
CSIStorageCapacities in the same file are used as the live scheduler's listers would; volumes a pod's Reserve
binds or provisions stay taken for the pods after it; DeviceClasses, ResourceSlices, ResourceClaims and
ResourceClaimTemplates too: claims are made from a pending pod's templates as the ResourceClaim controller
would, and devices allocated to a placed pod's claims stay taken), loads the scheduler
configuration, and runs every pod without ``spec.nodeName`` whose ``schedulerName`` a profile serves through
the very same framework code as the live scheduler, with no API server involved:

- queue order is the QueueSort plugin's (PrioritySort: higher priority first), pods of equal priority in
  creation order (``metadata.creationTimestamp``; pods without one come last, in file order);
- bound, non-terminal pods count against their nodes; each placement counts against the next pods;
- a pod that fits nowhere gets upstream's FailedScheduling message (PostFilter reasons included). When
  preemption nominates a node, its victims leave the cluster at once and the pod is tried again right away,
  as the live scheduler does once the deletions are observed (the nominated node first, without scoring);
- ``--seed`` seeds the random tie-breaking among equally scored nodes (and preemption's candidate offset).

Output (``-o json``): ``{"placements": [{"pod", "node", "message" (only when not placed), "filtered",
"scores"}, ...]}`` in scheduling order; ``scores[node][plugin]`` is the normalized score times the plugin's
weight, ``scores[node]["total"]`` their sum; nodes are listed by name. Two optional keys tell about
preemption: ``nominatedNode`` (the node preemption nominated the pod to, or the nomination it came with) and
``preempted`` (the victims, ``ns/name``, evicted for it). ``-o table`` shows the same for a person.
"""

from __future__ import annotations

import argparse
import asyncio
import builtins
import math
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
import yaml

if TYPE_CHECKING:
    from kubesched.scheduler.config import SchedulerConfiguration
    from kubesched.scheduler.framework.catalogue import Catalogue
    from kubesched.scheduler.podinfo import PodInfo

Obj = dict[str, Any]

# Built-in PriorityClasses every API server has (scheduling.k8s.io).
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# Workload kinds PodTopologySpread's default constraints look up (ownerReferences), by kind.
WORKLOAD_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController")


class SimulationError(ValueError):
    """The simulation cannot run as asked; the message says what to fix."""


class ClusterDumpError(SimulationError):
    """The cluster file cannot be simulated as given."""


# --- output -------------------------------------------------------------------------------------------------


@dataclass
class Placement:
    """One pod's outcome: ``node`` None when it fits nowhere (``message`` says why)."""

    pod: str
    node: str | None
    message: str = ""
    filtered: dict[str, list[str]] = field(default_factory=dict)
    scores: dict[str, dict[str, int]] = field(default_factory=dict)
    nominated: str | None = None
    preempted: list[str] = field(default_factory=list)

    def to_json(self) -> Obj:
        out: Obj = {"pod": self.pod, "node": self.node}
        if self.node is None:
            out["message"] = self.message
        if self.nominated:
            out["nominatedNode"] = self.nominated
        if self.preempted:
            out["preempted"] = list(self.preempted)
        out["filtered"] = self.filtered
        out["scores"] = self.scores
        return out


def placements_json(placements: Iterable[Placement]) -> Obj:
    return {"placements": [p.to_json() for p in placements]}


# --- reading the dump ---------------------------------------------------------------------------------------


def read_objects(path: str | Path) -> list[Obj]:
    """Every object in a YAML/JSON stream, with ``v1 List`` (and ``PodList``, ...) items flattened.

    Items of a typed list (``PodList``) may omit ``kind``, as the API server's list responses do.
    Raises ``ClusterDumpError`` for malformed YAML or documents that are not Kubernetes objects, ``OSError``
    when the file cannot be read.
    """
    text = sys.stdin.read() if str(path) == "-" else Path(path).read_text(encoding="utf-8")
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        raise ClusterDumpError(f"{path}: not valid YAML: {where}{e.problem or e}") from None
    except yaml.YAMLError as e:
        raise ClusterDumpError(f"{path}: not valid YAML: {e}") from None
    out: list[Obj] = []
    stack: list[tuple[Any, str]] = [(d, f"document {i + 1}") for i, d in enumerate(docs) if d is not None]
    while stack:
        doc, where = stack.pop(0)
        if not isinstance(doc, dict):
            raise ClusterDumpError(
                f"{path}: {where}: expected a Kubernetes object, found {type(doc).__name__}"
            )
        kind = doc.get("kind")
        if not isinstance(kind, str) or not kind:
            raise ClusterDumpError(f"{path}: {where}: the object has no kind")
        if kind.endswith("List") and "items" in doc:
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise ClusterDumpError(f"{path}: {where}: items of a {kind} must be a list")
            item_kind = kind[: -len("List")]
            typed = [
                (
                    {**item, "kind": item_kind}
                    if item_kind and isinstance(item, dict) and "kind" not in item
                    else item,
                    f"{where}, item {j + 1}",
                )
                for j, item in enumerate(items)
                if item is not None
            ]
            stack[0:0] = typed
            continue
        _check_types(doc, f"{path}: {where}")
        out.append(doc)
    return out


def _check_types(obj: Obj, where: str) -> None:
    """Refuse a value of the wrong type, as kube-apiserver's decoding against the published schemas does
    (``metadata: 5``). A dump from a real cluster passes; a hand-written file gets the API server's message."""
    from kubesched.cluster import schema

    kind = str(obj.get("kind"))
    group, _, version = str(obj.get("apiVersion") or "").rpartition("/")
    try:
        schema.check_object(group, version, kind, obj, schema.IGNORE, required=False)
    except schema.DecodeError as e:
        raise ClusterDumpError(f"{where} ({kind}): {e}") from None


def _check_valid(obj: Mapping[str, Any], what: str) -> None:
    """Refuse a pod or node kube-apiserver's validation refuses (a selector operator ``Sometimes``, an ``In``
    without values), with its field path and message. The namespace a file may leave out is the API server's
    to fill in (from the request path), so a pod without one is checked as if in ``default``; a what-if pod may
    leave out its containers' images, which no scheduling decision reads."""
    from kubesched.cluster import validation

    if obj.get("kind") == "Pod":
        meta = dict(obj.get("metadata") or {})
        meta.setdefault("namespace", "default")
        causes = [
            c
            for c in validation.validate_pod({**obj, "metadata": meta})
            if not (c.get("reason") == "FieldValueRequired" and str(c.get("field")).endswith(".image"))
        ]
    else:
        causes = validation.validate_node(dict(obj))
    if causes:
        first = causes[0]
        more = f" (and {len(causes) - 1} more)" if len(causes) > 1 else ""
        raise ClusterDumpError(f"{what}: {first.get('field')}: {first.get('message')}{more}")


def _name_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _namespace_of(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "default")


def _check_quantities(where: str, amounts: Any, path: str) -> None:
    from kubesched.scheduler.resources import parse_quantity

    if amounts is None:
        return
    if not isinstance(amounts, Mapping):
        raise ClusterDumpError(f"{where}: {path} must be a mapping of resource name to quantity")
    for name, value in amounts.items():
        try:
            parse_quantity(value)
        except (ValueError, ZeroDivisionError):
            raise ClusterDumpError(f"{where}: {path}.{name}: invalid quantity {value!r}") from None


def _check_pod(pod: Mapping[str, Any], key: str) -> None:
    spec = pod.get("spec")
    if (
        not isinstance(spec, Mapping)
        or not isinstance(spec.get("containers"), list)
        or not spec["containers"]
    ):
        raise ClusterDumpError(f"pod {key}: spec.containers must list at least one container")
    for group in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(group) or ()):
            if not isinstance(c, Mapping):
                raise ClusterDumpError(f"pod {key}: spec.{group}[{i}] must be a mapping")
            resources = c.get("resources") or {}
            for part in ("requests", "limits"):
                _check_quantities(f"pod {key}", resources.get(part), f"spec.{group}[{i}].resources.{part}")
    overhead = spec.get("overhead")
    _check_quantities(f"pod {key}", overhead, "spec.overhead")


def _check_node(node: Mapping[str, Any], name: str) -> None:
    status = node.get("status") or {}
    if not isinstance(status, Mapping):
        raise ClusterDumpError(f"node {name}: status must be a mapping")
    for part in ("capacity", "allocatable"):
        _check_quantities(f"node {name}", status.get(part), f"status.{part}")
    if not status.get("allocatable") and not status.get("capacity"):
        raise ClusterDumpError(f"node {name}: status.allocatable (or status.capacity) is required")


@dataclass
class ClusterDump:
    """The objects of a dump, checked and completed as the API server would have stored them."""

    nodes: list[Obj]
    pods: list[Obj]  # in file order
    others: dict[str, list[Obj]]  # kind -> objects (Services, Namespaces, ...)

    @classmethod
    def from_objects(cls, objects: Iterable[Mapping[str, Any]]) -> ClusterDump:
        nodes: list[Obj] = []
        pods: list[Mapping[str, Any]] = []
        others: dict[str, list[Obj]] = {}
        node_names: set[str] = set()
        for obj in objects:
            kind = obj.get("kind")
            if kind == "Node":
                name = _name_of(obj)
                if not name:
                    raise ClusterDumpError("a Node has no metadata.name")
                if name in node_names:
                    raise ClusterDumpError(f"node {name} appears more than once")
                node_names.add(name)
                _check_node(obj, name)
                _check_valid(obj, f"node {name}")
                nodes.append(_normalize_node(obj))
            elif kind == "Pod":
                pods.append(obj)
            else:
                others.setdefault(str(kind), []).append(dict(obj))
        classes = _priority_classes(others.get("PriorityClass", ()))
        keys: set[str] = set()
        normalized: list[Obj] = []
        for i, pod in enumerate(pods):
            name = _name_of(pod)
            if not name:
                raise ClusterDumpError(f"pod #{i + 1} in the file has no metadata.name")
            key = f"{_namespace_of(pod)}/{name}"
            if key in keys:
                raise ClusterDumpError(f"pod {key} appears more than once")
            keys.add(key)
            _check_pod(pod, key)
            _check_valid(pod, f"pod {key}")
            normalized.append(_normalize_pod(pod, i, classes))
        return cls(nodes, normalized, others)


def _priority_classes(objs: Iterable[Mapping[str, Any]]) -> dict[str, Obj]:
    classes: dict[str, Obj] = {
        name: {"value": value, "preemptionPolicy": "PreemptLowerPriority"}
        for name, value in SYSTEM_PRIORITY_CLASSES.items()
    }
    for obj in objs:
        classes[_name_of(obj)] = {
            "value": int(obj.get("value") or 0),
            "preemptionPolicy": obj.get("preemptionPolicy") or "PreemptLowerPriority",
            "globalDefault": bool(obj.get("globalDefault")),
        }
    return classes


def _normalize_pod(pod: Mapping[str, Any], index: int, classes: Mapping[str, Obj]) -> Obj:
    """What the API server (defaulting, Priority admission) would have filled in for a hand-written pod."""
    out = dict(pod)
    meta = dict(out.get("metadata") or {})
    meta.setdefault("namespace", "default")
    meta.setdefault("uid", f"simulated-{index}-{meta['namespace']}-{meta.get('name')}")
    out["metadata"] = meta
    spec = dict(out.get("spec") or {})
    spec.setdefault("schedulerName", "default-scheduler")
    if spec.get("priority") is None:
        class_name = spec.get("priorityClassName")
        chosen: Mapping[str, Any] | None = None
        if class_name:
            chosen = classes.get(class_name)
            if chosen is None:
                key = f"{meta['namespace']}/{meta.get('name')}"
                raise ClusterDumpError(f'pod {key}: no PriorityClass with name "{class_name}" was found')
        else:
            chosen = next((c for c in classes.values() if c.get("globalDefault")), None)
        if chosen is not None:
            spec["priority"] = chosen["value"]
            spec.setdefault("preemptionPolicy", chosen["preemptionPolicy"])
    out["spec"] = spec
    return out


def _normalize_node(node: Mapping[str, Any]) -> Obj:
    out = dict(node)
    status = dict(out.get("status") or {})
    if not status.get("allocatable") and status.get("capacity"):
        status["allocatable"] = status["capacity"]
    out["status"] = status
    return out


class DumpNamespaces:
    """The namespaces of the dump, as the live scheduler's namespace lister gives them to plugins."""

    def __init__(self, others: Mapping[str, list[Obj]]) -> None:
        self._namespaces = {_name_of(ns): ns for ns in others.get("Namespace", ())}

    def get(self, name: str) -> Obj | None:
        return self._namespaces.get(name)

    def list(self) -> builtins.list[Obj]:
        return list(self._namespaces.values())


class DumpWorkloads:
    """Services, owners and PDBs of the dump (the live scheduler's workload and PDB listers)."""

    def __init__(self, others: Mapping[str, list[Obj]]) -> None:
        self._others = others
        self._workloads = {
            (kind, _namespace_of(o), _name_of(o)): o for kind in WORKLOAD_KINDS for o in others.get(kind, ())
        }

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self._workloads.get((kind, namespace or "default", name))

    def services(self, namespace: str) -> list[Obj]:
        return [s for s in self._others.get("Service", ()) if _namespace_of(s) == namespace]

    def pdbs(self) -> list[Obj]:
        return list(self._others.get("PodDisruptionBudget", ()))


# --- the simulation -----------------------------------------------------------------------------------------


def _queue_time(pi: PodInfo) -> float:
    created = (pi.pod.get("metadata") or {}).get("creationTimestamp")
    return pi.creation_ts if created else math.inf


async def simulate(
    config: SchedulerConfiguration,
    objects: Iterable[Mapping[str, Any]],
    *,
    seed: int | None = None,
    catalogue: Catalogue | None = None,
) -> list[Placement]:
    """Schedule the dump's pending pods in queue order; one ``Placement`` per pod tried, in that order.

    ``catalogue``: the plugins to build the profiles from (the one ``config`` was loaded with; default: the
    in-tree plugins).

    Raises ``ClusterDumpError`` when the objects cannot be simulated (missing names, bad quantities, ...),
    ``SimulationError`` when a profile's plugins cannot be built.
    """
    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.cycle import CycleFailure, scheduling_cycle
    from kubesched.scheduler.dra.objects import DRA_KINDS, DraObjects
    from kubesched.scheduler.dra.offline import instantiate_claims
    from kubesched.scheduler.framework.handle import Handle
    from kubesched.scheduler.framework.interface import CycleState
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.plugins import in_tree_catalogue
    from kubesched.scheduler.podinfo import QueuedPodInfo
    from kubesched.scheduler.queue import Nominator
    from kubesched.scheduler.volumes.listers import STORAGE_KINDS, static_volumes

    dump = ClusterDump.from_objects(objects)
    dra = DraObjects()
    dra.add_all(o for kind in DRA_KINDS for o in dump.others.get(kind, ()))
    workloads = DumpWorkloads(dump.others)
    cache = Cache()
    nominator = Nominator()
    placements: list[Placement] = []
    victims_of: dict[str, list[str]] = {}  # preemptor uid -> victims (ns/name)

    def evict(victim: PodInfo, preemptor: PodInfo, node: str) -> None:
        # Offline, a victim's deletion is observed at once.
        cache.on_pod_delete(victim.pod)
        nominator.delete_nominated(victim.uid)
        victims_of.setdefault(preemptor.uid, []).append(victim.key)

    handle = Handle(
        cache=cache,
        client=None,
        nominator=nominator,
        parallelism=config.parallelism,
        seed=seed,
        namespaces=DumpNamespaces(dump.others),
        workloads=workloads,
        pdbs=workloads,
        preemption_evict=evict,
        volumes=static_volumes(o for kind in STORAGE_KINDS for o in dump.others.get(kind, ())),
        dra=dra,
    )
    if catalogue is None:
        catalogue = in_tree_catalogue()
    frameworks: dict[str, Framework] = {}
    for profile in config.profiles:
        try:
            frameworks[profile.scheduler_name] = Framework.from_profile(
                profile,
                catalogue,
                handle,
                percentage_of_nodes_to_score=config.percentage_of_nodes_to_score or None,
                seed=seed,
            )
        except (KeyError, TypeError, ValueError) as e:  # a plugin missing or refusing its arguments
            raise SimulationError(f"profile {profile.scheduler_name}: {e}") from None

    for node in dump.nodes:
        cache.on_node_add(node)
    pending: list[QueuedPodInfo] = []
    for pod in dump.pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if (pod.get("spec") or {}).get("nodeName"):
            cache.on_pod_add(pod)
            continue
        pi = cache.pod_info(instantiate_claims(dra, pod))
        if pi.scheduler_name in frameworks and pi.deletion_ts is None:
            pending.append(QueuedPodInfo(pi, timestamp=_queue_time(pi)))
            if pi.nominated_node_name:
                nominator.add_nominated(pi)  # as the queue does for a pod nominated by an earlier preemption
    if not pending:
        return []
    first = next(iter(frameworks.values()))
    pending.sort(key=first.queue_sort_key)  # stable: file order breaks the remaining ties

    queue = list(pending)
    retried: set[str] = set()
    while queue:
        qpi = queue.pop(0)
        pi = qpi.pod_info
        fw = frameworks[pi.scheduler_name]
        gate = fw.run_pre_enqueue(pi)
        if not gate.ok:
            placements.append(Placement(pi.key, None, f"pod is gated: {gate.message()}"))
            continue
        state = CycleState()
        nominated = nominator.nominated_node(pi.uid)  # the nomination the pod came with, if any
        result, outcome = await scheduling_cycle(fw, state, pi, cache, nominator, record_scores=True)
        filtered = dict(sorted((result.filtered or {}).items()))
        if isinstance(outcome, CycleFailure):
            if outcome.nominated_node:
                nominated = outcome.nominated_node
                if pi.uid not in retried:
                    # The victims are gone already: try again at once, as the live scheduler does when their
                    # deletions arrive; the pod now carries its nominated node, as after the patch.
                    retried.add(pi.uid)
                    queue.insert(0, QueuedPodInfo(_with_nominated_node(cache, pi, nominated), qpi.timestamp))
                    continue
            placements.append(
                Placement(pi.key, None, outcome.message, filtered, {}, nominated, victims_of.get(pi.uid, []))
            )
            continue

        placed_on = result.node or ""
        # PreBind/Bind need the API server; offline the pod simply stays assumed on its node.
        fw.run_post_bind(state, outcome, placed_on)
        dra.commit(pi.uid, pi.name)  # the allocations PreBind would have written
        nominator.delete_nominated(pi.uid)
        scores: dict[str, dict[str, int]] = {}
        for name, per_plugin in sorted((result.scores or {}).items()):
            entry = dict(per_plugin)
            entry["total"] = (result.total_scores or {}).get(name, sum(per_plugin.values()))
            scores[name] = entry
        placements.append(
            Placement(pi.key, placed_on, "", filtered, scores, nominated, victims_of.get(pi.uid, []))
        )
    return placements


def _with_nominated_node(cache: Any, pi: PodInfo, node: str) -> PodInfo:
    pod = dict(pi.pod)
    pod["status"] = {**(pod.get("status") or {}), "nominatedNodeName": node}
    return cache.pod_info(pod)


# --- command line -------------------------------------------------------------------------------------------


def _positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value!r}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", help="KubeSchedulerConfiguration file (default: the v1 default profile)")
    p.add_argument(
        "--cluster",
        required=True,
        help="nodes and pods: a YAML stream or a v1 List (kubectl get nodes,pods -A -o yaml); - for stdin",
    )
    p.add_argument(
        "--seed", type=int, default=None, help="seed for random tie-breaking (reproducible output)"
    )
    p.add_argument("-o", "--output", choices=("json", "table"), default="table")
    p.add_argument(
        "--top", type=_positive_int, default=3, help="nodes to show per pod in the table (default 3)"
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        help="also draw FILE (.png, .svg or .pdf; needs kubesched[plot]): each node's requested/allocatable "
        "CPU and memory before and after the placements",
    )


def _fail(what: str, detail: Any) -> int:
    print(f"kubesched simulate: {what}: {detail}", file=sys.stderr)
    return 1


def run(args: argparse.Namespace, catalogue: Catalogue) -> int:
    """``catalogue``: the plugins a configuration may name (``kubesched.catalogue.full_catalogue()``)."""
    from kubesched.scheduler.config import ConfigError, default_config, load_config

    if args.plot:  # refused before simulating; matplotlib is imported only to draw (kubesched.plots)
        from kubesched.scheduler.plot import plot_path_problem, plot_problem

        if problem := plot_path_problem(args.plot):
            return _fail("--plot", problem)
    try:
        if args.config:
            config = load_config(Path(args.config), catalogue=catalogue)
        else:
            config = default_config(catalogue=catalogue)
    except ConfigError as e:
        return _fail("invalid configuration", e)
    try:
        objects = read_objects(args.cluster)
    except FileNotFoundError:
        return _fail("cannot read the cluster", f"{args.cluster}: no such file")
    except (OSError, UnicodeDecodeError) as e:
        return _fail("cannot read the cluster", f"{args.cluster}: {e}")
    except ClusterDumpError as e:
        return _fail("cannot read the cluster", e)
    try:
        placements = asyncio.run(simulate(config, objects, seed=args.seed, catalogue=catalogue))
    except ClusterDumpError as e:
        return _fail(f"cannot simulate {args.cluster}", e)
    except SimulationError as e:
        return _fail("cannot build the scheduler", e)
    if args.output == "json":
        sys.stdout.buffer.write(orjson.dumps(placements_json(placements), option=orjson.OPT_INDENT_2) + b"\n")
        sys.stdout.flush()
    else:
        print_table(placements, top=args.top)
    if args.plot and (problem := plot_problem(objects, placements, args.plot)):
        return _fail("--plot", problem)
    return 0


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _plugin_breakdown(scores: Mapping[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in scores.items() if k != "total")


def print_table(placements: list[Placement], *, top: int = 3, file: Any = None) -> None:
    """One row per pod: where it went and why (best-scored nodes with their plugin scores, filtered nodes)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    out = file if file is not None else sys.stdout
    console = Console(file=out, width=None if out.isatty() else 160, highlight=False)
    placed = sum(1 for p in placements if p.node)
    unplaced = len(placements) - placed
    title = f"{_count(len(placements), 'pod')} scheduled offline: {placed} placed, {unplaced} not"
    table = Table(title=title, show_lines=True)
    table.add_column("pod", no_wrap=True)
    table.add_column("node", no_wrap=True)
    table.add_column("why: total score per node (plugin score x weight); filtered nodes and reasons")
    for p in placements:
        lines: list[str] = []
        if p.node is None:
            lines.append(escape(p.message))
        else:
            ranked = sorted(p.scores.items(), key=lambda kv: (-kv[1].get("total", 0), kv[0]))
            if not ranked:
                lines.append("its nominated node fits: taken without scoring")
            elif len(ranked) == 1 and len(ranked[0][1]) <= 1:
                lines.append("the only feasible node: not scored")
            else:
                for node, s in ranked[:top]:
                    breakdown = _plugin_breakdown(s)
                    lines.append(
                        f"{escape(node)}: {s.get('total', 0)}" + (f"  ({breakdown})" if breakdown else "")
                    )
                if len(ranked) > top:
                    lines.append(f"... {len(ranked) - top} more feasible node(s)")
        if p.nominated:
            lines.append(f"nominated to {escape(p.nominated)} by preemption")
        if p.preempted:
            lines.append("preempted: " + escape(", ".join(p.preempted)))
        for node, reasons in list(p.filtered.items())[:top]:
            lines.append(f"filtered {escape(node)}: {escape(', '.join(reasons))}")
        if len(p.filtered) > top:
            lines.append(f"... {len(p.filtered) - top} more filtered node(s)")
        node_cell = "[red]<none>[/red]" if p.node is None else escape(p.node)
        table.add_row(escape(p.pod), node_cell, "\n".join(lines))
    console.print(table)


__all__ = [
    "ClusterDump",
    "ClusterDumpError",
    "DumpNamespaces",
    "DumpWorkloads",
    "Placement",
    "SimulationError",
    "add_arguments",
    "placements_json",
    "print_table",
    "read_objects",
    "run",
    "simulate",
]
