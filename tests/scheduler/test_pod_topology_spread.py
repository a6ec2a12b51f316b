"""PodTopologySpread plugin: cases transcribed from upstream's podtopologyspread filtering/scoring table tests."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pytest

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import Code, CycleState
from kubesched.scheduler.plugins.node_affinity import LabelSelector
from kubesched.scheduler.plugins.pod_topology_spread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    LABEL_HOSTNAME,
    PodCountIndex,
    PodMatcher,
    PodTopologySpread,
)
from kubesched.scheduler.plugins.pod_topology_spread_args import PodTopologySpreadArgs
from kubesched.scheduler.podinfo import PodInfo

_uid = itertools.count()
FOO = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}
BAR = {"matchExpressions": [{"key": "bar", "operator": "Exists"}]}
LIST = {"defaultingType": "List"}


def node(name: str, taints: list[dict[str, str]] | None = None, **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": "4"}},
    }


def zn(name: str, zone: str) -> dict[str, Any]:
    """A node with the ``zone`` and ``node`` labels upstream's tests use."""
    return node(name, zone=zone, node=name)


def host(name: str) -> dict[str, Any]:
    return node(name, **{LABEL_HOSTNAME: name})


def pod_dict(
    labels: Iterable[str] | Mapping[str, str] = (),
    node_name: str = "",
    namespace: str = "default",
    constraints: list[dict[str, Any]] | None = None,
    terminating: bool = False,
    **spec: Any,
) -> dict[str, Any]:
    labels = dict(labels) if isinstance(labels, Mapping) else dict.fromkeys(labels, "")
    meta: dict[str, Any] = {
        "name": f"p{next(_uid)}",
        "namespace": namespace,
        "uid": f"u{next(_uid)}",
        "labels": labels,
    }
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    body: dict[str, Any] = {"containers": [{"name": "c", "image": "i"}], **spec}
    if node_name:
        body["nodeName"] = node_name
    if constraints:
        body["topologySpreadConstraints"] = constraints
    return {"metadata": meta, "spec": body}


def spread(
    max_skew: int, key: str, when: str, selector: dict[str, Any] | None, **extra: Any
) -> dict[str, Any]:
    c: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when, **extra}
    if selector is not None:
        c["labelSelector"] = selector
    return c


def hard(max_skew: int, key: str, selector: dict[str, Any] | None = FOO, **extra: Any) -> dict[str, Any]:
    return spread(max_skew, key, "DoNotSchedule", selector, **extra)


def soft(max_skew: int, key: str, selector: dict[str, Any] | None = FOO, **extra: Any) -> dict[str, Any]:
    return spread(max_skew, key, "ScheduleAnyway", selector, **extra)


def existing(spec: str) -> list[dict[str, Any]]:
    """``"a:2 b:1 y:3"`` → 2 pods labelled foo on node-a, 1 on node-b, 3 on node-y."""
    out = []
    for part in spec.split():
        name, n = part.split(":")
        out += [pod_dict(["foo"], f"node-{name}") for _ in range(int(n))]
    return out


class World:
    def __init__(
        self,
        nodes: list[dict[str, Any]],
        pods: list[dict[str, Any]] = (),
        args: Any = LIST,
        workloads: Any = None,
    ):
        self.cache = Cache()
        for n in nodes:
            self.cache.on_node_add(n)
        for p in pods:
            self.cache.on_pod_add(p)
        model = PodTopologySpreadArgs.model_validate(args or {})
        self.plugin = PodTopologySpread(model, Handle(cache=self.cache, workloads=workloads))

    @property
    def table(self) -> Any:
        return self.cache.table

    def pod(self, d: dict[str, Any]) -> PodInfo:
        return PodInfo.from_pod(d, self.cache.res)

    def filter(self, d: dict[str, Any], state: CycleState | None = None) -> dict[str, str | None]:
        pod = self.pod(d)
        state = state or CycleState()
        _, status = self.plugin.pre_filter(state, pod, self.table)
        assert status.ok, status
        idx = self.table.slots()
        f = self.plugin.filter(state, pod, self.table, idx)
        out: dict[str, str | None] = {}
        for slot, bits in zip(idx, f.reason_bits, strict=True):
            reason = None
            if bits:
                (j,) = [j for j in range(len(f.reasons)) if int(bits) >> j & 1]
                reason = f.reasons[j]
                # Unresolvable exactly for the missing-label reason, as upstream.
                assert f.unresolvable[j] == (reason == ERR_REASON_NODE_LABEL_NOT_MATCH)
            out[self.table.names[slot]] = reason
        return out

    def scores(self, d: dict[str, Any], candidates: list[str] | None = None) -> dict[str, int] | None:
        pod = self.pod(d)
        state = CycleState()
        names = candidates or [self.table.names[s] for s in self.table.slots()]
        idx = np.array([self.table.index[n] for n in names], dtype=np.intp)
        if self.plugin.pre_score(state, pod, self.table, idx).is_skip:
            return None
        raw = self.plugin.score(state, pod, self.table, idx)
        return dict(zip(names, self.plugin.normalize_score(state, pod, raw).tolist(), strict=True))


OK, SKEW, MISSING = None, ERR_REASON_CONSTRAINTS_NOT_MATCH, ERR_REASON_NODE_LABEL_NOT_MATCH
FOUR = [zn("node-a", "zone1"), zn("node-b", "zone1"), zn("node-x", "zone2"), zn("node-y", "zone2")]


# --- Filter, from upstream TestSingleConstraint / TestMultipleConstraints ------------------------------------------


@pytest.mark.parametrize(
    ("pod", "nodes", "pods", "want"),
    [
        # no existing pods
        (pod_dict(["foo"], constraints=[hard(1, "zone")]), FOUR, [], dict.fromkeys("abxy", OK)),
        # incoming pod doesn't match itself
        (pod_dict(["foo"], constraints=[hard(1, "zone", BAR)]), FOUR, [], dict.fromkeys("abxy", OK)),
        # existing pods in a different namespace do not count
        (
            pod_dict(["foo"], constraints=[hard(1, "zone")]),
            FOUR,
            [
                pod_dict(["foo"], "node-a", "ns1"),
                pod_dict(["foo"], "node-a", "ns2"),
                pod_dict(["foo"], "node-x"),
                pod_dict(["foo"], "node-y"),
            ],
            {"a": OK, "b": OK, "x": SKEW, "y": SKEW},
        ),
        # pods spread across zones as 3/3, all nodes fit
        (
            pod_dict(["foo"], constraints=[hard(1, "zone")]),
            FOUR,
            existing("a:2 b:1 y:3"),
            dict.fromkeys("abxy", OK),
        ),
        # 1/2 because node-b lacks the zone label
        (
            pod_dict(["foo"], constraints=[hard(1, "zone")]),
            [zn("node-a", "zone1"), node("node-b", zon="zone1", node="node-b"), *FOUR[2:]],
            existing("a:1 b:1 x:1 y:1"),
            {"a": OK, "b": MISSING, "x": SKEW, "y": SKEW},
        ),
        # all nodes lack label 'rack'
        (
            pod_dict(["foo"], constraints=[hard(1, "rack")]),
            [FOUR[0], FOUR[2]],
            [],
            {"a": MISSING, "x": MISSING},
        ),
        # spread across nodes as 2/1/0/3, only node-x fits
        (
            pod_dict(["foo"], constraints=[hard(1, "node")]),
            FOUR,
            existing("a:2 b:1 y:3"),
            {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW},
        ),
        # maxSkew 2: node-b and node-x fit
        (
            pod_dict(["foo"], constraints=[hard(2, "node")]),
            FOUR,
            existing("a:2 b:1 y:3"),
            {"a": SKEW, "b": OK, "x": OK, "y": SKEW},
        ),
        # pod doesn't match itself
        (
            pod_dict(["bar"], constraints=[hard(1, "node")]),
            FOUR,
            existing("a:2 b:1 y:3"),
            {"a": SKEW, "b": OK, "x": OK, "y": SKEW},
        ),
        # incoming nodeAffinity narrows the domains to node-a and node-y (2/~1~/~0~/3)
        (
            pod_dict(
                ["foo"],
                constraints=[hard(1, "node")],
                affinity={
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {
                                    "matchExpressions": [
                                        {"key": "node", "operator": "In", "values": ["node-a", "node-y"]}
                                    ]
                                }
                            ]
                        }
                    }
                },
            ),
            FOUR,
            existing("a:2 b:1 y:3"),
            {"a": OK, "b": OK, "x": OK, "y": SKEW},
        ),
        # terminating pods are excluded
        (
            pod_dict(["foo"], constraints=[hard(1, "node")]),
            [node("node-a", node="node-a"), node("node-b", node="node-b")],
            [pod_dict(["foo"], "node-a", terminating=True), pod_dict(["foo"], "node-b")],
            {"a": OK, "b": SKEW},
        ),
        # two constraints on zone and node, spreads = [3/3, 2/1/0/3]: only node-x
        (
            pod_dict(["foo"], constraints=[hard(1, "zone"), hard(1, "node")]),
            FOUR,
            existing("a:2 b:1 y:3"),
            {"a": SKEW, "b": SKEW, "x": OK, "y": SKEW},
        ),
        # two constraints, spreads = [3/4, 2/1/0/4]
        (
            pod_dict(["foo"], constraints=[hard(1, "zone"), hard(1, "node")]),
            FOUR,
            existing("a:2 b:1 y:4"),
            {"a": SKEW, "b": SKEW, "x": SKEW, "y": SKEW},
        ),
    ],
)
def test_filter_table(
    pod: dict[str, Any], nodes: list[dict[str, Any]], pods: list[dict[str, Any]], want: dict[str, str | None]
) -> None:
    got = World(nodes, pods).filter(pod)
    assert got == {f"node-{k}": v for k, v in want.items()}


def test_min_domains() -> None:
    nodes = [node("node-a", node="node-a"), node("node-b", node="node-b")]
    pods = existing("a:1 b:1")
    # 2 domains < minDomains 3: the global minimum counts as 0, so 1 + 1 - 0 > 1 everywhere.
    got = World(nodes, pods).filter(pod_dict(["foo"], constraints=[hard(1, "node", minDomains=3)]))
    assert got == {"node-a": SKEW, "node-b": SKEW}
    got = World(nodes, pods).filter(pod_dict(["foo"], constraints=[hard(1, "node", minDomains=2)]))
    assert got == {"node-a": OK, "node-b": OK}
    # maxSkew 2 tolerates it.
    got = World(nodes, pods).filter(pod_dict(["foo"], constraints=[hard(2, "node", minDomains=3)]))
    assert got == {"node-a": OK, "node-b": OK}


def test_node_taints_policy() -> None:
    taint = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    nodes = [
        node("node-a", node="node-a"),
        node("node-b", node="node-b"),
        node("node-c", taint, node="node-c"),
    ]
    pods = existing("a:1 b:1")
    # Ignore (default): the tainted empty node-c is a domain, so the minimum is 0.
    got = World(nodes, pods).filter(pod_dict(["foo"], constraints=[hard(1, "node")]))
    assert got == {"node-a": SKEW, "node-b": SKEW, "node-c": OK}
    # Honor: node-c is no domain, the minimum is 1, and node-c itself is judged with count 0.
    got = World(nodes, pods).filter(
        pod_dict(["foo"], constraints=[hard(1, "node", nodeTaintsPolicy="Honor")])
    )
    assert got == {"node-a": OK, "node-b": OK, "node-c": OK}
    # A tolerated taint keeps the node a domain.
    tol = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]
    got = World(nodes, pods).filter(
        pod_dict(["foo"], constraints=[hard(1, "node", nodeTaintsPolicy="Honor")], tolerations=tol)
    )
    assert got == {"node-a": SKEW, "node-b": SKEW, "node-c": OK}


def test_node_affinity_policy_ignore() -> None:
    aff = {"nodeSelector": {"node": "node-a"}}
    pods = existing("a:1 b:0 x:0 y:0")
    got = World(FOUR, pods).filter(pod_dict(["foo"], constraints=[hard(1, "node")], **aff))
    assert got["node-a"] == OK  # only node-a is a domain (Honor)
    got = World(FOUR, pods).filter(
        pod_dict(["foo"], constraints=[hard(1, "node", nodeAffinityPolicy="Ignore")], **aff)
    )
    assert got["node-a"] == SKEW  # all four are domains, minimum 0


def test_match_label_keys() -> None:
    pods = [pod_dict({"foo": "", "rev": "1"}, "node-a"), pod_dict({"foo": "", "rev": "1"}, "node-a")]
    pods += [pod_dict({"foo": "", "rev": "2"}, "node-b")]
    nodes = [node("node-a", node="node-a"), node("node-b", node="node-b")]
    c = hard(1, "node", matchLabelKeys=["rev"])
    # Only rev=2 pods count for a rev=2 pod: 0/1 → node-a fits, node-b does not.
    got = World(nodes, pods).filter(pod_dict({"foo": "", "rev": "2"}, constraints=[c]))
    assert got == {"node-a": OK, "node-b": SKEW}
    got = World(nodes, pods).filter(pod_dict({"foo": "", "rev": "1"}, constraints=[c]))
    assert got == {"node-a": SKEW, "node-b": OK}


def test_no_hard_constraints_skips() -> None:
    w = World(FOUR)
    _, status = w.plugin.pre_filter(
        CycleState(), w.pod(pod_dict(["foo"], constraints=[soft(1, "zone")])), w.table
    )
    assert status.code == Code.SKIP
    _, status = w.plugin.pre_filter(CycleState(), w.pod(pod_dict(["foo"])), w.table)
    assert status.code == Code.SKIP


def test_invalid_selector_is_an_error() -> None:
    w = World(FOUR)
    bad = {"matchExpressions": [{"key": "foo", "operator": "In", "values": []}]}
    _, status = w.plugin.pre_filter(
        CycleState(), w.pod(pod_dict(["foo"], constraints=[hard(1, "zone", bad)])), w.table
    )
    assert status.code == Code.ERROR


def test_pre_filter_extensions_copy_on_write() -> None:
    w = World(FOUR, existing("a:2 b:1 y:3"))
    pod_d = pod_dict(["foo"], constraints=[hard(1, "node")])
    pod = w.pod(pod_d)
    state = CycleState()
    w.plugin.pre_filter(state, pod, w.table)
    clone = state.clone()
    victim = w.table.pods_on(w.table.index["node-a"])
    for pi in list(victim.values()):
        assert w.plugin.remove_pod(clone, pod, pi, w.table.index["node-a"], w.table).ok
    # node-a would now hold 0: min is 0, node-a and node-x fit; the original state is untouched.
    idx = w.table.slots()
    after = w.plugin.filter(clone, pod, w.table, idx).ok
    before = w.plugin.filter(state, pod, w.table, idx).ok
    names = [w.table.names[s] for s in idx]
    assert {n for n, ok in zip(names, after, strict=True) if ok} == {"node-a", "node-x"}
    assert {n for n, ok in zip(names, before, strict=True) if ok} == {"node-x"}
    # Adding a matching pod on node-x makes it as full as node-b.
    other = w.pod(pod_dict(["foo"], "node-x"))
    w.plugin.add_pod(clone, pod, other, w.table.index["node-x"], w.table)
    after = w.plugin.filter(clone, pod, w.table, idx).ok
    assert {n for n, ok in zip(names, after, strict=True) if ok} == {"node-a"}


def test_counts_follow_cluster_changes() -> None:
    w = World(FOUR, existing("a:1"))
    d = pod_dict(["foo"], constraints=[hard(1, "node")])
    assert w.filter(d)["node-a"] == SKEW
    # The informer deletes the pod on node-a: counts follow through the listener.
    uid = next(iter(w.table.pods_on(w.table.index["node-a"])))
    w.cache.on_pod_delete({"metadata": {"uid": uid}})
    assert w.filter(d) == dict.fromkeys(["node-a", "node-b", "node-x", "node-y"], OK)
    # A node going away takes its pods out of the counts; coming back brings them in again.
    w.cache.on_pod_add(pod_dict(["foo"], "node-b"))
    w.cache.on_pod_add(pod_dict(["foo"], "node-x"))
    w.cache.on_pod_add(pod_dict(["foo"], "node-y"))
    assert w.filter(d)["node-b"] == SKEW
    w.cache.on_node_delete(FOUR[0])
    assert w.filter(d) == {"node-b": OK, "node-x": OK, "node-y": OK}
    w.cache.on_node_add(FOUR[0])
    assert w.filter(d)["node-b"] == SKEW


def test_pod_count_index_matches_brute_force() -> None:
    rng = np.random.default_rng(7)
    cache = Cache()
    for i in range(20):
        cache.on_node_add(host(f"n{i}"))
    index = PodCountIndex(cache.table)
    matcher = PodMatcher(
        ((frozenset({"default"}), LabelSelector.parse({"matchLabels": {"app": "a"}})),), True
    )
    index.counts(matcher)  # build early so that it is maintained incrementally
    live: list[str] = []
    for _ in range(300):
        if live and rng.random() < 0.3:
            uid = live.pop(int(rng.integers(len(live))))
            cache.on_pod_delete({"metadata": {"uid": uid}})
        else:
            d = pod_dict(
                {"app": str(rng.choice(["a", "b"]))},
                f"n{rng.integers(20)}",
                str(rng.choice(["default", "other"])),
                terminating=bool(rng.random() < 0.1),
            )
            cache.on_pod_add(d)
            live.append(d["metadata"]["uid"])
    want = np.zeros(cache.table.capacity, dtype=np.int64)
    for pi, slot in cache.table.iter_pods():
        want[slot] += matcher(pi)
    assert index.counts(matcher).tolist() == want.tolist()
    fresh = PodCountIndex(cache.table)
    assert fresh.counts(matcher).tolist() == want.tolist()


def test_pod_count_index_is_shared_by_the_plugins_of_a_table() -> None:
    """PodTopologySpread and InterPodAffinity (of any number of profiles) follow one PodCountIndex per table,
    so a pod event updates the per-node counts once; the counts stay exact for every plugin's matchers."""
    from kubesched.scheduler.plugins.inter_pod_affinity import InterPodAffinity, InterPodAffinityArgs

    rng = np.random.default_rng(11)
    cache = Cache()
    for i in range(12):
        cache.on_node_add(host(f"n{i}"))
    handle = Handle(cache=cache)
    spread = [PodTopologySpread(PodTopologySpreadArgs(), handle) for _ in range(2)]
    affinity = [InterPodAffinity(InterPodAffinityArgs(), handle) for _ in range(2)]
    shared = PodCountIndex.of(cache.table)
    assert all(p.index(cache.table) is shared for p in spread)
    assert all(p.indexes(cache.table)[0] is shared for p in affinity)
    indexes = [lst for lst in cache.table._listeners if isinstance(lst, PodCountIndex)]
    assert indexes == [shared]
    matchers = [
        PodMatcher(((frozenset({ns}), LabelSelector.parse({"matchLabels": {"app": app}})),), skip)
        for ns in ("default", "other")
        for app in ("a", "b")
        for skip in (True, False)
    ]
    for m in matchers[::2]:
        shared.counts(m)  # some built early (maintained incrementally), the rest built at the end
    live: list[str] = []
    for _ in range(200):
        if live and rng.random() < 0.3:
            uid = live.pop(int(rng.integers(len(live))))
            cache.on_pod_delete({"metadata": {"uid": uid}})
        else:
            d = pod_dict(
                {"app": str(rng.choice(["a", "b"]))},
                f"n{rng.integers(12)}",
                str(rng.choice(["default", "other"])),
                terminating=bool(rng.random() < 0.1),
            )
            cache.on_pod_add(d)
            live.append(d["metadata"]["uid"])
    for m in matchers:
        want = np.zeros(cache.table.capacity, dtype=np.int64)
        for pi, slot in cache.table.iter_pods():
            want[slot] += m(pi)
        assert shared.counts(m).tolist() == want.tolist()


# --- Score, from upstream TestPodTopologySpreadScore -------------------------------------------------------------

A_TO_D = [host(f"node-{c}") for c in "abcd"]


@pytest.mark.parametrize(
    ("constraints", "nodes", "pods", "candidates", "want"),
    [
        ([soft(1, LABEL_HOSTNAME)], A_TO_D[:2], [], None, [100, 100]),
        ([soft(1, LABEL_HOSTNAME)], A_TO_D[:2], existing("a:2 b:1"), ["node-a"], [100]),
        ([soft(1, LABEL_HOSTNAME)], A_TO_D[:2], existing("a:1 b:1"), None, [100, 100]),
        ([soft(1, LABEL_HOSTNAME)], A_TO_D, existing("a:2 b:1 d:3"), None, [20, 60, 100, 0]),
        ([soft(1, LABEL_HOSTNAME, None)], A_TO_D, existing("a:2 b:1 d:3"), None, [100, 100, 100, 100]),
        ([soft(2, LABEL_HOSTNAME)], A_TO_D, existing("a:2 b:1 d:3"), None, [33, 66, 100, 16]),
        ([soft(3, LABEL_HOSTNAME)], A_TO_D, existing("a:4 b:3 c:2 d:1"), None, [44, 66, 77, 100]),
        (
            [soft(1, LABEL_HOSTNAME)],
            [host("node-a"), host("node-b"), host("node-x"), host("node-y")],
            existing("a:4 b:2 x:1 y:3"),
            ["node-a", "node-b", "node-x"],
            [33, 83, 100],
        ),
        (  # node-b lacks the topology key: ignored (0), and does not count toward the weight
            [soft(1, LABEL_HOSTNAME)],
            [host("node-a"), node("node-b", n="node-b"), host("node-x"), host("node-y")],
            existing("a:4 b:2 x:1 y:3"),
            ["node-a", "node-b", "node-x"],
            [16, 0, 100],
        ),
        (
            [soft(1, "zone")],
            [
                node(f"node-{c}", zone=z, **{LABEL_HOSTNAME: f"node-{c}"})
                for c, z in zip("abxy", ["zone1"] * 2 + ["zone2"] * 2, strict=True)
            ],
            existing("a:4 b:2 x:1 y:3"),
            ["node-a", "node-b", "node-x"],
            [75, 75, 100],
        ),
        (
            [soft(1, "zone"), soft(1, LABEL_HOSTNAME)],
            [
                node(f"node-{c}", zone=z, **{LABEL_HOSTNAME: f"node-{c}"})
                for c, z in zip("abxy", ["zone1"] * 2 + ["zone2"] * 2, strict=True)
            ],
            existing("a:2 b:1 x:2 y:4"),
            ["node-a", "node-x"],
            [100, 63],
        ),
        (  # minDomains has no effect on ScheduleAnyway
            [soft(2, "node", minDomains=10)],
            [node(f"node-{c}", node=f"node-{c}") for c in "abc"],
            existing("a:2 b:2 c:1"),
            None,
            [75, 75, 100],
        ),
    ],
)
def test_score_table(
    constraints: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    candidates: list[str] | None,
    want: list[int],
) -> None:
    got = World(nodes, pods).scores(pod_dict(["foo"], constraints=constraints), candidates)
    assert got is not None and list(got.values()) == want


ZONES4 = [
    node(f"node-{c}", zone=z, **{LABEL_HOSTNAME: f"node-{c}"})
    for c, z in zip("abxy", ["zone1", "zone1", "zone2", "zone2"], strict=True)
]


def test_score_different_selectors() -> None:
    pods = [
        pod_dict(["foo"], "node-a"),
        pod_dict(["foo", "bar"], "node-b"),
        pod_dict(["foo"], "node-y"),
        pod_dict(["bar"], "node-y"),
    ]
    cs = [soft(1, "zone", FOO), soft(1, LABEL_HOSTNAME, BAR)]
    got = World(ZONES4, pods).scores(pod_dict(["foo", "bar"], constraints=cs))
    assert got == {"node-a": 60, "node-b": 20, "node-x": 100, "node-y": 60}
    got = World(ZONES4, pods).scores(pod_dict(["foo", "bar"], constraints=cs), ["node-a", "node-b", "node-x"])
    assert got == {"node-a": 50, "node-b": 25, "node-x": 100}
    pods = [pod_dict(["bar"], "node-b"), pod_dict(["foo"], "node-x"), pod_dict(["foo", "bar"], "node-y")]
    got = World(ZONES4, pods).scores(pod_dict(["foo", "bar"], constraints=cs))
    assert got == {"node-a": 100, "node-b": 60, "node-x": 40, "node-y": 0}


def test_score_namespace_and_terminating() -> None:
    pods = [pod_dict(["foo"], "node-a", "ns1"), *existing("a:1 b:2")]
    got = World(A_TO_D[:2], pods).scores(pod_dict(["foo"], constraints=[soft(1, LABEL_HOSTNAME)]))
    assert got == {"node-a": 100, "node-b": 33}
    pods = [pod_dict(["foo"], "node-a", terminating=True), pod_dict(["foo"], "node-b")]
    got = World(A_TO_D[:2], pods).scores(pod_dict(["foo"], constraints=[soft(1, LABEL_HOSTNAME)]))
    assert got == {"node-a": 100, "node-b": 0}


class FakeWorkloads:
    """Services / owners as the scheduler gives them in ``Handle.workloads``."""

    def __init__(self, services: list[dict[str, Any]], objects: dict[tuple[str, str, str], dict[str, Any]]):
        self._services = services
        self._objects = objects

    def services(self, namespace: str) -> list[dict[str, Any]]:
        return [s for s in self._services if (s["metadata"].get("namespace") or "default") == namespace]

    def get(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self._objects.get((kind, namespace, name))


def test_system_default_spreading_from_service() -> None:
    # Nodes have no zone label: system defaults still spread by hostname, with the same scores as one constraint.
    svc = {"metadata": {"name": "s"}, "spec": {"selector": {"foo": ""}}}
    w = World(A_TO_D, existing("a:4 b:3 c:2 d:1"), args=None, workloads=FakeWorkloads([svc], {}))
    assert w.scores(pod_dict(["foo"])) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}
    # A pod that no Service/owner selects gets no default constraints.
    assert w.scores(pod_dict(["other"])) is None


def test_system_default_spreading_from_replicaset() -> None:
    rs = {"spec": {"selector": {"matchLabels": {"app": "web"}}}}
    owner = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "rs-uid", "controller": True}
    ]
    pods = []
    for c, n in zip("abcd", [4, 3, 2, 1], strict=True):
        pods += [pod_dict({"app": "web"}, f"node-{c}") for _ in range(n)]
    w = World(A_TO_D, pods, args=None, workloads=FakeWorkloads([], {("ReplicaSet", "default", "rs1"): rs}))
    incoming = pod_dict({"app": "web"})
    incoming["metadata"]["ownerReferences"] = owner
    assert w.scores(incoming) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_system_default_without_listers_uses_controller_owner() -> None:
    owner = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "rs-uid", "controller": True}
    ]
    pods = []
    for c, n in zip("abcd", [4, 3, 2, 1], strict=True):
        for _ in range(n):
            d = pod_dict({"app": "web"}, f"node-{c}")
            d["metadata"]["ownerReferences"] = owner
            pods.append(d)
    pods += [pod_dict({"app": "web"}, "node-d") for _ in range(5)]  # same labels, other owner: not counted
    w = World(A_TO_D, pods, args=None)
    incoming = pod_dict({"app": "web"})
    incoming["metadata"]["ownerReferences"] = owner
    assert w.scores(incoming) == {"node-a": 44, "node-b": 66, "node-c": 77, "node-d": 100}


def test_owner_fallback_in_pre_filter_extensions() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    owner = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs1", "uid": "rs-uid", "controller": True}
    ]
    w = World(A_TO_D[:2], args=args)
    incoming = pod_dict({"app": "web"})
    incoming["metadata"]["ownerReferences"] = owner
    p = w.pod(incoming)
    state = CycleState()
    assert w.plugin.pre_filter(state, p, w.table)[1].ok
    stranger = w.pod(pod_dict({"app": "web"}, "node-a"))  # same labels, no owner: not counted
    w.plugin.add_pod(state, p, stranger, w.table.index["node-a"], w.table)
    assert w.plugin.filter(state, p, w.table, w.table.slots()).ok.tolist() == [True, True]
    sibling = pod_dict({"app": "web"}, "node-a")
    sibling["metadata"]["ownerReferences"] = owner
    w.plugin.add_pod(state, p, w.pod(sibling), w.table.index["node-a"], w.table)
    assert w.plugin.filter(state, p, w.table, w.table.slots()).ok.tolist() == [False, True]


def test_list_defaulting_and_own_constraints() -> None:
    args = {
        "defaultingType": "List",
        "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": "DoNotSchedule"}
        ],
    }
    svc = {"metadata": {"name": "s"}, "spec": {"selector": {"foo": ""}}}
    w = World(A_TO_D[:2], existing("a:1"), args=args, workloads=FakeWorkloads([svc], {}))
    assert w.filter(pod_dict(["foo"])) == {"node-a": SKEW, "node-b": OK}
    # The pod's own (soft) constraints replace the defaults entirely: nothing hard remains.
    pod = w.pod(pod_dict(["foo"], constraints=[soft(1, "zone")]))
    assert w.plugin.pre_filter(CycleState(), pod, w.table)[1].code == Code.SKIP


def test_args_validation_and_models() -> None:
    # The args model is the one place args are checked (the configuration loader reports these).
    bad = {"defaultingType": "System", "defaultConstraints": [soft(1, "zone", None)]}
    assert PodTopologySpreadArgs.model_validate(bad).validate_args("args")
    model = PodTopologySpreadArgs.model_validate(
        {"defaultingType": "List", "defaultConstraints": [soft(2, "zone", None)]}
    )
    plugin = PodTopologySpread(model, None)
    assert plugin.default_constraints == [
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "ScheduleAnyway"}
    ]
    assert PodTopologySpread(PodTopologySpreadArgs(), None).system_defaulted


def test_events() -> None:
    actions = {
        (e.resource, e.action) for e in PodTopologySpread(PodTopologySpreadArgs(), None).events_to_register()
    }
    assert {
        ("Pod", "Add"),
        ("Pod", "Delete"),
        ("Node", "UpdateNodeLabel"),
        ("Node", "UpdateNodeTaint"),
    } <= actions


# --- Randomised cross-check against a plain transcription of upstream's per-node loops ----------------------------


def _reference(
    w: World, pod: PodInfo, candidates: list[str]
) -> tuple[dict[str, str | None] | None, dict | None]:
    import math
    from collections import Counter

    from kubesched.scheduler.plugins.pod_topology_spread import toleration_tolerates

    table = w.table
    slots = [int(s) for s in table.slots()]
    labels_of = {table.names[s]: table.labels[s] for s in slots}
    taints_of = {table.names[s]: table.taint_sets[int(table.taint_group[s])] for s in slots}
    pods_on = {table.names[s]: list(table.pods_on(s).values()) for s in slots}
    selector_map = pod.pod["spec"].get("nodeSelector") or {}

    def included(c: Any, name: str) -> bool:
        if c.honor_node_affinity and any(labels_of[name].get(k) != v for k, v in selector_map.items()):
            return False
        if c.honor_node_taints:
            for key, value, effect in taints_of[name]:
                if effect in ("NoSchedule", "NoExecute") and not any(
                    toleration_tolerates(t, key, value, effect) for t in pod.tolerations
                ):
                    return False
        return True

    def count(c: Any, name: str) -> int:
        if c.selector.empty or c.selector.nothing:
            return 0
        return sum(
            1
            for p in pods_on[name]
            if p.deletion_ts is None and p.namespace == pod.namespace and c.selector.matches(p.labels)
        )

    verdicts = None
    hard = w.plugin.constraints_for(pod, "DoNotSchedule")
    if hard:
        tp: Counter[tuple[int, str]] = Counter()
        for name, labels in labels_of.items():
            if not all(c.topology_key in labels for c in hard):
                continue
            for i, c in enumerate(hard):
                if included(c, name):
                    tp[(i, labels[c.topology_key])] += count(c, name)
        verdicts = {}
        for name, labels in labels_of.items():
            reason = None
            for i, c in enumerate(hard):
                if c.topology_key not in labels:
                    reason = MISSING
                    break
                values = [n for (j, _), n in tp.items() if j == i]
                low = min(values) if values else 2**31 - 1
                if len(values) < c.min_domains:
                    low = 0
                skew = tp.get((i, labels[c.topology_key]), 0) + int(c.selector.matches(pod.labels)) - low
                if skew > c.max_skew:
                    reason = SKEW
                    break
            verdicts[name] = reason
    scores = None
    soft = w.plugin.constraints_for(pod, "ScheduleAnyway")
    if soft:
        require_all = bool(pod.topology_spread_constraints) or not w.plugin.system_defaulted
        ignored = {
            n for n in candidates if require_all and not all(c.topology_key in labels_of[n] for c in soft)
        }
        tracked: list[dict[str, int]] = [{} for _ in soft]
        for n in candidates:
            if n in ignored:
                continue
            for i, c in enumerate(soft):
                if c.topology_key != LABEL_HOSTNAME:
                    tracked[i].setdefault(labels_of[n].get(c.topology_key, ""), 0)
        weights = [
            math.log(
                (len(candidates) - len(ignored) if c.topology_key == LABEL_HOSTNAME else len(tracked[i])) + 2
            )
            for i, c in enumerate(soft)
        ]
        for name, labels in labels_of.items():
            if require_all and not all(c.topology_key in labels for c in soft):
                continue
            for i, c in enumerate(soft):
                v = labels.get(c.topology_key, "")
                if included(c, name) and v in tracked[i]:
                    tracked[i][v] += count(c, name)
        raw = {}
        for n in candidates:
            if n in ignored:
                raw[n] = 0
                continue
            total = 0.0
            for i, c in enumerate(soft):
                if c.topology_key in labels_of[n]:
                    cnt = (
                        count(c, n)
                        if c.topology_key == LABEL_HOSTNAME
                        else tracked[i][labels_of[n][c.topology_key]]
                    )
                    total += cnt * weights[i] + (c.max_skew - 1)
            raw[n] = math.floor(total + 0.5)
        valid = [raw[n] for n in candidates if n not in ignored]
        lo, hi = (min(valid), max(valid)) if valid else (0, 0)
        scores = {}
        for n in candidates:
            if n in ignored:
                scores[n] = 0
            elif hi == 0:
                scores[n] = 100
            else:
                scores[n] = 100 * (hi + lo - raw[n]) // hi
    return verdicts, scores


@pytest.mark.parametrize("seed", range(30))
def test_matches_reference_on_random_clusters(seed: int) -> None:
    rng = np.random.default_rng(seed)
    taint = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    nodes = []
    for i in range(9):
        labels = {"zone": f"z{i % 3}"} if rng.random() < 0.85 else {}
        if rng.random() < 0.9:
            labels[LABEL_HOSTNAME] = f"n{i}"
        if rng.random() < 0.6:
            labels["rack"] = f"r{i % 2}"
        if rng.random() < 0.3:
            labels["disk"] = "ssd"
        nodes.append(node(f"n{i}", taint if rng.random() < 0.25 else None, **labels))
    pods = []
    for _ in range(30):
        labels = {"foo": ""} if rng.random() < 0.6 else {"bar": ""}
        labels["rev"] = str(rng.choice(["1", "2"]))
        ns = "default" if rng.random() < 0.8 else "other"
        pods.append(pod_dict(labels, f"n{rng.integers(9)}", ns, terminating=bool(rng.random() < 0.1)))

    def random_constraint() -> dict[str, Any]:
        extra: dict[str, Any] = {}
        when = str(rng.choice(["DoNotSchedule", "ScheduleAnyway"]))
        if when == "DoNotSchedule" and rng.random() < 0.3:
            extra["minDomains"] = int(rng.integers(1, 5))
        if rng.random() < 0.3:
            extra["nodeAffinityPolicy"] = str(rng.choice(["Honor", "Ignore"]))
        if rng.random() < 0.3:
            extra["nodeTaintsPolicy"] = str(rng.choice(["Honor", "Ignore"]))
        if rng.random() < 0.2:
            extra["matchLabelKeys"] = ["rev"]
        selector = [FOO, BAR, {}, None][int(rng.integers(4))]
        key = str(rng.choice(["zone", LABEL_HOSTNAME, "rack"]))
        return spread(int(rng.integers(1, 4)), key, when, selector, **extra)

    w = World(nodes, pods)
    for _ in range(4):
        keys = set()
        constraints = []
        for c in (random_constraint() for _ in range(int(rng.integers(1, 3)))):
            if (c["topologyKey"], c["whenUnsatisfiable"]) not in keys:
                keys.add((c["topologyKey"], c["whenUnsatisfiable"]))
                constraints.append(c)
        extra: dict[str, Any] = {}
        if rng.random() < 0.3:
            extra["nodeSelector"] = {"disk": "ssd"}
        if rng.random() < 0.3:
            extra["tolerations"] = [{"key": "dedicated", "operator": "Exists"}]
        d = pod_dict({"foo": "", "rev": "1"}, constraints=constraints, **extra)
        p = w.pod(d)
        names = [w.table.names[s] for s in w.table.slots()]
        candidates = [n for n in names if rng.random() < 0.7] or names[:1]
        want_verdicts, want_scores = _reference(w, p, candidates)
        if want_verdicts is None:
            assert w.plugin.pre_filter(CycleState(), p, w.table)[1].code == Code.SKIP
        else:
            assert w.filter(d) == want_verdicts
        got_scores = w.scores(d, candidates)
        assert got_scores == want_scores
        w.cache.on_pod_add({**d, "spec": {**d["spec"], "nodeName": f"n{rng.integers(9)}"}})
