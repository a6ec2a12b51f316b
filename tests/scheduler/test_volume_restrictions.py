"""VolumeRestrictions, transcribed from upstream's ``volume_restrictions_test.go`` (TestGCEDiskConflicts,
TestAWSDiskConflicts, TestRBDDiskConflicts, TestISCSIDiskConflicts, TestAccessModeConflicts), with 1.36's
observed ReadWriteOncePod message; and through ``simulate`` for the whole FailedScheduling text."""

from __future__ import annotations

from typing import Any

import pytest
from volume_objects import node, place, pod, pvc, run_plugin

from kubesched.scheduler.plugins.volume_restrictions import (
    REASON_DISK_CONFLICT,
    REASON_RWOP_CONFLICT,
    VolumeRestrictions,
)


def disk_pod(name: str, vol: dict[str, Any], node_name: str = "") -> dict[str, Any]:
    return pod(name, node_name=node_name, volumes=[{"name": "v", **vol}])


GCE_FOO = {"gcePersistentDisk": {"pdName": "foo"}}
GCE_BAR = {"gcePersistentDisk": {"pdName": "bar"}}
AWS_FOO = {"awsElasticBlockStore": {"volumeID": "foo"}}
AWS_BAR = {"awsElasticBlockStore": {"volumeID": "bar"}}
RBD_1 = {"rbd": {"monitors": ["a", "b"], "pool": "foo", "image": "bar"}}
RBD_2 = {"rbd": {"monitors": ["c", "d"], "pool": "foo", "image": "bar"}}
ISCSI_1 = {
    "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2016-12.server:storage.target01", "lun": 0}
}
ISCSI_2 = {
    "iscsi": {"targetPortal": "127.0.0.1:3260", "iqn": "iqn.2017-12.server:storage.target01", "lun": 0}
}
CONFLICT = ("UNSCHEDULABLE", [REASON_DISK_CONFLICT])


def read_only(vol: dict[str, Any]) -> dict[str, Any]:
    ((kind, src),) = vol.items()
    return {kind: {**src, "readOnly": True}}


@pytest.mark.parametrize(
    ("incoming", "existing", "rejected"),
    [
        pytest.param(GCE_FOO, None, None, id="gce: nothing on the node"),
        pytest.param(GCE_FOO, GCE_FOO, CONFLICT, id="gce: same disk"),
        pytest.param(GCE_FOO, GCE_BAR, None, id="gce: other disk"),
        pytest.param(read_only(GCE_FOO), read_only(GCE_FOO), None, id="gce: both read-only"),
        pytest.param(read_only(GCE_FOO), GCE_FOO, CONFLICT, id="gce: one read-write"),
        pytest.param(AWS_FOO, AWS_FOO, CONFLICT, id="aws: same volume"),
        pytest.param(read_only(AWS_FOO), read_only(AWS_FOO), CONFLICT, id="aws: read-only still conflicts"),
        pytest.param(AWS_FOO, AWS_BAR, None, id="aws: other volume"),
        pytest.param(RBD_1, RBD_1, CONFLICT, id="rbd: same image"),
        pytest.param(RBD_1, RBD_2, None, id="rbd: monitors do not overlap"),
        pytest.param(read_only(RBD_1), read_only(RBD_1), None, id="rbd: both read-only"),
        pytest.param(ISCSI_1, ISCSI_1, CONFLICT, id="iscsi: same iqn"),
        pytest.param(ISCSI_1, ISCSI_2, None, id="iscsi: other iqn"),
        pytest.param(read_only(ISCSI_1), read_only(ISCSI_1), None, id="iscsi: both read-only"),
    ],
)
def test_disk_conflicts(incoming: dict[str, Any], existing: dict[str, Any] | None, rejected: Any) -> None:
    placed = [disk_pod("old", existing, node_name="machine1")] if existing else []
    status, filtered = run_plugin(
        VolumeRestrictions, [node("machine1"), node("machine2")], [], disk_pod("new", incoming), placed
    )
    assert status.ok
    assert filtered.get("machine1") == rejected
    assert "machine2" not in filtered


def test_pods_without_disks_or_claims_are_skipped() -> None:
    status, _ = run_plugin(VolumeRestrictions, [node("machine1")], [], pod("p"))
    assert status.is_skip
    objs = [pvc("rwo", "c")]
    status, _ = run_plugin(VolumeRestrictions, [node("machine1")], objs, pod("p", "rwo"))
    assert status.is_skip  # a claim without ReadWriteOncePod needs no check


RWOP = ("ReadWriteOncePod",)


def test_read_write_once_pod_claim_in_use() -> None:
    objs = [pvc("claim-with-rwop-1", "c", modes=RWOP), pvc("claim-with-rwop-2", "c", modes=RWOP)]
    placed = [pod("user", "claim-with-rwop-1", node_name="node-1")]
    nodes = [node("node-1"), node("node-2")]
    status, filtered = run_plugin(VolumeRestrictions, nodes, objs, pod("p", "claim-with-rwop-1"), placed)
    assert status.ok
    # Every node: the claim is taken wherever the other pod runs (resolvable: preemption may free it).
    assert filtered == {n: ("UNSCHEDULABLE", [REASON_RWOP_CONFLICT]) for n in ("node-1", "node-2")}
    status, filtered = run_plugin(VolumeRestrictions, nodes, objs, pod("p", "claim-with-rwop-2"), placed)
    assert status.is_skip and filtered == {}


def test_missing_claim_is_final() -> None:
    status, _ = run_plugin(VolumeRestrictions, [node("n")], [], pod("p", "claim-with-rwop-missing"))
    assert status.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE"
    assert status.reasons == ['persistentvolumeclaim "claim-with-rwop-missing" not found']


async def test_observed_136_messages_through_simulate() -> None:
    nodes = [node("node-a", "a"), node("node-b", "b"), node("node-c", "c")]
    objs = [
        *nodes,
        {
            "kind": "StorageClass",
            "metadata": {"name": "c"},
            "provisioner": "p",
            "volumeBindingMode": "Immediate",
        },
        {
            "kind": "PersistentVolume",
            "metadata": {"name": "v"},
            "spec": {"capacity": {"storage": "1Gi"}, "accessModes": list(RWOP), "storageClassName": "c"},
            "status": {"phase": "Bound"},
        },
        pvc("rwop", "c", volume="v", bound=True, modes=RWOP),
        pod("first", "rwop", node_name="node-a"),
        pod("second", "rwop"),
    ]
    (placement,) = await place(objs)
    assert placement["message"] == (
        f"0/3 nodes are available: 3 {REASON_RWOP_CONFLICT}. no new claims to deallocate, preemption: 0/3 nodes "
        "are available: 3 No preemption victims found for incoming pod."
    )
