"""The scheduler's hand-off of bindings to the client: bounded in flight, so that bindings flow, and all land."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.bench.inprocess import InMemoryApi, RunOptions, run_inprocess
from kubesched.bench.workloads import WORKLOADS
from kubesched.scheduler import scheduler as scheduler_module
from kubesched.scheduler.plugins import in_tree_catalogue

BOUND = 32  # below what this workload reaches unbounded (128 here), so the bound is what is tested


def test_bindings_in_flight_stay_bounded_against_a_slow_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    in_flight = 0
    most = 0
    calls = 0
    original = InMemoryApi.create_subresource

    async def slow_bind(self: InMemoryApi, *args: Any, **kwargs: Any) -> Any:
        nonlocal in_flight, most, calls
        in_flight += 1
        calls += 1
        most = max(most, in_flight)
        try:
            await asyncio.sleep(0.05)  # an API server far slower than the scheduling loop
            return await original(self, *args, **kwargs)
        finally:
            in_flight -= 1

    monkeypatch.setattr(InMemoryApi, "create_subresource", slow_bind)
    monkeypatch.setattr(scheduler_module, "MAX_BINDINGS_IN_FLIGHT", BOUND)
    pods = 768
    workload = WORKLOADS["SchedulingBasic"].sized(nodes=50, init_pods=0, pods=pods)
    result = run_inprocess(workload, RunOptions(timeout=300), in_tree_catalogue())
    assert result["check"]["passed"], result["check"]
    assert calls == pods  # every pod bound once
    # The loop waited for room instead of running ahead of the API server, and still kept the pipe full.
    assert BOUND // 2 <= most <= BOUND
