"""``kubesched chaos``'s bookkeeping (pure): pods seen, deletions, bindings, leader changes, and the verdict.

The rules checked:
- every replacement (a pod of a watched workload first seen after the run started) is bound within the
  schedule timeout of when it appeared;
- no pod is bound twice: once ``spec.nodeName`` is set it never changes, and each pod uid has at most one
  ``Scheduled`` event (series counted);
- nothing is left Pending at the end.
Times are this machine's clock (observation times), so latencies carry no cross-machine skew.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from itertools import pairwise
from typing import Any

from kubesched.ops.common import percentile


@dataclass
class PodTrack:
    uid: str
    key: str  # namespace/name
    workload: str
    seen: float  # first observed
    initial: bool  # existed when the run started
    node: str = ""
    bound: float | None = None  # first observed with spec.nodeName
    gone: float | None = None  # observed deleted (or terminating)


@dataclass
class Report:
    duration: float
    deletions: int = 0
    leader_kills: int = 0
    replacements: int = 0
    scheduled: int = 0
    latency_p50: float | None = None
    latency_p99: float | None = None
    latency_max: float | None = None
    leader_changes: int = 0
    leaders: list[dict[str, Any]] = field(default_factory=list)
    pending_at_end: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


class ChaosBook:
    def __init__(self, start: float, schedule_timeout: float) -> None:
        self.start = start
        self.schedule_timeout = schedule_timeout
        self.pods: dict[str, PodTrack] = {}
        self.deletions: list[tuple[float, str, str]] = []  # (t, pod key, "workload" | "leader")
        self.scheduled_events: dict[str, dict[str, int]] = {}  # pod uid -> event name -> count
        self.holders: list[tuple[float, str]] = []
        self.violations: list[str] = []
        self.notes: list[str] = []

    # ---- observations ----

    def observe_pod(
        self, t: float, uid: str, key: str, workload: str, node: str, deleting: bool, initial: bool
    ) -> None:
        tr = self.pods.get(uid)
        if tr is None:
            tr = self.pods[uid] = PodTrack(uid, key, workload, t, initial)
        if node:
            if not tr.node:
                tr.node, tr.bound = node, t
            elif node != tr.node:
                self.violations.append(f"pod {key} (uid {uid}) bound twice: to {tr.node}, then to {node}")
                tr.node = node
        if deleting and tr.gone is None:
            tr.gone = t

    def observe_deleted(self, t: float, uid: str) -> None:
        tr = self.pods.get(uid)
        if tr is not None and tr.gone is None:
            tr.gone = t

    def observe_scheduled_event(self, pod_uid: str, event_name: str, count: int) -> None:
        if pod_uid:
            per = self.scheduled_events.setdefault(pod_uid, {})
            per[event_name] = max(count, per.get(event_name, 0))

    def observe_holder(self, t: float, holder: str) -> None:
        if not self.holders or self.holders[-1][1] != holder:
            self.holders.append((t, holder))

    def deleted(self, t: float, key: str, kind: str) -> None:
        self.deletions.append((t, key, kind))

    # ---- verdict ----

    def finish(self, end: float, pending_now: dict[str, str]) -> Report:
        """``pending_now``: uid -> key of the watched pods a final LIST found unbound and not terminating."""
        r = Report(duration=round(end - self.start, 1))
        r.deletions = sum(1 for d in self.deletions if d[2] == "workload")
        r.leader_kills = sum(1 for d in self.deletions if d[2] == "leader")
        latencies: list[float] = []
        for tr in sorted(self.pods.values(), key=lambda p: p.seen):
            if tr.initial:
                continue
            r.replacements += 1
            if tr.bound is not None:
                r.scheduled += 1
                lat = tr.bound - tr.seen
                latencies.append(lat)
                if lat > self.schedule_timeout:
                    r.violations.append(
                        f"pod {tr.key} scheduled after {lat:.1f}s (more than --schedule-timeout "
                        f"{self.schedule_timeout:g}s)"
                    )
            elif tr.gone is None and tr.uid not in pending_now and end - tr.seen > self.schedule_timeout:
                r.violations.append(f"pod {tr.key} not scheduled within {self.schedule_timeout:g}s")
        for uid, per in self.scheduled_events.items():
            n = sum(per.values())
            if n > 1:
                key = self.pods[uid].key if uid in self.pods else uid
                r.violations.append(f"pod {key} has {n} Scheduled events (bound twice?)")
        for uid, key in sorted(pending_now.items(), key=lambda kv: kv[1]):
            r.pending_at_end.append(key)
            r.violations.append(f"pod {key} left Pending at the end")
            self.pods.setdefault(uid, PodTrack(uid, key, "", end, False))
        r.violations[:0] = self.violations  # rebinding seen live comes first
        if latencies:
            r.latency_p50 = round(percentile(latencies, 50) or 0.0, 3)
            r.latency_p99 = round(percentile(latencies, 99) or 0.0, 3)
            r.latency_max = round(max(latencies), 3)
        r.leaders = [{"t": round(t - self.start, 2), "holder": h} for t, h in self.holders]
        r.leader_changes = leader_changes([h for _, h in self.holders])
        r.notes = list(self.notes)
        return r


def leader_changes(holders: list[str]) -> int:
    """Changes from one holder to another; a release in between (holder "") is part of the same change."""
    named = [h for h in holders if h]
    return sum(1 for a, b in pairwise(named) if a != b)
