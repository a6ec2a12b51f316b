"""The kubelet of the control-plane nodes: pods of the kubesched image run as real local processes.

Which pods: the static pods in each control-plane node's manifest folder (``static.py``), and API pods bound to a
control-plane node whose containers all use the process image (``kubesched`` by default). Every other pod, on any
node, stays with the simulated kubelet (``SimulatedKubelets.claim`` asks ``ProcessKubelets.claims``).

A container is ``sys.executable -m kubesched.cli <command[1:]> <args>`` when its command is empty or names
``kubesched`` (the image's entrypoint), else its command as given, started through ``launch.py`` in its own
session (and, where the machine allows, its own mount namespace with the pod's volumes mounted at their paths).
Its output goes to the node's ``var/log/pods``; it is restarted per ``restartPolicy`` with upstream's crash-loop
back-off; startup, liveness and readiness probes run as upstream. Status (container states, restart counts,
``lastState``, ``Ready``, phase) is written to the API in-process, as the simulated kubelet does. Static pods are
published as mirror pods (annotation ``kubernetes.io/config.mirror``, owned by their Node), recreated if deleted.

Stopping: SIGTERM to the process group, SIGKILL after the grace period; the launcher also asks the kernel to kill
the container if the cluster process dies, so nothing outlives the cluster.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.cluster import errors
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.auth.tokens import BoundObject, TokenIssuer
from kubesched.cluster.background import cancel_and_wait
from kubesched.cluster.kubelet import static, volumes
from kubesched.cluster.kubelet.backoff import CrashLoopBackoff
from kubesched.cluster.kubelet.logs import LogWriter, container_log_path
from kubesched.cluster.kubelet.probes import ProbeSpec, ProbeTracker, run_probe
from kubesched.cluster.resources import ResourceType

log = logging.getLogger("kubesched.kubelet.runtime")

Obj = dict[str, Any]

CONTROL_PLANE_LABEL = "node-role.kubernetes.io/control-plane"
DEFAULT_PROCESS_IMAGE = "kubesched"
SHUTDOWN_GRACE_CAP = 5.0  # seconds a container gets when the whole cluster stops
VOLUME_RETRY_SECONDS = 2.0
MOUNTS_CONDITION = "kubesched.io/VolumesMounted"


@dataclass(frozen=True)
class ProcessNode:
    """A node whose pods run as processes: its name, root folder and loopback InternalIP."""

    name: str
    root: Path
    ip: str

    @property
    def manifests(self) -> Path:
        return self.root / "etc" / "kubernetes" / "manifests"

    def make_folders(self) -> None:
        for rel in (
            "etc/kubernetes/manifests",
            "etc/kubernetes/static-pod-resources",
            "var/log/pods",
            "var/lib/kubelet/pods",
        ):
            (self.root / rel).mkdir(parents=True, exist_ok=True)


@dataclass
class RuntimeOptions:
    process_image: str = DEFAULT_PROCESS_IMAGE
    api_host: str = "127.0.0.1"
    api_port: int = 6443
    ca_pem: bytes = b""
    # The projected service-account token: (namespace, SA, audiences, seconds, pod) -> (token, expiry).
    token: volumes.TokenSource | None = None
    manifest_interval: float = 0.5
    use_namespaces: bool | None = None  # None: detect once at start
    backoff_factory: Callable[[], CrashLoopBackoff] = field(default=CrashLoopBackoff)


def image_name(image: str) -> str:
    """``registry.example/kubesched:v1`` -> ``kubesched``."""
    last = image.rsplit("/", 1)[-1]
    return last.split("@", 1)[0].split(":", 1)[0]


# What a process container runs from: the interpreter, the venv and kubesched's own folder. Bound back in the
# container's mount namespace if one of its volumes covers them (an emptyDir at /tmp with a venv under /tmp).
INSTALLATION: list[str] = sorted(
    {sys.prefix, sys.base_prefix, str(Path(__file__).resolve().parents[3])}, key=len
)


def mount_namespaces_available() -> bool:
    """Whether the launcher can enter a private mount namespace here (root, or a kernel that allows it)."""
    try:
        r = subprocess.run(
            [sys.executable, "-m", "kubesched.cluster.kubelet.launch", "--check"],
            capture_output=True,
            timeout=20,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


def command_for(container: Obj, env: dict[str, str]) -> list[str]:
    """The argv of a container of the kubesched image: ``command`` replaces the entrypoint, ``args`` follow."""
    command = [volumes.expand(str(c), env) for c in container.get("command") or []]
    args = [volumes.expand(str(a), env) for a in container.get("args") or []]
    if not command:
        command = ["kubesched"]
    if command[0] == "kubesched" or command[0].endswith("/kubesched"):
        return [sys.executable, "-m", "kubesched.cli", *command[1:], *args]
    return [*command, *args]


class ProcessKubelets:
    """The process-running kubelets of all control-plane nodes, on the cluster's event loop."""

    def __init__(self, api: ClusterApi, nodes: list[ProcessNode], options: RuntimeOptions) -> None:
        self.api = api
        self.options = options
        self.nodes = {n.name: n for n in nodes}
        self.backoff = options.backoff_factory()
        self.namespaces = bool(options.use_namespaces)
        self._pods_t = api.rtype("", "v1", "pods")
        self._nodes_t = api.rtype("", "v1", "nodes")
        self._events_t = api.rtype("", "v1", "events")
        self._workers: dict[tuple[str, str], PodWorker] = {}
        self._static: dict[str, dict[tuple[str, str], static.StaticPod]] = {n: {} for n in self.nodes}
        self._folders = {
            n.name: static.ManifestFolder(n.manifests, n.name, self._manifest_error(n.name)) for n in nodes
        }
        self._tasks: list[asyncio.Task[None]] = []
        self._stopping = False
        self._background: set[asyncio.Task[None]] = set()
        self.namespaces_known = asyncio.Event()
        for n in nodes:
            n.make_folders()
        api.observers.append(self._observe)

    # -- what is ours ------------------------------------------------------------------------------------------

    def claims(self, pod: Obj) -> bool:
        """Pods of the process image bound to one of our nodes (static pods' mirrors included)."""
        spec = pod.get("spec") or {}
        if spec.get("nodeName") not in self.nodes:
            return False
        containers = spec.get("containers") or []
        image = self.options.process_image
        return bool(containers) and all(image_name(str(c.get("image", ""))) == image for c in containers)

    def node_root(self, name: str) -> Path | None:
        n = self.nodes.get(name)
        return n.root if n is not None else None

    def container_running(self, pod: Obj, container: str) -> bool:
        meta = pod.get("metadata") or {}
        w = self._workers.get((meta.get("namespace", ""), meta.get("name", "")))
        if w is None:
            return False
        c = w.containers.get(container) or w.init_containers.get(container)
        return c is not None and c.proc is not None and c.proc.returncode is None

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def start(self) -> None:
        if self.options.use_namespaces is None:
            self._spawn(self._detect_namespaces())
        else:
            self.namespaces_known.set()
        items, _ = self.api.store.list(self._pods_t.storage_key)
        for st in items:
            self._observe(self._pods_t, "ADDED", st.obj, None)
        self._sync_manifests()
        self._tasks.append(asyncio.create_task(self._manifest_loop(), name="kubelet-manifests"))

    async def _detect_namespaces(self) -> None:
        # A launcher process, off the start-up path (cluster up --nodes 5000 must not wait for it).
        self.namespaces = await asyncio.to_thread(mount_namespaces_available)
        if not self.namespaces:
            log.warning(
                "mount namespaces are not available (not root?): volumes of process pods are not mounted at "
                "their paths; pods that need them get a VolumesNotMounted event and %s=False",
                MOUNTS_CONDITION,
            )
        self.namespaces_known.set()

    async def stop(self) -> None:
        self._stopping = True
        await cancel_and_wait(self._tasks)
        self._tasks = []
        workers = list(self._workers.values())
        self._workers.clear()
        await asyncio.gather(*(w.stop(SHUTDOWN_GRACE_CAP) for w in workers), return_exceptions=True)

    # -- static pods ---------------------------------------------------------------------------------------------

    async def _manifest_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.manifest_interval)
            try:
                self._sync_manifests()
            except Exception:  # one bad folder must not stop the kubelet
                log.exception("static pod sync")

    def _sync_manifests(self) -> None:
        for node, folder in self._folders.items():
            new = folder.scan()
            changes = static.diff(self._static[node], new)
            self._static[node] = new
            for sp in changes.removed:
                self._spawn(self._replace_static(sp, None))
            for old, sp in changes.changed:
                self._spawn(self._replace_static(old, sp))
            for sp in changes.added:
                self._start_worker(self.nodes[node], sp.pod, sp)

    async def _replace_static(self, old: static.StaticPod, new: static.StaticPod | None) -> None:
        w = self._workers.get(old.key)
        if w is not None and w.uid == old.uid:
            del self._workers[old.key]
            await w.stop(w.grace())
            w.delete_mirror()
        if new is not None and not self._stopping:
            node = self.nodes[str(new.pod["spec"]["nodeName"])]
            self._start_worker(node, new.pod, new)

    def _manifest_error(self, node: str) -> Callable[[str, str], None]:
        def report(file: str, message: str) -> None:
            log.warning("static pod manifest %s on node %s skipped: %s", file, node, message)
            st = self.api.store.get(self._nodes_t.storage_key, ("", node))
            ref = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node}
            if st is not None:
                ref["uid"] = st.obj["metadata"].get("uid", node)
            self.event(ref, "default", node, "Warning", "FailedStaticPodManifest", f"{file}: {message}")

        return report

    # -- API pods ------------------------------------------------------------------------------------------------

    def _observe(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        if rtype is not self._pods_t:
            return
        obj = new if new is not None else old
        if obj is None or (obj.get("spec") or {}).get("nodeName") not in self.nodes:
            return
        meta = obj.get("metadata") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        annotations = meta.get("annotations") or {}
        mirror = annotations.get(static.CONFIG_MIRROR)
        w = self._workers.get(key)
        loop = asyncio.get_event_loop()
        if mirror is not None:
            # A mirror pod only reflects a static pod: deleting it completes at once; we publish it again.
            if w is None or w.uid != mirror:
                return
            if etype == "DELETED":
                w.mirror_uid = None
                loop.call_soon(w.publish)
            elif meta.get("deletionTimestamp"):
                loop.call_soon(self.api.finish_graceful_delete, self._pods_t, key[0], key[1])
            return
        if not self.claims(obj):
            return
        uid = str(meta.get("uid", ""))
        if etype == "DELETED":
            if w is not None and w.uid == uid:
                del self._workers[key]
                self._spawn(w.stop(0))
            return
        if meta.get("deletionTimestamp"):
            if w is not None and w.uid == uid and not w.terminating:
                w.terminating = True
                grace = float(meta.get("deletionGracePeriodSeconds") or 0)
                self._spawn(self._terminate(w, grace))
            elif w is None:
                loop.call_soon(self.api.finish_graceful_delete, self._pods_t, key[0], key[1])
            return
        if (
            w is None
            and not self._stopping
            and (obj.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
        ):
            self._start_worker(self.nodes[obj["spec"]["nodeName"]], obj, None)

    async def _terminate(self, w: PodWorker, grace: float) -> None:
        await w.stop(grace)
        if self._workers.get(w.key) is w:
            del self._workers[w.key]
        self.api.finish_graceful_delete(self._pods_t, w.key[0], w.key[1])
        volumes.remove_pod_dir(w.node.root, w.uid)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_event_loop().create_task(coro)
        self._background.add(task)  # kept referenced until done
        task.add_done_callback(self._background.discard)

    def _start_worker(self, node: ProcessNode, pod: Obj, sp: static.StaticPod | None) -> None:
        w = PodWorker(self, node, pod, sp)
        self._workers[w.key] = w
        w.start()

    # -- helpers for the workers --------------------------------------------------------------------------------

    def get_object(self, plural: str, namespace: str, name: str) -> Obj | None:
        st = self.api.store.get(f"/{plural}", (namespace, name))
        return st.obj if st is not None else None

    def event(self, ref: Obj, namespace: str, node: str, etype: str, reason: str, message: str) -> None:
        ts = now_rfc3339()
        body = {
            "metadata": {"name": f"{ref.get('name')}.{secrets.token_hex(8)}", "namespace": namespace},
            "involvedObject": ref,
            "reason": reason,
            "message": message,
            "type": etype,
            "source": {"component": "kubelet", "host": node},
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
            "reportingComponent": "kubelet",
            "reportingInstance": node,
        }
        try:
            self.api.create(self._events_t, body, namespace)
        except errors.ApiError as e:
            log.debug("event %s not recorded: %s", reason, e.message)


class ContainerRun:
    """One container of a pod: its process, its restarts, its probes and the status it reports."""

    def __init__(self, worker: PodWorker, spec: Obj, *, init: bool = False) -> None:
        self.worker = worker
        self.spec = spec
        self.init = init  # an init container: runs to completion before the others
        self.name = str(spec.get("name"))
        self.proc: asyncio.subprocess.Process | None = None
        self.restart_count = 0
        self.state: Obj = {"waiting": {"reason": "ContainerCreating"}}
        self.last_state: Obj = {}
        self.ready = False
        self.started = False
        self.container_id = ""
        self.killed_reason = ""  # why the kubelet killed the process ("" = it exited by itself)
        self._stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    @property
    def backoff_key(self) -> tuple[str, str]:
        return (self.worker.uid, self.name)

    def status(self) -> Obj:
        image = str(self.spec.get("image", ""))
        out: Obj = {
            "name": self.name,
            "state": self.state,
            "lastState": self.last_state,
            "ready": self.ready,
            "started": self.started,
            "restartCount": self.restart_count,
            "image": image,
            "imageID": f"kubesched://{image}",
        }
        if self.container_id:
            out["containerID"] = self.container_id
        if self.init:
            out["ready"] = self.succeeded
            out["started"] = "running" in self.state
        return out

    @property
    def succeeded(self) -> bool:
        return bool(self.state.get("terminated", {}).get("exitCode") == 0)

    async def run(self) -> None:
        w = self.worker
        policy = str((w.pod.get("spec") or {}).get("restartPolicy") or "Always")
        if self.init and policy == "Always":
            policy = "OnFailure"  # as upstream: an init container that succeeded is done
        backoff = w.kubelet.backoff
        first = True
        while not self._stop.is_set():
            if not first:
                delay = backoff.delay(self.backoff_key)
                if delay > 0:
                    message = f"back-off {delay:.0f}s restarting failed container={self.name} pod={w.key[1]}_{w.key[0]}({w.uid})"
                    self.state = {"waiting": {"reason": "CrashLoopBackOff", "message": message}}
                    w.publish()
                    w.event(
                        "Warning",
                        "BackOff",
                        f"Back-off restarting failed container {self.name} in pod {w.key[1]}_{w.key[0]}({w.uid})",
                        self.name,
                    )
                    if await self._sleep(delay):
                        return
                backoff.restarted(self.backoff_key)
                self.restart_count += 1
            first = False
            try:
                argv, env = w.command_and_env(self.spec)
            except volumes.VolumeError as e:
                self.state = {"waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
                w.publish()
                w.event("Warning", "Failed", f"Error: {e}", self.name)
                first = True  # a configuration error is retried, not counted as a restart
                if await self._sleep(VOLUME_RETRY_SECONDS):
                    return
                continue
            rc = await self._run_once(argv, env)
            if rc is None:
                return  # stopped by the kubelet
            restart = policy == "Always" or (policy == "OnFailure" and rc != 0)
            if not restart:
                return

    async def _sleep(self, seconds: float) -> bool:
        """Sleep; True if the container is being stopped."""
        try:
            await asyncio.wait_for(self._stop.wait(), seconds)
            return True
        except TimeoutError:
            return False

    async def _run_once(self, argv: list[str], env: dict[str, str]) -> int | None:
        w = self.worker
        node = w.node
        log_path = container_log_path(node.root, w.key[0], w.key[1], w.uid, self.name, self.restart_count)
        spec_path = (
            volumes.pod_dir(node.root, w.uid) / "containers" / f"{self.name}-{self.restart_count}.json"
        )
        spec_path.parent.mkdir(parents=True, exist_ok=True)
        mounts = w.mounts.get(self.name, []) if w.kubelet.namespaces else []
        launch = {
            "argv": argv,
            "mounts": mounts,
            "scratch": str(volumes.pod_dir(node.root, w.uid) / "scratch" / self.name),
            "cwd": self.spec.get("workingDir") or "",
            "kubelet_pid": os.getpid(),
            # Namespaces need root, as the mounts do; without them the process keeps the machine's name.
            "hostname": env.get("HOSTNAME", "") if w.kubelet.namespaces else "",
            "keep": INSTALLATION,
        }
        spec_path.write_text(json.dumps(launch))
        writer = LogWriter(log_path)
        started_at = now_rfc3339()
        self.killed_reason = ""
        try:
            proc = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "kubesched.cluster.kubelet.launch",
                str(spec_path),
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            writer.close()
            self.state = {"waiting": {"reason": "RunContainerError", "message": str(e)}}
            w.publish()
            return 128
        self.proc = proc
        self.container_id = f"kubesched://{proc.pid}"
        self.state = {"running": {"startedAt": started_at}}
        probes = {k: ProbeSpec.from_container(self.spec, k) for k in ("startup", "liveness", "readiness")}
        self.started = probes["startup"] is None
        self.ready = self.started and probes["readiness"] is None
        w.publish()
        w.event("Normal", "Started", f"Started container {self.name}", self.name)
        assert proc.stdout is not None and proc.stderr is not None
        pumps = [
            asyncio.create_task(_pump(proc.stdout, "stdout", writer)),
            asyncio.create_task(_pump(proc.stderr, "stderr", writer)),
        ]
        prober = asyncio.create_task(self._probe_loop(probes, env))
        rc = await proc.wait()
        prober.cancel()
        try:
            await asyncio.wait_for(asyncio.gather(*pumps), 2.0)
        except (TimeoutError, asyncio.CancelledError):
            for p in pumps:
                p.cancel()
        writer.close()
        finished_at = now_rfc3339()
        exit_code = rc if rc >= 0 else 128 - rc  # killed by signal N: 128+N, as container runtimes report
        reason = "Completed" if exit_code == 0 else "Error"
        terminated: Obj = {
            "exitCode": exit_code,
            "reason": reason,
            "startedAt": started_at,
            "finishedAt": finished_at,
            "containerID": self.container_id,
        }
        if rc < 0:
            terminated["signal"] = -rc
        self.proc = None
        self.ready = False
        self.last_state = {"terminated": terminated}
        self.state = {"terminated": terminated}
        w.publish()
        if self._stop.is_set():
            return None
        return exit_code

    async def _probe_loop(self, probes: dict[str, ProbeSpec | None], env: dict[str, str]) -> None:
        loop = asyncio.get_running_loop()
        start = loop.time()
        w = self.worker
        trackers = {k: ProbeTracker(s, start) for k, s in probes.items() if s is not None}
        if not trackers:
            return
        prefix: list[str] = []
        if w.kubelet.namespaces and self.proc is not None and w.mounts.get(self.name):
            prefix = ["nsenter", f"--target={self.proc.pid}", "--mount", "--"]
        while self.proc is not None:
            active = [t for k, t in trackers.items() if (k == "startup") != self.started]
            if not active:
                return
            now = loop.time()
            wait = min(t.next_at for t in active) - now
            if wait > 0:
                await asyncio.sleep(wait)
                continue
            for t in active:
                if not t.due(loop.time()):
                    continue
                kind = t.spec.kind
                ok, message = await run_probe(
                    t.spec.action,
                    pod_ip=w.node.ip,
                    container=self.spec,
                    timeout=t.spec.timeout,
                    exec_prefix=prefix,
                    env=env,
                )
                if self.proc is None:
                    return
                changed = t.record(ok, loop.time())
                if not ok:
                    w.event("Warning", "Unhealthy", f"{kind.capitalize()} probe failed: {message}", self.name)
                if not changed:
                    continue
                if kind == "readiness":
                    self.ready = t.result
                    w.publish()
                elif kind == "startup" and t.result:
                    self.started = True
                    self.ready = "readiness" not in trackers
                    for other in trackers.values():  # liveness and readiness start counting now
                        if other is not t:
                            other.next_at = loop.time() + other.spec.initial_delay
                    w.publish()
                elif not t.result:  # liveness or startup failed: restart the container
                    verb = "liveness" if kind == "liveness" else "startup"
                    w.event(
                        "Normal",
                        "Killing",
                        f"Container {self.name} failed {verb} probe, will be restarted",
                        self.name,
                    )
                    self.killed_reason = verb
                    await self.kill(w.grace(), stopping=False)
                    return

    async def kill(self, grace: float, *, stopping: bool = True) -> None:
        if stopping:
            self._stop.set()
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), max(grace, 0.0))
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)
            await proc.wait()
        else:
            _signal_group(proc.pid, signal.SIGKILL)  # anything the container left behind in its group


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _pump(stream: asyncio.StreamReader, name: str, writer: LogWriter) -> None:
    while True:
        data = await stream.read(65536)
        if not data:
            return
        writer.write(name, data)


class PodWorker:
    """One pod on a process node: volumes, its containers, and the status it publishes."""

    def __init__(
        self, kubelet: ProcessKubelets, node: ProcessNode, pod: Obj, sp: static.StaticPod | None
    ) -> None:
        self.kubelet = kubelet
        self.node = node
        self.static = sp
        self.pod = volumes.with_default_service_account_volume(pod, static=sp is not None)
        meta = self.pod["metadata"]
        self.key: tuple[str, str] = (str(meta.get("namespace") or "default"), str(meta["name"]))
        self.uid = sp.uid if sp is not None else str(meta.get("uid", ""))
        self.mirror_uid: str | None = None
        self.terminating = False
        # A static pod of another image is only published (its mirror pod); the simulated kubelet "runs" it.
        self.runs_processes = kubelet.claims(self.pod)
        self.containers = {
            str(c.get("name")): ContainerRun(self, c) for c in self.pod["spec"].get("containers") or []
        }
        self.init_containers = {
            str(c.get("name")): ContainerRun(self, c, init=True)
            for c in self.pod["spec"].get("initContainers") or []
        }
        self.initialized = not self.init_containers
        self.init_failed = False
        self.mounts: dict[str, list[Obj]] = {}
        self.start_time = now_rfc3339()
        self.volumes_ready = False
        self.unsupported: list[str] = []
        self._publish_pending = False
        self._task: asyncio.Task[None] | None = None
        self._refresh_at: float | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"pod-{self.key[0]}/{self.key[1]}"
        )

    def grace(self) -> float:
        g = (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds")
        return float(30 if g is None else g)

    async def _run(self) -> None:
        self.publish()
        if not self.runs_processes:
            return
        await self.kubelet.namespaces_known.wait()
        while True:
            if self._prepare_volumes():
                break
            await asyncio.sleep(VOLUME_RETRY_SECONDS)
        for ic in self.init_containers.values():  # one after the other, each to completion
            ic.task = asyncio.get_running_loop().create_task(ic.run())
            await ic.task
            if not ic.succeeded:
                self.init_failed = True  # restartPolicy Never: the pod fails
                self.publish()
                return
        self.initialized = True
        for c in self.containers.values():
            c.task = asyncio.get_running_loop().create_task(c.run())
        loop = asyncio.get_running_loop()
        while any(c.task is not None and not c.task.done() for c in self.containers.values()):
            await asyncio.sleep(1.0)
            if self._refresh_at is not None and loop.time() >= self._refresh_at:
                self._prepare_volumes()  # rotate tokens, follow ConfigMaps and Secrets
        self.publish()

    def _prepare_volumes(self) -> bool:
        ctx = volumes.VolumeContext(
            node_root=self.node.root,
            get_object=self.kubelet.get_object,
            token=self.kubelet.options.token or _no_token,
            ca_pem=self.kubelet.options.ca_pem,
        )
        try:
            prepared = volumes.prepare(self.pod, self.uid, ctx)
            self.mounts = {
                name: volumes.container_mounts(c.spec, prepared.paths)
                for name, c in (*self.init_containers.items(), *self.containers.items())
            }
        except (volumes.VolumeError, OSError) as e:
            if not self.volumes_ready:
                self.event("Warning", "FailedMount", f"MountVolume.SetUp failed: {e}")
            log.warning("pod %s/%s: %s", *self.key, e)
            return False
        self._refresh_at = prepared.refresh_at
        if not self.volumes_ready:
            self.volumes_ready = True
            if not self.kubelet.namespaces:
                self.unsupported = sorted({m["target"] for ms in self.mounts.values() for m in ms})
                if self.unsupported:
                    self.event(
                        "Warning",
                        "VolumesNotMounted",
                        "no mount namespace on this machine (run the cluster as root): not mounted at "
                        + ", ".join(self.unsupported),
                    )
            self.publish()
        return True

    def command_and_env(self, container: Obj) -> tuple[list[str], dict[str, str]]:
        opts = self.kubelet.options
        pod = self.current_pod()
        spec = pod.get("spec") or {}
        base = {
            "PATH": os.environ.get("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
            "HOSTNAME": self.node.name if spec.get("hostNetwork") else self.key[1],
            "KUBERNETES_SERVICE_HOST": opts.api_host,
            "KUBERNETES_SERVICE_PORT": str(opts.api_port),
            "KUBERNETES_SERVICE_PORT_HTTPS": str(opts.api_port),
            "KUBERNETES_PORT": f"tcp://{opts.api_host}:{opts.api_port}",
        }
        for k in ("LANG", "LC_ALL", "TZ"):
            if k in os.environ:
                base[k] = os.environ[k]
        env = volumes.container_env(pod, container, base, self.kubelet.get_object)
        argv = command_for(container, env)
        if argv[:3] == [sys.executable, "-m", "kubesched.cli"]:
            env.setdefault(
                "PYTHONUNBUFFERED", "1"
            )  # a pipe would otherwise hold back output kubectl logs shows
        return argv, env

    def current_pod(self) -> Obj:
        """The pod as the API has it (for the downward API: uid, podIP), else as we know it."""
        st = self.kubelet.api.store.get(self.kubelet._pods_t.storage_key, self.key)
        pod = dict(st.obj) if st is not None else dict(self.pod)
        pod["spec"] = self.pod["spec"]
        status = dict(pod.get("status") or {})
        status.setdefault("hostIP", self.node.ip)
        status.setdefault("podIP", self.node.ip)
        pod["status"] = status
        return pod

    async def stop(self, grace: float) -> None:
        runs = [*self.init_containers.values(), *self.containers.values()]
        await asyncio.gather(*(c.kill(grace) for c in runs))
        tasks = [c.task for c in runs if c.task is not None]
        if self._task is not None:
            self._task.cancel()
            tasks.append(self._task)
        for t in tasks:
            try:
                await t
            except (asyncio.CancelledError, Exception):
                pass

    def event(self, etype: str, reason: str, message: str, container: str | None = None) -> None:
        st = self.kubelet.api.store.get(self.kubelet._pods_t.storage_key, self.key)
        ref: Obj = {"apiVersion": "v1", "kind": "Pod", "namespace": self.key[0], "name": self.key[1]}
        if st is not None:
            ref["uid"] = st.obj["metadata"].get("uid", "")
        if container:
            ref["fieldPath"] = f"spec.containers{{{container}}}"
        self.kubelet.event(ref, self.key[0], self.node.name, etype, reason, message)

    # -- status ------------------------------------------------------------------------------------------------

    def publish(self) -> None:
        """Write the pod's status soon (several changes in one pass of the loop are one write)."""
        if self._publish_pending:
            return
        self._publish_pending = True
        asyncio.get_running_loop().call_soon(self._write_status)

    def _status(self, prev: Obj) -> Obj:
        ts = now_rfc3339()
        policy = str((self.pod.get("spec") or {}).get("restartPolicy") or "Always")
        statuses = [c.status() for c in self.containers.values()]
        ready = bool(statuses) and all(s["ready"] for s in statuses)
        terminated = [c for c in self.containers.values() if "terminated" in c.state]
        done = all(c.task is not None and c.task.done() for c in self.containers.values())
        if self.init_failed:
            phase = "Failed"
        elif not self.initialized:
            phase = "Pending"
        elif done and len(terminated) == len(self.containers) and policy != "Always":
            failed = any(c.state["terminated"]["exitCode"] != 0 for c in terminated)
            phase = "Failed" if failed else "Succeeded"
        elif any(
            "running" in c.state or c.restart_count > 0 or c.last_state for c in self.containers.values()
        ):
            phase = "Running"
        else:
            phase = "Pending"
        prev_conds = {c.get("type"): c for c in prev.get("conditions") or []}
        wanted = {
            "PodReadyToStartContainers": self.volumes_ready,
            "Initialized": self.initialized,
            "Ready": ready,
            "ContainersReady": ready,
            "PodScheduled": True,
        }
        conditions = []
        for ctype, ok in wanted.items():
            status = "True" if ok else "False"
            old = prev_conds.get(ctype)
            cond: Obj = {"type": ctype, "status": status, "lastProbeTime": None}
            cond["lastTransitionTime"] = (
                old.get("lastTransitionTime") if old and old.get("status") == status else ts
            )
            if not ok and ctype in ("Ready", "ContainersReady"):
                not_ready = [s["name"] for s in statuses if not s["ready"]]
                cond["reason"] = "ContainersNotReady"
                cond["message"] = f"containers with unready status: [{' '.join(not_ready)}]"
            conditions.append(cond)
        if self.unsupported:
            conditions.append(
                {
                    "type": MOUNTS_CONDITION,
                    "status": "False",
                    "lastProbeTime": None,
                    "lastTransitionTime": (prev_conds.get(MOUNTS_CONDITION) or {}).get(
                        "lastTransitionTime", ts
                    ),
                    "reason": "MountNamespaceUnavailable",
                    "message": "volumes not mounted at " + ", ".join(self.unsupported),
                }
            )
        return {
            "phase": phase,
            "conditions": conditions,
            "hostIP": self.node.ip,
            "hostIPs": [{"ip": self.node.ip}],
            "podIP": self.node.ip,  # no network namespace: the process shares its node's address
            "podIPs": [{"ip": self.node.ip}],
            "startTime": self.start_time,
            "qosClass": prev.get("qosClass") or "BestEffort",
            "containerStatuses": statuses,
            **(
                {"initContainerStatuses": [c.status() for c in self.init_containers.values()]}
                if self.init_containers
                else {}
            ),
        }

    def _write_status(self) -> None:
        self._publish_pending = False
        k = self.kubelet
        if k._workers.get(self.key) is not self:
            return
        try:
            st = k.api.store.get(k._pods_t.storage_key, self.key)
            if self.static is not None:
                if st is None:
                    st = self._create_mirror()
                    if st is None:
                        return
                elif (st.obj["metadata"].get("annotations") or {}).get(static.CONFIG_MIRROR) != self.uid:
                    return  # an API pod (or an older mirror) holds the name; upstream waits too
            elif st is None or st.obj["metadata"].get("uid") != self.uid:
                return
            if not self.runs_processes:
                return
            new = dict(st.obj)
            new["status"] = self._status(st.obj.get("status") or {})
            k.api.update(k._pods_t, new, self.key[0], self.key[1], subresource="status")
        except errors.ApiError as e:
            log.debug("status of %s/%s not written: %s", *self.key, e.message)
        except Exception:
            log.exception("status of %s/%s", *self.key)

    def _create_mirror(self) -> Any:
        k = self.kubelet
        assert self.static is not None
        mirror = json.loads(json.dumps(self.static.pod))
        meta = mirror["metadata"]
        meta.pop("uid", None)
        meta["annotations"][static.CONFIG_SEEN] = now_rfc3339()
        node = k.api.store.get(k._nodes_t.storage_key, ("", self.node.name))
        if node is not None:
            meta["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": self.node.name,
                    "uid": node.obj["metadata"]["uid"],
                    "controller": True,
                }
            ]
        try:
            st = k.api.create(k._pods_t, mirror, self.key[0])
        except errors.ApiError as e:
            log.warning("mirror pod %s/%s not created: %s", *self.key, e.message)
            return None
        self.mirror_uid = st.obj["metadata"]["uid"]
        return st

    def delete_mirror(self) -> None:
        if self.static is None:
            return
        k = self.kubelet
        st = k.api.store.get(k._pods_t.storage_key, self.key)
        if st is None or (st.obj["metadata"].get("annotations") or {}).get(static.CONFIG_MIRROR) != self.uid:
            return
        try:
            k.api.delete(k._pods_t, self.key[0], self.key[1], {"gracePeriodSeconds": 0})
            k.api.finish_graceful_delete(k._pods_t, self.key[0], self.key[1])
        except errors.ApiError as e:
            if e.code != 404:
                log.warning("mirror pod %s/%s not deleted: %s", *self.key, e.message)
        volumes.remove_pod_dir(self.node.root, self.uid)


def _no_token(namespace: str, sa: str, audiences: list[str], seconds: int, pod: Obj) -> tuple[str, int]:
    raise volumes.VolumeError("this cluster issues no service-account tokens")


def control_plane_nodes(data_dir: Path, count: int) -> list[ProcessNode]:
    """``control-plane-0..N-1``, rooted at ``<data-dir>/nodes/<node>/``, InternalIPs 127.0.1.1, 127.0.1.2, ..."""
    first = int(ipaddress.IPv4Address("127.0.1.1"))
    return [
        ProcessNode(
            f"control-plane-{i}",
            data_dir / "nodes" / f"control-plane-{i}",
            str(ipaddress.IPv4Address(first + i)),
        )
        for i in range(count)
    ]


def token_source(api: ClusterApi, issuer: Callable[[], TokenIssuer | None]) -> volumes.TokenSource:
    """Projected service-account tokens, bound to the pod, signed by the cluster's issuer (``auth/tokens.py``)."""
    sa_t = api.rtype("", "v1", "serviceaccounts")

    def issue(namespace: str, sa: str, audiences: list[str], seconds: int, pod: Obj) -> tuple[str, int]:
        iss = issuer()
        if iss is None:
            raise volumes.VolumeError("this cluster issues no service-account tokens (--insecure-http)")
        st = api.lookup(sa_t, namespace, sa)
        if st is None:
            raise volumes.VolumeError(f'serviceaccount "{sa}" not found in namespace "{namespace}"')
        meta = pod.get("metadata") or {}
        bound = BoundObject("Pod", str(meta.get("name", "")), str(meta.get("uid", "")))
        return iss.issue(namespace, sa, str(st.obj["metadata"].get("uid", "")), audiences, seconds, bound)

    return issue
