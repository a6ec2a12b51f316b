"""``cluster up``'s storage flags: mistakes are one clear line, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kubesched.cluster.storage.sqlite import SqliteStorage


def cluster_up(data_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kubesched.cli",
            "cluster",
            "up",
            "--port",
            "0",
            "--data-dir",
            str(data_dir),
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        (("--etcd-servers", "http://127.0.0.1:2379"), "--etcd-servers needs --storage etcd"),
        (("--storage", "etcd", "--etcd-servers", "ftp://x"), "only http://host:port is supported"),
        (("--storage", "etcd", "--etcd-servers", "http://127.0.0.1:1"), "etcd at http://127.0.0.1:1"),
        (("--storage", "disk"), "invalid choice: 'disk'"),
        (("--sqlite-sync", "sometimes"), "invalid choice: 'sometimes'"),
    ],
)
def test_storage_flag_mistakes_are_one_line(tmp_path: Path, flags: tuple[str, ...], expected: str) -> None:
    r = cluster_up(tmp_path, *flags)
    assert r.returncode != 0
    assert "Traceback" not in r.stderr, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if expected in ln]
    assert len(lines) == 1 and "cluster up" in lines[0], r.stderr


def test_a_data_dir_in_use_is_refused(tmp_path: Path) -> None:
    held = SqliteStorage(tmp_path / "db" / "state.db")  # as a running server holds it
    try:
        r = cluster_up(tmp_path)
    finally:
        held.close()
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines() == [
        f"kubesched cluster up: storage sqlite: {tmp_path / 'db' / 'state.db'} is in use by pid {os.getpid()}"
    ]
