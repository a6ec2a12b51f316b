"""``kubesched chaos``: delete workload pods (and the leading scheduler replica) for a bounded time, and check
that the scheduler keeps up: every replacement scheduled in time, no pod bound twice, nothing left Pending.

Bounded: ``--duration`` is required (at most an hour), deletions are capped (``--max-deletions``), the client
is rate-limited, and every request goes to the cluster of the kubeconfig (its server is printed first).
Watches (pods and ``Scheduled`` events per namespace) feed ``chaosreport.ChaosBook``; the Lease is polled.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import sys
import time
from dataclasses import dataclass

from kubesched.apimachinery.labels import LabelSelector, SelectorError
from kubesched.client.rest import ApiClient, ApiError
from kubesched.ops.chaosreport import ChaosBook, Report
from kubesched.ops.common import (
    Obj,
    OpsError,
    add_connection_arguments,
    connect,
    identity_owner,
    list_items,
    run_command,
    scheduler_configmaps,
    schedulers_in_pods,
    split_lease,
)

MAX_DURATION = 3600.0
KINDS: dict[str, tuple[str, str]] = {
    "deployment": ("apps/v1", "deployments"),
    "deploy": ("apps/v1", "deployments"),
    "replicaset": ("apps/v1", "replicasets"),
    "rs": ("apps/v1", "replicasets"),
    "statefulset": ("apps/v1", "statefulsets"),
    "sts": ("apps/v1", "statefulsets"),
    "replicationcontroller": ("v1", "replicationcontrollers"),
    "rc": ("v1", "replicationcontrollers"),
}


def duration(text: str) -> float:
    """``20``, ``20s``, ``2m``, ``1h``, ``1m30s``."""
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return float(text)
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|m|s)", text)
    if not parts or "".join(a + b for a, b in parts) != text:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 20s, 2m)")
    return sum(float(a) * {"h": 3600, "m": 60, "s": 1}[b] for a, b in parts)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument("--duration", type=duration, required=True,
                   help=f"how long to delete pods (required; at most {MAX_DURATION:g}s)")  # fmt: skip
    p.add_argument("--workload", action="append", default=[], metavar="KIND/NAME",
                   help="deployment/x, replicaset/x, statefulset/x or replicationcontroller/x whose pods are "
                        "deleted (repeatable; [NAMESPACE/]KIND/NAME)")  # fmt: skip
    p.add_argument("-n", "--namespace", help="namespace of the workloads (default: the kubeconfig's)")
    p.add_argument("--interval", type=duration, default=3.0, help="between deletion rounds (3s)")
    p.add_argument("--pods-per-round", type=int, default=1, help="pods deleted per workload per round (1)")
    p.add_argument("--max-deletions", type=int, default=100, help="stop deleting after this many pods (100)")
    p.add_argument("--kill-leader", action="store_true",
                   help="also delete the pod holding the scheduler's Lease (once, a third into the run, right "
                        "after a round of deletions)")  # fmt: skip
    p.add_argument("--kill-leader-every", type=duration, default=0.0,
                   help="with --kill-leader: kill the leader every this often instead of once")  # fmt: skip
    p.add_argument("--lease", type=split_lease, default=("kube-system", "kube-scheduler"), metavar="NS/NAME",
                   help="the scheduler's Lease (kube-system/kube-scheduler)")  # fmt: skip
    p.add_argument("--schedule-timeout", type=duration, default=30.0,
                   help="a replacement must be bound within this (30s)")  # fmt: skip
    p.add_argument("--grace-period", type=int, default=None, help="deletion grace period (the pod's own)")
    p.add_argument("--seed", type=int, default=None, help="seed for choosing victims")
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run(args: argparse.Namespace) -> int:
    problem = ""
    if not 0 < args.duration <= MAX_DURATION:
        problem = f"--duration must be more than 0 and at most {MAX_DURATION:g}s"
    elif not args.workload and not args.kill_leader:
        problem = "nothing to do: give --workload KIND/NAME (repeatable) and/or --kill-leader"
    elif (
        args.interval <= 0 or args.pods_per_round < 1 or args.max_deletions < 1 or args.schedule_timeout <= 0
    ):
        problem = "--interval, --pods-per-round, --max-deletions and --schedule-timeout must be positive"
    if problem:
        print(f"kubesched chaos: {problem}", file=sys.stderr)
        return 2
    return run_command("chaos", lambda: _main(args))


@dataclass
class Workload:
    namespace: str
    kind: str
    name: str
    selector: LabelSelector
    target: bool = True  # False: only watched (the killed leader's controller), never a deletion target

    @property
    def label(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


async def resolve_workload(client: ApiClient, text: str, namespace: str) -> Workload:
    parts = text.split("/")
    if len(parts) == 3:
        namespace, kind, name = parts
    elif len(parts) == 2:
        kind, name = parts
    else:
        raise OpsError(f"--workload {text!r}: expected KIND/NAME or NAMESPACE/KIND/NAME")
    kind = kind.lower().removesuffix("s") if kind.lower() not in KINDS else kind.lower()
    if kind not in KINDS:
        raise OpsError(
            f"--workload {text!r}: kind must be one of deployment, replicaset, statefulset, replicationcontroller"
        )
    api, plural = KINDS[kind]
    try:
        obj = await client.get(api, plural, name, namespace=namespace)
    except ApiError as e:
        if e.is_not_found():
            raise OpsError(f"--workload {text!r}: {plural} {namespace}/{name} not found") from None
        raise
    return Workload(namespace, plural.removesuffix("s"), name, _selector_of(obj, text))


def _selector_of(obj: Obj, what: str) -> LabelSelector:
    sel = (obj.get("spec") or {}).get("selector")
    if obj.get("kind") == "ReplicationController" or (
        isinstance(sel, dict) and "matchLabels" not in sel and "matchExpressions" not in sel
    ):
        sel = {"matchLabels": sel or {}}
    try:
        selector = LabelSelector.from_dict(sel)
    except (SelectorError, ValueError) as e:
        raise OpsError(f"{what}: unusable selector: {e}") from None
    if selector.empty:
        raise OpsError(f"{what}: its selector matches every pod; refusing to delete pods by it")
    return selector


class Chaos:
    def __init__(self, client: ApiClient, args: argparse.Namespace, workloads: list[Workload]) -> None:
        self.client = client
        self.args = args
        self.workloads = workloads
        self.rng = random.Random(args.seed)
        self.book = ChaosBook(time.time(), args.schedule_timeout)
        self.namespaces = {w.namespace for w in workloads}
        self.watch_tasks: dict[str, list[asyncio.Task[None]]] = {}
        self.current: dict[str, Obj] = {}  # uid -> pod, the watched pods as last seen
        self.last_deletion = 0.0
        self.text = args.output == "text"

    def say(self, msg: str) -> None:
        if self.text:
            print(f"[{time.time() - self.book.start:6.1f}s] {msg}", flush=True)

    def workload_of(self, pod: Obj) -> Workload | None:
        meta = pod.get("metadata") or {}
        for w in self.workloads:
            if w.namespace == meta.get("namespace") and w.selector.matches(meta.get("labels") or {}):
                return w
        return None

    # ---- watches ----

    async def start_namespace(self, ns: str) -> None:
        if ns in self.watch_tasks:
            return
        listing = await self.client.list("v1", "pods", namespace=ns)
        rv = (listing.get("metadata") or {}).get("resourceVersion")
        for pod in listing.get("items") or []:
            self._pod(pod, initial=True)
        ev = await self.client.list(
            "events.k8s.io/v1", "events", namespace=ns, field_selector="reason=Scheduled"
        )
        self.watch_tasks[ns] = [
            asyncio.create_task(self._watch_pods(ns, rv)),
            asyncio.create_task(self._watch_events(ns, (ev.get("metadata") or {}).get("resourceVersion"))),
        ]

    def _pod(self, pod: Obj, initial: bool = False, deleted: bool = False) -> None:
        w = self.workload_of(pod)
        if w is None:
            return
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        uid = meta.get("uid") or ""
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        t = time.time()
        if deleted:
            self.book.observe_pod(t, uid, key, w.label, spec.get("nodeName") or "", True, initial)
            self.book.observe_deleted(t, uid)
            self.current.pop(uid, None)
            return
        self.book.observe_pod(
            t, uid, key, w.label, spec.get("nodeName") or "", bool(meta.get("deletionTimestamp")), initial
        )
        self.current[uid] = pod

    async def _watch_pods(self, ns: str, rv: str | None) -> None:
        timeout = int(self.args.duration + self.args.schedule_timeout + 60)
        while True:
            try:
                async for etype, obj in self.client.watch(
                    "v1", "pods", namespace=ns, resource_version=rv, timeout_seconds=timeout
                ):
                    if etype == "BOOKMARK":
                        rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                        continue
                    if etype == "ERROR":
                        raise ApiError.from_status(obj)
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    self._pod(obj, deleted=etype == "DELETED")
            except asyncio.CancelledError:
                raise
            except Exception as e:  # a broken stream or 410: relist and go on (pods seen already stay known)
                self.book.notes.append(f"pod watch in {ns} restarted: {e}")
                await asyncio.sleep(0.5)
                listing = await self.client.list("v1", "pods", namespace=ns)
                rv = (listing.get("metadata") or {}).get("resourceVersion")
                for pod in listing.get("items") or []:
                    self._pod(pod)

    async def _watch_events(self, ns: str, rv: str | None) -> None:
        timeout = int(self.args.duration + self.args.schedule_timeout + 60)
        while True:
            try:
                stream = self.client.watch("events.k8s.io/v1", "events", namespace=ns, field_selector="reason=Scheduled",
                                           resource_version=rv, timeout_seconds=timeout)  # fmt: skip
                async for etype, obj in stream:
                    rv = (obj.get("metadata") or {}).get("resourceVersion") or rv
                    if etype in ("ADDED", "MODIFIED"):
                        reg = obj.get("regarding") or {}
                        count = int((obj.get("series") or {}).get("count") or 1)
                        self.book.observe_scheduled_event(
                            reg.get("uid") or "", (obj.get("metadata") or {}).get("name") or "", count
                        )
            except asyncio.CancelledError:
                raise
            except Exception as e:
                self.book.notes.append(f"event watch in {ns} restarted: {e}")
                await asyncio.sleep(0.5)
                rv = None

    async def _poll_lease(self) -> None:
        ns, name = self.args.lease
        while True:
            try:
                lease = await self.client.get("coordination.k8s.io/v1", "leases", name, namespace=ns)
                self.book.observe_holder(time.time(), (lease.get("spec") or {}).get("holderIdentity") or "")
            except ApiError as e:
                if e.is_not_found():
                    self.book.observe_holder(time.time(), "")
            except Exception:
                pass
            await asyncio.sleep(0.5)

    # ---- deletions ----

    def victims(self, w: Workload) -> list[Obj]:
        live = [
            p for p in self.current.values()
            if self.workload_of(p) is w and (p.get("spec") or {}).get("nodeName")
            and not (p.get("metadata") or {}).get("deletionTimestamp")
        ]  # fmt: skip
        live.sort(key=lambda p: (p.get("metadata") or {}).get("name") or "")
        self.rng.shuffle(live)
        return live[: self.args.pods_per_round]

    async def delete_pod(self, pod: Obj, kind: str) -> bool:
        meta = pod.get("metadata") or {}
        key = f"{meta.get('namespace')}/{meta.get('name')}"
        try:
            await self.client.delete("v1", "pods", meta["name"], namespace=meta.get("namespace"),
                                     grace_period_seconds=self.args.grace_period,
                                     preconditions={"uid": meta.get("uid") or ""})  # fmt: skip
        except ApiError as e:
            if e.is_not_found() or e.is_conflict():
                return False
            raise
        self.book.deleted(time.time(), key, kind)
        self.last_deletion = time.time()
        self.say(f"deleted {'leader ' if kind == 'leader' else ''}pod {key}")
        return True

    async def kill_leader(self) -> None:
        ns, name = self.args.lease
        try:
            lease = await self.client.get("coordination.k8s.io/v1", "leases", name, namespace=ns)
        except ApiError as e:
            if not e.is_not_found():
                raise
            self.book.violations.append(f"--kill-leader: Lease {ns}/{name} does not exist")
            return
        holder = (lease.get("spec") or {}).get("holderIdentity") or ""
        if not holder:
            self.book.notes.append("--kill-leader: the Lease had no holder at that moment; nothing killed")
            return
        pods = await list_items(self.client, "v1", "pods")
        candidates = [
            s for s in schedulers_in_pods(pods, await scheduler_configmaps(self.client, pods))
            if s.config.leader_elect and s.config.lease == (ns, name)
        ]  # fmt: skip
        owner = await identity_owner(self.client, holder, candidates)
        if owner is None:
            self.book.violations.append(
                f"--kill-leader: the holder {holder} is not a scheduler pod seen here"
            )
            return
        pod = next(p for p in pods if (p.get("metadata") or {}).get("name") == owner.pod
                   and (p.get("metadata") or {}).get("namespace") == owner.namespace)  # fmt: skip
        # Its controller replaces it: watch the replacement as one more workload.
        ctrl = next((o for o in (pod["metadata"].get("ownerReferences") or []) if o.get("controller")), None)
        if ctrl is not None and ctrl.get("kind") in ("ReplicaSet", "StatefulSet", "ReplicationController"):
            api, plural = KINDS[ctrl["kind"].lower()]
            try:
                obj = await self.client.get(api, plural, ctrl["name"], namespace=owner.namespace)
                w = Workload(
                    owner.namespace,
                    plural.removesuffix("s"),
                    ctrl["name"],
                    _selector_of(obj, ctrl["name"]),
                    False,
                )
                if all(x.label != w.label for x in self.workloads):
                    self.workloads.append(w)
                    await self.start_namespace(owner.namespace)
                    self._pod(pod, initial=True)
            except (ApiError, OpsError) as e:
                self.book.notes.append(f"the leader's controller {ctrl['name']} is not watched: {e}")
        else:
            self.book.notes.append(
                f"the leader pod {owner.namespace}/{owner.pod} has no controller to replace it"
            )
        await self.delete_pod(pod, "leader")

    async def run(self) -> Report:
        a = self.args
        for ns in sorted(self.namespaces):
            await self.start_namespace(ns)
        lease_task = asyncio.create_task(self._poll_lease())
        try:
            end = self.book.start + a.duration
            kill_at = self.book.start + a.duration / 3 if a.kill_leader else float("inf")
            deleted = 0
            while time.time() < end:
                for w in list(self.workloads):
                    if not w.target:
                        continue
                    for pod in self.victims(w):
                        if deleted >= a.max_deletions:
                            break
                        deleted += await self.delete_pod(pod, "workload")
                if time.time() >= kill_at:
                    await self.kill_leader()
                    kill_at = time.time() + a.kill_leader_every if a.kill_leader_every > 0 else float("inf")
                await asyncio.sleep(max(0.0, min(a.interval, end - time.time())))
            # Drain: replacements still unbound get the schedule timeout (from the last deletion) to be bound.
            drain_end = max(time.time(), self.last_deletion) + a.schedule_timeout
            self.say("deleting stopped; waiting for replacements to be scheduled")
            while time.time() < drain_end and self._unbound():
                await asyncio.sleep(0.2)
            await asyncio.sleep(0.5)  # late Scheduled events and rebinds
            pending = await self._pending_now()
        finally:
            lease_task.cancel()
            tasks = [t for ts in self.watch_tasks.values() for t in ts]
            for t in tasks:
                t.cancel()
            await asyncio.gather(lease_task, *tasks, return_exceptions=True)
        return self.book.finish(time.time(), pending)

    def _unbound(self) -> bool:
        return any(
            not (p.get("spec") or {}).get("nodeName")
            and not (p.get("metadata") or {}).get("deletionTimestamp")
            for p in self.current.values()
        )

    async def _pending_now(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for ns in sorted({w.namespace for w in self.workloads}):
            for p in await list_items(self.client, "v1", "pods", namespace=ns):
                meta = p.get("metadata") or {}
                if (
                    self.workload_of(p) is None
                    or meta.get("deletionTimestamp")
                    or (p.get("spec") or {}).get("nodeName")
                ):
                    continue
                out[meta.get("uid") or ""] = f"{meta.get('namespace')}/{meta.get('name')}"
        return out


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}s"


def report_lines(r: Report) -> list[str]:
    lines = [
        f"chaos report ({r.duration:g}s): {'OK' if r.ok else 'FAILED'}",
        f"  deletions: {r.deletions} workload pods, {r.leader_kills} leader pods",
        f"  replacements: {r.replacements} seen, {r.scheduled} scheduled",
        f"  scheduling latency: p50 {_fmt(r.latency_p50)}, p99 {_fmt(r.latency_p99)}, max {_fmt(r.latency_max)}",
        f"  leader changes: {r.leader_changes}"
        + "".join(f"\n    +{x['t']:.1f}s {x['holder'] or '(released)'}" for x in r.leaders),
        f"  left Pending at the end: {len(r.pending_at_end)}",
    ]
    lines += [f"  note: {n}" for n in r.notes]
    lines += [f"  VIOLATION: {v}" for v in r.violations]
    return lines


async def _main(args: argparse.Namespace) -> int:
    client = connect(args, qps=10.0, burst=20)
    try:
        ns = args.namespace or client.config.namespace or "default"
        workloads = [await resolve_workload(client, w, ns) for w in args.workload]
        if args.output == "text":
            print(f"kubesched chaos: cluster {client.config.server}, {args.duration:g}s, "
                  f"workloads {', '.join(w.label for w in workloads) or '(none)'}"
                  + (", killing the leader" if args.kill_leader else ""), flush=True)  # fmt: skip
        report = await Chaos(client, args, workloads).run()
    finally:
        await client.close()
    if args.output == "json":
        print(json.dumps(report.to_dict(), indent=2), flush=True)
    else:
        print("\n".join(report_lines(report)), flush=True)
    return 0 if report.ok else 1
