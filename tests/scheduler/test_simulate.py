"""``kubesched simulate``: through ``simulate()`` and through the real command line.

Expected scores are worked out by hand from the 1.36 default profile (weights TaintToleration 3,
NodeAffinity 2, NodeResourcesFit 1, PodTopologySpread 2, InterPodAffinity 2,
NodeResourcesBalancedAllocation 1, ImageLocality 1), not read back from the code. The formulas used:

- LeastAllocated: per resource ``(alloc - requested_with_pod) * 100 // alloc``, mean over cpu and memory (//).
- BalancedAllocation (1.36): ``b = int((1 - |f_cpu - f_mem| / 2) * 100)`` with f = requested / alloc;
  ``score = 50 + (50 + b(with pod) - b(without pod)) / 2`` (Go division).
- TaintToleration: untolerated PreferNoSchedule taints, reversed: ``100 - 100 * c // max`` (100 if all 0).
- NodeAffinity: sum of matching preferred weights, scaled to ``100 * s // max``.
- PodTopologySpread: ``round(count_in_domain * log(domains + 2) + maxSkew - 1)``, normalized to
  ``100 * (max + min - s) // max``.
- InterPodAffinity: sum of matching preferred weights, scaled to ``int(100 * (s - min) / (max - min))``.
- ImageLocality: ``size * nodes_with_image / all_nodes`` clamped to [23MB, 1000MB * containers], scaled to
  0..100.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kubesched import cli
from kubesched.scheduler.config import default_config, load_config
from kubesched.scheduler.simulate import (
    ClusterDumpError,
    Placement,
    placements_json,
    print_table,
    read_objects,
    simulate,
)

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "simulate"

OBSERVED_136_MESSAGE = (
    "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). no new claims to "
    "deallocate, preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
)


def fixture(name: str) -> str:
    return str(FIXTURES / name)


async def run_json(
    name: str | list[dict[str, Any]], *, config: Any = None, seed: int | None = 1
) -> list[Any]:
    objects = read_objects(fixture(name)) if isinstance(name, str) else name
    placements = await simulate(config or default_config(), objects, seed=seed)
    return placements_json(placements)["placements"]


def pod(
    name: str, *, cpu: str = "100m", memory: str = "64Mi", ns: str = "default", **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if "created" in spec:
        meta["creationTimestamp"] = spec.pop("created")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {
            "containers": [
                {"name": "c", "image": "app:1", "resources": {"requests": {"cpu": cpu, "memory": memory}}}
            ],
            **spec,
        },
    }


def node(name: str, *, cpu: str = "4", memory: str = "8Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}},
    }


# --- the command line, run as a user would (processes started together: each pays the interpreter start) ----


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "kubesched.cli", "simulate", *args]


CLI_RUNS = {
    "json": _cli("--cluster", fixture("ties.yaml"), "--seed", "7", "-o", "json"),
    "table": _cli("--cluster", fixture("preemption.yaml"), "-o", "table"),
    "malformed": _cli("--cluster", fixture("malformed.yaml"), "-o", "json"),
}


@pytest.fixture(scope="module")
def cli_runs() -> dict[str, subprocess.CompletedProcess[str]]:
    procs = {
        name: subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, argv in CLI_RUNS.items()
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=60)
        out[name] = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    return out


async def test_cli_json_is_the_simulation_and_a_seed_makes_it_reproducible(
    cli_runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    # Four equally good nodes: only the seed decides, and the process that ran it does not matter.
    run = cli_runs["json"]
    assert run.returncode == 0, run.stderr
    expected = await run_json("ties.yaml", seed=7)
    assert json.loads(run.stdout) == {"placements": expected}
    assert run.stdout.startswith('{\n  "placements": [\n    {\n      "pod": "default/p",\n')


def test_cli_table_shows_placements_scores_and_preemption(
    cli_runs: dict[str, subprocess.CompletedProcess[str]],
) -> None:
    run = cli_runs["table"]
    assert run.returncode == 0, run.stderr
    for text in (
        "2 pods scheduled offline: 2 placed, 0 not",
        "default/urgent",
        "nominated to n1 by preemption",
        "preempted: default/low",
        "its nominated node fits: taken without scoring",
        "default/later",
        "n1: 412  (TaintToleration 300, NodeResourcesFit 37, DynamicResources 0, NodeResourcesBalancedAllocation 75, "
        "ImageLocality 0)",
        "n2: 400",
    ):
        assert text in run.stdout, text


def test_cli_malformed_yaml_is_a_clear_error(cli_runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = cli_runs["malformed"]
    assert run.returncode == 1
    assert run.stdout == ""
    assert "kubesched simulate: cannot read the cluster:" in run.stderr
    assert "malformed.yaml: not valid YAML: line 4, column 7" in run.stderr
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--cluster", "/nonexistent/cluster.yaml"],
            "cannot read the cluster: /nonexistent/cluster.yaml: no such file",
        ),
        (
            ["--cluster", fixture("three-pods.yaml"), "--config", fixture("invalid-config.yaml")],
            "percentageOfNodesToScore: Invalid value: 150: not in valid range [0-100]",
        ),
        (
            ["--cluster", fixture("three-pods.yaml"), "--config", "/nonexistent/config.yaml"],
            "invalid configuration: invalid KubeSchedulerConfiguration:\n"
            '  - Not found: "/nonexistent/config.yaml"',
        ),
    ],
    ids=["missing-cluster", "invalid-config", "missing-config"],
)
def test_cli_errors_exit_1_with_a_message(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # In process, through the same parser and run() as the command (see the subprocess test for tracebacks).
    assert cli.main(["simulate", *args, "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("kubesched simulate: ")
    assert expected in err


@pytest.mark.parametrize(
    ("objects", "expected"),
    [
        ([{"apiVersion": "v1", "metadata": {"name": "x"}}], "document 1: the object has no kind"),
        (
            [node("n1"), pod("p", cpu="one")],
            "pod default/p: spec.containers[0].resources.requests.cpu: invalid quantity",
        ),
        ([node("n1"), node("n1")], "node n1 appears more than once"),
        (
            [{"kind": "Node", "metadata": {"name": "n1"}}],
            "node n1: status.allocatable (or status.capacity) is required",
        ),
        ([pod("p", priorityClassName="gold")], 'pod default/p: no PriorityClass with name "gold" was found'),
        (
            [{"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}],
            "pod default/p: spec.containers must list",
        ),
        (["just a string"], "document 1: expected a Kubernetes object, found str"),
    ],
    ids=[
        "no-kind",
        "bad-quantity",
        "duplicate-node",
        "no-allocatable",
        "unknown-priority-class",
        "no-containers",
        "scalar",
    ],
)
def test_cli_rejects_objects_it_cannot_simulate(
    objects: list[Any], expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml_stream(objects))
    assert cli.main(["simulate", "--cluster", str(path), "-o", "json"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and "Traceback" not in err
    assert expected in err


def yaml_stream(objects: list[Any]) -> str:
    import yaml

    return yaml.safe_dump_all(objects, sort_keys=False)


# --- expected placements and scores, by hand ----------------------------------------------------------------


async def test_three_pods_on_two_nodes_earlier_placements_count() -> None:
    # n1, n2: 4 cpu / 8Gi each. n1 runs "running" (2 cpu / 2Gi) and holds docker.io/library/nginx:1.25
    # (500MB; ImageLocality compares names exactly, as upstream); n2 has a PreferNoSchedule taint. Pods a (1
    # cpu/1Gi, nginx), b (1/2Gi, tolerates the taint, prefers disktype=hdd with weight 50), c (1/1Gi, nginx),
    # d (500m/512Mi), created in that order.
    #
    # ImageLocality for a and c on n1: 500MB * 1/2 nodes = 250MB -> 100 * (250 - 23) // (1000 - 23) = 23.
    # a: n1 cpu 3/4 -> 25, mem 3/8 -> 62: fit 43; balance .5/.25 (87) -> .75/.375 (81): 50 + 44/2 = 72;
    #      taint 100 * 3 = 300 -> 300 + 43 + 72 + 23 = 438.
    #    n2 cpu 1/4 -> 75, mem 1/8 -> 87: fit 81; balance 0/0 (100) -> .25/.125 (93): 50 + 43/2 = 71;
    #      taint (1 untolerated, max 1) -> 0 -> 0 + 81 + 71 + 0 = 152.                              a -> n1
    # b: taint 300 on both (tolerated); affinity n2 50 = max -> 100 * 2 = 200, n1 0.
    #    n1 (now 3 cpu / 3Gi) cpu 4/4 -> 0, mem 5/8 -> 37: fit 18; balance .75/.375 (81) -> 1/.625 (81): 75
    #      -> 300 + 0 + 18 + 75 + 0 = 393.
    #    n2 cpu 1/4 -> 75, mem 2/8 -> 75: fit 75; balance 100 -> .25/.25 (100): 75
    #      -> 300 + 200 + 75 + 75 = 650.                                                             b -> n2
    # c: n1 cpu 4/4 -> 0, mem 4/8 -> 50: fit 25; balance .75/.375 (81) -> 1/.5 (75): 50 + 44/2 = 72
    #      -> 300 + 25 + 72 + 23 = 420.
    #    n2 (now 1 cpu / 2Gi) cpu 2/4 -> 50, mem 3/8 -> 62: fit 56; balance .25/.25 (100) -> .5/.375 (93): 71
    #      -> 0 + 56 + 71 + 0 = 127.                                                                c -> n1
    # d: n1 is full (4 of 4 cpu): Insufficient cpu. n2 is the only feasible node: not scored.      d -> n2
    def n1_n2(n1: dict[str, int], n2: dict[str, int]) -> dict[str, dict[str, int]]:
        return {"n1": {**n1, "total": sum(n1.values())}, "n2": {**n2, "total": sum(n2.values())}}

    assert await run_json("three-pods.yaml") == [
        {
            "pod": "default/a",
            "node": "n1",
            "filtered": {},
            "scores": n1_n2(
                {"TaintToleration": 300, "NodeResourcesFit": 43, "DynamicResources": 0, "NodeResourcesBalancedAllocation": 72,
                 "ImageLocality": 23},
                {"TaintToleration": 0, "NodeResourcesFit": 81, "DynamicResources": 0, "NodeResourcesBalancedAllocation": 71,
                 "ImageLocality": 0},
            ),
        },
        {
            "pod": "default/b",
            "node": "n2",
            "filtered": {},
            "scores": n1_n2(
                {"TaintToleration": 300, "NodeAffinity": 0, "NodeResourcesFit": 18,
                 "DynamicResources": 0, "NodeResourcesBalancedAllocation": 75, "ImageLocality": 0},
                {"TaintToleration": 300, "NodeAffinity": 200, "NodeResourcesFit": 75,
                 "DynamicResources": 0, "NodeResourcesBalancedAllocation": 75, "ImageLocality": 0},
            ),
        },
        {
            "pod": "default/c",
            "node": "n1",
            "filtered": {},
            "scores": n1_n2(
                {"TaintToleration": 300, "NodeResourcesFit": 25, "DynamicResources": 0, "NodeResourcesBalancedAllocation": 72,
                 "ImageLocality": 23},
                {"TaintToleration": 0, "NodeResourcesFit": 56, "DynamicResources": 0, "NodeResourcesBalancedAllocation": 71,
                 "ImageLocality": 0},
            ),
        },
        {"pod": "default/d", "node": "n2", "filtered": {"n1": ["Insufficient cpu"]},
         "scores": {"n2": {"total": 0}}},
    ]  # fmt: skip
    totals = [{n: s["total"] for n, s in p["scores"].items()} for p in await run_json("three-pods.yaml")]
    assert totals[:3] == [{"n1": 438, "n2": 152}, {"n1": 393, "n2": 650}, {"n1": 420, "n2": 127}]


async def test_spread_and_pod_affinity_scores() -> None:
    # z1 (zone-a) runs web-1, web-2 (app=web) and cache (app=cache), 500m / 1Gi each; z2 (zone-b) is empty.
    # web-3 and web-4 (1 cpu / 2Gi, app=web) spread over zones (maxSkew 1, ScheduleAnyway) and prefer
    # (weight 40) the node of an app=cache pod. No taints: TaintToleration 300 everywhere; no images: 0.
    #
    # web-3: spread, 2 zones -> weight log(4) = 1.386: z1 2 * 1.386 = 2.77 -> 3, z2 0;
    #          normalized 100 * (3 + 0 - s) // 3: z1 0, z2 100 -> x2: 0, 200.
    #        affinity z1 40, z2 0 -> z1 100, z2 0 -> x2: 200, 0.
    #        fit z1 cpu 2.5/4 -> 37, mem 5/8 -> 37: 37; z2 cpu 1/4 -> 75, mem 2/8 -> 75: 75.
    #        balance z1 .375/.375 -> .625/.625: 75; z2 0/0 -> .25/.25: 75.
    #        z1 300 + 37 + 0 + 200 + 75 = 612; z2 300 + 75 + 200 + 0 + 75 = 650.                web-3 -> z2
    # web-4: spread z1 3 (as before), z2 1 * 1.386 -> 1; normalized 100 * (3 + 1 - s) // 3: z1 33, z2 100
    #          -> x2: 66, 200. affinity as before: 200, 0.
    #        fit z1 37; z2 cpu 2/4 -> 50, mem 4/8 -> 50: 50. balance z1 75; z2 .25/.25 -> .5/.5: 75.
    #        z1 300 + 37 + 66 + 200 + 75 = 678; z2 300 + 50 + 200 + 0 + 75 = 625.               web-4 -> z1
    placements = await run_json("spread-affinity.yaml")
    assert [(p["pod"], p["node"]) for p in placements] == [("shop/web-3", "z2"), ("shop/web-4", "z1")]
    common = {
        "TaintToleration": 300,
        "DynamicResources": 0,
        "NodeResourcesBalancedAllocation": 75,
        "ImageLocality": 0,
    }
    assert placements[0]["scores"] == {
        "z1": {
            **common,
            "NodeResourcesFit": 37,
            "PodTopologySpread": 0,
            "InterPodAffinity": 200,
            "total": 612,
        },
        "z2": {
            **common,
            "NodeResourcesFit": 75,
            "PodTopologySpread": 200,
            "InterPodAffinity": 0,
            "total": 650,
        },
    }
    assert placements[1]["scores"] == {
        "z1": {
            **common,
            "NodeResourcesFit": 37,
            "PodTopologySpread": 66,
            "InterPodAffinity": 200,
            "total": 678,
        },
        "z2": {
            **common,
            "NodeResourcesFit": 50,
            "PodTopologySpread": 200,
            "InterPodAffinity": 0,
            "total": 625,
        },
    }


async def test_pod_that_fits_nowhere_gets_the_observed_failed_scheduling_message() -> None:
    # kubernetes-1.36-observed.md: one node short of cpu (the pod asks more than it has at all), one with an
    # untolerated NoSchedule taint. DynamicResources' PostFilter speaks before DefaultPreemption's.
    assert await run_json("fits-nowhere.yaml") == [
        {
            "pod": "default/p",
            "node": None,
            "message": OBSERVED_136_MESSAGE,
            "filtered": {"small": ["Insufficient cpu"], "tainted": ["node(s) had untolerated taint(s)"]},
            "scores": {},
        }
    ]


# --- input formats and what counts --------------------------------------------------------------------------


async def test_kubectl_v1_list_with_bound_and_finished_pods() -> None:
    # demo-worker: 2 cpu, runs coredns (100m) and api-0 (1400m): 500m free; migrate-once has Succeeded and
    # counts for nothing. worker-small (400m) was created before worker-big (600m), though listed after it.
    placements = await run_json("kubectl-list.yaml")
    taint = ["node(s) had untolerated taint(s)"]
    assert placements == [
        {
            "pod": "shop/worker-small",
            "node": "demo-worker",
            "filtered": {"demo-control-plane": taint},
            "scores": {"demo-worker": {"total": 0}},
        },
        {
            "pod": "shop/worker-big",
            "node": None,
            # Insufficient cpu is resolvable here, but no pod on demo-worker has a lower priority than 0.
            "message": "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s). "
            "no new claims to deallocate, preemption: 0/2 nodes are available: 1 No preemption victims found "
            "for incoming pod, 1 Preemption is not helpful for scheduling.",
            "filtered": {"demo-control-plane": taint, "demo-worker": ["Insufficient cpu"]},
            "scores": {},
        },
    ]


async def test_bound_pods_count_against_capacity() -> None:
    objects = read_objects(fixture("kubectl-list.yaml"))
    without_api = [o for o in objects if (o.get("metadata") or {}).get("name") != "api-0"]
    placements = await run_json(without_api)
    # With api-0's 1400m gone, both pending pods fit on the worker.
    assert [(p["pod"], p["node"]) for p in placements] == [
        ("shop/worker-small", "demo-worker"),
        ("shop/worker-big", "demo-worker"),
    ]


async def test_json_list_and_typed_list_without_item_kinds(tmp_path: Path) -> None:
    objects = read_objects(fixture("kubectl-list.yaml"))
    as_json = tmp_path / "cluster.json"
    as_json.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": objects}))
    assert await run_json(str(as_json)) == await run_json("kubectl-list.yaml")
    # An API server's PodList / NodeList leaves out the kind of each item.
    nodes = [{k: v for k, v in o.items() if k != "kind"} for o in objects if o["kind"] == "Node"]
    pods = [{k: v for k, v in o.items() if k != "kind"} for o in objects if o["kind"] == "Pod"]
    typed = tmp_path / "typed.yaml"
    typed.write_text(yaml_stream([{"kind": "NodeList", "items": nodes}, {"kind": "PodList", "items": pods}]))
    assert await run_json(str(typed)) == await run_json("kubectl-list.yaml")


async def test_services_in_the_dump_feed_default_topology_spreading() -> None:
    # The live scheduler's listers are built from the dump: a Service selecting app=web gives web pods the
    # system default constraints (hostname maxSkew 3, zone maxSkew 5, ScheduleAnyway). No node has a zone
    # label, so only hostname counts: weight log(2 nodes + 2) = 1.386; n1 runs two web pods:
    #   n1 round(2 * 1.386 + 3 - 1) = 5, n2 round(0 + 2) = 2 -> 100 * (5 + 2 - s) // 5: n1 40, n2 100 -> x2.
    def web(name: str, **spec: Any) -> dict[str, Any]:
        p = pod(name, **spec)
        p["metadata"]["labels"] = {"app": "web"}
        return p

    objects = [node("n1"), node("n2"), web("w1", nodeName="n1"), web("w2", nodeName="n1"), web("w3")]
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "default"},
               "spec": {"selector": {"app": "web"}}}  # fmt: skip
    (placement,) = await run_json([*objects, service])
    assert placement["node"] == "n2"
    assert {n: s["PodTopologySpread"] for n, s in placement["scores"].items()} == {"n1": 80, "n2": 200}
    (without,) = await run_json(objects)
    assert "PodTopologySpread" not in without["scores"]["n1"]  # no Service, no owner: nothing to spread


async def test_queue_order_is_priority_then_creation_time() -> None:
    objects = [
        node("big", cpu="64", memory="64Gi"),
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 500,
        },
        pod("no-timestamp"),
        pod("late", created="2026-01-01T00:00:09Z"),
        pod("early", created="2026-01-01T00:00:01Z"),
        pod("by-class", priorityClassName="high", created="2026-01-01T00:00:08Z"),
        pod("critical", priorityClassName="system-node-critical", created="2026-01-01T00:00:07Z"),
        pod("explicit", priority=100, created="2026-01-01T00:00:02Z"),
        pod("also-no-timestamp"),
    ]
    placements = await run_json(objects)
    assert [p["pod"].split("/")[1] for p in placements] == [
        "critical", "by-class", "explicit", "early", "late", "no-timestamp", "also-no-timestamp",
    ]  # fmt: skip


async def test_a_seed_breaks_ties_reproducibly_among_the_best_nodes() -> None:
    chosen = set()
    for seed in range(12):
        first = await run_json("ties.yaml", seed=seed)
        assert await run_json("ties.yaml", seed=seed) == first
        (placement,) = first
        totals = {n: s["total"] for n, s in placement["scores"].items()}
        assert totals == {"t1": 450, "t2": 450, "t3": 450, "t4": 450}  # 300 + 75 + 75 + 0 each
        chosen.add(placement["node"])
    assert len(chosen) > 1  # not always the first node evaluated


async def test_a_custom_scheduler_profile_serves_only_its_pods() -> None:
    config = load_config(FIXTURES / "batch-scheduler-config.yaml")
    placements = await run_json("two-schedulers.yaml", config=config)
    # default/web asks for default-scheduler, which this configuration does not run: not simulated.
    assert [p["pod"] for p in placements] == ["batch/job"]
    # MostAllocated: busy cpu 3/4 -> 75, mem 3/8 -> 37: 56; idle cpu 1/4 -> 25, mem 1/8 -> 12: 18.
    # balance busy .5/.25 (87) -> .75/.375 (81): 72; idle 100 -> .25/.125 (93): 71.
    assert placements[0]["node"] == "busy"
    assert {n: (s["NodeResourcesFit"], s["total"]) for n, s in placements[0]["scores"].items()} == {
        "busy": (56, 300 + 56 + 72),
        "idle": (18, 300 + 18 + 71),
    }
    with_default = await run_json("two-schedulers.yaml")
    assert [p["pod"] for p in with_default] == ["default/web"]


# --- preemption, nominations, claims, gates -----------------------------------------------------------------


async def test_preemption_offline_places_the_preemptor_and_names_its_victims() -> None:
    # urgent (priority 100000, 1 cpu) fits on neither 2-cpu node (1500m used on each). Victims: low (priority
    # 10 via PriorityClass batch-low) on n1, mid (1000) on n2; the candidate whose top victim has the lowest
    # priority wins: n1. low is evicted, urgent retried: its nominated node fits and is taken unscored.
    # later (500m / 1Gi) then sees urgent on n1 (1 cpu / 1Gi) and mid on n2 (1.5 cpu / 1Gi):
    #   n1 cpu 1.5/2 -> 25, mem 2/4 -> 50: 37; balance .5/.25 (87) -> .75/.5 (87): 75 -> 300 + 37 + 75 = 412
    #   n2 cpu 2/2 -> 0, mem 2/4 -> 50: 25; balance .75/.25 (75) -> 1/.5 (75): 75 -> 300 + 25 + 75 = 400
    placements = await run_json("preemption.yaml")
    assert placements[0] == {
        "pod": "default/urgent",
        "node": "n1",
        "nominatedNode": "n1",
        "preempted": ["default/low"],
        "filtered": {},
        "scores": {},
    }
    assert placements[1]["pod"] == "default/later" and placements[1]["node"] == "n1"
    assert {n: s["total"] for n, s in placements[1]["scores"].items()} == {"n1": 412, "n2": 400}


async def test_preemption_never_policy_leaves_the_pod_pending() -> None:
    objects = read_objects(fixture("preemption.yaml"))
    for o in objects:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "urgent":
            o["spec"]["preemptionPolicy"] = "Never"
    (urgent, later) = await run_json(objects)
    assert urgent["node"] is None and "preempted" not in urgent and "nominatedNode" not in urgent
    assert urgent["message"] == (
        "0/2 nodes are available: 2 Insufficient cpu. no new claims to deallocate, "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert later["node"] in ("n1", "n2")


async def test_a_nominated_pod_in_the_dump_keeps_its_room() -> None:
    # "nominee" was nominated to n1 by an earlier preemption (status.nominatedNodeName); "first" has the same
    # priority but was created earlier, so it is tried first, and must not take the room held for nominee.
    nominee = pod("nominee", cpu="3", created="2026-01-01T00:00:02Z")
    nominee["status"] = {"nominatedNodeName": "n1", "phase": "Pending"}
    first = pod("first", cpu="2", created="2026-01-01T00:00:01Z")
    placements = await run_json([node("n1"), node("n2"), nominee, first])
    assert [(p["pod"], p["node"]) for p in placements] == [("default/first", "n2"), ("default/nominee", "n1")]
    assert placements[0]["filtered"] == {"n1": ["Insufficient cpu"]}
    assert placements[1]["nominatedNode"] == "n1" and placements[1]["scores"] == {}
    # Without the nomination, first would prefer the empty... either node; with it n1 is out for first.
    copy_nominee = copy.deepcopy(nominee)
    copy_nominee["status"] = {"phase": "Pending"}
    plain = await run_json([node("n1"), node("n2"), copy_nominee, first])
    assert plain[0]["filtered"] == {}


async def test_a_pod_whose_claim_template_is_missing_stays_gated() -> None:
    # No ResourceClaimTemplate in the file: the ResourceClaim controller could not create the claim, so the pod
    # waits at DynamicResources' PreEnqueue (tests/scheduler/test_dra_simulate.py covers claims that exist).
    claimer = pod("gpu-job", resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])
    (placement,) = await run_json([node("n1"), node("n2"), claimer])
    assert placement["node"] is None
    assert placement["message"] == 'pod is gated: pod "default/gpu-job": ResourceClaim not created yet'


async def test_gated_pods_and_pods_of_other_kinds_of_state() -> None:
    gated = pod("gated", schedulingGates=[{"name": "example.com/wait"}])
    deleting = pod("deleting")
    deleting["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    placements = await run_json(
        [
            node("n1"),
            gated,
            deleting,
            {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"}, "spec": {}},
        ]
    )
    assert placements == [
        {"pod": "default/gated", "node": None, "message": "pod is gated: waiting for scheduling gates: "
         "[example.com/wait]", "filtered": {}, "scores": {}},
    ]  # fmt: skip


async def test_no_nodes_at_all() -> None:
    (placement,) = await run_json([pod("p")])
    assert placement["message"] == "no nodes available to schedule pods"


async def test_nothing_pending_prints_an_empty_list() -> None:
    assert await run_json([node("n1")]) == []


def test_read_objects_reports_bad_documents(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("kind: List\nitems: 3\n")
    with pytest.raises(ClusterDumpError, match="items of a List must be a list"):
        read_objects(path)


def test_table_renders_failures_and_filtered_nodes() -> None:
    import io

    out = io.StringIO()
    placements = [
        Placement("default/p", None, OBSERVED_136_MESSAGE, {"small": ["Insufficient cpu"]}),
        Placement(
            "default/q", "n1", "", {}, {"n1": {"NodeResourcesFit": 50, "total": 50}, "n2": {"total": 10}}
        ),
    ]
    print_table(placements, file=out)
    text = out.getvalue()
    assert "2 pods scheduled offline: 1 placed, 1 not" in text
    assert "<none>" in text and "filtered small: Insufficient cpu" in text
    assert "n1: 50  (NodeResourcesFit 50)" in text and "n2: 10" in text
