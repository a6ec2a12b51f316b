"""The lean path's connection pool: FIFO hand-over, one timer for deadlines, cancellation, connect failures, close."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
import orjson
import pytest
from test_client_lean import _raw_server

from kubesched.client import ApiClient

OK = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"


def _answer_with(body: dict[str, Any]) -> bytes:
    raw = orjson.dumps(body)
    return OK % (len(raw), raw)


def _n(request: bytes) -> int:
    return int(orjson.loads(request.split(b"\r\n\r\n", 1)[1])["n"])


class HeldServer:
    """Answers ``{"n": n}`` to each request, but holds requests whose ``n`` is in ``held`` until released."""

    def __init__(self, held: set[int] | None = None) -> None:
        self.held = held or set()
        self.order: list[int] = []
        self.gates: dict[int, asyncio.Event] = {}
        self.accepted = 0

    def release(self, n: int) -> None:
        self.gates.setdefault(n, asyncio.Event()).set()

    async def answer(self, request: bytes, writer: asyncio.StreamWriter) -> bool:
        n = _n(request)
        self.order.append(n)
        if n in self.held:
            await self.gates.setdefault(n, asyncio.Event()).wait()
        writer.write(_answer_with({"n": n}))
        await writer.drain()
        return True


async def _start(held: HeldServer) -> tuple[asyncio.AbstractServer, str]:
    srv, url, _ = await _raw_server(held.answer)
    return srv, url


def _post(client: ApiClient, n: int) -> asyncio.Task[Any]:
    return asyncio.ensure_future(client.create("v1", "pods", {"n": n}, namespace="ns"))


async def _until(predicate: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_queued_requests_go_out_in_arrival_order() -> None:
    held = HeldServer({0})
    srv, url = await _start(held)
    try:
        async with ApiClient(url, max_connections=1) as client:
            tasks = [_post(client, i) for i in range(20)]
            await _until(lambda: held.order == [0])
            held.release(0)
            answers = await asyncio.gather(*tasks)
    finally:
        srv.close()
    assert [a["n"] for a in answers] == list(range(20))
    assert held.order == list(range(20))  # one connection, FIFO: the server saw them in the callers' order


async def test_timeout_while_queued_fails_the_queued_request_without_sending_it() -> None:
    held = HeldServer({0})
    srv, url = await _start(held)
    try:
        async with ApiClient(url, max_connections=1, timeout=0.3) as client:
            first, queued = _post(client, 0), _post(client, 1)
            with pytest.raises(TimeoutError):
                await first
            with pytest.raises(TimeoutError):
                await queued
            assert held.order == [0]  # the queued one never reached the server
            held.release(0)
            # The timed-out connection was closed, not reused (its late answer would be taken for this one's).
            assert await client.create("v1", "pods", {"n": 2}, namespace="ns") == {"n": 2}
    finally:
        srv.close()
    assert held.order == [0, 2]


async def test_cancel_while_queued_skips_the_request() -> None:
    held = HeldServer({0})
    srv, url = await _start(held)
    try:
        async with ApiClient(url, max_connections=1) as client:
            first, cancelled, third = _post(client, 0), _post(client, 1), _post(client, 2)
            await _until(lambda: held.order == [0])
            cancelled.cancel()
            await asyncio.gather(cancelled, return_exceptions=True)
            held.release(0)
            assert await first == {"n": 0}
            assert await third == {"n": 2}
    finally:
        srv.close()
    assert held.order == [0, 2]
    assert cancelled.cancelled()


async def test_cancel_in_flight_keeps_the_connection_in_step() -> None:
    held = HeldServer({0})
    srv, url = await _start(held)
    try:
        async with ApiClient(url, max_connections=1) as client:
            first = _post(client, 0)
            await _until(lambda: held.order == [0])
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            second = _post(client, 1)
            held.release(0)
            # The late answer to the cancelled request is read and dropped; the next one gets its own answer.
            assert await second == {"n": 1}
            assert await client.create("v1", "pods", {"n": 2}, namespace="ns") == {"n": 2}
    finally:
        srv.close()
    assert held.order == [0, 1, 2]


async def test_cancelled_request_never_answered_frees_its_connection_at_the_deadline() -> None:
    held = HeldServer({0})  # request 0 is never answered
    srv, url = await _start(held)
    connections = 0
    original = asyncio.get_running_loop().create_connection

    async def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal connections
        connections += 1
        return await original(*args, **kwargs)

    loop = asyncio.get_running_loop()
    loop.create_connection = counting  # type: ignore[method-assign]
    try:
        async with ApiClient(url, max_connections=1, timeout=0.6) as client:
            first = _post(client, 0)
            await _until(lambda: held.order == [0])
            first.cancel()
            await asyncio.gather(first, return_exceptions=True)
            await asyncio.sleep(0.2)
            # Queued behind the hung connection; sent on a new one once the first request's deadline passes.
            assert await client.create("v1", "pods", {"n": 1}, namespace="ns") == {"n": 1}
    finally:
        del loop.create_connection
        srv.close()
    assert connections == 2
    assert held.order == [0, 1]


async def test_connect_failure_fails_every_waiter() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    async with ApiClient(f"http://127.0.0.1:{port}", max_connections=2) as client:
        tasks = [_post(client, i) for i in range(10)]
        async with asyncio.timeout(10):
            results = await asyncio.gather(*tasks, return_exceptions=True)
    assert len(results) == 10
    assert all(isinstance(r, aiohttp.ClientOSError) for r in results), results


async def test_close_fails_queued_requests_and_lets_the_one_in_flight_finish() -> None:
    held = HeldServer({0})
    srv, url = await _start(held)
    try:
        client = ApiClient(url, max_connections=1)
        first = _post(client, 0)
        queued = [_post(client, i) for i in range(1, 6)]
        await _until(lambda: held.order == [0])
        await client.close()
        results = await asyncio.gather(*queued, return_exceptions=True)
        assert all(isinstance(r, aiohttp.ClientConnectionError) for r in results), results
        held.release(0)
        assert await first == {"n": 0}
    finally:
        srv.close()
    assert held.order == [0]


async def test_one_timer_for_a_burst() -> None:
    held = HeldServer()
    srv, url = await _start(held)
    loop = asyncio.get_running_loop()
    calls = 0
    original = loop.call_at

    def counting(when: float, callback: Any, *args: Any, **kwargs: Any) -> asyncio.TimerHandle:
        nonlocal calls
        if getattr(callback, "__name__", "") == "_expire":
            calls += 1
        return original(when, callback, *args, **kwargs)

    loop.call_at = counting  # type: ignore[method-assign]
    try:
        async with ApiClient(url, max_connections=4) as client:
            got = await asyncio.gather(*(_post(client, i) for i in range(100)))
    finally:
        del loop.call_at
        srv.close()
    assert [g["n"] for g in got] == list(range(100))
    assert calls == 1  # not one timer per request
