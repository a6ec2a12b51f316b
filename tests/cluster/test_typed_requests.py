"""Typed, bounded requests over the real HTTP API: each malformed input of issue 13 gets kube-apiserver's 4xx
``Status`` (never a 500 or a 2xx), bodies are bounded, and ``fieldValidation`` behaves as upstream's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest

from kubesched.cluster.api import ClusterApi
from kubesched.cluster.apiserver import ApiServer, start_server

Obj = dict[str, Any]
NS = "typed"
PODS = f"/api/v1/namespaces/{NS}/pods"
CMS = f"/api/v1/namespaces/{NS}/configmaps"
DEPLOYS = f"/apis/apps/v1/namespaces/{NS}/deployments"


class Served:
    """A ClusterApi served over HTTP on loopback, without the kubelets and controllers of a full cluster."""

    def __init__(self, api: ClusterApi, url: str) -> None:
        self.api = api
        self.url = url


@pytest.fixture
async def cluster() -> AsyncIterator[Served]:
    api = ClusterApi()
    api.bootstrap()
    runner = await start_server(ApiServer(api, require_auth=False), "127.0.0.1", 0, None)
    host, port = runner.addresses[0][:2]
    yield Served(api, f"http://{host}:{port}")
    await runner.cleanup()


class Http:
    def __init__(self, session: aiohttp.ClientSession) -> None:
        self.session = session

    async def send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        raw: bytes | None = None,
        ctype: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> tuple[int, Obj, aiohttp.typedefs.LooseHeaders]:
        data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
        async with self.session.request(
            method, path, data=data, params=params, headers={"Content-Type": ctype}
        ) as resp:
            text = await resp.read()
            out = orjson.loads(text) if text else {}
            return resp.status, out, resp.headers


@pytest.fixture
async def http(cluster: Served) -> AsyncIterator[Http]:
    async with aiohttp.ClientSession(cluster.url) as session:
        client = Http(session)
        status, out, _ = await client.send("POST", "/api/v1/namespaces", {"metadata": {"name": NS}})
        assert status == 201, out
        yield client


def pod(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


def assert_status(out: Obj, code: int, reason: str, *fragments: str) -> None:
    assert out.get("kind") == "Status" and out.get("code") == code and out.get("reason") == reason, out
    for fragment in fragments:
        assert fragment in out["message"], out["message"]


# -- wrongly typed fields: 400 with Go's decoding message and the field path ------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (
            {**pod("p"), "metadata": {"name": "p", "ownerReferences": "x"}},
            "Go struct field ObjectMeta.metadata.ownerReferences of type []v1.OwnerReference",
        ),
        ({**pod("p"), "metadata": "x"}, "cannot unmarshal string into Go struct field Pod.metadata of type v1.ObjectMeta"),
        (pod("p", tolerations="x"), "Go struct field PodSpec.spec.tolerations of type []v1.Toleration"),
        (pod("p", priority=object()), "cannot unmarshal number 1180591620717411303424 into Go struct field PodSpec.spec.priority of type int32"),
        ({**pod("p"), "metadata": {"name": "p", "labels": [1]}}, "ObjectMeta.metadata.labels of type map[string]string"),
        (pod("p", containers=[{"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]), "ContainerPort.spec.containers.ports.containerPort of type int32"),
    ],
)  # fmt: skip
async def test_wrong_types_in_a_pod_are_400(http: Http, body: Obj, fragment: str) -> None:
    # orjson writes no integer beyond 64 bits: the body is JSON text written by hand for that case.
    raw = orjson.dumps(body, default=lambda _: None).replace(b"null", str(2**70).encode())
    status, out, _ = await http.send("POST", PODS, raw=raw)
    assert status == 400
    assert_status(out, 400, "BadRequest", 'Pod in version "v1" cannot be handled as a Pod: json: ', fragment)
    status, _, _ = await http.send("GET", f"{PODS}/p")
    assert status == 404  # nothing stored


async def test_configmap_data_list_is_400_and_lists_keep_working(http: Http) -> None:
    status, out, _ = await http.send("POST", CMS, {"metadata": {"name": "c"}, "data": [1]})
    assert_status(out, 400, "BadRequest", "ConfigMap.data of type map[string]string")
    status, out, _ = await http.send("GET", CMS)
    assert status == 200 and out["items"] == []


async def test_binding_with_a_string_target_is_400(http: Http) -> None:
    status, _, _ = await http.send("POST", PODS, pod("b"))
    assert status == 201
    status, out, _ = await http.send(
        "POST",
        f"{PODS}/b/binding",
        {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "b"}, "target": "x"},
    )
    assert_status(out, 400, "BadRequest", "Go struct field Binding.target of type v1.ObjectReference")


async def test_strategic_merge_patch_with_a_number_for_metadata_is_400(http: Http) -> None:
    assert (await http.send("POST", PODS, pod("s")))[0] == 201
    status, out, _ = await http.send(
        "PATCH", f"{PODS}/s", {"metadata": 5}, ctype="application/strategic-merge-patch+json"
    )
    assert 400 <= status < 500, out
    assert out["kind"] == "Status"
    for ctype in ("application/merge-patch+json", "application/apply-patch+yaml"):
        status, out, _ = await http.send(
            "PATCH", f"{PODS}/s", {"apiVersion": "v1", "kind": "Pod", "metadata": 5}, ctype=ctype,
            params={"fieldManager": "t"},
        )  # fmt: skip
        assert status == 400, (ctype, out)


async def test_a_json_patch_cannot_store_a_wrong_type(http: Http) -> None:
    assert (await http.send("POST", PODS, pod("j")))[0] == 201
    _status, out, _ = await http.send(
        "PATCH",
        f"{PODS}/j",
        [{"op": "add", "path": "/metadata/ownerReferences", "value": "x"}],
        ctype="application/json-patch+json",
    )
    assert_status(out, 400, "BadRequest", "ObjectMeta.metadata.ownerReferences")


# -- validation: 422 with the field path -------------------------------------------------------------------------


async def test_node_affinity_operator_bogus_is_422(http: Http) -> None:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "Bogus", "values": ["a"]}]}
                ]
            }
        }
    }
    _status, out, _ = await http.send("POST", PODS, pod("a", affinity=affinity))
    assert_status(
        out,
        422,
        "Invalid",
        "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        '.matchExpressions[0].operator: Invalid value: "Bogus": not a valid selector operator',
    )


async def test_host_port_out_of_range_is_422(http: Http) -> None:
    body = pod(
        "h", containers=[{"name": "c", "image": "i", "ports": [{"containerPort": 80, "hostPort": 99999}]}]
    )
    _status, out, _ = await http.send("POST", PODS, body)
    assert_status(
        out,
        422,
        "Invalid",
        "spec.containers[0].ports[0].hostPort: Invalid value: 99999: must be between 1 and 65535, inclusive",
    )
    assert out["details"]["causes"][0]["field"] == "spec.containers[0].ports[0].hostPort"


async def test_negative_replicas_is_422(http: Http) -> None:
    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d"},
        "spec": {
            "replicas": -3,
            "selector": {"matchLabels": {"app": "d"}},
            "template": {
                "metadata": {"labels": {"app": "d"}},
                "spec": {"containers": [{"name": "c", "image": "i"}]},
            },
        },
    }
    _status, out, _ = await http.send("POST", DEPLOYS, body)
    assert_status(out, 422, "Invalid", "spec.replicas: Invalid value: -3: must be greater than or equal to 0")


async def test_missing_required_fields_are_422(http: Http) -> None:
    body = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {}}
    _status, out, _ = await http.send("POST", DEPLOYS, body)
    assert_status(out, 422, "Invalid", "spec.selector: Required value", "spec.template: Required value")


async def test_crd_schema_with_a_bogus_type_is_422(http: Http) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "bogus"}}}
                    },
                }
            ],
        },
    }
    _status, out, _ = await http.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert_status(
        out,
        422,
        "Invalid",
        'spec.versions[0].schema.openAPIV3Schema.properties[spec].type: Unsupported value: "bogus"',
    )


async def test_custom_object_without_kind_is_400(http: Http) -> None:
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "things.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "things", "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
    status, out, _ = await http.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201, out
    things = f"/apis/example.com/v1/namespaces/{NS}/things"
    status, out, _ = await http.send(
        "POST", things, {"apiVersion": "example.com/v1", "metadata": {"name": "t"}}
    )
    assert_status(out, 400, "BadRequest", "Object 'Kind' is missing in")
    status, out, _ = await http.send(
        "POST",
        things,
        {"apiVersion": "example.com/v1", "kind": "Thing", "metadata": {"name": "t", "labels": 5}},
    )
    assert_status(out, 400, "BadRequest", "ObjectMeta.metadata.labels of type map[string]string")
    # A custom object over etcd's limit (but under the body limit) is refused, not stored.
    big = {
        "apiVersion": "example.com/v1",
        "kind": "Thing",
        "metadata": {"name": "big"},
        "data": "x" * 2_000_000,
    }
    status, out, _ = await http.send("POST", things, big)
    assert_status(out, 413, "RequestEntityTooLarge", "etcdserver: request is too large")
    assert (await http.send("GET", f"{things}/big"))[0] == 404


# -- query parameters, content types --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "params", "code", "fragment"),
    [
        ("GET", CMS, {"limit": "abc"}, 400, 'strconv.ParseInt: parsing "abc": invalid syntax'),
        ("GET", CMS, {"watch": "yes"}, 400, 'strconv.ParseBool: parsing "yes": invalid syntax'),
        ("PATCH", f"{CMS}/x", {"force": "maybe"}, 400, 'strconv.ParseBool: parsing "maybe": invalid syntax'),
        ("GET", CMS, {"watch": "true", "timeoutSeconds": "abc"}, 400, 'parsing "abc"'),
        ("DELETE", f"{CMS}/x", {"gracePeriodSeconds": "abc"}, 400, 'parsing "abc"'),
        ("DELETE", f"{CMS}/x", {"propagationPolicy": "Bogus"}, 422, 'propagationPolicy: Unsupported value: "Bogus"'),
        ("POST", CMS, {"dryRun": "Bogus"}, 422, 'dryRun: Unsupported value: "Bogus": supported values: "All"'),
        ("POST", CMS, {"fieldValidation": "Bogus"}, 422, 'fieldValidation: Unsupported value: "Bogus"'),
        ("POST", CMS, {"fieldManager": "m" * 129}, 422, "fieldManager: Too long: may not be more than 128 bytes"),
    ],
)  # fmt: skip
async def test_malformed_query_parameters(
    http: Http, method: str, path: str, params: dict[str, str], code: int, fragment: str
) -> None:
    body = {"metadata": {"name": "x"}} if method == "POST" else None
    status, out, _ = await http.send(method, path, body, params=params)
    assert status == code, out
    assert_status(out, code, "BadRequest" if code == 400 else "Invalid", fragment)


async def test_text_plain_body_is_415(http: Http) -> None:
    status, out, _ = await http.send("POST", CMS, raw=b'{"metadata":{"name":"t"}}', ctype="text/plain")
    assert_status(out, 415, "UnsupportedMediaType", "application/json")
    status, out, _ = await http.send("PATCH", f"{CMS}/t", raw=b"{}", ctype="text/plain")
    assert status == 415, out


# -- field validation -------------------------------------------------------------------------------------------


async def test_field_validation_strict_warn_ignore(http: Http) -> None:
    body = {"metadata": {"name": "s"}, "data": {"a": "1"}, "bogus": 1}
    status, out, _ = await http.send("POST", CMS, body, params={"fieldValidation": "Strict"})
    assert_status(out, 400, "BadRequest", 'strict decoding error: unknown field "bogus"')
    status, out, headers = await http.send("POST", CMS, body)  # the default is Warn
    assert status == 201 and "bogus" not in out
    assert headers.getall("Warning") == ['299 - "unknown field \\"bogus\\""']
    body["metadata"]["name"] = "i"
    status, out, headers = await http.send("POST", CMS, body, params={"fieldValidation": "Ignore"})
    assert status == 201 and "bogus" not in out and "Warning" not in headers
    nested = pod("n", containers=[{"name": "c", "image": "i", "imagePullPolice": "Always"}])
    status, out, _ = await http.send("POST", PODS, nested, params={"fieldValidation": "Strict"})
    assert_status(out, 400, "BadRequest", 'unknown field "spec.containers[0].imagePullPolice"')


# -- sizes, depth, aliases --------------------------------------------------------------------------------------


async def test_bodies_over_3_mib_are_413(http: Http) -> None:
    big = orjson.dumps({"metadata": {"name": "big"}, "data": {"a": "x" * (3 * 1024 * 1024)}})
    _status, out, _ = await http.send("POST", CMS, raw=big)
    assert_status(out, 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728")

    async def chunks() -> AsyncIterator[bytes]:  # no Content-Length: refused once the stream passes the limit
        for i in range(0, len(big), 256 * 1024):
            yield big[i : i + 256 * 1024]

    async with http.session.post(CMS, data=chunks(), headers={"Content-Type": "application/json"}) as resp:
        assert resp.status == 413
    async with http.session.get("/healthz") as resp:
        assert resp.status == 200 and await resp.text() == "ok"


async def test_yaml_alias_bomb_and_deep_nesting_are_400(http: Http) -> None:
    bomb = b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\nx0: &a0 [a, a, a, a, a, a, a, a, a]\n"
    for i in range(1, 9):
        bomb += f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]\n".encode()
    assert len(bomb) < 1000
    status, out, _ = await http.send("POST", CMS, raw=bomb, ctype="application/yaml")
    assert_status(out, 400, "BadRequest", "excessive aliasing")
    deep = b"metadata: {name: deep}\ndata: " + b"[" * 5000 + b"]" * 5000
    status, out, _ = await http.send("POST", CMS, raw=deep, ctype="application/yaml")
    assert status == 400 and out["reason"] == "BadRequest", out
    deep_json = b'{"metadata":{"name":"deep"},"x":' + b"[" * 1000 + b"]" * 1000 + b"}"
    status, out, _ = await http.send("POST", CMS, raw=deep_json)
    assert status == 400 and out["reason"] == "BadRequest", out
    cycle = b"metadata: {name: cyc}\ndata: &d {a: *d}\n"
    status, out, _ = await http.send("POST", CMS, raw=cycle, ctype="application/yaml")
    assert status == 400, out


async def test_yaml_flow_style_is_yaml(http: Http) -> None:
    doc = b"{apiVersion: v1, kind: ConfigMap, metadata: {name: flow}, data: {a: '1'}}"
    status, out, _ = await http.send("POST", CMS, raw=doc, ctype="application/yaml")
    assert status == 201 and out["data"] == {"a": "1"}, out


async def test_large_yaml_is_decoded_and_stored(http: Http) -> None:
    # More values than the alias floor: a flat document is never mistaken for alias expansion.
    lines = "".join(f"  k{i}: {'v' * 30}\n" for i in range(15000))
    doc = f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-yaml\ndata:\n{lines}".encode()
    assert len(doc) > 64 * 1024  # parsed on a worker thread
    status, out, _ = await http.send("POST", CMS, raw=doc, ctype="application/yaml")
    assert status == 201, out
    assert len(out["data"]) == 15000


# -- the garbage collector survives whatever is stored ---------------------------------------------------------


async def test_garbage_collection_survives_malformed_owner_references(cluster: Served, http: Http) -> None:
    # Stored by a trusted in-process writer, bypassing the checks a client's body gets.
    api = cluster.api
    bad = {"metadata": {"name": "odd", "ownerReferences": ["x", 5, {"uid": 7}]}, "data": {}}
    api.create(api.rtype("", "v1", "configmaps"), bad, NS, trusted=True)
    status, _, _ = await http.send("POST", DEPLOYS.replace("deployments", "replicasets"), {
        "apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": "rs"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"a": "b"}},
                 "template": {"metadata": {"labels": {"a": "b"}},
                              "spec": {"containers": [{"name": "c", "image": "i"}]}}},
    })  # fmt: skip
    assert status == 201
    status, out, _ = await http.send("DELETE", f"/apis/apps/v1/namespaces/{NS}/replicasets/rs")
    assert status == 200, out
    status, out, _ = await http.send("DELETE", f"/api/v1/namespaces/{NS}")
    assert status == 200, out


# -- bodies answered, not stored: reviews and TokenRequest (served with authentication, over TLS) -----------------


async def test_reviews_and_token_requests_are_typed(tmp_path: Path) -> None:
    from kubesched.cluster import certs
    from kubesched.cluster.local import ClusterOptions, LocalCluster

    cluster = LocalCluster(ClusterOptions(port=0, data_dir=tmp_path, nodes=1, heartbeat_interval=3600.0))
    await cluster.start()
    try:
        pki = certs.generate_pki(tmp_path / "pki", [])  # the files the cluster wrote: the admin's certificate
        connector = aiohttp.TCPConnector(ssl=pki.client_ssl_context())
        async with aiohttp.ClientSession(cluster.url, connector=connector) as session:
            http = Http(session)
            for path in (
                "/apis/authentication.k8s.io/v1/tokenreviews",
                "/apis/authorization.k8s.io/v1/subjectaccessreviews",
                "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
                "/apis/authorization.k8s.io/v1/namespaces/default/localsubjectaccessreviews",
            ):
                _status, out, _ = await http.send("POST", path, {"spec": 5})
                assert_status(out, 400, "BadRequest", "cannot unmarshal number into Go struct field")
                _status, out, _ = await http.send("POST", path, {"metadata": 5})
                assert_status(out, 400, "BadRequest", "of type v1.ObjectMeta")
            token = "/api/v1/namespaces/default/serviceaccounts/default/token"
            _status, out, _ = await http.send("POST", token, {"spec": {"expirationSeconds": "x"}})
            assert_status(out, 400, "BadRequest", "TokenRequestSpec.spec.expirationSeconds of type int64")
    finally:
        await cluster.stop()


async def test_pod_log_options_are_typed(http: Http) -> None:
    assert (await http.send("POST", PODS, pod("l")))[0] == 201
    for key in ("tailLines", "limitBytes", "sinceSeconds"):
        _status, out, _ = await http.send("GET", f"{PODS}/l/log", params={key: "abc"})
        assert_status(out, 400, "BadRequest", 'strconv.ParseInt: parsing "abc": invalid syntax')


async def test_strict_refuses_repeated_fields(http: Http) -> None:
    raw = b'{"metadata": {"name": "d", "name": "e"}, "data": {"a": "1", "a": "2"}}'
    _status, out, _ = await http.send("POST", CMS, raw=raw, params={"fieldValidation": "Strict"})
    assert_status(
        out,
        400,
        "BadRequest",
        'strict decoding error: duplicate field "data.a", duplicate field "metadata.name"',
    )
    status, out, _ = await http.send("POST", CMS, raw=raw)  # Warn: the last value wins, as orjson reads it
    assert status == 201 and out["metadata"]["name"] == "e" and out["data"] == {"a": "2"}


@pytest.mark.parametrize(
    ("path", "body", "fragment"),
    [
        (f"/api/v1/namespaces/{NS}/services", {"metadata": {"name": "s"}, "spec": {"type": "Bogus", "ports": [{"port": 80}]}},
         'spec.type: Unsupported value: "Bogus"'),
        (f"/api/v1/namespaces/{NS}/services", {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 70000}]}},
         "spec.ports[0].port: Invalid value: 70000: must be between 1 and 65535, inclusive"),
        (f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets",
         {"metadata": {"name": "b"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}},
         "minAvailable and maxUnavailable cannot be both set"),
        (f"/apis/policy/v1/namespaces/{NS}/poddisruptionbudgets", {"metadata": {"name": "b"}, "spec": {"minAvailable": "x%"}},
         "spec.minAvailable: Invalid value"),
        ("/apis/scheduling.k8s.io/v1/priorityclasses", {"metadata": {"name": "pc"}, "value": 5, "preemptionPolicy": "Bogus"},
         'preemptionPolicy: Unsupported value: "Bogus"'),
    ],
)  # fmt: skip
async def test_kind_enums_and_ranges_are_422(http: Http, path: str, body: Obj, fragment: str) -> None:
    _status, out, _ = await http.send("POST", path, body)
    assert_status(out, 422, "Invalid", fragment)


async def test_custom_resources_follow_their_structural_schema(http: Http) -> None:
    spec_schema = {
        "type": "object",
        "required": ["image"],
        "properties": {
            "image": {"type": "string"},
            "replicas": {"type": "integer", "minimum": 0},
            "mode": {"type": "string", "enum": ["Fast", "Slow"]},
            "port": {"x-kubernetes-int-or-string": True},
            "tags": {"type": "array", "items": {"type": "string"}},
            "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "apps.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "apps", "singular": "app", "kind": "App", "listKind": "AppList"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": spec_schema}}},
                }
            ],
        },
    }
    status, out, _ = await http.send("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    assert status == 201, out
    apps = f"/apis/example.com/v1/namespaces/{NS}/apps"

    def app(**spec: Any) -> Obj:
        return {"apiVersion": "example.com/v1", "kind": "App", "metadata": {"name": "a"}, "spec": spec}

    for spec, fragment in [
        ({"image": "i", "replicas": "3"}, 'spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string"'),
        ({"image": "i", "replicas": -1}, "spec.replicas: Invalid value: -1: spec.replicas in body should be greater than or equal to 0"),
        ({"image": "i", "tags": [1]}, 'spec.tags[0]: Invalid value: "integer": spec.tags[0] in body must be of type string'),
        ({"image": "i", "port": True}, 'spec.port: Invalid value: "boolean"'),
        ({"replicas": 1}, "spec.image: Required value"),
    ]:  # fmt: skip
        _status, out, _ = await http.send("POST", apps, app(**spec))
        assert_status(out, 422, "Invalid", 'App.example.com "a" is invalid: ' + fragment)
    good = app(
        image="i", replicas=2, mode="Fast", port="http", tags=["x"], extra={"any": [1, {"thing": None}]}
    )
    status, out, _ = await http.send("POST", apps, good)
    assert status == 201, out
    status, out, _ = await http.send(
        "PATCH", f"{apps}/a", {"spec": {"replicas": "many"}}, ctype="application/merge-patch+json"
    )
    assert_status(out, 422, "Invalid", "spec.replicas in body must be of type integer")
