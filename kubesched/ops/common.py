"""What the three commands share: connecting, one-line errors, times, Leases, and recognising schedulers.

A scheduler is recognised by what it runs, not by its name: a container (or a local process) whose command line
is ``kube-scheduler ...`` or ``kubesched scheduler ...``; its flags and its ``--config`` file (read from the
ConfigMap the pod mounts, or from the file when the process is on this machine) say which ``schedulerName``s it
serves and which Lease it contends for.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import re
import sys
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import yaml

from kubesched.client.config import ConfigError, load_config
from kubesched.client.rest import ApiClient, ApiError

Obj = dict[str, Any]
T = TypeVar("T")

DEFAULT_SCHEDULER = "default-scheduler"
DEFAULT_LEASE = ("kube-system", "kube-scheduler")
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODE_ROOT_ANNOTATION = "kubesched.io/node-root"  # the local cluster's control-plane nodes: their root folder
LOG_BYTES = 256 * 1024  # how much of a scheduler pod's log is read to find its leader-election identity


class OpsError(Exception):
    """A failure the user can act on; printed as one line, never as a traceback."""


# ---- running a command -------------------------------------------------------------------------------------


def add_connection_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", help="kubeconfig file (default: KUBECONFIG, in-cluster, ~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context to use (default: its current-context)")
    p.add_argument(
        "--request-timeout",
        type=float,
        default=15.0,
        metavar="SECONDS",
        help="timeout of each API request (15)",
    )


def connect(args: argparse.Namespace, qps: float = 20.0, burst: int = 40) -> ApiClient:
    """An API client for the cluster of ``--kubeconfig``/``--context`` only, rate-limited to ``qps``."""
    try:
        cfg = load_config(args.kubeconfig, None, args.context)
    except ConfigError as e:
        raise OpsError(str(e)) from None
    cfg = dataclasses.replace(cfg, qps=qps, burst=burst)
    return ApiClient(cfg, timeout=float(getattr(args, "request_timeout", 15.0)), max_retries=3)


def run_command(name: str, main: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run ``main()``; any failure becomes one line on stderr and exit status 1 (130 on Ctrl-C)."""
    try:
        return asyncio.run(main())
    except KeyboardInterrupt:
        print(f"kubesched {name}: interrupted", file=sys.stderr)
        return 130
    except OpsError as e:
        print(f"kubesched {name}: {e}", file=sys.stderr)
    except ApiError as e:
        print(
            f"kubesched {name}: the API server answered {e.status} {e.reason}: {e.message}", file=sys.stderr
        )
    except TimeoutError:
        print(f"kubesched {name}: the API server did not answer in time", file=sys.stderr)
    except Exception as e:  # transport errors (aiohttp, OSError): one line, as every other failure
        print(f"kubesched {name}: cannot talk to the API server: {type(e).__name__}: {e}", file=sys.stderr)
    return 1


async def list_items(client: ApiClient, api_version: str, plural: str, **kw: Any) -> list[Obj]:
    return list((await client.list_all(api_version, plural, **kw)).get("items") or [])


# ---- time -----------------------------------------------------------------------------------------------------

_FRACTION = re.compile(r"\.(\d+)")


def parse_time(text: str | None) -> float | None:
    """metav1.Time / MicroTime (RFC 3339) -> seconds since the epoch; None when absent or unreadable."""
    if not text:
        return None
    s = text.strip().replace("Z", "+00:00")
    m = _FRACTION.search(s)
    if m and len(m.group(1)) > 6:  # Python reads at most microseconds
        s = s[: m.start(1)] + m.group(1)[:6] + s[m.end(1) :]
    try:
        return datetime.fromisoformat(s).timestamp()
    except ValueError:
        return None


def ago(seconds: float | None) -> str:
    """``12s``, ``3m4s``, ``2h5m`` (and ``?`` for unknown)."""
    if seconds is None:
        return "?"
    s = max(0.0, seconds)
    if s < 10:
        return f"{s:.1f}s"
    if s < 60:
        return f"{s:.0f}s"
    if s < 3600:
        return f"{int(s // 60)}m{int(s % 60)}s"
    return f"{int(s // 3600)}h{int(s % 3600 // 60)}m"


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil(n*q/100), at least the first
    return ordered[int(min(rank, len(ordered))) - 1]


# ---- leases -----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaseInfo:
    namespace: str
    name: str
    holder: str
    acquire: float | None
    renew: float | None
    duration: float
    transitions: int

    @classmethod
    def from_object(cls, lease: Obj) -> LeaseInfo:
        meta, spec = lease.get("metadata") or {}, lease.get("spec") or {}
        return cls(
            namespace=meta.get("namespace") or "",
            name=meta.get("name") or "",
            holder=spec.get("holderIdentity") or "",
            acquire=parse_time(spec.get("acquireTime")),
            renew=parse_time(spec.get("renewTime")),
            duration=float(spec.get("leaseDurationSeconds") or 0),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def renewal_age(self, now: float) -> float | None:
        return None if self.renew is None else now - self.renew

    def fresh(self, now: float) -> bool:
        """Held and renewed within its duration (by the wall clocks of the writer and of this machine)."""
        age = self.renewal_age(now)
        return bool(self.holder) and age is not None and age <= self.duration


def split_lease(text: str) -> tuple[str, str]:
    ns, sep, name = text.partition("/")
    if not sep or not ns or not name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return ns, name


# ---- recognising schedulers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulerConfig:
    """What a scheduler's flags and configuration file say: the names it serves, the Lease it contends for."""

    kind: str  # "kube-scheduler" or "kubesched"
    names: tuple[str, ...] = (DEFAULT_SCHEDULER,)
    leader_elect: bool = True
    lease: tuple[str, str] = DEFAULT_LEASE
    config_known: bool = True  # False: a --config file we could not read (names and lease are defaults)

    @property
    def lease_key(self) -> str:
        return f"{self.lease[0]}/{self.lease[1]}"


@dataclass(frozen=True)
class SchedulerInstance:
    """A running scheduler: a pod's container, or a process on this machine."""

    where: str  # "pod ns/name" or "process 1234"
    config: SchedulerConfig
    namespace: str = ""
    pod: str = ""
    node: str = ""
    ready: bool = True
    static: bool = False  # a static (mirror) pod
    labels: Mapping[str, str] = dataclasses.field(default_factory=dict)


def _basename(token: str) -> str:
    return token.rsplit("/", 1)[-1]


def scheduler_kind(argv: Sequence[str], image: str = "") -> str | None:
    """``kube-scheduler`` / ``kubesched`` when ``argv`` (command + args) runs a scheduler, else None."""
    names = [_basename(t) for t in argv]
    for i, n in enumerate(names):
        if n == "kube-scheduler":
            return "kube-scheduler"
        if (n == "kubesched" or t_is_module(argv[i])) and "scheduler" in names[i + 1 :]:
            return "kubesched"
    image_name = _basename(image).split("@", 1)[0].split(":", 1)[0]
    # The kubesched image's entrypoint is `kubesched`: args alone (``scheduler ...``) name the subcommand.
    if image_name == "kubesched" and names and names[0] == "scheduler":
        return "kubesched"
    if image_name == "kube-scheduler" and not any(n == "kubesched" for n in names):
        return "kube-scheduler"
    return None


def t_is_module(token: str) -> bool:
    return token in ("kubesched.cli", "kubesched.__main__")


_BOOL_FLAGS = {"leader-elect"}


def parse_flags(argv: Sequence[str]) -> dict[str, str]:
    """``--name=value``, ``--name value`` and bare booleans, as pflag reads them (the last one wins)."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        tok = argv[i]
        i += 1
        if not tok.startswith("-") or tok in ("-", "--"):
            continue
        name = tok.lstrip("-")
        if "=" in name:
            key, _, value = name.partition("=")
            out[key] = value
        elif name in _BOOL_FLAGS or i >= len(argv) or argv[i].startswith("-"):
            out[name] = "true"
        else:
            out[name] = argv[i]
            i += 1
    return out


def config_from(kind: str, flags: Mapping[str, str], config_text: str | None) -> SchedulerConfig:
    """The names and Lease from a ``KubeSchedulerConfiguration`` (when given) and the leader-election flags.

    ``config_text`` None with ``--config`` set means the file could not be read: defaults, marked unknown."""
    names: tuple[str, ...] = (DEFAULT_SCHEDULER,)
    le: Mapping[str, Any] = {}
    known = True
    if flags.get("config"):
        if config_text is None:
            known = False
        else:
            try:
                doc = yaml.safe_load(config_text) or {}
            except yaml.YAMLError:
                doc, known = {}, False
            if isinstance(doc, dict):
                le = doc.get("leaderElection") or {}
                profiles = doc.get("profiles") or []
                got = tuple(
                    (p.get("schedulerName") or DEFAULT_SCHEDULER) for p in profiles if isinstance(p, dict)
                )
                names = got or names
    leader_elect = _truthy(le.get("leaderElect", True))
    ns = le.get("resourceNamespace") or DEFAULT_LEASE[0]
    name = le.get("resourceName") or DEFAULT_LEASE[1]
    # Explicit leader-election flags win over the file, as kube-scheduler applies them last.
    if "leader-elect" in flags:
        leader_elect = _truthy(flags["leader-elect"])
    ns = flags.get("leader-elect-resource-namespace") or ns
    name = flags.get("leader-elect-resource-name") or name
    return SchedulerConfig(kind, names, leader_elect, (ns, name), known)


def _truthy(v: Any) -> bool:
    return v if isinstance(v, bool) else str(v).strip().lower() not in ("false", "0", "no", "")


def container_argv(container: Obj) -> list[str]:
    return [str(t) for t in (container.get("command") or [])] + [
        str(t) for t in (container.get("args") or [])
    ]


def pod_ready(pod: Obj) -> bool:
    st = pod.get("status") or {}
    if st.get("phase") != "Running":
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])


def config_text_from_pod(
    pod: Obj, container: Obj, path: str, configmaps: Mapping[tuple[str, str], Obj]
) -> str | None:
    """The text of ``path`` inside ``container`` when a ConfigMap volume provides it (None otherwise)."""
    ns = (pod.get("metadata") or {}).get("namespace") or ""
    volumes = {v.get("name"): v for v in (pod.get("spec") or {}).get("volumes") or []}
    for m in container.get("volumeMounts") or []:
        mount = str(m.get("mountPath") or "").rstrip("/")
        vol = volumes.get(m.get("name")) or {}
        cm_ref = vol.get("configMap")
        if not cm_ref or not mount:
            continue
        if m.get("subPath"):
            key, exact = m["subPath"], path == mount
        else:
            key, exact = path[len(mount) + 1 :], path.startswith(mount + "/")
        if not exact:
            continue
        for item in cm_ref.get("items") or []:  # items: key -> path renames
            if item.get("path") == key:
                key = item.get("key")
        cm = configmaps.get((ns, cm_ref.get("name") or ""))
        data = (cm or {}).get("data") or {}
        if key in data:
            return str(data[key])
    return None


def schedulers_in_pods(
    pods: Iterable[Obj], configmaps: Mapping[tuple[str, str], Obj]
) -> list[SchedulerInstance]:
    """Every live pod container that runs a scheduler, with what its configuration says."""
    out: list[SchedulerInstance] = []
    for pod in pods:
        meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        if meta.get("deletionTimestamp") or (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        for c in spec.get("containers") or []:
            argv = container_argv(c)
            kind = scheduler_kind(argv, str(c.get("image") or ""))
            if kind is None:
                continue
            flags = parse_flags(argv)
            text = config_text_from_pod(pod, c, flags["config"], configmaps) if flags.get("config") else None
            out.append(
                SchedulerInstance(
                    where=f"pod {meta.get('namespace')}/{meta.get('name')}",
                    config=config_from(kind, flags, text),
                    namespace=meta.get("namespace") or "",
                    pod=meta.get("name") or "",
                    node=spec.get("nodeName") or "",
                    ready=pod_ready(pod),
                    static=MIRROR_ANNOTATION in (meta.get("annotations") or {}),
                    labels=dict(meta.get("labels") or {}),
                )
            )
            break
    return out


def _same_server(a: str, b: str) -> bool:
    ua, ub = urlsplit(a), urlsplit(b)
    return (ua.hostname, ua.port or 443) == (ub.hostname, ub.port or 443)


def local_scheduler_processes(server: str, proc: Path = Path("/proc")) -> list[SchedulerInstance]:
    """Scheduler processes on this machine that talk to ``server`` (read through /proc; best effort).

    Files are read through ``/proc/<pid>/root`` so a process in its own mount namespace (a local cluster's
    container) is read as it sees them. Processes we may not read are skipped."""
    out: list[SchedulerInstance] = []
    try:
        entries = [e for e in os.scandir(proc) if e.name.isdigit()]
    except OSError:
        return out
    for e in entries:
        try:
            argv = [
                t for t in (Path(e.path) / "cmdline").read_bytes().decode(errors="replace").split("\0") if t
            ]
        except OSError:
            continue
        kind = scheduler_kind(argv)
        if kind is None:
            continue
        flags = parse_flags(argv)
        target = _process_server(Path(e.path), flags)
        if target is None or not _same_server(target, server):
            continue
        text = _read_in_process(Path(e.path), flags["config"]) if flags.get("config") else None
        out.append(SchedulerInstance(where=f"process {e.name}", config=config_from(kind, flags, text)))
    return out


def _read_in_process(pdir: Path, path: str) -> str | None:
    full = pdir / "root" / path.lstrip("/") if path.startswith("/") else pdir / "cwd" / path
    try:
        return full.read_text()
    except OSError:
        return None


def _process_server(pdir: Path, flags: Mapping[str, str]) -> str | None:
    if flags.get("master"):
        return flags["master"]
    if flags.get("kubeconfig"):
        text = _read_in_process(pdir, flags["kubeconfig"])
        try:
            doc = yaml.safe_load(text or "") or {}
            return str(doc["clusters"][0]["cluster"]["server"])
        except (yaml.YAMLError, KeyError, IndexError, TypeError):
            return None
    try:
        env = dict(
            kv.split("=", 1)
            for kv in (pdir / "environ").read_bytes().decode(errors="replace").split("\0")
            if "=" in kv
        )
    except OSError:
        return None
    if env.get("KUBECONFIG"):
        return _process_server(pdir, {"kubeconfig": env["KUBECONFIG"].split(":")[0]})
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    return f"https://{host}:{port}" if host and port else None


async def scheduler_configmaps(client: ApiClient, pods: list[Obj]) -> dict[tuple[str, str], Obj]:
    """The ConfigMaps that scheduler pods mount (fetched one by one: a handful, not the whole cluster's)."""
    wanted: set[tuple[str, str]] = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        if not any(
            scheduler_kind(container_argv(c), str(c.get("image") or "")) for c in spec.get("containers") or []
        ):
            continue
        ns = (pod.get("metadata") or {}).get("namespace") or ""
        for v in spec.get("volumes") or []:
            if (v.get("configMap") or {}).get("name"):
                wanted.add((ns, v["configMap"]["name"]))
    out: dict[tuple[str, str], Obj] = {}
    for ns, name in sorted(wanted)[:50]:
        try:
            out[(ns, name)] = await client.get("v1", "configmaps", name, namespace=ns)
        except ApiError:
            pass
    return out


# ---- identities ------------------------------------------------------------------------------------------------


def identity_host(identity: str) -> str:
    """The hostname part of a ``<hostname>_<uuid>`` leader-election identity."""
    return identity.rsplit("_", 1)[0] if "_" in identity else identity


async def pod_log_head(client: ApiClient, namespace: str, name: str) -> str:
    """The start of a pod's log (bounded), or "" when it cannot be read."""
    try:
        text = await client.raw_request(
            "GET",
            f"/api/v1/namespaces/{namespace}/pods/{name}/log",
            params={"limitBytes": str(LOG_BYTES)},
        )
    except Exception:
        return ""
    return text if isinstance(text, str) else ""


async def identity_owner(
    client: ApiClient, identity: str, candidates: Sequence[SchedulerInstance]
) -> SchedulerInstance | None:
    """The scheduler pod behind a Lease holder identity.

    kube-scheduler's identity is ``<hostname>_<uuid>``: the pod's name, or its node's with hostNetwork. When the
    hostname names no single candidate (processes sharing one host), the pods' logs are searched for the
    identity (kubesched logs ``candidate <identity> for the leader lease ...``)."""
    if not identity:
        return None
    host = identity_host(identity)
    by_pod = [c for c in candidates if c.pod and c.pod == host]
    if len(by_pod) == 1:
        return by_pod[0]
    by_node = [c for c in candidates if c.node and c.node == host]
    if len(by_node) == 1:
        return by_node[0]
    logs = await asyncio.gather(*(pod_log_head(client, c.namespace, c.pod) for c in candidates if c.pod))
    with_pod = [c for c in candidates if c.pod]
    hits = [c for c, text in zip(with_pod, logs, strict=True) if _names_itself(text, identity)]
    return hits[0] if len(hits) == 1 else None


def _names_itself(log: str, identity: str) -> bool:
    """The log shows ``identity`` as its own: every replica also logs the leader it sees ("new leader elected:
    <identity>"), so only a line that is not about another leader counts."""
    if f"candidate {identity} " in log:
        return True
    return any(
        identity in line and "leader elected" not in line and "new leader" not in line
        for line in log.splitlines()
    )


def now() -> float:
    return time.time()
