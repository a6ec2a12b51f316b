"""Marginal callgrind instructions per pod of an in-process workload: the scheduler's cost without start-up.

    .venv/bin/python tests/bench/callgrind_per_pod.py [-w SchedulingBasic] [--nodes 500]

Runs ``kubesched bench --no-isolate`` under callgrind twice (``--pods 500`` and ``--pods 1500``, ``--init-pods
100``) and prints (total2 - total1) / 1000. uuid4 is seeded and OpenBLAS keeps one thread, so repeat runs of one
build agree to under 1k instructions per pod (unseeded, they differed by up to 4%). Not a test (no ``test_``
prefix): run by hand to judge a change; needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import uuid


def _child() -> None:
    rng = random.Random(1234)
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)  # deterministic uids
    random.seed(1)
    from kubesched.cli import main

    sys.argv = ["kubesched", *sys.argv[2:]]
    sys.exit(main())


def _total(workload: str, nodes: int, pods: int) -> int:
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONHASHSEED="0")
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        "--child",
    ]
    cmd += ["bench", "-w", workload, "--nodes", str(nodes), "--init-pods", "100", "--pods", str(pods)]
    cmd += ["--no-isolate", "-o", "json", "--no-progress", "--seed", "1"]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    m = re.search(r"Collected : (\d+)", done.stderr)
    if m is None:
        raise SystemExit(f"no callgrind total in:\n{done.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-w", "--workload", default="SchedulingBasic")
    parser.add_argument("--nodes", type=int, default=500)
    args = parser.parse_args()
    small, big = _total(args.workload, args.nodes, 500), _total(args.workload, args.nodes, 1500)
    print(
        f"{args.workload} {args.nodes} nodes: {(big - small) // 1000:,} instructions per pod ({small:,} / {big:,})"
    )


if __name__ == "__main__":
    main()
