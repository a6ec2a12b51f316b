"""SteadyLoad (pods arriving at a fixed rate, the oldest deleted as new ones arrive: create-to-bound latency) and
StartupLarge (process start to first binding with many pods already bound), tiny, in both modes. Structure and
the placement check only: never a timed assertion."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import json
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kubesched.bench.e2e import E2eOptions, _Process, _steady_gc, _wait_alive, run_e2e
from kubesched.bench.external import ExternalObjects
from kubesched.bench.inprocess import RunOptions, run_inprocess
from kubesched.bench.measure import latency_summary
from kubesched.bench.workloads import WORKLOADS, Workload
from kubesched.catalogue import full_catalogue
from kubesched.cli import main


def steady(nodes: int = 30, pods: int = 240, rate: float = 200.0, live: int | None = 80) -> Workload:
    w = WORKLOADS["SteadyLoad"].sized(nodes, 0, pods)
    return dataclasses.replace(w, arrival_rate=rate, live_pods=live)


def _latency_ok(result: dict[str, Any], count: int) -> None:
    lat = result["latencyMilliseconds"]
    assert lat["count"] == count
    assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"] <= lat["max"]


def _deleted_ok(result: dict[str, Any], pods: int, live: int) -> None:
    # every arrival beyond `live` deletes the oldest measured pod once it is bound; the last few may still
    # be waiting for their binding when the arrivals end
    assert 0 < result["podsDeleted"] <= pods - live


def test_sizes_follow_rate_and_duration() -> None:
    w = WORKLOADS["SteadyLoad"]
    assert (w.arrival_rate, w.measured_pods, w.live_pods) == (300.0, 18000, 3000)
    s = w.sized(500, None, None, rate=50, duration=4)
    assert (s.nodes, s.arrival_rate, s.measured_pods, s.live_pods) == (500, 50, 200, 500)
    assert w.sized(rate=100).measured_pods == 6000  # the default 60 s
    assert w.sized(pods=7, rate=100).measured_pods == 7
    assert WORKLOADS["SchedulingBasic"].sized(rate=5, duration=5).measured_pods == 10000  # not a steady one


def test_latency_summary() -> None:
    handed = {f"p{i}": 0.0 for i in range(100)}
    bound = {f"p{i}": (i + 1) / 1000 for i in range(100)}  # 1..100 ms
    assert latency_summary(bound, handed) == {
        "count": 100,
        "p50": 50.0,
        "p90": 90.0,
        "p99": 99.0,
        "max": 100.0,
    }
    assert latency_summary({}, handed) == {"count": 0}


def test_steady_load_in_process() -> None:
    result = run_inprocess(steady(), RunOptions(timeout=120), full_catalogue())
    assert result["check"]["passed"], result["check"]
    assert result["arrivalRate"] == 200.0
    _latency_ok(result, 240)
    _deleted_ok(result, 240, 80)


def test_steady_load_end_to_end() -> None:
    result = run_e2e(steady(), E2eOptions(timeout=120), full_catalogue())
    assert not result.get("error"), result
    assert result["check"]["passed"], result["check"]
    assert result["create"] == "steady"
    _latency_ok(result, 240)
    _deleted_ok(result, 240, 80)
    lag = result["harnessLoopLagMilliseconds"]
    assert lag["count"] > 0 and 0 <= lag["p50"] <= lag["p99"] <= lag["max"]


def test_startup_end_to_end_and_skipped_in_process() -> None:
    w = WORKLOADS["StartupLarge"].sized(20, 300, 2)
    result = run_e2e(w, E2eOptions(timeout=120), full_catalogue())
    assert not result.get("error"), result
    assert result["check"]["passed"], result["check"]
    assert result["existingPods"] == 300
    assert result["startupToFirstBindingSeconds"] > 0 and result["peakRSSBytes"] > 0
    skipped = run_inprocess(w, RunOptions(), full_catalogue())
    assert "--mode e2e" in skipped["skipped"]


def test_startup_pods_follow_renamed_nodes() -> None:
    w = WORKLOADS["StartupLarge"].sized(3, 5, 1)
    objects = ExternalObjects(w, "r1", "kb", "s")
    assert [p["spec"]["nodeName"] for p in objects.init_pods()] == [
        "kb-node-00000",
        "kb-node-00001",
        "kb-node-00002",
        "kb-node-00000",
        "kb-node-00001",
    ]
    assert "nodeName" not in objects.measured_pods()[0]["spec"]


def test_cli_steady_options(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "-w", "SteadyLoad", "--rate", "0"]) == 2
    assert capsys.readouterr().err.strip() == "kubesched bench: --rate wants a positive number, not 0"
    argv = ["bench", "-w", "SteadyLoad", "--nodes", "20", "--rate", "100", "--duration", "1", "-o", "json"]
    assert main([*argv, "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["measuredPods"] == 100 and result["latencyMilliseconds"]["count"] == 100


def test_steady_gc_is_restored() -> None:
    before = gc.get_threshold()
    with _steady_gc():
        assert gc.get_threshold()[:2] == before[:2]
        assert gc.get_threshold()[2] > 1_000_000
        assert gc.get_freeze_count() > 0
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0


async def test_wait_alive_stops_when_the_feeder_fails(tmp_path: Path) -> None:
    """A create that failed means a pod that will never be bound: the wait ends (not after the timeout) and
    the harness then reports the feeder's error."""
    proc = _Process("sleeper", [sys.executable, "-c", "import time; time.sleep(60)"], tmp_path / "log")
    try:

        async def fail() -> None:
            raise RuntimeError("create refused")

        feeder = asyncio.ensure_future(fail())
        await asyncio.gather(feeder, return_exceptions=True)
        never = asyncio.Event()
        started = time.monotonic()
        assert not await _wait_alive(never, 120.0, proc, feeder)
        assert time.monotonic() - started < 60.0
        done = asyncio.Event()
        done.set()
        assert await _wait_alive(done, 120.0, proc, feeder)
    finally:
        proc.stop()
