"""Run ``kubesched cluster up`` as a child process and wait until it serves (benchmark, tests, tools)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path


def start_cluster_process(
    data_dir: Path,
    *extra: str,
    timeout: float = 60.0,
    keep_lines: int | None = None,
    control_plane_nodes: int = 0,
    storage: str | None = None,
) -> tuple[subprocess.Popen[str], str, Path, list[str]]:
    """Start the cluster on a free port; return (process, server URL, kubeconfig path, output lines).

    The output keeps being read in a thread so a full pipe never blocks the server; ``keep_lines`` bounds how many
    of its lines are kept. Unlike ``cluster up``'s default, no control-plane node unless ``control_plane_nodes``
    (or ``--control-plane-nodes`` in ``extra``) asks for some: benchmarks and tests about worker scheduling see
    exactly the nodes they create (a tainted node would still count as a topology-spread domain).

    ``storage`` (``sqlite``, ``etcd``, ``memory``) is passed as ``--storage``; None keeps ``cluster up``'s
    default (sqlite under ``data_dir``). Benchmarks and other throwaway clusters pass ``"memory"``.
    """
    if not any(f.startswith("--control-plane-nodes") for f in extra):
        extra = (*extra, "--control-plane-nodes", str(control_plane_nodes))
    if storage is not None and not any(f.startswith("--storage") for f in extra):
        extra = (*extra, "--storage", storage)
    cmd = [
        sys.executable,
        "-m",
        "kubesched.cli",
        "cluster",
        "up",
        "--port",
        "0",
        "--data-dir",
        str(data_dir),
        *extra,
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    url, kubeconfig, lines = "", "", []
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line.rstrip())
        if "serving on " in line:
            url = line.split("serving on ", 1)[1].strip()
        if "kubeconfig " in line:
            kubeconfig = line.split("kubeconfig ", 1)[1].strip()
        if line.strip().endswith("ready"):
            break
    if not url or not kubeconfig:
        proc.kill()
        raise RuntimeError("the local cluster did not start:\n" + "\n".join(lines[-(keep_lines or 200) :]))

    def drain() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line.rstrip())
            if keep_lines is not None:
                del lines[:-keep_lines]

    threading.Thread(target=drain, daemon=True).start()
    return proc, url, Path(kubeconfig), lines
