"""The installer controller: node progression one at a time, failures with back-off, preemption by a newer
revision, conditions, Removed. The kubelet is played by the test: it sets installer pods' phases and creates the
mirror pods."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator.installer import (
    InstallerController,
    backoff_seconds,
    installer_pod_name,
    progress_message,
)
from kubesched.operator.revision import RevisionController
from kubesched.operator.status import find_condition

NS = c.OPERAND_NAMESPACE


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_backoff_and_messages() -> None:
    assert [backoff_seconds(n) for n in range(5)] == [0.0, 10.0, 15.0, 22.5, 33.75]
    assert backoff_seconds(40) == 600.0
    two = [{"nodeName": "a", "currentRevision": 1}, {"nodeName": "b", "currentRevision": 1}]
    assert progress_message(two[:1], 2) == "1 node is at revision 1; 0 nodes have achieved new revision 2"
    two[0]["currentRevision"] = 2
    assert progress_message(two, 2) == (
        "1 node is at revision 2; 1 node is at revision 1; 1 node has achieved new revision 2"
    )
    assert installer_pod_name(3, "cp-0") == "installer-3-cp-0"
    assert installer_pod_name(3, "cp-0", 2) == "installer-3-retry-2-cp-0"


async def add_node(client: Any, name: str, role: str = "node-role.kubernetes.io/control-plane") -> None:
    await client.create("v1", "nodes", {"metadata": {"name": name, "labels": {role: ""}}})


async def set_phase(client: Any, name: str, phase: str, message: str = "") -> None:
    pod = await client.get("v1", "pods", name, namespace=NS)
    status: dict[str, Any] = {"phase": phase}
    if phase == "Failed":
        status["containerStatuses"] = [
            {
                "name": "installer",
                "ready": False,
                "restartCount": 0,
                "image": "kubesched",
                "imageID": "",
                "state": {"terminated": {"exitCode": 1, "reason": "Error", "message": message}},
            }
        ]
    pod["status"] = status
    await client.replace("v1", "pods", name, pod, namespace=NS, subresource="status")


async def run_static_pod(client: Any, node: str, revision: int, ready: bool = True) -> None:
    """What the node's kubelet does once the manifest is there: a mirror pod at that revision."""
    name = f"kube-scheduler-{node}"
    try:
        await client.delete("v1", "pods", name, namespace=NS, grace_period_seconds=0)
    except ApiError:
        pass
    pod = await client.create(
        "v1",
        "pods",
        {
            "metadata": {
                "name": name,
                "labels": {"revision": str(revision), "app": "openshift-kube-scheduler"},
            },
            "spec": {"nodeName": node, "containers": [{"name": "kube-scheduler", "image": "kubesched"}]},
        },
        namespace=NS,
    )
    pod["status"] = {
        "phase": "Running",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
    }
    await client.replace("v1", "pods", name, pod, namespace=NS, subresource="status")


async def pod_names(client: Any, prefix: str = "installer-") -> list[str]:
    items = (await client.list("v1", "pods", namespace=NS))["items"]
    return sorted(p["metadata"]["name"] for p in items if p["metadata"]["name"].startswith(prefix))


async def node_statuses(kit: Any, client: Any) -> dict[str, dict[str, Any]]:
    ks = await kit.get_kubescheduler(client)
    return {ns["nodeName"]: ns for ns in ks["status"].get("nodeStatuses") or []}


async def cond(kit: Any, client: Any, type_: str) -> dict[str, Any]:
    ks = await kit.get_kubescheduler(client)
    found = find_condition(ks["status"]["conditions"], type_)
    assert found is not None, type_
    return found


@pytest.fixture
async def two_nodes(op_ctx: c.OperatorContext, kit: Any) -> c.OperatorContext:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    await add_node(client, "cp-a")
    await add_node(client, "cp-b", "node-role.kubernetes.io/master")
    await add_node(client, "worker", "node-role.kubernetes.io/worker")
    return op_ctx


async def test_nodes_move_one_at_a_time(two_nodes: c.OperatorContext, kit: Any) -> None:
    ctx, client = two_nodes, two_nodes.client
    ic = InstallerController(image="kubesched:test")
    await ic.sync(ctx)  # no revision yet
    assert set(await node_statuses(kit, client)) == {"cp-a", "cp-b"}  # the worker is not a control-plane node
    assert (await cond(kit, client, "NodeInstallerProgressing"))["reason"] == "WaitingForRevision"
    assert (await cond(kit, client, "StaticPodsAvailable"))["status"] == "False"

    await RevisionController().sync(ctx)
    await ic.sync(ctx)
    assert await pod_names(client) == ["installer-1-cp-a"]
    pod = await client.get("v1", "pods", "installer-1-cp-a", namespace=NS)
    spec = pod["spec"]
    assert spec["nodeName"] == "cp-a" and spec["serviceAccountName"] == "installer-sa"
    assert spec["restartPolicy"] == "Never" and spec["tolerations"][0] == {"operator": "Exists"}
    assert spec["priorityClassName"] == "system-node-critical"
    (container,) = spec["containers"]
    assert container["image"] == "kubesched:test" and container["command"] == ["kubesched", "installer"]
    args = container["args"]
    for expected in (
        "--revision=1",
        f"--namespace={NS}",
        "--pod=kube-scheduler-pod",
        "--configmaps=config,scheduler-kubeconfig",
        "--optional-configmaps=serviceaccount-ca",
        "--secrets=kube-scheduler-client-token",
        "--optional-secrets=serving-cert",
        "--resource-dir=/etc/kubernetes/static-pod-resources",
        "--pod-manifest-dir=/etc/kubernetes/manifests",
    ):
        assert expected in args
    assert spec["volumes"][0]["hostPath"]["path"] == "/etc/kubernetes/"
    assert pod["metadata"]["ownerReferences"][0]["name"] == "revision-status-1"
    statuses = await node_statuses(kit, client)
    assert statuses["cp-a"]["targetRevision"] == 1 and not statuses["cp-b"].get("targetRevision")
    assert (await cond(kit, client, "NodeInstallerProgressing"))["message"] == (
        "2 nodes are at revision 0; 0 nodes have achieved new revision 1"
    )
    # The service account can read what the installer needs.
    await client.get("v1", "serviceaccounts", "installer-sa", namespace=NS)
    role = await client.get("rbac.authorization.k8s.io/v1", "roles", "kube-scheduler-installer", namespace=NS)
    assert "secrets" in role["rules"][0]["resources"]

    # Installer done but the new static pod not ready: still waiting, cp-b untouched.
    await set_phase(client, "installer-1-cp-a", "Succeeded")
    await run_static_pod(client, "cp-a", 1, ready=False)
    await ic.sync(ctx)
    assert (await node_statuses(kit, client))["cp-a"]["currentRevision"] == 0
    assert await pod_names(client) == ["installer-1-cp-a"]
    await run_static_pod(client, "cp-a", 1)
    await ic.sync(ctx)
    statuses = await node_statuses(kit, client)
    assert statuses["cp-a"]["currentRevision"] == 1 and not statuses["cp-a"].get("targetRevision")
    rs = await client.get("v1", "configmaps", "revision-status-1", namespace=NS)
    assert rs["data"]["status"] == "Succeeded"
    assert (await cond(kit, client, "StaticPodsAvailable"))["status"] == "True"

    await ic.sync(ctx)
    assert await pod_names(client) == ["installer-1-cp-a", "installer-1-cp-b"]
    await set_phase(client, "installer-1-cp-b", "Succeeded")
    await run_static_pod(client, "cp-b", 1)
    await ic.sync(ctx)
    progressing = await cond(kit, client, "NodeInstallerProgressing")
    assert (progressing["status"], progressing["reason"]) == ("False", "AllNodesAtLatestRevision")
    assert progressing["message"] == "2 nodes are at revision 1"
    await ic.sync(ctx)  # nothing left to do
    assert await pod_names(client) == ["installer-1-cp-a", "installer-1-cp-b"]
    await ctx.recorder.flush(5)
    events = (await client.list_all("events.k8s.io/v1", "events", namespace=c.OPERATOR_NAMESPACE))["items"]
    reasons = [e["reason"] for e in events]
    assert (
        reasons.count("NodeCurrentRevisionChanged") == 2 and reasons.count("NodeTargetRevisionChanged") == 2
    )


async def test_failure_backs_off_and_keeps_other_nodes(two_nodes: c.OperatorContext, kit: Any) -> None:
    ctx, client = two_nodes, two_nodes.client
    clock = Clock()
    ic = InstallerController(clock=clock)
    await RevisionController().sync(ctx)
    await ic.sync(ctx)
    await set_phase(client, "installer-1-cp-a", "Failed", "required configmap x not found")
    await ic.sync(ctx)
    a = (await node_statuses(kit, client))["cp-a"]
    assert a["lastFailedRevision"] == 1 and a["lastFailedCount"] == 1
    assert a["lastFailedReason"] == "InstallerFailed" and a["targetRevision"] == 1
    assert a["lastFailedRevisionErrors"] == ["installer: required configmap x not found"]
    degraded = await cond(kit, client, "NodeInstallerDegraded")
    assert degraded["status"] == "True" and degraded["reason"] == "InstallerPodFailed"
    assert degraded["message"].startswith("1 node is failing on revision 1:")
    rs = await client.get("v1", "configmaps", "revision-status-1", namespace=NS)
    assert rs["data"]["status"] == "Failed"
    assert ic.requeue_after == 10.0

    # Within the back-off: no retry, and cp-b is not touched.
    clock.now += 5
    await ic.sync(ctx)
    assert await pod_names(client) == ["installer-1-cp-a"]
    assert ic.requeue_after is not None and 4 < ic.requeue_after <= 5
    assert not (await node_statuses(kit, client))["cp-b"].get("targetRevision")
    clock.now += 6
    await ic.sync(ctx)
    assert await pod_names(client) == ["installer-1-cp-a", "installer-1-retry-1-cp-a"]
    await set_phase(client, "installer-1-retry-1-cp-a", "Failed")
    await ic.sync(ctx)
    assert (await node_statuses(kit, client))["cp-a"]["lastFailedCount"] == 2
    assert ic.requeue_after == 15.0
    clock.now += 16
    await ic.sync(ctx)
    assert "installer-1-retry-2-cp-a" in await pod_names(client)
    await set_phase(client, "installer-1-retry-2-cp-a", "Succeeded")
    await run_static_pod(client, "cp-a", 1)
    await ic.sync(ctx)
    assert (await node_statuses(kit, client))["cp-a"]["currentRevision"] == 1
    assert (await cond(kit, client, "NodeInstallerDegraded"))["status"] == "False"


async def test_newer_revision_preempts_a_running_installer(two_nodes: c.OperatorContext, kit: Any) -> None:
    ctx, client = two_nodes, two_nodes.client
    ic = InstallerController()
    rc = RevisionController()
    await rc.sync(ctx)
    await ic.sync(ctx)
    assert await pod_names(client) == ["installer-1-cp-a"]
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "v2"})
    await rc.sync(ctx)
    await ic.sync(ctx)
    assert await pod_names(client) == ["installer-2-cp-a"]
    assert (await node_statuses(kit, client))["cp-a"]["targetRevision"] == 2


async def test_restarted_controller_resumes(two_nodes: c.OperatorContext, kit: Any) -> None:
    ctx, client = two_nodes, two_nodes.client
    await RevisionController().sync(ctx)
    await InstallerController().sync(ctx)
    await set_phase(client, "installer-1-cp-a", "Succeeded")
    await run_static_pod(client, "cp-a", 1)
    fresh = InstallerController()  # a new operator process: nothing in memory
    await fresh.sync(ctx)
    assert (await node_statuses(kit, client))["cp-a"]["currentRevision"] == 1
    await fresh.sync(ctx)
    assert await pod_names(client) == ["installer-1-cp-a", "installer-1-cp-b"]


@pytest.mark.parametrize("state", ["Unmanaged", "Removed"])
async def test_not_managed(two_nodes: c.OperatorContext, kit: Any, state: str) -> None:
    ctx, client = two_nodes, two_nodes.client
    await RevisionController().sync(ctx)
    await run_static_pod(client, "cp-a", 1)
    await kit.patch_kubescheduler_spec(client, {"managementState": state})
    await InstallerController().sync(ctx)
    assert await pod_names(client) == []
    removers = await pod_names(client, "remover-")
    if state == "Unmanaged":
        assert removers == []
        return
    assert len(removers) == 1 and removers[0].endswith("-cp-a")  # cp-b runs no scheduler: nothing to remove
    pod = await client.get("v1", "pods", removers[0], namespace=NS)
    args = pod["spec"]["containers"][0]["args"]
    assert "--remove" in args and "--pod-manifest-dir=/etc/kubernetes/manifests" in args
    await InstallerController().sync(ctx)
    assert await pod_names(client, "remover-") == removers  # not repeated


async def crash_static_pod(client: Any, node: str, revision: int, restarts: int) -> None:
    """The node's kubelet restarting a static pod that keeps exiting."""
    await run_static_pod(client, node, revision, ready=False)
    name = f"kube-scheduler-{node}"
    pod = await client.get("v1", "pods", name, namespace=NS)
    pod["status"]["containerStatuses"] = [
        {
            "name": "kube-scheduler",
            "ready": False,
            "restartCount": restarts,
            "image": "kubesched",
            "imageID": "",
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "message": "bad flag --nope"}},
        }
    ]
    await client.replace("v1", "pods", name, pod, namespace=NS, subresource="status")


async def test_operand_failure_stops_the_rollout(two_nodes: c.OperatorContext, kit: Any) -> None:
    ctx, client = two_nodes, two_nodes.client
    ic = InstallerController()
    rc = RevisionController()
    await rc.sync(ctx)
    for node in ("cp-a", "cp-b"):  # both at revision 1
        await ic.sync(ctx)
        await set_phase(client, f"installer-1-{node}", "Succeeded")
        await run_static_pod(client, node, 1)
        await ic.sync(ctx)
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "crashes"})
    await rc.sync(ctx)
    await ic.sync(ctx)
    await set_phase(client, "installer-2-cp-a", "Succeeded")
    await crash_static_pod(client, "cp-a", 2, restarts=1)
    await ic.sync(ctx)
    assert (await node_statuses(kit, client))["cp-a"]["targetRevision"] == 2  # not yet a failure
    await crash_static_pod(client, "cp-a", 2, restarts=3)
    await ic.sync(ctx)
    a = (await node_statuses(kit, client))["cp-a"]
    assert a["lastFailedReason"] == "OperandFailed" and a["lastFailedRevision"] == 2
    assert a["lastFailedRevisionErrors"] == ["kube-scheduler: restarted 3 times; last: bad flag --nope"]
    assert not a.get("targetRevision")
    degraded = await cond(kit, client, "NodeInstallerDegraded")
    assert (degraded["status"], degraded["reason"]) == ("True", "OperandFailed")
    for _ in range(3):  # cp-b keeps revision 1: the bad revision goes nowhere else
        await ic.sync(ctx)
    assert "installer-2-cp-b" not in await pod_names(client)
    assert (await node_statuses(kit, client))["cp-b"]["currentRevision"] == 1
    # A fixed configuration: revision 3 goes to cp-a first, then on.
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "fixed"})
    await rc.sync(ctx)
    await ic.sync(ctx)
    assert "installer-3-cp-a" in await pod_names(client)


async def test_back_to_managed_reinstalls_a_removed_static_pod(
    two_nodes: c.OperatorContext, kit: Any
) -> None:
    ctx, client = two_nodes, two_nodes.client
    ic = InstallerController()
    await RevisionController().sync(ctx)
    for node in ("cp-a", "cp-b"):
        await ic.sync(ctx)
        await set_phase(client, f"installer-1-{node}", "Succeeded")
        await run_static_pod(client, node, 1)
        await ic.sync(ctx)
    # managementState Removed took cp-a's static pod away (its mirror pod is gone); back to Managed:
    await client.delete("v1", "pods", "kube-scheduler-cp-a", namespace=NS, grace_period_seconds=0)
    await ic.sync(ctx)
    statuses = await node_statuses(kit, client)
    assert statuses["cp-a"]["targetRevision"] == 1 and statuses["cp-a"]["currentRevision"] == 1
    pod = await client.get("v1", "pods", "installer-1-cp-a", namespace=NS)
    assert pod_phase_of(pod) != "Succeeded"  # a fresh installer pod, not the finished one
    await set_phase(client, "installer-1-cp-a", "Succeeded")
    await run_static_pod(client, "cp-a", 1)
    await ic.sync(ctx)
    assert not (await node_statuses(kit, client))["cp-a"].get("targetRevision")


def pod_phase_of(pod: dict[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")
