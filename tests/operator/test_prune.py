"""Pruning: which revisions are kept (upstream's rule, property-tested), and the controller deleting the rest."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kubesched.client.rest import ApiError
from kubesched.operator import contract as c
from kubesched.operator.prune import PruneController, kept_revisions, revision_limit
from kubesched.operator.revision import RevisionController

NS = c.OPERAND_NAMESPACE


def test_limits() -> None:
    assert revision_limit(None) == 5 and revision_limit(0) == 5 and revision_limit(3) == 3
    assert revision_limit(-1) is None
    assert kept_revisions(20, [], {"succeededRevisionLimit": -1}) is None


def test_keep_set_examples() -> None:
    nodes = [{"nodeName": "a", "currentRevision": 12}, {"nodeName": "b", "currentRevision": 12}]
    assert kept_revisions(12, nodes, {}) == {8, 9, 10, 11, 12}
    assert kept_revisions(12, nodes, {"succeededRevisionLimit": 2}) == {11, 12}
    behind = [{"nodeName": "a", "currentRevision": 3, "targetRevision": 12, "lastFailedRevision": 12}]
    assert kept_revisions(12, behind, {"succeededRevisionLimit": 1, "failedRevisionLimit": 2}) == {3, 11, 12}


node_status = st.builds(
    lambda cur, tgt, failed: {
        "nodeName": "n",
        "currentRevision": cur,
        "targetRevision": tgt,
        "lastFailedRevision": failed,
    },
    st.integers(0, 40),
    st.integers(0, 40),
    st.integers(0, 40),
)


@given(
    latest=st.integers(1, 40),
    nodes=st.lists(node_status, max_size=4),
    succeeded=st.integers(1, 8),
    failed=st.integers(1, 8),
)
def test_keep_set_properties(latest: int, nodes: list[dict[str, Any]], succeeded: int, failed: int) -> None:
    keep = kept_revisions(latest, nodes, {"succeededRevisionLimit": succeeded, "failedRevisionLimit": failed})
    assert keep is not None
    assert latest in keep
    for ns in nodes:
        for key in ("currentRevision", "targetRevision", "lastFailedRevision"):
            if ns[key]:
                assert ns[key] in keep  # never a node's current, target or last failed revision
    assert all(n >= 1 for n in keep)
    bound = max(succeeded, failed) * (1 + 3 * len(nodes)) + 1
    assert len(keep) <= bound


async def test_controller_prunes_old_revisions(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, succeededRevisionLimit=2, failedRevisionLimit=1)
    await kit.put_inputs(client)
    rc = RevisionController()
    for i in range(6):
        await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": f"v{i}"})
        await rc.sync(op_ctx)
    await kit.patch_kubescheduler_status(
        client,
        {"nodeStatuses": [{"nodeName": "cp-a", "currentRevision": 2, "targetRevision": 6}]},
    )
    pc = PruneController()
    await pc.sync(op_ctx)
    # Kept: latest-2+1..6 (5, 6, some node is behind), current 1..2, target 5..6.
    assert pc.deleted == [3, 4]
    names = {x["metadata"]["name"] for x in (await client.list("v1", "configmaps", namespace=NS))["items"]}
    assert {f"revision-status-{n}" for n in (1, 2, 5, 6)} <= names
    assert not {"revision-status-3", "revision-status-4"} & names

    async def copies_gone() -> bool:
        for n in (3, 4):
            try:
                await client.get("v1", "configmaps", f"config-{n}", namespace=NS)
                return False
            except ApiError:
                pass
        return True

    await kit.eventually(copies_gone, "the pruned revisions' copies to go", timeout=30)
    await pc.sync(op_ctx)
    assert pc.deleted == []


async def test_pruner_pods_once_a_node_is_done(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, succeededRevisionLimit=2, failedRevisionLimit=2)
    await kit.put_inputs(client)
    rc = RevisionController()
    for i in range(4):
        await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": f"v{i}"})
        await rc.sync(op_ctx)
    await kit.patch_kubescheduler_status(
        client,
        {
            "nodeStatuses": [
                {"nodeName": "cp-a", "currentRevision": 4},
                {"nodeName": "cp-b", "currentRevision": 3, "targetRevision": 4},
            ]
        },
    )
    pc = PruneController(image="kubesched:test")
    await pc.sync(op_ctx)
    pods = (await client.list("v1", "pods", namespace=NS))["items"]
    assert [p["metadata"]["name"] for p in pods] == ["revision-pruner-4-cp-a"]  # cp-b is still installing
    (pod,) = pods
    assert pod["spec"]["nodeName"] == "cp-a" and pod["metadata"]["labels"] == {"app": "pruner"}
    assert pod["spec"]["containers"][0]["args"] == [
        "-v=2",
        "--prune-only",
        "--max-eligible-revision=4",
        "--protected-revisions=2,3,4",
        "--resource-dir=/etc/kubernetes/static-pod-resources",
        "--pod=kube-scheduler-pod",
    ]
    assert pod["metadata"]["ownerReferences"][0]["name"] == "revision-status-4"
    await pc.sync(op_ctx)  # not created twice
    assert len((await client.list("v1", "pods", namespace=NS))["items"]) == 1
