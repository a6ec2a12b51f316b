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
