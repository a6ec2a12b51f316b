"""Run many short ``python -m kubesched.cli ...`` commands without paying the interpreter's start and kubesched's
imports for each: a helper process imports every subcommand's module once, then forks one child per command.

The child is a real process of its own: it takes the command's working directory, environment and argv, runs
``kubesched.cli`` as ``__main__`` exactly as ``python -m`` does (``runpy``), and ends the way the interpreter ends
one: ``SystemExit``'s code, or the traceback on stderr and status 1 for any other exception. Its stdout and stderr
go to files the test reads. What differs from a fresh interpreter is only that the modules are already imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

SERVER = r"""
import atexit, importlib, json, os, runpy, signal, sys, time, traceback

import kubesched.cli

for module, _ in kubesched.cli.SUBCOMMANDS.values():
    try:
        importlib.import_module(module)
    except ImportError:
        pass  # a subcommand this build lacks: the command says so itself
del sys.modules["kubesched.cli"]  # run fresh as __main__, as `python -m` does (runpy warns otherwise)
requests, answers = sys.stdin, sys.stdout


def child(req):
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    for fd, path in ((1, req["out"]), (2, req["err"])):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(f, fd)
        os.close(f)
    sys.argv = ["-m", *req["argv"]]
    sys.path[0] = req["cwd"]
    code = 0
    try:
        runpy.run_module("kubesched.cli", run_name="__main__", alter_sys=True)
    except SystemExit as e:
        if e.code is None:
            code = 0
        elif isinstance(e.code, int):
            code = e.code
        else:
            print(e.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code & 0xFF)


for line in requests:
    req = json.loads(line)
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        child(req)
    deadline = time.monotonic() + req["timeout"]
    status = None
    while status is None:
        done, st = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(st)
        elif time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            status = "timeout"
        else:
            time.sleep(0.005)
    answers.write(json.dumps({"status": status}) + "\n")
    answers.flush()
"""


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


class ForkRunner:
    """One helper process; :meth:`run` runs a command in a fresh child of it."""

    def __init__(self, home: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
        env["HOME"] = str(home)  # as the commands will have it: no ~/.kube/config read while importing
        self.proc = subprocess.Popen(
            [sys.executable, "-c", SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
            cwd=home,
        )

    def run(self, argv: list[str], cwd: Path, env: dict[str, str], timeout: float = 60) -> Result:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        out, err = cwd / ".forkrun.stdout", cwd / ".forkrun.stderr"
        req = {
            "argv": argv,
            "cwd": str(cwd),
            "env": env,
            "out": str(out),
            "err": str(err),
            "timeout": timeout,
        }
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the fork helper exited with {self.proc.wait()}")
        status = json.loads(line)["status"]
        if status == "timeout":
            raise subprocess.TimeoutExpired(argv, timeout)
        return Result(int(status), out.read_text(), err.read_text())

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
