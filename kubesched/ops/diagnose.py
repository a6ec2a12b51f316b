"""``kubesched doctor``'s rules, on plain objects (no I/O): what is wrong with a cluster's scheduling.

``diagnose(snapshot)`` answers, in one dict that is both the JSON output and what the screen shows:
- leases: each holder, since when, how fresh its renewals are, and which schedulerNames it stands for;
- schedulers: which schedulerNames some running scheduler serves, and the evidence;
- unserved: pods Pending for a schedulerName nobody serves;
- pending: Pending pods with their latest ``FailedScheduling`` message;
- conflicts: binding conflicts (409s), two instances of one scheduler name acting at once, pods reported
  ``Scheduled`` twice;
- nodes: NotReady or unschedulable (cordoned) nodes;
- hints: when a pod has nobody to schedule it, the command that places it on a node that fits (a Binding:
  what a scheduler would write, setting ``spec.nodeName``).
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.apimachinery.labels import LabelSelector, SelectorError
from kubesched.apimachinery.quantity import QuantityError, parse_quantity
from kubesched.ops.common import (
    DEFAULT_LEASE,
    DEFAULT_SCHEDULER,
    LeaseInfo,
    Obj,
    SchedulerInstance,
    parse_time,
)
from kubesched.ops.timeline import SchedEvent, concurrent_instances, is_binding_conflict, scheduled_counts

RECENT_SECONDS = 600.0  # events older than this are history, not a current conflict
MAX_HINTS = 5


@dataclass
class Snapshot:
    now: float
    leases: list[LeaseInfo] = field(default_factory=list)
    pods: list[Obj] = field(default_factory=list)
    nodes: list[Obj] = field(default_factory=list)
    events: list[SchedEvent] = field(default_factory=list)
    schedulers: list[SchedulerInstance] = field(default_factory=list)
    recent: float = RECENT_SECONDS


def _key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def is_pending(pod: Obj) -> bool:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


def scheduler_name_of(pod: Obj) -> str:
    return (pod.get("spec") or {}).get("schedulerName") or DEFAULT_SCHEDULER


def served_names(snap: Snapshot) -> dict[str, list[str]]:
    """schedulerName -> evidence that a running scheduler serves it now."""
    fresh = {le.key: le for le in snap.leases if le.fresh(snap.now)}
    served: dict[str, list[str]] = {}
    claimed: set[str] = set()
    for s in snap.schedulers:
        if not s.ready:
            continue
        if not s.config.leader_elect:
            for n in s.config.names:
                served.setdefault(n, []).append(f"{s.where} (leader election off)")
            continue
        claimed.add(s.config.lease_key)
        le = fresh.get(s.config.lease_key)
        if le is not None:
            for n in s.config.names:
                served.setdefault(n, []).append(f"Lease {le.key} held and fresh ({s.where} contends for it)")
    default_key = f"{DEFAULT_LEASE[0]}/{DEFAULT_LEASE[1]}"
    if default_key in fresh and default_key not in claimed:
        # kube-scheduler's own Lease, renewed by a scheduler not visible here (e.g. a managed control plane).
        served.setdefault(DEFAULT_SCHEDULER, []).append(f"Lease {default_key} held and fresh")
    return served


def _latest_failures(events: Sequence[SchedEvent]) -> dict[str, SchedEvent]:
    out: dict[str, SchedEvent] = {}
    for e in events:
        if e.reason != "FailedScheduling" or not e.pod_uid:
            continue
        cur = out.get(e.pod_uid)
        if cur is None or e.t >= cur.t:
            out[e.pod_uid] = e
    return out


def _condition_message(pod: Obj) -> str:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if c.get("type") == "PodScheduled" and c.get("status") == "False":
            return str(c.get("message") or c.get("reason") or "")
    return ""


def _node_ready(node: Obj) -> tuple[bool, str]:
    for c in (node.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Ready":
            ok = c.get("status") == "True"
            return (
                ok,
                ""
                if ok
                else f"Ready={c.get('status')}: {c.get('reason') or ''} {c.get('message') or ''}".strip(),
            )
    return False, "no Ready condition"


def _tolerates(pod: Obj, taint: Obj) -> bool:
    if taint.get("effect") == "PreferNoSchedule":
        return True
    for t in (pod.get("spec") or {}).get("tolerations") or []:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _requests(pod: Obj) -> dict[str, Fraction]:
    """Effective requests: max(sum of containers, largest init container), plus overhead."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = total.get(k, Fraction(0)) + _q(v)
    for c in spec.get("initContainers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            total[k] = max(total.get(k, Fraction(0)), _q(v))
    for k, v in (spec.get("overhead") or {}).items():
        total[k] = total.get(k, Fraction(0)) + _q(v)
    total["pods"] = Fraction(1)
    return total


def _q(v: Any) -> Fraction:
    try:
        return parse_quantity(v)
    except (QuantityError, ValueError, TypeError):
        return Fraction(0)


def _fits(pod: Obj, node: Obj, used: Mapping[str, Fraction]) -> bool:
    spec, nspec = pod.get("spec") or {}, node.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    for taint in nspec.get("taints") or []:
        if not _tolerates(pod, taint):
            return False
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])  # fmt: skip
    if terms and not any(_term_matches(t, labels) for t in terms):
        return False
    alloc = (node.get("status") or {}).get("allocatable") or {}
    for k, need in _requests(pod).items():
        if need and k in alloc and used.get(k, Fraction(0)) + need > _q(alloc[k]):
            return False
        if need and k not in alloc and k not in ("cpu", "memory", "ephemeral-storage", "pods"):
            return False
    return True


def _term_matches(term: Obj, labels: Mapping[str, str]) -> bool:
    exprs = term.get("matchExpressions") or []
    if not exprs:
        return False
    try:
        return LabelSelector.from_dict({"matchExpressions": exprs}).matches(labels)
    except (SelectorError, ValueError, KeyError):
        return False


def placement_command(pod: Obj, node: str) -> str:
    """The one command that binds ``pod`` to ``node`` (what a scheduler writes: spec.nodeName is set)."""
    meta = pod.get("metadata") or {}
    binding = {
        "apiVersion": "v1",
        "kind": "Binding",
        "metadata": {"name": meta.get("name"), "namespace": meta.get("namespace") or "default"},
        "target": {"apiVersion": "v1", "kind": "Node", "name": node},
    }
    path = f"/api/v1/namespaces/{meta.get('namespace') or 'default'}/pods/{meta.get('name')}/binding"
    # --raw posts the body as is: no client-side schema download, so it works wherever pods/binding does.
    return (
        f"echo {shlex.quote(json.dumps(binding, separators=(',', ':')))} | kubectl create --raw {path} -f -"
    )


def _used_by_node(pods: Sequence[Obj]) -> dict[str, dict[str, Fraction]]:
    used: dict[str, dict[str, Fraction]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        u = used.setdefault(node, {})
        for k, v in _requests(p).items():
            u[k] = u.get(k, Fraction(0)) + v
    return used


def _priority(pod: Obj) -> int:
    return int((pod.get("spec") or {}).get("priority") or 0)


def diagnose(snap: Snapshot) -> dict[str, Any]:
    now = snap.now
    served = served_names(snap)
    names_by_lease: dict[str, set[str]] = {}
    for s in snap.schedulers:
        if s.config.leader_elect:
            names_by_lease.setdefault(s.config.lease_key, set()).update(s.config.names)
    default_key = f"{DEFAULT_LEASE[0]}/{DEFAULT_LEASE[1]}"
    names_by_lease.setdefault(default_key, {DEFAULT_SCHEDULER})
    leases = []
    for le in sorted(snap.leases, key=lambda x: x.key):
        state = "released" if not le.holder else ("fresh" if le.fresh(now) else "expired")
        leases.append({
            "lease": le.key,
            "holder": le.holder,
            "state": state,
            "held_for_seconds": None if le.acquire is None or not le.holder else round(now - le.acquire, 1),
            "renewed_seconds_ago": None if le.renew is None else round(now - le.renew, 1),
            "duration_seconds": le.duration,
            "transitions": le.transitions,
            "scheduler_names": sorted(names_by_lease.get(le.key, ())),
        })  # fmt: skip

    latest = _latest_failures(snap.events)
    pending_pods = [p for p in snap.pods if is_pending(p)]
    unserved: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []  # rows: pod, scheduler_name, pending_seconds[, message]
    for p in sorted(pending_pods, key=_key):
        meta = p.get("metadata") or {}
        created = parse_time(meta.get("creationTimestamp"))
        name = scheduler_name_of(p)
        gated = bool((p.get("spec") or {}).get("schedulingGates"))
        row: dict[str, Any] = {
            "pod": _key(p),
            "scheduler_name": name,
            "pending_seconds": None if created is None else round(now - created, 1),
        }
        if gated:
            row["message"] = "scheduling gates: " + ", ".join(
                g.get("name", "") for g in p["spec"]["schedulingGates"]
            )
            pending.append(row)
            continue
        if name not in served:
            unserved.append(row)
            continue
        ev = latest.get(meta.get("uid") or "")
        row["message"] = ev.note if ev is not None else (_condition_message(p) or "not attempted yet")
        pending.append(row)

    recent = [e for e in snap.events if now - e.t <= snap.recent]
    conflicts: list[dict[str, Any]] = []
    for e in recent:
        if e.reason == "FailedScheduling" and is_binding_conflict(e.note):
            conflicts.append({
                "kind": "binding-conflict", "scheduler": e.controller, "instance": e.instance,
                "detail": f"{e.pod}: {e.note}",
            })  # fmt: skip
    for a, b in concurrent_instances(recent):
        conflicts.append({
            "kind": "two-active-instances", "scheduler": a.controller, "instance": f"{a.instance} + {b.instance}",
            "detail": f"{a.instance} ({a.events} events) and {b.instance} ({b.events} events) both acted "
                      f"between {max(a.first, b.first):.0f} and {min(a.last, b.last):.0f} (epoch seconds)",
        })  # fmt: skip
    pods_by_uid = {(p.get("metadata") or {}).get("uid"): _key(p) for p in snap.pods}
    for uid, count in scheduled_counts(recent).items():
        if count > 1:
            conflicts.append({
                "kind": "scheduled-twice", "scheduler": "", "instance": "",
                "detail": f"{pods_by_uid.get(uid, uid)}: {count} Scheduled events",
            })  # fmt: skip

    nodes: list[dict[str, Any]] = []
    for n in sorted(snap.nodes, key=lambda x: (x.get("metadata") or {}).get("name") or ""):
        problems = []
        ready, why = _node_ready(n)
        if not ready:
            problems.append(f"NotReady ({why})")
        if (n.get("spec") or {}).get("unschedulable"):
            problems.append("unschedulable (cordoned)")
        if problems:
            nodes.append({"node": (n.get("metadata") or {}).get("name"), "problems": problems})

    hints = []
    if unserved:
        used = _used_by_node(snap.pods)
        usable = [
            n for n in snap.nodes if _node_ready(n)[0] and not (n.get("spec") or {}).get("unschedulable")
        ]
        by_key = {_key(p): p for p in pending_pods}
        for row in sorted(unserved, key=lambda r: -_priority(by_key[r["pod"]]))[:MAX_HINTS]:
            pod = by_key[row["pod"]]
            node = next(
                (
                    n
                    for n in usable
                    if _fits(pod, n, used.get((n.get("metadata") or {}).get("name") or "", {}))
                ),
                None,
            )
            if node is None:
                hints.append({"pod": row["pod"], "node": None, "command": None,
                              "note": "no Ready, schedulable node fits its requests, selector and tolerations"})  # fmt: skip
                continue
            nname = (node.get("metadata") or {}).get("name") or ""
            hints.append({"pod": row["pod"], "node": nname, "command": placement_command(pod, nname),
                          "note": f"binds it to {nname} (sets spec.nodeName) with no scheduler involved"})  # fmt: skip

    no_scheduler = not served
    n_problems = len(unserved) + len(pending) + len(conflicts) + len(nodes) + (1 if no_scheduler else 0)
    return {
        "time": now,
        "ok": n_problems == 0,
        "problems": n_problems,
        "no_scheduler_up": no_scheduler,
        "leases": leases,
        "schedulers": {k: v for k, v in sorted(served.items())},
        "unserved": unserved,
        "pending": pending,
        "conflicts": conflicts,
        "nodes": nodes,
        "hints": hints,
    }
