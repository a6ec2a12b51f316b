"""The API writer child (kubesched/client/writer.py): frames, answers and errors as over the client's own
connections, every event written (across a killed, a hung and a failing child), and a flushing shutdown."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from client_fakes import FakeServer, json_response, status
from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.client import ApiClient, ApiError
from kubesched.client import writer as writer_module
from kubesched.client.events import EventRecorder
from kubesched.client.rest import _LeanResponse
from kubesched.client.writer import ApiWriter, FrameReader, decode_reply, encode_reply, frame

BINDING = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "p1", "namespace": "ns", "uid": "u1"},
    "target": {"kind": "Node", "name": "n1"},
}
POD = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p1", "namespace": "ns", "uid": "u1"}}


# ---- frames and replies ----


@settings(max_examples=200, deadline=None)
@given(
    frames=st.lists(
        st.tuples(st.integers(0, 255), st.integers(0, 2**32 - 1), st.binary(max_size=200)), max_size=12
    ),
    cuts=st.lists(st.integers(1, 64), max_size=40),
)
def test_frames_survive_any_read_boundaries(frames: list[tuple[int, int, bytes]], cuts: list[int]) -> None:
    wire = b"".join(frame(k, i, p) for k, i, p in frames)
    reader = FrameReader()
    got: list[tuple[int, int, bytes]] = []
    pos = 0
    for cut in [*cuts, len(wire)]:
        got.extend(reader.feed(wire[pos : pos + cut]))
        pos += cut
        if pos >= len(wire):
            break
    assert got == frames


@settings(max_examples=200, deadline=None)
@given(
    code=st.integers(100, 599),
    content_type=st.sampled_from(["", "application/json", "text/plain; charset=utf-8"]),
    retry_after=st.sampled_from(["", "0", "3", "Wed, 21 Oct 2015 07:28:00 GMT"]),
    body=st.binary(max_size=300),
)
def test_replies_round_trip(code: int, content_type: str, retry_after: str, body: bytes) -> None:
    headers = {k: v for k, v in (("content-type", content_type), ("retry-after", retry_after)) if v}
    back = decode_reply(encode_reply(_LeanResponse(code, headers, body, True)))
    assert isinstance(back, _LeanResponse)
    assert (back.status, back.headers, back.body) == (code, headers, body)


@pytest.mark.parametrize(
    "error",
    [
        TimeoutError(),
        aiohttp.ServerDisconnectedError("gone\nmidway"),
        aiohttp.ClientOSError(111, "cannot connect"),
        aiohttp.ClientPayloadError("malformed response"),
        RuntimeError("anything else"),
    ],
)
def test_transport_errors_keep_their_kind(error: Exception) -> None:
    back = decode_reply(encode_reply(error))
    assert isinstance(back, Exception)
    expected = type(error) if not isinstance(error, RuntimeError) else aiohttp.ClientConnectionError
    assert type(back) is expected
    assert isinstance(back, TimeoutError | aiohttp.ClientError)


# ---- with a child process ----


class EventStore:
    """A server's events endpoint (create and series PATCH) and a binding endpoint scripted by the test."""

    def __init__(self) -> None:
        self.created: dict[str, dict[str, Any]] = {}
        self.creates = 0
        self.bindings: list[dict[str, Any]] = []
        self.binding_answers: list[web.Response] = []
        self.hold_bindings: asyncio.Event | None = None
        self.hold_events: asyncio.Event | None = None

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = orjson.loads(raw) if raw else None
        if request.path.endswith("/binding"):
            self.bindings.append(body)
            if self.hold_bindings is not None:
                await self.hold_bindings.wait()
            if self.binding_answers:
                return self.binding_answers.pop(0)
            return json_response({"kind": "Status", "status": "Success"}, 201)
        if "/events" in request.path:
            if self.hold_events is not None:
                await self.hold_events.wait()
            if request.method == "POST":
                self.creates += 1
                name = body["metadata"]["name"]
                if name in self.created:
                    return json_response(status(409, "AlreadyExists", "exists"), 409)
                self.created[name] = body
                return json_response(body, 201)
            name = request.path.rsplit("/", 1)[1]
            if name not in self.created:
                return json_response(status(404, "NotFound", "no"), 404)
            self.created[name].update(body)
            return json_response(self.created[name])
        return json_response(status(404, "NotFound", "no"), 404)


@pytest.fixture
def store(server: FakeServer) -> EventStore:
    s = EventStore()
    server.handler = s.handle
    return s


async def _client(server: FakeServer, requests: bool = True, **kwargs: Any) -> tuple[ApiClient, ApiWriter]:
    client = ApiClient(server.url, timeout=10)
    writer = ApiWriter(client.config, timeout=10, **kwargs)
    await writer.start()
    client.attach_writer(writer, requests=requests)
    return client, writer


def _events(recorder: EventRecorder, n: int) -> None:
    for i in range(n):
        pod = {**POD, "metadata": {**POD["metadata"], "name": f"p{i}", "uid": f"u{i}"}}
        recorder.event(pod, "Normal", "Scheduled", "Binding", f"Successfully assigned ns/p{i} to n1")


async def test_bindings_and_events_go_through_the_child(server: FakeServer, store: EventStore) -> None:
    client, writer = await _client(server)
    try:
        assert writer.pid is not None and writer.pid != os.getpid()
        answer = await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        assert answer == {"kind": "Status", "status": "Success"}
        assert store.bindings == [BINDING]
        recorder = EventRecorder(client, "default-scheduler", "default-scheduler-h")
        _events(recorder, 50)
        assert await recorder.flush(10)
        assert len(store.created) == 50
        assert client._lean is None  # this process opened no connection of its own
    finally:
        await client.close()
    assert writer.closed and writer.pid is None


async def test_errors_and_retries_as_in_process(server: FakeServer, store: EventStore) -> None:
    store.binding_answers = [
        web.Response(status=429, headers={"Retry-After": "0"}, text="slow down"),
        json_response(status(409, "Conflict", "pod p1 is already assigned to node n2"), 409),
    ]
    client, _ = await _client(server)
    try:
        with pytest.raises(ApiError) as conflict:
            await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        assert conflict.value.is_conflict() and "already assigned" in conflict.value.message
        assert len(store.bindings) == 2  # the 429 was retried (by the parent's client, as in process)
    finally:
        await client.close()


async def test_events_only_mode_keeps_bindings_in_process(server: FakeServer, store: EventStore) -> None:
    client, _ = await _client(server, requests=False)
    try:
        await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        assert client._lean is not None  # the binding went over this process's own connection
        recorder = EventRecorder(client, "default-scheduler", "default-scheduler-h")
        _events(recorder, 5)
        assert await recorder.flush(10)
        assert len(store.created) == 5
    finally:
        await client.close()


async def test_a_killed_child_fails_requests_in_flight_and_loses_no_event(
    server: FakeServer, store: EventStore
) -> None:
    store.hold_bindings = asyncio.Event()
    store.hold_events = asyncio.Event()
    client, writer = await _client(server)
    try:
        recorder = EventRecorder(client, "default-scheduler", "default-scheduler-h")
        binding = asyncio.ensure_future(
            client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        )
        _events(recorder, 30)
        async with asyncio.timeout(10):
            while not store.bindings:
                await asyncio.sleep(0.01)
        first = writer.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        with pytest.raises(aiohttp.ServerDisconnectedError):
            await binding
        store.hold_bindings.set()
        store.hold_events.set()
        assert await recorder.flush(20)
        assert writer.restarts == 1 and writer.pid not in (None, first)
        assert len(store.created) == 30  # all written, by the new child (duplicates answered AlreadyExists)
        # and the new child carries bindings
        await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
    finally:
        await client.close()


async def test_a_hung_child_is_killed_and_replaced(server: FakeServer, store: EventStore) -> None:
    client, writer = await _client(server, hang_seconds=1.0)
    try:
        recorder = EventRecorder(client, "default-scheduler", "default-scheduler-h")
        first = writer.pid
        assert first is not None
        os.kill(first, signal.SIGSTOP)  # alive but silent
        _events(recorder, 10)
        assert await recorder.flush(20)
        assert writer.restarts == 1 and writer.pid != first
        assert len(store.created) == 10
    finally:
        await client.close()


async def test_a_child_that_keeps_failing_falls_back_to_writing_in_process(
    server: FakeServer, store: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(writer_module, "RESTART_LIMIT", 2)
    client, writer = await _client(server, command=[sys.executable, "-c", "pass"])  # exits at once
    try:
        recorder = EventRecorder(client, "default-scheduler", "default-scheduler-h")
        _events(recorder, 10)
        async with asyncio.timeout(20):
            while not writer.in_process:
                await asyncio.sleep(0.01)
        _events(recorder, 3)  # same pods: a series now, PATCHed
        assert await recorder.flush(10)
        assert len(store.created) == 10
        assert sum(1 for e in store.created.values() if "series" in e) == 3
        answer = await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        assert answer == {"kind": "Status", "status": "Success"}
    finally:
        await client.close()


async def test_close_writes_every_pending_event_first(server: FakeServer, store: EventStore) -> None:
    store.hold_events = asyncio.Event()
    client, writer = await _client(server)
    recorder = EventRecorder(client, "default-scheduler", "default-scheduler-h")
    _events(recorder, 200)
    asyncio.get_running_loop().call_later(0.3, store.hold_events.set)
    await recorder.close(20)
    await client.close()
    assert len(store.created) == 200
    assert writer.pending_events == 0


async def test_requests_made_while_the_child_restarts_wait_for_the_next_child(
    server: FakeServer, store: EventStore
) -> None:
    client, writer = await _client(server)
    gate = asyncio.Event()
    spawn = writer._spawn

    async def gated_spawn() -> None:
        await gate.wait()
        await spawn()

    writer._spawn = gated_spawn  # type: ignore[method-assign]
    try:
        first = writer.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        async with asyncio.timeout(10):
            while writer._stdin is not None:
                await asyncio.sleep(0.005)
        binding = asyncio.ensure_future(
            client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        )
        await asyncio.sleep(0.1)
        assert not binding.done() and store.bindings == []  # held, not failed: it was never sent
        gate.set()
        assert await binding == {"kind": "Status", "status": "Success"}
        assert store.bindings == [BINDING] and writer.restarts == 1
    finally:
        gate.set()
        await client.close()


async def test_close_fails_requests_that_no_child_can_answer(server: FakeServer, store: EventStore) -> None:
    client, writer = await _client(server)
    writer._spawn = asyncio.Event().wait  # type: ignore[method-assign,assignment]  # never restarts
    first = writer.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    async with asyncio.timeout(10):
        while writer._stdin is not None:
            await asyncio.sleep(0.005)
    binding = asyncio.ensure_future(
        client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
    )
    await asyncio.sleep(0.05)
    async with asyncio.timeout(20):
        await client.close()
        with pytest.raises(aiohttp.ClientConnectionError):
            await binding


@pytest.mark.parametrize(("cpus", "expected"), [(1, "off"), (2, "off"), (3, "off"), (4, "all"), (16, "all")])
def test_auto_mode_takes_the_writer_only_with_cores_to_spare(
    cpus: int, expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)), raising=False)
    assert writer_module.resolve_mode("auto") == expected
    for mode in ("off", "events", "all"):
        assert writer_module.resolve_mode(mode) == mode
