"""ApiClient against a scripted aiohttp server: paths, verbs, errors, watch parsing, pagination, retries."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import orjson
import pytest
from aiohttp import web
from client_fakes import FakeServer, json_response, status, watch_line
from hypothesis import given
from hypothesis import strategies as st

from kubesched.client import ApiClient, ApiError, ClientConfig, resource_path
from kubesched.client.rest import USER_AGENT, LineSplitter, TokenBucket


@pytest.mark.parametrize(
    ("args", "path"),
    [
        (("v1", "pods"), "/api/v1/pods"),
        (("v1", "pods", "default"), "/api/v1/namespaces/default/pods"),
        (("v1", "pods", "ns", "p1", "binding"), "/api/v1/namespaces/ns/pods/p1/binding"),
        (("v1", "namespaces", None, "kube-system"), "/api/v1/namespaces/kube-system"),
        (("coordination.k8s.io/v1", "leases", "kube-system", "kube-scheduler"),
         "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/kube-scheduler"),
        (("rbac.authorization.k8s.io/v1", "clusterroles", None, "system:kube-scheduler"),
         "/apis/rbac.authorization.k8s.io/v1/clusterroles/system:kube-scheduler"),
        (("v1", "nodes", None, "n1", "status"), "/api/v1/nodes/n1/status"),
    ],
)  # fmt: skip
def test_resource_path(args: tuple[Any, ...], path: str) -> None:
    assert resource_path(*args) == path


def test_subresource_needs_a_name() -> None:
    with pytest.raises(ValueError):
        resource_path("v1", "pods", "default", None, "status")


# ---- line splitting (the watch parser) ----

_events = st.lists(
    st.fixed_dictionaries(
        {
            "type": st.sampled_from(["ADDED", "MODIFIED", "DELETED", "BOOKMARK"]),
            "object": st.fixed_dictionaries(
                {
                    "metadata": st.fixed_dictionaries({"name": st.text(max_size=30)}),
                    "n": st.integers(min_value=-(2**63), max_value=2**63 - 1),
                }
            ),
        }
    ),
    max_size=20,
)


@given(
    events=_events,
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=30),
    final_nl=st.booleans(),
)
def test_line_splitter_is_independent_of_chunk_boundaries(
    events: list[dict[str, Any]], cuts: list[int], final_nl: bool
) -> None:
    stream = b"".join(orjson.dumps(e) + b"\n" for e in events)
    if events and not final_nl:
        stream = stream[:-1]  # a server that does not terminate its last line
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    splitter = LineSplitter()
    lines: list[bytes] = []
    for a, b in itertools.pairwise(points):
        lines.extend(splitter.feed(stream[a:b]))
    tail = splitter.finish()
    if tail is not None:
        lines.append(tail)
    assert [orjson.loads(line) for line in lines] == events


def test_line_splitter_skips_blank_lines() -> None:
    splitter = LineSplitter()
    assert splitter.feed(b'{"a":1}\n\n  \n{"b"') == [b'{"a":1}']
    assert splitter.feed(b":2}\r\n") == [b'{"b":2}\r']
    assert splitter.finish() is None


# ---- verbs ----


async def test_get_sends_user_agent_token_and_parses(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response({"kind": "Pod", "metadata": {"name": "p1"}})

    server.handler = handler
    cfg = ClientConfig(server=server.url, token="s3cret")
    async with ApiClient(cfg) as client:
        pod = await client.get("v1", "pods", "p1", namespace="default", resource_version="0")
    assert pod == {"kind": "Pod", "metadata": {"name": "p1"}}
    seen = server.requests[0]
    assert (seen.method, seen.path, seen.query) == (
        "GET",
        "/api/v1/namespaces/default/pods/p1",
        {"resourceVersion": "0"},
    )
    assert seen.headers["User-Agent"] == USER_AGENT and USER_AGENT.startswith("kubesched/")
    assert seen.headers["Authorization"] == "Bearer s3cret"


async def test_not_found_raises_api_error_with_status_fields(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response(status(404, "NotFound", 'pods "p1" not found', details={"name": "p1"}), 404)

    server.handler = handler
    async with ApiClient(server.url) as client:
        with pytest.raises(ApiError) as info:
            await client.get("v1", "pods", "p1", namespace="default")
    err = info.value
    assert (err.status, err.reason, err.message) == (404, "NotFound", 'pods "p1" not found')
    assert err.is_not_found() and not err.is_conflict() and not err.is_expired()
    assert err.body["details"] == {"name": "p1"}


@pytest.mark.parametrize(
    ("code", "reason", "flags"),
    [
        (409, "AlreadyExists", {"is_already_exists"}),
        (409, "Conflict", {"is_conflict"}),
        (410, "Expired", {"is_expired"}),
        (410, "Gone", {"is_expired"}),
        (422, "Invalid", {"is_invalid"}),
        (429, "TooManyRequests", {"is_too_many_requests"}),
    ],
)
def test_error_predicates(code: int, reason: str, flags: set[str]) -> None:
    err = ApiError.from_status(status(code, reason, "x"))
    names = {
        "is_not_found",
        "is_conflict",
        "is_already_exists",
        "is_expired",
        "is_invalid",
        "is_too_many_requests",
    }
    assert {n for n in names if getattr(err, n)()} == flags


def test_too_large_resource_version_is_recognized() -> None:
    body = status(
        504,
        "Timeout",
        "Too large resource version: 9, current: 5",
        details={"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]},
    )
    assert ApiError.from_status(body).is_resource_version_too_large()
    assert not ApiError.from_status(status(504, "Timeout", "slow")).is_resource_version_too_large()


async def test_error_without_status_body(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="upstream down", status=502)

    server.handler = handler
    async with ApiClient(server.url) as client:
        with pytest.raises(ApiError) as info:
            await client.raw_request("GET", "/healthz")
    assert (info.value.status, info.value.message) == (502, "upstream down")


async def test_writes_send_bodies_content_types_and_options(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response({"ok": True}, 201 if request.method == "POST" else 200)

    server.handler = handler
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"}}
    async with ApiClient(server.url) as client:
        await client.create("v1", "pods", pod, namespace="ns", field_manager="kubesched")
        await client.replace("v1", "pods", "p1", pod, namespace="ns", subresource="status")
        await client.patch("v1", "pods", "p1", {"metadata": {"labels": {"a": "b"}}}, namespace="ns")
        await client.patch("v1", "pods", "p1", {"spec": {}}, namespace="ns", patch_type="strategic")
        await client.patch(
            "v1", "pods", "p1", [{"op": "remove", "path": "/x"}], namespace="ns", patch_type="json"
        )
        await client.patch(
            "v1", "pods", "p1", pod, namespace="ns", patch_type="apply", field_manager="kubesched", force=True
        )
        await client.delete(
            "v1",
            "pods",
            "p1",
            namespace="ns",
            grace_period_seconds=0,
            preconditions={"uid": "u1"},
            propagation_policy="Background",
        )
        await client.create_subresource(
            "v1", "pods", "p1", "binding", {"target": {"kind": "Node", "name": "n1"}}, namespace="ns"
        )
        with pytest.raises(ValueError):
            await client.patch("v1", "pods", "p1", {}, patch_type="apply")  # no field manager
        with pytest.raises(ValueError):
            await client.patch("v1", "pods", "p1", {}, force=True)  # force without apply
    r = server.requests
    assert [(x.method, x.path) for x in r] == [
        ("POST", "/api/v1/namespaces/ns/pods"),
        ("PUT", "/api/v1/namespaces/ns/pods/p1/status"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p1"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p1"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p1"),
        ("PATCH", "/api/v1/namespaces/ns/pods/p1"),
        ("DELETE", "/api/v1/namespaces/ns/pods/p1"),
        ("POST", "/api/v1/namespaces/ns/pods/p1/binding"),
    ]
    assert r[0].query == {"fieldManager": "kubesched"} and orjson.loads(r[0].body) == pod
    assert r[0].headers["Content-Type"] == "application/json"
    assert [x.headers["Content-Type"] for x in r[2:6]] == [
        "application/merge-patch+json",
        "application/strategic-merge-patch+json",
        "application/json-patch+json",
        "application/apply-patch+yaml",
    ]
    assert orjson.loads(r[4].body) == [{"op": "remove", "path": "/x"}]
    assert r[5].query == {"fieldManager": "kubesched", "force": "true"}
    assert orjson.loads(r[6].body) == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u1"},
        "propagationPolicy": "Background",
    }
    assert orjson.loads(r[7].body) == {"target": {"kind": "Node", "name": "n1"}}


async def test_list_parameters(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response({"kind": "PodList", "metadata": {"resourceVersion": "7"}, "items": []})

    server.handler = handler
    async with ApiClient(server.url) as client:
        result = await client.list(
            "v1",
            "pods",
            label_selector="app=x",
            field_selector="spec.nodeName=",
            limit=10,
            continue_="tok",
            resource_version="5",
            resource_version_match="NotOlderThan",
        )
    assert result["metadata"]["resourceVersion"] == "7"
    assert server.requests[0].path == "/api/v1/pods"
    assert server.requests[0].query == {
        "labelSelector": "app=x",
        "fieldSelector": "spec.nodeName=",
        "limit": "10",
        "continue": "tok",
        "resourceVersion": "5",
        "resourceVersionMatch": "NotOlderThan",
    }


async def test_list_all_follows_continue_tokens(server: FakeServer) -> None:
    pages = {
        "": ({"resourceVersion": "9", "continue": "a", "remainingItemCount": 3}, [1, 2]),
        "a": ({"resourceVersion": "9", "continue": "b"}, [3, 4]),
        "b": ({"resourceVersion": "9"}, [5]),
    }

    async def handler(request: web.Request) -> web.Response:
        meta, items = pages[request.query.get("continue", "")]
        return json_response({"kind": "PodList", "metadata": meta, "items": [{"n": i} for i in items]})

    server.handler = handler
    async with ApiClient(server.url) as client:
        result = await client.list_all("v1", "pods", page_size=2, resource_version="0")
    assert [i["n"] for i in result["items"]] == [1, 2, 3, 4, 5]
    assert result["metadata"] == {"resourceVersion": "9"}
    first, *rest = server.requests
    assert first.query == {"limit": "2", "resourceVersion": "0"}
    # Later pages carry only the token: RV together with continue is a 400 for a real server.
    assert [r.query for r in rest] == [{"limit": "2", "continue": "a"}, {"limit": "2", "continue": "b"}]


async def test_list_all_falls_back_to_a_full_list_when_the_token_expires(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        token = request.query.get("continue")
        if token == "a":
            return json_response(status(410, "Expired", "The provided continue parameter is too old"), 410)
        if "limit" in request.query:
            return json_response({"metadata": {"resourceVersion": "9", "continue": "a"}, "items": [{"n": 1}]})
        return json_response({"metadata": {"resourceVersion": "12"}, "items": [{"n": 1}, {"n": 2}]})

    server.handler = handler
    async with ApiClient(server.url) as client:
        result = await client.list_all("v1", "pods", page_size=1)
    assert [i["n"] for i in result["items"]] == [1, 2]
    assert result["metadata"]["resourceVersion"] == "12"
    assert server.requests[-1].query == {}


async def test_retry_after_429_is_retried(server: FakeServer) -> None:
    answers = [web.Response(status=429, headers={"Retry-After": "0"}, text="slow down")]

    async def handler(request: web.Request) -> web.Response:
        return answers.pop(0) if answers else json_response({"ok": 1})

    server.handler = handler
    async with ApiClient(server.url) as client:
        assert await client.raw_request("GET", "/api/v1/pods") == {"ok": 1}
    assert len(server.requests) == 2


async def test_raw_request_returns_text_for_non_json(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return web.Response(text="ok")

    server.handler = handler
    async with ApiClient(server.url) as client:
        assert await client.raw_request("GET", "/healthz", params={"verbose": True}) == "ok"
    assert server.requests[0].query == {"verbose": "true"}


# ---- watch ----


def _cm(name: str, rv: int) -> dict[str, Any]:
    return {"kind": "ConfigMap", "metadata": {"name": name, "resourceVersion": str(rv)}}


async def test_watch_parses_events_across_chunk_boundaries(server: FakeServer) -> None:
    big = {
        "kind": "ConfigMap",
        "metadata": {"name": "big", "resourceVersion": "3"},
        "data": {"x": "y" * 200_000},
    }
    stream = (
        watch_line("ADDED", _cm("a", 1))
        + watch_line("MODIFIED", _cm("a", 2))
        + watch_line("ADDED", big)
        + watch_line("BOOKMARK", {"kind": "ConfigMap", "metadata": {"resourceVersion": "4"}})
        + watch_line("DELETED", _cm("a", 5))
    )

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        # Odd cut points: inside a line, right before and after a newline, and one byte at a time.
        pos = 0
        for size in (7, 1, 1, 33, 60, 1, 70_000, 150_000):
            await resp.write(stream[pos : pos + size])
            pos += size
            await asyncio.sleep(0.001)
        await resp.write(stream[pos:])
        return resp

    server.handler = handler
    async with ApiClient(server.url) as client:
        events = [
            (t, o["metadata"].get("name"), o["metadata"]["resourceVersion"])
            async for t, o in client.watch("v1", "configmaps", namespace="default", resource_version="0")
        ]
    assert events == [
        ("ADDED", "a", "1"),
        ("MODIFIED", "a", "2"),
        ("ADDED", "big", "3"),
        ("BOOKMARK", None, "4"),
        ("DELETED", "a", "5"),
    ]
    assert server.requests[0].query == {
        "watch": "true",
        "resourceVersion": "0",
        "allowWatchBookmarks": "true",
    }


async def test_watch_error_event_raises_api_error(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(watch_line("ADDED", _cm("a", 11)))
        await resp.write(watch_line("ERROR", status(410, "Expired", "too old resource version: 5 (10)")))
        return resp

    server.handler = handler
    seen = []
    async with ApiClient(server.url) as client:
        with pytest.raises(ApiError) as info:
            async for event_type, _obj in client.watch(
                "v1", "configmaps", resource_version="5", timeout_seconds=30
            ):
                seen.append(event_type)
    assert seen == ["ADDED"]
    assert info.value.is_expired() and info.value.reason == "Expired"
    assert info.value.message == "too old resource version: 5 (10)"
    assert server.requests[0].query["timeoutSeconds"] == "30"


async def test_watch_rejected_at_open_raises(server: FakeServer) -> None:
    async def handler(request: web.Request) -> web.Response:
        return json_response(status(400, "BadRequest", "sendInitialEvents is forbidden"), 400)

    server.handler = handler
    async with ApiClient(server.url) as client:
        stream = client.watch(
            "v1", "configmaps", send_initial_events=True, resource_version_match="NotOlderThan"
        )
        with pytest.raises(ApiError) as info:
            await stream.open()
    assert info.value.status == 400
    q = server.requests[0].query
    assert (q["sendInitialEvents"], q["resourceVersionMatch"]) == ("true", "NotOlderThan")


async def test_watch_can_be_closed_early(server: FakeServer) -> None:
    release = asyncio.Event()

    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        await resp.write(watch_line("ADDED", _cm("a", 1)))
        await release.wait()
        return resp

    server.handler = handler
    async with ApiClient(server.url) as client:
        async with client.watch("v1", "configmaps") as stream:
            async for event_type, _ in stream:
                assert event_type == "ADDED"
                break
        # The connection was dropped, not returned to the pool half-read; the client still works.
        release.set()
        server.handler = lambda request: _ok()
        assert await client.raw_request("GET", "/version") == {"ok": True}


async def _ok() -> web.Response:
    return json_response({"ok": True})


# ---- rate limiting ----


async def test_token_bucket_allows_burst_then_paces_at_qps() -> None:
    now = [0.0]
    slept: list[float] = []

    async def fake_sleep(seconds: float) -> None:
        slept.append(round(seconds, 6))

    bucket = TokenBucket(qps=10.0, burst=2, clock=lambda: now[0], sleep=fake_sleep)
    for _ in range(4):
        await bucket.wait()
    # Two immediate (burst), then reservations 0.1 s and 0.2 s out.
    assert slept == [0.1, 0.2]
    now[0] = 10.0  # a long pause refills to burst, not beyond
    slept.clear()
    for _ in range(3):
        await bucket.wait()
    assert slept == [0.1]


async def test_client_rate_limits_when_qps_is_set(server: FakeServer) -> None:
    server.handler = lambda request: _ok()
    cfg = ClientConfig(server=server.url, qps=50.0, burst=1)
    loop = asyncio.get_running_loop()
    async with ApiClient(cfg) as client:
        start = loop.time()
        await asyncio.gather(*(client.raw_request("GET", "/x") for _ in range(6)))
        elapsed = loop.time() - start
    assert elapsed >= 5 / 50 - 0.01  # burst 1, then one request every 20 ms


# ---- transport behaviour: chunked and close-delimited answers, keep-alive, timeouts, cut connections ----


async def _raw_server(answer: Any) -> tuple[asyncio.AbstractServer, str, list[bytes]]:
    """A bare TCP server: ``answer(request_bytes, writer)`` writes whatever bytes the test wants."""
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


async def test_client_reads_chunked_and_close_delimited_answers() -> None:
    answers = iter(
        [
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b'Transfer-Encoding: chunked\r\n\r\n4\r\n{"a"\r\n3;ext=1\r\n:1}\r\n0\r\nX-Trailer: y\r\n\r\n',
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 7\r\n\r\n{"b":2}',
            b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n{"c":3}',
            b"HTTP/1.1 201 Created\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok",
        ]
    )

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        data = next(answers)
        writer.write(data)
        await writer.drain()
        return b"Connection: close" not in data

    srv, url, seen = await _raw_server(answer)
    try:
        async with ApiClient(url) as client:
            assert await client.get("v1", "pods", "a", namespace="ns") == {"a": 1}
            assert await client.get("v1", "pods", "b", namespace="ns") == {"b": 2}
            assert await client.get("v1", "pods", "c", namespace="ns") == {"c": 3}
            # The server closed after the third answer: the fourth goes out on a new connection.
            assert await client.create("v1", "pods", {"metadata": {"name": "d"}}, namespace="ns") == "ok"
    finally:
        srv.close()
        await srv.wait_closed()
    first = seen[0].decode()
    assert first.startswith("GET /api/v1/namespaces/ns/pods/a HTTP/1.1\r\n")
    assert f"User-Agent: {USER_AGENT}\r\n" in first and "Accept: application/json\r\n" in first
    assert seen[3].endswith(b'\r\n\r\n{"metadata":{"name":"d"}}')
    assert b"Content-Type: application/json\r\n" in seen[3] and b"Content-Length: 25\r\n" in seen[3]


async def test_client_keeps_connections_alive_and_encodes_queries(server: FakeServer) -> None:
    peers: set[Any] = set()

    async def handler(request: web.Request) -> web.Response:
        assert request.transport is not None
        peers.add(request.transport.get_extra_info("peername"))
        return json_response({"kind": "PodList", "items": [], "metadata": {}})

    server.handler = handler
    async with ApiClient(server.url, max_connections=2) as client:
        await asyncio.gather(
            *(client.list("v1", "pods", label_selector="app in (a b),x!=y+z") for _ in range(20))
        )
    assert len(peers) <= 2  # 20 requests over at most two kept-alive connections
    assert {r.query["labelSelector"] for r in server.requests} == {"app in (a b),x!=y+z"}


async def test_client_times_out_and_recovers() -> None:
    calls = itertools.count()

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        if next(calls) == 0:
            await asyncio.sleep(5)  # never answers in time
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}")
        await writer.drain()
        return True

    srv, url, _ = await _raw_server(answer)
    try:
        async with ApiClient(url, timeout=0.2) as client:
            with pytest.raises(TimeoutError):
                await client.get("v1", "pods", "slow", namespace="ns")
            assert await client.get("v1", "pods", "fast", namespace="ns") == {}
    finally:
        srv.close()


async def test_client_reports_a_connection_closed_mid_answer() -> None:
    import aiohttp

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"partial')
        await writer.drain()
        return False  # close

    srv, url, _ = await _raw_server(answer)
    try:
        async with ApiClient(url) as client:
            with pytest.raises(aiohttp.ClientError):  # the answer was cut short: a transport error, no JSON
                await client.get("v1", "pods", "p", namespace="ns")
    finally:
        srv.close()


async def test_waiting_for_a_connection_slot_counts_toward_the_timeout() -> None:
    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        await asyncio.sleep(0.3)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: application/json\r\n\r\n{}")
        await writer.drain()
        return True

    srv, url, _ = await _raw_server(answer)
    try:
        async with ApiClient(url, timeout=0.45, max_connections=1) as client:
            results = await asyncio.gather(
                *(client.get("v1", "pods", f"p{i}", namespace="ns") for i in range(3)), return_exceptions=True
            )
            # The first is answered at 0.3 s; the second would be at 0.6 s, past its deadline while it waited.
            assert results[0] == {}
            assert all(isinstance(r, TimeoutError) for r in results[1:])
            assert await client.get("v1", "pods", "again", namespace="ns") == {}  # the slot was given back
    finally:
        srv.close()


async def test_client_reads_a_large_chunked_answer_sent_in_pieces() -> None:
    items = [{"metadata": {"name": f"p{i}"}, "pad": "x" * (i % 50)} for i in range(3000)]
    payload = orjson.dumps({"kind": "PodList", "items": items, "metadata": {}})
    chunks = [payload[i : i + 997] for i in range(0, len(payload), 997)]
    wire = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"

    async def answer(request: bytes, writer: asyncio.StreamWriter) -> bool:
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
        )
        for i in range(0, len(wire), 4093):  # boundaries that fall anywhere in the chunk framing
            writer.write(wire[i : i + 4093])
            await writer.drain()
        return True

    srv, url, _ = await _raw_server(answer)
    try:
        async with ApiClient(url) as client:
            for _ in range(2):  # and the connection is reusable afterwards
                result = await client.list("v1", "pods")
                assert result["items"] == items
    finally:
        srv.close()
