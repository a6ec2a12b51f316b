"""Container probes (startup, liveness, readiness) with upstream's fields and semantics.

``ProbeTracker`` is the pure part (when a probe is due, what consecutive results mean) so it is tested with a
fake clock; ``run_probe`` performs one ``httpGet`` (HTTP or HTTPS, certificates not verified, as the kubelet),
``tcpSocket`` or ``exec`` check.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]

MAX_PROBE_BODY = 10 * 1024


@dataclass(frozen=True)
class ProbeSpec:
    kind: str  # "startup", "liveness" or "readiness"
    action: Obj  # the probe dict (httpGet / tcpSocket / exec / grpc and the timing fields)
    initial_delay: float = 0.0
    period: float = 10.0
    timeout: float = 1.0
    success_threshold: int = 1
    failure_threshold: int = 3

    @classmethod
    def from_container(cls, container: Obj, kind: str) -> ProbeSpec | None:
        p = container.get(f"{kind}Probe")
        if not isinstance(p, dict):
            return None
        return cls(
            kind=kind,
            action=p,
            initial_delay=float(p.get("initialDelaySeconds") or 0),
            period=float(p.get("periodSeconds") or 10),
            timeout=float(p.get("timeoutSeconds") or 1),
            # Upstream: liveness and startup must use 1; readiness may ask for more.
            success_threshold=int(p.get("successThreshold") or 1) if kind == "readiness" else 1,
            failure_threshold=int(p.get("failureThreshold") or 3),
        )


class ProbeTracker:
    """One probe of one container run: when it is due and what its results add up to.

    ``result`` is the verdict the kubelet acts on: readiness and startup start as failing (not ready, not
    started), liveness as passing; it flips after ``success_threshold`` consecutive successes or
    ``failure_threshold`` consecutive failures.
    """

    def __init__(self, spec: ProbeSpec, started_at: float) -> None:
        self.spec = spec
        self.next_at = started_at + spec.initial_delay
        self.result = spec.kind == "liveness"
        self._successes = 0
        self._failures = 0

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, ok: bool, now: float) -> bool:
        """Take one result; returns True when the verdict changed."""
        self.next_at = now + self.spec.period
        before = self.result
        if ok:
            self._successes += 1
            self._failures = 0
            if self._successes >= self.spec.success_threshold:
                self.result = True
        else:
            self._failures += 1
            self._successes = 0
            if self._failures >= self.spec.failure_threshold:
                self.result = False
        return self.result != before

    @property
    def failures(self) -> int:
        return self._failures


def resolve_port(port: Any, container: Obj) -> int:
    """An int port, or a named one from the container's ``ports``."""
    if isinstance(port, int):
        return port
    text = str(port)
    if text.isdigit():
        return int(text)
    for p in container.get("ports") or []:
        if p.get("name") == text:
            return int(p["containerPort"])
    raise ValueError(f"port {text!r} is not a port number or a named port of the container")


async def run_probe(
    action: Obj,
    *,
    pod_ip: str,
    container: Obj,
    timeout: float,
    exec_prefix: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
) -> tuple[bool, str]:
    """Run one probe: (success, message). ``exec_prefix`` enters the container's mount namespace."""
    try:
        if "httpGet" in action:
            return await asyncio.wait_for(_http_get(action["httpGet"], pod_ip, container), timeout)
        if "tcpSocket" in action:
            t = action["tcpSocket"]
            host = t.get("host") or pod_ip
            port = resolve_port(t.get("port"), container)
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout)
            writer.close()
            return True, ""
        if "exec" in action:
            return await _exec((action["exec"] or {}).get("command") or [], timeout, exec_prefix, env)
        if "grpc" in action:
            return False, "grpc probes are not supported by the kubesched kubelet"
        return False, "probe has no handler (httpGet, tcpSocket or exec)"
    except TimeoutError:
        return False, f"probe timed out after {timeout:g}s"
    except (OSError, ValueError) as e:
        return False, str(e)


async def _http_get(h: Obj, pod_ip: str, container: Obj) -> tuple[bool, str]:
    scheme = str(h.get("scheme") or "HTTP").upper()
    host = h.get("host") or pod_ip
    port = resolve_port(h.get("port"), container)
    path = h.get("path") or "/"
    if not path.startswith("/"):
        path = "/" + path
    ctx: ssl.SSLContext | None = None
    if scheme == "HTTPS":
        # As the kubelet: HTTPS probes do not verify the serving certificate.
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    reader, writer = await asyncio.open_connection(host, port, ssl=ctx)
    try:
        headers = {
            "Host": f"{host}:{port}",
            "User-Agent": "kube-probe/1.36",
            "Accept": "*/*",
            "Connection": "close",
        }
        for hh in h.get("httpHeaders") or []:
            headers[str(hh.get("name"))] = str(hh.get("value", ""))
        request = f"GET {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
        writer.write(request.encode())
        await writer.drain()
        status_line = await reader.readline()
        parts = status_line.decode("latin-1").split(" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            return False, f"malformed HTTP response: {status_line[:80]!r}"
        code = int(parts[1])
        if 200 <= code < 400:
            return True, ""
        body = await reader.read(MAX_PROBE_BODY)
        return False, f"HTTP probe failed with statuscode: {code}" + (f" ({body[-200:]!r})" if body else "")
    finally:
        writer.close()


async def _exec(
    command: Sequence[str], timeout: float, prefix: Sequence[str], env: Mapping[str, str] | None
) -> tuple[bool, str]:
    if not command:
        return False, "exec probe has no command"
    proc = await asyncio.create_subprocess_exec(
        *prefix,
        *command,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        env=dict(env) if env is not None else None,
    )
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        return False, f"command timed out after {timeout:g}s"
    if proc.returncode == 0:
        return True, ""
    return False, f"command exited with {proc.returncode}: {out.decode(errors='replace')[-200:].strip()}"
