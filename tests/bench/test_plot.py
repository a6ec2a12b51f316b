"""``kubesched bench --plot``: the data each panel draws, the files written, and clear errors for bad paths."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest

from kubesched.bench.loadcompare import LIMIT, VariantResult, Workload
from kubesched.bench.measure import percentile, series, throughput_samples
from kubesched.bench.plot import (
    PANEL_SIZE,
    bench_figure,
    fine_rate,
    fine_width,
    loadaware_data,
    loadaware_figure,
    run_series,
    scale_points,
)
from kubesched.cli import main
from kubesched.plots import DPI, INSTALL_HINT, PlotError, check_path

pytest.importorskip("matplotlib")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) in pixels, after checking the file is a PNG matplotlib can read back."""
    import matplotlib.image

    assert path.read_bytes()[:8] == PNG_SIGNATURE
    height, width = matplotlib.image.imread(path).shape[:2]
    return width, height


def bench(*args: str) -> list[str]:
    return ["bench", "--no-isolate", "--no-progress", *args]


# --- the data ----------------------------------------------------------------------------------------------


def test_series_are_offsets_from_start_and_latencies_from_hand_over() -> None:
    start = 100.0
    binds = {"a": 100.5, "b": 101.25, "c": 100.75}
    # a was created before the start (its latency counts from the start), b and c after it.
    created = {"a": 99.0, "b": 101.0, "c": 100.25}
    got = series(binds, created, start)
    assert got["bindSeconds"] == [0.5, 0.75, 1.25]
    assert got["latencySeconds"] == [0.25, 0.5, 0.5]
    # A pod whose hand-over was not recorded counts from the start.
    assert series({"x": 102.0}, {}, start)["latencySeconds"] == [2.0]


def test_fine_rate_counts_pods_per_bin_as_pods_per_second() -> None:
    times, rates = fine_rate([0.01, 0.02, 0.07, 0.26], 0.1)
    assert times == [0.0, 0.1, 0.2]
    assert rates == pytest.approx([30.0, 0.0, 10.0])
    assert fine_rate([], 0.1) == ([], [])
    # Bins: ~25 or more over the run, never finer than 50 ms.
    assert fine_width(0.3) == 0.05 and fine_width(3.0) == 0.1 and fine_width(30.0) == 0.2


def test_run_series_draws_scheduler_perf_samples_and_nearest_rank_percentiles() -> None:
    binds = [0.1 * i for i in range(1, 24)]  # 23 pods over 2.3 s: the last 0.3 s folds into second 2
    latencies = [0.01 * i for i in range(1, 101)]
    result = {
        "workload": "SchedulingBasic",
        "nodes": 10,
        "mode": "inprocess",
        "series": {"bindSeconds": binds, "latencySeconds": latencies},
    }
    s = run_series(result)
    assert s is not None
    assert s.samples == throughput_samples(binds, 0.0)
    assert s.sample_starts == [0.0, 1.0] and s.end == pytest.approx(2.3)
    assert s.average == pytest.approx(sum(s.samples) / len(s.samples))
    assert s.percentiles == {50: 0.5, 90: 0.9, 99: 0.99}
    assert s.percentiles[90] == percentile(sorted(latencies), 90)
    assert s.fine_width == 0.05 and sum(r * s.fine_width for r in s.fine_rates) == pytest.approx(23)
    assert "SchedulingBasic: 10 nodes, 23 measured pods" in s.title
    # Nothing to draw: skipped, broken, or no series kept.
    assert run_series({"workload": "X", "nodes": 1, "skipped": "needs a plugin"}) is None
    assert run_series({**result, "series": {"bindSeconds": [], "latencySeconds": []}}) is None


def test_scale_points_per_workload_by_node_count() -> None:
    results: list[dict[str, Any]] = [
        {"workload": "A", "nodes": 5000, "cpuMicrosecondsPerPod": 280.0},
        {"workload": "A", "nodes": 500, "cpuMicrosecondsPerPod": 270.0},
        {"workload": "B", "nodes": 500, "cpuMicrosecondsPerPod": 300.0},
        {"workload": "B", "nodes": 5000, "error": "boom", "cpuMicrosecondsPerPod": 1.0},
        {"workload": "C", "nodes": 500},
    ]
    assert scale_points(results) == {"A": [(500, 270.0), (5000, 280.0)], "B": [(500, 300.0)]}


def variant(
    name: str, weight: int | None, after: dict[str, float], placements: dict[str, str]
) -> VariantResult:
    kinds = {"n1": "overloaded", "n2": "hot", "n3": "cold"}
    before = {"n1": 0.70, "n2": 0.60, "n3": 0.40}
    return VariantResult(name, weight, before, after, placements, kinds)


def comparison() -> list[VariantResult]:
    return [
        variant("default", None, {"n1": 0.9, "n2": 0.7, "n3": 0.4}, {"p1": "n1", "p2": "n2", "p3": "n1"}),
        variant("dynamic-w3", 3, {"n1": 0.7, "n2": 0.6, "n3": 0.66}, {"p1": "n3", "p2": "n3", "p3": ""}),
    ]


def test_loadaware_data_per_node_and_per_variant() -> None:
    data = loadaware_data(comparison())
    assert data.nodes == ["n1", "n2", "n3"]  # hottest first before the new pods
    assert data.kinds == ["overloaded", "hot", "cold"]
    assert data.before == [0.70, 0.60, 0.40]
    assert data.after == {"default": [0.9, 0.7, 0.4], "+ Dynamic (weight 3)": [0.7, 0.6, 0.66]}
    assert data.pods_hot == {"default": 3, "+ Dynamic (weight 3)": 0}
    assert data.pods_cold == {"default": 0, "+ Dynamic (weight 3)": 2}
    assert data.busiest == {"default": 0.9, "+ Dynamic (weight 3)": 0.7}
    assert data.above == {"default": 2, "+ Dynamic (weight 3)": 2}  # > 0.65
    with pytest.raises(PlotError):
        loadaware_data([])


def test_loadaware_figure_is_a_png(tmp_path: Path) -> None:
    out = loadaware_figure(
        comparison(), Workload(nodes=3, hot_nodes=2, new_pods=3), LIMIT, tmp_path / "c.png"
    )
    assert png_size(out) == (13 * DPI, round(5.6 * DPI))


# --- the command -------------------------------------------------------------------------------------------


def test_bench_plot_writes_one_row_per_run_and_keeps_the_json_small(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.png"
    argv = [
        "-w",
        "SchedulingBasic,SchedulingNodeAffinity",
        "--nodes",
        "6",
        "--init-pods",
        "2",
        "--pods",
        "20",
    ]
    rc = main(bench(*argv, "-o", "json", "--plot", str(out)))
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    results = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["workload"] for r in results] == ["SchedulingBasic", "SchedulingNodeAffinity"]
    assert all("series" not in r for r in results)  # the per-pod data is for the figure only
    assert f"plot written to {out}" in captured.err
    rows = 2
    assert png_size(out) == (round(2 * PANEL_SIZE[0] * DPI), round((PANEL_SIZE[1] * rows + 0.2) * DPI))


def test_bench_plot_with_scale_adds_the_cost_panel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "scale.svg"  # svg and pdf work too
    rc = main(bench("--scale", "4,8", "--init-pods", "0", "--pods", "6", "--plot", str(out)))
    assert rc == 0, capsys.readouterr().err
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text
    # Two runs and the cost panel: three rows (SVG sizes are in points, 72 per inch).
    assert f'height="{(PANEL_SIZE[1] * 3 + 0.2) * 72:g}pt"' in text


def test_bench_figure_with_nothing_to_draw_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(PlotError, match="nothing to plot"):
        bench_figure([{"workload": "X", "nodes": 1, "skipped": "no"}], tmp_path / "x.png")


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("{tmp}/missing/dir/b.png", "does not exist"),
        ("{tmp}/b.jpg", "unsupported format '.jpg'; use one of .png, .svg, .pdf"),
        ("{tmp}/noext", "unsupported format '(none)'"),
        ("{tmp}/adir.png", "is a directory"),
    ],
)
def test_bad_plot_paths_are_refused_before_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, message: str
) -> None:
    (tmp_path / "adir.png").mkdir()
    rc = main(bench("--nodes", "3", "--init-pods", "0", "--pods", "2", "--plot", path.format(tmp=tmp_path)))
    captured = capsys.readouterr()
    assert rc == 2
    assert captured.out == ""  # refused before any run
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubesched bench: --plot ") and message in lines[0]
    assert "Traceback" not in captured.err


def test_load_aware_comparison_checks_its_plot_path_first(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(bench("--load-aware-comparison", "--plot", "/nonexistent-dir/c.png"))
    assert rc == 2
    err = capsys.readouterr().err.strip()
    assert err == (
        "kubesched bench --load-aware-comparison: --plot /nonexistent-dir/c.png: "
        "directory /nonexistent-dir does not exist"
    )


def test_a_failing_write_is_one_line_and_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    # /proc passes the up-front check (root may write anywhere) but refuses new files.
    rc = main(
        bench(
            "--nodes",
            "3",
            "--init-pods",
            "0",
            "--pods",
            "2",
            "-o",
            "json",
            "--plot",
            "/proc/kubesched-plot.png",
        )
    )
    captured = capsys.readouterr()
    assert rc == 1
    assert json.loads(captured.out)["check"]["passed"]  # the benchmark itself ran and is reported
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubesched bench: --plot /proc/kubesched-plot.png: ")


def test_unwritable_directory_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # As root every directory is writable to os.access, so the refusal is simulated.
    monkeypatch.setattr("kubesched.plots.os.access", lambda path, mode: False)
    with pytest.raises(PlotError, match="not writable"):
        check_path(tmp_path / "b.png")


def test_missing_matplotlib_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        "kubesched.plots.importlib.util.find_spec", lambda name: None if name == "matplotlib" else real(name)
    )
    assert main(bench("--plot", str(tmp_path / "b.png"))) == 2
    err = capsys.readouterr().err
    assert INSTALL_HINT in err and "kubesched[plot]" in err
