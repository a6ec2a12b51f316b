"""A property-based fuzzer of the HTTP API: hypothesis builds request bodies from Kubernetes' published schemas
(the same definitions the server decodes with), then breaks them (a field replaced by arbitrary JSON, a wrong
media type, malformed query parameters), and sends them to a real ``ApiServer`` on loopback. Whatever arrives, the
answer is never a 5xx, and an error is always a ``Status`` body. The budget is bounded (``MAX_EXAMPLES``)."""

from __future__ import annotations

import asyncio
import collections
import json
import os
from collections.abc import Iterator
from typing import Any

import aiohttp
import orjson
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.apiserver import ApiServer, start_server
from kubesched.cluster.schema import definitions
from kubesched.cluster.schema.published import ref_name

# KUBESCHED_FUZZ_EXAMPLES raises the budget for a longer hunt outside the suite.
MAX_EXAMPLES = int(os.environ.get("KUBESCHED_FUZZ_EXAMPLES", "300"))
NS = "fz"

# (path prefix, kind's definition, apiVersion, kind)
KINDS = [
    (f"/api/v1/namespaces/{NS}/pods", "io.k8s.api.core.v1.Pod", "v1", "Pod"),
    (f"/api/v1/namespaces/{NS}/configmaps", "io.k8s.api.core.v1.ConfigMap", "v1", "ConfigMap"),
    (f"/api/v1/namespaces/{NS}/secrets", "io.k8s.api.core.v1.Secret", "v1", "Secret"),
    (f"/api/v1/namespaces/{NS}/services", "io.k8s.api.core.v1.Service", "v1", "Service"),
    (f"/api/v1/namespaces/{NS}/events", "io.k8s.api.core.v1.Event", "v1", "Event"),
    (f"/api/v1/namespaces/{NS}/serviceaccounts", "io.k8s.api.core.v1.ServiceAccount", "v1", "ServiceAccount"),
    ("/api/v1/nodes", "io.k8s.api.core.v1.Node", "v1", "Node"),
    ("/api/v1/namespaces", "io.k8s.api.core.v1.Namespace", "v1", "Namespace"),
    (f"/apis/apps/v1/namespaces/{NS}/deployments", "io.k8s.api.apps.v1.Deployment", "apps/v1", "Deployment"),
    (f"/apis/apps/v1/namespaces/{NS}/replicasets", "io.k8s.api.apps.v1.ReplicaSet", "apps/v1", "ReplicaSet"),
    (
        f"/apis/coordination.k8s.io/v1/namespaces/{NS}/leases",
        "io.k8s.api.coordination.v1.Lease",
        "coordination.k8s.io/v1",
        "Lease",
    ),
    (
        f"/apis/events.k8s.io/v1/namespaces/{NS}/events",
        "io.k8s.api.events.v1.Event",
        "events.k8s.io/v1",
        "Event",
    ),
    (
        f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
        "io.k8s.api.policy.v1.PodDisruptionBudget",
        "policy/v1",
        "PodDisruptionBudget",
    ),
    (
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        "io.k8s.api.scheduling.v1.PriorityClass",
        "scheduling.k8s.io/v1",
        "PriorityClass",
    ),
    (
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition",
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
    ),
]
NAMES = st.sampled_from(["a", "b", "fz", "x-1", "Bad_Name", ""])

junk = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def _strategy(node: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
    """Values of the right JSON type for a schema node (mostly plausible, sometimes odd)."""
    if "$ref" in node:
        name = ref_name(node["$ref"])
        if name.endswith("Quantity"):
            return st.sampled_from(["100m", "1Gi", "2", "-1", "1.5x", ""]) | st.integers(-5, 5)
        if name.endswith("IntOrString"):
            return st.sampled_from(["25%", "http", "x%"]) | st.integers(-5, 70000)
        return _strategy(definitions()[name], depth)
    kinds = node.get("type")
    kind = next((k for k in kinds if k != "null"), None) if isinstance(kinds, list) else kinds
    if kind == "string" or "oneOf" in node:
        return st.sampled_from(["", "a", "In", "Exists", "TCP", "Always", "NoSchedule", "v1"]) | st.text(
            max_size=8
        )
    if kind == "integer":
        return st.integers(min_value=-(2**33), max_value=2**33)
    if kind == "number":
        return st.floats(allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if depth > 5:
        return st.none()
    if kind == "array":
        return st.lists(_strategy(node.get("items") or {}, depth + 1), max_size=2)
    if kind == "object" and "properties" in node:
        props = {
            k: _strategy(v, depth + 1)
            for k, v in node["properties"].items()
            if k not in ("apiVersion", "kind")
        }
        return st.fixed_dictionaries({}, optional=props)
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return st.dictionaries(
            st.text(max_size=6), _strategy(node["additionalProperties"], depth + 1), max_size=2
        )
    return junk


def _break(value: Any, draw: Any) -> Any:
    """``value`` with one field somewhere replaced by arbitrary JSON."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        return {**value, key: _break(value[key], draw)}
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _break(value[i], draw), *value[i + 1 :]]
    return draw(junk)


@st.composite
def requests(draw: Any) -> tuple[str, str, dict[str, str], bytes | None, str]:
    path, definition, api_version, kind = draw(st.sampled_from(KINDS))
    drawn = draw(_strategy(definitions()[definition], 0))  # never mutated: hypothesis may replay it
    metadata = drawn.get("metadata")
    metadata = {**metadata, "name": draw(NAMES)} if isinstance(metadata, dict) else {"name": draw(NAMES)}
    body: Any = {**drawn, "apiVersion": api_version, "kind": kind, "metadata": metadata}
    if draw(st.integers(0, 2)) == 0:
        body = _break(body, draw)
    method = draw(st.sampled_from(["POST", "POST", "PUT", "PATCH", "DELETE", "GET"]))
    name = draw(NAMES) or "a"
    target = path if method in ("POST", "GET") else f"{path}/{name}"
    if method == "POST" and kind == "Pod" and draw(st.booleans()):
        target, body = (
            f"{path}/{name}/binding",
            draw(_strategy(definitions()["io.k8s.api.core.v1.Binding"], 0)),
        )
    params = draw(
        st.dictionaries(
            st.sampled_from(
                ["limit", "timeoutSeconds", "fieldValidation", "dryRun", "fieldManager", "gracePeriodSeconds",
                 "propagationPolicy", "labelSelector", "fieldSelector", "continue", "force"]
            ),
            st.sampled_from(["abc", "-1", "0", "5", "All", "Strict", "Warn", "Ignore", "Bogus", "m" * 129, "a=b",
                             "a in (b", "metadata.name=a", "true", "99999999999999999999", ""]),
            max_size=3,
        )
    )  # fmt: skip
    # A resourceVersion ahead of the store waits 3 s for it before its 504 (as upstream): rare, to keep the budget.
    if draw(st.integers(0, 20)) == 0:
        params["resourceVersion"] = draw(st.sampled_from(["abc", "0", "1", "-5", "99999999999999999999"]))
    ctype = draw(
        st.sampled_from(
            ["application/json", "application/json", "application/yaml", "application/merge-patch+json",
             "application/strategic-merge-patch+json", "application/json-patch+json",
             "application/apply-patch+yaml", "text/plain", ""]
        )
    )  # fmt: skip
    if method == "PATCH" and ctype == "application/apply-patch+yaml":
        params.setdefault("fieldManager", "fuzz")
    encoding = draw(st.sampled_from(["json", "yaml", "none", "garbage"]))
    if method == "GET" or encoding == "none":
        data = None
    elif encoding == "yaml":
        data = yaml.safe_dump(body).encode()
    elif encoding == "garbage":
        data = draw(st.binary(max_size=40))
    else:
        data = json.dumps(body).encode()  # the standard library writes integers beyond 64 bits
    return method, target, params, data, ctype


class Loop:
    """One event loop serving a bare ApiServer, driven example by example from the (synchronous) property."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.api = ClusterApi()
        self.api.bootstrap()
        self.runner = self.loop.run_until_complete(
            start_server(ApiServer(self.api, require_auth=False), "127.0.0.1", 0, None)
        )
        host, port = self.runner.addresses[0][:2]
        self.session = self.loop.run_until_complete(self._session(f"http://{host}:{port}"))
        self.codes: collections.Counter[int] = collections.Counter()

    @staticmethod
    async def _session(url: str) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(url)

    def send(
        self, method: str, path: str, params: dict[str, str], data: bytes | None, ctype: str
    ) -> tuple[int, bytes]:
        async def go() -> tuple[int, bytes]:
            headers = {"Content-Type": ctype} if ctype else {}
            async with self.session.request(
                method,
                path,
                params=params,
                data=data,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=30),
            ) as resp:
                return resp.status, await resp.read()

        return self.loop.run_until_complete(go())

    def close(self) -> None:
        self.loop.run_until_complete(self.session.close())
        self.loop.run_until_complete(self.runner.cleanup())
        self.loop.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Loop]:
    loop = Loop()
    seed = [
        ("/api/v1/namespaces", {"metadata": {"name": NS}}),
        (f"/api/v1/namespaces/{NS}/pods", {"metadata": {"name": "a"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}),
        (f"/api/v1/namespaces/{NS}/configmaps", {"metadata": {"name": "a"}, "data": {"k": "v"}}),
    ]  # fmt: skip
    for path, body in seed:
        status, out = loop.send("POST", path, {}, orjson.dumps(body), "application/json")
        assert status == 201, out
    yield loop
    print("fuzz status codes:", dict(sorted(loop.codes.items())))
    loop.close()


@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
    ],
)
@given(request=requests())
def test_no_request_gets_a_5xx(
    served: Loop, request: tuple[str, str, dict[str, str], bytes | None, str]
) -> None:
    method, path, params, data, ctype = request
    if "watch" in params:
        return
    status, body = served.send(method, path, params, data, ctype)
    served.codes[status] += 1
    if status >= 400:
        status_body = orjson.loads(body)
        assert status_body["kind"] == "Status" and status_body["code"] == status
        if status == 504:  # upstream's answer to a resourceVersion the store has not reached
            assert status_body["message"].startswith("Too large resource version"), status_body
            return
    assert status < 500, (method, path, params, data, ctype, body[:500])


def test_server_still_answers_after_fuzzing(served: Loop) -> None:
    status, body = served.send("GET", "/healthz", {}, None, "")
    assert status == 200 and body == b"ok"
    status, body = served.send("GET", f"/api/v1/namespaces/{NS}/configmaps", {}, None, "")
    assert status == 200
