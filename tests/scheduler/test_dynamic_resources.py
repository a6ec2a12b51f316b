"""DynamicResources: upstream's answers for pods without resource claims, a plain refusal for pods with
them, and its place in the 1.36 default profile (``no new claims to deallocate`` in FailedScheduling)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.config import default_config
from kubesched.scheduler.framework import Code, CycleState, Framework, Handle, NodeToStatus, fit_error_message
from kubesched.scheduler.plugins import IN_TREE_MODULES, in_tree_catalogue
from kubesched.scheduler.plugins.dynamic_resources import (
    NO_CLAIMS_TO_DEALLOCATE,
    DynamicResources,
    resource_claim_names,
)
from kubesched.scheduler.queue import Nominator

OBSERVED_136_MESSAGE = (
    "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). no new claims to "
    "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)
UNSUPPORTED = (
    "pod has resource claims (gpu, nic), but dynamic resource allocation is not supported by kubesched"
)


def node(name: str, cpu: str, taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def pod(cpu: str = "1", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": "p-uid"},
        "spec": {
            "containers": [{"name": "c", "image": "app:1", "resources": {"requests": {"cpu": cpu}}}],
            **spec,
        },
    }


CLAIMS = [{"name": "gpu", "resourceClaimName": "gpu-0"}, {"name": "nic", "resourceClaimTemplateName": "nic"}]


def default_framework(cache: Cache) -> Framework:
    handle = Handle(cache=cache, nominator=Nominator())
    return Framework.from_profile(default_config().profiles[0], in_tree_catalogue(), handle, seed=1)


# --- the plugin's answers -----------------------------------------------------------------------------------


async def test_a_pod_without_claims_passes_and_post_filter_has_nothing_to_deallocate() -> None:
    cache = Cache()
    cache.on_node_add(node("n1", "4"))
    plugin = DynamicResources()
    pi = cache.pod_info(pod())
    state = CycleState()
    assert plugin.pre_enqueue(pi).ok
    result, status = plugin.pre_filter(state, pi, cache.table)
    assert result is None and status.is_skip  # upstream: Skip, so Filter is not run for this pod
    assert plugin.filter(state, pi, cache.table, np.array([0], dtype=np.intp)).ok.all()
    assert plugin.reserve(state, pi, "n1").ok
    assert (await plugin.pre_bind(state, pi, "n1")).ok
    nominated, status = await plugin.post_filter(state, pi, cache.table, NodeToStatus())
    assert nominated is None
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE, [NO_CLAIMS_TO_DEALLOCATE])


async def test_a_pod_with_claims_is_refused_as_unresolvable() -> None:
    cache = Cache()
    cache.on_node_add(node("n1", "4"))
    plugin = DynamicResources()
    pi = cache.pod_info(pod(resourceClaims=CLAIMS))
    assert resource_claim_names(pi.pod) == ["gpu", "nic"]
    assert plugin.pre_enqueue(pi).ok  # let in, so that it gets a FailedScheduling event saying why
    _, status = plugin.pre_filter(CycleState(), pi, cache.table)
    assert (status.code, status.reasons) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [UNSUPPORTED])
    verdict = plugin.filter(CycleState(), pi, cache.table, np.array([0], dtype=np.intp))
    assert (
        not verdict.ok.any()
        and list(verdict.reasons) == [UNSUPPORTED]
        and list(verdict.unresolvable) == [True]
    )
    assert plugin.events_to_register() == []  # claims of a pod are immutable: no event can help


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
    assert [r.name for r in plugins.pre_filter][-1] == "DynamicResources"
    assert [r.name for r in plugins.filter][-1] == "DynamicResources"
    assert [r.name for r in plugins.reserve] == [r.name for r in plugins.pre_bind] == ["DynamicResources"]


# --- the observed FailedScheduling message, built by the framework ------------------------------------------


async def test_framework_produces_the_failed_scheduling_message_observed_on_136() -> None:
    # One node too small for the pod's cpu at all (unresolvable: preemption cannot help there), one with a
    # NoSchedule taint the pod does not tolerate.
    cache = Cache()
    cache.on_node_add(node("small", "2"))
    cache.on_node_add(node("tainted", "8", [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]))
    fw = default_framework(cache)
    pi = cache.pod_info(pod(cpu="4"))
    state = CycleState()
    result = fw.schedule(state, pi)
    assert result.node is None
    nominated, post_filter = await fw.run_post_filter(state, pi, result.diagnosis)
    assert not nominated
    assert post_filter.reasons == [
        "no new claims to deallocate",
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.",
    ]
    message = fit_error_message(cache.table.num_nodes, result.diagnosis, ", ".join(post_filter.reasons))
    assert message == OBSERVED_136_MESSAGE


async def test_framework_message_for_a_pod_with_claims() -> None:
    cache = Cache()
    cache.on_node_add(node("n1", "4"))
    cache.on_node_add(node("n2", "4"))
    fw = default_framework(cache)
    pi = cache.pod_info(pod(resourceClaims=CLAIMS))
    state = CycleState()
    result = fw.schedule(state, pi)
    assert result.node is None
    assert result.diagnosis.plugins == {"DynamicResources"}  # what the queue waits on: nothing moves it
    _, post_filter = await fw.run_post_filter(state, pi, result.diagnosis)
    assert fit_error_message(2, result.diagnosis, ", ".join(post_filter.reasons)) == (
        f"0/2 nodes are available: {UNSUPPORTED}. no new claims to deallocate, preemption: 0/2 nodes are "
        "available: 2 Preemption is not helpful for scheduling."
    )


async def test_a_pod_without_claims_still_schedules_with_the_default_profile() -> None:
    cache = Cache()
    cache.on_node_add(node("n1", "4"))
    fw = default_framework(cache)
    pi = cache.pod_info(pod())
    state = CycleState()
    result = fw.schedule(state, pi)
    assert result.node == "n1"
    assert "DynamicResources" in state.skip_filter
    assert fw.run_reserve(state, pi, "n1").ok
    assert (await fw.run_pre_bind(state, pi, "n1")).ok
