"""VolumeZone, transcribed from upstream's ``volume_zone_test.go`` (TestSingleZone, TestMultiZone, TestWithBinding):
PV zone/region labels against node labels, beta and GA keys, ``__``-joined zone sets, and the PreFilter answers
for unbound claims."""

from __future__ import annotations

from typing import Any

import pytest
from volume_objects import node, pod, pvc, run_plugin, storage_class

from kubesched.scheduler.plugins.volume_zone import REASON, VolumeZone

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"


def labelled_pv(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"kind": "PersistentVolume", "metadata": {"name": name, "labels": labels}, "spec": {}}


def bound_claim(name: str, volume: str) -> dict[str, Any]:
    return pvc(name, volume=volume)


SINGLE = [
    labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    labelled_pv("Vol_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}),
    labelled_pv("Vol_3", {BETA_REGION: "us-west1"}),
    labelled_pv("Vol_Stable_1", {ZONE: "us-west1-a"}),
    labelled_pv("Vol_Stable_2", {REGION: "us-west1", "uselessLabel": "none"}),
    labelled_pv("Vol_Stable_3", {ZONE: "us-west1-a", REGION: "us-west1-a"}),
    labelled_pv("Vol_3_multi", {BETA_ZONE: "us-west1-c__us-west1-a"}),
    labelled_pv("Vol_Stable_2_multi", {ZONE: "us-west1-c__us-west1-a"}),
    bound_claim("PVC_1", "Vol_1"),
    bound_claim("PVC_2", "Vol_2"),
    bound_claim("PVC_3", "Vol_3"),
    bound_claim("PVC_Stable_1", "Vol_Stable_1"),
    bound_claim("PVC_Stable_2", "Vol_Stable_2"),
    bound_claim("PVC_Stable_3", "Vol_Stable_3"),
    bound_claim("PVC_multi", "Vol_3_multi"),
    bound_claim("PVC_Stable_multi", "Vol_Stable_2_multi"),
]

CONFLICT = ("UNSCHEDULABLE_AND_UNRESOLVABLE", [REASON])


@pytest.mark.parametrize(
    ("claim", "labels", "rejected"),
    [
        pytest.param("PVC_1", {}, None, id="node without labels"),
        pytest.param(
            "PVC_1", {BETA_ZONE: "us-west1-a", "uselessLabel": "none"}, None, id="beta zone matched"
        ),
        pytest.param(
            "PVC_2", {BETA_REGION: "us-west1", "uselessLabel": "none"}, None, id="beta region matched"
        ),
        pytest.param("PVC_2", {BETA_REGION: "no_us-west1"}, CONFLICT, id="beta region doesn't match"),
        pytest.param("PVC_1", {BETA_ZONE: "no_us-west1-a"}, CONFLICT, id="beta zone doesn't match"),
        pytest.param("PVC_Stable_1", {ZONE: "us-west1-a"}, None, id="zone matched"),
        pytest.param("PVC_Stable_2", {REGION: "us-west1"}, None, id="region matched"),
        pytest.param("PVC_Stable_2", {REGION: "no_us-west1"}, CONFLICT, id="region doesn't match"),
        pytest.param("PVC_Stable_1", {ZONE: "no_us-west1-a"}, CONFLICT, id="zone doesn't match"),
        pytest.param("PVC_Stable_3", {ZONE: "us-west1-a"}, CONFLICT, id="pv zone and region, node only zone"),
        pytest.param("PVC_Stable_1", {BETA_ZONE: "us-west1-a"}, CONFLICT, id="pv GA zone, node beta zone"),
        pytest.param("PVC_1", {ZONE: "us-west1-a"}, None, id="pv beta label, node GA label, matched"),
        pytest.param("PVC_1", {ZONE: "us-west1-b"}, CONFLICT, id="pv beta label, node GA label, no match"),
        pytest.param("PVC_multi", {BETA_ZONE: "us-west1-a"}, None, id="multi-zone beta matched"),
        pytest.param("PVC_Stable_multi", {ZONE: "us-west1-a"}, None, id="multi-zone GA matched"),
        pytest.param("PVC_Stable_1", {ZONE: "us-west1-b"}, CONFLICT, id="multi: zone doesn't match"),
    ],
)
def test_zone_labels(claim: str, labels: dict[str, str], rejected: Any) -> None:
    status, filtered = run_plugin(VolumeZone, [node("host1", labels=labels)], SINGLE, pod("pod_1", claim))
    assert status.ok
    assert filtered.get("host1") == rejected


def test_pod_without_volume_is_skipped() -> None:
    status, _ = run_plugin(
        VolumeZone, [node("host1", labels={BETA_ZONE: "us-west1-a"})], SINGLE, pod("pod_1")
    )
    assert status.is_skip


WITH_BINDING = [
    storage_class("Class_Wait", "WaitForFirstConsumer"),
    {"kind": "StorageClass", "metadata": {"name": "Class_Immediate"}, "provisioner": "p"},
    labelled_pv("Vol_1", {BETA_ZONE: "us-west1-a"}),
    bound_claim("PVC_1", "Vol_1"),
    pvc("PVC_NoSC", "Class_0"),
    pvc("PVC_EmptySC"),
    pvc("PVC_WaitSC", "Class_Wait"),
    pvc("PVC_ImmediateSC", "Class_Immediate"),
]


@pytest.mark.parametrize(
    ("claim", "prefilter"),
    [
        ("PVC_1", None),
        ("PVC_EmptySC", "PersistentVolumeClaim had no pv name and storageClass name"),
        # The live lister's NotFound (upstream's test lister spells the resource "storageclasses").
        ("PVC_NoSC", 'storageclass.storage.k8s.io "Class_0" not found'),
        ("PVC_ImmediateSC", 'VolumeBindingMode not set for StorageClass "Class_Immediate"'),
        ("PVC_WaitSC", "skip"),
    ],
)
def test_with_binding(claim: str, prefilter: str | None) -> None:
    host = node("host1", labels={BETA_ZONE: "us-west1-a", "uselessLabel": "none"})
    status, filtered = run_plugin(VolumeZone, [host], WITH_BINDING, pod("pod_1", claim))
    if prefilter is None:
        assert status.ok and filtered == {}
    elif prefilter == "skip":
        assert status.is_skip  # a WaitForFirstConsumer claim has no PV yet: nothing to check
    else:
        assert status.code.name == "UNSCHEDULABLE_AND_UNRESOLVABLE" and status.reasons == [prefilter]


def test_immediate_class_with_mode_set_and_no_volume() -> None:
    objs = [storage_class("imm", "Immediate"), pvc("c", "imm")]
    status, _ = run_plugin(VolumeZone, [node("host1")], objs, pod("p", "c"))
    assert status.reasons == ["PersistentVolume had no name"]
