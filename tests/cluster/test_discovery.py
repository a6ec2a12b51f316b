"""Discovery and OpenAPI documents: shapes, caching, CRDs; and what kubectl 1.32 and the official Python client
make of them, against a stub server that serves only these documents (and Tables for `kubectl get`)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from kubesched.cluster import discovery, openapi, tables
from kubesched.cluster.discovery import AGGREGATED_CONTENT_TYPE, Discovery, version_info, wants_aggregated
from kubesched.cluster.resources import ResourceRegistry, ResourceType

KUBECTL = Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.32")
KUBECTL_ACCEPT = (
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
    "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
)

CRONTAB_SCHEMA = {
    "type": "object",
    "properties": {
        "spec": {
            "type": "object",
            "description": "What the cron tab runs.",
            "properties": {
                "cronSpec": {"type": "string", "description": "The schedule, in cron format."},
                "image": {"type": "string"},
                "replicas": {"type": "integer"},
            },
        },
        "status": {"type": "object", "properties": {"replicas": {"type": "integer"}}},
    },
}


def crontab_crd(versions: list[str] | None = None) -> dict[str, Any]:
    names = versions or ["v1"]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "crontabs.stable.example.com"},
        "spec": {
            "group": "stable.example.com",
            "scope": "Namespaced",
            "names": {"plural": "crontabs", "singular": "crontab", "kind": "CronTab", "shortNames": ["ct"]},
            "versions": [
                {
                    "name": v,
                    "served": True,
                    "storage": i == 0,
                    "schema": {"openAPIV3Schema": CRONTAB_SCHEMA},
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": [
                        {"name": "Spec", "type": "string", "jsonPath": ".spec.cronSpec"},
                        {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                    ],
                }
                for i, v in enumerate(names)
            ],
        },
    }


def crontab_type(version: str = "v1", crd: dict[str, Any] | None = None) -> ResourceType:
    return ResourceType(
        "stable.example.com",
        version,
        "crontabs",
        "CronTab",
        True,
        short_names=("ct",),
        subresources=("status",),
        crd=crd or crontab_crd(),
        builtin=False,
        allow_unconditional_update=False,
    )


# -- /version and negotiation ----------------------------------------------------------------------------------


def test_version_info() -> None:
    info = version_info()
    assert info["major"] == "1" and info["minor"] == "32"
    assert re.fullmatch(r"v1\.32\.0(\+[0-9A-Za-z.-]+)?", info["gitVersion"])
    assert set(info) >= {"gitCommit", "gitTreeState", "buildDate", "goVersion", "compiler", "platform"}
    assert all(isinstance(v, str) and v for v in info.values())


def test_wants_aggregated() -> None:
    assert wants_aggregated(KUBECTL_ACCEPT)
    assert not wants_aggregated("application/json")
    assert not wants_aggregated("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList")
    assert not wants_aggregated("")
    assert wants_aggregated("application/json; as=APIGroupDiscoveryList; v=v2; g=apidiscovery.k8s.io")


# -- legacy documents ------------------------------------------------------------------------------------------


def test_core_resource_list_has_subresources() -> None:
    body = discovery.api_resource_list(ResourceRegistry(), "", "v1")
    assert body is not None and body["kind"] == "APIResourceList" and body["groupVersion"] == "v1"
    by_name = {r["name"]: r for r in body["resources"]}
    assert by_name["pods"] == {
        "name": "pods",
        "singularName": "pod",
        "namespaced": True,
        "kind": "Pod",
        "verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
        "shortNames": ["po"],
        "categories": ["all"],
    }
    assert by_name["pods/binding"] == {
        "name": "pods/binding", "singularName": "", "namespaced": True, "kind": "Binding", "verbs": ["create"]
    }  # fmt: skip
    assert (
        by_name["pods/status"]["verbs"] == ["get", "patch", "update"]
        and by_name["pods/status"]["kind"] == "Pod"
    )
    assert by_name["namespaces/finalize"] == {
        "name": "namespaces/finalize", "singularName": "", "namespaced": False, "kind": "Namespace", "verbs": ["update"]
    }  # fmt: skip
    assert by_name["bindings"]["verbs"] == ["create"]


def test_scale_subresource_is_autoscaling_v1() -> None:
    body = discovery.api_resource_list(ResourceRegistry(), "apps", "v1")
    assert body is not None
    scale = next(r for r in body["resources"] if r["name"] == "deployments/scale")
    assert scale == {
        "name": "deployments/scale",
        "singularName": "",
        "namespaced": True,
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
        "verbs": ["get", "patch", "update"],
    }


def test_groups_and_versions() -> None:
    reg = ResourceRegistry()
    assert discovery.api_versions(reg) == {"kind": "APIVersions", "versions": ["v1"]}
    groups = discovery.api_group_list(reg)
    names = [g["name"] for g in groups["groups"]]
    assert "" not in names and {"apps", "coordination.k8s.io", "events.k8s.io", "resource.k8s.io"} <= set(
        names
    )
    lease = discovery.api_group(reg, "coordination.k8s.io")
    assert lease == {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": "coordination.k8s.io",
        "versions": [{"groupVersion": "coordination.k8s.io/v1", "version": "v1"}],
        "preferredVersion": {"groupVersion": "coordination.k8s.io/v1", "version": "v1"},
    }
    assert discovery.api_group(reg, "nope.example.com") is None
    assert discovery.api_resource_list(reg, "apps", "v2") is None


def test_crd_versions_are_ordered_and_preferred_by_kubernetes_priority() -> None:
    reg = ResourceRegistry()
    crd = crontab_crd(["v1beta1", "v1", "v1alpha1", "v2"])
    for v in ("v1beta1", "v1", "v1alpha1", "v2"):
        reg.add(crontab_type(v, crd))
    group = discovery.api_group(reg, "stable.example.com")
    assert group is not None
    assert [v["version"] for v in group["versions"]] == ["v2", "v1", "v1beta1", "v1alpha1"]
    assert group["preferredVersion"] == {"groupVersion": "stable.example.com/v2", "version": "v2"}


# -- aggregated ------------------------------------------------------------------------------------------------


def test_aggregated_shapes() -> None:
    reg = ResourceRegistry()
    reg.add(crontab_type())
    core = discovery.aggregated(reg, core=True)
    assert core["kind"] == "APIGroupDiscoveryList" and core["apiVersion"] == "apidiscovery.k8s.io/v2"
    assert [i["metadata"]["name"] for i in core["items"]] == [""]
    v1 = core["items"][0]["versions"][0]
    assert v1["version"] == "v1" and v1["freshness"] == "Current"
    pods = next(r for r in v1["resources"] if r["resource"] == "pods")
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert pods["scope"] == "Namespaced" and pods["singularResource"] == "pod"
    assert pods["subresources"] == [
        {
            "subresource": "status",
            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
            "verbs": ["get", "patch", "update"],
        },
        {
            "subresource": "binding",
            "responseKind": {"group": "", "version": "v1", "kind": "Binding"},
            "verbs": ["create"],
        },
        # Read by kubectl logs; served from the container logs of control-plane nodes.
        {
            "subresource": "log",
            "responseKind": {"group": "", "version": "v1", "kind": "Pod"},
            "verbs": ["get"],
        },
    ]
    nodes = next(r for r in v1["resources"] if r["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"
    apis = discovery.aggregated(reg, core=False)
    names = [i["metadata"]["name"] for i in apis["items"]]
    assert names[-1] == "stable.example.com" and "" not in names
    crontabs = apis["items"][-1]["versions"][0]["resources"][0]
    assert crontabs["shortNames"] == ["ct"] and crontabs["singularResource"] == "crontab"
    assert AGGREGATED_CONTENT_TYPE == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"


def test_cache_follows_registry_generation() -> None:
    reg = ResourceRegistry()
    d = Discovery(reg)
    before = d.aggregated(False)
    assert d.aggregated(False) is before  # cached
    reg.add(crontab_type())
    after = d.aggregated(False)
    assert after is not before and after["items"][-1]["metadata"]["name"] == "stable.example.com"
    assert d.api_resource_list("stable.example.com", "v1") is not None
    reg.remove("stable.example.com", "v1", "crontabs")
    assert d.api_resource_list("stable.example.com", "v1") is None
    assert discovery.for_registry(reg) is discovery.for_registry(reg)


# -- OpenAPI ---------------------------------------------------------------------------------------------------


def patch_ops(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [item["patch"] for item in doc["paths"].values() if "patch" in item]


def test_openapi_index_and_patch_operations() -> None:
    reg = ResourceRegistry()
    index = openapi.openapi_index(reg)
    assert set(index["paths"]) >= {
        "api/v1",
        "apis/apps/v1",
        "apis/coordination.k8s.io/v1",
        "apis/events.k8s.io/v1",
    }
    url = index["paths"]["api/v1"]["serverRelativeURL"]
    assert re.fullmatch(r"/openapi/v3/api/v1\?hash=[0-9A-F]{128}", url)
    for prefix in index["paths"]:
        doc = openapi.openapi_group_version(reg, prefix)
        assert doc is not None and doc["openapi"].startswith("3.")
        group, version = ("", "v1") if prefix == "api/v1" else tuple(prefix.split("/")[1:])
        # every kind that can be patched has a PATCH operation kubectl's field-validation probe recognises
        for rtype in reg.in_group_version(group, version):
            if "patch" not in rtype.verbs:
                continue
            ops = [
                op
                for op in patch_ops(doc)
                if op["x-kubernetes-group-version-kind"]
                == {"group": group, "version": version, "kind": rtype.kind}
            ]
            assert ops, (prefix, rtype.kind)
            assert all(any(p["name"] == "fieldValidation" for p in op["parameters"]) for op in ops)
            # no request body: kubectl then builds strategic merge patches from its own type information
            assert all("requestBody" not in op for op in ops)
    assert openapi.openapi_group_version(reg, "apis/nope/v1") is None


def test_openapi_paths_and_builtin_schemas() -> None:
    doc = openapi.openapi_group_version(ResourceRegistry(), "api/v1")
    assert doc is not None
    item = doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}"]
    assert {"get", "put", "patch", "delete", "parameters"} <= set(item)
    assert doc["paths"]["/api/v1/namespaces/{namespace}/pods/{name}/binding"]["post"]["x-kubernetes-group-version-kind"] == {
        "group": "", "version": "v1", "kind": "Binding"
    }  # fmt: skip
    assert "/api/v1/pods" in doc["paths"] and "/api/v1/nodes/{name}" in doc["paths"]
    pod = doc["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
    assert {"apiVersion", "kind", "metadata", "spec", "status"} <= set(pod["properties"])
    cm = doc["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"]
    assert "data" in cm["properties"] and "spec" not in cm["properties"]
    assert "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta" in doc["components"]["schemas"]
    apps = openapi.openapi_group_version(ResourceRegistry(), "apis/apps/v1")
    assert apps is not None and "io.k8s.api.autoscaling.v1.Scale" in apps["components"]["schemas"]
    scale_patch = apps["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}/scale"]["patch"]
    assert scale_patch["x-kubernetes-group-version-kind"] == {
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
    }


def test_openapi_crd_schema_and_hash_changes() -> None:
    reg = ResourceRegistry()
    reg.add(crontab_type())
    index = openapi.openapi_index(reg)
    doc = openapi.openapi_group_version(reg, "apis/stable.example.com/v1")
    assert doc is not None
    schema = doc["components"]["schemas"]["com.example.stable.v1.CronTab"]
    assert schema["x-kubernetes-group-version-kind"] == [
        {"group": "stable.example.com", "version": "v1", "kind": "CronTab"}
    ]
    assert schema["properties"]["spec"]["properties"]["cronSpec"]["type"] == "string"
    assert {"apiVersion", "kind", "metadata"} <= set(schema["properties"])
    assert CRONTAB_SCHEMA["properties"].keys() == {"spec", "status"}  # the CRD's own schema was not mutated
    # a changed schema (re-registered, bumping the generation) changes that document's hash and only that one
    changed = crontab_crd()
    changed["spec"]["versions"][0]["schema"] = {
        "openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}
    }
    reg.add(crontab_type(crd=changed))
    index2 = openapi.openapi_index(reg)
    assert index2["paths"]["apis/stable.example.com/v1"] != index["paths"]["apis/stable.example.com/v1"]
    assert index2["paths"]["api/v1"] == index["paths"]["api/v1"]
    assert openapi.openapi_group_version(reg, "/apis/stable.example.com/v1/") is not None


# -- kubectl and the official client against a stub server ----------------------------------------------------


@dataclass
class Stub:
    url: str
    registry: ResourceRegistry
    requests: list[tuple[str, str, str]] = field(default_factory=list)


CREATED = "2024-01-01T00:00:00Z"


def stub_objects(rtype: ResourceType) -> list[dict[str, Any]]:
    if rtype.kind == "Pod":
        return [{
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-1", "namespace": "default", "creationTimestamp": CREATED, "resourceVersion": "5"},
            "spec": {"containers": [{"name": "c", "image": "nginx"}], "nodeName": "node-1"},
            "status": {"phase": "Running", "podIP": "10.0.0.7",
                       "containerStatuses": [{"name": "c", "ready": True, "restartCount": 0, "state": {"running": {}}}]},
        }]  # fmt: skip
    if rtype.kind == "CronTab":
        return [{
            "apiVersion": "stable.example.com/v1", "kind": "CronTab",
            "metadata": {"name": "nightly", "namespace": "default", "creationTimestamp": CREATED},
            "spec": {"cronSpec": "0 3 * * *", "replicas": 2},
        }]  # fmt: skip
    return []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def stub() -> AsyncIterator[Stub]:
    reg = ResourceRegistry()
    reg.add(crontab_type())
    state = Stub("", reg)

    def json_response(body: Any, status: int = 200, content_type: str = "application/json") -> web.Response:
        resp = web.json_response(body, status=status)
        resp.headers["Content-Type"] = content_type
        return resp

    async def handle(request: web.Request) -> web.Response:
        state.requests.append((request.method, request.path_qs, request.headers.get("Accept", "")))
        parts = [p for p in request.path.split("/") if p]
        accept = request.headers.get("Accept", "")
        not_found = {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
                     "message": "the server could not find the requested resource"}  # fmt: skip
        if parts in (["version"], ["version", ""]):
            return json_response(version_info())
        if parts == ["api"] or parts == ["apis"]:
            if wants_aggregated(accept):
                return json_response(
                    discovery.aggregated(reg, parts == ["api"]), content_type=AGGREGATED_CONTENT_TYPE
                )
            return json_response(
                discovery.api_versions(reg) if parts == ["api"] else discovery.api_group_list(reg)
            )
        if parts[:2] == ["openapi", "v3"]:
            doc = (
                openapi.openapi_index(reg)
                if len(parts) == 2
                else openapi.openapi_group_version(reg, "/".join(parts[2:]))
            )
            return json_response(doc) if doc is not None else json_response(not_found, 404)
        if parts[0] in ("api", "apis"):
            group, version, rest = (
                ("", parts[1], parts[2:]) if parts[0] == "api" else (parts[1], parts[2], parts[3:])
            )
            if not rest:
                body = discovery.api_resource_list(reg, group, version)
                return json_response(body) if body else json_response(not_found, 404)
            if parts[0] == "apis" and len(parts) == 2:
                return json_response(discovery.api_group(reg, group))
            if rest[0] == "namespaces" and len(rest) >= 3:
                rest = rest[2:]
            rtype = reg.get(group, version, rest[0])
            if rtype is None:
                return json_response(not_found, 404)
            if request.method == "POST":
                obj = await request.json()
                obj.setdefault("metadata", {})["creationTimestamp"] = CREATED
                return json_response(obj, 201)
            objs = stub_objects(rtype)
            if tables.wants_table(accept):
                now = dt.datetime(2024, 1, 1, 0, 5, tzinfo=dt.UTC)
                return json_response(tables.to_table(rtype, objs, now=now, resource_version="9"))
            return json_response(
                {
                    "kind": rtype.list_kind,
                    "apiVersion": rtype.api_version,
                    "metadata": {"resourceVersion": "9"},
                    "items": objs,
                }
            )
        return json_response(not_found, 404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    state.url = f"http://127.0.0.1:{port}"
    try:
        yield state
    finally:
        await runner.cleanup()


async def kubectl(stub: Stub, tmp_path: Path, *args: str, stdin: bytes | None = None) -> str:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL), "--server", stub.url, "--cache-dir", str(tmp_path / "cache"), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")},
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode == 0, f"kubectl {' '.join(args)}: {err.decode()}"
    return out.decode()


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.32 not installed")
async def test_kubectl_uses_aggregated_discovery(stub: Stub, tmp_path: Path) -> None:
    out = await kubectl(stub, tmp_path, "api-resources")
    lines = {line.split()[0]: line.split() for line in out.splitlines()[1:] if line.strip()}
    assert lines["pods"][1:] == ["po", "v1", "true", "Pod"]
    assert lines["leases"][1:] == ["coordination.k8s.io/v1", "true", "Lease"]
    assert lines["crontabs"][1:] == ["ct", "stable.example.com/v1", "true", "CronTab"]
    assert lines["nodes"][1:] == ["no", "v1", "false", "Node"]
    # aggregated discovery answered everything: no per-group-version requests
    paths = [p for _, p, _ in stub.requests]
    assert not any(re.match(r"/apis?/[^?]+\?", p) for p in paths), paths


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.32 not installed")
async def test_kubectl_create_leaves_validation_to_the_server(stub: Stub, tmp_path: Path) -> None:
    manifest = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p1\nspec:\n  containers:\n  - name: c\n    image: nginx\n"
    out = await kubectl(stub, tmp_path, "create", "-n", "default", "-f", "-", stdin=manifest)
    assert out.strip() == "pod/p1 created"
    posts = [p for m, p, _ in stub.requests if m == "POST"]
    assert posts == ["/api/v1/namespaces/default/pods?fieldManager=kubectl-create&fieldValidation=Strict"]
    cr = b"apiVersion: stable.example.com/v1\nkind: CronTab\nmetadata:\n  name: c1\nspec:\n  cronSpec: '* * * * *'\n"
    await kubectl(stub, tmp_path, "create", "-n", "default", "-f", "-", stdin=cr)
    assert [p for m, p, _ in stub.requests if m == "POST"][-1].endswith("fieldValidation=Strict")
    assert not any(p.startswith("/openapi/v2") for _, p, _ in stub.requests)


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.32 not installed")
async def test_kubectl_explain(stub: Stub, tmp_path: Path) -> None:
    out = await kubectl(stub, tmp_path, "explain", "crontabs.spec")
    assert (
        "KIND:       CronTab" in out
        and "cronSpec\t<string>" in out
        and "The schedule, in cron format." in out
    )
    pods = await kubectl(stub, tmp_path, "explain", "pods")
    # Built-in kinds are explained from Kubernetes' published schemas.
    assert "KIND:       Pod" in pods and "spec\t<PodSpec>" in pods and "metadata\t<ObjectMeta>" in pods
    spec = await kubectl(stub, tmp_path, "explain", "pods.spec")
    assert "Specification of the desired behavior of the pod" in spec and "containers\t<[]Container>" in spec


@pytest.mark.kubectl
@pytest.mark.skipif(not KUBECTL.exists(), reason="kubectl 1.32 not installed")
async def test_kubectl_get_prints_server_tables(stub: Stub, tmp_path: Path) -> None:
    out = await kubectl(stub, tmp_path, "get", "pods", "-n", "default")
    assert out.split("\n")[:2] == [
        "NAME    READY   STATUS    RESTARTS   AGE",
        "web-1   1/1     Running   0          5m",
    ]
    wide = await kubectl(stub, tmp_path, "get", "pods", "-n", "default", "-o", "wide")
    assert wide.split("\n")[0].split() == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED",
        "NODE",
        "READINESS",
        "GATES",
    ]
    assert wide.split("\n")[1].split() == [
        "web-1",
        "1/1",
        "Running",
        "0",
        "5m",
        "10.0.0.7",
        "node-1",
        "<none>",
        "<none>",
    ]
    crs = await kubectl(stub, tmp_path, "get", "ct", "-n", "default")
    assert crs.split("\n")[:2] == [
        "NAME      SPEC        REPLICAS   AGE",
        "nightly   0 3 * * *   2          5m",
    ]


def official_dynamic_client(url: str, cache_file: Path) -> list[str]:
    from kubernetes import client, dynamic

    configuration = client.Configuration()
    configuration.host = url
    api_client = client.ApiClient(configuration)
    try:
        dyn = dynamic.DynamicClient(api_client, cache_file=str(cache_file))
        pods = dyn.resources.get(api_version="v1", kind="Pod")
        leases = dyn.resources.get(api_version="coordination.k8s.io/v1", kind="Lease")
        crontabs = dyn.resources.get(api_version="stable.example.com/v1", kind="CronTab")
        binding = pods.subresources["binding"]
        return [pods.name, str(pods.namespaced), leases.group, crontabs.short_names[0], binding.kind]
    finally:
        api_client.close()


async def test_official_dynamic_client_reads_legacy_discovery(stub: Stub, tmp_path: Path) -> None:
    found = await asyncio.to_thread(official_dynamic_client, stub.url, tmp_path / "discovery.json")
    assert found == ["pods", "True", "coordination.k8s.io", "ct", "Binding"]
    accepts = {a for _, p, a in stub.requests if p.startswith(("/api", "/apis"))}
    assert not any("APIGroupDiscoveryList" in a for a in accepts)
