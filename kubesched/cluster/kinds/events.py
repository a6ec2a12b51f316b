"""Events: one core/v1 storage seen through two APIs (core/v1 and events.k8s.io/v1, converted by
``events_conv``), each with its own field selector names, validation and printer."""

from __future__ import annotations

import datetime as dt
from typing import Any

from kubesched.cluster import events_conv, validation
from kubesched.cluster.kinds.printing import Column, Printer, age, as_dict, col, name_of, parse_time
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import FieldGetter, Obj, ResourceType, field_path

CORE_FIELDS: dict[str, FieldGetter] = {
    "involvedObject.kind": field_path("involvedObject.kind"),
    "involvedObject.namespace": field_path("involvedObject.namespace"),
    "involvedObject.name": field_path("involvedObject.name"),
    "involvedObject.uid": field_path("involvedObject.uid"),
    "involvedObject.apiVersion": field_path("involvedObject.apiVersion"),
    "involvedObject.resourceVersion": field_path("involvedObject.resourceVersion"),
    "involvedObject.fieldPath": field_path("involvedObject.fieldPath"),
    "reason": field_path("reason"),
    "reportingComponent": field_path("reportingComponent"),
    "source": field_path("source.component"),
    "type": field_path("type"),
}

# events.k8s.io/v1 names the same stored fields differently (regarding.* for involvedObject.*); the getters read
# the stored core/v1 form, so selectors need no conversion.
V1_FIELDS: dict[str, FieldGetter] = {
    **{
        k.replace("involvedObject.", "regarding."): v
        for k, v in CORE_FIELDS.items()
        if k.startswith("involved")
    },
    "reason": CORE_FIELDS["reason"],
    "reportingController": CORE_FIELDS["reportingComponent"],
    "type": CORE_FIELDS["type"],
}

COLUMNS: list[Column] = [
    col("Last Seen", "When the event last happened."),
    col("Type", "Normal or Warning."),
    col("Reason", "Short machine-readable reason."),
    col("Object", "The object the event is about."),
    col("Subobject", "The part of the object, if any.", priority=1),
    col("Source", "The component that reported the event.", priority=1),
    col("Message", "Human-readable description."),
    col("First Seen", "When the event first happened.", priority=1),
    col("Count", "How many times it happened.", priority=1),
    col("Name", "Name of the event object.", priority=1, format="name"),
]


def _printer(v1: bool) -> Printer:
    """The row printer for events as the core/v1 (``v1=False``) or events.k8s.io/v1 API shows them."""

    def cells(event: Obj, now: dt.datetime) -> list[Any]:
        involved = as_dict(event.get("regarding" if v1 else "involvedObject"))
        source = as_dict(event.get("deprecatedSource" if v1 else "source"))
        first_ts = event.get("deprecatedFirstTimestamp" if v1 else "firstTimestamp")
        last_ts = event.get("deprecatedLastTimestamp" if v1 else "lastTimestamp")
        count = event.get("deprecatedCount" if v1 else "count") or 0
        controller = event.get("reportingController" if v1 else "reportingComponent") or ""
        message = str(event.get("note" if v1 else "message") or "")

        first = age(first_ts, now) if parse_time(first_ts) else age(event.get("eventTime"), now)
        last = age(last_ts, now) if parse_time(last_ts) else first
        series = event.get("series")
        if isinstance(series, dict):
            last = age(series.get("lastObservedTime"), now)
            count = series.get("count") or 0
        elif not count:
            count = 1  # events written through events.k8s.io carry no count when they happened once
        kind = str(involved.get("kind") or "").lower()
        target = f"{kind}/{involved['name']}" if involved.get("name") else kind
        component = source.get("component") or controller
        instance = source.get("host") or event.get("reportingInstance") or ""
        return [
            last,
            event.get("type") or "",
            event.get("reason") or "",
            target,
            involved.get("fieldPath") or "",
            f"{component}, {instance}" if instance else str(component),
            message.strip(),
            first,
            int(count),
            name_of(event),
        ]

    return cells


class EventStrategy(Strategy):
    """core/v1 Event."""

    fields = CORE_FIELDS
    columns = COLUMNS

    def __init__(self, *, v1: bool = False) -> None:
        super().__init__()
        self._print = _printer(v1)

    def stored_api_version(self, rtype: ResourceType) -> str:
        return "v1"  # both views store core/v1 events

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_event(rtype, obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return validation.validate_event_update(rtype, new, old)

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return self._print(obj, now)


class EventsV1Strategy(EventStrategy):
    """events.k8s.io/v1 Event: reads convert the stored core/v1 event, writes convert back before storing."""

    fields = V1_FIELDS
    to_view = staticmethod(events_conv.core_to_v1)
    from_view = staticmethod(events_conv.v1_to_core)

    def __init__(self) -> None:
        super().__init__(v1=True)

    def validate_create(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        if rtype.group != "events.k8s.io":
            return super().validate_create(rtype, obj)
        # validate_event checks the metadata as the generic last pass does, but with DNS-subdomain names instead of
        # path segments ("/", "%", "." and ".." are no DNS subdomains either), so that pass could add nothing. It is
        # skipped because this is a hot path: one Scheduled event per bound pod.
        return self.validate_object(rtype, obj)


CORE = EventStrategy()
V1 = EventsV1Strategy()
