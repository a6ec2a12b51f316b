"""The runtime: watches trigger syncs, periodic resync, errors counted and retried with back-off, requeue_after,
metrics; ``kubesched operator`` start-up pieces (singletons, metrics text, one-line errors)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesched.cli import main as cli_main
from kubesched.operator import contract as c
from kubesched.operator.main import ensure_singletons
from kubesched.operator.metrics import OperatorMetrics
from kubesched.operator.runtime import Runtime, Watch


@dataclass
class Recording:
    name: str = "Recording"
    fail_first: int = 0
    requeue_after: float | None = None
    calls: int = 0
    seen: list[int] = field(default_factory=list)

    async def sync(self, ctx: c.OperatorContext) -> None:
        self.calls += 1
        if self.calls <= self.fail_first:
            raise RuntimeError(f"boom {self.calls}")
        cms = await ctx.client.list("v1", "configmaps", namespace=ctx.operand_namespace)
        self.seen.append(len(cms["items"]))


async def run_for(runtime: Runtime, until: Any, timeout: float = 30.0) -> None:
    task = asyncio.create_task(runtime.run())
    try:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while not until():
            assert loop.time() < deadline, "condition not reached"
            assert not task.done(), task.exception()
            await asyncio.sleep(0.02)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_changes_trigger_syncs(op_ctx: c.OperatorContext, kit: Any) -> None:
    rec = Recording()
    metrics = OperatorMetrics()
    watches = [Watch("v1", "configmaps", op_ctx.operand_namespace)]
    runtime = Runtime(op_ctx, [rec], resync_period=3600, metrics=metrics, watches=watches)
    task = asyncio.create_task(runtime.run())
    try:
        await kit.eventually(lambda: _true(rec.calls >= 1), "the first sync")
        base = len(rec.seen)
        await kit.put_input(op_ctx.client, "config", {"a": "b"})
        await kit.eventually(
            lambda: _true(len(rec.seen) > base and rec.seen[-1] >= 1), "a sync after the change"
        )
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    text = metrics.render().decode()
    assert 'kubesched_operator_reconciles_total{controller="Recording"}' in text
    assert 'kubesched_operator_reconcile_duration_seconds_count{controller="Recording"}' in text


async def _true(value: bool) -> bool:
    return value


async def test_resync_errors_and_backoff(op_ctx: c.OperatorContext) -> None:
    rec = Recording(fail_first=2)
    metrics = OperatorMetrics()
    runtime = Runtime(op_ctx, [rec], resync_period=0.2, metrics=metrics, watches=[], backoff_base=0.05)
    await run_for(runtime, lambda: rec.calls >= 5)
    state = runtime.states[0]
    assert state.errors == 2 and state.failures == 0 and state.last_error == "RuntimeError: boom 2"
    text = metrics.render().decode()
    assert 'kubesched_operator_reconcile_errors_total{controller="Recording"} 2.0' in text


async def test_backoff_grows_and_is_capped(op_ctx: c.OperatorContext) -> None:
    rec = Recording(fail_first=100)
    runtime = Runtime(op_ctx, [rec], watches=[], backoff_base=1.0, backoff_max=8.0)
    delays = [await runtime.sync_once(runtime.states[0]) for _ in range(6)]
    assert delays == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


async def test_requeue_after_is_honoured(op_ctx: c.OperatorContext) -> None:
    rec = Recording(requeue_after=0.05)
    runtime = Runtime(op_ctx, [rec], resync_period=3600, watches=[])
    await run_for(runtime, lambda: rec.calls >= 4)


def test_metrics_follow_the_kubescheduler() -> None:
    m = OperatorMetrics()
    m.observe_kubescheduler(
        {
            "status": {
                "latestAvailableRevision": 3,
                "nodeStatuses": [
                    {"nodeName": "cp-0", "currentRevision": 2, "targetRevision": 3},
                    {"nodeName": "cp-1", "currentRevision": 3},
                ],
            }
        }
    )
    text = m.render().decode()
    assert "kubesched_operator_latest_available_revision 3.0" in text
    assert 'kubesched_operator_node_current_revision{node="cp-0"} 2.0' in text
    assert 'kubesched_operator_node_target_revision{node="cp-0"} 3.0' in text
    m.observe_kubescheduler(
        {"status": {"latestAvailableRevision": 3, "nodeStatuses": [{"nodeName": "cp-1"}]}}
    )
    assert 'node="cp-0"' not in m.render().decode()


async def test_singletons_created_once(op_client: Any, kit: Any) -> None:
    made = await ensure_singletons(op_client, [c.OPERATOR_NAMESPACE, "extra-ns"])
    assert made == ["namespaces/extra-ns", "kubeschedulers/cluster", "schedulers/cluster"]
    ks = await kit.get_kubescheduler(op_client)
    assert ks["spec"]["managementState"] == "Managed"
    assert await ensure_singletons(op_client, ["extra-ns"]) == []


def test_operator_bad_input_is_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["operator", "--kubeconfig", str(tmp_path / "missing")]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kubesched operator:") and "\n" not in err
    with pytest.raises(SystemExit):
        cli_main(["operator", "--resync-period", "soon"])
    assert "invalid duration" in capsys.readouterr().err


def test_operator_bad_lease_durations_are_one_line(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"  # checked before any request: no server needed
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {}}]\n"
    )
    code = cli_main(
        [
            "operator",
            "--kubeconfig",
            str(kubeconfig),
            "--leader-elect-lease-duration",
            "5s",
            "--leader-elect-renew-deadline",
            "10s",
        ]
    )
    assert code == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("kubesched operator: leader election:") and "\n" not in err
