"""Per-cycle shortcuts of the Score phase must give exactly the decisions of the full computation.

A cycle that records scores (simulate, the decision log) runs every PreScore/Score plugin; a cycle that does not
skips plugins whose score is the same on every node (``constant_score``: TaintToleration without tainted nodes,
ImageLocality when no node has the pod's images). Two frameworks with the same seed, one recording and one not,
must choose the same node for every pod of a random sequence on a random cluster."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from signable_profile import POINTS

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import CycleState, Framework, Handle
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.podinfo import PodInfo

TAINTS = st.sampled_from(
    [
        [],
        [],
        [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}],
        [{"key": "k", "value": "v", "effect": "NoSchedule"}],
    ]
)


def node(name: str, cpu: str, taints: list[dict[str, str]], image: bool) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"taints": taints},
        "status": {
            "allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"},
            "images": [{"names": ["big:1"], "sizeBytes": 500 * 1024 * 1024}] if image else [],
        },
    }


def pod(name: str, cpu: str, tolerate: bool, image: str) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {"name": "c", "image": image, "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}
        ]
    }
    if tolerate:
        spec["tolerations"] = [{"key": "k", "operator": "Exists"}]
    return {"metadata": {"name": name, "namespace": "default", "uid": name}, "spec": spec, "status": {}}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    nodes=st.lists(
        st.tuples(st.sampled_from(["1", "2", "4"]), TAINTS, st.booleans()), min_size=1, max_size=10
    ),
    pods=st.lists(
        st.tuples(st.sampled_from(["100m", "500m", "1"]), st.booleans(), st.sampled_from(["pause", "big:1"])),
        min_size=1,
        max_size=15,
    ),
    seed=st.integers(0, 1000),
)
def test_skipping_constant_scores_changes_no_decision(
    nodes: list[tuple[str, list[dict[str, str]], bool]], pods: list[tuple[str, bool, str]], seed: int
) -> None:
    cache = Cache()
    for i, (cpu, taints, image) in enumerate(nodes):
        cache.on_node_add(node(f"n{i}", cpu, taints, image))

    def build() -> Framework:
        return Framework.from_plugins(
            in_tree_catalogue(), POINTS, {}, Handle(cache=cache), seed=seed, opportunistic_batching=False
        )

    fast, full = build(), build()
    for i, (cpu, tolerate, image) in enumerate(pods):
        pi = PodInfo.from_pod(pod(f"p{i}", cpu, tolerate, image), cache.res)
        got = fast.schedule(CycleState(), pi)
        want = full.schedule(CycleState(), pi, record_scores=True)
        assert got.node == want.node
        assert got.status.message() == want.status.message()
        if got.node is not None:
            cache.assume(pi, got.node)


def test_constant_scores_are_detected() -> None:
    cache = Cache()
    cache.on_node_add(node("n0", "4", [], False))
    fw = Framework.from_plugins(in_tree_catalogue(), POINTS, {}, Handle(cache=cache))
    plain = PodInfo.from_pod(pod("p", "100m", False, "pause"), cache.res)
    assert {pl.name for pl in fw._constant_scorers} == {"TaintToleration", "ImageLocality"}
    assert all(pl.constant_score(plain, cache.table) for pl in fw._constant_scorers)
    cache.on_node_add(node("n1", "4", [{"key": "k", "value": "v", "effect": "PreferNoSchedule"}], True))
    with_image = PodInfo.from_pod(pod("q", "100m", False, "big:1"), cache.res)
    assert not fw.plugin("TaintToleration").constant_score(plain, cache.table)
    assert not fw.plugin("ImageLocality").constant_score(with_image, cache.table)
    assert fw.plugin("ImageLocality").constant_score(plain, cache.table)


CONTAINER_REQUESTS = st.fixed_dictionaries(
    {},
    optional={
        "cpu": st.sampled_from(["0", "100m", "1"]),
        "memory": st.sampled_from(["0", "64Mi"]),
        "example.com/gpu": st.sampled_from(["1", "2"]),
    },
)


@settings(max_examples=60, deadline=None)
@given(st.lists(CONTAINER_REQUESTS, min_size=1, max_size=20), st.booleans())
def test_remembered_pod_requests_equal_a_fresh_computation(
    requests: list[dict[str, str]], use_requested: bool
) -> None:
    """``RequestedResources.pod_requests`` remembers its last answer by the pod's shared request vector: the
    answer must be the computed one whatever came before (explicit zeros and missing requests share a vector
    but not their non-zero defaults; a new extended resource widens the index)."""
    from kubesched.scheduler.plugins.node_resources_common import RequestedResources, ResourceWeight
    from kubesched.scheduler.resources import ResourceIndex

    res = ResourceIndex()
    weights = [ResourceWeight("cpu", 1), ResourceWeight("memory", 1), ResourceWeight("example.com/gpu", 2)]
    remembered = RequestedResources(weights, use_requested=use_requested)
    for i, reqs in enumerate(requests):
        body = {
            "metadata": {"name": f"p{i}", "namespace": "default", "uid": f"p{i}"},
            "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": reqs}}]},
        }
        pi = PodInfo.from_pod(body, res)
        fresh = RequestedResources(weights, use_requested=use_requested)
        assert remembered.pod_requests(pi, res) == fresh.pod_requests(pi, res)
