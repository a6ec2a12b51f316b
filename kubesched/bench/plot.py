"""``kubesched bench --plot FILE``: the figures, and the data preparation they draw (tested on its own).

- a benchmark run: throughput over time (scheduler_perf's one-second samples, with a finer 100 ms rate for
  short runs) and the per-pod latency distribution (CDF, p50/p90/p99 marked); one row per workload run, and
  with ``--scale`` a last row with the scheduler's CPU time per pod by node count;
- ``--load-aware-comparison``: every node's CPU usage before and after the new pods, per variant, against
  crane's limit, and where the new pods went (hot or cold nodes).

matplotlib is imported only when a figure is drawn (``kubesched.plots``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.bench.measure import percentile, throughput_samples
from kubesched.plots import PlotError, pyplot, save, time_unit

if TYPE_CHECKING:
    from kubesched.bench.loadcompare import VariantResult, Workload

FINE_BINS = (0.05, 0.1, 0.2)  # seconds: the finer rate line's bin, ~25 bins or more per run
FINE_UNTIL = 20.0  # longer runs have enough one-second samples on their own
PERCENTILES = (50, 90, 99)
PANEL_SIZE = (6.4, 3.6)  # inches per panel; the figure grows with the rows


# --- data ------------------------------------------------------------------------------------------------


@dataclass
class RunSeries:
    """What one run's row draws."""

    title: str
    sample_starts: list[float]  # second at which each one-second sample starts
    samples: list[float]  # pods/s, scheduler_perf's samples (empty intervals merged into the next)
    end: float  # the last binding (s): the last sample runs until then
    average: float
    fine_width: float  # seconds per bin of the finer rate
    fine_times: list[float]  # bin starts (s) of the finer rate, empty for long runs
    fine_rates: list[float]  # pods/s in each bin
    latencies: list[float]  # seconds, sorted
    percentiles: dict[int, float]  # 50/90/99 -> seconds (nearest rank, as the throughput summary)


def fine_width(duration: float) -> float:
    """The finer rate's bin: the largest of FINE_BINS that still gives ~25 bins over ``duration``."""
    return max([w for w in FINE_BINS if w * 25 <= duration] or [FINE_BINS[0]])


def fine_rate(bind_seconds: Sequence[float], width: float) -> tuple[list[float], list[float]]:
    """Pods bound per ``width``-second bin from 0 to the last binding, as pods/s: (bin starts, rates)."""
    if not bind_seconds:
        return [], []
    bins = max(1, math.ceil(max(bind_seconds) / width))
    counts = [0] * bins
    for t in bind_seconds:
        counts[min(max(int(t // width), 0), bins - 1)] += 1
    return [round(i * width, 9) for i in range(bins)], [c / width for c in counts]


def run_series(result: dict[str, Any]) -> RunSeries | None:
    """A run's plot data from its result (``series`` kept by the harness); None when there is nothing to draw
    (skipped, broken before measuring, or no pod bound)."""
    data = result.get("series") or {}
    binds: list[float] = list(data.get("bindSeconds") or ())
    if not binds:
        return None
    samples = throughput_samples(binds, 0.0)
    width = fine_width(binds[-1])
    fine_t, fine_r = fine_rate(binds, width) if binds[-1] < FINE_UNTIL else ([], [])
    latencies = sorted(data.get("latencySeconds") or ())
    title = (
        f"{result['workload']}: {result['nodes']} nodes, {len(binds)} measured pods "
        f"({result.get('mode', 'inprocess')})"
    )
    return RunSeries(
        title=title,
        sample_starts=[float(i) for i in range(len(samples))],
        samples=samples,
        end=max(binds[-1], len(samples) - 1.0),
        average=sum(samples) / len(samples),
        fine_width=width,
        fine_times=fine_t,
        fine_rates=fine_r,
        latencies=latencies,
        percentiles={p: percentile(latencies, p) for p in PERCENTILES},
    )


def scale_points(results: Sequence[dict[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """workload -> [(nodes, scheduler CPU µs per measured pod)], by node count, for the runs that have it."""
    out: dict[str, list[tuple[int, float]]] = {}
    for r in results:
        cost = r.get("cpuMicrosecondsPerPod")
        if cost is None or r.get("error") or r.get("skipped"):
            continue
        out.setdefault(r["workload"], []).append((int(r["nodes"]), float(cost)))
    return {w: sorted(points) for w, points in out.items()}


# --- the benchmark figure --------------------------------------------------------------------------------


def _throughput_panel(ax: Any, s: RunSeries) -> None:
    if s.fine_times:
        ax.plot(
            [t + s.fine_width / 2 for t in s.fine_times],
            s.fine_rates,
            color="tab:blue",
            alpha=0.35,
            linewidth=1,
            label=f"per {s.fine_width * 1000:.0f} ms",
        )
    # Each sample covers [i, i+1); the last one runs to the last binding (a short tail is folded into it).
    xs = [*s.sample_starts, s.end]
    ax.step(xs, [*s.samples, s.samples[-1]], where="post", color="tab:blue", linewidth=2, label="per second")
    ax.axhline(s.average, color="tab:orange", linestyle="--", linewidth=1.2, label=f"mean {s.average:,.0f}")
    ax.set_xlabel("time since the measured pods were handed over (s)")
    ax.set_ylabel("throughput (pods/s)")
    ax.set_ylim(bottom=0)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title("throughput over time", fontsize="medium")


def _latency_panel(ax: Any, s: RunSeries) -> None:
    if not s.latencies:
        ax.text(0.5, 0.5, "no latencies kept", ha="center", va="center", transform=ax.transAxes)
        return
    unit, factor = time_unit(s.latencies[-1])
    n = len(s.latencies)
    ax.plot(
        [v * factor for v in s.latencies],
        [100.0 * (i + 1) / n for i in range(n)],
        color="tab:green",
        linewidth=2,
        label="pods bound within",
    )
    for p, style in zip(PERCENTILES, (":", "--", "-."), strict=True):
        v = s.percentiles[p] * factor
        ax.axvline(v, color="dimgray", linestyle=style, linewidth=1.2, label=f"p{p} {v:,.1f} {unit}")
    ax.set_xlabel(f"latency: hand-over to binding, queue wait included ({unit})")
    ax.set_ylabel("measured pods (%)")
    ax.set_ylim(0, 100)
    ax.set_xlim(left=0)
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    ax.set_title("per-pod latency (CDF)", fontsize="medium")


def _scale_panel(ax: Any, points: dict[str, list[tuple[int, float]]]) -> None:
    for workload, pts in points.items():
        ax.plot([n for n, _ in pts], [c for _, c in pts], marker="o", linewidth=2, label=workload)
        for n, c in pts:
            ax.annotate(f"{c:,.0f}", (n, c), textcoords="offset points", xytext=(0, 6), ha="center")
    ax.set_xscale("log")
    ax.set_xlabel("nodes (log scale)")
    ax.set_ylabel("scheduler CPU per pod (µs)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize="small")
    ax.set_title("per-pod cost by cluster size (--scale)", fontsize="medium")


def bench_figure(results: Sequence[dict[str, Any]], path: str | Path, *, scale: bool = False) -> Path:
    """Draw every run that bound pods (a row each: throughput, latency) and, with ``scale``, the per-pod cost
    by node count; write it to ``path``. ``PlotError`` when no run has anything to draw or on I/O errors."""
    rows = [s for s in (run_series(r) for r in results) if s is not None]
    points = scale_points(results) if scale else {}
    if not rows and not points:
        raise PlotError("no run bound any measured pod: nothing to plot")
    plt = pyplot()
    n_rows = len(rows) + (1 if points else 0)
    fig = plt.figure(figsize=(2 * PANEL_SIZE[0], PANEL_SIZE[1] * n_rows + 0.2), layout="constrained")
    grid = fig.add_gridspec(n_rows, 2)
    for i, s in enumerate(rows):
        sub = fig.add_subfigure(grid[i, :])
        sub.suptitle(s.title, fontweight="bold")
        left, right = sub.subplots(1, 2)
        _throughput_panel(left, s)
        _latency_panel(right, s)
    if points:
        _scale_panel(fig.add_subplot(grid[n_rows - 1, :]), points)
    return save(fig, path)


# --- the load-aware comparison figure --------------------------------------------------------------------


@dataclass
class LoadAwareData:
    """Per-node CPU usage (fractions) in one node order: hottest first before the new pods."""

    nodes: list[str]
    kinds: list[str]  # hot / overloaded / cold, per node
    before: list[float]  # the default variant's reading before its pods (every variant starts alike)
    after: dict[str, list[float]]  # variant label -> usage per node after its pods
    pods_hot: dict[str, int]  # variant label -> new pods placed on hot (incl. overloaded) nodes
    pods_cold: dict[str, int]
    busiest: dict[str, float]
    above: dict[str, int]  # nodes above the limit after


def variant_label(r: VariantResult) -> str:
    return "default" if r.weight is None else f"+ Dynamic (weight {r.weight})"


def loadaware_data(results: Sequence[VariantResult]) -> LoadAwareData:
    if not results:
        raise PlotError("the comparison has no results to plot")
    first = results[0]
    nodes = sorted(first.usage_before, key=lambda n: (-first.usage_before[n], n))
    data = LoadAwareData(
        nodes=nodes,
        kinds=[first.node_kinds.get(n, "") for n in nodes],
        before=[first.usage_before[n] for n in nodes],
        after={},
        pods_hot={},
        pods_cold={},
        busiest={},
        above={},
    )
    for r in results:
        label = variant_label(r)
        data.after[label] = [r.usage_after.get(n, math.nan) for n in nodes]
        data.pods_hot[label] = r.pods_on("hot") + r.pods_on("overloaded")
        data.pods_cold[label] = r.pods_on("cold")
        data.busiest[label] = r.busiest[1]
        data.above[label] = r.above(r.usage_after)
    return data


def loadaware_figure(
    results: Sequence[VariantResult], workload: Workload, limit: float, path: str | Path
) -> Path:
    """Per-node CPU usage before/after for each variant (left) and where the new pods went (right)."""
    data = loadaware_data(results)
    plt = pyplot()
    fig, (ax, bx) = plt.subplots(
        1, 2, figsize=(13, 5.6), layout="constrained", gridspec_kw={"width_ratios": [3, 1]}
    )
    x = list(range(len(data.nodes)))
    colors = ["#d62728" if k == "overloaded" else "#ff7f0e" if k == "hot" else "#9e9e9e" for k in data.kinds]
    ax.bar(x, [100 * v for v in data.before], color=colors, alpha=0.45, width=0.8)
    markers = "os^Dv<>p"
    palette = ["#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf"]  # not the bars' colours
    k = len(data.after)
    for i, (label, usage) in enumerate(data.after.items()):
        shift = (i - (k - 1) / 2) * 0.12  # side by side, so variants that agree stay visible
        ax.plot(
            [v + shift for v in x],
            [100 * v for v in usage],
            color=palette[i % len(palette)],
            marker=markers[i % len(markers)],
            linestyle="-" if i == 0 else "--",
            linewidth=1.2,
            markersize=5,
            label=f"{label}: busiest {100 * data.busiest[label]:.0f} %, {data.above[label]} node(s) "
            f"> {100 * limit:.0f} %",
        )
    ax.axhline(100 * limit, color="black", linestyle=":", linewidth=1.2)
    ax.annotate(
        f"crane's limit {100 * limit:.0f} %",
        (len(x) - 0.5, 100 * limit),
        xytext=(0, 4),
        textcoords="offset points",
        ha="right",
        fontsize="small",
    )
    # Legend entries for the bars: what the colours of the "before" usage mean.
    from matplotlib.patches import Patch

    handles, _ = ax.get_legend_handles_labels()
    handles += [
        Patch(color="#d62728", alpha=0.45, label="before: overloaded node"),
        Patch(color="#ff7f0e", alpha=0.45, label="before: hot node"),
        Patch(color="#9e9e9e", alpha=0.45, label="before: cold node"),
    ]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, fontsize="small")
    ax.set_xticks(x, [str(i + 1) for i in x], fontsize="small")
    ax.set_xlabel("node (sorted by CPU usage before the new pods)")
    ax.set_ylabel("node CPU usage, cpu_usage_active (%)")
    ax.set_ylim(0, 105)  # a saturated node reads 100 %
    ax.grid(axis="y", alpha=0.3)
    ax.set_title("CPU usage per node after the new pods, per profile", fontsize="medium")

    labels = list(data.after)
    hot = [data.pods_hot[v] for v in labels]
    cold = [data.pods_cold[v] for v in labels]
    short = [v.replace("+ Dynamic (weight ", "Dynamic\nweight ").rstrip(")") for v in labels]
    bx.bar(short, cold, color="#9e9e9e", label="on cold nodes")
    bx.bar(short, hot, bottom=cold, color="#ff7f0e", label="on hot nodes")
    bx.set_ylabel("new pods")
    bx.tick_params(axis="x", labelsize="small")
    bx.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)
    bx.set_title("where the new pods went", fontsize="medium")
    fig.suptitle(
        f"default vs load-aware: {workload.nodes} nodes ({workload.hot_nodes} hot), "
        f"{workload.new_pods} new pods (request {workload.new_request[0]} CPU, use {workload.new_usage:g})",
        fontweight="bold",
    )
    return save(fig, path)


__all__ = [
    "LoadAwareData",
    "RunSeries",
    "bench_figure",
    "fine_rate",
    "loadaware_data",
    "loadaware_figure",
    "run_series",
    "scale_points",
    "variant_label",
]
