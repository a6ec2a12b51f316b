"""VolumeBinding: cases transcribed from upstream's ``volume_binding_test.go`` (PreFilter/Filter statuses) and the
FailedScheduling messages a real 1.36 gave on the same objects (kubernetes-1.36-observed.md), through
``simulate`` (the whole framework, as the live scheduler runs it); Reserve's assumptions; the args."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from volume_objects import (
    THREE_ZONES,
    P,
    place,
    pod,
    pv,
    pvc,
    run_plugin,
    storage_class,
)

from kubesched.scheduler.config import ConfigError, load_config
from kubesched.scheduler.plugins.volume_binding import VolumeBinding
from kubesched.scheduler.volumes.binder import (
    REASON_BIND_CONFLICT,
    REASON_NODE_CONFLICT,
    REASON_NOT_ENOUGH_SPACE,
    REASON_PV_NOT_EXIST,
    UNBOUND_IMMEDIATE,
)

NOT_FOUND = " not found."
DEALLOC = " no new claims to deallocate"


async def message_for(objs: list[dict[str, Any]], nodes: list[dict[str, Any]] = THREE_ZONES) -> str:
    (placement,) = await place([*nodes, *objs])
    assert placement["node"] is None
    return str(placement["message"])


# --- the observed 1.36 messages ---------------------------------------------------------------------------------


async def test_bound_volume_whose_affinity_no_node_meets() -> None:
    objs = [pv("v", zone="zone-x", claim="c", phase="Bound"), pvc("c", volume="v", bound=True), pod("p", "c")]
    assert await message_for(objs) == f"0/3 nodes are available: 3 {REASON_NODE_CONFLICT}.{DEALLOC}{P}"


async def test_unbound_immediate_claim() -> None:
    objs = [storage_class("imm", "Immediate"), pvc("c", "imm"), pod("p", "c")]
    assert await message_for(objs) == f"0/3 nodes are available: {UNBOUND_IMMEDIATE}.{NOT_FOUND}"


async def test_volume_name_without_bind_completed_is_unbound() -> None:
    # A claim counts as bound only with bind-completed; with volumeName alone it is an unbound Immediate one.
    objs = [
        storage_class("imm", "Immediate"),
        pv("v", "imm", claim="c"),
        pvc("c", "imm", volume="v"),
        pod("p", "c"),
    ]
    assert await message_for(objs) == f"0/3 nodes are available: {UNBOUND_IMMEDIATE}.{NOT_FOUND}"


async def test_missing_claim() -> None:
    objs = [pod("p", "missing")]
    assert (
        await message_for(objs)
        == f'0/3 nodes are available: persistentvolumeclaim "missing" not found.{NOT_FOUND}'
    )


async def test_wait_for_first_consumer_without_volume_or_provisioning() -> None:
    objs = [
        storage_class("local", provisioner="kubernetes.io/no-provisioner"),
        pvc("c", "local"),
        pod("p", "c"),
    ]
    assert await message_for(objs) == f"0/3 nodes are available: 3 {REASON_BIND_CONFLICT}.{DEALLOC}{P}"


async def test_storage_capacity_too_small_everywhere() -> None:
    objs = [
        storage_class("fast", provisioner="csi.example.com"),
        {"kind": "CSIDriver", "metadata": {"name": "csi.example.com"}, "spec": {"storageCapacity": True}},
        {
            "kind": "CSIStorageCapacity",
            "metadata": {"name": "cap", "namespace": "default"},
            "storageClassName": "fast",
            "capacity": "1Gi",
            "nodeTopology": {},
        },
        pvc("c", "fast", "5Gi"),
        pod("p", "c"),
    ]
    assert await message_for(objs) == f"0/3 nodes are available: 3 {REASON_NOT_ENOUGH_SPACE}.{DEALLOC}{P}"
    # Enough capacity in one zone only: the pod goes there.
    objs[2] = {
        **objs[2],
        "capacity": "10Gi",
        "nodeTopology": {"matchLabels": {"topology.kubernetes.io/zone": "zone-b"}},
    }
    (placement,) = await place([*THREE_ZONES, *objs])
    assert placement["node"] == "node-b"
    assert placement["filtered"] == {n: [REASON_NOT_ENOUGH_SPACE] for n in ("node-a", "node-c")}


async def test_volume_zone_label_no_node_has() -> None:
    volume = pv("v", claim="c", phase="Bound", labels={"topology.kubernetes.io/zone": "zone-x"})
    objs = [volume, pvc("c", volume="v", bound=True), pod("p", "c")]
    assert await message_for(objs) == (
        f"0/3 nodes are available: 3 node(s) had no available volume zone.{DEALLOC}{P}"
    )


# --- upstream's table (volume_binding_test.go) --------------------------------------------------------------------


def test_pod_without_claims_is_skipped() -> None:
    status, _ = run_plugin(VolumeBinding, THREE_ZONES, [], pod("p"))
    assert status.is_skip


def test_all_bound() -> None:
    objs = [pv("pv-a", claim="pvc-a", phase="Bound"), pvc("pvc-a", volume="pv-a", bound=True)]
    status, filtered = run_plugin(VolumeBinding, THREE_ZONES, objs, pod("p", "pvc-a"))
    assert status.ok and filtered == {}


def test_part_of_the_claims_missing() -> None:
    objs = [pv("pv-a", claim="pvc-a", phase="Bound"), pvc("pvc-a", volume="pv-a", bound=True)]
    status, _ = run_plugin(VolumeBinding, THREE_ZONES, objs, pod("p", "pvc-a", "pvc-b"))
    assert status.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE"
    assert status.reasons == ['persistentvolumeclaim "pvc-b" not found']


def test_bound_and_unbound_unsatisfied() -> None:
    objs = [
        storage_class("wait", provisioner="kubernetes.io/no-provisioner"),
        pv("pv-a", zone="zone-b", claim="pvc-a", phase="Bound"),
        pvc("pvc-a", volume="pv-a", bound=True),
        pvc("pvc-b", "wait"),
        pv("pv-b", "wait", zone="zone-a"),
    ]
    _, filtered = run_plugin(VolumeBinding, THREE_ZONES, objs, pod("p", "pvc-a", "pvc-b"))
    u = "UNSCHEDULABLE_AND_UNRESOLVABLE"
    assert filtered == {
        "node-a": (u, [REASON_NODE_CONFLICT]),
        "node-b": (u, [REASON_BIND_CONFLICT]),
        "node-c": (u, [REASON_NODE_CONFLICT, REASON_BIND_CONFLICT]),
    }


def test_bound_claim_whose_volume_is_gone() -> None:
    objs = [pvc("pvc-a", volume="pv-a", bound=True)]
    _, filtered = run_plugin(VolumeBinding, THREE_ZONES, objs, pod("p", "pvc-a"))
    expected = ("UNSCHEDULABLE_AND_UNRESOLVABLE", [REASON_NODE_CONFLICT, REASON_PV_NOT_EXIST])
    assert filtered == {n: expected for n in ("node-a", "node-b", "node-c")}


def test_lost_and_deleted_claims() -> None:
    lost = pvc("pvc-a", volume="pv-a", phase="Lost")
    status, _ = run_plugin(VolumeBinding, THREE_ZONES, [lost], pod("p", "pvc-a"))
    assert status.reasons == ['persistentvolumeclaim "pvc-a" bound to non-existent persistentvolume "pv-a"']
    gone = pvc("pvc-a")
    gone["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    status, _ = run_plugin(VolumeBinding, THREE_ZONES, [gone], pod("p", "pvc-a"))
    assert status.reasons == ['persistentvolumeclaim "pvc-a" is being deleted']


def test_local_volume_restricts_the_nodes() -> None:
    objs = [
        pv("pv-a", hostname="node-b", claim="pvc-a", phase="Bound"),
        pvc("pvc-a", volume="pv-a", bound=True),
    ]
    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.framework.handle import Handle
    from kubesched.scheduler.framework.interface import CycleState
    from kubesched.scheduler.volumes.listers import static_volumes

    cache = Cache()
    for n in THREE_ZONES:
        cache.on_node_add(n)
    plugin = VolumeBinding(None, Handle(cache=cache, volumes=static_volumes(objs)))
    result, status = plugin.pre_filter(CycleState(), cache.pod_info(pod("p", "pvc-a")), cache.table)
    assert status.ok and result is not None and result.node_names == {"node-b"}


async def test_local_volume_message_names_the_plugin() -> None:
    objs = [
        pv("pv-a", hostname="node-b", claim="pvc-a", phase="Bound"),
        pvc("pvc-a", volume="pv-a", bound=True),
    ]
    (placement,) = await place([*THREE_ZONES, *objs, pod("p", "pvc-a")])
    assert placement["node"] == "node-b"
    objs[0] = pv("pv-a", hostname="node-x", claim="pvc-a", phase="Bound")
    message = await message_for([*objs, pod("p", "pvc-a")])
    assert message.startswith("0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [VolumeBinding].")


# --- matching, Reserve and assumptions ---------------------------------------------------------------------------


async def test_smallest_fitting_volume_and_no_volume_taken_twice() -> None:
    objs = [
        storage_class("local", provisioner="kubernetes.io/no-provisioner"),
        pv("big", "local", "10Gi", hostname="node-a"),
        pv("small", "local", "2Gi", hostname="node-a"),
        pv("tiny", "local", "500Mi", hostname="node-a"),
        pvc("c1", "local", "1Gi"),
        pvc("c2", "local", "1Gi"),
        pvc("c3", "local", "1Gi"),
        pod("p1", "c1"),
        pod("p2", "c2"),
        pod("p3", "c3"),
    ]
    placements = await place([*THREE_ZONES, *objs])
    assert [p["node"] for p in placements] == ["node-a", "node-a", None]
    # p1 took "small" (the smallest that fits), p2 the next ("big"), p3 finds nothing left.
    assert placements[2]["message"] == f"0/3 nodes are available: 3 {REASON_BIND_CONFLICT}.{DEALLOC}{P}"


def test_reserve_assumes_and_unreserve_restores() -> None:
    from kubesched.scheduler.cache import Cache
    from kubesched.scheduler.framework.handle import Handle
    from kubesched.scheduler.framework.interface import CycleState
    from kubesched.scheduler.volumes.listers import static_volumes

    objs = [
        storage_class("local", provisioner="kubernetes.io/no-provisioner"),
        storage_class("std", provisioner="csi.example.com"),
        pv("only", "local", "1Gi", hostname="node-a"),
        pvc("c1", "local"),
        pvc("c2", "local"),
        pvc("d", "std"),
    ]
    cache = Cache()
    for n in THREE_ZONES:
        cache.on_node_add(n)
    plugin = VolumeBinding(None, Handle(cache=cache, volumes=static_volumes(objs)))
    idx = np.array(sorted(cache.table.index.values()), dtype=np.intp)

    def feasible(name: str, *claims: str) -> tuple[CycleState, list[str]]:
        state = CycleState()
        pi = cache.pod_info(pod(name, *claims))
        _, status = plugin.pre_filter(state, pi, cache.table)
        assert status.ok
        ok = plugin.filter(state, pi, cache.table, idx).reason_bits == 0
        return state, [cache.table.names[s] or "" for s in idx[ok].tolist()]

    state, nodes = feasible("p1", "c1", "d")
    assert nodes == ["node-a"]
    pi1 = cache.pod_info(pod("p1", "c1", "d"))
    assert plugin.reserve(state, pi1, "node-a").ok
    assumed_pv = plugin.view.volume("only")
    assert assumed_pv is not None and assumed_pv["spec"]["claimRef"]["name"] == "c1"
    assumed_claim = plugin.view.claim("default", "d")
    assert assumed_claim is not None
    assert assumed_claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == "node-a"
    assert feasible("p2", "c2")[1] == []  # the only PV is taken
    plugin.unreserve(state, pi1, "node-a")
    assert feasible("p2", "c2")[1] == ["node-a"]
    assert (
        "volume.kubernetes.io/selected-node"
        not in (plugin.view.claim("default", "d") or {})["metadata"]["annotations"]
    )


async def test_volume_binding_does_not_score() -> None:
    objs = [storage_class("std", provisioner="csi.example.com"), pvc("c", "std"), pod("p", "c")]
    (placement,) = await place([*THREE_ZONES, *objs])
    assert placement["node"] is not None
    for scores in placement["scores"].values():
        assert "VolumeBinding" not in scores and scores["DynamicResources"] == 0


def test_args() -> None:
    doc = (
        "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\nprofiles:\n"
        "- pluginConfig:\n  - name: VolumeBinding\n    args: {bindTimeoutSeconds: %s}\n"
    )
    config = load_config(doc % "30")
    assert config.profiles[0].args("VolumeBinding").bind_timeout_seconds == 30
    assert load_config(doc % "600").profiles[0].args("VolumeBinding").shape is None
    with pytest.raises(ConfigError) as info:
        load_config(doc % "-1")
    assert "invalid BindTimeoutSeconds, should not be a negative value" in str(info.value)
    with pytest.raises(ConfigError) as info:
        load_config(doc.replace("{bindTimeoutSeconds: %s}", "{shape: [{utilization: 0, score: 0}]}"))
    assert "unsupported when StorageCapacityScoring feature is disabled" in str(info.value)


def test_queueing_events() -> None:
    events = {(e.resource, e.action) for e in VolumeBinding().events_to_register()}
    assert {
        ("PersistentVolumeClaim", "Add"),
        ("PersistentVolume", "Update"),
        ("StorageClass", "Add"),
    } <= events
    assert {("CSINode", "Add"), ("CSIStorageCapacity", "Update"), ("Node", "UpdateNodeLabel")} <= events


def test_node_in_a_zone_with_a_provisioned_volume() -> None:
    # A claim whose selected-node names one node (provisioning under way) fits only that node.
    objs = [storage_class("std", provisioner="csi.example.com")]
    objs.append(pvc("c", "std", annotations={"volume.kubernetes.io/selected-node": "node-c"}))
    _, filtered = run_plugin(VolumeBinding, THREE_ZONES, objs, pod("p", "c"))
    assert sorted(filtered) == ["node-a", "node-b"]
    assert filtered["node-a"] == ("UNSCHEDULABLE_AND_UNRESOLVABLE", [REASON_BIND_CONFLICT])


def test_simulate_command_reads_storage_objects(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    import yaml

    from kubesched import cli

    objs = [
        *THREE_ZONES,
        storage_class("standard"),
        pvc("data", "standard"),
        pod("db", "data"),
        pv("pv-z", zone="zone-x", claim="bound", phase="Bound"),
        pvc("bound", volume="pv-z", bound=True),
        pod("stuck", "bound"),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(objs))
    assert cli.main(["simulate", "--cluster", str(path), "-o", "json"]) == 0
    placements = {p["pod"]: p for p in json.loads(capsys.readouterr().out)["placements"]}
    assert placements["default/db"]["node"] in ("node-a", "node-b", "node-c")
    assert placements["default/stuck"]["filtered"] == {
        n: [REASON_NODE_CONFLICT] for n in ("node-a", "node-b", "node-c")
    }
