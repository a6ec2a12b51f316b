"""EventRecorder: event shape, series aggregation, non-blocking bounded queue, retries."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.client import ApiError, EventRecorder, object_reference
from kubesched.client.events import truncate_note

T0 = 1_780_000_000_123_456_789  # ns

POD = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "p1",
        "namespace": "team-a",
        "uid": "u-1",
        "resourceVersion": "42",
        "labels": {"x": "y"},
    },
    "spec": {"containers": []},
}


class FakeEventsApi:
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.stored: dict[str, dict[str, Any]] = {}
        self.gate: asyncio.Event | None = None  # when set, writes wait for it
        self.failures: list[BaseException] = []

    async def _enter(self) -> None:
        if self.gate is not None:
            await self.gate.wait()
        await asyncio.sleep(0)
        if self.failures:
            raise self.failures.pop(0)

    async def create(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = None
    ) -> Any:
        assert (api_version, plural) == ("events.k8s.io/v1", "events")
        self.calls.append(("create", body))
        await self._enter()
        name = body["metadata"]["name"]
        if name in self.stored:
            raise ApiError(409, "AlreadyExists", f'events.events.k8s.io "{name}" already exists')
        self.stored[name] = body
        return body

    async def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        patch_type: Any = "merge",
    ) -> Any:
        self.calls.append(("patch", (name, namespace, patch, patch_type)))
        await self._enter()
        if name not in self.stored:
            raise ApiError(404, "NotFound", "not found")
        self.stored[name] = {**self.stored[name], **patch}
        return self.stored[name]


class FakeClock:
    def __init__(self) -> None:
        self.ns = T0

    def __call__(self) -> int:
        return self.ns

    def advance(self, seconds: float) -> None:
        self.ns += int(seconds * 1e9)


@pytest.fixture
def api() -> FakeEventsApi:
    return FakeEventsApi()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def recorder(api: FakeEventsApi, clock: FakeClock) -> Any:
    rec = EventRecorder(
        api, "default-scheduler", "default-scheduler-host1", clock=clock, retry_interval=0.001
    )
    yield rec
    await rec.close(timeout=1)


async def test_event_shape(recorder: EventRecorder, api: FakeEventsApi) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "uid": "n-1"}}
    recorder.event(
        POD, "Normal", "Scheduled", "Binding", "Successfully assigned team-a/p1 to n1", related=node
    )
    assert api.calls == []  # the caller never waits for the API
    assert await recorder.flush(timeout=1)
    ((verb, body),) = api.calls
    assert verb == "create"
    assert body == {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"p1.{T0:x}", "namespace": "team-a"},
        "eventTime": "2026-05-28T20:26:40.123456Z",
        "reportingController": "default-scheduler",
        "reportingInstance": "default-scheduler-host1",
        "action": "Binding",
        "reason": "Scheduled",
        "regarding": {
            "kind": "Pod",
            "namespace": "team-a",
            "name": "p1",
            "uid": "u-1",
            "apiVersion": "v1",
            "resourceVersion": "42",
        },
        "related": {"kind": "Node", "name": "n1", "uid": "n-1", "apiVersion": "v1"},
        "note": "Successfully assigned team-a/p1 to n1",
        "type": "Normal",
    }


async def test_cluster_scoped_objects_get_events_in_default(
    recorder: EventRecorder, api: FakeEventsApi
) -> None:
    recorder.event({"kind": "Node", "apiVersion": "v1", "metadata": {"name": "n1"}}, "Warning", "R", "A", "n")
    await recorder.flush(timeout=1)
    assert api.calls[0][1]["metadata"]["namespace"] == "default"


async def test_repeats_become_a_series(recorder: EventRecorder, api: FakeEventsApi, clock: FakeClock) -> None:
    note = "0/3 nodes are available: 3 Insufficient cpu."
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", note)
    await recorder.flush(timeout=1)
    name = api.calls[0][1]["metadata"]["name"]
    clock.advance(5)
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", note)
    await recorder.flush(timeout=1)
    assert api.calls[1] == (
        "patch",
        (
            name,
            "team-a",
            {"series": {"count": 2, "lastObservedTime": "2026-05-28T20:26:45.123456Z"}},
            "strategic",
        ),
    )
    # Later repeats only count locally...
    for _ in range(3):
        clock.advance(60)
        recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", note)
    await asyncio.sleep(0.01)
    assert len(api.calls) == 2
    # ...until flushed (shutdown) or finished.
    await recorder.flush(timeout=1)
    assert api.calls[2][0] == "patch"
    assert api.calls[2][1][2] == {"series": {"count": 5, "lastObservedTime": "2026-05-28T20:29:45.123456Z"}}
    assert api.stored[name]["series"]["count"] == 5
    assert len(api.stored) == 1


async def test_different_note_or_reason_is_a_new_event(
    recorder: EventRecorder, api: FakeEventsApi, clock: FakeClock
) -> None:
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes: 3 Insufficient cpu.")
    clock.advance(1)
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "0/3 nodes: 3 Insufficient memory.")
    clock.advance(1)
    recorder.event(POD, "Normal", "Scheduled", "Binding", "Successfully assigned team-a/p1 to n1")
    await recorder.flush(timeout=1)
    assert [verb for verb, _ in api.calls] == ["create"] * 3
    assert len(api.stored) == 3


async def test_a_repeat_after_six_minutes_starts_over(
    recorder: EventRecorder, api: FakeEventsApi, clock: FakeClock
) -> None:
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "n")
    clock.advance(10)
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "n")  # series count 2 (patched)
    clock.advance(10)
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "n")  # count 3, local only
    clock.advance(6 * 60 + 1)
    recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "n")
    await recorder.flush(timeout=1)
    verbs = [verb for verb, _ in api.calls]
    # first create, series patch, the old series' final count, a fresh event
    assert verbs == ["create", "patch", "patch", "create"]
    assert api.calls[2][1][2]["series"]["count"] == 3
    assert len(api.stored) == 2


async def test_expire_series_writes_final_counts_and_forgets(
    recorder: EventRecorder, api: FakeEventsApi, clock: FakeClock
) -> None:
    for _ in range(3):
        recorder.event(POD, "Warning", "FailedScheduling", "Scheduling", "n")
        clock.advance(1)
    recorder.event(POD, "Normal", "Scheduled", "Binding", "single")
    await recorder._queue.join()  # written: create, series patch (count 2), create; count 3 is pending
    assert [verb for verb, _ in api.calls] == ["create", "patch", "create"]
    clock.advance(5 * 60)
    recorder.expire_series()  # not quiet for six minutes yet
    await recorder._queue.join()
    assert len(api.calls) == 3
    clock.advance(60 + 1)
    recorder.expire_series()
    await recorder._queue.join()
    assert len(api.calls) == 4
    assert api.calls[-1][1][2]["series"]["count"] == 3
    assert recorder._series == {}
    # After expiry the same event starts a new object.
    recorder.event(POD, "Normal", "Scheduled", "Binding", "single")
    await recorder.flush(timeout=1)
    assert api.calls[-1][0] == "create" and len(api.stored) == 3


async def test_series_patch_of_a_missing_event_creates_it(
    recorder: EventRecorder, api: FakeEventsApi
) -> None:
    api.failures.append(ApiError(500, "InternalError", "etcd hiccup"))  # the first create is lost
    recorder.event(POD, "Warning", "R", "A", "n")
    await recorder.flush(timeout=1)
    recorder.event(POD, "Warning", "R", "A", "n")
    await recorder.flush(timeout=1)
    assert [verb for verb, _ in api.calls] == ["create", "patch", "create"]
    (stored,) = api.stored.values()
    assert stored["series"]["count"] == 2


async def test_transport_errors_are_retried(recorder: EventRecorder, api: FakeEventsApi) -> None:
    api.failures.extend([ConnectionRefusedError("down"), TimeoutError()])
    recorder.event(POD, "Normal", "R", "A", "n")
    assert await recorder.flush(timeout=1)
    assert [verb for verb, _ in api.calls] == ["create"] * 3
    assert len(api.stored) == 1


async def test_queue_is_bounded_and_drops_instead_of_blocking(api: FakeEventsApi, clock: FakeClock) -> None:
    api.gate = asyncio.Event()
    rec = EventRecorder(api, "c", "i", clock=clock, max_queued=2, workers=1)
    try:
        for i in range(5):
            rec.event(POD, "Normal", "R", "A", f"note {i}")
            await asyncio.sleep(0)  # let the worker take the first one
        assert rec.dropped == 2  # 1 being written + 2 queued; 2 dropped
        api.gate.set()
        assert await rec.flush(timeout=1)
        assert sorted(b["note"] for _, b in api.calls) == ["note 0", "note 1", "note 2"]
    finally:
        await rec.close(timeout=1)


async def test_flush_times_out_when_the_api_hangs(api: FakeEventsApi, clock: FakeClock) -> None:
    api.gate = asyncio.Event()
    rec = EventRecorder(api, "c", "i", clock=clock)
    rec.event(POD, "Normal", "R", "A", "n")
    assert not await rec.flush(timeout=0.05)
    api.gate.set()
    await rec.close(timeout=1)


async def test_invalid_type_is_dropped(recorder: EventRecorder, api: FakeEventsApi) -> None:
    recorder.event(POD, "Info", "R", "A", "n")
    await recorder.flush(timeout=1)
    assert api.calls == []


def test_note_truncated_to_1kb_on_a_character_boundary() -> None:
    assert truncate_note("x" * 1024) == "x" * 1024
    cut = truncate_note("é" * 600)  # 1200 bytes
    assert len(cut.encode()) <= 1024 and cut.endswith("...") and cut.startswith("éé")
    assert truncate_note("y" * 5000) == "y" * 1021 + "..."


def test_object_reference_accepts_objects_and_references() -> None:
    assert object_reference(POD) == {
        "kind": "Pod",
        "namespace": "team-a",
        "name": "p1",
        "uid": "u-1",
        "apiVersion": "v1",
        "resourceVersion": "42",
    }
    ref = {"kind": "Node", "name": "n1", "apiVersion": "v1", "extra": "ignored"}
    assert object_reference(ref) == {"kind": "Node", "name": "n1", "apiVersion": "v1"}
