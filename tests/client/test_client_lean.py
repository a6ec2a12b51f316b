"""The lean POST path (bindings, events, creates): wire format, answers in any framing, errors, TLS, reuse."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web
from client_fakes import FakeServer, json_response, status
from hypothesis import given, settings
from hypothesis import strategies as st
from test_client_config import self_signed

from kubesched.client import ApiClient, ApiError, ClientConfig
from kubesched.client.events import EventRecorder
from kubesched.client.rest import USER_AGENT, _LeanConnection, _LeanResponse

BINDING = {
    "apiVersion": "v1",
    "kind": "Binding",
    "metadata": {"name": "p1", "namespace": "ns", "uid": "u1"},
    "target": {"kind": "Node", "name": "n1"},
}


async def _raw_server(answer: Any) -> tuple[asyncio.AbstractServer, str, list[bytes]]:
    """A bare TCP server on loopback: ``answer(request_bytes, writer)`` writes whatever the test wants and
    returns False to close the connection."""
    seen: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                seen.append(head + body)
                if not await answer(head + body, writer):
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    return srv, f"http://127.0.0.1:{port}", seen


async def test_binding_post_wire_format(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response({"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201}, 201)

    server.handler = handler
    async with ApiClient(ClientConfig(server=server.url, token="t0k")) as client:
        got = await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        assert client._lean is not None and client._session is None  # went the lean way, not through aiohttp
    assert got["status"] == "Success"
    (seen,) = server.requests
    assert (seen.method, seen.path, seen.query) == ("POST", "/api/v1/namespaces/ns/pods/p1/binding", {})
    assert orjson.loads(seen.body) == BINDING
    headers = {k.lower(): v for k, v in seen.headers.items()}
    assert headers["authorization"] == "Bearer t0k"
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == USER_AGENT and headers["accept"] == "application/json"
    assert headers["host"] == server.url.removeprefix("http://")
    assert headers["content-length"] == str(len(seen.body))


async def test_post_with_query_or_headers_still_works(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response({"seen": dict(request.query)}, 201)

    server.handler = handler
    async with ApiClient(server.url) as client:
        got = await client.create(
            "v1", "configmaps", {"metadata": {"name": "a"}}, namespace="ns", field_manager="m"
        )
        assert got == {"seen": {"fieldManager": "m"}}
        got = await client.raw_request("POST", "/x", body=b"{}", headers={"X-Extra": "1"})
        assert got == {"seen": {}}
    assert server.requests[1].headers["X-Extra"] == "1"


async def test_post_errors_and_retries(server: FakeServer) -> None:
    answers: list[web.Response] = [
        web.Response(status=429, headers={"Retry-After": "0"}, text="slow down"),
        web.Response(status=503, headers={"Retry-After": "0"}, text="busy"),
        json_response({}, 201),
        json_response(status(409, "Conflict", 'pod p1 is already assigned to node "n2"'), 409),
        web.Response(status=500, text="plain failure"),
    ]

    async def handler(request: web.Request) -> web.Response:
        return answers.pop(0)

    server.handler = handler
    async with ApiClient(server.url) as client:
        assert await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns") == {}
        assert len(server.requests) == 3  # 429 and 503 with Retry-After were retried
        with pytest.raises(ApiError) as conflict:
            await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
        assert conflict.value.is_conflict() and "already assigned" in conflict.value.message
        with pytest.raises(ApiError) as plain:
            await client.create("v1", "pods", {"metadata": {"name": "x"}}, namespace="ns")
        assert (plain.value.status, plain.value.reason, plain.value.message) == (
            500,
            "InternalError",
            "plain failure",
        )


async def test_answers_in_every_framing_and_reconnect_after_close() -> None:
    answers = iter(
        [
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Type: application/json\r\n"
            b'Transfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3;ext=1\r\n:1}\r\n0\r\nX-Trailer: y\r\n\r\n',
            b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"b":2}',
            b'HTTP/1.1 201 Created\r\nContent-Type: application/json\r\n\r\n{"c":3}',  # until the close
            b"HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
            b"HTTP/1.1 204 No Content\r\n\r\n",
        ]
    )

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        data = next(answers)
        writer.write(data)
        await writer.drain()
        return b"Content-Length" in data or b"chunked" in data or b" 204 " in data

    srv, url, seen = await _raw_server(answer)
    try:
        async with ApiClient(url) as client:
            for expected in ({"a": 1}, {"b": 2}, {"c": 3}, "ok", None):
                assert (
                    await client.create("v1", "pods", {"metadata": {"name": "d"}}, namespace="ns") == expected
                )
    finally:
        srv.close()
        await srv.wait_closed()
    assert len(seen) == 5
    assert seen[0].startswith(b"POST /api/v1/namespaces/ns/pods HTTP/1.1\r\n")
    assert seen[0].endswith(b'\r\n\r\n{"metadata":{"name":"d"}}') and b"Content-Length: 25\r\n" in seen[0]


@pytest.mark.parametrize(
    "wire",
    [
        b'HTTP/1.1 201 Created\r\nContent-Length: 100\r\n\r\n{"partial',  # cut short
        b"garbage\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nContent-Length: nope\r\n\r\n",
        b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
    ],
)
async def test_broken_answers_are_transport_errors(wire: bytes) -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(wire)
        await writer.drain()
        return False

    srv, url, _ = await _raw_server(answer)
    try:
        async with ApiClient(url) as client:
            with pytest.raises(aiohttp.ClientError):
                await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
    finally:
        srv.close()


async def test_timeout_drops_the_connection_and_the_next_post_works() -> None:
    calls = 0

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(1)  # answers too late: this answer must not be taken for the next request's
            writer.write(
                b'HTTP/1.1 201 Created\r\nContent-Length: 9\r\nContent-Type: application/json\r\n\r\n{"n":"1"}'
            )
            await writer.drain()
            return True
        writer.write(
            b'HTTP/1.1 201 Created\r\nContent-Length: 9\r\nContent-Type: application/json\r\n\r\n{"n":"2"}'
        )
        await writer.drain()
        return True

    srv, url, _ = await _raw_server(answer)
    try:
        async with ApiClient(url, timeout=0.2) as client:
            with pytest.raises(TimeoutError):
                await client.create("v1", "pods", {}, namespace="ns")
            assert await client.create("v1", "pods", {}, namespace="ns") == {"n": "2"}
    finally:
        srv.close()


async def test_connection_refused_is_a_client_os_error() -> None:
    srv = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = srv.sockets[0].getsockname()[1]
    srv.close()
    await srv.wait_closed()
    async with ApiClient(f"http://127.0.0.1:{port}") as client:
        with pytest.raises(aiohttp.ClientOSError) as err:
            await client.create("v1", "pods", {}, namespace="ns")
    assert isinstance(err.value, OSError) and f"127.0.0.1:{port}" in str(err.value)


async def test_posts_share_kept_alive_connections(server: FakeServer) -> None:
    peers: set[Any] = set()

    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.add(request.transport.get_extra_info("peername"))
        await asyncio.sleep(0.01)
        return json_response({}, 201)

    server.handler = handler
    async with ApiClient(server.url, max_connections=3) as client:
        for _ in range(3):
            await asyncio.gather(*(client.create("v1", "pods", {"n": i}, namespace="ns") for i in range(20)))
    assert len(server.requests) == 60
    assert 1 <= len(peers) <= 3
    assert sorted(orjson.loads(r.body)["n"] for r in server.requests) == sorted(list(range(20)) * 3)


async def test_events_and_bindings_over_tls(tmp_path: Path) -> None:
    cert, key = self_signed("apiserver")
    (tmp_path / "s.crt").write_bytes(cert)
    (tmp_path / "s.key").write_bytes(key)
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(str(tmp_path / "s.crt"), str(tmp_path / "s.key"))

    async def handler(request: web.Request) -> web.Response:
        return json_response(orjson.loads(await request.read()), 201)

    srv = FakeServer()
    srv.handler = handler
    await srv.start(ssl_context=server_ctx)
    try:
        async with ApiClient(ClientConfig(server=srv.url, ca_data=cert)) as client:
            assert (
                await client.create_subresource("v1", "pods", "p1", "binding", BINDING, namespace="ns")
                == BINDING
            )
            recorder = EventRecorder(client, "default-scheduler", "default-scheduler-x")
            for i in range(50):
                pod = {
                    "kind": "Pod",
                    "apiVersion": "v1",
                    "metadata": {"name": f"p{i}", "namespace": "ns", "uid": f"u{i}"},
                }
                recorder.event(pod, "Normal", "Scheduled", "Binding", f"Successfully assigned ns/p{i} to n1")
            await recorder.close(timeout=30)
        events = [r for r in srv.requests if r.path == "/apis/events.k8s.io/v1/namespaces/ns/events"]
        assert len(events) == 50 and recorder.dropped == 0
        assert {orjson.loads(r.body)["regarding"]["name"] for r in events} == {f"p{i}" for i in range(50)}
        # Without the CA the server certificate is refused.
        async with ApiClient(ClientConfig(server=srv.url, ca_file=None)) as client:
            with pytest.raises(Exception, match="certificate verify failed"):
                await client.create("v1", "pods", {}, namespace="ns")
    finally:
        await srv.stop()


# ---- the response parser on its own: any split of the bytes gives the same answers ----


class _FakeTransport(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.written: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        self.written.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _wire(status_code: int, body: bytes, chunked: bool, pieces: int, interim: bool) -> bytes:
    head = b"HTTP/1.1 100 Continue\r\n\r\n" if interim else b""
    head += b"HTTP/1.1 %d X\r\nContent-Type: application/json\r\n" % status_code
    if not chunked:
        return head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    step = max(1, len(body) // pieces) if body else 1
    chunks = [body[i : i + step] for i in range(0, len(body), step)]
    return (
        head
        + b"Transfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
        + b"0\r\n\r\n"
    )


@settings(max_examples=150, deadline=None)
@given(
    bodies=st.lists(st.binary(max_size=300), min_size=1, max_size=4),
    chunked=st.lists(st.booleans(), min_size=4, max_size=4),
    interim=st.booleans(),
    pieces=st.integers(1, 5),
    cuts=st.lists(st.integers(1, 40), max_size=50),
)
def test_parser_is_independent_of_read_boundaries(
    bodies: list[bytes], chunked: list[bool], interim: bool, pieces: int, cuts: list[int]
) -> None:
    async def run() -> list[_LeanResponse]:
        conn = _LeanConnection()
        conn.connection_made(_FakeTransport())
        out: list[_LeanResponse] = []
        for i, body in enumerate(bodies):
            wire = _wire(200 + i, body, chunked[i], pieces, interim and i == 0)
            waiter = conn.send(b"POST / HTTP/1.1\r\n\r\n")
            pos = 0
            for cut in [*cuts, len(wire)]:
                if pos >= len(wire):
                    break
                conn.data_received(wire[pos : pos + cut])
                pos += cut
            while pos < len(wire):
                conn.data_received(wire[pos : pos + 40])
                pos += 40
            assert waiter.done()
            out.append(waiter.result())
        return out

    responses = asyncio.run(run())
    assert [r.body for r in responses] == bodies
    assert [r.status for r in responses] == [200 + i for i in range(len(bodies))]
    assert all(r.keep_alive and r.headers["content-type"] == "application/json" for r in responses)


async def test_concurrent_posts_get_their_own_answers(server: FakeServer) -> None:
    peers: set[Any] = set()

    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.add(request.transport.get_extra_info("peername"))
        body = orjson.loads(await request.read())
        if body["n"] % 3 == 0:
            await asyncio.sleep(0.005)  # slow answers: every caller still gets its own
        return json_response({"echo": body["n"]}, 201)

    server.handler = handler
    async with ApiClient(server.url, max_connections=2) as client:
        answers = await asyncio.gather(
            *(client.create("v1", "pods", {"n": i}, namespace="ns") for i in range(100))
        )
    assert [a["echo"] for a in answers] == list(range(100))
    assert 1 <= len(peers) <= 2


async def test_bursts_reuse_the_open_connections() -> None:
    accepted = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal accepted
        accepted += 1
        answer = b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(head.lower().split(b"content-length: ", 1)[1].split(b"\r\n", 1)[0])
                await reader.readexactly(length)
                await asyncio.sleep(0.001 * (accepted % 3))
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    srv = await asyncio.start_server(serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{srv.sockets[0].getsockname()[1]}"
    try:
        async with ApiClient(url, max_connections=2) as client:
            for _ in range(10):
                got = await asyncio.gather(
                    *(client.create("v1", "pods", {}, namespace="ns") for _ in range(20))
                )
                assert got == [{}] * 20
                await asyncio.sleep(0)
    finally:
        srv.close()
    assert accepted <= 2
