"""Start ``kubesched cluster up`` as a real process for end-to-end tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubesched.cluster.process import start_cluster_process

T = TypeVar("T")

KUBECTL_CANDIDATES = (
    "/usr/lib/google-cloud-sdk/bin/kubectl.1.32",  # skip the version dispatcher when it is there
    "kubectl",
)


def find_kubectl() -> str | None:
    for c in KUBECTL_CANDIDATES:
        path = c if os.path.isabs(c) else shutil.which(c)
        if path and os.access(path, os.X_OK):
            return path
    return None


@dataclass
class ClusterProcess:
    proc: subprocess.Popen[str]
    url: str
    kubeconfig: Path
    data_dir: Path
    output: list[str]

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        return self.proc.returncode


def start_cluster(data_dir: Path, *extra: str, timeout: float = 60.0) -> ClusterProcess:
    proc, url, kubeconfig, lines = start_cluster_process(data_dir, *extra, timeout=timeout)
    return ClusterProcess(proc, url, kubeconfig, data_dir, lines)


class Kubectl:
    def __init__(self, binary: str, kubeconfig: Path, cache_dir: Path) -> None:
        self.binary = binary
        self.base = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache_dir)]

    def __call__(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([*self.base, *args], input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
        return r

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [*self.base, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )


# --- the scheduler as a process ----------------------------------------------------------------------------------


def free_port(ip: str = "127.0.0.1") -> int:
    """A TCP port on ``ip`` (a node's 127.0.1.x too) that nothing listens on right now."""
    import socket

    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.3) -> T:
    """Poll ``fn`` until it returns something true; a lookup or assertion error while waiting counts as not yet."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = fn()
        except (AssertionError, KeyError, IndexError, ValueError, TypeError) as e:
            last = e
        else:
            if last:
                return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r})")


def https_get(port: int, path: str, timeout: float = 5.0) -> tuple[int, str]:
    """GET ``https://127.0.0.1:<port><path>`` without verifying the (self-signed) certificate: (status, body)."""
    import ssl
    import urllib.error
    import urllib.request

    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=timeout) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def kill_process(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(10)


def stop_process(proc: subprocess.Popen[str], *, grace: float) -> int:
    """SIGTERM, then SIGKILL after ``grace`` seconds; the exit code."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    return proc.returncode


@dataclass
class SchedulerProcess:
    """A ``kubesched scheduler`` process; ``output`` collects its stdout and stderr lines as they come.
    ``get`` presents the kubeconfig's credentials to the secure port (its guarded paths need them);
    ``get(..., anonymous=True)`` presents none."""

    proc: subprocess.Popen[str]
    port: int
    output: list[str]
    kubeconfig: Path | None = None

    def get(self, path: str, timeout: float = 5.0, *, anonymous: bool = False) -> tuple[int, str]:
        if anonymous or self.kubeconfig is None:
            return https_get(self.port, path, timeout)
        from kubesched.serving import kubeconfig_get_sync

        status, body = kubeconfig_get_sync(
            f"https://127.0.0.1:{self.port}{path}", str(self.kubeconfig), timeout=timeout
        )
        return status, body.decode()

    def metrics(self) -> str:
        status, body = self.get("/metrics")
        if status != 200:
            raise AssertionError(f"/metrics answered {status}: {body}")
        return body

    def log(self) -> str:
        return "\n".join(self.output)

    def kill(self) -> None:
        """SIGKILL: no lease release, no cleanup, as a crashed process."""
        kill_process(self.proc)

    def stop(self) -> int:
        return stop_process(self.proc, grace=10)


def start_scheduler(
    kubeconfig: Path, *flags: str, port: int | None = None, timeout: float = 30.0
) -> SchedulerProcess:
    """Start ``kubesched scheduler --kubeconfig K --secure-port P --bind-address 127.0.0.1 <flags>`` and wait until
    ``/healthz`` answers on the secure port (it answers once the informers are started, leading or not)."""
    import threading

    port = port or free_port()
    cmd = [
        sys.executable,
        "-m",
        "kubesched.cli",
        "scheduler",
        "--kubeconfig",
        str(kubeconfig),
        "--secure-port",
        str(port),
        "--bind-address",
        "127.0.0.1",
        *flags,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: list[str] = []

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())

    threading.Thread(target=drain, daemon=True).start()
    sched = SchedulerProcess(proc, port, lines, kubeconfig)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"scheduler exited with {proc.returncode}:\n" + sched.log())
        try:
            status, _ = https_get(port, "/healthz", timeout=1.0)
        except OSError:
            status = 0
        if status == 200:
            return sched
        time.sleep(0.05)
    sched.kill()
    raise RuntimeError("scheduler's /healthz did not answer:\n" + sched.log())


# --- other component processes -----------------------------------------------------------------------------------


@dataclass
class ComponentProcess:
    """A ``python -m kubesched.cli <args>`` process (annotator, operator, ...); ``output`` collects its stdout and
    stderr lines as they come."""

    proc: subprocess.Popen[str]
    output: list[str]

    @classmethod
    def start(cls, *args: str) -> ComponentProcess:
        import threading

        proc = subprocess.Popen(
            [sys.executable, "-m", "kubesched.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        started = cls(proc, [])

        def drain() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                started.output.append(line.rstrip())

        threading.Thread(target=drain, daemon=True).start()
        return started

    def log(self, last: int | None = None) -> str:
        return "\n".join(self.output if last is None else self.output[-last:])

    def kill(self) -> None:
        """SIGKILL: no lease release, no cleanup, as a crashed process."""
        kill_process(self.proc)

    def stop(self) -> int:
        return stop_process(self.proc, grace=15)


def start_operator(
    kubeconfig: Path,
    scheduler_port: int,
    *,
    lease: str = "5s",
    renew: str = "4s",
    retry: str = "1s",
) -> ComponentProcess:
    """``kubesched operator`` on loopback (its own secure port picked by the OS) for a cluster whose control-plane
    static pod serves on ``scheduler_port``: a 5s resync, no degraded inertia, and leader election as given
    (short by default, so that a successor does not wait out upstream's 137s lease of a killed holder)."""
    return ComponentProcess.start(
        "operator",
        *("--kubeconfig", str(kubeconfig)),
        *("--secure-port", "0", "--bind-address", "127.0.0.1"),
        *("--scheduler-secure-port", str(scheduler_port)),
        *("--resync-period", "5s", "--degraded-inertia", "0s"),
        *("--leader-elect-lease-duration", lease),
        *("--leader-elect-renew-deadline", renew),
        *("--leader-elect-retry-period", retry),
    )
