"""The revision controller on an in-process cluster: what triggers a revision, what a revision holds, waiting for
inputs, management states, resuming a half-made revision."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator.revision import READY_ANNOTATION, RevisionController, revisioned_inputs
from kubesched.operator.status import find_condition

NS = c.OPERAND_NAMESPACE


async def cm(client: Any, name: str) -> dict[str, Any]:
    return await client.get("v1", "configmaps", name, namespace=NS)


async def latest(kit: Any, client: Any) -> int:
    ks = await kit.get_kubescheduler(client)
    return int((ks.get("status") or {}).get("latestAvailableRevision") or 0)


async def events(client: Any, reason: str) -> list[dict[str, Any]]:
    items = (await client.list_all("events.k8s.io/v1", "events", namespace=c.OPERATOR_NAMESPACE))["items"]
    return [e for e in items if e.get("reason") == reason]


async def test_first_revision_copies_every_input(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    rc = RevisionController()
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 1
    status = await cm(client, "revision-status-1")
    assert status["data"]["revision"] == "1"
    assert status["data"]["reason"] == "initial revision"
    assert status["metadata"]["annotations"][READY_ANNOTATION] == "true"
    inputs = kit.sample_inputs()
    for inp in revisioned_inputs():
        if inp.optional:
            with pytest.raises(ApiError):  # optional and absent: no copy
                await client.get("v1", inp.plural, f"{inp.name}-1", namespace=NS)
            continue
        copy = await client.get("v1", inp.plural, f"{inp.name}-1", namespace=NS)
        assert copy["data"] == inputs[inp.name]
        (owner,) = copy["metadata"]["ownerReferences"]
        assert owner["name"] == "revision-status-1" and owner["uid"] == status["metadata"]["uid"]
    # Nothing changed: no revision 2.
    await rc.sync(op_ctx)
    assert rc.last_outcome == "current"
    assert await latest(kit, client) == 1
    await op_ctx.recorder.flush(5)
    (triggered,) = await events(client, "RevisionTriggered")
    assert "new revision 1" in triggered["note"]
    assert await events(client, "RevisionCreated")


@pytest.mark.parametrize("inp", revisioned_inputs(), ids=lambda i: i.name)
async def test_each_input_triggers_a_revision(op_ctx: c.OperatorContext, kit: Any, inp: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    rc = RevisionController()
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 1
    await kit.put_input(client, inp.name, {"changed": "eHl6"})  # valid base64 for secrets too
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 2
    reason = (await cm(client, "revision-status-2"))["data"]["reason"]
    what = "has been created" if inp.optional else "has changed"
    assert reason == f"{'optional' if inp.optional else 'required'} {inp.kind}/{inp.name} {what}"
    copy = await client.get("v1", inp.plural, f"{inp.name}-2", namespace=NS)
    assert copy["data"] == {"changed": "eHl6"}


async def test_missing_required_input_waits(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    inputs = kit.sample_inputs()
    del inputs[c.CONFIG_CONFIGMAP]
    for name, data in inputs.items():
        await kit.put_input(client, name, data)
    rc = RevisionController()
    await rc.sync(op_ctx)
    assert rc.last_outcome == "waiting"
    assert await latest(kit, client) == 0
    names = [x["metadata"]["name"] for x in (await client.list("v1", "configmaps", namespace=NS))["items"]]
    assert not [n for n in names if n.startswith("revision-status-") or n.endswith("-1")]
    ks = await kit.get_kubescheduler(client)
    cond = find_condition(ks["status"]["conditions"], "RevisionControllerDegraded")
    assert cond and cond["status"] == "True" and cond["reason"] == "RequiredInputsMissing"
    assert "configmap/config" in cond["message"]
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "x"})
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 1
    ks = await kit.get_kubescheduler(client)
    assert find_condition(ks["status"]["conditions"], "RevisionControllerDegraded")["status"] == "False"  # type: ignore[index]


@pytest.mark.parametrize("state", ["Unmanaged", "Removed"])
async def test_not_managed_changes_nothing(op_ctx: c.OperatorContext, kit: Any, state: str) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.patch_kubescheduler_spec(client, {"managementState": state})
    await kit.put_inputs(client)
    rc = RevisionController()
    await rc.sync(op_ctx)
    assert rc.last_outcome == "unmanaged"
    assert await latest(kit, client) == 0


async def test_force_state_reconciles(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, managementState="Force")
    await kit.put_inputs(client)
    await RevisionController().sync(op_ctx)
    assert await latest(kit, client) == 1


async def test_force_redeployment_reason(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    rc = RevisionController()
    await rc.sync(op_ctx)
    await kit.patch_kubescheduler_spec(client, {"forceRedeploymentReason": "rotate-1"})
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 2
    assert "forced redeployment" in (await cm(client, "revision-status-2"))["data"]["reason"]
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 2
    # When the pod configmap carries the reason (the config side copies it), its change is what triggers.
    pod = kit.sample_inputs()[c.POD_CONFIGMAP] | {"forceRedeploymentReason": "rotate-2"}
    await kit.patch_kubescheduler_spec(client, {"forceRedeploymentReason": "rotate-2"})
    await kit.put_input(client, c.POD_CONFIGMAP, pod)
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 3
    assert (await cm(client, "revision-status-3"))["data"]["reason"] == (
        "required configmap/kube-scheduler-pod has changed"
    )


async def test_half_made_revision_is_completed(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    rc = RevisionController()
    await rc.sync(op_ctx)
    # A crash after revision-status-2 and one copy were written, before the ready mark.
    await client.create(
        "v1",
        "configmaps",
        {
            "metadata": {"name": "revision-status-2", "annotations": {READY_ANNOTATION: "false"}},
            "data": {"revision": "2", "reason": "x", "status": "InProgress"},
        },
        namespace=NS,
    )
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "new"})
    await client.create(
        "v1", "configmaps", {"metadata": {"name": "config-2"}, "data": {"config.yaml": "stale"}}, namespace=NS
    )
    await rc.sync(op_ctx)
    assert await latest(kit, client) == 2
    status = await cm(client, "revision-status-2")
    assert status["metadata"]["annotations"][READY_ANNOTATION] == "true"
    assert (await cm(client, "config-2"))["data"] == {"config.yaml": "new"}
    assert (await cm(client, "config-2"))["metadata"]["ownerReferences"][0]["uid"] == status["metadata"][
        "uid"
    ]
    with pytest.raises(ApiError):
        await cm(client, "revision-status-3")


async def test_deleting_revision_status_removes_its_copies(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    await RevisionController().sync(op_ctx)
    await client.delete(
        "v1", "configmaps", "revision-status-1", namespace=NS, propagation_policy="Background"
    )

    async def gone() -> bool:
        try:
            await cm(client, "config-1")
        except ApiError as e:
            return e.is_not_found()
        return False

    await kit.eventually(gone, "config-1 to be garbage-collected", timeout=30)
