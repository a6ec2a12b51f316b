"""``kubesched bench --compare A B``: one workload, two builds, run alternately on the same machine.

A noisy machine moves absolute numbers by tens of percent from one minute to the next; two builds measured in
interleaved pairs (A, B, A, B, ...) see the same noise, so the ratio of each pair is steadier than either number.
Each side is one of:

- ``git:REV`` — a git revision. It is checked out into a temporary worktree (``git worktree add --detach``),
  the benchmark runs from that directory with this Python (``python -m kubesched.cli bench``, which imports
  the worktree's package first), and the worktree is removed afterwards, also on failure or Ctrl-C;
- ``.`` — the package this command runs from (the current checkout, uncommitted changes included);
- anything else — a command line (split as a shell would, not run through one) that runs a benchmark and
  prints its JSON lines, e.g. ``"/tmp/base/.venv/bin/kubesched bench"``.

The workload options given with ``--compare`` (``-w``, ``--nodes``, ``--init-pods``, ``--pods``, ``--mode``,
``--seed``, ``--timeout``, ...) are appended to each side's command, with ``-o json --no-progress``. The
compared number is ``--compare-metric`` (pods/s average by default); the ratio is B / A, so above 1 means B is
faster (for ``cpuMicrosecondsPerPod``, lower is better and a ratio below 1 means B is cheaper).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS = ("average", "p50", "podsPerSecondOverall", "podsPerCPUSecond", "cpuMicrosecondsPerPod")
BOOTSTRAP_ROUNDS = 2000
# Options of ``kubesched bench`` passed on to each side unchanged (flag -> has a value).
FORWARDED = {
    "workload": "--workload",
    "mode": "--mode",
    "nodes": "--nodes",
    "init_pods": "--init-pods",
    "pods": "--pods",
    "seed": "--seed",
    "timeout": "--timeout",
    "create": "--create",
    "rate": "--rate",
    "duration": "--duration",
}


class CompareError(Exception):
    """A one-line reason the comparison cannot run (unknown revision, bad command: ``status`` 2) or broke
    (a side failed its check or gave no result: 1)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class Side:
    """One side of the comparison: how to start its benchmark and where."""

    label: str
    argv: list[str]
    cwd: str | None = None
    env: dict[str, str] | None = None
    worktree: Path | None = None


@dataclass
class PairResult:
    index: int
    a: dict[str, float]  # workload -> metric
    b: dict[str, float]

    def ratios(self) -> dict[str, float]:
        return {w: self.b[w] / self.a[w] for w in self.a if w in self.b and self.a[w]}


@dataclass
class Comparison:
    metric: str
    a_label: str
    b_label: str
    pairs: list[PairResult] = field(default_factory=list)
    order: list[str] = field(default_factory=list)  # "A" / "B" in the order the runs happened

    def summary(self) -> dict[str, Any]:
        workloads = sorted({w for p in self.pairs for w in p.ratios()})
        out: dict[str, Any] = {}
        for w in workloads:
            ratios = [p.ratios()[w] for p in self.pairs if w in p.ratios()]
            low, high = bootstrap_interval(ratios)
            out[w] = {
                "ratios": [round(r, 4) for r in ratios],
                "medianRatio": round(statistics.median(ratios), 4),
                "minRatio": round(min(ratios), 4),
                "maxRatio": round(max(ratios), 4),
                "bootstrap95": [round(low, 4), round(high, 4)],
                "a": [p.a[w] for p in self.pairs if w in p.a],
                "b": [p.b[w] for p in self.pairs if w in p.b],
            }
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "compare": {
                "a": self.a_label,
                "b": self.b_label,
                "metric": self.metric,
                "ratio": "b/a",
                "pairs": len(self.pairs),
                "order": self.order,
                "workloads": self.summary(),
            }
        }


def bootstrap_interval(
    values: Sequence[float], rounds: int = BOOTSTRAP_ROUNDS, seed: int = 0
) -> tuple[float, float]:
    """A 95% percentile-bootstrap interval of the median of ``values`` (the values themselves when fewer than
    three: no interval is worth computing)."""
    if len(values) < 3:
        return (min(values), max(values))
    rng = random.Random(seed)
    n = len(values)
    medians = sorted(statistics.median(rng.choices(values, k=n)) for _ in range(rounds))
    return (medians[int(0.025 * (rounds - 1))], medians[int(0.975 * (rounds - 1))])


# --- the sides ----------------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)


def package_checkout() -> Path:
    """The checkout this ``kubesched`` package was imported from."""
    return Path(__file__).resolve().parents[2]


def repository(start: Path | None = None) -> Path:
    start = start or package_checkout()
    found = _git(start, "rev-parse", "--show-toplevel")
    if found.returncode != 0:
        raise CompareError(f"{start} is not in a git repository, so git:REV cannot be checked out")
    return Path(found.stdout.strip())


def resolve_revision(repo: Path, rev: str) -> str:
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
    if found.returncode != 0 or not found.stdout.strip():
        raise CompareError(f"unknown git revision {rev!r} in {repo}", status=2)
    return found.stdout.strip()


def bench_module_argv() -> list[str]:
    return [sys.executable, "-m", "kubesched.cli", "bench"]


def make_side(spec: str, label: str, repo: Path | None = None) -> Side:
    """``git:REV`` (a worktree is created), ``.`` (this checkout) or a command line."""
    if spec.startswith("git:"):
        rev = spec[4:]
        if not rev:
            raise CompareError("git: wants a revision, e.g. git:HEAD~1", status=2)
        repo = repo or repository()
        commit = resolve_revision(repo, rev)
        path = Path(tempfile.mkdtemp(prefix=f"kubesched-compare-{label.lower()}-"))
        added = _git(repo, "worktree", "add", "--detach", str(path), commit)
        if added.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            raise CompareError(f"git worktree add {rev} failed: {added.stderr.strip().splitlines()[-1:]}")
        env = {**os.environ, "PYTHONPATH": str(path)}
        return Side(f"{spec} ({commit[:12]})", bench_module_argv(), str(path), env, path)
    if spec == ".":
        env = {**os.environ, "PYTHONPATH": str(package_checkout())}
        return Side(". (this checkout)", bench_module_argv(), str(package_checkout()), env)
    try:
        argv = shlex.split(spec)
    except ValueError as e:
        raise CompareError(f"cannot split the command {spec!r}: {e}", status=2) from None
    if not argv:
        raise CompareError("an empty command cannot be compared", status=2)
    if shutil.which(argv[0]) is None and not os.access(argv[0], os.X_OK):
        raise CompareError(f"command not found: {argv[0]}", status=2)
    return Side(spec, argv)


def remove_side(side: Side, repo: Path | None = None) -> None:
    """Remove a side's worktree (nothing for the other kinds)."""
    if side.worktree is None:
        return
    repo = repo or repository()
    _git(repo, "worktree", "remove", "--force", str(side.worktree))
    shutil.rmtree(side.worktree, ignore_errors=True)
    _git(repo, "worktree", "prune")


@contextlib.contextmanager
def sides(spec_a: str, spec_b: str) -> Iterator[tuple[Side, Side]]:
    """Both sides, their worktrees removed when the block ends, whatever happens in it."""
    made: list[Side] = []
    try:
        made.append(make_side(spec_a, "A"))
        made.append(make_side(spec_b, "B"))
        yield made[0], made[1]
    finally:
        for side in made:
            remove_side(side)


def forwarded_args(args: argparse.Namespace) -> list[str]:
    out: list[str] = []
    for attr, flag in FORWARDED.items():
        value = getattr(args, attr, None)
        if value is None:
            continue
        if isinstance(value, list):
            for v in value:
                out += [flag, str(v)]
        else:
            out += [flag, str(value)]
    if getattr(args, "no_isolate", False):
        out.append("--no-isolate")
    return [*out, "-o", "json", "--no-progress"]


def run_side(side: Side, extra: list[str], metric: str, timeout: float | None) -> dict[str, float]:
    """Run one benchmark of ``side``; workload -> metric. Raises CompareError when it broke or failed its check."""
    try:
        done = subprocess.run(
            [*side.argv, *extra],
            cwd=side.cwd,
            env=side.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise CompareError(f"{side.label}: no result within {timeout:.0f} s") from None
    except OSError as e:
        raise CompareError(f"{side.label}: cannot run {side.argv[0]}: {e.strerror}") from None
    values: dict[str, float] = {}
    for line in done.stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            result = json.loads(line)
        except ValueError:
            continue
        if not isinstance(result, dict) or "workload" not in result:
            continue
        if result.get("error") or not (result.get("check") or {}).get("passed", False):
            reason = result.get("error") or "; ".join((result.get("check") or {}).get("problems", [])[:3])
            raise CompareError(f"{side.label}: {result['workload']} failed: {reason}")
        value = metric_of(result, metric)
        if value is not None:
            values[str(result["workload"])] = value
    if not values:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CompareError(f"{side.label}: no benchmark result (exit status {done.returncode}): {last}")
    return values


def metric_of(result: dict[str, Any], metric: str) -> float | None:
    if metric in ("average", "p50"):
        value = (result.get("throughput") or {}).get(metric)
    elif metric == "cpuMicrosecondsPerPod":
        value = result.get(metric)
        if value is None:
            cpu = result.get("cpuSeconds") or result.get("schedulerCPUSeconds")
            pods = result.get("measuredPods")
            value = cpu / pods * 1e6 if cpu and pods else None
    else:
        value = result.get(metric)
    return float(value) if isinstance(value, int | float) else None


def compare(
    a: Side, b: Side, extra: list[str], pairs: int, metric: str, timeout: float | None, progress: Any = None
) -> Comparison:
    result = Comparison(metric, a.label, b.label)
    for i in range(pairs):
        values: dict[str, dict[str, float]] = {}
        for name, side in (("A", a), ("B", b)):
            if progress is not None:
                progress(f"pair {i + 1}/{pairs}: {name}")
            result.order.append(name)
            values[name] = run_side(side, extra, metric, timeout)
        result.pairs.append(PairResult(i + 1, values["A"], values["B"]))
    return result


# --- output -------------------------------------------------------------------------------------------------


def format_text(c: Comparison) -> str:
    lines = [f"A = {c.a_label}", f"B = {c.b_label}", f"metric: {c.metric}; ratio B/A"]
    for w, s in c.summary().items():
        lines.append(f"{w}:")
        for i, (va, vb, r) in enumerate(zip(s["a"], s["b"], s["ratios"], strict=False), 1):
            lines.append(f"  pair {i}: A {va:,.1f}  B {vb:,.1f}  ratio {r:.3f}")
        lo, hi = s["bootstrap95"]
        lines.append(
            f"  median ratio {s['medianRatio']:.3f} (min {s['minRatio']:.3f}, max {s['maxRatio']:.3f}; "
            f"95% bootstrap interval of the median {lo:.3f} to {hi:.3f}) over {len(s['ratios'])} pairs"
        )
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    spec_a, spec_b = args.compare
    if args.compare_pairs < 1:
        print("kubesched bench: --compare-pairs wants at least 1", file=sys.stderr)
        return 2
    if getattr(args, "scale", None) or getattr(args, "plot", None) or getattr(args, "kubeconfig", None):
        print(
            "kubesched bench: --compare runs plain workloads (no --scale, --plot or --kubeconfig)",
            file=sys.stderr,
        )
        return 2
    extra = forwarded_args(args)
    timeout = (2 * args.timeout + 120) * max(1, len(args.workload or [1]))
    show = not args.no_progress and sys.stderr.isatty()

    def progress(text: str) -> None:
        if show:
            print(f"kubesched bench --compare: {text} ({time.strftime('%H:%M:%S')})", file=sys.stderr)

    try:
        with sides(spec_a, spec_b) as (a, b):
            comparison = compare(a, b, extra, args.compare_pairs, args.compare_metric, timeout, progress)
    except CompareError as e:
        print(f"kubesched bench --compare: {e}", file=sys.stderr)
        return e.status
    except KeyboardInterrupt:
        print("kubesched bench --compare: interrupted (worktrees removed)", file=sys.stderr)
        return 130
    if args.output == "json":
        print(json.dumps(comparison.as_json()))
    else:
        print(format_text(comparison))
    return 0
