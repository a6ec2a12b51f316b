"""Default vs load-aware placement, measured on the local cluster with a real Prometheus.

    kubesched bench --load-aware-comparison                 # 20 nodes, 28 new pods, Dynamic weights 3, 5, 10
    kubesched bench --load-aware-comparison --weights 3,7 -o json
    kubesched bench --load-aware-comparison --plot docs/load-aware-comparison.png

The workload is skewed against requests, as in crane-scheduler#51: some nodes ("hot") run pods that request
little but use a lot of CPU, the others ("cold") run pods that reserve half the node and use less than that. Usage follows the
pods' ``kubesched.io/cpu-usage`` annotations (the simulated node-exporter metrics, ``cluster/nodemetrics.py``).
Then the same new pods are scheduled, once per variant, each time on a fresh cluster and Prometheus:

- ``default``: the v1 default profile;
- ``dynamic-w<N>``: the default profile plus ``Dynamic`` (filter, score weight N, postBind), crane's default
  policy, loads written as node annotations by the annotator (one sync before the pods are created).

For each variant the report gives every node's ``cpu_usage_active`` as Prometheus records it (crane's rule over
node-exporter's counters) once the pods run: the busiest node, and how many nodes are above 0.65 (crane's
``cpu_usage_avg_5m`` limit), before and after. ``--scenario-out DIR`` also writes the annotated cluster and one
configuration per weight for ``kubesched simulate``, to see each plugin's score on each node.

Needs ``prometheus`` and ``promtool`` (``scripts/ensure-prometheus.sh``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.cluster.kubelet import NodeShape
from kubesched.cluster.local import ClusterOptions, LocalCluster
from kubesched.cluster.nodemetrics import CPU_USAGE_ANNOTATION, MEMORY_USAGE_ANNOTATION
from kubesched.scheduler.framework.catalogue import Catalogue

log = logging.getLogger(__name__)

LIMIT = 0.65  # crane's maxLimitPecent for cpu_usage_avg_5m
DEFAULT_WEIGHTS = (3, 5, 10)
NAMESPACE = "default"
PROFILE = (
    "default-scheduler"  # the pods keep the default schedulerName; each variant swaps the profile behind it
)
IMAGE = "registry.k8s.io/pause:3.10"
SETTLE_TOLERANCE = 0.01  # Prometheus' cpu_usage_active within 1 point of the simulated truth


@dataclass(frozen=True)
class Workload:
    """The cluster and pods of the comparison. Usages are CPU cores per pod."""

    nodes: int = 20
    hot_nodes: int = 6  # nodes whose pods use far more than they request
    overloaded_nodes: int = 2  # of the hot ones, already above the limit before anything is scheduled
    new_pods: int = 28
    node_cpu: int = 8
    node_memory_gi: int = 32
    # two existing pods per node
    hot_request: tuple[str, str] = ("500m", "1Gi")
    hot_usage: float = 2.4  # x2 pods = 4.8 of 8 cores: 0.60
    overloaded_usage: float = 2.8  # x2 = 0.70
    cold_request: tuple[str, str] = ("2", "8Gi")
    cold_usage: float = 1.6  # x2 = 0.40: they reserve half the node and use most of it
    existing_memory_usage: str = "2Gi"
    # the new pods
    new_request: tuple[str, str] = ("250m", "512Mi")
    new_usage: float = 0.7  # 0.0875 of a node each

    def __post_init__(self) -> None:
        if not 0 < self.nodes or not 0 <= self.overloaded_nodes <= self.hot_nodes <= self.nodes:
            raise ValueError("need nodes > 0 and 0 <= overloaded nodes <= hot nodes <= nodes")
        if self.new_pods < 0:
            raise ValueError("new pods must be >= 0")

    def sized(
        self, nodes: int | None = None, new_pods: int | None = None, hot_nodes: int | None = None
    ) -> Workload:
        """The same mix at another size: 30 % hot nodes unless given, a third of those overloaded."""
        n = self.nodes if nodes is None else nodes
        hot = self.hot_nodes if nodes is None and hot_nodes is None else hot_nodes
        if hot is None:
            hot = max(1, round(0.3 * n))
        hot = min(hot, n)
        return Workload(
            **{
                **asdict(self),
                "nodes": n,
                "hot_nodes": hot,
                "overloaded_nodes": round(hot / 3),
                "new_pods": self.new_pods if new_pods is None else new_pods,
            }
        )

    def node_usage_share(self, kind: str) -> float:
        return {
            "hot": 2 * self.hot_usage,
            "overloaded": 2 * self.overloaded_usage,
            "cold": 2 * self.cold_usage,
        }[kind] / self.node_cpu

    def kind_of(self, index: int) -> str:
        """Hot nodes are spread over the zones (every k-th node), the overloaded ones first among them."""
        step = self.nodes / self.hot_nodes if self.hot_nodes else 0
        hot = [int(i * step) for i in range(self.hot_nodes)]
        if index in hot:
            return "overloaded" if hot.index(index) < self.overloaded_nodes else "hot"
        return "cold"


@dataclass(frozen=True)
class Variant:
    name: str
    weight: int | None  # Dynamic's score weight; None = the default profile


def variants(weights: Sequence[int]) -> list[Variant]:
    return [Variant("default", None), *(Variant(f"dynamic-w{w}", w) for w in weights)]


@dataclass
class VariantResult:
    variant: str
    weight: int | None
    usage_before: dict[str, float]  # node -> cpu_usage_active (fraction) from Prometheus, before
    usage_after: dict[str, float]
    placements: dict[str, str]  # new pod -> node ("" when not scheduled)
    node_kinds: dict[str, str]
    seconds: float = 0.0
    failures: dict[str, list[str]] = field(default_factory=dict)  # pod -> its FailedScheduling messages

    @property
    def busiest(self) -> tuple[str, float]:
        node = max(self.usage_after, key=lambda n: (self.usage_after[n], n))
        return node, self.usage_after[node]

    def above(self, usage: dict[str, float]) -> int:
        return sum(1 for v in usage.values() if v > LIMIT)

    def pods_on(self, kind: str) -> int:
        return sum(1 for node in self.placements.values() if node and self.node_kinds.get(node) == kind)

    def summary(self) -> dict[str, Any]:
        node, usage = self.busiest
        return {
            "variant": self.variant,
            "dynamicWeight": self.weight,
            "busiestNode": node,
            "busiestCPUUsage": round(usage, 4),
            "nodesAboveLimit": self.above(self.usage_after),
            "nodesAboveLimitBefore": self.above(self.usage_before),
            "busiestCPUUsageBefore": round(max(self.usage_before.values(), default=0.0), 4),
            "newPods": len(self.placements),
            "unscheduled": sum(1 for n in self.placements.values() if not n),
            "podsOnHotNodes": self.pods_on("hot") + self.pods_on("overloaded"),
            "podsOnColdNodes": self.pods_on("cold"),
            "seconds": round(self.seconds, 1),
            "cpuUsage": {n: round(v, 4) for n, v in sorted(self.usage_after.items())},
        }


# --- objects ------------------------------------------------------------------------------------------------


def _pod(
    name: str,
    request: tuple[str, str],
    usage: float,
    memory_usage: str,
    *,
    node: str | None = None,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": IMAGE,
                "resources": {"requests": {"cpu": request[0], "memory": request[1]}},
            }
        ],
    }
    if node:
        spec["nodeName"] = node
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels or {},
            "annotations": {
                CPU_USAGE_ANNOTATION: f"{round(usage * 1000)}m",
                MEMORY_USAGE_ANNOTATION: memory_usage,
            },
        },
        "spec": spec,
    }


def existing_pods(workload: Workload, node_names: Sequence[str]) -> list[dict[str, Any]]:
    """Two pods per node, bound already: small requests and high usage on hot nodes, the reverse elsewhere."""
    pods = []
    for i, node in enumerate(node_names):
        kind = workload.kind_of(i)
        request = workload.cold_request if kind == "cold" else workload.hot_request
        usage = {
            "cold": workload.cold_usage,
            "hot": workload.hot_usage,
            "overloaded": workload.overloaded_usage,
        }[kind]
        app = "reserved" if kind == "cold" else "batch"
        pods += [
            _pod(
                f"{app}-{node}-{k}",
                request,
                usage,
                workload.existing_memory_usage,
                node=node,
                labels={"app": app},
            )
            for k in range(2)
        ]
    return pods


def new_pods(workload: Workload) -> list[dict[str, Any]]:
    memory = workload.new_request[1]  # they use what they ask for in memory; CPU is where they differ
    return [
        _pod(f"web-{i:03d}", workload.new_request, workload.new_usage, memory, labels={"app": "web"})
        for i in range(workload.new_pods)
    ]


def scheduler_config(weight: int | None, policy_path: Path | None) -> dict[str, Any]:
    """The v1 default profile, plus Dynamic as crane ships it (filter, score with ``weight``, postBind)."""
    config: dict[str, Any] = {
        "apiVersion": "kubescheduler.config.k8s.io/v1",
        "kind": "KubeSchedulerConfiguration",
        "leaderElection": {"leaderElect": False},
        "profiles": [{"schedulerName": PROFILE}],
    }
    if weight is not None:
        config["profiles"][0].update(
            {
                "plugins": {
                    "filter": {"enabled": [{"name": "Dynamic"}]},
                    "score": {"enabled": [{"name": "Dynamic", "weight": weight}]},
                    "postBind": {"enabled": [{"name": "Dynamic"}]},
                },
                "pluginConfig": [{"name": "Dynamic", "args": {"policyConfigPath": str(policy_path)}}],
            }
        )
    return config


# --- one run ------------------------------------------------------------------------------------------------


async def _until(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.1) -> Any:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = await check()
        if value:
            return value
        if loop.time() > deadline:
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(interval)


async def _cpu_usage(prom: Any, instances: dict[str, str]) -> dict[str, float]:
    """node -> cpu_usage_active as a fraction, for the nodes Prometheus has a value for."""
    async with prom.client() as client:
        result = await client.query("cpu_usage_active")
    by_instance = {s.labels.get("instance", ""): s.value / 100 for s in result.samples}
    return {node: by_instance[inst] for node, inst in instances.items() if inst in by_instance}


async def _settled_usage(prom: Any, cluster: LocalCluster, timeout: float) -> dict[str, float]:
    """cpu_usage_active of every node once Prometheus has caught up with the simulated usage."""
    metrics = cluster.node_metrics
    assert metrics is not None
    instances = {n: metrics.instance(n) for n in metrics.node_names}

    async def caught_up() -> dict[str, float] | None:
        got = await _cpu_usage(prom, instances)
        if len(got) < len(instances):
            return None
        truth = {n: metrics.usage(n)[0] / metrics.capacity(n)[0] for n in instances}
        return got if all(abs(got[n] - truth[n]) <= SETTLE_TOLERANCE for n in instances) else None

    return await _until("Prometheus' cpu_usage_active to match the nodes' usage", caught_up, timeout, 0.25)


async def run_variant(
    variant: Variant,
    workload: Workload,
    workdir: Path,
    catalogue: Catalogue,
    *,
    seed: int = 1,
    timeout: float = 120.0,
    scenario_out: Path | None = None,
) -> VariantResult:
    """One variant on a fresh cluster and Prometheus: existing pods, loads, the new pods, usage read back."""
    from kubesched.client.rest import ApiClient
    from kubesched.loadaware.policy import DEFAULT_POLICY_DOCUMENT, parse_policy
    from kubesched.loadaware.prometheus import PrometheusServer
    from kubesched.scheduler.config import load_config
    from kubesched.scheduler.scheduler import Scheduler

    started = time.monotonic()
    data_dir = workdir / variant.name
    options = ClusterOptions(
        port=0,
        insecure_http=True,
        data_dir=data_dir,
        nodes=workload.nodes,
        zones=3,
        node_shape=NodeShape(cpu=str(workload.node_cpu), memory=f"{workload.node_memory_gi}Gi"),
        heartbeat_interval=3600.0,
        node_metrics_port=0,
    )
    async with LocalCluster(options) as cluster, ApiClient(cluster.url) as client:
        metrics = cluster.node_metrics
        assert metrics is not None
        names = cluster.node_names
        kinds = {n: workload.kind_of(i) for i, n in enumerate(names)}
        for pod in existing_pods(workload, names):
            await client.create("v1", "pods", pod, namespace=NAMESPACE)
        expected_busy = sum(
            2
            * {
                "cold": workload.cold_usage,
                "hot": workload.hot_usage,
                "overloaded": workload.overloaded_usage,
            }[k]
            for k in kinds.values()
        )

        async def all_running() -> bool:
            return abs(sum(metrics.usage(n)[0] for n in names) - expected_busy) < 1e-6

        await _until("the existing pods to run", all_running, timeout)

        async with PrometheusServer(
            [cluster.node_metrics_url], scrape_interval=1.0, workdir=data_dir / "prometheus"
        ) as prom:
            # Every recorded series of crane's chain, for every node (the rules evaluate each second).
            for metric in (
                "cpu_usage_avg_5m",
                "cpu_usage_max_avg_1d",
                "mem_usage_avg_5m",
                "mem_usage_max_avg_1d",
            ):
                await prom.wait_for(metric, count=len(names), timeout=timeout)
            before = await _settled_usage(prom, cluster, timeout)

            policy_path = data_dir / "policy.yaml"
            policy_path.write_text(yaml.safe_dump(DEFAULT_POLICY_DOCUMENT, sort_keys=False))
            if variant.weight is not None:
                await annotate_once(client, prom.url, parse_policy(DEFAULT_POLICY_DOCUMENT))
            config_text = yaml.safe_dump(scheduler_config(variant.weight, policy_path), sort_keys=False)
            config = load_config(config_text, catalogue=catalogue)
            pods = new_pods(workload)
            if scenario_out is not None and variant.weight is not None:
                await _write_scenario(client, scenario_out, pods, workload)
            sched = Scheduler(config, client, catalogue=catalogue, seed=seed)
            sched.start_informers()
            await sched.wait_for_cache_sync()
            run_task = asyncio.create_task(sched.run())
            try:
                for pod in pods:
                    await client.create("v1", "pods", pod, namespace=NAMESPACE)
                wanted = {p["metadata"]["name"] for p in pods}

                async def placed() -> dict[str, str] | None:
                    listed = await client.list("v1", "pods", namespace=NAMESPACE, label_selector="app=web")
                    found = {p["metadata"]["name"]: p for p in listed.get("items", [])}
                    done = {
                        n: (found[n].get("spec") or {}).get("nodeName") or "" for n in wanted if n in found
                    }
                    running = all(
                        (found[n].get("status") or {}).get("phase") == "Running"
                        for n, node in done.items()
                        if node
                    )
                    unschedulable = all(node or _unschedulable(found[n]) for n, node in done.items())
                    return done if len(done) == len(wanted) and running and unschedulable else None

                placements = await _until("the new pods to be placed", placed, timeout, 0.2)
            finally:
                await sched.stop()
                run_task.cancel()
                await asyncio.gather(run_task, return_exceptions=True)
            after = await _settled_usage(prom, cluster, timeout)
            failed = await _failure_messages(client)
    return VariantResult(
        variant.name, variant.weight, before, after, placements, kinds, time.monotonic() - started, failed
    )


def _unschedulable(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


async def _failure_messages(client: Any) -> dict[str, list[str]]:
    events = await client.list("v1", "events", namespace=NAMESPACE, field_selector="reason=FailedScheduling")
    out: dict[str, list[str]] = {}
    for e in events.get("items", []):
        out.setdefault((e.get("involvedObject") or {}).get("name", ""), []).append(e.get("message", ""))
    return out


async def annotate_once(client: Any, prometheus_url: str, policy: Any) -> None:
    """One annotator sync of every metric: what crane's controller writes at its first tick."""
    from kubesched.loadaware.annotations import time_zone
    from kubesched.loadaware.annotator import Annotator
    from kubesched.loadaware.args import DynamicArgs
    from kubesched.loadaware.poller import LoadQuerier, QuerySettings, prometheus_from_args

    args = DynamicArgs(prome_addr=prometheus_url)
    prometheus = prometheus_from_args(args)
    annotator = Annotator(
        client, LoadQuerier(prometheus, QuerySettings.from_args(args)), policy, zone=time_zone(None)
    )
    try:
        annotator.start_informers()
        await annotator.wait_for_sync(30)
        report = await annotator.sync(list(annotator.periods))
        if report.failed_metrics or any(report.missing.values()):
            raise RuntimeError(
                f"the annotator could not read every metric: failed {sorted(report.failed_metrics)}, "
                f"missing {report.missing}"
            )
    finally:
        await annotator.stop()
        await prometheus.close()


async def _write_scenario(client: Any, out: Path, pods: list[dict[str, Any]], workload: Workload) -> None:
    """The annotated cluster and the pending pods as ``kubesched simulate`` reads them, and its configs."""
    out.mkdir(parents=True, exist_ok=True)
    nodes = (await client.list("v1", "nodes")).get("items", [])
    bound = (await client.list("v1", "pods", namespace=NAMESPACE)).get("items", [])
    for obj in nodes:
        obj.setdefault("apiVersion", "v1")
        obj.setdefault("kind", "Node")
        obj["metadata"].pop("managedFields", None)
    for obj in bound:
        obj.setdefault("apiVersion", "v1")
        obj.setdefault("kind", "Pod")
        obj["metadata"].pop("managedFields", None)
    docs = [*nodes, *bound, *pods]
    (out / "cluster.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))


def write_scenario_configs(out: Path, weights: Sequence[int]) -> list[Path]:
    from kubesched.loadaware.policy import DEFAULT_POLICY_DOCUMENT

    out.mkdir(parents=True, exist_ok=True)
    policy = out / "policy.yaml"
    policy.write_text(yaml.safe_dump(DEFAULT_POLICY_DOCUMENT, sort_keys=False))
    written = []
    for w in weights:
        path = out / f"dynamic-w{w}.yaml"
        path.write_text(yaml.safe_dump(scheduler_config(w, policy.resolve()), sort_keys=False))
        written.append(path)
    return written


async def compare(
    workload: Workload,
    weights: Sequence[int],
    *,
    seed: int = 1,
    timeout: float = 120.0,
    scenario_out: Path | None = None,
    workdir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    catalogue: Catalogue | None = None,
) -> list[VariantResult]:
    """Every variant, one after the other (each on its own cluster and Prometheus). ``catalogue`` must have
    Dynamic; without one, the application's (``kubesched.catalogue.full_catalogue()``)."""
    if catalogue is None:
        from kubesched.catalogue import full_catalogue

        catalogue = full_catalogue()
    own = workdir is None
    base = Path(tempfile.mkdtemp(prefix="kubesched-loadcompare-")) if workdir is None else workdir
    try:
        results = []
        for i, v in enumerate(variants(weights)):
            if progress:
                progress(v.name)
            first_dynamic = scenario_out if (v.weight is not None and i == 1) else None
            results.append(
                await run_variant(
                    v, workload, base, catalogue, seed=seed, timeout=timeout, scenario_out=first_dynamic
                )
            )
        if scenario_out is not None:
            write_scenario_configs(scenario_out, weights)
        return results
    finally:
        if own:
            shutil.rmtree(base, ignore_errors=True)


# --- output -------------------------------------------------------------------------------------------------


def print_table(results: list[VariantResult], workload: Workload, file: Any = None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(file=file or sys.stdout, width=140)
    title = (
        f"load-aware comparison: {workload.nodes} nodes ({workload.hot_nodes} hot, "
        f"{workload.overloaded_nodes} of them above {LIMIT} already), {workload.new_pods} new pods; "
        "cpu_usage_active from Prometheus"
    )
    table = Table(title=title)
    for col in (
        "profile",
        "busiest node CPU",
        f"nodes > {LIMIT}",
        "new pods on hot / cold nodes",
        "unscheduled",
        f"before: busiest, > {LIMIT}",
    ):
        table.add_column(col, justify="left" if col == "profile" else "right")
    for r in results:
        s = r.summary()
        name = "default" if r.weight is None else f"default + Dynamic (weight {r.weight})"
        table.add_row(
            name,
            f"{s['busiestCPUUsage']:.3f} ({s['busiestNode']})",
            str(s["nodesAboveLimit"]),
            f"{s['podsOnHotNodes']} / {s['podsOnColdNodes']}",
            str(s["unscheduled"]),
            f"{s['busiestCPUUsageBefore']:.3f}, {s['nodesAboveLimitBefore']}",
        )
    console.print(table)


# --- command line (``kubesched bench --load-aware-comparison``) ---------------------------------------------


def _weights(text: str) -> tuple[int, ...]:
    try:
        weights = tuple(int(w) for w in text.split(",") if w.strip())
    except ValueError:
        weights = ()
    if not weights or any(not 1 <= w <= 100 for w in weights):
        raise argparse.ArgumentTypeError(f"expected comma-separated weights in 1..100, got {text!r}")
    return weights


def add_arguments(p: argparse.ArgumentParser) -> None:
    group = p.add_argument_group("load-aware comparison (--load-aware-comparison; needs prometheus)")
    group.add_argument(
        "--load-aware-comparison",
        action="store_true",
        help="schedule a usage-skewed workload with the default profile and with Dynamic, on the "
        "local cluster with a real Prometheus, and compare the nodes' CPU usage "
        "(--nodes and --pods size it)",
    )
    group.add_argument(
        "--weights",
        type=_weights,
        default=DEFAULT_WEIGHTS,
        metavar="W[,W...]",
        help="Dynamic score weights to compare (default 3,5,10; crane ships 3)",
    )
    group.add_argument(
        "--hot-nodes",
        type=int,
        default=None,
        help="nodes whose pods use far more CPU than they request (default 30%% of the nodes)",
    )
    group.add_argument(
        "--scenario-out",
        type=Path,
        default=None,
        metavar="DIR",
        help="also write DIR/cluster.yaml (annotated nodes, pods) and DIR/dynamic-w<N>.yaml for "
        "`kubesched simulate` (load annotations stay fresh for 8 minutes)",
    )


def run(args: argparse.Namespace, catalogue: Catalogue) -> int:
    from kubesched.loadaware.prometheus import INSTALL_HINT, installed

    if not installed():
        print(f"kubesched bench --load-aware-comparison: {INSTALL_HINT}", file=sys.stderr)
        return 2
    try:
        workload = Workload().sized(args.nodes, args.pods, args.hot_nodes)
    except ValueError as e:
        print(f"kubesched bench --load-aware-comparison: {e}", file=sys.stderr)
        return 2
    timeout = min(args.timeout, 300.0)

    def progress(name: str) -> None:
        if args.output == "table":
            print(f"running {name} ...", file=sys.stderr, flush=True)

    try:
        results = asyncio.run(
            compare(
                workload,
                args.weights,
                seed=args.seed,
                timeout=timeout,
                scenario_out=args.scenario_out,
                progress=progress,
                catalogue=catalogue,
            )
        )
    except (TimeoutError, RuntimeError, OSError) as e:
        print(f"kubesched bench --load-aware-comparison: {e}", file=sys.stderr)
        return 1
    if args.output == "json":
        print(
            json.dumps(
                {"workload": asdict(workload), "limit": LIMIT, "results": [r.summary() for r in results]}
            )
        )
    else:
        print_table(results, workload)
        if args.scenario_out is not None:
            print(
                f"simulate: kubesched simulate --cluster {args.scenario_out / 'cluster.yaml'} "
                f"--config {args.scenario_out / f'dynamic-w{args.weights[0]}.yaml'} --top 5"
            )
    if getattr(args, "plot", None):
        from kubesched.bench.plot import loadaware_figure
        from kubesched.plots import PlotError

        try:
            written = loadaware_figure(results, workload, LIMIT, args.plot)
        except PlotError as e:
            print(f"kubesched bench --load-aware-comparison: --plot {e}", file=sys.stderr)
            return 1
        print(f"kubesched bench --load-aware-comparison: plot written to {written}", file=sys.stderr)
    return 0


__all__ = [
    "DEFAULT_WEIGHTS",
    "LIMIT",
    "Variant",
    "VariantResult",
    "Workload",
    "add_arguments",
    "annotate_once",
    "compare",
    "existing_pods",
    "new_pods",
    "run",
    "run_variant",
    "scheduler_config",
    "variants",
]
