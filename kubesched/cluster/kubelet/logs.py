"""Container logs as a CRI runtime keeps them, and the ``pods/log`` subresource that reads them.

Each start of a container writes ``<node-root>/var/log/pods/<ns>_<pod>_<uid>/<container>/<restart>.log``, one
line per line of output: ``<RFC 3339 nano timestamp> <stdout|stderr> F <text>`` (the CRI logging format, so
``timestamps=true`` can show when each line was written). ``kubectl logs`` reads the newest file, ``--previous``
the one before it, ``-f`` keeps reading until the container stops.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from kubesched.cluster import errors

Obj = dict[str, Any]

MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
FOLLOW_POLL_SECONDS = 0.2
_LOG_NAME = re.compile(r"^(\d+)\.log$")


def pod_uid(pod: Obj) -> str:
    """The uid a pod's logs and volumes are filed under: a static pod's config hash, else the API uid."""
    meta = pod.get("metadata") or {}
    return str((meta.get("annotations") or {}).get(MIRROR_ANNOTATION) or meta.get("uid") or "")


def pod_log_dir(node_root: Path, namespace: str, name: str, uid: str) -> Path:
    return node_root / "var" / "log" / "pods" / f"{namespace}_{name}_{uid}"


def container_log_path(
    node_root: Path, namespace: str, name: str, uid: str, container: str, restart: int
) -> Path:
    return pod_log_dir(node_root, namespace, name, uid) / container / f"{restart}.log"


def _timestamp() -> bytes:
    now = dt.datetime.now(dt.UTC)
    return (now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond:06d}000Z").encode()


class LogWriter:
    """Writes one container run's output in the CRI format; whole lines only, the tail on ``close``."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self._file = open(path, "ab", buffering=0)
        self._partial: dict[str, bytes] = {}

    def write(self, stream: str, data: bytes) -> None:
        buf = self._partial.get(stream, b"") + data
        *lines, rest = buf.split(b"\n")
        self._partial[stream] = rest
        if lines:
            ts = _timestamp()
            tag = stream.encode()
            self._file.write(b"".join(ts + b" " + tag + b" F " + line + b"\n" for line in lines))

    def close(self) -> None:
        for stream, rest in self._partial.items():
            if rest:
                self._file.write(_timestamp() + b" " + stream.encode() + b" F " + rest + b"\n")
        self._partial.clear()
        self._file.close()


def parse_line(raw: bytes) -> tuple[bytes, bytes]:
    """(timestamp, text without newline) of one CRI log line; lines that do not parse are text as a whole."""
    parts = raw.rstrip(b"\n").split(b" ", 3)
    if len(parts) == 4 and parts[1] in (b"stdout", b"stderr"):
        return parts[0], parts[3]
    return b"", raw.rstrip(b"\n")


def render(lines: list[bytes], *, timestamps: bool, since: bytes | None = None) -> bytes:
    """The lines as ``kubectl logs`` prints them; ``since`` (a timestamp as ``_timestamp`` writes) drops older."""
    out = []
    for raw in lines:
        ts, text = parse_line(raw)
        if since is not None and ts and ts < since:
            continue
        out.append((ts + b" " + text if timestamps and ts else text) + b"\n")
    return b"".join(out)


def log_files(container_dir: Path) -> list[Path]:
    """The container's log files, oldest run first."""
    try:
        names = os.listdir(container_dir)
    except OSError:
        return []
    runs = sorted((int(m.group(1)), n) for n in names if (m := _LOG_NAME.match(n)))
    return [container_dir / n for _, n in runs]


def read_lines(path: Path, tail: int | None) -> tuple[list[bytes], int]:
    """The file's complete lines (the last ``tail`` of them if given) and the offset after the last one read."""
    try:
        data = path.read_bytes()
    except OSError:
        return [], 0
    end = data.rfind(b"\n") + 1
    lines = data[:end].splitlines(keepends=True)
    if tail is not None:
        lines = lines[-tail:] if tail > 0 else []
    return lines, end


class PodLogs:
    """Serves ``GET .../pods/<name>/log`` for pods whose containers ran as processes on a node of this cluster.

    ``node_root(node)`` gives a node's root folder (None: a simulated node, whose containers write nothing);
    ``running(pod, container)`` says whether the container is running now (``follow`` ends when it is not).
    """

    def __init__(self, node_root: Callable[[str], Path | None], running: Callable[[Obj, str], bool]) -> None:
        self.node_root = node_root
        self.running = running

    async def serve(self, request: web.Request, pod: Obj) -> web.StreamResponse:
        q = request.query
        meta = pod.get("metadata") or {}
        name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
        spec = pod.get("spec") or {}
        containers = [str(c.get("name")) for c in spec.get("containers") or []]
        all_names = containers + [str(c.get("name")) for c in spec.get("initContainers") or []]
        container = q.get("container") or ""
        if not container:
            if len(containers) != 1:
                raise errors.bad_request(
                    f"a container name must be specified for pod {name}, choose one of: [{' '.join(containers)}]"
                )
            container = containers[0]
        elif container not in all_names:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        previous = q.get("previous", "").lower() in ("true", "1")
        follow = q.get("follow", "").lower() in ("true", "1") and not previous
        timestamps = q.get("timestamps", "").lower() in ("true", "1")
        tail = _int_param(q.get("tailLines"), "tailLines")
        limit = _int_param(q.get("limitBytes"), "limitBytes")
        since = _since(q.get("sinceSeconds"), q.get("sinceTime"))
        node = str(spec.get("nodeName") or "")
        root = self.node_root(node) if node else None
        files: list[Path] = []
        if root is not None:
            files = log_files(pod_log_dir(root, namespace, name, pod_uid(pod)) / container)
        if previous:
            if len(files) < 2:
                raise errors.bad_request(
                    f'previous terminated container "{container}" in pod "{name}" not found'
                )
            path: Path | None = files[-2]
        else:
            path = files[-1] if files else None
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        if not follow:
            body = b""
            if path is not None:
                lines, _ = read_lines(path, tail)
                body = render(lines, timestamps=timestamps, since=since)
            if limit is not None:
                body = body[:limit]
            resp.content_length = len(body)
            await resp.prepare(request)
            await resp.write(body)
            await resp.write_eof()
            return resp
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0
        offset = 0
        first = True
        try:
            while True:
                if path is not None:
                    chunk, offset = _read_from(path, offset, tail if first else None)
                    first = False
                    if chunk:
                        body = render(chunk, timestamps=timestamps, since=since)
                        if limit is not None:
                            body = body[: max(0, limit - sent)]
                        if body:
                            await resp.write(body)
                            sent += len(body)
                        if limit is not None and sent >= limit:
                            break
                if not self.running(pod, container):
                    if path is not None:  # what the container wrote while it stopped
                        chunk, offset = _read_from(path, offset, None)
                        if chunk:
                            await resp.write(render(chunk, timestamps=timestamps, since=since))
                    break
                await asyncio.sleep(FOLLOW_POLL_SECONDS)
                if path is None and root is not None:
                    newest = log_files(pod_log_dir(root, namespace, name, pod_uid(pod)) / container)
                    path = newest[-1] if newest else None
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp


def _read_from(path: Path, offset: int, tail: int | None) -> tuple[list[bytes], int]:
    if offset == 0:
        return read_lines(path, tail)
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return [], offset
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(keepends=True), offset + end


def _since(seconds: str | None, time_text: str | None) -> bytes | None:
    """``sinceSeconds``/``sinceTime`` as a log timestamp prefix (same fixed width, so bytes compare in time order)."""
    when: dt.datetime | None = None
    n = _int_param(seconds, "sinceSeconds")
    if n is not None:
        when = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=n)
    elif time_text:
        try:
            when = dt.datetime.fromisoformat(time_text.replace("Z", "+00:00")).astimezone(dt.UTC)
        except ValueError:
            raise errors.bad_request(f"sinceTime: invalid value {time_text!r}") from None
    if when is None:
        return None
    return (when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond:06d}000Z").encode()


def _int_param(value: str | None, name: str) -> int | None:
    if value in (None, ""):
        return None
    try:
        n = int(value)
    except ValueError:
        raise errors.bad_request(f"{name}: invalid value {value!r}") from None
    if n < 0:
        raise errors.bad_request(f"{name}: must be greater than or equal to 0")
    return n
