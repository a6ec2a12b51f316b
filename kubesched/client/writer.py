"""The API writer: a child process that makes a scheduler's API writes over HTTPS connections of its own.

A scheduler writes an event (``Scheduled``) and, with ``requests``, a binding per pod; their HTTP and TLS work is a
large share of its CPU. With a writer, the scheduler process hands them to a child over a pipe instead:

- events: fire and forget. The parent's :class:`~kubesched.client.events.EventRecorder` still builds them and
  folds series; the child writes them (with the recorder's retries) and acknowledges each. The parent keeps every
  event until acknowledged, so a child that dies or hangs loses none: they are sent again to the next child
  (a duplicate create answers AlreadyExists, which the recorder takes as done).
- requests (``--api-writer all``): the client's lean POSTs (bindings). The parent builds the whole HTTP request
  and the child sends it over its own pool and answers status, content type, Retry-After and body, so the
  parent's client handles answers, retries and errors exactly as over its own connections. A request in flight
  when the child dies fails as a lost connection (never re-sent, as aiohttp does): for a binding, the scheduler
  forgets the assumed pod, checks whether it got bound and requeues it, as for any failed binding.

The child sends a heartbeat every second; one silent for ``hang_seconds`` is killed. A dead child is restarted
(logged as an error); after RESTART_LIMIT restarts within RESTART_WINDOW seconds the writer gives up on children
and writes in process from then on (also logged), so nothing is dropped either way.

Frames both ways: ``!BII`` (kind, id, payload length) and the payload. Parent to child: the configuration
(pickled, once), requests (the raw HTTP request) and events (JSON). Child to parent: replies, acknowledgements
(native unsigned ints, same machine), heartbeats.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import pickle
import struct
import subprocess
import sys
import time
from collections import deque
from typing import Any, cast

import aiohttp
import orjson

from kubesched.client.config import ClientConfig
from kubesched.client.rest import DEFAULT_MAX_CONNECTIONS, ApiClient, _LeanPool, _LeanResponse

log = logging.getLogger("kubesched.client.writer")

MODES = ("auto", "off", "events", "all")
# ``auto``: ``all`` when the process may run on at least this many CPUs, else ``off``. The writer takes about
# half of the client work off the scheduling process, but the pipe hop, a fourth busy process and the API
# server's smaller batches cost CPU in all (measured on two cores: the scheduler process's client work 340k ->
# 183k instructions per pod, but scheduler + writer + API server CPU per pod up ~25%), so it pays only when a
# core is free for it.
AUTO_MIN_CPUS = 4


def resolve_mode(mode: str) -> str:
    """``auto`` made concrete for this machine; other modes as they are."""
    if mode != "auto":
        return mode
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return "all" if cpus >= AUTO_MIN_CPUS else "off"


_HEADER = struct.Struct("!BII")
_HEAD = _HEADER.size
# parent -> child
K_CONFIG = ord("C")
K_REQUEST = ord("R")
K_EVENT = ord("E")
# child -> parent
K_REPLY = ord("r")
K_ACK = ord("a")
K_HEARTBEAT = ord("h")

HEARTBEAT_SECONDS = 1.0
# The parent writes what it has for the child at most this often: fewer, larger pipe writes (each wakes the
# child, and on a busy machine a wake-up can cost the writer its CPU), for at most this much latency.
BATCH_SECONDS = 0.001
HANG_SECONDS = 15.0
RESTART_LIMIT = 5
RESTART_WINDOW = 60.0
MAX_QUEUED_EVENTS = 100_000  # as EventRecorder's queue
CHILD_EVENT_WORKERS = 8
CHILD_DRAIN_SECONDS = 30.0  # after the parent's end of input: time left to finish writing before exiting

# Transport errors the child reports by name; anything else arrives as a ClientConnectionError.
_ERRORS: dict[str, type[Exception]] = {
    "TimeoutError": TimeoutError,
    "ServerDisconnectedError": aiohttp.ServerDisconnectedError,
    "ClientOSError": aiohttp.ClientOSError,
    "ClientPayloadError": aiohttp.ClientPayloadError,
    "ClientConnectionError": aiohttp.ClientConnectionError,
}


def writer_command() -> list[str]:
    return [sys.executable, "-m", "kubesched.client.writer"]


def frame(kind: int, ident: int, payload: bytes) -> bytes:
    return _HEADER.pack(kind, ident, len(payload)) + payload


class FrameReader:
    """Cuts a byte stream into ``(kind, id, payload)`` frames, whatever the read boundaries."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = b""

    def feed(self, data: bytes) -> list[tuple[int, int, bytes]]:
        buf = self._buf + data if self._buf else data
        out: list[tuple[int, int, bytes]] = []
        pos = 0
        size = len(buf)
        unpack = _HEADER.unpack_from
        while size - pos >= _HEAD:
            kind, ident, length = unpack(buf, pos)
            end = pos + _HEAD + length
            if end > size:
                break
            out.append((kind, ident, buf[pos + _HEAD : end]))
            pos = end
        self._buf = buf[pos:]
        return out


def encode_reply(result: _LeanResponse | BaseException) -> bytes:
    if isinstance(result, _LeanResponse):
        headers = result.headers
        return b"%d\n%s\n%s\n%s" % (
            result.status,
            headers.get("content-type", "").encode("latin-1"),
            headers.get("retry-after", "").encode("latin-1"),
            result.body,
        )
    name = type(result).__name__ if type(result).__name__ in _ERRORS else "ClientConnectionError"
    message = (str(result) or name).replace("\n", " ")
    return b"0\n%s\n%s\n" % (name.encode(), message.encode("utf-8", "replace"))


def decode_reply(payload: bytes) -> _LeanResponse | Exception:
    status, first, second, body = payload.split(b"\n", 3)
    code = int(status)
    if code == 0:
        return _ERRORS.get(first.decode(), aiohttp.ClientConnectionError)(second.decode())
    headers: dict[str, str] = {}
    if first:
        headers["content-type"] = first.decode("latin-1")
    if second:
        headers["retry-after"] = second.decode("latin-1")
    return _LeanResponse(code, headers, body, True)


class _ParentSide(asyncio.SubprocessProtocol):
    def __init__(self, writer: ApiWriter, generation: int) -> None:
        self._writer = writer
        self._generation = generation

    def pipe_data_received(self, fd: int, data: bytes | str) -> None:
        if fd == 1 and isinstance(data, bytes):
            self._writer._received(self._generation, data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self._writer._child_gone(self._generation, "closed its output")

    def process_exited(self) -> None:
        self._writer._child_gone(self._generation, "exited")


class ApiWriter:
    """The parent's side of the writer. Create it in the event loop, ``await start()``, then attach it to the
    client (:meth:`ApiClient.attach_writer`); ``await close()`` flushes and stops the child.

    ``config``'s ``tls_context`` cannot cross to the child: such a config is refused (ValueError)."""

    def __init__(
        self,
        config: ClientConfig,
        *,
        timeout: float = 60.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_queued_events: int = MAX_QUEUED_EVENTS,
        hang_seconds: float = HANG_SECONDS,
        command: list[str] | None = None,
    ) -> None:
        if config.tls_context is not None:
            raise ValueError("an API writer needs a client config without a ready-made TLS context")
        self.config = config
        self.timeout = timeout
        self.max_connections = max_connections
        self.max_queued_events = max_queued_events
        self.hang_seconds = hang_seconds
        self.command = command or writer_command()
        self.dropped = 0
        self.restarts = 0
        self.closed = False
        self._loop = asyncio.get_running_loop()
        self._heads = _LeanPool(config.server, None, 1, config.user_agent or _user_agent(), timeout)
        self._generation = 0
        self._proc: asyncio.SubprocessTransport | None = None
        self._stdin: asyncio.WriteTransport | None = None
        self._frames = FrameReader()
        self._out: list[bytes] = []
        self._flush_pending = False
        self._next_id = 0
        self._requests: dict[int, asyncio.Future[_LeanResponse]] = {}
        self._held: dict[int, bytes] = {}  # requests made while no child runs: sent to the next one
        self._events: dict[int, bytes] = {}  # sent (or to be sent) and not yet acknowledged
        self._drained: list[asyncio.Future[None]] = []
        self._last_heard = 0.0
        self._restart_times: deque[float] = deque()
        self._restarting: asyncio.Task[None] | None = None
        self._watchdog: asyncio.Task[None] | None = None
        self._fallback: ApiClient | None = None
        self._fallback_recorder: Any = None

    @property
    def pid(self) -> int | None:
        return self._proc.get_pid() if self._proc is not None else None

    @property
    def in_process(self) -> bool:
        """True once the writer gave up on child processes and writes in process."""
        return self._fallback is not None

    @property
    def pending_events(self) -> int:
        return len(self._events)

    async def start(self) -> None:
        await self._spawn()
        self._watchdog = self._loop.create_task(self._watch(), name="API writer watchdog")

    # ---- the client's transport (what _LeanPool offers) ----

    def head(self, method: str, path: str, extra_headers: str, length: int) -> bytes:
        return self._heads.head(method, path, extra_headers, length)

    def request(self, data: bytes) -> asyncio.Future[_LeanResponse]:
        if self._fallback is not None:
            return self._fallback._get_lean().request(data)
        waiter: asyncio.Future[_LeanResponse] = self._loop.create_future()
        if self.closed:
            waiter.set_exception(aiohttp.ClientConnectionError("the API writer is closed"))
            return waiter
        self._next_id = ident = (self._next_id + 1) & 0xFFFFFFFF
        self._requests[ident] = waiter
        if self._stdin is None:
            self._held[ident] = data  # a child is being restarted: never sent, so safe to send to it
        else:
            self._send(K_REQUEST, ident, data)
        return waiter

    # ---- the event recorder's sink ----

    def event(self, event: dict[str, Any]) -> None:
        """Write ``event`` (events.k8s.io/v1, or with ``series``: the recorder's PATCH) in the background."""
        if self._fallback_recorder is not None:
            self._fallback_recorder.submit(event)
            return
        if len(self._events) >= self.max_queued_events:
            self.dropped += 1
            if self.dropped == 1 or self.dropped % 1000 == 0:
                log.warning(
                    "API writer: %d events waiting; dropped %d so far", len(self._events), self.dropped
                )
            return
        payload = orjson.dumps(event)
        self._next_id = seq = (self._next_id + 1) & 0xFFFFFFFF
        self._events[seq] = payload
        if self._stdin is not None:
            self._send(K_EVENT, seq, payload)

    async def flush(self, timeout: float | None = None) -> bool:
        """Wait until every event handed over so far is written (or given up on by the child's retries)."""
        if self._fallback_recorder is not None:
            return bool(await self._fallback_recorder.flush(timeout))
        if not self._events:
            return True
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._drained.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await asyncio.shield(waiter)
        except TimeoutError:
            return False
        if self._fallback_recorder is not None:  # gave up on children meanwhile
            return bool(await self._fallback_recorder.flush(timeout))
        return True

    async def close(self, timeout: float | None = 10.0) -> None:
        """Flush events, let requests in flight finish, then end the child (EOF; killed if it lingers)."""
        if self.closed:
            return
        if not await self.flush(timeout):
            log.error("API writer: %d events still unwritten at shutdown", len(self._events))
        deadline = self._loop.time() + (timeout or 0.0)
        while self._requests and self._stdin is not None and self._loop.time() < deadline:
            await asyncio.sleep(0.01)
        self.closed = True
        if self._watchdog is not None:
            self._watchdog.cancel()
        if self._restarting is not None:
            self._restarting.cancel()
        await self._stop_child(graceful=True)
        self._fail_requests(aiohttp.ClientConnectionError("the API writer is closed"))
        if self._fallback_recorder is not None:
            await self._fallback_recorder.close(timeout)
        if self._fallback is not None:
            await self._fallback.close()

    # ---- the child ----

    async def _spawn(self) -> None:
        self._generation += 1
        generation = self._generation
        transport, _ = await self._loop.subprocess_exec(
            lambda: _ParentSide(self, generation),
            *self.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,
        )
        if generation != self._generation:  # superseded meanwhile
            transport.close()
            return
        self._proc = transport
        # uvloop's pipe transports do not subclass asyncio's
        self._stdin = cast(asyncio.WriteTransport, transport.get_pipe_transport(0))
        self._frames = FrameReader()
        self._last_heard = self._loop.time()
        config = dataclasses.replace(self.config)
        settings = {"config": config, "timeout": self.timeout, "max_connections": self.max_connections}
        self._send(K_CONFIG, 0, pickle.dumps(settings))
        for seq, payload in self._events.items():  # not acknowledged by the previous child: again
            self._send(K_EVENT, seq, payload)
        held, self._held = self._held, {}
        for ident, data in held.items():
            self._send(K_REQUEST, ident, data)
        log.info("API writer process %s started", transport.get_pid())

    async def _stop_child(self, graceful: bool) -> None:
        proc, stdin = self._proc, self._stdin
        self._generation += 1  # its callbacks from now on are not news
        self._proc = self._stdin = None
        self._flush_out_now(stdin)
        if proc is None:
            return
        if graceful and stdin is not None:
            stdin.close()  # EOF: the child finishes what it holds and exits
            for _ in range(int(5.0 / 0.02)):
                if proc.get_returncode() is not None:
                    break
                await asyncio.sleep(0.02)
        if proc.get_returncode() is None:
            proc.kill()
        proc.close()

    def _send(self, kind: int, ident: int, payload: bytes) -> None:
        out = self._out
        out.append(_HEADER.pack(kind, ident, len(payload)))
        out.append(payload)
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_later(BATCH_SECONDS, self._flush_out)

    def _flush_out(self) -> None:
        self._flush_out_now(self._stdin)

    def _flush_out_now(self, stdin: asyncio.WriteTransport | None) -> None:
        self._flush_pending = False
        out, self._out = self._out, []
        if out and stdin is not None and not stdin.is_closing():
            stdin.write(b"".join(out))

    def _received(self, generation: int, data: bytes) -> None:
        if generation != self._generation:
            return
        self._last_heard = self._loop.time()
        requests, events = self._requests, self._events
        for kind, ident, payload in self._frames.feed(data):
            if kind == K_ACK:
                for seq in memoryview(payload).cast("I"):
                    events.pop(seq, None)
                if not events and self._drained:
                    self._wake_drained()
            elif kind == K_REPLY:
                waiter = requests.pop(ident, None)
                if waiter is not None and not waiter.done():
                    result = decode_reply(payload)
                    if isinstance(result, _LeanResponse):
                        waiter.set_result(result)
                    else:
                        waiter.set_exception(result)

    def _wake_drained(self) -> None:
        drained, self._drained = self._drained, []
        for waiter in drained:
            if not waiter.done():
                waiter.set_result(None)

    def _child_gone(self, generation: int, why: str) -> None:
        if generation != self._generation or self.closed:
            return
        pid = self.pid
        self._generation += 1
        proc, self._proc, self._stdin = self._proc, None, None
        if proc is not None and proc.get_returncode() is None:
            proc.kill()
        log.error(
            "API writer process %s %s (%d requests in flight fail, %d events will be sent again)",
            pid,
            why,
            len(self._requests),
            len(self._events),
        )
        self._fail_requests(aiohttp.ServerDisconnectedError(f"the API writer process {why}"), keep_held=True)
        if self._restarting is None or self._restarting.done():
            self._restarting = self._loop.create_task(self._restart(), name="API writer restart")

    def _fail_requests(self, error: Exception, keep_held: bool = False) -> None:
        """Fail the requests sent (their answers are lost with the child); held ones stay when ``keep_held``."""
        requests, self._requests = self._requests, {}
        held = self._held
        for ident, waiter in requests.items():
            if keep_held and ident in held:
                self._requests[ident] = waiter
            elif not waiter.done():
                waiter.set_exception(error)
        if not keep_held:
            held.clear()

    async def _restart(self) -> None:
        now = self._loop.time()
        times = self._restart_times
        times.append(now)
        while times and now - times[0] > RESTART_WINDOW:
            times.popleft()
        if len(times) > RESTART_LIMIT:
            self._give_up()
            return
        self.restarts += 1
        try:
            await self._spawn()
        except Exception as e:
            log.error("API writer: cannot start a new process: %s", e)
            self._give_up()

    def _give_up(self) -> None:
        from kubesched.client.events import EventRecorder

        log.error(
            "API writer: the writer process failed %d times within %.0f s; writing in process from now on",
            len(self._restart_times),
            RESTART_WINDOW,
        )
        self._fallback = ApiClient(self.config, timeout=self.timeout, max_connections=self.max_connections)
        recorder = EventRecorder(self._fallback, "", "")
        self._fallback_recorder = recorder
        held, self._held = self._held, {}
        pool = self._fallback._get_lean()
        for ident, data in held.items():
            waiter = self._requests.pop(ident, None)
            if waiter is not None and not waiter.done():
                _forward(pool.request(data), waiter)
        self._fail_requests(aiohttp.ServerDisconnectedError("the API writer process failed"))
        events, self._events = self._events, {}
        for payload in events.values():
            recorder.submit(orjson.loads(payload))
        self._wake_drained()

    async def _watch(self) -> None:
        """Kill a child that has been silent (no heartbeat) for ``hang_seconds``."""
        period = min(HEARTBEAT_SECONDS, self.hang_seconds / 4)
        while True:
            before = self._loop.time()
            await asyncio.sleep(period)
            now = self._loop.time()
            if now - before > period + self.hang_seconds / 2:
                self._last_heard = now  # this process was stalled, not necessarily the child: look again
                continue
            proc = self._proc
            if proc is not None and now - self._last_heard > self.hang_seconds:
                log.error(
                    "API writer process %s silent for %.1f s: hung; killing it",
                    proc.get_pid(),
                    now - self._last_heard,
                )
                self._child_gone(self._generation, "hung (no heartbeat)")


def _forward(source: asyncio.Future[_LeanResponse], target: asyncio.Future[_LeanResponse]) -> None:
    """Complete ``target`` as ``source`` completes."""

    def done(f: asyncio.Future[_LeanResponse]) -> None:
        if target.done():
            return
        if f.cancelled():
            target.cancel()
            return
        exc = f.exception()
        if exc is not None:
            target.set_exception(exc)
        else:
            target.set_result(f.result())

    source.add_done_callback(done)


def _user_agent() -> str:
    from kubesched.client.rest import USER_AGENT

    return USER_AGENT


# ---- the child process ----


class _ChildInput(asyncio.Protocol):
    def __init__(self, child: _Child) -> None:
        self._child = child
        self._frames = FrameReader()

    def data_received(self, data: bytes) -> None:
        for kind, ident, payload in self._frames.feed(data):
            self._child.handle(kind, ident, payload)

    def eof_received(self) -> bool:
        self._child.input_ended()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._child.input_ended()


class _Child:
    def __init__(self, out: asyncio.WriteTransport) -> None:
        self._loop = asyncio.get_running_loop()
        self._transport = out
        self._out: list[bytes] = []
        self._acks: list[int] = []
        self._flush_pending = False
        self._client: ApiClient | None = None
        self._recorder: Any = None
        self._events: asyncio.Queue[tuple[int, dict[str, Any]]] = asyncio.Queue()
        self._in_flight = 0
        self._unwritten = 0
        self._ended = asyncio.Event()
        self._workers: list[asyncio.Task[None]] = []

    def handle(self, kind: int, ident: int, payload: bytes) -> None:
        if kind == K_REQUEST:
            assert self._client is not None
            self._in_flight += 1
            self._client._get_lean().request(payload).add_done_callback(
                functools.partial(self._answered, ident)
            )
        elif kind == K_EVENT:
            self._unwritten += 1
            self._events.put_nowait((ident, orjson.loads(payload)))
        elif kind == K_CONFIG:
            self._configure(pickle.loads(payload))

    def _configure(self, settings: dict[str, Any]) -> None:
        from kubesched.client.events import EventRecorder

        self._client = ApiClient(
            settings["config"], timeout=settings["timeout"], max_connections=settings["max_connections"]
        )
        self._recorder = EventRecorder(self._client, "", "")
        self._workers = [
            self._loop.create_task(self._write_events(), name=f"event writer {i}")
            for i in range(CHILD_EVENT_WORKERS)
        ]

    def _answered(self, ident: int, waiter: asyncio.Future[_LeanResponse]) -> None:
        self._in_flight -= 1
        if waiter.cancelled():
            payload = encode_reply(aiohttp.ClientConnectionError("cancelled"))
        else:
            exc = waiter.exception()
            payload = encode_reply(exc if exc is not None else waiter.result())
        self._send(K_REPLY, ident, payload)

    async def _write_events(self) -> None:
        while True:
            seq, event = await self._events.get()
            try:
                await self._recorder.write(event)
            except Exception:
                log.exception("writing event %s failed", (event.get("metadata") or {}).get("name"))
            finally:
                self._unwritten -= 1
            self._acks.append(seq)
            self._schedule_flush()

    def _send(self, kind: int, ident: int, payload: bytes) -> None:
        self._out.append(_HEADER.pack(kind, ident, len(payload)))
        self._out.append(payload)
        self._schedule_flush()

    def _schedule_flush(self) -> None:
        if not self._flush_pending:
            self._flush_pending = True
            self._loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_pending = False
        if self._acks:
            acks, self._acks = self._acks, []
            payload = struct.pack(f"{len(acks)}I", *acks)
            self._out.append(_HEADER.pack(K_ACK, 0, len(payload)))
            self._out.append(payload)
        out, self._out = self._out, []
        if out and not self._transport.is_closing():
            self._transport.write(b"".join(out))

    def heartbeat(self) -> None:
        self._send(K_HEARTBEAT, 0, b"")
        self._loop.call_later(HEARTBEAT_SECONDS, self.heartbeat)

    def input_ended(self) -> None:
        self._ended.set()

    async def run(self) -> None:
        self.heartbeat()
        await self._ended.wait()
        # The parent is done (or gone): finish the writes held, then exit.
        deadline = time.monotonic() + CHILD_DRAIN_SECONDS
        while (self._in_flight or self._unwritten) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        self._flush()
        for task in self._workers:
            task.cancel()
        if self._client is not None:
            await self._client.close()


async def _child_main(out_fd: int) -> None:
    loop = asyncio.get_running_loop()
    pipe, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(out_fd, "wb", buffering=0))
    out = cast(asyncio.WriteTransport, pipe)  # uvloop's pipe transports do not subclass asyncio's
    child = _Child(out)
    await loop.connect_read_pipe(lambda: _ChildInput(child), os.fdopen(0, "rb", buffering=0))
    await child.run()
    out.close()


def main() -> int:
    """``python -m kubesched.client.writer``: the child. Frames on stdin and stdout; logs on stderr."""
    out_fd = os.dup(1)
    os.dup2(2, 1)  # a stray print must not corrupt the frames
    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="api-writer %(levelname)s %(name)s: %(message)s"
    )
    from kubesched import eventloop

    eventloop.run(_child_main(out_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main())
