"""DefaultPreemption: cases transcribed from upstream's default_preemption_test.go (TestPostFilter,
TestDryRunPreemption, TestSelectBestCandidate, TestPodEligibleToPreemptOthers, TestPreempt), plus the
asynchronous API calls, the PreEnqueue gate and offline eviction."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from kubesched.client.rest import ApiError
from kubesched.scheduler.cache import Cache
from kubesched.scheduler.framework import Code, CycleState, Framework, Handle, NodeToStatus, Status
from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.runtime import fit_error_message
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.plugins.default_preemption import (
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    PDB,
    WAITING_FOR_PREEMPTION,
    Candidate,
    DefaultPreemption,
    DefaultPreemptionArgs,
    filter_pods_with_pdb_violation,
    pick_one_node_for_preemption,
)
from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.queue import Nominator

NEG, LOW, MID, HIGH, VERY_HIGH = -100, 0, 100, 1000, 10000
SMALL = ("100m", "100")
MEDIUM = ("200m", "200")
LARGE = ("300m", "300")
VERY_LARGE = ("500m", "500")
FIT = "NodeResourcesFit"


def epoch(ns: int) -> str:
    # Upstream's epochTimeN are N nanoseconds apart; seconds keep the same order in RFC 3339.
    return f"1970-01-01T00:00:{ns:02d}Z"


def node(name: str, res: tuple[str, str] = VERY_LARGE, pods: str = "110", **labels: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"allocatable": {"cpu": res[0], "memory": res[1], "pods": pods}},
    }


def pod(
    name: str,
    *,
    req: tuple[str, str] | None = None,
    priority: int = 0,
    on: str = "",
    labels: dict[str, str] | None = None,
    start: str | None = None,
    policy: str | None = None,
    nominated: str = "",
    terminating: bool = False,
    conditions: list[dict[str, str]] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "c", "image": "pause"}
    if req:
        container["resources"] = {"requests": {"cpu": req[0], "memory": req[1]}}
    body: dict[str, Any] = {"containers": [container], "priority": priority, **spec}
    if on:
        body["nodeName"] = on
    if policy:
        body["preemptionPolicy"] = policy
    status: dict[str, Any] = {}
    if start:
        status["startTime"] = start
    if nominated:
        status["nominatedNodeName"] = nominated
    if conditions:
        status["conditions"] = conditions
    meta: dict[str, Any] = {"name": name, "namespace": "default", "uid": name, "labels": labels or {}}
    if terminating:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": body, "status": status}


def pdb(labels: dict[str, str], allowed: int, disrupted: tuple[str, ...] = ()) -> dict[str, Any]:
    return {
        "metadata": {"name": "pdb", "namespace": "default"},
        "spec": {"selector": {"matchLabels": labels}},
        "status": {
            "disruptionsAllowed": allowed,
            "disruptedPods": {n: "2026-01-01T00:00:00Z" for n in disrupted},
        },
    }


class FakeClient:
    """Records the API calls; ``fail[(verb, name)]`` makes that call raise."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.fail: dict[tuple[str, str], ApiError] = {}

    async def patch(self, api_version: str, plural: str, name: str, patch: Any, **kw: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.calls.append(("PATCH", name, kw.get("subresource"), kw.get("patch_type"), patch))
        if ("PATCH", name) in self.fail:
            raise self.fail[("PATCH", name)]
        return {}

    async def delete(self, api_version: str, plural: str, name: str, **kw: Any) -> dict[str, Any]:
        await asyncio.sleep(0)
        self.calls.append(("DELETE", name, kw.get("namespace"), kw.get("preconditions")))
        if ("DELETE", name) in self.fail:
            raise self.fail[("DELETE", name)]
        return {}

    def deleted(self) -> list[str]:
        return [c[1] for c in self.calls if c[0] == "DELETE"]

    def status_patches(self, name: str) -> list[dict[str, Any]]:
        return [c[4]["status"] for c in self.calls if c[0] == "PATCH" and c[1] == name]


class QueueNominator(Nominator):
    """The queue's nominator under the name the framework's ``Nominator`` protocol uses (queue.py calls it
    ``nodes()``; reported as a mismatch)."""

    def nodes_with_nominated_pods(self) -> list[str]:
        return self.nodes()


class FakeRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def event(
        self, regarding: Any, type: str, reason: str, action: str, note: str, related: Any = None
    ) -> None:
        self.events.append((regarding, type, reason, action, note, related))


class SeqRng:
    """Stands in for ``random.Random``: ``randrange`` answers from a list (upstream's seeded getOffsetRand)."""

    def __init__(self, *values: int) -> None:
        self.values = list(values)

    def randrange(self, n: int) -> int:
        return self.values.pop(0) % n


class FailingExtension:
    """A PreFilter plugin whose AddPod/RemovePod fail on nodes labelled ``error=true`` (upstream's TestPlugin)."""

    name = "test-plugin"

    def pre_filter(self, state: CycleState, pod: PodInfo, nodes: Any) -> tuple[None, Status]:
        return None, Status.success()

    def _check(self, pod: PodInfo, node: int, nodes: Any, verb: str) -> Status:
        if nodes.labels[node].get("error") == "true":
            return Status.error(f"failed to {verb} pod: {pod.name}")
        return Status.success()

    def add_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: Any) -> Status:
        return self._check(pod, node, nodes, "add")

    def remove_pod(self, state: CycleState, pod: PodInfo, other: PodInfo, node: int, nodes: Any) -> Status:
        return self._check(pod, node, nodes, "remove")


@dataclass
class Env:
    cache: Cache
    fw: Framework
    plugin: DefaultPreemption
    nominator: QueueNominator
    client: FakeClient | None
    recorder: FakeRecorder

    def info(self, obj: dict[str, Any]) -> PodInfo:
        return PodInfo.from_pod(obj, self.cache.res)

    def prefiltered(self, pi: PodInfo) -> CycleState:
        state = CycleState()
        _, status, _ = self.fw.run_pre_filter(state, pi)
        assert status.ok, status
        return state

    async def post_filter(self, pi: PodInfo, statuses: NodeToStatus) -> tuple[str | None, Status]:
        return await self.plugin.post_filter(self.prefiltered(pi), pi, self.cache.table, statuses)

    async def schedule_and_preempt(self, pi: PodInfo) -> tuple[str | None, Status, str]:
        """A whole failed cycle as the scheduler runs it: schedule, PostFilter, FailedScheduling message."""
        state = CycleState()
        result = self.fw.schedule(state, pi)
        assert result.node is None, result
        nominated, status = await self.fw.run_post_filter(state, pi, result.diagnosis)
        message = fit_error_message(self.cache.table.num_nodes, result.diagnosis, ", ".join(status.reasons))
        return nominated, status, message

    def pods_on(self, name: str) -> list[str]:
        return sorted(p.name for p in self.cache.table.pods_on(self.cache.table.index[name]).values())


class PdbList:
    """The PDB lister the scheduler gives plugins, over a list."""

    def __init__(self, items: list[dict[str, Any]]) -> None:
        self.items = items

    def pdbs(self) -> list[dict[str, Any]]:
        return self.items


def make_env(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]] = (),
    *,
    plugins: tuple[Any, ...] = (FIT,),
    pdbs: list[dict[str, Any]] | None = None,
    args: dict[str, Any] | None = None,
    online: bool = True,
    evict: Any = None,
) -> Env:
    cache = Cache()
    for n in nodes:
        cache.on_node_add(n)
    for p in pods:
        cache.on_pod_add(p)
    nominator = QueueNominator()
    client = FakeClient() if online else None
    recorder = FakeRecorder()
    handle = Handle(
        cache=cache,
        client=client,
        recorder=recorder,
        nominator=nominator,
        pdbs=PdbList(pdbs or []),
        preemption_evict=evict,
    )
    registry = in_tree_catalogue()
    names: list[str] = []
    for p in plugins:
        if isinstance(p, str):
            names.append(p)
        else:
            registry = registry.extended(PluginDefinition(p.name, lambda a, h, p=p: p, plugin_type=type(p)))
            names.append(p.name)
    filters = [n for n in names if n != FailingExtension.name]
    points = {
        "PreEnqueue": ["DefaultPreemption"],
        "PreFilter": names,
        "Filter": filters,
        "PostFilter": ["DefaultPreemption"],
    }
    plugin_args = {"DefaultPreemption": DefaultPreemptionArgs.model_validate(args)} if args else {}
    fw = Framework.from_plugins(registry, points, plugin_args, handle, seed=1)
    plugin = fw.plugin("DefaultPreemption")
    return Env(cache, fw, plugin, nominator, client, recorder)


def statuses(unschedulable: list[str] = (), unresolvable: list[str] = ()) -> NodeToStatus:
    out = NodeToStatus()
    for n in unschedulable:
        out.by_node[n] = Status(Code.UNSCHEDULABLE)
    for n in unresolvable:
        out.by_node[n] = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
    return out


ONE_POD = ("0", "0")


# --- TestPostFilter ----------------------------------------------------------------------------------------------

POST_FILTER_CASES = [
    pytest.param(
        pod("p", priority=HIGH),
        [pod("p1", on="node1")],
        [node("node1", ONE_POD, pods="1")],
        statuses(["node1"]),
        ("node1", Code.SUCCESS, ""),
        id="pod with higher priority can be made schedulable",
    ),
    pytest.param(
        pod("p"),
        [pod("p1", on="node1")],
        [node("node1", ONE_POD, pods="1")],
        statuses(["node1"]),
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
        ),
        id="pod with tied priority is still unschedulable",
    ),
    pytest.param(
        pod("p", priority=HIGH),
        [pod("p1", on="node1")],
        [node("node1", ONE_POD, pods="1")],
        statuses(unresolvable=["node1"]),
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="preemption should respect filteredNodesStatuses",
    ),
    pytest.param(
        pod("p", priority=HIGH),
        [pod("p1", on="node1")],
        [node("node1", ONE_POD, pods="1")],
        statuses(),
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.",
        ),
        id="absent status means UnschedulableAndUnresolvable",
    ),
    pytest.param(
        pod("p", priority=MID),
        [pod("p1", priority=HIGH, on="node1"), pod("p2", priority=LOW, on="node2")],
        [node("node1", ONE_POD, pods="1"), node("node2", ONE_POD, pods="1")],
        statuses(["node1", "node2"]),
        ("node2", Code.SUCCESS, ""),
        id="pod can be made schedulable on one node",
    ),
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [pod("p1", on="node1"), pod("p2", on="node2")],
        [node("node1", ("200m", "400")), node("node2", ("200m", "400"))],
        statuses(["node1", "node2"]),
        ("", Code.UNSCHEDULABLE, "preemption: 0/2 nodes are available: 2 Insufficient cpu."),
        id="no candidate nodes found, no enough resource after removing low priority pods",
    ),
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [pod("p1", priority=HIGH, on="node1"), pod("p2", on="node2"), pod("p3", priority=HIGH, on="node3")],
        [node("node1", ONE_POD, pods="1"), node("node2", ("200m", "400")), node("node3", ONE_POD, pods="1")],
        statuses(["node1", "node2", "node3"]),
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/3 nodes are available: 1 Insufficient cpu, 2 No preemption victims found for incoming pod.",
        ),
        id="mixed reasons, no lower priority pod and not enough CPU",
    ),
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [pod("p1", on="node1"), pod("p2", on="node2")],
        [node(f"node{i}", ("200m", "400")) for i in range(1, 5)],
        statuses(["node1", "node2"], ["node4"]),
        (
            "",
            Code.UNSCHEDULABLE,
            "preemption: 0/4 nodes are available: 2 Insufficient cpu, 2 Preemption is not helpful for scheduling.",
        ),
        id="mixed reasons, 2 unresolvable (one absent) and 2 without enough CPU",
    ),
]


@pytest.mark.parametrize(("preemptor", "existing", "nodes", "node_statuses", "want"), POST_FILTER_CASES)
async def test_post_filter(
    preemptor: dict[str, Any],
    existing: list[dict[str, Any]],
    nodes: list[dict[str, Any]],
    node_statuses: NodeToStatus,
    want: tuple[str, Code, str],
) -> None:
    env = make_env(nodes, existing)
    got_node, status = await env.post_filter(env.info(preemptor), node_statuses)
    assert (got_node, status.code, status.message()) == want
    await env.plugin.wait_for_preemptions()


async def test_post_filter_pdb_prefers_node_with_lower_highest_victim() -> None:
    """Upstream "pod can be made schedulable on minHighestPriority node": both nodes violate one PDB, node2's most
    important victim has the lower priority."""
    env = make_env(
        [node("node1", ONE_POD, pods="1"), node("node2", ONE_POD, pods="1")],
        [
            pod("p1", priority=HIGH, on="node1", labels={"pdb": "non-violating"}),
            pod("p2", priority=LOW, on="node1", labels={"pdb": "violating"}),
            pod("p3", priority=MID, on="node2", labels={"pdb": "violating"}),
        ],
        pdbs=[pdb({"pdb": "violating"}, 0), pdb({"pdb": "non-violating"}, 2**31 - 1)],
    )
    got, status = await env.post_filter(env.info(pod("p", priority=VERY_HIGH)), statuses(["node1", "node2"]))
    assert (got, status.code) == ("node2", Code.SUCCESS)
    await env.plugin.wait_for_preemptions()
    assert env.client is not None and env.client.deleted() == ["p3"]


async def test_post_filter_extension_error() -> None:
    env = make_env(
        [node("node1", LARGE, error="true")], [pod("p1", on="node1")], plugins=(FIT, FailingExtension())
    )
    got, status = await env.post_filter(env.info(pod("p", priority=HIGH, req=LARGE)), statuses(["node1"]))
    assert got is None
    assert status.code == Code.ERROR
    assert status.reasons == [
        'preemption: running RemovePod on PreFilter plugin "test-plugin": failed to remove pod: p'
    ]


async def test_post_filter_one_node_errors_the_other_is_chosen() -> None:
    env = make_env(
        [node("node1", LARGE, error="true"), node("node2", LARGE)],
        [pod("p1", on="node1"), pod("p2", on="node2", req=MEDIUM)],
        plugins=(FIT, FailingExtension()),
    )
    got, status = await env.post_filter(
        env.info(pod("p", priority=HIGH, req=LARGE)), statuses(["node1", "node2"])
    )
    assert (got, status.code) == ("node2", Code.SUCCESS)
    await env.plugin.wait_for_preemptions()


# --- TestDryRunPreemption -----------------------------------------------------------------------------------


async def dry_run(
    env: Env, preemptor: dict[str, Any], pdbs: list[PDB] = (), offset: int = 0
) -> dict[str, Any]:
    """Candidates over every node (upstream passes all node infos, sorted by name): node -> (victims by name,
    PDB violations)."""
    pi = env.info(preemptor)
    state = env.prefiltered(pi)
    table = env.cache.table
    slots = sorted(table.slots().tolist(), key=lambda s: table.names[s])
    n = env.plugin.calculate_num_candidates(len(slots))
    candidates, _, _ = env.plugin.dry_run_preemption(env.fw, state, pi, table, slots, list(pdbs), offset, n)
    return {c.node: (sorted(v.name for v in c.victims), c.num_pdb_violations) for c in candidates}


DRY_RUN_CASES = [
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [pod("p1", on="node1", priority=MID, req=LARGE), pod("p2", on="node2", priority=MID, req=LARGE)],
        {"node1": (["p1"], 0), "node2": (["p2"], 0)},
        id="fits on both nodes when lower priority pods are preempted",
    ),
    pytest.param(
        pod("p", priority=LOW, req=LARGE),
        [pod("p1", on="node1", priority=MID, req=LARGE), pod("p2", on="node2", priority=MID, req=LARGE)],
        {},
        id="other pods are higher priority, no preemption",
    ),
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [
            pod("p1.1", on="node1", priority=LOW, req=SMALL),
            pod("p1.2", on="node1", priority=MID, req=LARGE),
            pod("p2", on="node2", priority=MID, req=LARGE),
        ],
        {"node1": (["p1.2"], 0), "node2": (["p2"], 0)},
        id="medium priority pod is preempted, but lower priority one stays as it is small",
    ),
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [
            pod("p1.1", on="node1", priority=MID, req=SMALL),
            pod("p1.2", on="node1", priority=LOW, req=SMALL),
            pod("p1.3", on="node1", priority=MID, req=MEDIUM),
            pod("p1.4", on="node1", priority=HIGH, req=SMALL),
            pod("p2", on="node2", priority=HIGH, req=LARGE),
        ],
        {"node1": (["p1.2", "p1.3"], 0)},
        id="mixed priority pods are preempted",
    ),
    pytest.param(
        pod("p", priority=HIGH, req=LARGE),
        [
            pod("p1.1", on="node1", priority=LOW, req=SMALL, start=epoch(5)),
            pod("p1.2", on="node1", priority=LOW, req=SMALL, start=epoch(4)),
            pod("p1.3", on="node1", priority=MID, req=MEDIUM, start=epoch(3)),
            pod("p1.4", on="node1", priority=HIGH, req=SMALL, start=epoch(2)),
            pod("p2", on="node2", priority=HIGH, req=LARGE, start=epoch(1)),
        ],
        {"node1": (["p1.1", "p1.3"], 0)},
        id="mixed priority pods are preempted, pick later StartTime one when priorities are equal",
    ),
]


@pytest.mark.parametrize(("preemptor", "existing", "want"), DRY_RUN_CASES)
async def test_dry_run_preemption(
    preemptor: dict[str, Any], existing: list[dict[str, Any]], want: Any
) -> None:
    env = make_env([node("node1"), node("node2")], existing)
    before = {n: env.pods_on(n) for n in ("node1", "node2")}
    assert await dry_run(env, preemptor) == want
    # The dry run leaves the table as it found it.
    assert {n: env.pods_on(n) for n in ("node1", "node2")} == before
    assert env.cache.table.requested[env.cache.table.index["node1"], 0] == sum(
        int(pi.requests[0]) for pi in env.cache.table.pods_on(env.cache.table.index["node1"]).values()
    )


async def test_dry_run_pod_with_anti_affinity_is_preempted() -> None:
    anti = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
                    "topologyKey": "hostname",
                }
            ]
        }
    }
    env = make_env(
        [node("node1", hostname="node1"), node("node2", hostname="node2")],
        [
            pod("p1.1", on="node1", labels={"foo": ""}, priority=LOW, req=SMALL, affinity=anti),
            pod("p1.2", on="node1", priority=MID, req=SMALL),
            pod("p1.3", on="node1", priority=HIGH, req=SMALL),
            pod("p2", on="node2", priority=HIGH, req=SMALL),
        ],
        plugins=(FIT, "InterPodAffinity"),
    )
    got = await dry_run(env, pod("p", labels={"foo": ""}, priority=HIGH, req=SMALL))
    assert got == {"node1": (["p1.1"], 0)}


async def test_dry_run_resolves_pod_topology_spread() -> None:
    spread = [
        {
            "maxSkew": 1,
            "topologyKey": key,
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchExpressions": [{"key": "foo", "operator": "Exists"}]},
        }
        for key in ("zone", "hostname")
    ]
    env = make_env(
        [
            node("node-a", hostname="node-a", zone="zone1"),
            node("node-b", hostname="node-b", zone="zone1"),
            node("node-x", hostname="node-x", zone="zone2"),
        ],
        [
            pod("pod-a1", on="node-a", labels={"foo": ""}, priority=MID),
            pod("pod-a2", on="node-a", labels={"foo": ""}, priority=LOW),
            pod("pod-b1", on="node-b", labels={"foo": ""}, priority=LOW),
            pod("pod-x1", on="node-x", labels={"foo": ""}, priority=HIGH),
            pod("pod-x2", on="node-x", labels={"foo": ""}, priority=HIGH),
        ],
        plugins=(FIT, "PodTopologySpread"),
    )
    got = await dry_run(env, pod("p", labels={"foo": ""}, priority=HIGH, topologySpreadConstraints=spread))
    assert got == {"node-a": (["pod-a2"], 0), "node-b": (["pod-b1"], 0)}


PDB_CASES = [
    pytest.param([pdb({"app": "foo"}, 1)], 2, {"node1": (["p1.1", "p1.2"], 1)}, id="violation of same pdb"),
    pytest.param(
        [pdb({"app": "foo"}, 1, ("p2",))],
        2,
        {"node1": (["p1.1", "p1.2"], 1)},
        id="the victim is not in DisruptedPods",
    ),
    pytest.param(
        [pdb({"app": "foo"}, 1, ("p1.2",))], 2, {"node1": (["p1.1", "p1.2"], 0)}, id="victim in DisruptedPods"
    ),
    pytest.param(
        [pdb({"app": "foo"}, 1, ("p1.3",))],
        3,
        {"node1": (["p1.1", "p1.2", "p1.3"], 1)},
        id="victim in DisruptedPods is treated as non-violating",
    ),
]


@pytest.mark.parametrize(("pdbs", "count", "want"), PDB_CASES)
async def test_dry_run_with_pdbs(pdbs: list[dict[str, Any]], count: int, want: Any) -> None:
    existing = [
        pod(f"p1.{i}", on="node1", labels={"app": "foo"}, priority=MID, req=MEDIUM)
        for i in range(1, count + 1)
    ]
    env = make_env([node("node1", ("600m", "600"))], existing)
    # With three victims node1 has 600m; the pod needs all of it.
    preemptor = pod("p", priority=HIGH, req=VERY_LARGE if count == 2 else ("600m", "600"))
    got = await dry_run(env, preemptor, [PDB.from_object(p) for p in pdbs])
    assert got == want


CANDIDATE_LIMIT_CASES = [
    pytest.param(
        [MID] * 5,
        [],
        [4],
        [{"node1": (["p1"], 0), "node5": (["p5"], 0)}],
        id="all nodes are possible candidates, but the args limit to 2",
    ),
    pytest.param(
        [MID, VERY_HIGH, MID, MID, VERY_HIGH],
        [],
        [4],
        [{"node1": (["p1"], 0), "node3": (["p3"], 0)}],
        id="some nodes are not possible candidates, the args limit to 2",
    ),
    pytest.param(
        [MID] * 5,
        [],
        [4, 1, 3],
        [
            {"node1": (["p1"], 0), "node5": (["p5"], 0)},
            {"node2": (["p2"], 0), "node3": (["p3"], 0)},
            {"node4": (["p4"], 0), "node5": (["p5"], 0)},
        ],
        id="offset across scheduling cycles wraps around",
    ),
    pytest.param(
        [MID] * 5,
        [1, 2, 5],
        [4],
        [{"node1": (["p1"], 1), "node3": (["p3"], 0), "node5": (["p5"], 1)}],
        id="looks past numCandidates until a non-PDB-violating node is found",
    ),
]


@pytest.mark.parametrize(("priorities", "pdb_nodes", "offsets", "want"), CANDIDATE_LIMIT_CASES)
async def test_dry_run_candidate_limit(
    priorities: list[int], pdb_nodes: list[int], offsets: list[int], want: list[Any]
) -> None:
    existing = [
        pod(f"p{i}", on=f"node{i}", priority=prio, req=LARGE, labels={"app": "foo"} if i in pdb_nodes else {})
        for i, prio in enumerate(priorities, start=1)
    ]
    absolute = 2 if pdb_nodes else 1
    env = make_env(
        [node(f"node{i}") for i in range(1, 6)],
        existing,
        args={"minCandidateNodesPercentage": 40, "minCandidateNodesAbsolute": absolute},
    )
    env.plugin.rng = SeqRng(*offsets)  # type: ignore[assignment]
    pdbs = [PDB.from_object(pdb({"app": "foo"}, 0))] if pdb_nodes else []
    for cycle, expected in enumerate(want):
        offset, _ = env.plugin.get_offset_and_num_candidates(5)
        got = await dry_run(env, pod(f"tp{cycle}", priority=HIGH, req=LARGE), pdbs, offset)
        assert got == expected, f"cycle {cycle}"


# --- TestSelectBestCandidate --------------------------------------------------------------------------------

T0 = epoch(0)
SELECT_CASES = [
    pytest.param(
        [
            ("p1.1", "node1", MID, MEDIUM, T0),
            ("p1.2", "node1", MID, LARGE, T0),
            ("p2.1", "node2", MID, MEDIUM, T0),
            ("p2.2", "node2", LOW, MEDIUM, T0),
            ("p3.1", "node3", LOW, MEDIUM, T0),
            ("p3.2", "node3", LOW, MEDIUM, T0),
        ],
        HIGH,
        "node3",
        id="node with min highest priority pod is picked",
    ),
    pytest.param(
        [
            ("p1.1", "node1", MID, MEDIUM, T0),
            ("p1.2", "node1", MID, LARGE, T0),
            ("p2.1", "node2", MID, LARGE, T0),
            ("p2.2", "node2", LOW, MEDIUM, T0),
            ("p3.1", "node3", MID, MEDIUM, T0),
            ("p3.2", "node3", MID, MEDIUM, T0),
        ],
        HIGH,
        "node2",
        id="when highest priorities are the same, minimum sum of priorities is picked",
    ),
    pytest.param(
        [
            ("p1.1", "node1", MID, SMALL, T0),
            ("p1.2", "node1", NEG, SMALL, T0),
            ("p1.3", "node1", MID, SMALL, T0),
            ("p1.4", "node1", NEG, SMALL, T0),
            ("p2.1", "node2", MID, LARGE, T0),
            ("p2.2", "node2", NEG, MEDIUM, T0),
            ("p3.1", "node3", MID, MEDIUM, T0),
            ("p3.2", "node3", NEG, SMALL, T0),
            ("p3.3", "node3", LOW, SMALL, T0),
        ],
        HIGH,
        "node2",
        id="when highest priority and sum are the same, minimum number of pods is picked",
    ),
    pytest.param(
        [
            ("p1.1", "node1", MID, SMALL, T0),
            ("p1.2", "node1", NEG, SMALL, T0),
            ("p1.3", "node1", NEG, SMALL, T0),
            ("p2.1", "node2", MID, LARGE, T0),
            ("p2.2", "node2", NEG, MEDIUM, T0),
            ("p3.1", "node3", MID, MEDIUM, T0),
            ("p3.2", "node3", NEG, SMALL, T0),
            ("p3.3", "node3", LOW, SMALL, T0),
        ],
        HIGH,
        "node2",
        id="sum of adjusted priorities is considered",
    ),
    pytest.param(
        [
            ("p1.1", "node1", MID, SMALL, T0),
            ("p1.2", "node1", LOW, SMALL, T0),
            ("p1.3", "node1", LOW, SMALL, T0),
            ("p2.1", "node2", HIGH, LARGE, T0),
            ("p3.1", "node3", MID, MEDIUM, T0),
            ("p3.2", "node3", LOW, SMALL, T0),
            ("p3.3", "node3", LOW, SMALL, T0),
            ("p3.4", "node3", LOW, MEDIUM, T0),
            ("p4.1", "node4", MID, MEDIUM, T0),
            ("p4.2", "node4", MID, SMALL, T0),
            ("p4.3", "node4", MID, SMALL, T0),
            ("p4.4", "node4", NEG, SMALL, T0),
        ],
        VERY_HIGH,
        "node1",
        id="non-overlapping lowest high priority, sum priorities, and number of pods",
    ),
    pytest.param(
        [
            ("p1.1", "node1", MID, MEDIUM, epoch(2)),
            ("p1.2", "node1", MID, MEDIUM, epoch(2)),
            ("p2.1", "node2", MID, MEDIUM, epoch(3)),
            ("p2.2", "node2", MID, MEDIUM, epoch(3)),
            ("p3.1", "node3", MID, MEDIUM, epoch(1)),
            ("p3.2", "node3", MID, MEDIUM, epoch(1)),
        ],
        HIGH,
        "node2",
        id="same priority, same number of victims, different start time for each node's pod",
    ),
    pytest.param(
        [
            ("p1.1", "node1", MID, MEDIUM, epoch(4)),
            ("p1.2", "node1", MID, MEDIUM, epoch(2)),
            ("p2.1", "node2", MID, MEDIUM, epoch(5)),
            ("p2.2", "node2", MID, MEDIUM, epoch(1)),
            ("p3.1", "node3", MID, MEDIUM, epoch(3)),
            ("p3.2", "node3", MID, MEDIUM, epoch(6)),
        ],
        HIGH,
        "node3",
        id="same priority, same number of victims, different start time for all pods",
    ),
    pytest.param(
        [
            ("p1.1", "node1", LOW, MEDIUM, epoch(4)),
            ("p1.2", "node1", MID, MEDIUM, epoch(2)),
            ("p2.1", "node2", MID, MEDIUM, epoch(6)),
            ("p2.2", "node2", LOW, MEDIUM, epoch(1)),
            ("p3.1", "node3", LOW, MEDIUM, epoch(3)),
            ("p3.2", "node3", MID, MEDIUM, epoch(5)),
        ],
        HIGH,
        "node2",
        id="different priority, same number of victims, different start time for all pods",
    ),
]


@pytest.mark.parametrize(("existing", "priority", "want"), SELECT_CASES)
async def test_select_best_candidate(existing: list[tuple[Any, ...]], priority: int, want: str) -> None:
    names = sorted({n for _, n, *_ in existing})
    env = make_env(
        [node(n) for n in names],
        [pod(name, on=n, priority=prio, req=req, start=start) for name, n, prio, req, start in existing],
    )
    got, status = await env.post_filter(
        env.info(pod("p", priority=priority, req=VERY_LARGE)), statuses(names)
    )
    assert (got, status.code) == (want, Code.SUCCESS)
    await env.plugin.wait_for_preemptions()


def test_pick_one_node_falls_back_to_first_candidate() -> None:
    cache = Cache()
    a = PodInfo.from_pod(pod("a", priority=MID, start=T0), cache.res)
    b = PodInfo.from_pod(pod("b", priority=MID, start=T0), cache.res)
    assert pick_one_node_for_preemption([Candidate("n2", [a]), Candidate("n1", [b])]).node == "n2"
    assert pick_one_node_for_preemption([]) is None
    # Fewer PDB violations beats everything else.
    heavy = Candidate("heavy", [a, b], 0)
    light = Candidate("light", [a], 1)
    assert pick_one_node_for_preemption([light, heavy]).node == "heavy"


# --- PDB grouping --------------------------------------------------------------------------------------------


def test_filter_pods_with_pdb_violation_spends_budget_in_order() -> None:
    cache = Cache()
    pods = [PodInfo.from_pod(pod(f"v{i}", labels={"app": "foo"}), cache.res) for i in range(3)]
    unlabelled = PodInfo.from_pod(pod("plain"), cache.res)
    budget = PDB.from_object(pdb({"app": "foo"}, 1))
    violating, other = filter_pods_with_pdb_violation([*pods, unlabelled], [budget])
    assert [p.name for p in violating] == ["v1", "v2"]
    assert [p.name for p in other] == ["v0", "plain"]
    # Another namespace, or an empty selector, matches nothing.
    elsewhere = PDB.from_object({**pdb({"app": "foo"}, 0), "metadata": {"namespace": "other"}})
    empty = PDB.from_object({"metadata": {"namespace": "default"}, "spec": {"selector": {}}, "status": {}})
    assert filter_pods_with_pdb_violation(pods, [elsewhere, empty]) == ([], pods)


# --- TestPodEligibleToPreemptOthers ----------------------------------------------------------------------------

DISRUPTED = [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]
ELIGIBLE_CASES = [
    pytest.param(
        pod("p", priority=HIGH, nominated="node1"),
        [pod("p1", priority=LOW, on="node1", terminating=True, conditions=DISRUPTED)],
        Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ["node(s) had untolerated taint(s)"]),
        (True, ""),
        id="nominated node now unresolvable",
    ),
    pytest.param(pod("p", priority=HIGH), [], None, (True, ""), id="pod without nominated node"),
    pytest.param(pod("p", priority=HIGH, policy="Never"), [], None, (False, NOT_ELIGIBLE_NEVER), id="Never"),
    pytest.param(
        pod("p", priority=HIGH, nominated="node1"),
        [pod("p1", priority=LOW, on="node1", terminating=True, conditions=DISRUPTED)],
        Status(Code.UNSCHEDULABLE, ["Insufficient cpu"]),
        (False, NOT_ELIGIBLE_TERMINATING),
        id="preemption victim terminating on the nominated node",
    ),
    pytest.param(
        pod("p", priority=HIGH, nominated="node1"),
        [pod("p1", priority=LOW, on="node1", terminating=True)],
        Status(Code.UNSCHEDULABLE, ["Insufficient cpu"]),
        (True, ""),
        id="non-victim pods terminating",
    ),
]


@pytest.mark.parametrize(("preemptor", "existing", "nominated_status", "want"), ELIGIBLE_CASES)
def test_pod_eligible_to_preempt_others(
    preemptor: dict[str, Any], existing: list[dict[str, Any]], nominated_status: Status | None, want: Any
) -> None:
    env = make_env([node("node1")], existing)
    pi = env.info(preemptor)
    got = env.plugin.pod_eligible_to_preempt_others(
        pi, env.cache.table, pi.nominated_node_name, nominated_status
    )
    assert got == want


# --- the whole cycle: messages, API calls, gating ------------------------------------------------------------


async def test_basic_preemption_calls_the_api_and_gates_the_pod() -> None:
    """Upstream TestPreempt "basic preemption logic": node1's two low-priority pods go."""
    env = make_env(
        [node("node1"), node("node2"), node("node3")],
        [
            pod("p1.1", on="node1", priority=LOW, req=SMALL),
            pod("p1.2", on="node1", priority=LOW, req=SMALL),
            pod("p2.1", on="node2", priority=HIGH, req=LARGE),
            pod("p3.1", on="node3", priority=MID, req=MEDIUM),
        ],
    )
    lower = env.info(pod("lower", priority=LOW, nominated="node1"))
    env.nominator.add_nominated(lower)
    preemptor = env.info(pod("p", priority=HIGH, req=VERY_LARGE, policy="PreemptLowerPriority"))
    nominated, status, message = await env.schedule_and_preempt(preemptor)
    assert (nominated, status.code) == ("node1", Code.SUCCESS)
    assert message == "0/3 nodes are available: 3 Insufficient cpu, 3 Insufficient memory."
    # Gated until the deletions are issued; nothing was sent yet (the cycle never waits for the API).
    assert env.plugin.pre_enqueue(preemptor) == Status(
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE, [WAITING_FOR_PREEMPTION]
    )
    assert env.client is not None and env.client.calls == []
    await env.plugin.wait_for_preemptions()
    assert env.plugin.pre_enqueue(preemptor).ok
    assert sorted(env.client.deleted()) == ["p1.1", "p1.2"]
    for call in env.client.calls:
        if call[0] == "DELETE":
            assert call[2:] == ("default", {"uid": call[1]})
    assert env.client.status_patches("p") == [{"nominatedNodeName": "node1"}]
    assert env.client.status_patches("lower") == [{"nominatedNodeName": None}]
    assert env.nominator.nominated_node("lower") is None
    (condition,) = env.client.status_patches("p1.1")[0]["conditions"]
    assert condition["type"] == "DisruptionTarget" and condition["reason"] == "PreemptionByScheduler"
    assert condition["message"] == "default-scheduler: preempting to accommodate a higher priority pod"
    assert all(c[2:4] == ("status", "strategic") for c in env.client.calls if c[0] == "PATCH")
    notes = sorted(
        (r["name"], t, reason, action, note, rel["name"])
        for r, t, reason, action, note, rel in env.recorder.events
    )
    assert notes == [
        (v, "Normal", "Preempted", "Preempting", "Preempted by pod p on node node1", "p")
        for v in ("p1.1", "p1.2")
    ]
    # The dry run restored the table: the victims are still there until the informer reports them gone.
    assert env.pods_on("node1") == ["p1.1", "p1.2"]


async def test_failed_cycle_message_when_preemption_cannot_help() -> None:
    env = make_env(
        [node("node1", ("1", "1Gi")), node("node2", ("1", "1Gi"))],
        [
            pod("a", on="node1", priority=HIGH, req=("800m", "1")),
            pod("b", on="node2", priority=HIGH, req=("800m", "1")),
        ],
    )
    nominated, status, message = await env.schedule_and_preempt(
        env.info(pod("p", priority=MID, req=("500m", "1")))
    )
    assert nominated is None and status.code == Code.UNSCHEDULABLE
    assert message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )


async def test_equal_priority_never_preempts() -> None:
    env = make_env([node("node1", ONE_POD, pods="1")], [pod("p1", on="node1", priority=MID)])
    nominated, _, message = await env.schedule_and_preempt(env.info(pod("p", priority=MID)))
    assert nominated is None
    assert message == (
        "0/1 nodes are available: 1 Too many pods. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
    assert env.client is not None and env.client.calls == []


async def test_preemption_policy_never() -> None:
    env = make_env([node("node1", ONE_POD, pods="1")], [pod("p1", on="node1", priority=LOW)])
    nominated, status, message = await env.schedule_and_preempt(
        env.info(pod("p", priority=HIGH, policy="Never"))
    )
    assert nominated is None and status.code == Code.UNSCHEDULABLE
    assert status.reasons == ["preemption: not eligible due to preemptionPolicy=Never."]
    assert (
        message
        == "0/1 nodes are available: 1 Too many pods. preemption: not eligible due to preemptionPolicy=Never."
    )


async def test_no_candidate_clears_the_nomination() -> None:
    env = make_env([node("node1", ONE_POD, pods="1")], [pod("p1", on="node1", priority=HIGH)])
    pi = env.info(pod("p", priority=MID, nominated="node1"))
    env.nominator.add_nominated(pi)
    got, status = await env.post_filter(pi, statuses(["node1"]))
    assert got == "" and status.code == Code.UNSCHEDULABLE
    assert env.nominator.nominated_node("p") is None
    await env.plugin.wait_for_preemptions()
    assert env.client is not None and env.client.status_patches("p") == [{"nominatedNodeName": None}]


async def test_victim_already_gone_is_not_an_error() -> None:
    """Two equal victims on a two-pod node: one is reprieved; the other vanished before we got to it."""
    env = make_env(
        [node("node1", ONE_POD, pods="2")],
        [pod("v1", on="node1", priority=LOW), pod("v2", on="node1", priority=LOW)],
    )
    assert env.client is not None
    env.client.fail[("PATCH", "v2")] = ApiError(404, "NotFound", 'pods "v2" not found')
    activated: list[list[str]] = []
    env.plugin.handle.activate = activated.append
    got, _ = await env.post_filter(env.info(pod("p", priority=HIGH)), statuses(["node1"]))
    assert got == "node1"
    await env.plugin.wait_for_preemptions()
    assert [c[1] for c in env.client.calls if c[0] == "PATCH"] == ["p", "v2"]
    assert env.client.deleted() == []
    assert activated == [] and env.recorder.events == []


def test_gate_lifts_once_the_last_victim_is_terminating() -> None:
    """While the last victim's DELETE is in flight, its deletionTimestamp (or its absence) ends the wait: the
    informer may report it before the call returns, and a still-gated pod would miss that event."""
    env = make_env(
        [node("node1")], [pod("v1", on="node1", priority=LOW), pod("v2", on="node1", priority=LOW)]
    )
    preemptor = env.info(pod("p", priority=HIGH))
    env.plugin._preempting.add("p")
    assert env.plugin.pre_enqueue(preemptor).code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    env.plugin._last_victim["p"] = "v1"
    assert not env.plugin.pre_enqueue(preemptor).ok
    env.cache.on_pod_update(None, pod("v1", on="node1", priority=LOW, terminating=True))
    assert env.plugin.pre_enqueue(preemptor).ok
    env.plugin._last_victim["p"] = "v2"
    env.cache.on_pod_delete(pod("v2", on="node1"))
    assert env.plugin.pre_enqueue(preemptor).ok


async def test_failed_deletion_activates_the_pod() -> None:
    env = make_env(
        [node("node1", ONE_POD, pods="2")],
        [pod("v1", on="node1", priority=LOW), pod("v2", on="node1", priority=LOW)],
    )
    assert env.client is not None
    for v in ("v1", "v2"):
        env.client.fail[("DELETE", v)] = ApiError(500, "InternalError", "boom")
    activated: list[list[str]] = []
    env.plugin.handle.activate = activated.append
    got, _ = await env.post_filter(env.info(pod("p", priority=HIGH)), statuses(["node1"]))
    assert got == "node1"
    await env.plugin.wait_for_preemptions()
    assert activated == [["p"]]
    assert not env.plugin.is_pod_running_preemption("p")
    assert env.recorder.events == []


async def test_victims_already_terminating_are_not_deleted_again() -> None:
    env = make_env([node("node1", ONE_POD, pods="1")], [pod("v", on="node1", priority=LOW, terminating=True)])
    preemptor = env.info(pod("p", priority=HIGH))
    got, status = await env.post_filter(preemptor, statuses(["node1"]))
    assert (got, status.code) == ("node1", Code.SUCCESS)
    assert env.plugin.pre_enqueue(preemptor).ok  # nothing in flight to wait for
    await env.plugin.wait_for_preemptions()
    assert env.client is not None and env.client.deleted() == []


async def test_nominated_pods_of_higher_priority_count_in_the_dry_run() -> None:
    """A higher-priority pod already nominated to node1 takes its room: preempting there is not enough."""
    env = make_env(
        [node("node1", ("1", "1Gi")), node("node2", ("1", "1Gi"))],
        [
            pod("v1", on="node1", priority=LOW, req=("600m", "1")),
            pod("v2", on="node2", priority=LOW, req=("600m", "1")),
        ],
    )
    env.nominator.add_nominated(
        env.info(pod("big", priority=VERY_HIGH, req=("600m", "1"), nominated="node1"))
    )
    got, status = await env.post_filter(
        env.info(pod("p", priority=HIGH, req=("600m", "1"))), statuses(["node1", "node2"])
    )
    assert (got, status.code) == ("node2", Code.SUCCESS)
    await env.plugin.wait_for_preemptions()


# --- offline --------------------------------------------------------------------------------------------------


async def test_offline_preemption_frees_the_room_at_once() -> None:
    env = make_env(
        [node("node1", ("1", "1Gi"))],
        [
            pod("v1", on="node1", priority=LOW, req=("600m", "1")),
            pod("keep", on="node1", priority=LOW, req=("200m", "1")),
        ],
        online=False,
    )
    preemptor = env.info(pod("p", priority=HIGH, req=("700m", "1")))
    nominated, status, _ = await env.schedule_and_preempt(preemptor)
    assert (nominated, status.code) == ("node1", Code.SUCCESS)
    assert env.pods_on("node1") == ["keep"]
    assert env.plugin.pre_enqueue(preemptor).ok
    assert [e[4] for e in env.recorder.events] == ["Preempted by pod p on node node1"]
    # The next cycle finds the room.
    assert env.fw.schedule(CycleState(), preemptor).node == "node1"


async def test_offline_evict_hook_replaces_the_removal() -> None:
    evicted: list[tuple[str, str, str]] = []
    env = make_env(
        [node("node1", ONE_POD, pods="1")],
        [pod("v1", on="node1", priority=LOW)],
        online=False,
        evict=lambda v, p, n: evicted.append((v.name, p.name, n)),
    )
    got, _ = await env.post_filter(env.info(pod("p", priority=HIGH)), statuses(["node1"]))
    assert got == "node1"
    assert evicted == [("v1", "p", "node1")]
    assert env.pods_on("node1") == ["v1"]  # the hook decides; the plugin removed nothing itself


# --- arguments ------------------------------------------------------------------------------------------------


def preemption_args(**fields: int) -> DefaultPreemptionArgs:
    return DefaultPreemptionArgs.model_validate(fields)


def test_args_validation_and_candidate_count() -> None:
    # The args model is the one place args are checked (the configuration loader reports these).
    errors = preemption_args(minCandidateNodesPercentage=101).validate_args("args")
    assert any("minCandidateNodesPercentage" in str(e) for e in errors)
    errors = preemption_args(minCandidateNodesPercentage=0, minCandidateNodesAbsolute=0).validate_args("args")
    assert any("cannot be zero at the same time" in str(e) for e in errors)
    pl = DefaultPreemption(DefaultPreemptionArgs(), Handle())
    assert [pl.calculate_num_candidates(n) for n in (0, 50, 100, 5000)] == [0, 50, 100, 500]
    pl = DefaultPreemption(
        preemption_args(minCandidateNodesPercentage=40, minCandidateNodesAbsolute=1), Handle()
    )
    assert pl.calculate_num_candidates(5) == 2
    assert pl.events_to_register()[0].resource == "AssignedPod"
