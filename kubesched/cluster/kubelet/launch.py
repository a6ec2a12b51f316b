"""Starts one container process: ``python -m kubesched.cluster.kubelet.launch SPEC.json``.

The kubelet writes SPEC (argv, working directory, mounts) and runs this launcher in a new session. It

1. asks the kernel to SIGKILL it if the kubelet dies (so no container outlives its cluster),
2. when SPEC has mounts: enters a private mount namespace and bind-mounts each volume at the path the pod spec
   names (``/var/run/secrets/kubernetes.io/serviceaccount``, ``/etc/kubernetes/scheduler.conf``, ...). A folder
   missing on the host is created inside an overlay of its nearest existing parent (upper layer on a private
   tmpfs), so the host's file system is never written; mounts that were under that parent are bound back,
3. when SPEC names a hostname: enters a private UTS namespace with that hostname (the pod's name, or the node's for
   ``hostNetwork``), as a container runtime does; ``kubesched scheduler`` builds its Lease identity from it,
4. ``execvp``s the command, so the process the kubelet watches is the container itself.

``--check`` only tries step 2's namespace and exits 0 when mount namespaces are available.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
O_PATH = getattr(os, "O_PATH", 0o10000000)
MS_RDONLY = 1
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
PR_SET_PDEATHSIG = 1

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    rc = _libc.mount(
        source.encode() if source else None,
        target.encode(),
        fstype.encode() if fstype else None,
        ctypes.c_ulong(flags),
        data.encode() if data else None,
    )
    _check(rc, f"mount {source or fstype} on {target}")


def enter_private_mount_namespace() -> None:
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    # Nothing mounted from here on propagates back to the host.
    _mount(None, "/", None, MS_REC | MS_PRIVATE)


def set_hostname(name: str) -> None:
    """A private UTS namespace named ``name``: only this process and its children see it."""
    _check(_libc.unshare(CLONE_NEWUTS), "unshare(CLONE_NEWUTS)")
    raw = name[:63].rstrip("-.").encode()  # HOST_NAME_MAX is 64; the kubelet truncates the same way
    _check(_libc.sethostname(raw, len(raw)), f"sethostname {name}")


def _mount_points() -> list[str]:
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4]
            points.append(mp.replace("\\040", " "))
    return points


def _overlay_parent(parent: Path, scratch: Path, counter: list[int]) -> None:
    """Make ``parent`` writable without writing to the host: an overlay whose upper layer is a private tmpfs."""
    counter[0] += 1
    work = scratch / f"overlay-{counter[0]}"
    orig = work / "orig"
    for d in (work / "upper", work / "work", orig):
        d.mkdir(parents=True)
    prefix = str(parent).rstrip("/") + "/"
    below = [mp for mp in _mount_points() if mp.startswith(prefix)]
    _mount(str(parent), str(orig), None, MS_BIND | MS_REC)  # to bind the mounts under it back afterwards
    _mount(
        "overlay",
        str(parent),
        "overlay",
        0,
        f"lowerdir={parent},upperdir={work / 'upper'},workdir={work / 'work'}",
    )
    for mp in sorted(set(below), key=len):
        rel = mp[len(prefix) :]
        src = orig / rel
        try:
            _mount(str(src), mp, None, MS_BIND | MS_REC)
        except OSError:
            pass  # a mount point the overlay cannot show (its folder is gone in the lower layer)


def _ensure_target(target: Path, is_dir: bool, scratch: Path, counter: list[int]) -> None:
    if target.exists():
        return
    parent = target.parent
    existing = parent
    while not existing.exists():
        existing = existing.parent
    existing = Path(os.path.realpath(existing))
    if str(existing) == "/":
        raise OSError(f"cannot create {target}: it would need a new top-level folder")
    _overlay_parent(existing, scratch, counter)
    parent.mkdir(parents=True, exist_ok=True)
    if is_dir:
        target.mkdir(exist_ok=True)
    else:
        target.touch()


def _hold(path: str | Path) -> str:
    """A path that keeps naming ``path`` after something is mounted over it or over a folder above it: the
    process' own file descriptor of it (``/proc/self/fd/N``), which mount(2) and mkdir follow."""
    return f"/proc/self/fd/{os.open(path, O_PATH)}"


def apply_mounts(mounts: list[dict[str, Any]], scratch: Path, keep: list[str] | None = None) -> None:
    """Bind each volume at its target. ``keep``: folders the container needs whatever its volumes cover (the
    Python installation and kubesched itself), bound back where a volume hid them."""
    scratch.mkdir(parents=True, exist_ok=True)
    _mount("tmpfs", str(scratch), "tmpfs", 0, "mode=0700")
    # A volume may be mounted over a folder that holds the scratch space, a later volume's source or the
    # installation (an emptyDir at /tmp while the data dir or the venv lives under /tmp): take hold of all of
    # them before the first mount.
    scratch = Path(_hold(scratch))
    held = [(m, _hold(m["source"]), Path(m["source"]).is_dir()) for m in mounts]
    kept = [(path, _hold(path), os.stat(path)) for path in keep or () if os.path.isdir(path)]
    counter = [0]
    for m, source, is_dir in held:
        target = Path(m["target"])
        if target.exists() and target.is_dir() != is_dir:
            raise OSError(f"cannot mount {'a folder' if is_dir else 'a file'} at {target}")
        _ensure_target(target, is_dir, scratch, counter)
        _mount(source, str(target), None, MS_BIND | MS_REC)
        if m.get("readOnly"):
            _mount(None, str(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY)
    for path, source, before in kept:
        try:
            now = os.stat(path)
        except OSError:
            now = None
        if now is not None and (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino):
            continue
        _ensure_target(Path(path), True, scratch, counter)
        _mount(source, path, None, MS_BIND | MS_REC)


def main(argv: list[str]) -> int:
    if argv[:1] == ["--check"]:
        try:
            enter_private_mount_namespace()
        except OSError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    spec = json.loads(Path(argv[0]).read_text())
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != spec.get("kubelet_pid", os.getppid()):
        return 137  # the kubelet is already gone
    try:
        if spec.get("hostname"):
            set_hostname(spec["hostname"])
        if spec.get("mounts"):
            enter_private_mount_namespace()
            apply_mounts(spec["mounts"], Path(spec["scratch"]), spec.get("keep"))
        if spec.get("cwd"):
            os.chdir(spec["cwd"])
    except OSError as e:
        print(f"kubesched kubelet: cannot set up the container: {e}", file=sys.stderr, flush=True)
        return 128
    command = spec["argv"]
    try:
        os.execvp(command[0], command)
    except OSError as e:
        print(f'kubesched kubelet: exec "{command[0]}": {e.strerror or e}', file=sys.stderr, flush=True)
        return 127


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
