"""Who led when: Lease observations and schedulers' binding events as timelines (pure functions).

Two schedulers with one name overlap when the old leader still acts after the new one acquired the Lease. From
the outside that shows as the old holder renewing after the new acquire time, or as the old scheduler's
``Scheduled``/``FailedScheduling`` events (its ``reportingInstance``) after it. The longest the old leader can
have believed it led is its last renewal plus its lease duration (client-go gives up within the renew deadline,
which is shorter), so the report gives both: the overlap observed and that bound.

Times are seconds since the epoch. Lease stamps are written with each writer's clock, so across machines the
figures carry their clock skew; on one machine they are exact to the stamp's microsecond.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.ops.common import parse_time

CONFLICT_MARKERS = (
    "already assigned to node",
    "Operation cannot be fulfilled",
    "the object has been modified",
)


@dataclass(frozen=True)
class LeaseSample:
    """One observation of a Lease: when we saw it (``t``) and what its spec said."""

    t: float
    holder: str
    renew: float | None = None
    acquire: float | None = None
    duration: float = 0.0


@dataclass(frozen=True)
class SchedEvent:
    """A scheduler's ``Scheduled`` or ``FailedScheduling`` event, as events.k8s.io/v1 has it."""

    t: float
    controller: str  # reportingController: the profile's schedulerName
    instance: str  # reportingInstance: ``<schedulerName>-<hostname>``
    reason: str
    pod_uid: str = ""
    pod: str = ""  # namespace/name
    note: str = ""
    count: int = 1  # series.count when the event is a series

    @classmethod
    def from_object(cls, ev: dict[str, Any]) -> SchedEvent | None:
        """From an events.k8s.io/v1 Event about a pod; None for other events."""
        reason = ev.get("reason") or ""
        if reason not in ("Scheduled", "FailedScheduling"):
            return None
        reg = ev.get("regarding") or {}
        series = ev.get("series") or {}
        t = (
            parse_time(series.get("lastObservedTime"))
            or parse_time(ev.get("eventTime"))
            or parse_time(ev.get("deprecatedLastTimestamp"))
            or parse_time((ev.get("metadata") or {}).get("creationTimestamp"))
        )
        if t is None:
            return None
        return cls(
            t=t,
            controller=ev.get("reportingController") or "",
            instance=ev.get("reportingInstance") or "",
            reason=reason,
            pod_uid=reg.get("uid") or "",
            pod=f"{reg.get('namespace') or ''}/{reg.get('name') or ''}",
            note=ev.get("note") or "",
            count=int(series.get("count") or 1),
        )


def is_binding_conflict(note: str) -> bool:
    """A failed binding because someone else wrote the pod first (409 from ``pods/binding``)."""
    return any(m in note for m in CONFLICT_MARKERS)


@dataclass
class Handover:
    """What a takeover measured."""

    old_holder: str
    new_holder: str = ""
    new_acquired: float | None = None  # the new holder's acquireTime (its clock)
    new_seen: float | None = None  # when we first saw it hold the Lease (our clock)
    handover_seconds: float | None = None  # from the action to ``new_seen``
    old_last_renew: float | None = None
    old_released: bool = False  # the old holder emptied the Lease (a clean shutdown)
    overlap_observed: float = 0.0  # the old leader's renewals or events after the new acquire time
    overlap_bound: float = 0.0  # the longest the old leader can have believed it led after that
    events_distinguish: bool = False  # the schedulers' events name different reportingInstances
    old_events_after: int = 0
    new_events_after: int = 0
    conflicts_after: int = 0
    holders: list[tuple[float, str]] = field(default_factory=list)  # every holder change observed

    @property
    def won(self) -> bool:
        return bool(self.new_holder)


def holder_changes(samples: Sequence[LeaseSample]) -> list[tuple[float, str]]:
    """(time, holder) at each change of holder (an empty holder is a release)."""
    out: list[tuple[float, str]] = []
    for s in sorted(samples, key=lambda s: s.t):
        if not out or out[-1][1] != s.holder:
            out.append((s.t, s.holder))
    return out


def handover(
    samples: Sequence[LeaseSample],
    events: Sequence[SchedEvent],
    old_holder: str,
    action_t: float,
    scheduler_name: str = "",
    is_new: Any = None,
) -> Handover:
    """Measure a handover away from ``old_holder`` that started at ``action_t``.

    ``is_new(identity) -> bool`` accepts the holders that count as a win (default: any holder other than the
    old one); ``scheduler_name`` limits events to that ``reportingController`` ("" for all)."""
    h = Handover(old_holder=old_holder, holders=holder_changes(samples))
    ordered = sorted(samples, key=lambda s: s.t)
    for s in ordered:
        if s.holder == old_holder and s.renew is not None:
            h.old_last_renew = s.renew if h.old_last_renew is None else max(h.old_last_renew, s.renew)
    old_duration = max((s.duration for s in ordered if s.holder == old_holder), default=0.0)
    seen_old = False
    for s in ordered:
        if s.holder == old_holder:
            seen_old = True
        elif seen_old and s.holder == "" and s.renew is not None:
            h.old_released = (
                True  # emptied by its holder; a deleted Lease (no record at all) is not a release
            )
        if s.t < action_t or not s.holder or s.holder == old_holder:
            continue
        if is_new is not None and not is_new(s.holder):
            continue
        h.new_holder = s.holder
        h.new_seen = s.t
        h.new_acquired = s.acquire if s.acquire is not None else s.t
        h.handover_seconds = max(0.0, s.t - action_t)
        break
    if h.new_acquired is None:
        return h
    start = h.new_acquired
    ev = [e for e in events if not scheduler_name or e.controller == scheduler_name]
    before = {e.instance for e in ev if e.t < action_t}
    after = [e for e in ev if e.t >= start]
    new_instances = {e.instance for e in after} - before
    h.events_distinguish = bool(before) and bool(new_instances)
    h.conflicts_after = sum(
        1 for e in after if e.reason == "FailedScheduling" and is_binding_conflict(e.note)
    )
    last_old_activity = h.old_last_renew
    if h.events_distinguish:
        old_after = [e for e in after if e.instance in before]
        h.old_events_after = len(old_after)
        h.new_events_after = sum(1 for e in after if e.instance in new_instances)
        if old_after:
            t_last = max(e.t for e in old_after)
            last_old_activity = t_last if last_old_activity is None else max(last_old_activity, t_last)
    if last_old_activity is not None:
        h.overlap_observed = max(0.0, last_old_activity - start)
    if h.old_last_renew is not None:
        # A released Lease means the old leader stopped itself at its last write: nothing more to bound.
        end = h.old_last_renew if h.old_released else h.old_last_renew + old_duration
        h.overlap_bound = max(h.overlap_observed, end - start, 0.0)
    return h


@dataclass(frozen=True)
class InstanceSpan:
    controller: str
    instance: str
    first: float
    last: float
    events: int


def instance_spans(events: Iterable[SchedEvent]) -> dict[str, list[InstanceSpan]]:
    """Per scheduler name, each reportingInstance's first and last event."""
    spans: dict[tuple[str, str], list[float]] = {}
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for e in events:
        key = (e.controller, e.instance)
        s = spans.setdefault(key, [e.t, e.t])
        s[0], s[1] = min(s[0], e.t), max(s[1], e.t)
        counts[key] += e.count
    out: dict[str, list[InstanceSpan]] = defaultdict(list)
    for (ctrl, inst), (first, last) in spans.items():
        out[ctrl].append(InstanceSpan(ctrl, inst, first, last, counts[(ctrl, inst)]))
    for v in out.values():
        v.sort(key=lambda s: s.first)
    return dict(out)


def concurrent_instances(events: Iterable[SchedEvent]) -> list[tuple[InstanceSpan, InstanceSpan]]:
    """Pairs of instances of one scheduler name whose activity interleaves: both acted in the same period,
    which a failover (one stops, the next starts) never shows."""
    pairs: list[tuple[InstanceSpan, InstanceSpan]] = []
    for spans in instance_spans(events).values():
        for i, a in enumerate(spans):
            for b in spans[i + 1 :]:
                if b.first < a.last:  # sorted by first: b started before a's last event
                    pairs.append((a, b))
    return pairs


def scheduled_counts(events: Iterable[SchedEvent]) -> dict[str, int]:
    """``Scheduled`` events per pod uid (series counted): more than one means a pod was reported bound twice."""
    out: dict[str, int] = defaultdict(int)
    for e in events:
        if e.reason == "Scheduled" and e.pod_uid:
            out[e.pod_uid] += e.count
    return dict(out)
