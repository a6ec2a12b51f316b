"""The fast dry run of DefaultPreemption (``plugins/preemption_victims.py``) against upstream's per-node algorithm
(``fast_dry_run = False``): on random clusters both must find the same candidates, victims (in order), PDB
violation counts, node statuses, errors, chosen node and, over a sequence of preemptions, the same cluster."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_default_preemption import (
    FIT,
    Env,
    FakeClient,
    FakeRecorder,
    PdbList,
    QueueNominator,
    epoch,
    make_env,
    node,
    pdb,
    pod,
    statuses,
)

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import Code, CycleState, Framework, Handle, NodeToStatus
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.plugins.default_preemption import PDB, Candidate, DefaultPreemptionArgs
from kubesched.scheduler.plugins.preemption_victims import nominated_rejections_in_bulk, pick_index, stats_of

PLUGINS = (
    "NodeUnschedulable",
    "TaintToleration",
    "NodeAffinity",
    "NodePorts",
    FIT,
    "PodTopologySpread",
    "InterPodAffinity",
)
PRIORITIES = (-5, 0, 5, 10, 20)
PREEMPTOR_PRIORITIES = (5, 10, 20, 30)


def anti_affinity(key: str) -> dict[str, Any]:
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {"app": "a"}}, "topologyKey": key}
            ]
        }
    }


def spread(key: str) -> list[dict[str, Any]]:
    return [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "a"}},
        }
    ]


@st.composite
def pod_specs(draw: st.DrawFn, name: str, on: str = "", preemptor: bool = False) -> dict[str, Any]:
    cpu = draw(st.sampled_from((0, 100, 200, 300, 500, 800)))
    mem = draw(st.sampled_from((0, 100, 300, 600)))
    req = None if cpu == mem == 0 else (f"{cpu}m", str(mem))
    labels = draw(st.sampled_from(({}, {"app": "a"}, {"app": "b"})))
    extra: dict[str, Any] = {}
    if draw(st.integers(0, 5)) == 0:
        port = draw(st.sampled_from((80, 443)))
        container: dict[str, Any] = {
            "name": "c",
            "image": "pause",
            "ports": [{"containerPort": port, "hostPort": port}],
        }
        if req:
            container["resources"] = {"requests": {"cpu": req[0], "memory": req[1]}}
        extra["containers"] = [container]
    if draw(st.integers(0, 6)) == 0:
        extra["affinity"] = anti_affinity(draw(st.sampled_from(("hostname", "zone"))))
    if preemptor and draw(st.integers(0, 5)) == 0:
        extra["topologySpreadConstraints"] = spread(draw(st.sampled_from(("hostname", "zone"))))
    start = draw(st.sampled_from((None, epoch(1), epoch(2), epoch(3))))
    obj = pod(
        name,
        req=req,
        priority=draw(st.sampled_from(PREEMPTOR_PRIORITIES if preemptor else PRIORITIES)),
        on=on,
        labels=labels,
        start=None if preemptor else start,
        **extra,
    )
    if not preemptor and draw(st.integers(0, 4)) == 0:
        obj["metadata"]["namespace"] = "other"
    return obj


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    names = [f"n{i}" for i in range(draw(st.integers(1, 7)))]
    nodes = [
        node(
            n,
            (draw(st.sampled_from(("500m", "1", "2"))), draw(st.sampled_from(("500", "1000", "2000")))),
            pods=draw(st.sampled_from(("2", "3", "5", "110"))),
            zone=draw(st.sampled_from(("z1", "z2"))),
            hostname=n,
        )
        for n in names
    ]
    pods = [
        draw(pod_specs(f"p{i}", on=draw(st.sampled_from(names)))) for i in range(draw(st.integers(0, 16)))
    ]
    nominated = []
    for i in range(draw(st.integers(0, 2))):
        spec = draw(pod_specs(f"nom{i}", preemptor=True))
        spec["status"]["nominatedNodeName"] = draw(st.sampled_from(names))
        nominated.append(spec)
    pdbs = [
        pdb({"app": draw(st.sampled_from(("a", "b")))}, draw(st.sampled_from((0, 0, 1, 2))))
        for _ in range(draw(st.integers(0, 2)))
    ]
    pct = draw(st.integers(0, 100))
    absolute = draw(st.integers(0 if pct else 1, 4))
    return {
        "nodes": nodes,
        "pods": pods,
        "nominated": nominated,
        "pdbs": pdbs,
        "args": {"minCandidateNodesPercentage": pct, "minCandidateNodesAbsolute": absolute},
        "preemptors": [draw(pod_specs(f"x{i}", preemptor=True)) for i in range(draw(st.integers(1, 3)))],
        "synthetic": draw(st.booleans()),
        "marks": [draw(st.sampled_from(("u", "r", "-"))) for _ in names],
        "offset": draw(st.integers(0, 50)),
        "stretch": draw(st.sampled_from((1, 2, 64))),
    }


def full_env(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    pdbs: list[dict[str, Any]] = (),
    args: dict[str, Any] | None = None,
    online: bool = True,
) -> Env:
    """``make_env`` with the default profile's Filter plugins (PreFilter only where a plugin has one)."""
    cache = Cache()
    for n in nodes:
        cache.on_node_add(n)
    for p in pods:
        cache.on_pod_add(p)
    nominator = QueueNominator()
    client = FakeClient() if online else None
    recorder = FakeRecorder()
    handle = Handle(
        cache=cache, client=client, recorder=recorder, nominator=nominator, pdbs=PdbList(list(pdbs))
    )
    registry = in_tree_catalogue()
    pre = [n for n in PLUGINS if callable(getattr(registry[n].factory, "pre_filter", None))]
    points = {
        "PreEnqueue": ["DefaultPreemption"],
        "PreFilter": pre,
        "Filter": list(PLUGINS),
        "PostFilter": ["DefaultPreemption"],
    }
    plugin_args = {"DefaultPreemption": DefaultPreemptionArgs.model_validate(args)} if args else {}
    fw = Framework.from_plugins(registry, points, plugin_args, handle, seed=1)
    return Env(cache, fw, fw.plugin("DefaultPreemption"), nominator, client, recorder)


def build(c: dict[str, Any], fast: bool, online: bool = True) -> Env:
    env = full_env(c["nodes"], c["pods"], pdbs=c["pdbs"], args=c["args"], online=online)
    for spec in c["nominated"]:
        env.nominator.add_nominated(env.info(spec))
    env.plugin.fast_dry_run = fast
    # Short stretches make the fast walk filter and reprieve the nodes in several steps.
    env.plugin._fast.min_stretch = c.get("stretch", 64)
    return env


def diagnosis(env: Env, c: dict[str, Any], pi: Any) -> NodeToStatus | None:
    """The statuses preemption starts from: the real cycle's, or random ones (which also reach nodes where the
    pod fits with every victim back)."""
    if c["synthetic"]:
        names = [n["metadata"]["name"] for n in c["nodes"]]
        marks = dict(zip(names, c["marks"], strict=True))
        return statuses([n for n in names if marks[n] == "u"], [n for n in names if marks[n] == "r"])
    result = env.fw.schedule(CycleState(), pi)
    return None if result.node is not None or result.status.code == Code.ERROR else result.diagnosis


def dry_run_outcome(env: Env, c: dict[str, Any], spec: dict[str, Any]) -> Any:
    pi = env.info(spec)
    diag = diagnosis(env, c, pi)
    if diag is None:
        return None
    state = CycleState()
    _, status, _ = env.fw.run_pre_filter(state, pi)
    if not status.ok:
        return ("prefilter", status.code, status.reasons)
    table = env.cache.table
    potential = [
        s
        for s in table.slots().tolist()
        if (st_ := diag.by_node.get(table.names[s] or "")) is not None and st_.code == Code.UNSCHEDULABLE
    ]
    if not potential:
        return ()
    plugin = env.plugin
    pdbs = [PDB.from_object(p) for p in c["pdbs"]]
    num = plugin.calculate_num_candidates(len(potential))
    offset = c["offset"] % len(potential)
    candidates, node_statuses, errors = plugin.dry_run_preemption(
        env.fw, state, pi, table, potential, pdbs, offset, num
    )
    best = plugin.select_candidate(candidates)
    return (
        [(cd.node, [v.uid for v in cd.victims], cd.num_pdb_violations) for cd in candidates],
        {n: (s.code, s.reasons, s.plugin) for n, s in node_statuses.items()},
        errors,
        None if best is None else (best.node, [v.uid for v in best.victims]),
    )


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
def test_fast_dry_run_matches_the_per_node_algorithm(c: dict[str, Any]) -> None:
    fast, exact = build(c, True), build(c, False)
    for spec in c["preemptors"]:
        assert dry_run_outcome(fast, c, spec) == dry_run_outcome(exact, c, spec)
        # Neither run changed the cluster, not even the order of a node's pods.
        for n, slot in exact.cache.table.index.items():
            assert list(exact.cache.table.pods_on(slot)) == list(fast.cache.table.pods_on(slot))
            assert list(exact.cache.table.pods_on(slot)) == [
                p["metadata"]["uid"] for p in c["pods"] if p["spec"]["nodeName"] == n
            ]


async def preempt_all(env: Env, c: dict[str, Any]) -> list[Any]:
    """Preemptors one after another, offline (victims leave at once), nominated as the cycle does."""
    env.plugin.rng = random.Random(7)  # type: ignore[assignment]
    seen: list[Any] = []
    for spec in c["preemptors"]:
        pi = env.info(spec)
        result = env.fw.schedule(CycleState(), pi)
        if result.node is not None:
            seen.append(("fits", result.node))
            continue
        nominated, status = await env.fw.run_post_filter(CycleState(), pi, result.diagnosis)
        if nominated:
            env.nominator.add_nominated(pi, nominated)
        table = env.cache.table
        seen.append(
            (
                nominated,
                status.code,
                status.reasons,
                # In the table's order: it breaks ties between equally important victims later on.
                {n: list(table.pods_on(s)) for n, s in table.index.items()},
            )
        )
    return seen


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(clusters())
async def test_fast_preemption_sequence_matches(c: dict[str, Any]) -> None:
    fast, exact = build(c, True, online=False), build(c, False, online=False)
    assert await preempt_all(fast, c) == await preempt_all(exact, c)


@st.composite
def nominated_clusters(draw: st.DrawFn) -> dict[str, Any]:
    """A cluster with one to five more pods nominated to its nodes (preemptors of any priority)."""
    c = draw(clusters())
    names = [n["metadata"]["name"] for n in c["nodes"]]
    for i in range(draw(st.integers(1, 5))):
        spec = draw(pod_specs(f"more{i}", preemptor=draw(st.booleans())))
        spec["status"]["nominatedNodeName"] = draw(st.sampled_from(names))
        c["nominated"].append(spec)
    return c


def _rejections(found: list[tuple[int, Any]] | None) -> Any:
    return None if found is None else [(slot, s.code, s.reasons, s.plugin) for slot, s in found]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nominated_clusters())
def test_nominated_pods_check_in_bulk_matches_the_per_node_check(c: dict[str, Any]) -> None:
    """Filtering with nominated pods (upstream's RunFilterPluginsWithNominatedPods) over many nodes at once gives
    the same rejections, in the same order, as node by node; or declines (None) where it cannot."""
    env = build(c, True)
    table = env.cache.table
    for spec in c["preemptors"]:
        pi = env.info(spec)
        state = CycleState()
        _, status, _ = env.fw.run_pre_filter(state, pi)
        if not status.ok:
            continue
        slots = table.slots()
        fits, _ = env.fw.run_filters(state, pi, slots)
        alive = slots[fits]
        free = table.free.copy()
        env.fw.bulk_nominated_check = None
        per_node = _rejections(env.fw._nominated_rejections(state, pi, table, alive))
        bulk = _rejections(nominated_rejections_in_bulk(env.fw, state, pi, table, alive.tolist()))
        assert bulk is None or bulk == per_node
        env.fw.bulk_nominated_check = nominated_rejections_in_bulk
        assert _rejections(env.fw._nominated_rejections(state, pi, table, alive)) == per_node
        assert (table.free == free).all()  # nothing left changed


def test_benchmark_shape_checks_nominated_pods_in_bulk() -> None:
    """Preemption's shape (resource-only plugins): the nominated-pods check never goes node by node."""
    nodes = [node(f"n{i}", ("4", "16Gi")) for i in range(6)]
    env = full_env(nodes, [])
    for i in range(6):
        env.nominator.add_nominated(env.info(pod(f"nom{i}", priority=10, req=("3", "1Gi"))), f"n{i}")

    def boom(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("per-node nominated check used")

    env.fw.bulk_nominated_check = nominated_rejections_in_bulk
    env.fw.filter_with_nominated_pods = boom  # type: ignore[method-assign]
    pi = env.info(pod("next", priority=10, req=("2", "1Gi")))
    state = env.prefiltered(pi)
    table = env.cache.table
    found = env.fw._nominated_rejections(state, pi, table, table.slots())
    assert [table.names[slot] for slot, _ in found] == [f"n{i}" for i in range(6)]
    assert all(s.reasons == ["Insufficient cpu"] for _, s in found)


def test_pick_index_matches_pick_one_node_for_preemption() -> None:
    from kubesched.scheduler.plugins.default_preemption import pick_one_node_for_preemption

    rnd = random.Random(3)
    env = make_env([node("n")])
    for _ in range(300):
        candidates = []
        for i in range(rnd.randint(1, 6)):
            victims = [
                env.info(
                    pod(
                        f"v{i}.{j}",
                        priority=rnd.choice((-5, 0, 5)),
                        start=rnd.choice((None, epoch(1), epoch(2))),
                    )
                )
                for j in range(rnd.randint(1, 3))
            ]
            candidates.append(Candidate(f"node{i}", victims, rnd.randint(0, 1)))
        want = pick_one_node_for_preemption(candidates, now=1e9)
        got = candidates[pick_index([stats_of(c.victims, c.num_pdb_violations) for c in candidates], 1e9)]
        assert got is want


def test_benchmark_shape_takes_no_per_node_dry_run() -> None:
    """Nodes full of low-priority pods, no ports, affinity or spread: every node is evaluated in bulk."""
    nodes = [node(f"n{i}", ("4", "16Gi")) for i in range(40)]
    pods = [pod(f"low{i}.{j}", on=f"n{i}", req=("900m", "1Gi")) for i in range(40) for j in range(4)]
    env = full_env(nodes, pods, args={"minCandidateNodesAbsolute": 10})

    def boom(*args: Any) -> Any:
        raise AssertionError("per-node dry run used")

    env.plugin.select_victims_on_node = boom  # type: ignore[method-assign]
    pi = env.info(pod("high", priority=10, req=("3", "1Gi")))
    names = [f"n{i}" for i in range(40)]
    state = env.prefiltered(pi)
    table = env.cache.table
    slots = [table.index[n] for n in names]
    candidates, _, errors = env.plugin.dry_run_preemption(env.fw, state, pi, table, slots, [], 5, 10)
    assert errors == []
    assert [c.node for c in candidates] == names[5:15]
    assert all(len(c.victims) == 3 for c in candidates)


@pytest.mark.parametrize("fast", [True, False])
async def test_nominated_pod_with_higher_priority_blocks_the_node(fast: bool) -> None:
    env = make_env(
        [node("node1", ("1", "1Gi")), node("node2", ("1", "1Gi"))],
        [
            pod("v1", on="node1", priority=0, req=("600m", "1")),
            pod("v2", on="node2", priority=0, req=("600m", "1")),
        ],
    )
    env.plugin.fast_dry_run = fast
    env.nominator.add_nominated(env.info(pod("big", priority=100, req=("600m", "1"), nominated="node1")))
    got, status = await env.post_filter(
        env.info(pod("p", priority=10, req=("600m", "1"))), statuses(["node1", "node2"])
    )
    assert (got, status.code) == ("node2", Code.SUCCESS)
    await env.plugin.wait_for_preemptions()


def larger_cluster(seed: int) -> dict[str, Any]:
    """A benchmark-like cluster with variety: 150 nodes holding 0 to 7 pods of mixed priorities, requests and
    start times, some PDBs, a few host ports and anti-affinity terms (those nodes take the per-node path)."""
    rnd = random.Random(seed)
    names = [f"n{i}" for i in range(150)]
    cpus = [rnd.choice(("2", "3", "3")) for _ in names]
    nodes = [
        node(n, (cpu, "8Gi"), pods="110", zone=f"z{i % 3}", hostname=n)
        for i, (n, cpu) in enumerate(zip(names, cpus, strict=True))
    ]
    pods: list[dict[str, Any]] = []
    for n, cpu in zip(names, cpus, strict=True):
        for j in range(rnd.choice((0, 3, 4, 5, 7) if cpu == "2" else (3, 4, 4, 5, 7))):
            extra: dict[str, Any] = {}
            if rnd.random() < 0.02:
                extra["affinity"] = anti_affinity("hostname")
            pods.append(
                pod(
                    f"{n}.{j}",
                    on=n,
                    req=(f"{rnd.choice((300, 500, 500, 900))}m", f"{rnd.choice((100, 500))}Mi"),
                    priority=rnd.choice(PRIORITIES),
                    labels=rnd.choice(({}, {"app": "a"}, {"app": "b"})),
                    start=rnd.choice((None, epoch(1), epoch(2), epoch(3))),
                    **extra,
                )
            )
    pdbs = [pdb({"app": "a"}, rnd.choice((0, 3)))] if seed % 2 else []
    preemptors = [
        pod(f"x{i}", req=(f"{rnd.choice((2500, 2800, 3000))}m", "200Mi"), priority=rnd.choice((10, 20, 30)))
        for i in range(6)
    ]
    return {
        "nodes": nodes,
        "pods": pods,
        "nominated": [],
        "pdbs": pdbs,
        "args": {"minCandidateNodesPercentage": 10, "minCandidateNodesAbsolute": rnd.choice((5, 40, 100))},
        "preemptors": preemptors,
        "synthetic": False,
        "marks": ["u"] * len(names),
        "offset": rnd.randrange(150),
        "stretch": rnd.choice((1, 16, 64)),
    }


@pytest.mark.parametrize("seed", range(6))
async def test_larger_clusters_preempt_as_the_per_node_algorithm(seed: int) -> None:
    """Many candidates per preemption (several batches and stretches, victims lists of unequal lengths, cached
    victim orders reused and invalidated as victims leave): the same nominated nodes and the same cluster after
    each preemption, and the same dry-run outcome for each preemptor on the initial cluster."""
    c = larger_cluster(seed)
    fast, exact = build(c, True, online=False), build(c, False, online=False)
    for spec in c["preemptors"]:
        assert dry_run_outcome(fast, c, spec) == dry_run_outcome(exact, c, spec)
    fast, exact = build(c, True, online=False), build(c, False, online=False)
    assert await preempt_all(fast, c) == await preempt_all(exact, c)
