"""The status controller: union of sub-conditions (as library-go's), inertia, management states, the
ClusterOperator's relatedObjects/versions, the KubeScheduler's top-level status, OperatorStatusChanged."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.operator import contract as c
from kubesched.operator.status import (
    GOOD,
    StatusController,
    condition,
    find_condition,
    merge_conditions,
    now_rfc3339,
    union_condition,
)

NOW = 1_800_000_000.0


def sub(type_: str, status: str, reason: str = "R", message: str = "", age: float = 1000.0) -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": now_rfc3339(lambda: NOW - age),
    }


def test_union_no_data_and_good() -> None:
    assert union_condition("Degraded", [], NOW)["status"] == "Unknown"
    assert union_condition("Degraded", [], NOW)["reason"] == "NoData"
    good = union_condition("Degraded", [sub("RevisionControllerDegraded", "False")], NOW)
    assert (good["status"], good["reason"], good["message"]) == ("False", "AsExpected", "All is well")
    ok = union_condition(
        "Progressing", [sub("NodeInstallerProgressing", "False", message="1 node is at revision 2")], NOW
    )
    assert ok["message"] == "NodeInstallerProgressing: 1 node is at revision 2"


def test_union_bad_reasons_and_messages() -> None:
    subs = [
        sub("RevisionControllerDegraded", "True", "ContentCreationError", "cannot copy"),
        sub("InstallerControllerDegraded", "True", "Error", "line one\nline two"),
        sub("NodeInstallerDegraded", "False"),
        sub("Degraded", "True"),  # a top-level condition is never a sub-condition
    ]
    got = union_condition("Degraded", subs, NOW)
    assert got["status"] == "True"
    assert got["reason"] == "InstallerController_Error::RevisionController_ContentCreationError"
    assert got["message"] == (
        "InstallerControllerDegraded: line one\nInstallerControllerDegraded: line two\n"
        "RevisionControllerDegraded: cannot copy"
    )
    progressing = union_condition(
        "Progressing",
        [
            sub(
                "NodeInstallerProgressing",
                "True",
                "NodeInstaller",
                "1 node is at revision 1; 0 nodes have achieved new revision 2",
            )
        ],
        NOW,
    )
    assert progressing["status"] == "True" and progressing["reason"] == "NodeInstaller_NodeInstaller"
    assert progressing["message"] == (
        "NodeInstallerProgressing: 1 node is at revision 1; 0 nodes have achieved new revision 2"
    )
    unavailable = union_condition("Available", [sub("StaticPodsAvailable", "False", "ZeroNodesActive")], NOW)
    assert unavailable["status"] == "False" and unavailable["reason"] == "StaticPods_ZeroNodesActive"


def test_degraded_inertia() -> None:
    fresh = [sub("TargetConfigControllerDegraded", "True", "SynchronizationError", "bad", age=30)]
    assert union_condition("Degraded", fresh, NOW, lambda _t: 120)["status"] == "False"
    old = [sub("TargetConfigControllerDegraded", "True", "SynchronizationError", "bad", age=130)]
    assert union_condition("Degraded", old, NOW, lambda _t: 120)["status"] == "True"
    assert union_condition("Degraded", fresh, NOW)["status"] == "True"  # no inertia


def test_merge_keeps_transition_time() -> None:
    first = merge_conditions([], [condition("A", "True", "x", "", lambda: NOW)])
    again = merge_conditions(first, [condition("A", "True", "y", "m", lambda: NOW + 50)])
    assert again[0]["lastTransitionTime"] == first[0]["lastTransitionTime"] and again[0]["reason"] == "y"
    flipped = merge_conditions(first, [condition("A", "False", "z", "", lambda: NOW + 50)])
    assert flipped[0]["lastTransitionTime"] != first[0]["lastTransitionTime"]


async def cluster_operator(client: Any) -> dict[str, Any]:
    return await client.get(c.CLUSTEROPERATOR_API_VERSION, c.CLUSTEROPERATOR_PLURAL, c.CLUSTEROPERATOR_NAME)


def conds(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {x["type"]: (x["status"], x["reason"]) for x in obj["status"]["conditions"]}


async def test_cluster_operator_written(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.patch_kubescheduler_status(
        client,
        {
            "latestAvailableRevision": 2,
            "nodeStatuses": [{"nodeName": "cp-0", "currentRevision": 1, "targetRevision": 2}],
            "conditions": [
                sub("StaticPodsAvailable", "True", "AsExpected", "1 node is active"),
                sub(
                    "NodeInstallerProgressing",
                    "True",
                    "NodeInstaller",
                    "1 node is at revision 1; 0 nodes have achieved new revision 2",
                ),
                sub("NodeInstallerDegraded", "False"),
            ],
        },
    )
    sc = StatusController(version="9.9.9", degraded_inertia=0)
    await sc.sync(op_ctx)
    co = await cluster_operator(client)
    assert conds(co) == {
        "Available": ("True", "AsExpected"),
        "Progressing": ("True", "NodeInstaller_NodeInstaller"),
        "Degraded": ("False", "AsExpected"),
        "Upgradeable": ("True", "AsExpected"),
    }
    progressing = find_condition(co["status"]["conditions"], "Progressing")
    assert progressing is not None
    assert progressing["message"] == (
        "NodeInstallerProgressing: 1 node is at revision 1; 0 nodes have achieved new revision 2"
    )
    assert {"group": "operator.openshift.io", "resource": "kubeschedulers", "name": "cluster"} in co[
        "status"
    ]["relatedObjects"]
    assert co["status"]["versions"] == [
        {"name": "operator", "version": "9.9.9"}
    ]  # operand not rolled out yet
    ks = await kit.get_kubescheduler(client)
    assert conds(ks)["Progressing"] == ("True", "NodeInstaller_NodeInstaller")
    assert ks["status"]["observedGeneration"] == ks["metadata"]["generation"]
    assert ks["status"]["readyReplicas"] == 0

    # The rollout finishes: Progressing False, the operand version appears, an event tells the change.
    await kit.patch_kubescheduler_status(
        client,
        {
            "nodeStatuses": [{"nodeName": "cp-0", "currentRevision": 2}],
            "conditions": merge_conditions(
                ks["status"]["conditions"],
                [
                    sub(
                        "NodeInstallerProgressing",
                        "False",
                        "AllNodesAtLatestRevision",
                        "1 node is at revision 2",
                    )
                ],
            ),
        },
    )
    await sc.sync(op_ctx)
    co = await cluster_operator(client)
    assert conds(co)["Progressing"] == ("False", "AsExpected")
    assert {"name": "kube-scheduler", "version": "9.9.9"} in co["status"]["versions"]
    await op_ctx.recorder.flush(5)
    events = (await client.list_all("events.k8s.io/v1", "events", namespace=c.OPERATOR_NAMESPACE))["items"]
    notes = [e["note"] for e in events if e["reason"] == "OperatorStatusChanged"]
    assert any("Progressing changed from True to False" in n for n in notes)


async def test_unsupported_overrides_make_it_not_upgradeable(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, unsupportedConfigOverrides={"profiles": []})
    await StatusController(degraded_inertia=0).sync(op_ctx)
    co = await cluster_operator(client)
    assert conds(co)["Upgradeable"] == ("False", "UnsupportedConfigOverrides_UnsupportedConfigOverridesSet")


@pytest.mark.parametrize(
    ("state", "expected"),
    [
        (
            "Unmanaged",
            {t: ("Unknown", "Unmanaged") for t in ("Available", "Progressing", "Degraded", "Upgradeable")},
        ),
        (
            "Removed",
            {
                "Available": ("False", "Removed"),
                "Progressing": ("False", "Removed"),
                "Degraded": ("False", "Removed"),
                "Upgradeable": ("True", "Removed"),
            },
        ),
    ],
)
async def test_management_states(
    op_ctx: c.OperatorContext, kit: Any, state: str, expected: dict[str, tuple[str, str]]
) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client, managementState=state)
    await StatusController().sync(op_ctx)
    assert conds(await cluster_operator(client)) == expected


sub_condition = st.builds(
    lambda prefix, suffix, status, reason: {
        "type": prefix + suffix,
        "status": status,
        "reason": reason,
        "message": f"{prefix} says {status}",
        "lastTransitionTime": now_rfc3339(lambda: NOW - 3600),
    },
    st.sampled_from(["NodeInstaller", "RevisionController", "StaticPods", "TargetConfigController"]),
    st.sampled_from(["Degraded", "Progressing", "Available", "Upgradeable"]),
    st.sampled_from(["True", "False", "Unknown"]),
    st.sampled_from(["Error", "AsExpected", "InstallerPodFailed"]),
)


@given(st.lists(sub_condition, max_size=8, unique_by=lambda x: x["type"]), st.sampled_from(list(GOOD)))
def test_union_properties(subs: list[dict[str, Any]], type_: str) -> None:
    got = union_condition(type_, subs, NOW)
    mine = [x for x in subs if x["type"].endswith(type_)]
    bad = [x for x in mine if x["status"] != GOOD[type_]]
    if not mine:
        assert (got["status"], got["reason"]) == ("Unknown", "NoData")
    elif not bad:
        assert (got["status"], got["reason"]) == (GOOD[type_], "AsExpected")
    else:
        opposite = "False" if GOOD[type_] == "True" else "True"
        expected = opposite if any(x["status"] == opposite for x in bad) else "Unknown"
        assert got["status"] == expected
        assert got["reason"].split("::") == sorted(f"{x['type'][: -len(type_)]}_{x['reason']}" for x in bad)
        assert got["message"].splitlines() == [
            f"{x['type']}: {x['message']}" for x in sorted(bad, key=lambda x: x["type"])
        ]
