"""NodeVolumeLimits (CSILimits), transcribed from upstream's ``csi_test.go`` (TestCSILimits): CSINode allocatable
counts per driver, attached volumes of the pods already on the node counted once per volume, claims resolved to
their PV's CSI driver or, unbound, to their class's provisioner; the observed 1.36 message through simulate."""

from __future__ import annotations

from typing import Any

from volume_objects import csi_node, node, place, pod, pv, pvc, run_plugin, storage_class

from kubesched.scheduler.plugins.node_volume_limits import REASON, NodeVolumeLimits

EBS = "ebs.csi.aws.com"
GCE = "pd.csi.storage.gke.io"
EXCEEDED = {"node-1": ("UNSCHEDULABLE", [REASON])}


def objects(limit: int | None, driver: str = EBS) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [storage_class("csi-sc", "Immediate", provisioner=EBS)]
    for i in range(4):
        objs.append(
            pv(f"csi-ebs.csi.aws.com-{i}", "csi-sc", claim=f"csi-ebs.csi.aws.com-{i}", csi_driver=EBS)
        )
        objs.append(pvc(f"csi-ebs.csi.aws.com-{i}", "csi-sc", volume=f"csi-ebs.csi.aws.com-{i}", bound=True))
    objs.append(pv("gce-0", "", claim="gce-0", csi_driver=GCE))
    objs.append(pvc("gce-0", "", volume="gce-0", bound=True))
    objs.append(pvc("unbound-0", "csi-sc"))  # no PV yet: counted against the class's provisioner
    if limit is not None:
        objs.append(csi_node("node-1", driver, limit))
    return objs


def check(limit: int | None, new: list[str], existing: list[str], driver: str = EBS) -> Any:
    placed = [pod("existing", *existing, node_name="node-1")] if existing else []
    status, filtered = run_plugin(
        NodeVolumeLimits, [node("node-1")], objects(limit, driver), pod("new", *new), placed
    )
    assert status.ok
    return filtered


def test_fits_within_the_limit() -> None:
    assert check(4, ["csi-ebs.csi.aws.com-0", "csi-ebs.csi.aws.com-1"], ["csi-ebs.csi.aws.com-2"]) == {}


def test_exceeds_the_limit() -> None:
    assert check(2, ["csi-ebs.csi.aws.com-0", "csi-ebs.csi.aws.com-1"], ["csi-ebs.csi.aws.com-2"]) == EXCEEDED


def test_a_volume_already_attached_counts_once() -> None:
    assert check(2, ["csi-ebs.csi.aws.com-0"], ["csi-ebs.csi.aws.com-0", "csi-ebs.csi.aws.com-1"]) == {}


def test_other_drivers_and_missing_limits_do_not_count() -> None:
    assert check(1, ["gce-0"], ["csi-ebs.csi.aws.com-0"]) == {}  # the limit is for EBS only
    assert check(None, ["csi-ebs.csi.aws.com-0", "csi-ebs.csi.aws.com-1"], ["csi-ebs.csi.aws.com-2"]) == {}
    assert check(1, ["csi-ebs.csi.aws.com-0"], [], driver=GCE) == {}


def test_unbound_claims_count_for_their_class_provisioner() -> None:
    assert check(1, ["unbound-0"], ["csi-ebs.csi.aws.com-0"]) == EXCEEDED
    assert check(2, ["unbound-0"], ["csi-ebs.csi.aws.com-0"]) == {}


def test_pods_without_claims_are_skipped() -> None:
    status, _ = run_plugin(NodeVolumeLimits, [node("node-1")], objects(0), pod("p"))
    assert status.is_skip


async def test_observed_136_message_through_simulate() -> None:
    objs: list[dict[str, Any]] = [node("node-1"), node("node-2"), *objects(None)]
    objs += [csi_node("node-1", EBS, 1), csi_node("node-2", EBS, 1)]
    objs += [
        pod("a", "csi-ebs.csi.aws.com-0", node_name="node-1"),
        pod("b", "csi-ebs.csi.aws.com-1", node_name="node-2"),
        pod("c", "csi-ebs.csi.aws.com-2"),
    ]
    (placement,) = await place(objs)
    assert placement["message"] == (
        "0/2 nodes are available: 2 node(s) exceed max volume count. no new claims to deallocate, preemption: "
        "0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
