"""Shared fixtures of the operator's tests: an in-process local cluster over plain HTTP, a client, the operator's
CRDs, the three namespaces, an :class:`OperatorContext`, and helpers that write the revisioned inputs the config
side would write (so rollout-side tests do not depend on it).

Additive: add fixtures, do not change what existing ones give.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.client.events import EventRecorder
from kubesched.client.rest import ApiClient, ApiError
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.operator import contract as c

Obj = dict[str, Any]

# What the CRDs must at least offer when kubesched.operator.crds is not there yet: the kinds, cluster-scoped, a
# status subresource, any fields.
_FALLBACK_CRDS = (
    ("operator.openshift.io", "v1", "kubeschedulers", "KubeScheduler"),
    ("config.openshift.io", "v1", "schedulers", "Scheduler"),
    ("config.openshift.io", "v1", "clusteroperators", "ClusterOperator"),
)


def _fallback_crd(group: str, version: str, plural: str, kind: str) -> Obj:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Cluster",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind, "listKind": f"{kind}List"},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


async def install_crds(client: ApiClient) -> None:
    """The project's CRDs (``kubesched.operator.crds.ensure_crds``) when available, else permissive stand-ins."""
    try:
        from kubesched.operator.crds import ensure_crds  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        for spec in _FALLBACK_CRDS:
            try:
                await client.create(
                    "apiextensions.k8s.io/v1", "customresourcedefinitions", _fallback_crd(*spec)
                )
            except ApiError as e:
                if not e.is_already_exists():
                    raise
        return
    await ensure_crds(client)


async def ensure_namespace(client: ApiClient, name: str) -> None:
    try:
        await client.create("v1", "namespaces", {"metadata": {"name": name}})
    except ApiError as e:
        if not e.is_already_exists():
            raise


@pytest.fixture
async def op_cluster(tmp_path: Path) -> AsyncIterator[LocalCluster]:
    """A local cluster in this process over plain HTTP, with two simulated workers and no control-plane node."""
    cluster = LocalCluster(
        ClusterOptions(
            port=0,
            insecure_http=True,
            data_dir=tmp_path / "cluster",
            nodes=2,
            heartbeat_interval=3600.0,
        )
    )
    await cluster.start()
    try:
        yield cluster
    finally:
        await cluster.stop()


@pytest.fixture
async def op_client(op_cluster: LocalCluster) -> AsyncIterator[ApiClient]:
    """A client of ``op_cluster`` with the operator's CRDs installed and its three namespaces created."""
    async with ApiClient(op_cluster.url) as client:
        await install_crds(client)
        for ns in (c.OPERATOR_NAMESPACE, c.OPERAND_NAMESPACE, c.USER_CONFIG_NAMESPACE):
            await ensure_namespace(client, ns)
        yield client


@pytest.fixture
async def op_ctx(op_client: ApiClient) -> AsyncIterator[c.OperatorContext]:
    """An OperatorContext over ``op_client`` whose recorder writes events as ``kube-scheduler-operator``."""
    recorder = EventRecorder(op_client, "kube-scheduler-operator", "kube-scheduler-operator-test")
    ctx = c.OperatorContext(client=op_client, recorder=recorder)
    try:
        yield ctx
    finally:
        await recorder.close()


async def create_kubescheduler(client: ApiClient, **spec: Any) -> Obj:
    body = {
        "apiVersion": c.KUBESCHEDULER_API_VERSION,
        "kind": "KubeScheduler",
        "metadata": {"name": c.SINGLETON_NAME},
        "spec": {"managementState": "Managed", **spec},
    }
    return await client.create(c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, body)


async def get_kubescheduler(client: ApiClient) -> Obj:
    return await client.get(c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME)


async def patch_kubescheduler_spec(client: ApiClient, spec: Obj) -> Obj:
    return await client.patch(
        c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL, c.SINGLETON_NAME, {"spec": spec}
    )


async def patch_kubescheduler_status(client: ApiClient, status: Obj) -> Obj:
    return await client.patch(
        c.KUBESCHEDULER_API_VERSION,
        c.KUBESCHEDULER_PLURAL,
        c.SINGLETON_NAME,
        {"status": status},
        subresource="status",
    )


def sample_inputs(config_text: str = "apiVersion: kubescheduler.config.k8s.io/v1\n") -> dict[str, Obj]:
    """``{name: data}`` for every required revisioned input, as the config side would write them."""
    return {
        c.POD_CONFIGMAP: {
            "pod.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube-scheduler\n"
            "  labels: {revision: 'REVISION'}\n",
            "version": "0.0.0-test",
        },
        c.CONFIG_CONFIGMAP: {"config.yaml": config_text},
        c.KUBECONFIG_CONFIGMAP: {"kubeconfig": "apiVersion: v1\nkind: Config\n"},
        c.CLIENT_TOKEN_SECRET: {"token": "c2VjcmV0"},  # base64 of "secret"
    }


async def put_input(client: ApiClient, name: str, data: Obj, namespace: str = c.OPERAND_NAMESPACE) -> Obj:
    """Create or replace configmap (or secret, for the names in ``contract.REVISION_SECRETS``) ``name``."""
    secret = name in {n for n, _ in c.REVISION_SECRETS}
    plural = "secrets" if secret else "configmaps"
    body: Obj = {"metadata": {"name": name, "namespace": namespace}, "data": data}
    if secret:
        body["type"] = "Opaque"
    try:
        return await client.create("v1", plural, body, namespace=namespace)
    except ApiError as e:
        if not e.is_already_exists():
            raise
    return await client.replace("v1", plural, name, body, namespace=namespace)


async def put_inputs(client: ApiClient, namespace: str = c.OPERAND_NAMESPACE, **overrides: Obj) -> None:
    """Every required input (``sample_inputs``), with ``overrides`` (name with ``_`` for ``-``) replacing data."""
    inputs = sample_inputs()
    for key, data in overrides.items():
        inputs[key.replace("_", "-")] = data
    for name, data in inputs.items():
        await put_input(client, name, data, namespace)


async def eventually(
    fn: Callable[[], Awaitable[Any]], what: str, timeout: float = 60.0, interval: float = 0.1
) -> Any:
    """Await ``fn()`` until it returns something true (assertion errors count as not yet)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last: Any = None
    while loop.time() < deadline:
        try:
            last = await fn()
        except AssertionError as e:
            last = e
        else:
            if last:
                return last
        await asyncio.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


class Kit:
    """The helpers above as one fixture (test modules cannot import this conftest by name)."""

    install_crds = staticmethod(install_crds)
    ensure_namespace = staticmethod(ensure_namespace)
    create_kubescheduler = staticmethod(create_kubescheduler)
    get_kubescheduler = staticmethod(get_kubescheduler)
    patch_kubescheduler_spec = staticmethod(patch_kubescheduler_spec)
    patch_kubescheduler_status = staticmethod(patch_kubescheduler_status)
    sample_inputs = staticmethod(sample_inputs)
    put_input = staticmethod(put_input)
    put_inputs = staticmethod(put_inputs)
    eventually = staticmethod(eventually)


@pytest.fixture
def kit() -> type[Kit]:
    return Kit
