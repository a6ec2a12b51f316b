"""Opportunistic batching (KEP-5598): upstream's rules for reusing the last cycle's ranking, the feature gate, the
metrics, and a property test against full cycles on random clusters and pod sequences."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from signable_profile import POINTS

from kubesched.scheduler import features
from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import CycleState, Framework, Handle
from kubesched.scheduler.framework.batch import (
    ATTEMPT_HINT_NOT_USED,
    ATTEMPT_HINT_USED,
    ATTEMPT_NO_HINT,
    OpportunisticBatch,
)
from kubesched.scheduler.metrics import SchedulerMetrics
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.plugins.pod_topology_spread_args import PodTopologySpreadArgs
from kubesched.scheduler.podinfo import PodInfo

LIST_DEFAULTING = {"PodTopologySpread": PodTopologySpreadArgs.model_validate({"defaultingType": "List"})}


def node(name: str, cpu: str = "4", zone: str = "a", images: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, "zone": zone}},
        "spec": {},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "images": [{"names": [i], "sizeBytes": 300 * 1024 * 1024} for i in images],
        },
    }


def pod(
    name: str,
    cpu: str = "1",
    *,
    image: str = "pause",
    port: int | None = None,
    zone: str | None = None,
    anti_affinity: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "c",
        "image": image,
        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
    }
    if port is not None:
        container["ports"] = [{"containerPort": port, "hostPort": port}]
    spec: dict[str, Any] = {"containers": [container]}
    if zone is not None:
        spec["nodeSelector"] = {"zone": zone}
    if anti_affinity:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "zone"}
                ]
            }
        }
    return {
        "metadata": {"name": name, "namespace": "default", "uid": name, "labels": labels or {"app": "x"}},
        "spec": spec,
        "status": {},
    }


def profile(cache: Cache, *, batching: bool = True, args: Any = None, metrics: Any = None) -> Framework:
    return Framework.from_plugins(
        in_tree_catalogue(),
        POINTS,
        LIST_DEFAULTING if args is None else args,
        Handle(cache=cache, metrics=metrics),
        seed=3,
        opportunistic_batching=batching,
    )


def place(fw: Framework, cache: Cache, body: dict[str, Any], cycle: int) -> str | None:
    """One cycle as the scheduler runs it: schedule, assume, PodSucceeded."""
    pi = PodInfo.from_pod(body, cache.res)
    result = fw.schedule(CycleState(), pi, cycle=cycle)
    if result.node is not None:
        cache.assume(pi, result.node)
        fw.pod_succeeded()
    return result.node


# --- the rules -----------------------------------------------------------------------------------------------


def test_one_pod_per_node_takes_the_ranking_in_order() -> None:
    # Pods of 3 CPUs on nodes of 3 to 5.5 CPUs: the node taken last no longer fits, so each next pod gets the next node of
    # the first cycle's ranking without filtering and scoring again.
    cache = Cache()
    for i, cpu in enumerate(["3", "4", "5500m", "5"]):
        cache.on_node_add(node(f"n{i}", cpu=cpu))
    fw = profile(cache)
    assert fw.batch is not None
    first = profile(cache, batching=False).schedule(
        CycleState(), PodInfo.from_pod(pod("p", cpu="3"), cache.res), record_scores=True
    )
    totals = first.total_scores or {}
    assert len(set(totals.values())) == 4
    placed = [place(fw, cache, pod(f"p{i}", cpu="3"), i + 1) for i in range(4)]
    assert placed == sorted(totals, key=lambda n: -totals[n])
    assert placed[0] == "n2"  # least allocated after the pod: most free CPU
    assert fw.batch.batched_pods == 3


def test_a_node_that_still_fits_ends_the_batch() -> None:
    # Small pods fit the node just taken again: upstream cannot tell its new rank, so every cycle is full.
    cache = Cache()
    for i in range(3):
        cache.on_node_add(node(f"n{i}"))
    metrics = SchedulerMetrics()
    fw = profile(cache, metrics=metrics)
    for i in range(4):
        place(fw, cache, pod(f"p{i}", cpu="100m"), i + 1)
    assert fw.batch is not None and fw.batch.batched_pods == 0
    text = metrics.exposition().decode()
    assert (
        'scheduler_batch_cache_flushed_total{profile="default-scheduler",reason="node_not_full"} 3.0' in text
    )
    assert 'scheduler_batch_attempts_total{profile="default-scheduler",result="no_hint"} 4.0' in text


def test_reasons_a_list_is_not_used() -> None:
    cache = Cache()
    for i, cpu in enumerate(["4", "8", "16"]):
        cache.on_node_add(node(f"n{i}", cpu=cpu))
    metrics = SchedulerMetrics()
    fw = profile(cache, metrics=metrics)
    batch = fw.batch
    assert batch is not None
    place(fw, cache, pod("a", cpu="3"), 1)
    # A skipped cycle (another profile's pod) in between.
    place(fw, cache, pod("b", cpu="3"), 3)
    # Another signature (different requests).
    place(fw, cache, pod("c", cpu="2"), 4)
    # The previous pod's Reserve/Permit failed (no PodSucceeded).
    pi = PodInfo.from_pod(pod("d", cpu="2"), cache.res)
    assert fw.schedule(CycleState(), pi, cycle=5).node is not None
    place(fw, cache, pod("e", cpu="2"), 6)
    assert batch.batched_pods == 0
    text = metrics.exposition().decode()
    for reason in ("pod_skipped", "pod_incompatible", "pod_failed"):
        assert f'reason="{reason}"' in text


def test_expired_list_and_hint_not_used() -> None:
    now = [0.0]
    batch = OpportunisticBatch(clock=lambda: now[0])
    batch.store(("sig",), "", "n0", ["n2", "n1"], 1)
    batch.pod_succeeded()
    now[0] = 0.6
    assert batch.node_hint(("sig",), 2, lambda name: True) == ""  # older than 500 ms
    batch.store(("sig",), "", "n0", ["n2", "n1"], 2)
    batch.pod_succeeded()
    assert batch.node_hint(("sig",), 3, lambda name: None) == ""  # the last node is gone
    assert batch.node_hint(("sig",), 3, lambda name: True) == "n1"
    batch = OpportunisticBatch()
    batch.store(("sig",), "", "n0", ["n2", "n1"], 1)
    batch.pod_succeeded()
    hint = batch.node_hint(("sig",), 2, lambda name: True)
    batch.store(("sig",), hint, "n7", ["n8"], 2)  # the hinted node failed its Filter: a full cycle chose n7
    assert batch.attempts == {ATTEMPT_NO_HINT: 0, ATTEMPT_HINT_USED: 0, ATTEMPT_HINT_NOT_USED: 1}
    assert batch.state is not None and batch.state.nodes == ["n8"]
    batch.pod_succeeded()
    batch.store(("sig",), batch.node_hint(("sig",), 3, lambda name: True), "n8", None, 3)
    assert batch.attempts[ATTEMPT_HINT_USED] == 1
    batch.pod_succeeded()
    assert batch.node_hint(("sig",), 4, lambda name: True) == ""  # the list is used up
    assert batch.attempts[ATTEMPT_NO_HINT] == 1


def test_unsignable_pods_and_profiles() -> None:
    cache = Cache()
    cache.on_node_add(node("n0"))
    fw = profile(cache)
    assert fw.sign_pod(PodInfo.from_pod(pod("a"), cache.res)) is not None
    assert fw.sign_pod(PodInfo.from_pod(pod("b", anti_affinity=True), cache.res)) is None
    spread = pod("c")
    spread["spec"]["topologySpreadConstraints"] = [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}
    ]
    assert fw.sign_pod(PodInfo.from_pod(spread, cache.res)) is None
    # System-default spreading (the default profile): no pod is signable, signing costs nothing per pod.
    default = profile(cache, args={})
    assert default.sign_pod(PodInfo.from_pod(pod("a"), cache.res)) is None
    assert default._signers == []


def test_the_feature_gate() -> None:
    cache = Cache()
    cache.on_node_add(node("n0"))
    assert profile(cache, batching=False).batch is None
    gates = features.FeatureGates()
    assert gates.enabled(features.OPPORTUNISTIC_BATCHING)  # beta, on by default in 1.36
    gates.set_from_flag("OpportunisticBatching=false")
    assert not gates.enabled(features.OPPORTUNISTIC_BATCHING)
    with pytest.raises(features.FeatureGateError, match="unrecognized feature gate: Nope"):
        gates.set_from_flag("Nope=true")
    with pytest.raises(features.FeatureGateError, match="invalid value of OpportunisticBatching=maybe"):
        features.parse("OpportunisticBatching=maybe")
    with pytest.raises(features.FeatureGateError, match="missing bool value for OpportunisticBatching"):
        features.parse("OpportunisticBatching")


# --- property: batched decisions against full cycles ------------------------------------------------------------

POD_TEMPLATES = st.sampled_from(
    [
        {"cpu": "3"},
        {"cpu": "3"},
        {"cpu": "1500m"},
        {"cpu": "500m"},
        {"cpu": "1", "port": 8080},
        {"cpu": "1", "port": 8080},
        {"cpu": "2", "zone": "b"},
        {"cpu": "1", "image": "big"},
        {"cpu": "1", "labels": {"app": "y"}},
        {"cpu": "1", "anti_affinity": True},
    ]
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from(["2", "4", "6", "8"]), st.sampled_from("ab"), st.booleans()),
        min_size=1,
        max_size=12,
    ),
    runs=st.lists(
        st.tuples(POD_TEMPLATES, st.integers(1, 5), st.booleans(), st.none() | st.integers(0, 11)),
        min_size=1,
        max_size=8,
    ),
)
def test_batched_decisions_follow_upstream_rules_and_a_full_cycle_could_make_them(
    nodes: list[tuple[str, str, bool]], runs: list[tuple[dict[str, Any], int, bool, int | None]]
) -> None:
    """Clusters under 100 nodes are scored whole, and these pods have no normalised score that depends on the
    feasible set, so the differences upstream accepts (sample, normalisation) do not arise: a hinted node must then
    be a best node of a full cycle on the same state, and a hint must be taken exactly when upstream's rules allow.
    Runs of pods share a template (a signature); a run may end with a Reserve failure (no PodSucceeded); before
    its second pod, a pod bound by someone else may land on some node (an informer update between cycles): upstream
    does not rescore for it (difference 3), so until the next full cycle a hint need only pass its Filter."""
    cache = Cache()
    for i, (cpu, zone, image) in enumerate(nodes):
        cache.on_node_add(node(f"n{i}", cpu=cpu, zone=zone, images=("big",) if image else ()))
    fw = profile(cache)
    reference = profile(cache, batching=False)
    batch = fw.batch
    assert batch is not None
    batch.max_age = float("inf")  # the 500 ms expiry is tested with a clock above
    cycle = 0
    disturbed = False
    for template, count, reserve_fails, foreign in runs:
        for k in range(count):
            if k == 1 and foreign is not None:
                # Half the time onto the node the batch would hint next.
                head = batch.state.nodes[-1] if batch.state is not None and batch.state.nodes else None
                target = head if head is not None and foreign % 2 == 0 else f"n{foreign % len(nodes)}"
                other = pod(f"x{cycle}", cpu="3", port=8080, labels={"app": "z"})
                cache.assume(PodInfo.from_pod(other, cache.res), target)
                disturbed = True
            cycle += 1
            body = pod(f"p{cycle}", **template)
            pi = PodInfo.from_pod(body, cache.res)
            full = reference.schedule(CycleState(), pi, record_scores=True)
            totals = full.total_scores or {}
            best = {n for n, s in totals.items() if s == max(totals.values())} if totals else set()
            signature = fw.sign_pod(pi)
            state = batch.state
            before = list(state.nodes) if state is not None else []
            allowed = bool(
                state is not None
                and before
                and batch.last_cycle == cycle - 1
                and batch.last_succeeded
                and signature is not None
                and signature == state.signature
                and batch.last_chosen in (full.filtered or {})
            )
            used_before = batch.batched_pods
            result = fw.schedule(CycleState(), pi, cycle=cycle)
            hinted = batch.batched_pods > used_before
            event("hint taken" if hinted else "hint refused" if allowed else "full cycle")
            if allowed:
                popped = before[-1]
                assert hinted == (popped in totals), (popped, totals)
                if hinted:
                    assert result.node == popped
                    assert disturbed or popped in best, (popped, totals)  # a full cycle could have chosen it
                    assert batch.state is not None and batch.state.nodes == before[:-1]
            else:
                assert not hinted
            if not hinted:
                # A full cycle: the same choice a cycle without batching makes (up to ties).
                assert (result.node is None) == (full.node is None)
                assert result.node is None or result.node in best
                if result.node is not None and signature is not None and len(totals) > 1:
                    kept = batch.state
                    assert kept is not None and set(kept.nodes) == set(totals) - {result.node}
                    disturbed = False
                    ranked = [totals[n] for n in kept.nodes]
                    assert ranked == sorted(ranked)  # best last
            if result.node is None:
                continue
            cache.assume(pi, result.node)
            if reserve_fails and k == count - 1:
                cache.forget(pi.uid)  # Reserve rejected: undone, and no PodSucceeded
            else:
                fw.pod_succeeded()


def test_the_feature_gates_flag() -> None:
    import argparse

    from kubesched.scheduler.cli import add_arguments

    parser = argparse.ArgumentParser(prog="kubesched scheduler", exit_on_error=False)
    add_arguments(parser)
    args = parser.parse_args(["--feature-gates", "OpportunisticBatching=false"])
    assert args.feature_gates == {"OpportunisticBatching": False}
    assert parser.parse_args([]).feature_gates is None
    with pytest.raises(argparse.ArgumentError, match="unrecognized feature gate: Nope"):
        parser.parse_args(["--feature-gates", "Nope=true"])


def test_a_nominated_pod_wastes_the_hint_as_upstream() -> None:
    # Upstream takes the hint before looking at the nominated node; the nominated node wins, the hint counts as
    # not used and the one-node result replaces the list (so the next pod runs a full cycle).
    cache = Cache()
    for i, cpu in enumerate(["3", "4", "5500m", "5"]):
        cache.on_node_add(node(f"n{i}", cpu=cpu))
    fw = profile(cache)
    batch = fw.batch
    assert batch is not None
    assert place(fw, cache, pod("p0", cpu="3"), 1) == "n2"
    nominated = pod("p1", cpu="3")
    nominated["status"] = {"nominatedNodeName": "n0"}
    assert place(fw, cache, nominated, 2) == "n0"
    assert batch.attempts[ATTEMPT_HINT_NOT_USED] == 1 and batch.state is None
    assert batch.flushes == {"empty_list": 1}
