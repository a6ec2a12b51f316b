"""An events.k8s.io/v1 event recorder in the manner of client-go's ``tools/events``.

``event()`` never waits: it builds the Event at once (so ``eventTime`` is when it happened) and queues the API
write for background workers (a few, so event writes never crowd out bindings); when the queue is full the
event is dropped, as client-go drops events when its broadcaster's buffer is full. The queue is deeper than
client-go's 1,000: a scheduler binds thousands of pods a second in a burst, and every ``Scheduled`` event of
such a burst is still written (at ~1 KiB per queued event, a 10,000-pod burst queues ~10 MiB at worst).

Repeats are aggregated into a series: an event with the same type, reason, action, note, regarding and
related objects within six minutes of the last one does not create a new object. The second occurrence
PATCHes ``series: {count: 2, lastObservedTime}`` onto the first; later ones only count locally and are
written when the series ends (six quiet minutes), at the 30-minute refresh, or by :meth:`flush`.
(client-go's key leaves the note out; ours keeps it so that a changed message is recorded, not folded.)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import aiohttp

from kubesched.apimachinery.timefmt import format_micro_time_ns
from kubesched.client.rest import ApiError

log = logging.getLogger(__name__)

EVENTS_API_VERSION = "events.k8s.io/v1"
SERIES_WINDOW_SECONDS = 6 * 60.0  # client-go finishTime
REFRESH_SECONDS = 30 * 60.0  # client-go refreshTime: re-send live series so that their TTL does not expire
NOTE_LIMIT_BYTES = 1024  # events.k8s.io/v1 validation limit for note
MAX_QUEUED_EVENTS = 100_000
MAX_TRIES_PER_EVENT = 12
RETRY_INTERVAL_SECONDS = 10.0
HOUSEKEEPING_SECONDS = 60.0

_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")


class EventClient(Protocol):
    """The calls the recorder makes (``ApiClient`` has them)."""

    async def create(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = ...
    ) -> Any: ...

    async def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = ...,
        patch_type: Any = ...,
    ) -> Any: ...


class EventSink(Protocol):
    """Where a recorder hands its writes when its client has an API writer (``ApiClient.event_sink``)."""

    def event(self, event: dict[str, Any]) -> None: ...

    async def flush(self, timeout: float | None = None) -> bool: ...


def object_reference(obj: dict[str, Any]) -> dict[str, str]:
    """An ObjectReference for a full object (``kind``, ``apiVersion``, ``metadata``) or a reference dict."""
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        ref = {
            "kind": obj.get("kind"),
            "namespace": meta.get("namespace"),
            "name": meta.get("name"),
            "uid": meta.get("uid"),
            "apiVersion": obj.get("apiVersion"),
            "resourceVersion": meta.get("resourceVersion"),
        }
    else:
        ref = {f: obj.get(f) for f in _REFERENCE_FIELDS}
    return {k: v for k, v in ref.items() if v}


def truncate_note(note: str, limit: int = NOTE_LIMIT_BYTES) -> str:
    """Cut ``note`` to at most ``limit`` UTF-8 bytes, ending in ``...`` when cut."""
    if len(note) * 4 <= limit:
        return note  # at most 4 bytes per character: short notes need no encoding to know they fit
    encoded = note.encode()
    if len(encoded) <= limit:
        return note
    return encoded[: limit - 3].decode("utf-8", "ignore") + "..."


@dataclass
class _Series:
    """The cached first event of a (potential) series."""

    event: dict[str, Any]
    last_observed_ns: int
    dirty: bool = False  # counted locally but not written yet


class EventRecorder:
    """Writes events.k8s.io/v1 events for ``reporting_controller`` (e.g. ``default-scheduler``) as
    ``reporting_instance`` (e.g. ``default-scheduler-<hostname>``). Use from the event loop."""

    def __init__(
        self,
        client: EventClient,
        reporting_controller: str,
        reporting_instance: str,
        *,
        max_queued: int = MAX_QUEUED_EVENTS,
        workers: int = 4,
        clock: Callable[[], int] = time.time_ns,
        retry_interval: float = RETRY_INTERVAL_SECONDS,
        housekeeping_interval: float = HOUSEKEEPING_SECONDS,
    ) -> None:
        self.client = client
        self.reporting_controller = reporting_controller
        self.reporting_instance = reporting_instance
        self.dropped = 0
        self._clock = clock
        self._retry_interval = retry_interval
        self._housekeeping_interval = housekeeping_interval
        self._workers = workers
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(maxsize=max_queued)
        self._series: dict[tuple[Any, ...], _Series] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._last_refresh_ns = clock()
        # A client with an API writer attached (kubesched.client.writer) takes the writes off this process.
        self._sink: EventSink | None = getattr(client, "event_sink", None)

    # ---- recording ----

    def event(
        self,
        regarding: dict[str, Any],
        type: str,
        reason: str,
        action: str,
        note: str,
        related: dict[str, Any] | None = None,
    ) -> None:
        """Record an event about ``regarding`` (a full object or an ObjectReference). Never blocks."""
        if type not in ("Normal", "Warning"):
            log.error("unsupported event type %r (reason %s); dropping it", type, reason)
            return
        self._ensure_started()
        now = self._clock()
        ref = object_reference(regarding)
        rel = object_reference(related) if related else None
        note = truncate_note(note)
        key = (
            type,
            action,
            reason,
            note,
            tuple(ref.items()),  # object_reference builds its fields in one fixed order
            tuple(rel.items()) if rel else None,
        )
        cached = self._series.get(key)
        if cached is not None and now - cached.last_observed_ns <= SERIES_WINDOW_SECONDS * 1e9:
            cached.last_observed_ns = now
            series = cached.event.get("series")
            count = series["count"] + 1 if series else 2
            cached.event["series"] = {"count": count, "lastObservedTime": format_micro_time_ns(now)}
            if series is None:
                self._enqueue(dict(cached.event))
            else:
                cached.dirty = True
            return
        if cached is not None and cached.dirty:
            self._enqueue(dict(cached.event))  # the old series ended: write its final count
        event = self._make_event(now, ref, rel, type, reason, action, note)
        self._series[key] = _Series(event, now)
        self._enqueue(dict(event))

    def _make_event(
        self,
        now: int,
        ref: dict[str, str],
        rel: dict[str, str] | None,
        type: str,
        reason: str,
        action: str,
        note: str,
    ) -> dict[str, Any]:
        event: dict[str, Any] = {
            "apiVersion": EVENTS_API_VERSION,
            "kind": "Event",
            "metadata": {
                "name": f"{ref.get('name', '')}.{now:x}",
                "namespace": ref.get("namespace") or "default",
            },
            "eventTime": format_micro_time_ns(now),
            "reportingController": self.reporting_controller,
            "reportingInstance": self.reporting_instance,
            "action": action,
            "reason": reason,
            "regarding": ref,
            "note": note,
            "type": type,
        }
        if rel:
            event["related"] = rel
        return event

    def submit(self, event: dict[str, Any]) -> None:
        """Queue a ready-made write (a new event, or one with ``series`` for the PATCH) as it is."""
        self._ensure_started()
        self._enqueue(event)

    async def write(self, event: dict[str, Any]) -> None:
        """Write ``event`` now, with the retries of the background writes (an API writer's child uses this)."""
        await self._record_with_retries(event)

    def _enqueue(self, event: dict[str, Any]) -> None:
        if self._sink is not None:
            self._sink.event(event)
            return
        try:
            self._queue.put_nowait(event)
        except asyncio.QueueFull:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning("event queue full; dropped %d events so far", self.dropped)

    # ---- background work ----

    def _ensure_started(self) -> None:
        if self._tasks:
            return
        loop = asyncio.get_running_loop()
        workers = 0 if self._sink is not None else self._workers
        self._tasks = [loop.create_task(self._worker(), name=f"event writer {i}") for i in range(workers)]
        self._tasks.append(loop.create_task(self._housekeeping(), name="event series housekeeping"))

    async def _worker(self) -> None:
        while True:
            event = await self._queue.get()
            try:
                await self._record_with_retries(event)
            except Exception:
                log.exception("writing event %s failed", event["metadata"]["name"])
            finally:
                self._queue.task_done()

    async def _record_with_retries(self, event: dict[str, Any]) -> None:
        for attempt in range(1, MAX_TRIES_PER_EVENT + 1):
            if not await self._record(event):
                return
            if attempt < MAX_TRIES_PER_EVENT:
                await asyncio.sleep(self._retry_interval * (1.0 + random.random() * 0.25))
        log.error("giving up on event %s after %d tries", event["metadata"]["name"], MAX_TRIES_PER_EVENT)

    async def _record(self, event: dict[str, Any]) -> bool:
        """One write. Returns True when it is worth retrying (transport trouble), like client-go."""
        meta = event["metadata"]
        series = event.get("series")
        try:
            if series is not None:
                try:
                    await self.client.patch(
                        EVENTS_API_VERSION,
                        "events",
                        meta["name"],
                        {"series": series},
                        namespace=meta["namespace"],
                        patch_type="strategic",
                    )
                    return False
                except ApiError as e:
                    if not e.is_not_found():
                        raise
                    # The first event was never written (or expired): create it with the series.
            await self.client.create(EVENTS_API_VERSION, "events", event, namespace=meta["namespace"])
            return False
        except ApiError as e:
            if e.is_already_exists():
                # A series create racing the first create: retrying turns into a PATCH.
                return series is not None
            log.error("server rejected event %s (will not retry): %s", meta["name"], e)
            return False
        except (aiohttp.ClientError, OSError, TimeoutError) as e:
            log.warning("unable to write event %s (will retry): %s", meta["name"], e)
            return True

    async def _housekeeping(self) -> None:
        while True:
            await asyncio.sleep(self._housekeeping_interval)
            self.expire_series()

    def expire_series(self) -> None:
        """End series quiet for six minutes (writing their final count), forget old single events, and
        re-send live series every 30 minutes. Runs every minute in the background."""
        now = self._clock()
        window = SERIES_WINDOW_SECONDS * 1e9
        refresh = now - self._last_refresh_ns >= REFRESH_SECONDS * 1e9
        if refresh:
            self._last_refresh_ns = now
        for key, cached in list(self._series.items()):
            ended = now - cached.last_observed_ns > window
            if "series" in cached.event and (refresh or (ended and cached.dirty)):
                self._enqueue(dict(cached.event))
                cached.dirty = False
            if ended:
                del self._series[key]

    async def flush(self, timeout: float | None = None) -> bool:
        """Write pending series counts and wait for the queue to drain (for shutdown). False on timeout."""
        for cached in self._series.values():
            if cached.dirty:
                self._enqueue(dict(cached.event))
                cached.dirty = False
        if self._sink is not None:
            return await self._sink.flush(timeout)
        if not self._tasks and not self._queue.empty():
            self._ensure_started()
        try:
            async with asyncio.timeout(timeout):
                await self._queue.join()
        except TimeoutError:
            return False
        return True

    async def close(self, timeout: float | None = 5.0) -> None:
        """Flush, then stop the background tasks."""
        await self.flush(timeout)
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
