"""``kubesched bench --compare``: pairing order, ratios, output shape, worktree clean-up, errors.

Never the ratio of two real runs (on a shared machine it is noise); fake sides give known numbers."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.bench import compare
from kubesched.bench.compare import bootstrap_interval, package_checkout
from kubesched.cli import main

FAKE_BENCH = """
import json, sys
label, log, value = sys.argv[1], sys.argv[2], float(sys.argv[3])
args = sys.argv[4:]
with open(log, "a") as f:
    f.write(label + " " + " ".join(args) + "\\n")
runs = sum(1 for line in open(log) if line.startswith(label + " "))
check = {"passed": label != "BROKEN", "problems": ["pod default/p0 bound twice"], "problemCount": 1}
print("some log line")
print(json.dumps({"workload": "SchedulingBasic", "mode": "inprocess", "measuredPods": 10,
                  "throughput": {"average": value * runs, "p50": value}, "cpuSeconds": 0.01, "check": check}))
"""


def _made_worktrees(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders --compare creates for its git sides in this test (other processes on the machine may add and
    remove worktrees of the same repository meanwhile, so the whole list is no measure)."""
    made: list[str] = []
    real = compare.tempfile.mkdtemp

    def recording(*args: object, **kwargs: object) -> str:
        path = real(*args, **kwargs)  # type: ignore[call-overload]
        made.append(str(Path(path).resolve()))
        return str(path)

    monkeypatch.setattr(compare.tempfile, "mkdtemp", recording)
    return made


def _worktrees() -> list[str]:
    out = subprocess.run(
        ["git", "-C", str(package_checkout()), "worktree", "list", "--porcelain"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]


def _fake(tmp_path: Path, label: str, value: float) -> str:
    script = tmp_path / "fake_bench.py"
    script.write_text(FAKE_BENCH)
    return f"{sys.executable} {script} {label} {tmp_path / 'runs.log'} {value}"


def test_pairs_alternate_and_ratios_are_b_over_a(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _fake(tmp_path, "A", 100.0), _fake(tmp_path, "B", 150.0)
    argv = [
        "bench",
        "--compare",
        a,
        b,
        "--compare-pairs",
        "3",
        "-w",
        "SchedulingBasic",
        "--pods",
        "7",
        "-o",
        "json",
    ]
    assert main(argv) == 0
    runs = (tmp_path / "runs.log").read_text().splitlines()
    assert [r.split()[0] for r in runs] == ["A", "B", "A", "B", "A", "B"]
    # the workload options reach every side, with JSON output asked for
    assert all(
        "--workload SchedulingBasic" in r and "--pods 7" in r and "-o json --no-progress" in r for r in runs
    )
    out = json.loads(capsys.readouterr().out)["compare"]
    assert out["order"] == ["A", "B"] * 3 and out["pairs"] == 3 and out["ratio"] == "b/a"
    s = out["workloads"]["SchedulingBasic"]
    # the fake's value grows with its run count: A 100, 200, 300; B 150, 300, 450 -> every ratio 1.5
    assert s["a"] == [100.0, 200.0, 300.0] and s["b"] == [150.0, 300.0, 450.0]
    assert s["ratios"] == [1.5, 1.5, 1.5]
    assert s["medianRatio"] == 1.5 and s["minRatio"] == 1.5 and s["maxRatio"] == 1.5
    assert s["bootstrap95"] == [1.5, 1.5]


def test_text_output_and_metric_choice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _fake(tmp_path, "A", 200.0), _fake(tmp_path, "B", 100.0)
    argv = ["bench", "--compare", a, b, "--compare-pairs", "1", "--compare-metric", "p50"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "metric: p50; ratio B/A" in text
    assert "pair 1: A 200.0  B 100.0  ratio 0.500" in text
    assert "median ratio 0.500" in text


def test_a_side_that_fails_its_check_fails_the_comparison(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = _fake(tmp_path, "A", 1.0), _fake(tmp_path, "BROKEN", 1.0)
    assert main(["bench", "--compare", a, b, "--compare-pairs", "2"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "SchedulingBasic failed: pod default/p0 bound twice" in err
    assert len((tmp_path / "runs.log").read_text().splitlines()) == 2  # stopped at the first broken run


def _known_good_revision() -> str:
    """The commit that added --compare (its tree was run then): HEAD of a shared tree may be mid-change."""
    return subprocess.run(
        [
            "git",
            "-C",
            str(package_checkout()),
            "log",
            "--diff-filter=A",
            "--format=%H",
            "--",
            "kubesched/bench/compare.py",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()[-1]


def test_git_revision_against_this_checkout_removes_its_worktree(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _made_worktrees(monkeypatch)
    rev = _known_good_revision()
    argv = [
        "bench",
        "--compare",
        f"git:{rev}",
        ".",
        "--compare-pairs",
        "1",
        "--nodes",
        "6",
        "--init-pods",
        "0",
        "--pods",
        "12",
        "-o",
        "json",
    ]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)["compare"]
    assert out["a"] == f"git:{rev} ({rev[:12]})" and out["b"] == ". (this checkout)"
    s = out["workloads"]["SchedulingBasic"]
    assert len(s["ratios"]) == 1 and s["ratios"][0] > 0 and s["a"][0] > 0 and s["b"][0] > 0
    assert len(made) == 1 and "kubesched-compare-" in made[0]
    assert made[0] not in {str(Path(w).resolve()) for w in _worktrees()}
    assert not Path(made[0]).exists()


def test_unknown_revision_and_missing_command_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    made = _made_worktrees(monkeypatch)
    assert main(["bench", "--compare", "git:HEAD", "git:no-such-rev-xyz"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"kubesched bench --compare: unknown git revision 'no-such-rev-xyz' in {package_checkout()}"
    assert len(made) == 1  # the worktree made for A is gone too
    assert made[0] not in {str(Path(w).resolve()) for w in _worktrees()} and not Path(made[0]).exists()
    assert main(["bench", "--compare", ".", "no-such-binary-xyz bench"]) == 2
    assert (
        capsys.readouterr().err.strip() == "kubesched bench --compare: command not found: no-such-binary-xyz"
    )
    assert main(["bench", "--compare", ".", ".", "--compare-pairs", "0"]) == 2


def test_bootstrap_interval_brackets_the_median() -> None:
    values = [0.9, 1.0, 1.1, 1.05, 0.95, 1.2, 0.8]
    low, high = bootstrap_interval(values)
    assert min(values) <= low <= 1.0 <= high <= max(values)
    assert bootstrap_interval([2.0, 3.0]) == (2.0, 3.0)
    assert bootstrap_interval(values) == (low, high)  # seeded: the same answer every time
