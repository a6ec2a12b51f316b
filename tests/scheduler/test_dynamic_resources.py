"""DynamicResources: upstream's answers (transcribed as facts from the 1.36 plugin's table tests and the
observed default-profile messages), through the plugin and through the framework of the default profile."""

from __future__ import annotations

from typing import Any

import numpy as np
from dra_objects import (
    CLASS,
    DRIVER,
    allocated,
    claim,
    device,
    device_class,
    exactly,
    node,
    pod,
    resource_slice,
)

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.config import default_config
from kubesched.scheduler.dra.objects import DraObjects
from kubesched.scheduler.framework import Code, CycleState, Framework, Handle, NodeToStatus, fit_error_message
from kubesched.scheduler.plugins import IN_TREE_MODULES, in_tree_catalogue
from kubesched.scheduler.plugins.dynamic_resources import (
    CANNOT_ALLOCATE,
    DEALLOCATED,
    IN_USE,
    NO_CLAIMS_TO_DEALLOCATE,
    NOT_AVAILABLE_ON_NODE,
    STILL_NOT_SCHEDULABLE,
    DynamicResources,
    resource_claim_names,
)
from kubesched.scheduler.queue import Nominator

OBSERVED_136_MESSAGE = (
    "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). no new claims to "
    "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)
NOT_HELPFUL = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
CLAIM_REF = [{"name": "my-resource", "resourceClaimName": "my-pod-my-resource"}]
TEMPLATE_REF = [{"name": "my-resource", "resourceClaimTemplateName": "my-template"}]


def setup(
    *objects: dict[str, Any], nodes: tuple[str, ...] = ("worker",)
) -> tuple[Cache, DraObjects, DynamicResources]:
    cache = Cache()
    for n in nodes:
        cache.on_node_add(node(n))
    dra = DraObjects()
    dra.add_all(objects)
    return cache, dra, DynamicResources(None, Handle(cache=cache, dra=dra))


def default_framework(cache: Cache, dra: DraObjects | None = None) -> Framework:
    handle = Handle(cache=cache, nominator=Nominator(), dra=dra or DraObjects())
    return Framework.from_profile(default_config().profiles[0], in_tree_catalogue(), handle, seed=1)


def all_slots(cache: Cache) -> np.ndarray:
    return np.asarray(cache.table.slots(), dtype=np.intp)


def verdicts(plugin: DynamicResources, state: CycleState, cache: Cache, pi: Any) -> dict[str, list[str]]:
    idx = all_slots(cache)
    v = plugin.filter(state, pi, cache.table, idx)
    out: dict[str, list[str]] = {}
    for slot, bits in zip(idx.tolist(), v.reason_bits.tolist(), strict=True):
        out[cache.table.names[slot] or ""] = [r for j, r in enumerate(v.reasons) if bits >> j & 1]
    return out


# --- pods without claims: nothing changes, nothing costs --------------------------------------------------


async def test_a_pod_without_claims_is_skipped_and_has_nothing_to_deallocate() -> None:
    cache, _, plugin = setup()
    pi = cache.pod_info(pod())
    state = CycleState()
    assert plugin.pre_enqueue(pi).ok
    result, status = plugin.pre_filter(state, pi, cache.table)
    assert result is None and status.is_skip
    state.skip_filter.add("DynamicResources")  # what the framework does with a SKIP
    assert plugin.reserve(state, pi, "worker").ok
    assert (await plugin.pre_bind(state, pi, "worker")).ok
    assert not plugin.score(state, pi, cache.table, all_slots(cache)).any()
    _, status = await plugin.post_filter(state, pi, cache.table, NodeToStatus())
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, [NO_CLAIMS_TO_DEALLOCATE])


async def test_post_filter_without_pre_filter_is_the_not_found_error() -> None:
    # Observed: when an earlier PreFilter rejects, DynamicResources' PostFilter adds " not found".
    cache, _, plugin = setup()
    _, status = await plugin.post_filter(CycleState(), cache.pod_info(pod()), cache.table, NodeToStatus())
    assert (status.code, status.reasons) == (Code.ERROR, ["not found"])


# --- PreEnqueue / PreFilter: claims that are not there ----------------------------------------------------


def test_missing_claim_is_held_at_pre_enqueue_with_the_listers_message() -> None:
    cache, _, plugin = setup()
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    assert resource_claim_names(pi.pod) == ["my-resource"]
    s = plugin.pre_enqueue(pi)
    assert (s.code, s.reasons) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ['resourceclaim.resource.k8s.io "my-pod-my-resource" not found'],
    )


def test_template_claim_not_created_yet() -> None:
    cache, _, plugin = setup()
    s = plugin.pre_enqueue(cache.pod_info(pod(claims=TEMPLATE_REF)))
    assert s.reasons == ['pod "default/my-pod": ResourceClaim not created yet']


def test_template_claim_must_be_owned_by_the_pod() -> None:
    p = pod(claims=TEMPLATE_REF, statuses=[{"name": "my-resource", "resourceClaimName": "generated"}])
    cache, _, plugin = setup(claim("generated"))
    assert plugin.pre_enqueue(cache.pod_info(p)).reasons == [
        "ResourceClaim default/generated was not created for pod default/my-pod (pod is not owner)"
    ]
    cache, _, plugin = setup(claim("generated", owner=p))
    assert plugin.pre_enqueue(cache.pod_info(p)).ok


def test_template_that_produced_no_claim_needs_nothing() -> None:
    p = pod(claims=TEMPLATE_REF, statuses=[{"name": "my-resource"}])
    cache, _, plugin = setup()
    state = CycleState()
    assert plugin.pre_enqueue(cache.pod_info(p)).ok
    assert plugin.pre_filter(state, cache.pod_info(p), cache.table)[1].is_skip


def test_deleted_claim() -> None:
    c = claim()
    c["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    cache, _, plugin = setup(c, device_class())
    _, s = plugin.pre_filter(CycleState(), cache.pod_info(pod(claims=CLAIM_REF)), cache.table)
    assert (s.code, s.reasons) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ['resourceclaim "my-pod-my-resource" is being deleted'],
    )


async def test_missing_device_class_and_post_filter_after_a_pre_filter_rejection() -> None:
    cache, _, plugin = setup(claim())
    state = CycleState()
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    _, s = plugin.pre_filter(state, pi, cache.table)
    assert (s.code, s.reasons) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        ["request req-1: device class class does not exist"],
    )
    # Upstream's "missing-class" case: PostFilter has no claims to deallocate after PreFilter rejected.
    _, s = await plugin.post_filter(state, pi, cache.table, NodeToStatus())
    assert s.reasons == [NO_CLAIMS_TO_DEALLOCATE]


def test_claim_reserved_for_too_many_pods_is_in_use() -> None:
    full = allocated(claim(), "worker", "instance-1", reserved=[f"p{i}" for i in range(256)])
    cache, _, plugin = setup(full, device_class())
    _, s = plugin.pre_filter(CycleState(), cache.pod_info(pod(claims=CLAIM_REF)), cache.table)
    assert s.reasons == [IN_USE]


# --- Filter ------------------------------------------------------------------------------------------------


def test_no_resources_cannot_allocate_all_claims_and_post_filter_is_still_not_schedulable() -> None:
    cache, _, plugin = setup(claim(), device_class())
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    assert plugin.pre_filter(state, pi, cache.table)[1].ok
    v = plugin.filter(state, pi, cache.table, all_slots(cache))
    assert v.reason_bits.tolist() == [2] and list(v.reasons)[1] == CANNOT_ALLOCATE and all(v.unresolvable)


async def test_allocation_on_the_node_with_the_device_and_its_result() -> None:
    objs = (claim(), device_class(), resource_slice("worker", device("instance-1")))
    cache, dra, plugin = setup(*objs, nodes=("worker", "worker-2"))
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    assert plugin.pre_filter(state, pi, cache.table)[1].ok
    assert verdicts(plugin, state, cache, pi) == {"worker": [], "worker-2": [CANNOT_ALLOCATE]}
    assert plugin.reserve(state, pi, "worker").ok
    assert (await plugin.pre_bind(state, pi, "worker")).ok
    bound = dra.claim("default", "my-pod-my-resource")
    assert bound is not None
    assert bound["status"] == {
        "allocation": {
            "devices": {
                "results": [{"request": "req-1", "driver": DRIVER, "pool": "worker", "device": "instance-1"}]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["worker"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "my-pod", "uid": "my-pod-uid"}],
    }
    assert "resource.kubernetes.io/delete-protection" in bound["metadata"]["finalizers"]


def test_in_flight_allocation_keeps_the_device_from_the_next_pod() -> None:
    second = claim("other-claim")
    objs = (claim(), second, device_class(), resource_slice("worker", device("instance-1")))
    cache, _, plugin = setup(*objs)
    first_pod = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    plugin.pre_filter(state, first_pod, cache.table)
    assert verdicts(plugin, state, cache, first_pod) == {"worker": []}
    assert plugin.reserve(state, first_pod, "worker").ok
    other = cache.pod_info(pod("other", claims=[{"name": "my-resource", "resourceClaimName": "other-claim"}]))
    state2 = CycleState()
    plugin.pre_filter(state2, other, cache.table)
    assert verdicts(plugin, state2, cache, other) == {"worker": [CANNOT_ALLOCATE]}
    plugin.unreserve(
        state, first_pod, "worker"
    )  # the first pod's cycle failed later: the device is free again
    state3 = CycleState()
    plugin.pre_filter(state3, other, cache.table)
    assert verdicts(plugin, state3, cache, other) == {"worker": []}


def test_allocated_claim_restricts_nodes() -> None:
    objs = (
        allocated(claim(), "worker", "instance-1"),
        device_class(),
        resource_slice("worker", device("instance-1")),
    )
    cache, _, plugin = setup(*objs, nodes=("worker", "worker-2"))
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    assert plugin.pre_filter(state, pi, cache.table)[1].ok
    assert verdicts(plugin, state, cache, pi) == {"worker": [], "worker-2": [NOT_AVAILABLE_ON_NODE]}


async def test_wrong_topology_post_filter_deallocates_a_claim_nobody_uses() -> None:
    objs = (allocated(claim(), "worker-2", "instance-1"), device_class())
    cache, dra, plugin = setup(*objs, nodes=("worker",))
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    plugin.pre_filter(state, pi, cache.table)
    assert verdicts(plugin, state, cache, pi) == {"worker": [NOT_AVAILABLE_ON_NODE]}
    _, s = await plugin.post_filter(state, pi, cache.table, NodeToStatus())
    assert (s.code, s.reasons) == (Code.UNSCHEDULABLE, [DEALLOCATED])
    assert not (dra.claim("default", "my-pod-my-resource") or {}).get("status", {}).get("allocation")


async def test_wrong_topology_claim_in_use_by_another_pod_stays() -> None:
    objs = (allocated(claim(), "worker-2", "instance-1", reserved=["other"]), device_class())
    cache, _, plugin = setup(*objs, nodes=("worker",))
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    plugin.pre_filter(state, pi, cache.table)
    plugin.filter(state, pi, cache.table, all_slots(cache))
    _, s = await plugin.post_filter(state, pi, cache.table, NodeToStatus())
    assert s.reasons == [STILL_NOT_SCHEDULABLE]


async def test_shared_claim_already_allocated_is_only_reserved() -> None:
    objs = (allocated(claim(), "worker", "instance-1", reserved=["other"]), device_class())
    cache, dra, plugin = setup(*objs)
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    plugin.pre_filter(state, pi, cache.table)
    assert verdicts(plugin, state, cache, pi) == {"worker": []}
    assert plugin.reserve(state, pi, "worker").ok
    assert (await plugin.pre_bind(state, pi, "worker")).ok
    bound = dra.claim("default", "my-pod-my-resource") or {}
    assert [r["name"] for r in bound["status"]["reservedFor"]] == ["other", "my-pod"]
    assert bound["status"]["allocation"]["devices"]["results"][0]["device"] == "instance-1"


def test_cel_runtime_error_rejects_the_node_with_the_error() -> None:
    # Upstream's "CEL-runtime-error" cases: the node fails with the error, unresolvable (no traceback, no retry).
    objs = (
        claim(
            requests=[
                exactly("req-1", CLASS, 1, "ExactCount", 'device.attributes["some-driver"].missing == 1')
            ]
        ),
        device_class(),
        resource_slice("worker", device("instance-1")),
    )
    cache, _, plugin = setup(*objs, nodes=("worker", "worker-2"))
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    plugin.pre_filter(state, pi, cache.table)
    assert verdicts(plugin, state, cache, pi) == {
        "worker": ["claim default/my-pod-my-resource: selector #0: CEL runtime error: no such key: missing"],
        "worker-2": [CANNOT_ALLOCATE],
    }


# --- the framework of the default profile ------------------------------------------------------------------


def test_registered_in_tree_and_in_the_136_default_profile() -> None:
    assert "dynamic_resources" in IN_TREE_MODULES
    assert "DynamicResources" in in_tree_catalogue()
    plugins = default_config().profiles[0].plugins
    assert [r.name for r in plugins.post_filter] == ["DynamicResources", "DefaultPreemption"]
    assert [r.name for r in plugins.pre_enqueue] == [
        "SchedulingGates",
        "DynamicResources",
        "DefaultPreemption",
    ]
    assert "DynamicResources" in [r.name for r in plugins.reserve]
    assert "DynamicResources" in [r.name for r in plugins.pre_bind]


async def test_framework_produces_the_failed_scheduling_message_observed_on_136() -> None:
    cache = Cache()
    small = node("small")
    small["status"]["allocatable"]["cpu"] = "2"
    tainted = node("tainted")
    tainted["spec"]["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    cache.on_node_add(small)
    cache.on_node_add(tainted)
    fw = default_framework(cache)
    p = pod()
    p["spec"]["containers"][0]["resources"]["requests"]["cpu"] = "4"
    pi = cache.pod_info(p)
    state = CycleState()
    result = fw.schedule(state, pi)
    assert result.node is None
    _, post_filter = await fw.run_post_filter(state, pi, result.diagnosis)
    message = fit_error_message(cache.table.num_nodes, result.diagnosis, ", ".join(post_filter.reasons))
    assert message == OBSERVED_136_MESSAGE


async def test_framework_message_when_no_node_has_a_free_device() -> None:
    # Observed on 1.36: "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable" + P
    cache = Cache()
    for n in ("a", "b", "c"):
        cache.on_node_add(node(n))
    dra = DraObjects()
    dra.add_all([claim(), device_class()])
    fw = default_framework(cache, dra)
    pi = cache.pod_info(pod(claims=CLAIM_REF))
    state = CycleState()
    result = fw.schedule(state, pi)
    assert result.node is None
    _, post_filter = await fw.run_post_filter(state, pi, result.diagnosis)
    assert fit_error_message(3, result.diagnosis, ", ".join(post_filter.reasons)) == (
        "0/3 nodes are available: 3 cannot allocate all claims. still not schedulable, "
        + NOT_HELPFUL.format(n=3)
    )


def test_scores_list_dynamic_resources_with_zero_for_a_pod_without_claims() -> None:
    cache = Cache()
    cache.on_node_add(node("a"))
    cache.on_node_add(node("b"))
    fw = default_framework(cache)
    result = fw.schedule(CycleState(), cache.pod_info(pod()), record_scores=True)
    assert result.scores is not None
    assert {n: s["DynamicResources"] for n, s in result.scores.items()} == {"a": 0, "b": 0}


def test_first_available_scores_as_observed_200_vs_174() -> None:
    # Node a has the preferred device, b only the second choice: 8 and 7, normalised to 100 and 87, weight 2.
    cls_big = device_class("big", 'device.attributes["some-driver"].model == "big"')
    cls_small = device_class("small", 'device.attributes["some-driver"].model == "small"')
    c = claim(
        requests=[
            {
                "name": "req-1",
                "firstAvailable": [
                    {"name": "big", "deviceClassName": "big"},
                    {"name": "small", "deviceClassName": "small"},
                ],
            }
        ]
    )
    dra = DraObjects()
    dra.add_all(
        [
            c,
            cls_big,
            cls_small,
            resource_slice("a", device("d0", model="big")),
            resource_slice("b", device("d0", model="small")),
        ]
    )
    cache = Cache()
    cache.on_node_add(node("a"))
    cache.on_node_add(node("b"))
    fw = default_framework(cache, dra)
    state = CycleState()
    result = fw.schedule(state, cache.pod_info(pod(claims=CLAIM_REF)), record_scores=True)
    assert result.node == "a"
    assert result.scores is not None
    assert {n: s["DynamicResources"] for n, s in result.scores.items()} == {"a": 200, "b": 174}
