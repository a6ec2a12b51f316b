"""core/v1 Event ↔ events.k8s.io/v1 Event: one storage, two API views (upstream ``pkg/apis/events/v1/conversion.go``).

Events are stored in core/v1 form; events.k8s.io/v1 reads convert on the way out and writes on the way in.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]

# (core/v1 field, events.k8s.io/v1 field)
_RENAMES = (
    ("message", "note"),
    ("involvedObject", "regarding"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
)
_SAME = ("metadata", "eventTime", "series", "reportingInstance", "action", "reason", "type", "related")


def core_to_v1(ev: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for key in _SAME:
        if key in ev:
            out[key] = ev[key]
    for core, v1 in _RENAMES:
        if core in ev and ev[core] not in (None, "", 0, {}):
            out[v1] = ev[core]
    if "series" in ev and isinstance(ev["series"], dict):
        out["series"] = {k: v for k, v in ev["series"].items() if k in ("count", "lastObservedTime")}
    return out


def v1_to_core(ev: Obj) -> Obj:
    out: Obj = {"kind": "Event", "apiVersion": "v1"}
    for key in _SAME:
        if key in ev:
            out[key] = ev[key]
    for core, v1 in _RENAMES:
        if v1 in ev:
            out[core] = ev[v1]
    # kubectl's event table reads source.component; keep it filled for new-style events.
    if "source" not in out and ev.get("reportingController"):
        out["source"] = {"component": ev["reportingController"]}
    if "involvedObject" not in out:
        out["involvedObject"] = {}
    return out
