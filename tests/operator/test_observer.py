"""The configuration observer: each profile, defaultNodeSelector, DRA customisation, the policy refusal, the
LoadAware weight, and its sync against the in-process cluster (observedConfig, event, Degraded)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.apimachinery.labels import LabelSelector, Requirement
from kubesched.catalogue import full_catalogue
from kubesched.client.rest import ApiClient
from kubesched.operator import contract as c
from kubesched.operator.merge import merge_config, to_json
from kubesched.operator.observer import (
    DEGRADED_CONDITION,
    LOAD_AWARE_WEIGHT,
    PROFILES,
    ConfigObserver,
    ObservationError,
    config_diff,
    node_selector_affinity,
    observe,
)
from kubesched.operator.targetconfig import default_config
from kubesched.scheduler.config import load_config

Obj = dict[str, Any]


def resolved(observed: Obj) -> Any:
    """The scheduler's view of default + observed: the profile as the scheduler would run it."""
    config = load_config(to_json(merge_config(default_config(), observed)), catalogue=full_catalogue())
    return config.profiles[0]


def score_weights(profile: Any) -> dict[str, int]:
    return {e.name: e.weight for e in profile.plugins.score}


def plugin_args(profile: Any, name: str) -> Any:
    return profile.plugin_args[name]


def test_low_node_utilization_is_the_default() -> None:
    assert observe(None) == observe({"spec": {}}) == observe({"spec": {"profile": "LowNodeUtilization"}})
    assert observe(None) == {"profiles": [{"schedulerName": "default-scheduler"}]}
    prof = resolved(observe(None))
    assert "NodeResourcesBalancedAllocation" in score_weights(prof)
    assert plugin_args(prof, "NodeResourcesFit").scoring_strategy.type == "LeastAllocated"


def test_high_node_utilization_packs() -> None:
    prof = resolved(observe({"spec": {"profile": "HighNodeUtilization"}}))
    weights = score_weights(prof)
    assert weights["NodeResourcesFit"] == 5 and "NodeResourcesBalancedAllocation" not in weights
    assert plugin_args(prof, "NodeResourcesFit").scoring_strategy.type == "MostAllocated"


def test_no_scoring_disables_every_score() -> None:
    prof = resolved(observe({"spec": {"profile": "NoScoring"}}))
    assert score_weights(prof) == {} and prof.plugins.pre_score == ()


def test_load_aware_enables_dynamic_with_a_weight_that_wins() -> None:
    prof = resolved(observe({"spec": {"profile": "LoadAware"}}))
    weights = score_weights(prof)
    assert weights["Dynamic"] == LOAD_AWARE_WEIGHT
    assert "Dynamic" in [e.name for e in prof.plugins.filter]
    # The scores that can differ between nodes for a pod without preferences: each spans 0..100 points.
    varying = ("NodeResourcesFit", "NodeResourcesBalancedAllocation", "ImageLocality", "PodTopologySpread")
    others = sum(weights[name] * 100 for name in varying)
    assert others == 500
    # A load difference of more than 5 points (Dynamic's 0..100 score) outweighs all of them at their extremes.
    assert weights["Dynamic"] * 6 > others >= weights["Dynamic"] * 5
    # ... and a 2-point difference outweighs either resource score over its whole range.
    assert all(weights["Dynamic"] * 2 > weights[name] * 100 for name in varying[:2])


@pytest.mark.parametrize("profile", PROFILES)
def test_default_node_selector_in_every_profile(profile: str) -> None:
    observed = observe({"spec": {"profile": profile, "defaultNodeSelector": "type=user-node,region=east"}})
    prof = resolved(observed)
    added = plugin_args(prof, "NodeAffinity").added_affinity
    terms = added["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [
        {
            "matchExpressions": [
                {"key": "region", "operator": "In", "values": ["east"]},
                {"key": "type", "operator": "In", "values": ["user-node"]},
            ]
        }
    ]


def test_node_selector_operators() -> None:
    exprs = node_selector_affinity("a!=1,b in (x,y),!c,d,e notin (z)")[
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"][0]["matchExpressions"]
    assert exprs == [
        {"key": "a", "operator": "NotIn", "values": ["1"]},
        {"key": "b", "operator": "In", "values": ["x", "y"]},
        {"key": "c", "operator": "DoesNotExist"},
        {"key": "d", "operator": "Exists"},
        {"key": "e", "operator": "NotIn", "values": ["z"]},
    ]


def test_dra_disabled() -> None:
    prof = resolved(observe({"spec": {"profileCustomizations": {"dynamicResourceAllocation": "Disabled"}}}))
    assert "DynamicResources" not in [e.name for e in prof.plugins.filter]
    enabled = resolved(observe({"spec": {"profileCustomizations": {"dynamicResourceAllocation": "Enabled"}}}))
    assert "DynamicResources" in [e.name for e in enabled.plugins.filter]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"profile": "Fastest"}, "spec.profile 'Fastest' not recognized: use one of LowNodeUtilization"),
        ({"defaultNodeSelector": "a b"}, "spec.defaultNodeSelector 'a b' is invalid"),
        ({"policy": {"name": "my-policy"}}, "Policy API has been removed upstream"),
        ({"profileCustomizations": {"dynamicResourceAllocation": "Maybe"}}, "'Maybe' not recognized"),
    ],
)
def test_bad_inputs(spec: Obj, message: str) -> None:
    with pytest.raises(ObservationError, match=message):
        observe({"spec": spec})


def test_diff_names_the_change() -> None:
    diff = config_diff(observe(None), observe({"spec": {"profile": "NoScoring"}}))
    assert "+- plugins:" in diff and "disabled" in diff and diff.startswith("--- observedConfig")


# --- sync against the in-process cluster -------------------------------------------------------------------


async def set_scheduler(client: ApiClient, spec: Obj) -> None:
    body = {
        "apiVersion": c.SCHEDULER_CONFIG_API_VERSION,
        "kind": "Scheduler",
        "metadata": {"name": c.SINGLETON_NAME},
        "spec": spec,
    }
    try:
        current = await client.get(
            c.SCHEDULER_CONFIG_API_VERSION, c.SCHEDULER_CONFIG_PLURAL, c.SINGLETON_NAME
        )
    except Exception:
        await client.create(c.SCHEDULER_CONFIG_API_VERSION, c.SCHEDULER_CONFIG_PLURAL, body)
        return
    body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    await client.replace(c.SCHEDULER_CONFIG_API_VERSION, c.SCHEDULER_CONFIG_PLURAL, c.SINGLETON_NAME, body)


def condition(ks: Obj, type_: str) -> Obj:
    return next(x for x in ks["status"]["conditions"] if x["type"] == type_)


async def events(client: ApiClient, reason: str) -> list[Obj]:
    items = (await client.list("events.k8s.io/v1", "events", namespace=c.OPERATOR_NAMESPACE))["items"]
    return [e for e in items if e.get("reason") == reason]


async def test_sync_writes_observed_config_and_event(op_ctx: c.OperatorContext, kit: Any) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    observer = ConfigObserver()
    await observer.sync(op_ctx)  # no Scheduler object: the defaults
    ks = await kit.get_kubescheduler(client)
    assert ks["spec"]["observedConfig"] == observe(None)
    assert condition(ks, DEGRADED_CONDITION)["status"] == "False"

    await set_scheduler(client, {"profile": "HighNodeUtilization", "defaultNodeSelector": "zone=a"})
    await observer.sync(op_ctx)
    ks = await kit.get_kubescheduler(client)
    observed = ks["spec"]["observedConfig"]
    assert observed == observe({"spec": {"profile": "HighNodeUtilization", "defaultNodeSelector": "zone=a"}})
    rv = ks["metadata"]["resourceVersion"]
    await observer.sync(op_ctx)  # level-based: nothing changed, nothing written
    assert (await kit.get_kubescheduler(client))["metadata"]["resourceVersion"] == rv

    async def changed() -> list[Obj]:
        found = await events(client, "ObservedConfigChanged")
        return found if len(found) >= 2 else []

    found = await kit.eventually(changed, "two ObservedConfigChanged events", timeout=20)
    assert any("MostAllocated" in e["note"] for e in found)
    assert found[0]["regarding"]["kind"] == "Deployment"


async def test_unknown_profile_degrades_and_keeps_the_last_observed_config(
    op_ctx: c.OperatorContext, kit: Any
) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    observer = ConfigObserver()
    await set_scheduler(client, {"profile": "NoScoring"})
    await observer.sync(op_ctx)
    good = (await kit.get_kubescheduler(client))["spec"]["observedConfig"]
    await set_scheduler(client, {"profile": "Fastest"})
    await observer.sync(op_ctx)
    ks = await kit.get_kubescheduler(client)
    assert ks["spec"]["observedConfig"] == good
    cond = condition(ks, DEGRADED_CONDITION)
    assert (
        cond["status"] == "True"
        and cond["reason"] == "Error"
        and "'Fastest' not recognized" in cond["message"]
    )
    await set_scheduler(client, {"profile": "LoadAware"})
    await observer.sync(op_ctx)
    ks = await kit.get_kubescheduler(client)
    assert condition(ks, DEGRADED_CONDITION)["status"] == "False"
    assert ks["spec"]["observedConfig"] == observe({"spec": {"profile": "LoadAware"}})


async def test_sync_without_kubescheduler_does_nothing(op_ctx: c.OperatorContext) -> None:
    await ConfigObserver().sync(op_ctx)


KEYS = st.sampled_from(["a", "b", "zone"])
VALS = st.sampled_from(["x", "y", "1"])
TERMS = st.one_of(
    st.builds(lambda k, v: f"{k}={v}", KEYS, VALS),
    st.builds(lambda k, v: f"{k}=={v}", KEYS, VALS),
    st.builds(lambda k, v: f"{k}!={v}", KEYS, VALS),
    st.builds(lambda k, vs: f"{k} in ({','.join(vs)})", KEYS, st.lists(VALS, min_size=1, max_size=3)),
    st.builds(lambda k, vs: f"{k} notin ({','.join(vs)})", KEYS, st.lists(VALS, min_size=1, max_size=3)),
    KEYS,
    st.builds(lambda k: f"!{k}", KEYS),
)


@given(st.lists(TERMS, min_size=1, max_size=4), st.dictionaries(KEYS, VALS, max_size=3))
def test_added_affinity_selects_what_the_selector_selects(terms: list[str], labels: dict[str, str]) -> None:
    selector = ",".join(terms)
    added = node_selector_affinity(selector)
    (term,) = added["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    by_affinity = all(Requirement.from_node_selector(e).matches(labels) for e in term["matchExpressions"])
    assert by_affinity == LabelSelector.parse(selector).matches(labels)


# --- the LoadAware weight in a real decision ------------------------------------------------------------------


def sim_node(name: str, load: float) -> Obj:
    from kubesched.loadaware.annotations import format_annotation

    when = time.time() - 30
    metrics = ("cpu_usage_avg_5m", "cpu_usage_max_avg_1h", "cpu_usage_max_avg_1d")
    metrics += ("mem_usage_avg_5m", "mem_usage_max_avg_1h", "mem_usage_max_avg_1d")
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name},
            "annotations": {m: format_annotation(load, when) for m in metrics},
        },
        "status": {"allocatable": {"cpu": "4", "memory": "8Gi", "pods": "110"}},
    }


def sim_pod(name: str, cpu: str, node: str | None = None) -> Obj:
    spec: Obj = {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": cpu}}}]}
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("profile", "dynamic_weight", "expected"),
    [("LowNodeUtilization", None, "empty"), ("LoadAware", None, "quiet"), ("LoadAware", 3, "empty")],
)
async def test_load_aware_decides_against_the_resource_scores(
    profile: str, dynamic_weight: int | None, expected: str
) -> None:
    # "empty" has no pods but runs hot (50% everywhere); "quiet" is 75% requested but 10 points cooler.
    # The resource scores prefer "empty" (by 39 points); under LoadAware the 10-point load difference decides
    # (1,000 points at weight 100). At crane's suggested weight 3 it is worth 30 and loses.
    from kubesched.scheduler.simulate import simulate

    catalogue = full_catalogue()
    observed = observe({"spec": {"profile": profile}})
    if dynamic_weight is not None:
        observed["profiles"][0]["plugins"]["score"]["enabled"][0]["weight"] = dynamic_weight
    config = load_config(to_json(merge_config(default_config(), observed)), catalogue=catalogue)
    objects = [
        sim_node("empty", 0.5),
        sim_node("quiet", 0.4),
        sim_pod("resident", "3", "quiet"),
        sim_pod("new", "100m"),
    ]
    (placement,) = await simulate(config, objects, catalogue=catalogue)
    assert placement.node == expected, placement.scores
