"""An async REST client for the Kubernetes API on plain dicts: aiohttp for transport, orjson for JSON.

No generated models: a pod is the dict the server sent (decoding a pod into models costs ~25x more). Objects
handed out are fresh and may be kept; callers treat them as immutable.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
import time
from collections import deque
from collections.abc import Awaitable, Callable
from importlib import metadata
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal, TypedDict, cast
from urllib.parse import quote

import aiohttp
import httptools
import orjson
import yarl

from kubesched.client.config import ClientConfig

if TYPE_CHECKING:
    from kubesched.client.writer import ApiWriter

log = logging.getLogger(__name__)

PatchType = Literal["merge", "strategic", "json", "apply"]
PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    # Server-side apply takes YAML; JSON is YAML, so the body is still serialized with orjson.
    "apply": "application/apply-patch+yaml",
}

# Used when an error response carries no Status body (client-go's NewGenericServerResponse does the same).
_REASON_BY_STATUS: dict[int, str] = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Gone",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


def _package_version() -> str:
    try:
        return metadata.version("kubesched")
    except metadata.PackageNotFoundError:
        return "0.0.0"


USER_AGENT = f"kubesched/{_package_version()}"


class _Selectors(TypedDict):
    """What every page of a paginated LIST repeats (``ApiClient.list_all``)."""

    namespace: str | None
    label_selector: str | None
    field_selector: str | None


class ApiError(Exception):
    """A failed API call, carrying the server's ``Status`` (``body``) when there was one."""

    def __init__(self, status: int, reason: str, message: str, body: dict[str, Any] | None = None) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.body: dict[str, Any] = body if body is not None else {}

    @classmethod
    def from_status(cls, status_obj: Any, http_status: int = 500) -> ApiError:
        """From a ``metav1.Status`` (an error response body or the object of a watch ``ERROR`` event)."""
        if not isinstance(status_obj, dict):
            return cls(http_status, _REASON_BY_STATUS.get(http_status, "Unknown"), repr(status_obj)[:500], {})
        code = status_obj.get("code") or http_status
        reason = status_obj.get("reason") or _REASON_BY_STATUS.get(code, "Unknown")
        return cls(code, reason, status_obj.get("message") or "", status_obj)

    @classmethod
    def from_response(cls, http_status: int, raw: bytes) -> ApiError:
        try:
            body = orjson.loads(raw) if raw else None
        except orjson.JSONDecodeError:
            body = None
        if isinstance(body, dict) and body.get("kind") == "Status":
            return cls.from_status(body, http_status)
        reason = _REASON_BY_STATUS.get(http_status, "Unknown")
        text = raw[:500].decode("utf-8", "replace").strip() if raw else reason
        return cls(http_status, reason, text, body if isinstance(body, dict) else {})

    def is_not_found(self) -> bool:
        return self.status == 404

    def is_conflict(self) -> bool:
        """A 409 other than AlreadyExists: a stale resourceVersion, an assigned pod on binding, an SSA conflict."""
        return self.status == 409 and self.reason != "AlreadyExists"

    def is_already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    def is_expired(self) -> bool:
        """410 Expired/Gone: a compacted resourceVersion or continue token; relist."""
        return self.status == 410

    def is_too_many_requests(self) -> bool:
        return self.status == 429

    def is_invalid(self) -> bool:
        return self.status == 422

    def is_resource_version_too_large(self) -> bool:
        """The watch cache has not caught up with the requested resourceVersion (504 + ResourceVersionTooLarge)."""
        causes = (self.body.get("details") or {}).get("causes") or []
        return self.status == 504 and any(c.get("reason") == "ResourceVersionTooLarge" for c in causes)


# Characters quote() leaves as they are whatever ``safe`` says: object names and namespaces are made of them.
_PLAIN_SEGMENT = re.compile(r"[A-Za-z0-9_.~-]*").fullmatch


def resource_path(
    api_version: str,
    plural: str,
    namespace: str | None = None,
    name: str | None = None,
    subresource: str | None = None,
) -> str:
    """``/api/v1/namespaces/ns/pods/p/binding``-style paths; ``api_version`` is ``v1`` or ``group/version``."""
    parts = ["/api/" + api_version if "/" not in api_version else "/apis/" + api_version]
    if namespace:
        parts.append("namespaces/" + (namespace if _PLAIN_SEGMENT(namespace) else quote(namespace, safe="")))
    parts.append(plural)
    if name:
        parts.append(name if _PLAIN_SEGMENT(name) else quote(name, safe=":"))
    elif subresource:
        raise ValueError("a subresource needs an object name")
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def _query(**params: Any) -> dict[str, str]:
    """Query parameters: drop None, spell booleans as Kubernetes does."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        out[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
    return out


class TokenBucket:
    """client-go's flowcontrol token bucket: starts with ``burst`` tokens, refills at ``qps`` per second.

    Each caller reserves a token (the count may go negative) and sleeps until its turn, so waiters are served
    in arrival order without a lock.
    """

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if qps <= 0 or burst <= 0:
            raise ValueError("qps and burst must be positive")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()

    def reserve(self) -> float:
        """Take a token now; returns how long to wait before using it (0.0: at once); see :meth:`pause`."""
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
        self._last = now
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0.0 else -self._tokens / self.qps

    async def pause(self, delay: float) -> None:
        """Wait out a reservation's ``delay``; cancelled, the token is given back."""
        try:
            await self._sleep(delay)
        except asyncio.CancelledError:
            self._tokens += 1.0
            raise

    async def wait(self) -> None:
        delay = self.reserve()
        if delay > 0.0:
            await self.pause(delay)


class LineSplitter:
    """Cuts a byte stream into newline-terminated lines, whatever the chunk boundaries."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[bytes] = []

    def feed(self, data: bytes) -> list[bytes]:
        parts = data.split(b"\n")
        if len(parts) == 1:
            if data:
                self._pending.append(data)
            return []
        if self._pending:
            self._pending.append(parts[0])
            parts[0] = b"".join(self._pending)
            self._pending.clear()
        tail = parts.pop()
        if tail:
            self._pending.append(tail)
        return [p for p in parts if p and not p.isspace()]

    def finish(self) -> bytes | None:
        """Whatever followed the last newline (a server that did not terminate its final line)."""
        rest = b"".join(self._pending)
        self._pending.clear()
        return rest if rest and not rest.isspace() else None


class WatchStream:
    """An open watch: ``async for event_type, obj in stream``. ``ERROR`` events raise :class:`ApiError`.

    Use as ``async with client.watch(...) as stream`` (or call :meth:`aclose`) when you may stop early; the
    stream also closes itself at its end and on errors.
    """

    def __init__(self, opener: Callable[[], Awaitable[aiohttp.ClientResponse]]) -> None:
        self._opener = opener
        self._resp: aiohttp.ClientResponse | None = None
        self._splitter = LineSplitter()
        self._lines: deque[bytes] = deque()
        self._eof = False
        self._closed = False

    async def open(self) -> None:
        """Send the request and check the status; separate from iteration so callers can tell connect errors."""
        if self._resp is None and not self._closed:
            self._resp = await self._opener()

    def __aiter__(self) -> WatchStream:
        return self

    async def __anext__(self) -> tuple[str, dict[str, Any]]:
        if self._resp is None:
            if self._closed:
                raise StopAsyncIteration
            await self.open()
        lines = self._lines
        while not lines:
            if self._eof or self._resp is None:
                await self.aclose()
                raise StopAsyncIteration
            try:
                chunk = await self._resp.content.readany()
            except BaseException:
                await self.aclose()
                raise
            if chunk:
                lines.extend(self._splitter.feed(chunk))
            else:
                self._eof = True
                rest = self._splitter.finish()
                if rest is not None:
                    lines.append(rest)
        line = lines.popleft()
        try:
            event = orjson.loads(line)
            event_type = event["type"]
            obj = event["object"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            await self.aclose()
            raise ApiError(500, "InternalError", f"malformed watch event: {line[:200]!r}") from None
        if event_type == "ERROR":
            await self.aclose()
            raise ApiError.from_status(obj)
        return event_type, obj

    async def aclose(self) -> None:
        self._closed = True
        resp, self._resp = self._resp, None
        if resp is not None:
            if self._eof:
                resp.release()
            else:
                resp.close()  # mid-stream: the connection cannot be reused

    async def __aenter__(self) -> WatchStream:
        await self.open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


# ---- a lean HTTP/1.1 path for the scheduler's hot requests ----
#
# A scheduler writes two small POSTs per pod (the binding and the Scheduled event). Through aiohttp each costs
# a ClientRequest, header multidicts, URL parsing, a writer task, tracing and timer hooks: most of the client
# CPU of a binding. POSTs without a query go over this path instead: one pre-built header block, one write,
# and the response parsed by httptools (llhttp). Everything else stays on aiohttp.

# An idle kept-alive connection older than this is closed rather than reused, so a POST is never written onto a
# connection that the server is closing for idleness (aiohttp's server closes after 75 s, Go's after 90 s+).
_LEAN_IDLE_SECONDS = 30.0
_LEAN_MAX_HEAD_BYTES = 64 * 1024
# The response headers the lean path reads; the others are parsed but not kept.
_LEAN_KEPT_HEADERS = {
    n.encode(): n for n in ("content-type", "retry-after", "content-length", "transfer-encoding")
}


class _LeanResponse:
    __slots__ = ("body", "headers", "keep_alive", "status")

    def __init__(self, status: int, headers: dict[str, str], body: bytes, keep_alive: bool) -> None:
        self.status = status
        self.headers = headers  # lower-case names, only those in _LEAN_KEPT_HEADERS
        self.body = body
        self.keep_alive = keep_alive


class _LeanConnection(asyncio.Protocol):
    """One kept-alive HTTP/1.1 connection carrying one request at a time. Responses are parsed by httptools
    (llhttp, the parser Node.js and uvicorn use): Content-Length, chunked and 1xx interim answers; a body
    delimited by the end of the connection is completed in ``connection_lost``. One parser serves every
    response of the connection (llhttp starts over after each complete message).

    With a ``pool``, a keep-alive answer hands the connection straight back to it (the next queued request
    goes out at once) and a closed connection is dropped from it."""

    def __init__(self, pool: _LeanPool | None = None) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self.deadline = 0.0  # of the request in flight (loop time); the pool's timer enforces it
        self._pool = pool
        self._parser: httptools.HttpResponseParser | None = None
        self._waiter: asyncio.Future[_LeanResponse] | None = None
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._headers_done = False
        self._head_bytes = 0

    # -- protocol callbacks --

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport: asyncio's or uvloop's (which does not subclass asyncio.Transport).
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if self._waiter is None or parser is None:
            self.close()  # bytes nobody asked for: the connection is out of step
            return
        if not self._headers_done:
            self._head_bytes += len(data)
            if self._head_bytes > _LEAN_MAX_HEAD_BYTES:
                self._fail(aiohttp.ClientPayloadError("malformed response: response headers too long"))
                return
        try:
            parser.feed_data(data)
        except httptools.HttpParserError as e:
            self._fail(aiohttp.ClientPayloadError(f"malformed response: {e}"))

    def connection_lost(self, exc: Exception | None) -> None:
        headers = self._headers
        if (
            self._waiter is not None
            and self._parser is not None
            and self._headers_done
            and "content-length" not in headers
            and "chunked" not in headers.get("transfer-encoding", "").lower()
        ):
            # A body delimited by the end of the connection.
            waiter, self._waiter = self._waiter, None
            if not waiter.done():
                waiter.set_result(
                    _LeanResponse(self._parser.get_status_code(), headers, b"".join(self._body), False)
                )
            self.close()
            return
        self._fail(aiohttp.ServerDisconnectedError(repr(exc) if exc else None))

    # -- httptools callbacks --

    def on_message_begin(self) -> None:
        self._headers = {}
        self._body = []
        self._headers_done = False

    def on_header(self, name: bytes, value: bytes) -> None:
        key = _LEAN_KEPT_HEADERS.get(name.lower())
        if key is not None:
            self._headers[key] = value.decode("latin-1").strip()

    def on_headers_complete(self) -> None:
        self._headers_done = True

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self._parser
        assert parser is not None
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._headers_done = False  # an interim answer (100 Continue): the real one follows
            self._head_bytes = 0
            return
        keep_alive = parser.should_keep_alive()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():  # done: cancelled or timed out meanwhile
            waiter.set_result(_LeanResponse(status, self._headers, b"".join(self._body), keep_alive))
        if not keep_alive:
            self.close()
        elif self._pool is not None:
            self._pool.release(self)

    # -- use --

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        self.close()
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._parser = None
            if self.transport is not None:
                self.transport.close()
            if self._pool is not None:
                self._pool.drop(self)

    def usable(self, now: float) -> bool:
        t = self.transport
        return (
            not self.closed
            and t is not None
            and not t.is_closing()
            and now - self.idle_since < _LEAN_IDLE_SECONDS
        )

    def send(
        self, data: bytes, waiter: asyncio.Future[_LeanResponse] | None = None, deadline: float = 0.0
    ) -> asyncio.Future[_LeanResponse]:
        """Write a whole request; its answer completes ``waiter`` (a new future when None), which is returned."""
        assert self.transport is not None
        if self._parser is None:
            self._parser = httptools.HttpResponseParser(self)
        self._headers, self._body, self._headers_done, self._head_bytes = {}, [], False, 0
        if waiter is None:
            waiter = asyncio.get_running_loop().create_future()
        self._waiter = waiter
        self.deadline = deadline
        self.transport.write(data)
        return waiter


class _LeanPool:
    """Up to ``limit`` kept-alive connections to one server for :meth:`ApiClient.raw_request`'s lean path.

    :meth:`request` takes an idle connection, opens one while fewer than ``limit`` are open, or queues the
    request; when an answer completes, its connection takes the oldest queued request at once (FIFO). Every
    request must be answered within ``timeout`` seconds of :meth:`request` (queueing included), else it fails
    with ``TimeoutError`` and its connection is closed (its answer may still come): one timer for the whole
    pool, set for the earliest deadline, enforces that. A request cancelled while queued is skipped; one
    cancelled in flight leaves its connection to finish reading the answer (or to time out)."""

    def __init__(
        self,
        server: str,
        ssl_ctx: ssl.SSLContext | None,
        limit: int,
        user_agent: str,
        timeout: float = 60.0,
    ) -> None:
        url = yarl.URL(server)
        if url.host is None:
            raise ValueError(f"no host in server URL {server!r}")
        self._host = url.host
        self._port = url.port or (443 if url.scheme == "https" else 80)
        self._ssl = ssl_ctx
        self._prefix = url.path.rstrip("/")
        host = url.raw_host or ""
        host = f"[{host}]" if ":" in host else host
        authority = host if url.is_default_port() else f"{host}:{url.port}"
        self._common = f"Host: {authority}\r\nUser-Agent: {user_agent}\r\nAccept: application/json\r\n"
        self._loop = asyncio.get_running_loop()
        self._limit = max(1, limit)
        self._timeout = timeout
        self._idle: list[_LeanConnection] = []
        self._conns: set[_LeanConnection] = set()  # open, idle or busy
        self._opening = 0
        self._queue: deque[tuple[bytes, asyncio.Future[_LeanResponse], float]] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self.closed = False

    def head(self, method: str, path: str, extra_headers: str, length: int) -> bytes:
        """The request head; ``extra_headers`` is ready-made ``Name: value\r\n`` lines."""
        return (
            f"{method} {self._prefix}{path} HTTP/1.1\r\n{self._common}{extra_headers}Content-Length: {length}\r\n\r\n"
        ).encode()

    def request(self, data: bytes) -> asyncio.Future[_LeanResponse]:
        """Send ``data`` (a whole request); the future completes with the answer. Like aiohttp, a POST is never
        re-sent by the transport: a connection lost before the answer fails it with ``ServerDisconnectedError``."""
        loop = self._loop
        waiter: asyncio.Future[_LeanResponse] = loop.create_future()
        if self.closed:
            waiter.set_exception(aiohttp.ClientConnectionError("the connection pool is closed"))
            return waiter
        now = loop.time()
        deadline = now + self._timeout
        if self._timer is None:
            self._timer = loop.call_at(deadline, self._expire)
        idle = self._idle
        while idle:
            conn = idle.pop()
            if conn.usable(now):
                conn.send(data, waiter, deadline)
                return waiter
            conn.close()
        self._queue.append((data, waiter, deadline))
        if len(self._conns) + self._opening < self._limit:
            self._open_one()
        return waiter

    def release(self, conn: _LeanConnection) -> None:
        """``conn`` answered and stays open: give it the oldest queued request, else keep it idle."""
        if self.closed:
            conn.close()
            return
        queue = self._queue
        while queue:
            data, waiter, deadline = queue.popleft()
            if not waiter.done():
                conn.send(data, waiter, deadline)
                return
        conn.idle_since = self._loop.time()
        self._idle.append(conn)

    def drop(self, conn: _LeanConnection) -> None:
        """``conn`` closed: it no longer counts, and a queued request may open a new connection."""
        if conn in self._conns:
            self._conns.discard(conn)
            if self._queue and not self.closed:
                self._open_one()

    def _open_one(self) -> None:
        self._opening += 1
        self._loop.create_task(self._connect())

    async def _connect(self) -> None:
        try:
            _, conn = await self._loop.create_connection(
                lambda: _LeanConnection(self),
                self._host,
                self._port,
                ssl=self._ssl,
                server_hostname=self._host if self._ssl is not None else None,
            )
        except OSError as e:
            self._opening -= 1
            error = aiohttp.ClientOSError(e.errno, f"cannot connect to {self._host}:{self._port}: {e}")
            self._connect_failed(error)
            return
        except BaseException as e:  # cancelled, or something unexpected: whoever waits for it must hear
            self._opening -= 1
            self._connect_failed(aiohttp.ClientConnectionError(f"cannot connect: {e!r}"))
            raise
        self._opening -= 1
        if conn.closed:  # lost before it could be used
            self._connect_failed(aiohttp.ServerDisconnectedError("connection lost right after it opened"))
            return
        self._conns.add(conn)
        self.release(conn)

    def _connect_failed(self, error: Exception) -> None:
        """The oldest queued request, for which the connection was opened, fails; the next ones try again."""
        queue = self._queue
        while queue:
            _, waiter, _ = queue.popleft()
            if not waiter.done():
                waiter.set_exception(error)
                break
        if queue and not self.closed and len(self._conns) + self._opening < self._limit:
            self._open_one()

    def _expire(self) -> None:
        """The pool's timer: fail what is past its deadline, then wait for the next deadline."""
        self._timer = None
        now = self._loop.time()
        queue = self._queue
        while queue and (queue[0][1].done() or queue[0][2] <= now):
            _, waiter, _ = queue.popleft()
            if not waiter.done():
                waiter.set_exception(TimeoutError())
        following = queue[0][2] if queue else None
        for conn in list(self._conns):
            if conn._waiter is None:
                continue
            if conn.deadline <= now:
                conn._fail(TimeoutError())
            elif following is None or conn.deadline < following:
                following = conn.deadline
        if following is not None:
            self._timer = self._loop.call_at(following, self._expire)

    def close(self) -> None:
        """Close idle connections and fail queued requests; those in flight finish, then close."""
        self.closed = True
        idle, self._idle = self._idle, []
        for c in idle:
            c.close()
        queue, self._queue = self._queue, deque()
        for _, waiter, _ in queue:
            if not waiter.done():
                waiter.set_exception(aiohttp.ClientConnectionError("the connection pool is closed"))


# Requests share a small pool of kept-alive connections: the API server is one event loop, so more parallel
# connections add no throughput, only TLS handshakes (one per new connection, on both sides) and per-connection
# bookkeeping. client-go multiplexes everything over one HTTP/2 connection; 32 was the measured optimum for a
# burst of thousands of bindings (fewer left the server's loop idle between rounds, more paid handshakes).
DEFAULT_MAX_CONNECTIONS = 32


class ApiClient:
    """Connection pools to one API server. Create it inside the event loop; ``await close()`` when done.

    Requests share up to ``max_connections`` kept-alive connections; watches (each holding its connection for
    its whole life) have a pool of their own, so open watches never take connections from requests.
    ``config`` may be a bare server URL for tests and the local cluster.
    """

    def __init__(
        self,
        config: ClientConfig | str,
        *,
        timeout: float = 60.0,
        max_connections: int = DEFAULT_MAX_CONNECTIONS,
        max_retries: int = 10,
    ) -> None:
        self.config = ClientConfig(server=config) if isinstance(config, str) else config
        self.timeout = timeout
        self.max_retries = max_retries
        self._server = self.config.server
        self._max_connections = self.max_connections = max_connections
        self._session: aiohttp.ClientSession | None = None
        self._watch_session: aiohttp.ClientSession | None = None
        self._lean: _LeanPool | None = None
        # An API writer (kubesched.client.writer) attached: it takes the events (event_sink) and, with
        # requests, the lean POSTs (bindings) off this process.
        self.event_sink: ApiWriter | None = None
        self._writer: ApiWriter | None = None
        self._limiter = (
            TokenBucket(self.config.qps, self.config.effective_burst) if self.config.qps > 0 else None
        )
        self._user_agent = self.config.user_agent or USER_AGENT

    # ---- lifecycle ----

    def _new_session(self, limit: int) -> aiohttp.ClientSession:
        ssl_ctx = self.config.ssl_context()
        connector = aiohttp.TCPConnector(limit=limit, ssl=ssl_ctx if ssl_ctx is not None else True)
        return aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=self.timeout),
            headers={"User-Agent": self._user_agent, "Accept": "application/json"},
        )

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = self._new_session(self._max_connections)
        return self._session

    def _get_watch_session(self) -> aiohttp.ClientSession:
        if self._watch_session is None or self._watch_session.closed:
            self._watch_session = self._new_session(0)  # one connection per open watch, no limit
        return self._watch_session

    def attach_writer(self, writer: ApiWriter, *, requests: bool) -> None:
        """Hand event writes (and with ``requests``, lean POSTs) to ``writer``; the client closes it."""
        self.event_sink = writer
        self._writer = writer if requests else None

    def _get_lean(self) -> _LeanPool | ApiWriter:
        if self._writer is not None:
            return self._writer
        if self._lean is None or self._lean.closed:
            self._lean = _LeanPool(
                self._server, self.config.ssl_context(), self._max_connections, self._user_agent, self.timeout
            )
        return self._lean

    async def close(self) -> None:
        writer, self.event_sink, self._writer = self.event_sink, None, None
        if writer is not None:
            await writer.close()
        if self._lean is not None:
            self._lean.close()
            self._lean = None
        for attr in ("_session", "_watch_session"):
            session = getattr(self, attr)
            if session is not None:
                setattr(self, attr, None)
                await session.close()

    async def __aenter__(self) -> ApiClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers: dict[str, str] = {}
        if content_type:
            headers["Content-Type"] = content_type
        token = self.config.bearer_token()
        if token:
            headers["Authorization"] = "Bearer " + token
        return headers

    # ---- transport ----

    async def raw_request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> Any:
        """Any request: ``body`` may be bytes/str (sent as is) or JSON-able. Returns parsed JSON, or text.

        Non-2xx answers raise :class:`ApiError`. 429 and 5xx answers with ``Retry-After`` are retried, as
        client-go does, up to ``max_retries`` times.
        """
        data: bytes | None
        if body is None:
            data = None
        elif isinstance(body, bytes):
            data = body
        elif isinstance(body, str):
            data = body.encode()
        else:
            data = orjson.dumps(body)
            content_type = content_type or "application/json"
        query = _query(**params) if params else None
        if method == "POST" and data is not None and not query and not headers:
            token = self.config.bearer_token()
            if token is None or ("\r" not in token and "\n" not in token):
                return await self._lean_post(path, data, content_type, token)
        hdrs = self._headers(content_type)
        if headers:
            hdrs.update(headers)
        url = self._server + path
        session = self._get_session()
        attempt = 0
        while True:
            if self._limiter is not None:
                await self._limiter.wait()
            async with session.request(method, url, params=query, data=data, headers=hdrs) as resp:
                raw = await resp.read()
                status = resp.status
                if status < 300:
                    return _decoded(raw, resp.headers.get("Content-Type", "application/json"))
                retry_after = _retry_after(status, resp.headers.get("Retry-After"))
            if retry_after is None or attempt >= self.max_retries:
                raise ApiError.from_response(status, raw)
            attempt += 1
            log.debug("%s %s: %d, retrying in %.1fs", method, path, status, retry_after)
            await asyncio.sleep(retry_after)

    async def _lean_post(self, path: str, data: bytes, content_type: str | None, token: str | None) -> Any:
        """``raw_request``'s POST without query or extra headers, over the lean path; same answers and retries."""
        extra = f"Content-Type: {content_type}\r\n" if content_type else ""
        if token:
            extra += f"Authorization: Bearer {token}\r\n"
        pool = self._get_lean()
        request = pool.head("POST", path, extra, len(data)) + data
        attempt = 0
        limiter = self._limiter
        while True:
            if limiter is not None:
                delay = limiter.reserve()  # no coroutine per request while tokens last
                if delay > 0.0:
                    await limiter.pause(delay)
            resp = await pool.request(request)  # the pool enforces self.timeout
            status = resp.status
            raw = resp.body
            if status < 300:
                return _decoded(raw, resp.headers.get("content-type", "application/json"))
            retry_after = _retry_after(status, resp.headers.get("retry-after"))
            if retry_after is None or attempt >= self.max_retries:
                raise ApiError.from_response(status, raw)
            attempt += 1
            log.debug("POST %s: %d, retrying in %.1fs", path, status, retry_after)
            await asyncio.sleep(retry_after)

    # ---- verbs ----

    async def get(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        resource_version: str | None = None,
    ) -> dict[str, Any]:
        path = resource_path(api_version, plural, namespace, name, subresource)
        params = {"resourceVersion": resource_version} if resource_version is not None else None
        return await self.raw_request("GET", path, params=params)

    async def list(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]:
        """One LIST request (one page when ``limit`` is set; see :meth:`list_all`)."""
        params = _query(
            labelSelector=label_selector,
            fieldSelector=field_selector,
            limit=limit,
            resourceVersion=resource_version,
            resourceVersionMatch=resource_version_match,
            **{"continue": continue_ or None},
        )
        return await self.raw_request("GET", resource_path(api_version, plural, namespace), params=params)

    async def list_all(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
    ) -> dict[str, Any]:
        """Every page, merged into one list whose ``metadata.resourceVersion`` is the first page's.

        Like client-go's pager: later pages send only ``continue``; an expired continue token falls back to
        one unpaginated LIST with the original options.
        """
        selectors: _Selectors = {
            "namespace": namespace,
            "label_selector": label_selector,
            "field_selector": field_selector,
        }
        first = await self.list(
            api_version,
            plural,
            limit=page_size or None,
            resource_version=resource_version,
            resource_version_match=resource_version_match,
            **selectors,
        )
        items: list[dict[str, Any]] = first.get("items") or []
        token = (first.get("metadata") or {}).get("continue")
        while token:
            try:
                page = await self.list(api_version, plural, limit=page_size, continue_=token, **selectors)
            except ApiError as e:
                if not e.is_expired():
                    raise
                return await self.list(
                    api_version,
                    plural,
                    resource_version=resource_version,
                    resource_version_match=resource_version_match,
                    **selectors,
                )
            items.extend(page.get("items") or [])
            token = (page.get("metadata") or {}).get("continue")
        first["items"] = items
        first.setdefault("metadata", {}).pop("continue", None)
        first["metadata"].pop("remainingItemCount", None)
        return first

    async def create(
        self,
        api_version: str,
        plural: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        path = resource_path(api_version, plural, namespace)
        return await self.raw_request("POST", path, params=_query(fieldManager=field_manager), body=body)

    async def replace(
        self,
        api_version: str,
        plural: str,
        name: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        field_manager: str | None = None,
    ) -> dict[str, Any]:
        """PUT; send ``metadata.resourceVersion`` for optimistic concurrency (409 Conflict when stale)."""
        path = resource_path(api_version, plural, namespace, name, subresource)
        return await self.raw_request("PUT", path, params=_query(fieldManager=field_manager), body=body)

    async def patch(
        self,
        api_version: str,
        plural: str,
        name: str,
        patch: Any,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        patch_type: PatchType = "merge",
        field_manager: str | None = None,
        force: bool | None = None,
    ) -> dict[str, Any]:
        """PATCH with a merge, strategic-merge, JSON (list of ops) or server-side-apply (``"apply"``) body."""
        content_type = PATCH_CONTENT_TYPES.get(patch_type)
        if content_type is None:
            raise ValueError(
                f"unknown patch_type {patch_type!r}; use one of {', '.join(PATCH_CONTENT_TYPES)}"
            )
        if patch_type == "apply" and not field_manager:
            raise ValueError("server-side apply needs a field_manager")
        if force is not None and patch_type != "apply":
            raise ValueError("force is only valid with patch_type='apply'")
        path = resource_path(api_version, plural, namespace, name, subresource)
        body = patch if isinstance(patch, bytes | str) else orjson.dumps(patch)
        params = _query(fieldManager=field_manager, force=force)
        return await self.raw_request("PATCH", path, params=params, body=body, content_type=content_type)

    async def delete(
        self,
        api_version: str,
        plural: str,
        name: str,
        *,
        namespace: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions: dict[str, str] | None = None,
        propagation_policy: str | None = None,
    ) -> dict[str, Any]:
        """DELETE with a DeleteOptions body. ``preconditions``: ``{"uid": ..., "resourceVersion": ...}``.

        Returns the server's answer: the object (still terminating, or as deleted) or a Success Status.
        """
        options: dict[str, Any] = {}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions:
            options["preconditions"] = preconditions
        if propagation_policy:
            options["propagationPolicy"] = propagation_policy
        body = {"kind": "DeleteOptions", "apiVersion": "v1", **options} if options else None
        path = resource_path(api_version, plural, namespace, name)
        return await self.raw_request("DELETE", path, body=body)

    async def create_subresource(
        self,
        api_version: str,
        plural: str,
        name: str,
        subresource: str,
        body: dict[str, Any],
        *,
        namespace: str | None = None,
    ) -> dict[str, Any]:
        """POST to a subresource, e.g. ``pods/{name}/binding`` (answers a Success Status) or ``eviction``."""
        path = resource_path(api_version, plural, namespace, name, subresource)
        return await self.raw_request("POST", path, body=body)

    def watch(
        self,
        api_version: str,
        plural: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        resource_version_match: str | None = None,
        allow_watch_bookmarks: bool = True,
        send_initial_events: bool | None = None,
        timeout_seconds: int | None = None,
    ) -> WatchStream:
        """A watch on a collection, as a :class:`WatchStream` of ``(type, object)``; nothing is sent until
        it is opened or iterated. ``BOOKMARK`` events are yielded (type ``"BOOKMARK"``)."""
        path = resource_path(api_version, plural, namespace)
        params = _query(
            watch=True,
            labelSelector=label_selector,
            fieldSelector=field_selector,
            resourceVersion=resource_version,
            resourceVersionMatch=resource_version_match,
            allowWatchBookmarks=allow_watch_bookmarks or None,
            sendInitialEvents=send_initial_events,
            timeoutSeconds=timeout_seconds,
        )
        # The server ends the stream after timeoutSeconds; the read timeout only catches dead connections.
        read_timeout = timeout_seconds + 60 if timeout_seconds else None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.timeout, sock_read=read_timeout)

        async def opener() -> aiohttp.ClientResponse:
            if self._limiter is not None:
                await self._limiter.wait()
            resp = await self._get_watch_session().get(
                self._server + path, params=params, headers=self._headers(None), timeout=timeout
            )
            if resp.status != 200:
                try:
                    raw = await resp.read()
                finally:
                    resp.release()
                raise ApiError.from_response(resp.status, raw)
            return resp

        return WatchStream(opener)


def _decoded(raw: bytes, content_type: str) -> Any:
    """A successful answer's body: None when empty, JSON decoded, else text (both request paths)."""
    if not raw:
        return None
    if "json" in content_type:
        return orjson.loads(raw)
    return raw.decode("utf-8", "replace")


def _retry_after(status: int, header: str | None) -> float | None:
    if header is None or not (status == 429 or 500 <= status < 600):
        return None
    try:
        return max(0.0, float(header))
    except ValueError:
        return 1.0
