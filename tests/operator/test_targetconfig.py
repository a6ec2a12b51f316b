"""The target config controller against the in-process cluster: merge order, validation, what it writes, the
Degraded condition, the pod manifest following logLevel and forceRedeploymentReason, and the credentials."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.client.config import load_kubeconfig
from kubesched.client.events import EventRecorder
from kubesched.client.rest import ApiClient
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.operator import contract as c
from kubesched.operator import credentials
from kubesched.operator.observer import observe
from kubesched.operator.targetconfig import (
    DEGRADED_CONDITION,
    InvalidConfig,
    TargetConfigController,
    default_config,
    render_config,
    split_overrides,
)

Obj = dict[str, Any]
NS = c.OPERAND_NAMESPACE


async def cm(client: ApiClient, name: str) -> Obj:
    return await client.get("v1", "configmaps", name, namespace=NS)


def condition(ks: Obj, type_: str) -> Obj:
    return next(x for x in ks["status"]["conditions"] if x["type"] == type_)


def test_merge_order_default_then_observed_then_overrides() -> None:
    observed = observe({"spec": {"profile": "HighNodeUtilization"}})
    observed["leaderElection"] = {"leaseDuration": "90s", "renewDeadline": "40s"}
    overrides = {"leaderElection": {"leaseDuration": "50s"}, "percentageOfNodesToScore": 50}
    merged = json.loads(render_config(default_config("my-ns"), observed, overrides))
    le = merged["leaderElection"]
    assert le["leaseDuration"] == "50s"  # overrides win over observed
    assert le["renewDeadline"] == "40s"  # observed wins over the default
    assert le["retryPeriod"] == "26s" and le["resourceNamespace"] == "my-ns"  # the default's, kept
    assert merged["profiles"] == observed["profiles"] and merged["percentageOfNodesToScore"] == 50
    # Overrides replace lists wholesale: the observed profiles are gone when overrides name profiles.
    mine = [{"schedulerName": "mine"}]
    assert json.loads(render_config(default_config(), observed, {"profiles": mine}))["profiles"] == mine


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"kind": "Other"}, "spec.unsupportedConfigOverrides changes kind"),
        ({"percentageOfNodesToScore": 300}, "percentageOfNodesToScore"),
        (
            {"profiles": [{"schedulerName": "x", "plugins": {"score": {"enabled": [{"name": "Nope"}]}}}]},
            "Nope",
        ),
        ({"leaderElection": {"leaseDuration": "soon"}}, "leaseDuration"),
    ],
)
def test_invalid_results_are_refused(overrides: Obj, message: str) -> None:
    with pytest.raises(InvalidConfig, match=message):
        render_config(default_config(), observe(None), overrides)


async def test_writes_every_input(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, observedConfig=observe({"spec": {"profile": "NoScoring"}}))
    ctl = TargetConfigController(image="registry.example/kubesched:v1", secure_port=12345)
    await ctl.sync(op_ctx)
    config = json.loads((await cm(client, c.CONFIG_CONFIGMAP))["data"]["config.yaml"])
    assert (
        config["kind"] == "KubeSchedulerConfiguration" and config["leaderElection"]["resourceNamespace"] == NS
    )
    assert config["profiles"][0]["plugins"]["score"]["disabled"] == [{"name": "*"}]
    pod_cm = (await cm(client, c.POD_CONFIGMAP))["data"]
    pod = yaml.safe_load(pod_cm["pod.yaml"])
    container = pod["spec"]["containers"][0]
    assert (
        container["image"] == "registry.example/kubesched:v1" and "--secure-port=12345" in container["args"]
    )
    assert pod_cm["forceRedeploymentReason"] == "" and pod_cm["version"]
    kubeconfig = yaml.safe_load((await cm(client, c.KUBECONFIG_CONFIGMAP))["data"]["kubeconfig"])
    assert kubeconfig["clusters"][0]["cluster"] == {"server": client.config.server}  # plain HTTP: no CA
    assert kubeconfig["users"][0]["user"]["tokenFile"].endswith("/secrets/kube-scheduler-client-token/token")
    secret = await client.get("v1", "secrets", c.CLIENT_TOKEN_SECRET, namespace=NS)
    assert secret["data"]["token"] == ""  # the plain-HTTP cluster issues no tokens and needs none
    sa = await client.get("v1", "serviceaccounts", credentials.SERVICE_ACCOUNT, namespace=NS)
    for role in credentials.CLUSTER_ROLES:
        crb = await client.get(
            "rbac.authorization.k8s.io/v1", "clusterrolebindings", credentials.binding_name(NS, role)
        )
        assert crb["roleRef"]["name"] == role
        assert crb["subjects"] == [
            {"kind": "ServiceAccount", "name": sa["metadata"]["name"], "namespace": NS}
        ]
    rb = await client.get(
        "rbac.authorization.k8s.io/v1",
        "rolebindings",
        credentials.binding_name(NS, credentials.AUTH_READER_ROLE),
        namespace="kube-system",
    )
    assert rb["roleRef"]["name"] == "extension-apiserver-authentication-reader"
    ks = await kit.get_kubescheduler(client)
    assert condition(ks, DEGRADED_CONDITION)["status"] == "False"

    # A second sync with nothing changed writes nothing.
    versions = {n: (await cm(client, n))["metadata"]["resourceVersion"] for n in ctl.outputs[:3]}
    await ctl.sync(op_ctx)
    assert versions == {n: (await cm(client, n))["metadata"]["resourceVersion"] for n in ctl.outputs[:3]}

    async def created() -> list[Obj]:
        items = (await client.list("events.k8s.io/v1", "events", namespace=c.OPERATOR_NAMESPACE))["items"]
        reasons = {e["reason"] for e in items}
        return items if {"ConfigMapCreated", "SecretCreated", "ServiceAccountCreated"} <= reasons else []

    await kit.eventually(
        created, "ConfigMapCreated, SecretCreated and ServiceAccountCreated events", timeout=20
    )


async def test_invalid_override_degrades_and_leaves_config_untouched(
    op_ctx: c.OperatorContext, kit: Any
) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, observedConfig=observe(None))
    ctl = TargetConfigController()
    await ctl.sync(op_ctx)
    good = await cm(client, c.CONFIG_CONFIGMAP)
    await kit.patch_kubescheduler_spec(
        client, {"unsupportedConfigOverrides": {"percentageOfNodesToScore": 300}}
    )
    await ctl.sync(op_ctx)
    assert (await cm(client, c.CONFIG_CONFIGMAP))["metadata"]["resourceVersion"] == good["metadata"][
        "resourceVersion"
    ]
    cond = condition(await kit.get_kubescheduler(client), DEGRADED_CONDITION)
    assert cond["status"] == "True" and cond["reason"] == "InvalidConfig"
    assert (
        "percentageOfNodesToScore" in cond["message"] and f"{NS}/config is left as it is" in cond["message"]
    )
    # Fixing the override recovers.
    await kit.patch_kubescheduler_spec(
        client, {"unsupportedConfigOverrides": {"percentageOfNodesToScore": 40}}
    )
    await ctl.sync(op_ctx)
    assert (
        json.loads((await cm(client, c.CONFIG_CONFIGMAP))["data"]["config.yaml"])["percentageOfNodesToScore"]
        == 40
    )
    assert condition(await kit.get_kubescheduler(client), DEGRADED_CONDITION)["status"] == "False"


async def test_log_level_and_force_redeployment_change_the_pod_configmap(
    op_ctx: c.OperatorContext, kit: Any
) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    ctl = TargetConfigController()
    await ctl.sync(op_ctx)
    first = (await cm(client, c.POD_CONFIGMAP))["data"]
    assert "-v=2" in yaml.safe_load(first["pod.yaml"])["spec"]["containers"][0]["args"]
    await kit.patch_kubescheduler_spec(client, {"logLevel": "TraceAll", "forceRedeploymentReason": "retry 1"})
    await ctl.sync(op_ctx)
    second = (await cm(client, c.POD_CONFIGMAP))["data"]
    assert "-v=10" in yaml.safe_load(second["pod.yaml"])["spec"]["containers"][0]["args"]
    assert second["forceRedeploymentReason"] == "retry 1"

    async def updated() -> list[Obj]:
        items = (await client.list("events.k8s.io/v1", "events", namespace=c.OPERATOR_NAMESPACE))["items"]
        return [e for e in items if e["reason"] == "ConfigMapUpdated" and c.POD_CONFIGMAP in e["note"]]

    (event, *_) = await kit.eventually(updated, "a ConfigMapUpdated event for the pod configmap", timeout=20)
    assert "data.forceRedeploymentReason" in event["note"] and "data.pod.yaml" in event["note"]


async def test_unmanaged_changes_nothing(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.patch_kubescheduler_spec(client, {"managementState": "Unmanaged"})
    await TargetConfigController().sync(op_ctx)
    listed = await client.list("v1", "configmaps", namespace=NS)
    assert c.CONFIG_CONFIGMAP not in {x["metadata"]["name"] for x in listed["items"]}


# --- over HTTPS: TokenRequest, the CA, a kubeconfig that works -------------------------------------------------


async def test_credentials_over_https(tmp_path: Path, kit: Any) -> None:
    cluster = LocalCluster(
        ClusterOptions(port=0, data_dir=tmp_path / "c", nodes=1, heartbeat_interval=3600.0)
    )
    await cluster.start()
    try:
        assert cluster.kubeconfig_path is not None
        async with ApiClient(load_kubeconfig([str(cluster.kubeconfig_path)])) as client:
            await kit.install_crds(client)
            recorder = EventRecorder(client, "kube-scheduler-operator", "test")
            ctx = c.OperatorContext(client=client, recorder=recorder)
            await kit.create_kubescheduler(client)
            now = [1_000_000.0]
            ctl = TargetConfigController(token_lifetime=3600 * 24, clock=lambda: now[0])
            await ctl.sync(ctx)
            ca = (await cm(client, c.SERVICEACCOUNT_CA_CONFIGMAP))["data"]["ca-bundle.crt"]
            assert "BEGIN CERTIFICATE" in ca
            kc = yaml.safe_load((await cm(client, c.KUBECONFIG_CONFIGMAP))["data"]["kubeconfig"])
            assert kc["clusters"][0]["cluster"]["certificate-authority"].endswith(
                "serviceaccount-ca/ca-bundle.crt"
            )
            secret = await client.get("v1", "secrets", c.CLIENT_TOKEN_SECRET, namespace=NS)
            token = credentials.decode_secret_value(secret, "token")
            assert token and credentials.token_expiry(token)
            # The token, with the CA, is a working identity of the scheduler's service account.
            (tmp_path / "ca.crt").write_text(ca)
            (tmp_path / "token").write_text(token)
            kc["clusters"][0]["cluster"]["certificate-authority"] = str(tmp_path / "ca.crt")
            kc["users"][0]["user"]["tokenFile"] = str(tmp_path / "token")
            (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kc))
            async with ApiClient(load_kubeconfig([str(tmp_path / "kubeconfig")])) as sched:
                nodes = await sched.list("v1", "nodes")  # system:kube-scheduler may list nodes
                assert nodes["items"]
                with pytest.raises(Exception, match="forbidden"):
                    await sched.list("v1", "secrets", namespace="kube-system")
            # Not renewed while young; renewed once less than a fifth of its life is left.
            await ctl.sync(ctx)
            same = await client.get("v1", "secrets", c.CLIENT_TOKEN_SECRET, namespace=NS)
            assert same["metadata"]["resourceVersion"] == secret["metadata"]["resourceVersion"]
            exp = credentials.token_expiry(token)
            assert exp is not None
            now[0] = exp - 3600
            await ctl.sync(ctx)
            renewed = await client.get("v1", "secrets", c.CLIENT_TOKEN_SECRET, namespace=NS)
            assert credentials.decode_secret_value(renewed, "token") != token
            await recorder.close()
    finally:
        await cluster.stop()


def test_arguments_become_flags() -> None:
    rest, flags = split_overrides(
        {"arguments": {"v": 5, "b": ["x", "y"], "--c": True}, "percentageOfNodesToScore": 9}
    )
    assert rest == {"percentageOfNodesToScore": 9} and flags == ["--b=x", "--b=y", "--c=true", "--v=5"]
    assert split_overrides(None) == (None, []) and split_overrides({"a": 1}) == ({"a": 1}, [])
    with pytest.raises(InvalidConfig, match=r"arguments\.b must be a string or a list of strings"):
        split_overrides({"arguments": {"b": {"nested": 1}}})


async def test_override_arguments_reach_the_pod(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, unsupportedConfigOverrides={"arguments": {"seed": "7"}})
    ctl = TargetConfigController()
    await ctl.sync(op_ctx)
    args = yaml.safe_load((await cm(client, c.POD_CONFIGMAP))["data"]["pod.yaml"])["spec"]["containers"][0][
        "args"
    ]
    assert args[-1] == "--seed=7"
    assert "arguments" not in json.loads((await cm(client, c.CONFIG_CONFIGMAP))["data"]["config.yaml"])
    before = (await cm(client, c.POD_CONFIGMAP))["metadata"]["resourceVersion"]
    await kit.patch_kubescheduler_spec(
        client, {"unsupportedConfigOverrides": {"arguments": ["not", "a", "map"]}}
    )
    await ctl.sync(op_ctx)
    assert (await cm(client, c.POD_CONFIGMAP))["metadata"]["resourceVersion"] == before
    cond = condition(await kit.get_kubescheduler(client), DEGRADED_CONDITION)
    assert cond["status"] == "True" and "arguments must be a map" in cond["message"]
