"""Crash-loop back-off timing and probe verdicts, on a fake clock."""

from __future__ import annotations

import asyncio
import sys

import pytest

from kubesched.cluster.kubelet.backoff import CrashLoopBackoff
from kubesched.cluster.kubelet.probes import ProbeSpec, ProbeTracker, resolve_port, run_probe


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_crash_loop_backoff_is_immediate_then_10s_doubling_to_5_minutes() -> None:
    clock = Clock()
    b = CrashLoopBackoff(clock=clock)
    waits = []
    for _ in range(9):  # the container exits right after each start
        d = b.delay("c")
        waits.append(d)
        clock.now += d
        b.restarted("c")
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300, 300]


def test_backoff_window_counts_from_the_restart_and_resets_after_a_long_quiet_time() -> None:
    clock = Clock()
    b = CrashLoopBackoff(clock=clock)
    b.restarted("c")  # window 10 s from now
    clock.now += 4
    assert b.delay("c") == pytest.approx(6)
    clock.now += 10
    assert b.delay("c") == 0  # ran longer than the window
    b.restarted("c")  # window 20 s
    clock.now += 20
    b.restarted("c")  # window 40 s
    clock.now += 601  # more than twice the maximum without a restart
    b.restarted("c")
    clock.now += 1
    assert b.delay("c") == pytest.approx(9)
    assert b.delay("other") == 0


def test_probe_thresholds_and_timing() -> None:
    spec = ProbeSpec.from_container(
        {
            "readinessProbe": {
                "exec": {"command": ["true"]},
                "initialDelaySeconds": 5,
                "periodSeconds": 2,
                "successThreshold": 2,
                "failureThreshold": 3,
            }
        },
        "readiness",
    )
    assert spec is not None
    t = ProbeTracker(spec, started_at=100.0)
    assert not t.due(104.9) and t.due(105.0)
    assert t.result is False  # readiness starts as not ready
    assert t.record(True, 105.0) is False and t.result is False  # one of two successes
    assert t.next_at == 107.0
    assert t.record(True, 107.0) is True and t.result is True
    assert t.record(False, 109.0) is False and t.record(False, 111.0) is False
    assert t.record(False, 113.0) is True and t.result is False  # third consecutive failure


def test_liveness_starts_passing_and_ignores_success_threshold() -> None:
    spec = ProbeSpec.from_container(
        {"livenessProbe": {"tcpSocket": {"port": 1}, "successThreshold": 5}}, "liveness"
    )
    assert (
        spec is not None and spec.success_threshold == 1 and spec.period == 10 and spec.failure_threshold == 3
    )
    t = ProbeTracker(spec, 0.0)
    assert t.result is True
    assert ProbeSpec.from_container({}, "startup") is None


def test_named_ports() -> None:
    c = {"ports": [{"name": "https", "containerPort": 10259}]}
    assert resolve_port("https", c) == 10259
    assert resolve_port(8080, c) == 8080
    assert resolve_port("8081", c) == 8081
    with pytest.raises(ValueError):
        resolve_port("nope", c)


async def test_probe_handlers_http_tcp_exec() -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b""):
            pass
        status = b"200 OK" if b"/healthz" in line else b"500 Internal Server Error"
        writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nno")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        ok, _ = await run_probe(
            {"httpGet": {"path": "/healthz", "port": port}}, pod_ip="127.0.0.1", container={}, timeout=2
        )
        assert ok
        ok, msg = await run_probe(
            {"httpGet": {"path": "/bad", "port": port}}, pod_ip="127.0.0.1", container={}, timeout=2
        )
        assert not ok and "statuscode: 500" in msg
        ok, _ = await run_probe({"tcpSocket": {"port": port}}, pod_ip="127.0.0.1", container={}, timeout=2)
        assert ok
    finally:
        server.close()
        await server.wait_closed()
    ok, msg = await run_probe({"tcpSocket": {"port": port}}, pod_ip="127.0.0.1", container={}, timeout=2)
    assert not ok
    ok, _ = await run_probe(
        {"exec": {"command": [sys.executable, "-c", "pass"]}}, pod_ip="", container={}, timeout=5
    )
    assert ok
    ok, msg = await run_probe(
        {"exec": {"command": ["sh", "-c", "echo sick; exit 3"]}}, pod_ip="", container={}, timeout=5
    )
    assert not ok and "exited with 3" in msg and "sick" in msg
    ok, msg = await run_probe({"exec": {"command": ["sleep", "5"]}}, pod_ip="", container={}, timeout=0.2)
    assert not ok and "timed out" in msg
