"""``kubesched takeover``: move the default scheduler's Lease to kubesched replicas, safely where possible.

Without ``--yes`` it only checks and shows: the Lease holder and since when, the kubesched replicas that contend
for the same Lease as the same ``schedulerName``, and the default scheduler it would stop. With ``--yes``:

1. the safe route: stop the default scheduler where it runs as a static pod (its manifest moved out of the
   node's manifest folder: on this machine for the local cluster or ``--manifest-dir``), so that the Lease is
   released or expires and a replica takes it with no second leader;
2. only with ``--force``: delete the Lease. A replica usually acquires it within seconds, but the old leader
   goes on acting until its renew deadline runs out, so for that window two schedulers place pods (the API
   server stops double bindings, yet both count resources the other has assumed).

Each attempt waits for a replica to hold the Lease; a bounded number of attempts is made. The report says who
won, how long the handover took and how long two leaders overlapped (``timeline.handover``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.apimachinery.labels import LabelSelector, SelectorError
from kubesched.client.rest import ApiClient, ApiError
from kubesched.ops.common import (
    DEFAULT_SCHEDULER,
    NODE_ROOT_ANNOTATION,
    LeaseInfo,
    Obj,
    OpsError,
    SchedulerInstance,
    add_connection_arguments,
    ago,
    connect,
    identity_owner,
    list_items,
    run_command,
    scheduler_configmaps,
    schedulers_in_pods,
    split_lease,
)
from kubesched.ops.timeline import Handover, LeaseSample, SchedEvent, handover

DISABLED_FOLDER = "manifests-disabled-by-kubesched"  # beside the manifest folder, never inside it
DURABLE_NOTE = (
    "Note: the Lease holder can change again whenever a replica restarts or misses a renewal, and a default "
    "scheduler that still runs can win it back. Stopping the default scheduler (its static-pod manifest out of "
    "/etc/kubernetes/manifests on every control-plane node) is the durable route; deleting the Lease is not."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument("--lease", type=split_lease, default=("kube-system", "kube-scheduler"), metavar="NS/NAME",
                   help="the Lease to take (kube-system/kube-scheduler)")  # fmt: skip
    p.add_argument("--scheduler-name", default=DEFAULT_SCHEDULER,
                   help="the schedulerName the replicas must serve (default-scheduler)")  # fmt: skip
    p.add_argument("--selector", default="",
                   help="label selector of the kubesched replicas (default: every kubesched scheduler pod that "
                        "is not the default scheduler)")  # fmt: skip
    p.add_argument("--default-selector", default="component=kube-scheduler",
                   help="label selector of the default scheduler's pods, besides kube-scheduler binaries "
                        "(kubeadm's component=kube-scheduler)")  # fmt: skip
    p.add_argument("--yes", action="store_true", help="take the Lease (without it: check and show only)")
    p.add_argument("--force", action="store_true",
                   help="when the safe route is not available, delete the Lease (two leaders may overlap)")  # fmt: skip
    p.add_argument("--manifest-dir", action="append", default=[], metavar="[NODE=]DIR",
                   help="a control-plane node's static-pod manifest folder reachable from here (repeatable); "
                        "the local cluster's are found by themselves")  # fmt: skip
    p.add_argument("--retries", type=int, default=3, help="attempts before giving up (3)")
    p.add_argument("--timeout", type=float, default=0.0, metavar="SECONDS",
                   help="wait per attempt for a replica to hold the Lease (default: 2 lease durations + 10s)")  # fmt: skip
    p.add_argument("--settle", type=float, default=-1.0, metavar="SECONDS",
                   help="keep watching after the win, to see the old leader's late renewals and events "
                        "(default: 2s on the safe route, the old lease duration after a deletion)")  # fmt: skip
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    if args.retries < 1 or args.retries > 10:
        print("kubesched takeover: --retries must be between 1 and 10", file=sys.stderr)
        return 2
    for flag, text in (("--selector", args.selector), ("--default-selector", args.default_selector)):
        if text:
            try:
                _selector(text, flag)  # checked before anything is contacted
            except OpsError as e:
                print(f"kubesched takeover: {e}", file=sys.stderr)
                return 2
    return run_command("takeover", lambda: _main(args))


# ---- survey ------------------------------------------------------------------------------------------------


@dataclass
class Survey:
    lease: LeaseInfo | None
    replicas: list[SchedulerInstance]  # kubesched, ready, contending for the Lease as the scheduler name
    not_contending: list[tuple[SchedulerInstance, str]]  # kubesched pods that do not qualify, and why
    incumbents: list[SchedulerInstance]  # the default scheduler's pods
    holder_owner: SchedulerInstance | None = None
    holder_is_replica: bool = False
    nodes: dict[str, Obj] = field(default_factory=dict)


def _selector(text: str, flag: str) -> LabelSelector:
    try:
        return LabelSelector.parse(text)
    except SelectorError as e:
        raise OpsError(f"{flag}: {e}") from None


def classify(
    instances: list[SchedulerInstance],
    lease: tuple[str, str],
    scheduler_name: str,
    selector: LabelSelector | None,
    default_selector: LabelSelector,
) -> tuple[list[SchedulerInstance], list[tuple[SchedulerInstance, str]], list[SchedulerInstance]]:
    """(contending replicas, kubesched pods that do not qualify with the reason, the default scheduler's pods)."""
    want = f"{lease[0]}/{lease[1]}"
    replicas: list[SchedulerInstance] = []
    others: list[tuple[SchedulerInstance, str]] = []
    incumbents: list[SchedulerInstance] = []
    for s in instances:
        is_default = s.config.kind == "kube-scheduler" or (
            not default_selector.empty and default_selector.matches(s.labels)
        )
        if is_default:
            if s.config.lease_key == want or scheduler_name in s.config.names:
                incumbents.append(s)
            continue
        if selector is not None and not selector.matches(s.labels):
            continue
        why = ""
        if not s.config.config_known:
            why = "its --config file is not readable from here"
        elif scheduler_name not in s.config.names:
            why = f"serves {', '.join(s.config.names)}, not {scheduler_name}"
        elif not s.config.leader_elect:
            why = "leader election is off (it would schedule beside the leader)"
        elif s.config.lease_key != want:
            why = f"contends for {s.config.lease_key}"
        elif not s.ready:
            why = "not Running and Ready"
        if why:
            others.append((s, why))
        else:
            replicas.append(s)
    return replicas, others, incumbents


async def survey(client: ApiClient, args: argparse.Namespace) -> Survey:
    ns, name = args.lease
    try:
        lease: LeaseInfo | None = LeaseInfo.from_object(
            await client.get("coordination.k8s.io/v1", "leases", name, namespace=ns)
        )
    except ApiError as e:
        if not e.is_not_found():
            raise
        lease = None
    pods = await list_items(client, "v1", "pods")
    instances = schedulers_in_pods(pods, await scheduler_configmaps(client, pods))
    selector = _selector(args.selector, "--selector") if args.selector else None
    replicas, others, incumbents = classify(
        instances,
        args.lease,
        args.scheduler_name,
        selector,
        _selector(args.default_selector, "--default-selector"),
    )
    s = Survey(lease, replicas, others, incumbents)
    if lease is not None and lease.holder:
        s.holder_owner = await identity_owner(client, lease.holder, replicas + incumbents)
        s.holder_is_replica = s.holder_owner is not None and s.holder_owner in replicas
    nodes = {n.node for n in incumbents if n.node}
    for node in sorted(nodes):
        try:
            s.nodes[node] = await client.get("v1", "nodes", node)
        except ApiError:
            pass
    return s


# ---- the safe route: static-pod manifests ------------------------------------------------------------------


@dataclass
class ManifestMove:
    pod: str
    node: str
    source: str = ""
    target: str = ""
    instruction: str = ""  # what to run on the node when the folder is not reachable from here

    @property
    def possible(self) -> bool:
        return bool(self.source)


def manifest_folders(args_dirs: list[str], nodes: dict[str, Obj]) -> dict[str, list[Path]]:
    """Manifest folders reachable from here, by node ("" for a ``--manifest-dir`` without a node)."""
    out: dict[str, list[Path]] = {}
    for text in args_dirs:
        node, sep, d = text.partition("=")
        if not sep:
            node, d = "", text
        out.setdefault(node, []).append(Path(d))
    for name, node_obj in nodes.items():
        root = ((node_obj.get("metadata") or {}).get("annotations") or {}).get(NODE_ROOT_ANNOTATION)
        if root:
            folder = Path(root) / "etc" / "kubernetes" / "manifests"
            if folder.is_dir():
                out.setdefault(name, []).append(folder)
    return out


def find_manifest(folder: Path, pod: str, node: str) -> Path | None:
    """The file in ``folder`` that defines the static pod whose mirror is ``pod`` (named ``<name>-<node>``)."""
    try:
        entries = sorted(p for p in folder.iterdir() if p.is_file() and not p.name.startswith("."))
    except OSError:
        return None
    for p in entries:
        try:
            doc = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError, UnicodeDecodeError):
            continue
        name = ((doc or {}).get("metadata") or {}).get("name") if isinstance(doc, dict) else None
        if name and (pod == f"{name}-{node}" or (not node and pod.startswith(f"{name}-"))):
            return p
    return None


def plan_moves(incumbents: list[SchedulerInstance], folders: dict[str, list[Path]]) -> list[ManifestMove]:
    moves: list[ManifestMove] = []
    unbound = list(folders.get("", []))
    for s in incumbents:
        m = ManifestMove(pod=f"{s.namespace}/{s.pod}", node=s.node)
        if not s.static:
            m.instruction = f"{m.pod} is not a static pod: stop what runs it (e.g. scale its Deployment to 0), then run again"
            moves.append(m)
            continue
        candidates = folders.get(s.node, []) + unbound
        for folder in candidates:
            found = find_manifest(folder, s.pod, s.node)
            if found is not None:
                m.source = str(found)
                m.target = str(found.parent.parent / DISABLED_FOLDER / found.name)
                if folder in unbound:
                    unbound.remove(folder)  # a folder given without a node belongs to one node
                break
        if not m.source:
            m.instruction = (
                f"on node {s.node}: sudo mkdir -p /etc/kubernetes/{DISABLED_FOLDER} && sudo mv "
                f"/etc/kubernetes/manifests/{s.pod.removesuffix('-' + s.node)}.yaml /etc/kubernetes/{DISABLED_FOLDER}/"
            )
        moves.append(m)
    return moves


def move_manifest(m: ManifestMove) -> None:
    src, dst = Path(m.source), Path(m.target)
    if not src.exists():
        return  # moved already (an earlier attempt)
    dst.parent.mkdir(parents=True, exist_ok=True)
    os.replace(src, dst)  # one rename: the kubelet never sees half a file


# ---- watching the Lease ----------------------------------------------------------------------------------------


class LeaseWatch:
    """Samples the Lease (a GET every ``interval``) and remembers every distinct record."""

    def __init__(self, client: ApiClient, lease: tuple[str, str], interval: float = 0.2) -> None:
        self.client = client
        self.lease = lease
        self.interval = interval
        self.samples: list[LeaseSample] = []
        self.uid = ""
        self._last: tuple[Any, ...] | None = None

    async def sample(self) -> LeaseSample:
        ns, name = self.lease
        try:
            obj = await self.client.get("coordination.k8s.io/v1", "leases", name, namespace=ns)
        except ApiError as e:
            if not e.is_not_found():
                raise
            s = LeaseSample(time.time(), "")
            self.uid = ""
        else:
            info = LeaseInfo.from_object(obj)
            self.uid = (obj.get("metadata") or {}).get("uid") or ""
            s = LeaseSample(time.time(), info.holder, info.renew, info.acquire, info.duration)
        key = (s.holder, s.renew, s.acquire)
        if key != self._last:
            self._last = key
            self.samples.append(s)
        return s


async def _is_replica(
    client: ApiClient, identity: str, sv: Survey, cache: dict[str, SchedulerInstance | None]
) -> bool:
    if identity not in cache:
        cache[identity] = await identity_owner(client, identity, sv.replicas + sv.incumbents)
    owner = cache[identity]
    return owner is not None and owner in sv.replicas


# ---- main ------------------------------------------------------------------------------------------------------


async def _main(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        return await _takeover(client, args)
    finally:
        await client.close()


def _describe(s: SchedulerInstance | None) -> str:
    if s is None:
        return "not a pod seen here"
    kind = "static pod" if s.static else "pod"
    return f"{kind} {s.namespace}/{s.pod} on {s.node or '?'}"


def _status_lines(sv: Survey, args: argparse.Namespace, now: float) -> list[str]:
    ns, name = args.lease
    lines: list[str] = []
    if sv.lease is None:
        lines.append(f"Lease {ns}/{name}: does not exist (no scheduler has taken it)")
    elif not sv.lease.holder:
        lines.append(f"Lease {ns}/{name}: released (no holder)")
    else:
        le = sv.lease
        fresh = "fresh" if le.fresh(now) else "EXPIRED"
        since = ago(now - le.acquire) + " ago" if le.acquire else "unknown"
        lines.append(
            f"Lease {ns}/{name}: held by {le.holder} ({_describe(sv.holder_owner)}) since {since}, "
            f"renewed {ago(le.renewal_age(now))} ago ({fresh}; duration {le.duration:g}s, "
            f"{le.transitions} transitions)"
        )
    lines.append(
        f"kubesched replicas contending for {ns}/{name} as {args.scheduler_name}: {len(sv.replicas)}"
        + "".join(f"\n  - {_describe(r)}" for r in sv.replicas)
    )
    for s, why in sv.not_contending:
        lines.append(f"  not contending: {_describe(s)}: {why}")
    lines.append(
        f"default scheduler: {len(sv.incumbents)} pod(s)"
        + "".join(f"\n  - {_describe(s)}" for s in sv.incumbents)
    )
    return lines


async def _takeover(client: ApiClient, args: argparse.Namespace) -> int:
    sv = await survey(client, args)
    out: dict[str, Any] = {"lease": asdict(sv.lease) if sv.lease else None}
    text = args.output == "text"
    now = time.time()
    if text:
        print("\n".join(_status_lines(sv, args, now)), flush=True)
    out["replicas"] = [_describe(r) for r in sv.replicas]
    out["default_scheduler"] = [_describe(s) for s in sv.incumbents]
    out["holder"] = sv.lease.holder if sv.lease else ""
    out["holder_pod"] = _describe(sv.holder_owner) if sv.holder_owner else ""
    if not sv.replicas:
        raise OpsError(
            f"no Running, Ready kubesched replica contends for {args.lease[0]}/{args.lease[1]} as "
            f"{args.scheduler_name}: deploy them first (kubectl apply -k deploy/takeover)"
        )
    if sv.holder_is_replica:
        out["result"] = "already-held"
        _emit(args, out, ["kubesched already holds the Lease: nothing to do.", DURABLE_NOTE])
        return 0
    folders = manifest_folders(args.manifest_dir, sv.nodes)
    moves = plan_moves(sv.incumbents, folders)
    safe = bool(moves) and all(m.possible for m in moves)
    out["plan"] = {"safe_route": safe, "moves": [asdict(m) for m in moves]}
    if not args.yes:
        plan = ["Plan (run with --yes to do it):"]
        if safe:
            plan += [f"  stop {m.pod}: move {m.source} to {m.target}" for m in moves]
            plan.append("  then wait for the Lease to be released or expire and for a replica to take it")
        else:
            plan += [f"  {m.instruction}" for m in moves if not m.possible]
            plan.append(
                "  the safe route is not available from here; --force deletes the Lease instead (unsafe)"
            )
        out["result"] = "planned"
        _emit(args, out, [*plan, DURABLE_NOTE])
        return 0
    if not safe and not args.force:
        steps = [m.instruction for m in moves if not m.possible] or [
            "the Lease holder is not a pod seen here: stop the default scheduler where it runs"
        ]
        raise OpsError(
            "the safe route needs steps this machine cannot take: "
            + "; ".join(steps)
            + ". Then run again, or pass --force to delete the Lease (two schedulers may both act for up to "
            + f"{sv.lease.duration if sv.lease else 15:g}s)"
        )
    result = await _execute(client, args, sv, moves if safe else [], text)
    out.update(result)
    ok = bool(result.get("won"))
    lines = _report_lines(result, args)
    _emit(args, out, [*lines, DURABLE_NOTE])
    return 0 if ok else 1


def _emit(args: argparse.Namespace, out: dict[str, Any], lines: list[str]) -> None:
    if args.output == "json":
        print(json.dumps(out, indent=2, default=str), flush=True)
    else:
        print("\n".join(lines), flush=True)


async def _execute(
    client: ApiClient, args: argparse.Namespace, sv: Survey, moves: list[ManifestMove], text: bool
) -> dict[str, Any]:
    old = sv.lease.holder if sv.lease else ""
    duration = sv.lease.duration if sv.lease and sv.lease.duration else 15.0
    per_attempt = args.timeout if args.timeout > 0 else 2 * duration + 10
    watch = LeaseWatch(client, args.lease)
    await watch.sample()
    cache: dict[str, SchedulerInstance | None] = {}
    route = "static-pod" if moves else "delete-lease"
    if text and not moves:
        print(
            f"WARNING: deleting Lease {args.lease[0]}/{args.lease[1]}: the old leader keeps acting until its renew "
            "deadline runs out, so two schedulers may place pods at once (the API server prevents double "
            "bindings, not placements on nodes that no longer fit).",
            flush=True,
        )
    started = time.time()
    action_t = started
    winner = ""
    attempts = 0
    for attempt in range(1, args.retries + 1):
        attempts = attempt
        action_t = time.time()
        if moves:
            for m in moves:
                move_manifest(m)
                if text and attempt == 1:
                    print(f"moved {m.source} -> {m.target} (undo: mv {m.target} {m.source})", flush=True)
        else:
            await watch.sample()
            if watch.uid:
                try:
                    await client.delete(
                        "coordination.k8s.io/v1", "leases", args.lease[1], namespace=args.lease[0],
                        preconditions={"uid": watch.uid},
                    )  # fmt: skip
                except ApiError as e:
                    if not (e.is_not_found() or e.is_conflict()):
                        raise
                if text:
                    print(f"attempt {attempt}: deleted Lease {args.lease[0]}/{args.lease[1]}", flush=True)
        deadline = time.monotonic() + per_attempt
        other = ""
        while time.monotonic() < deadline:
            s = await watch.sample()
            if s.holder and s.holder != old:
                if await _is_replica(client, s.holder, sv, cache):
                    winner = s.holder
                    break
                other = s.holder
            await asyncio.sleep(watch.interval)
        if winner:
            break
        if text:
            who = f"{other} (not a kubesched replica)" if other else "nobody new"
            print(f"attempt {attempt}: after {per_attempt:g}s the Lease is held by {who}", flush=True)
    settle = args.settle if args.settle >= 0 else (2.0 if moves else duration)
    if winner:
        end = time.monotonic() + settle
        while time.monotonic() < end:
            await watch.sample()
            await asyncio.sleep(watch.interval)
    events = await _scheduler_events(client, args.scheduler_name)
    h: Handover = handover(
        watch.samples,
        events,
        old,
        action_t,
        args.scheduler_name,
        is_new=lambda ident: cache.get(ident) is not None and cache.get(ident) in sv.replicas,
    )
    owner = cache.get(winner)
    final = watch.samples[-1].holder if watch.samples else ""
    return {
        "won": bool(winner) and final == winner,
        "route": route,
        "attempts": attempts,
        "winner": winner,
        "winner_pod": _describe(owner) if owner else "",
        "holder_now": final,
        "handover_seconds": h.handover_seconds,
        "overlap_observed_seconds": round(h.overlap_observed, 3),
        "overlap_bound_seconds": round(h.overlap_bound, 3),
        "old_released": h.old_released,
        "events_distinguish_schedulers": h.events_distinguish,
        "old_events_after": h.old_events_after,
        "new_events_after": h.new_events_after,
        "binding_conflicts_after": h.conflicts_after,
        "holders": [{"t": t, "holder": who} for t, who in h.holders],
    }


async def _scheduler_events(client: ApiClient, scheduler_name: str) -> list[SchedEvent]:
    try:
        items = await list_items(
            client, "events.k8s.io/v1", "events", field_selector=f"reportingController={scheduler_name}"
        )
    except ApiError:
        return []
    return [e for e in (SchedEvent.from_object(i) for i in items) if e is not None]


def _report_lines(r: dict[str, Any], args: argparse.Namespace) -> list[str]:
    route = "stopping the default scheduler" if r["route"] == "static-pod" else "deleting the Lease"
    if not r["won"]:
        now_holder = r["holder_now"] or "nobody"
        return [
            f"FAILED: no kubesched replica holds the Lease after {r['attempts']} attempt(s) of {route}; "
            f"it is held by {now_holder}"
        ]
    lines = [
        f"won by {r['winner']} ({r['winner_pod']}) after {r['attempts']} attempt(s)",
        f"handover: {r['handover_seconds']:.1f}s from {route} to a kubesched replica holding the Lease",
    ]
    if r["old_released"] and r["overlap_observed_seconds"] == 0:
        lines.append(
            "two leaders overlapped: 0.0s (the old leader released the Lease before the new one took it)"
        )
    else:
        lines.append(
            f"two leaders overlapped: {r['overlap_observed_seconds']:.1f}s observed (old renewals/events after "
            f"the new acquire time), at most {r['overlap_bound_seconds']:.1f}s (its last renewal + lease duration)"
        )
    if r["events_distinguish_schedulers"]:
        lines.append(
            f"binding events since: {r['new_events_after']} by the new leader, {r['old_events_after']} by the old, "
            f"{r['binding_conflicts_after']} binding conflicts"
        )
    else:
        lines.append(
            f"binding events: the schedulers' events do not tell them apart (same reportingInstance or none); "
            f"{r['binding_conflicts_after']} binding conflicts since the handover"
        )
    return lines
