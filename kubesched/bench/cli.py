"""``kubesched bench``: scheduler_perf-style benchmarks, each run checking its own result.

    kubesched bench --workload SchedulingBasic                     # in process, 5000 nodes, 10000 pods
    kubesched bench --workload all --nodes 500 --pods 1000 -o json
    kubesched bench --mode e2e --workload SchedulingBasic          # cluster and scheduler as processes
    kubesched bench --scale 500,5000,15000                         # per-pod cost as the cluster grows
    kubesched bench --nodes 500 --pods 10000 --plot bench.png      # throughput over time, latency CDF

In-process runs go to a fresh Python process per workload (``--no-isolate`` to stay in this one), so that each
peak RSS is that workload's alone. The exit status is 1 when any run failed its check or broke, whatever its
speed; 0 otherwise (a skipped workload is not a failure).
"""

from __future__ import annotations

import argparse
import json
import logging
import multiprocessing
import queue as queue_mod
import sys
import time
from typing import Any

from kubesched.bench.workloads import WORKLOADS, Workload, get_workload
from kubesched.scheduler.framework.catalogue import Catalogue

CHILD_GRACE = 60.0  # seconds a worker may take beyond --timeout before it is killed
PROGRESS_INTERVAL = 0.1


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-w",
        "--workload",
        action="append",
        default=None,
        help=f"workload to run (repeatable or comma-separated; 'all' for every one): {', '.join(WORKLOADS)}"
        " (default SchedulingBasic)",
    )
    p.add_argument(
        "--mode",
        choices=("inprocess", "e2e"),
        default="inprocess",
        help="inprocess: the scheduler fed directly, no HTTP; e2e: local cluster and scheduler processes",
    )
    p.add_argument("--nodes", type=int, default=None, help="number of nodes (default: the workload's)")
    p.add_argument("--init-pods", type=int, default=None, help="initial pods, scheduled but not measured")
    p.add_argument("--pods", type=int, default=None, help="measured pods")
    p.add_argument(
        "--rate",
        type=float,
        default=None,
        help="steady-load workloads (SteadyLoad): arrivals per second (default the workload's, 300)",
    )
    p.add_argument(
        "--duration",
        type=float,
        default=None,
        help="steady-load workloads: seconds of arrivals (measured pods = rate x duration; default 60)",
    )
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json"),
        default="table",
        help="table (default) or json: one JSON object per workload, one per line",
    )
    p.add_argument("--seed", type=int, default=1, help="seed for the scheduler's tie-breaking (in process)")
    p.add_argument(
        "--timeout", type=float, default=900.0, help="seconds to wait for each phase's pods to bind"
    )
    p.add_argument(
        "--create",
        choices=("before", "live"),
        default="before",
        help="e2e: create the measured pods before (re)starting the scheduler, or while it runs",
    )
    p.add_argument(
        "--api-writer",
        choices=("auto", "off", "events", "all"),
        default=None,
        help="e2e: the scheduler's --api-writer (default: the scheduler's default, auto)",
    )
    p.add_argument(
        "--scale",
        metavar="N[,N...]",
        default=None,
        help="run each workload at these node counts (same pod counts) and report the scheduler's CPU "
        "time per pod at each, e.g. --scale 500,5000,15000",
    )
    p.add_argument(
        "--profile",
        metavar="FILE",
        default=None,
        help="in process: write cProfile stats of the measured phase to FILE ({workload} is replaced)",
    )
    p.add_argument(
        "--no-isolate", action="store_true", help="in process: run in this process, not a fresh one"
    )
    p.add_argument(
        "--plot",
        metavar="FILE",
        default=None,
        help="also draw FILE (.png, .svg or .pdf; needs kubesched[plot]): throughput over time and the per-pod "
        "latency CDF of each run (with --scale, CPU per pod by node count); with --load-aware-comparison, "
        "every node's CPU usage per profile",
    )
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("A", "B"),
        default=None,
        help="run the workload with two builds alternately (A, B, A, B, ...) and print each pair's ratio B/A, "
        "the median and a bootstrap interval; each side is git:REV (a temporary worktree), '.' (this "
        "checkout) or a command line that runs a benchmark, e.g. '/tmp/base/.venv/bin/kubesched bench'",
    )
    p.add_argument("--compare-pairs", type=int, default=3, metavar="N", help="--compare: pairs to run (3)")
    p.add_argument(
        "--compare-metric",
        choices=("average", "p50", "podsPerSecondOverall", "podsPerCPUSecond", "cpuMicrosecondsPerPod"),
        default="average",
        help="--compare: the number compared (pods/s average of the one-second samples by default)",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        default=None,
        help="run the workload against the API server of FILE (any cluster) instead of a local one: fake "
        "nodes (no kubelet) fenced off by a label and a taint, the benchmark's own namespaces, everything "
        "deleted afterwards",
    )
    p.add_argument(
        "--scheduler-command",
        metavar="CMD",
        default=None,
        help="with --kubeconfig: the scheduler to measure, a command line with placeholders {config} (a "
        "KubeSchedulerConfiguration the benchmark writes), {kubeconfig}, {port} (its secure port, /readyz "
        "polled there), {scheduler_name}, {python}; e.g. 'kube-scheduler --config {config} --secure-port "
        "{port}' (default: this build's kubesched scheduler)",
    )
    p.add_argument(
        "--scheduler-name",
        default=None,
        help="with --kubeconfig: the profile's schedulerName, set on every pod (default kubesched-bench)",
    )
    p.add_argument(
        "--bench-namespace",
        default=None,
        metavar="PREFIX",
        help="with --kubeconfig: namespace (and node-name) prefix of the run (default kubesched-bench)",
    )
    p.add_argument(
        "--force",
        action="store_true",
        help="with --kubeconfig: run even when the namespaces already hold pods; delete nodes an earlier "
        "run left",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--list", action="store_true", help="list the workloads and exit")
    p.add_argument("-v", "--v", type=int, default=0, dest="verbosity", help="log verbosity")
    from kubesched.bench import loadcompare

    loadcompare.add_arguments(p)


def selected_workloads(args: argparse.Namespace) -> list[Workload]:
    names: list[str] = []
    for item in args.workload or ["SchedulingBasic"]:
        names.extend(n.strip() for n in item.split(",") if n.strip())
    if any(n.lower() == "all" for n in names):
        names = list(WORKLOADS)
    if getattr(args, "scale", None):
        sizes = parse_scale(args.scale)
        return [
            get_workload(n).sized(size, args.init_pods, args.pods, args.rate, args.duration)
            for n in names
            for size in sizes
        ]
    for flag, value in (("--rate", args.rate), ("--duration", args.duration)):
        if value is not None and not value > 0:
            raise KeyError(f"{flag} wants a positive number, not {value:g}")
    return [
        get_workload(n).sized(args.nodes, args.init_pods, args.pods, args.rate, args.duration) for n in names
    ]


def parse_scale(text: str) -> list[int]:
    """``500,5000,15000`` -> [500, 5000, 15000]; positive node counts only."""
    try:
        sizes = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise KeyError(f"--scale wants node counts like 500,5000,15000, not {text!r}") from None
    if not sizes or min(sizes) <= 0:
        raise KeyError(f"--scale wants positive node counts, not {text!r}")
    return sizes


def cpu_us_per_pod(result: dict[str, Any]) -> float | None:
    """The scheduler process's CPU time per measured pod (the per-pod cost of the scale report)."""
    cpu, pods = result.get("cpuSeconds"), result.get("measuredPods")
    return round(cpu / pods * 1e6, 1) if cpu and pods else None


def external_problem(args: argparse.Namespace) -> str | None:
    """Why the ``--kubeconfig`` options cannot be used as given (None when fine); fills their defaults."""
    import os

    from kubesched.bench import external

    extras = ("scheduler_command", "scheduler_name", "bench_namespace")
    if not args.kubeconfig:
        given = [f"--{a.replace('_', '-')}" for a in extras if getattr(args, a)] + (
            ["--force"] if args.force else []
        )
        return f"{', '.join(given)} need(s) --kubeconfig" if given else None
    if not os.path.isfile(args.kubeconfig):
        return f"--kubeconfig {args.kubeconfig}: no such file"
    if args.scale or args.profile:
        return "--kubeconfig runs plain workloads (no --scale or --profile)"
    args.scheduler_command = args.scheduler_command or external.DEFAULT_COMMAND
    args.scheduler_name = args.scheduler_name or external.DEFAULT_SCHEDULER_NAME
    args.bench_namespace = args.bench_namespace or external.DEFAULT_PREFIX
    try:
        external.scheduler_argv(args.scheduler_command, dict.fromkeys(external.PLACEHOLDERS, "x"))
    except external.ExternalError as e:
        return str(e)
    from kubesched.apimachinery.validation import is_dns1123_label

    for flag, value in (
        ("--bench-namespace", args.bench_namespace),
        ("--scheduler-name", args.scheduler_name),
    ):
        if is_dns1123_label(value):
            return f"{flag} {value!r}: {'; '.join(is_dns1123_label(value))}"
    return None


def _setup_logging(verbosity: int) -> None:
    level = logging.DEBUG if verbosity >= 4 else logging.INFO if verbosity >= 2 else logging.WARNING
    logging.basicConfig(level=level, format="%(asctime)s %(levelname).1s %(name)s] %(message)s")
    if verbosity < 1:
        # The scheduler logs every FailedScheduling and every dropped event; a benchmark reports its own result.
        logging.getLogger("kubesched").setLevel(logging.ERROR)


# --- running -------------------------------------------------------------------------------------------------


def _profile_path(template: str | None, workload: Workload) -> str | None:
    return template.replace("{workload}", workload.name) if template else None


def check_plot_path(args: argparse.Namespace, command: str = "kubesched bench") -> bool:
    """Refuse a bad ``--plot`` before minutes of benchmarking, in one line on stderr; True when fine."""
    if not getattr(args, "plot", None):
        return True
    from kubesched.plots import PlotError, check_path

    try:
        check_path(args.plot)
    except PlotError as e:
        print(f"{command}: --plot {e}", file=sys.stderr)
        return False
    return True


def run_one(
    workload: Workload, args: argparse.Namespace, catalogue: Catalogue, progress: Any
) -> dict[str, Any]:
    """One workload in the chosen mode, in this process."""
    if getattr(args, "kubeconfig", None):
        from kubesched.bench.e2e import E2eOptions
        from kubesched.bench.external import run_external

        options = E2eOptions(timeout=args.timeout, create=args.create, keep_series=bool(args.plot))
        return run_external(workload, options, args, progress)
    if args.mode == "e2e":
        from kubesched.bench.e2e import E2eOptions, run_e2e

        e2e_options = E2eOptions(
            timeout=args.timeout,
            create=args.create,
            keep_series=bool(args.plot),
            api_writer=getattr(args, "api_writer", None),
        )
        return run_e2e(workload, e2e_options, catalogue, progress)
    from kubesched.bench.inprocess import run_inprocess

    options = _run_options(workload, args)
    return run_inprocess(workload, options, catalogue, progress)


def _run_options(workload: Workload, args: argparse.Namespace) -> Any:
    from kubesched.bench.inprocess import RunOptions

    return RunOptions(
        seed=args.seed,
        timeout=args.timeout,
        profile_path=_profile_path(args.profile, workload),
        keep_series=bool(getattr(args, "plot", None)),
    )


def _child_main(workload: Workload, options: Any, catalogue: Catalogue, verbosity: int, out: Any) -> None:
    """Entry point of an isolated in-process run: progress and the result go back through ``out``."""
    from kubesched.bench.inprocess import run_inprocess

    _setup_logging(verbosity)
    last = [0.0]

    def progress(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done >= total or now - last[0] >= PROGRESS_INTERVAL:
            last[0] = now
            out.put(("progress", phase, done, total))

    try:
        result = run_inprocess(workload, options, catalogue, progress)
    except BaseException as e:  # report it; the parent turns it into a failed result
        out.put(("error", f"{type(e).__name__}: {e}"))
        raise
    out.put(("result", result))


def run_isolated(
    workload: Workload, args: argparse.Namespace, catalogue: Catalogue, progress: Any
) -> dict[str, Any]:
    from kubesched.bench.inprocess import _base_result

    options = _run_options(workload, args)
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    # The catalogue is pickled into the child (definitions are module-level objects, so this is by reference).
    proc = ctx.Process(
        target=_child_main, args=(workload, options, catalogue, args.verbosity, out), daemon=True
    )
    proc.start()
    deadline = time.monotonic() + 2 * args.timeout + CHILD_GRACE
    result: dict[str, Any] | None = None
    error = ""
    try:
        while result is None and not error:
            try:
                msg = out.get(timeout=0.2)
            except queue_mod.Empty:
                if not proc.is_alive():
                    error = f"the benchmark process exited with status {proc.exitcode}"
                elif time.monotonic() > deadline:
                    error = "the benchmark process did not finish in time"
                continue
            if msg[0] == "progress":
                progress(*msg[1:])
            elif msg[0] == "result":
                result = msg[1]
            else:
                error = msg[1]
    finally:
        proc.join(5)
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    if result is None:
        result = _base_result(workload, "inprocess")
        result["error"] = error
    return result


class _ProgressBar:
    """One rich progress bar per workload, on stderr."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self._progress: Any = None
        self._task: Any = None

    def __enter__(self) -> _ProgressBar:
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self._progress = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=Console(stderr=True),
                transient=True,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def start(self, workload: Workload) -> None:
        self._workload = workload.name
        if self._progress is not None:
            self._task = self._progress.add_task(workload.name, total=None)

    def update(self, phase: str, done: int, total: int) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(
                self._task, description=f"{self._workload}: {phase}", completed=done, total=total
            )

    def finish(self) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.remove_task(self._task)
            self._task = None


def failed(result: dict[str, Any]) -> bool:
    if result.get("skipped"):
        return False
    return bool(result.get("error")) or not (result.get("check") or {}).get("passed", False)


# --- output --------------------------------------------------------------------------------------------------


def _mib(n: int | None) -> str:
    return f"{n / 2**20:.0f} MiB" if n else "-"


def print_table(results: list[dict[str, Any]]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="kubesched bench (pods/s)")
    for col in (
        "workload",
        "mode",
        "sizes",
        "avg",
        "p50",
        "p90",
        "p99",
        "time",
        "sched RSS",
        "API RSS",
        "check",
    ):
        table.add_column(col, justify="left" if col in ("workload", "mode", "check") else "right")
    notes: list[str] = []
    for r in results:
        sizes = f"{r['nodes']}/{r['initPods']}/{r['measuredPods']}"
        if r.get("skipped"):
            table.add_row(r["workload"], r["mode"], sizes, "-", "-", "-", "-", "-", "-", "-", "skipped")
            notes.append(f"{r['workload']}: skipped: {r['skipped']}")
            continue
        if r.get("error"):
            table.add_row(r["workload"], r["mode"], sizes, "-", "-", "-", "-", "-", "-", "-", "[red]error")
            notes.append(f"{r['workload']}: {r['error']}")
            continue
        t = r["throughput"]
        check = r["check"]
        verdict = "[green]passed" if check["passed"] else f"[red]FAILED ({check['problemCount']})"
        table.add_row(
            r["workload"],
            r["mode"],
            sizes,
            f"{t['average']:.0f}",
            f"{t['p50']:.0f}",
            f"{t['p90']:.0f}",
            f"{t['p99']:.0f}",
            f"{r['durationSeconds']:.1f} s",
            _mib(r.get("peakRSSBytes")),
            _mib(r.get("apiServerPeakRSSBytes")),
            verdict,
        )
        notes.extend(f"{r['workload']}: {p}" for p in check["problems"])
        if lat := r.get("latencyMilliseconds"):
            notes.append(
                f"{r['workload']}: {r['arrivalRate']:g} pods/s arriving; create-to-bound latency p50 "
                f"{lat.get('p50', 0):.1f} ms, p90 {lat.get('p90', 0):.1f} ms, p99 {lat.get('p99', 0):.1f} ms, "
                f"max {lat.get('max', 0):.1f} ms; {r.get('podsDeleted', 0)} pods deleted"
            )
        if "startupToFirstBindingSeconds" in r:
            notes.append(
                f"{r['workload']}: first binding {r['startupToFirstBindingSeconds']:.2f} s after the scheduler "
                f"process started, with {r['existingPods']:,} pods already bound; scheduler peak RSS "
                f"{_mib(r.get('peakRSSBytes'))}"
            )
    console = Console()
    console.print(table)
    for note in notes:
        console.print(note, markup=False)


def print_scale(results: list[dict[str, Any]]) -> None:
    """Per workload: per-pod CPU cost at each node count, and how it grew against the node count."""
    from rich.console import Console
    from rich.table import Table

    table = Table(title="per-pod cost by cluster size (scheduler CPU time per measured pod)")
    for col in ("workload", "nodes", "pods/s avg", "CPU µs/pod", "cost vs first", "nodes vs first"):
        table.add_column(col, justify="left" if col == "workload" else "right")
    first: dict[str, tuple[float, int]] = {}
    for r in results:
        cost = cpu_us_per_pod(r)
        if cost is None or r.get("error") or r.get("skipped"):
            continue
        base = first.setdefault(r["workload"], (cost, r["nodes"]))
        table.add_row(
            r["workload"],
            str(r["nodes"]),
            f"{r['throughput']['average']:.0f}",
            f"{cost:.0f}",
            f"{cost / base[0]:.2f}x",
            f"{r['nodes'] / base[1]:.0f}x",
        )
    Console().print(table)


def run(args: argparse.Namespace, catalogue: Catalogue) -> int:
    _setup_logging(args.verbosity)
    if not check_plot_path(
        args, "kubesched bench --load-aware-comparison" if args.load_aware_comparison else "kubesched bench"
    ):
        return 2
    if args.load_aware_comparison:
        from kubesched.bench import loadcompare

        return loadcompare.run(args, catalogue)
    if args.compare:
        from kubesched.bench import compare

        return compare.run(args)
    if args.list:
        for w in WORKLOADS.values():
            print(
                f"{w.name:28} {w.nodes:>6} nodes {w.init_pods:>6} initial {w.measured_pods:>6} measured  "
                f"{w.description}"
            )
        return 0
    try:
        workloads = selected_workloads(args)
    except KeyError as e:
        print(f"kubesched bench: {e.args[0]}", file=sys.stderr)
        return 2
    if problem := external_problem(args):
        print(f"kubesched bench: {problem}", file=sys.stderr)
        return 2
    if args.scale and (args.nodes is not None):
        print("kubesched bench: --scale sets the node counts; drop --nodes", file=sys.stderr)
        return 2
    if args.profile and args.mode != "inprocess":
        print("kubesched bench: --profile needs --mode inprocess", file=sys.stderr)
        return 2
    show_progress = not args.no_progress and sys.stderr.isatty()
    results: list[dict[str, Any]] = []
    with _ProgressBar(show_progress) as bar:
        for w in workloads:
            bar.start(w)
            if args.mode == "inprocess" and not args.no_isolate and not args.kubeconfig:
                result = run_isolated(w, args, catalogue, bar.update)
            else:
                try:
                    result = run_one(w, args, catalogue, bar.update)
                except KeyboardInterrupt:
                    bar.finish()
                    print("kubesched bench: interrupted (what the run created was deleted)", file=sys.stderr)
                    return 130
            bar.finish()
            if result.get("refused"):
                print(f"kubesched bench: {result['error']}", file=sys.stderr)
                return 2
            if cpu_us_per_pod(result) is not None:
                result["cpuMicrosecondsPerPod"] = cpu_us_per_pod(result)
            results.append(result)
            if args.output == "json":
                # The per-pod series are for the plot only: the JSON report stays one small line per run.
                print(json.dumps({k: v for k, v in result.items() if k != "series"}), flush=True)
    if args.output == "table":
        print_table(results)
        if args.scale:
            print_scale(results)
    status = 1 if any(failed(r) for r in results) else 0
    if args.plot:
        from kubesched.bench.plot import bench_figure
        from kubesched.plots import PlotError

        try:
            written = bench_figure(results, args.plot, scale=bool(args.scale))
        except PlotError as e:
            print(f"kubesched bench: --plot {e}", file=sys.stderr)
            return status or 1
        print(f"kubesched bench: plot written to {written}", file=sys.stderr)
    return status
