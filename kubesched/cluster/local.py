"""A whole local cluster in one process: store, API, HTTP(S) server and simulated nodes.

Used by ``kubesched cluster up`` and, in-process, by tests and the benchmark.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from kubesched.cluster import certs, devices, kubeconfig
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.apiserver import ApiServer, start_server
from kubesched.cluster.auth.authn import Authenticator, load_token_file
from kubesched.cluster.auth.bootstrap import ensure_authentication_configmap, ensure_bootstrap_policy
from kubesched.cluster.auth.rbac import RBACAuthorizer
from kubesched.cluster.auth.reviews import AuthApi
from kubesched.cluster.auth.tokens import TokenIssuer
from kubesched.cluster.controllers import KNOWN_CONTROLLERS, ControllerManager
from kubesched.cluster.kinds import customresourcedefinitions
from kubesched.cluster.kubelet import NodeShape, SimulatedKubelets
from kubesched.cluster.kubelet import runtime as process_kubelet
from kubesched.cluster.kubelet.logs import PodLogs
from kubesched.cluster.kubelet.simulated import control_plane_node_object
from kubesched.cluster.nodemetrics import DEFAULT_USAGE_SHARE, CpuSeries, NodeMetrics, UsageModel
from kubesched.cluster.resources import ResourceRegistry, ResourceType
from kubesched.cluster.storage.etcd import EtcdStorage
from kubesched.cluster.storage.interface import Obj
from kubesched.cluster.storage.memory import DEFAULT_HISTORY_SIZE, MemoryStorage, clock_revision
from kubesched.cluster.storage.sqlite import SqliteStorage, Synchronous

log = logging.getLogger("kubesched.cluster")

STORAGE_CHOICES = ("sqlite", "etcd", "memory")
# Under the data dir: the SQLite file (as k3s's server/db/state.db) and the memory backend's last revision.
SQLITE_FILE = Path("db") / "state.db"
MEMORY_REVISION_FILE = "memory-revision"


@dataclass
class ClusterOptions:
    bind_address: str = "127.0.0.1"
    port: int = 6443
    nodes: int = 3
    # GPUs of the simulated driver gpu.kubesched.io per simulated node (devices.py): 0 = no devices.
    node_gpus: int = 0
    node_shape: NodeShape = field(default_factory=NodeShape)
    node_name_prefix: str = "node-"
    zones: int = 3
    data_dir: Path = field(default_factory=lambda: Path.home() / ".kubesched" / "cluster")
    kubeconfig_out: Path | None = None
    insecure_http: bool = False
    watch_history: int = DEFAULT_HISTORY_SIZE
    heartbeat_interval: float = 10.0
    bookmark_interval: float = 60.0
    # node-exporter metrics of all simulated nodes on one endpoint: None = off, 0 = a free port.
    node_metrics_port: int | None = None
    node_usage_share: float = DEFAULT_USAGE_SHARE
    node_metrics_cpu_series: CpuSeries = "per-core"
    # "RBAC" (as kube-apiserver) or "AlwaysAllow" (any authenticated user may do anything).
    authorization_mode: str = "RBAC"
    # kube-apiserver's --token-auth-file: CSV rows token,user,uid[,"group1,group2"].
    token_auth_file: Path | None = None
    # Nodes control-plane-0..N-1 whose kubelet runs static pods and pods of ``process_image`` as processes.
    control_plane_nodes: int = 0
    process_image: str = process_kubelet.DEFAULT_PROCESS_IMAGE
    # The in-process controllers to run (kube-controller-manager's names; see controllers/__init__.py).
    controllers: frozenset[str] = frozenset(KNOWN_CONTROLLERS)
    # Where objects live: "sqlite" (<data-dir>/db/state.db; what `cluster up` defaults to), "etcd", or "memory"
    # (nothing kept; the in-process default, for tests and benchmarks).
    storage: str = "memory"
    sqlite_synchronous: Synchronous = "normal"
    # --storage etcd: the etcd client URL(s); empty = start one on loopback under <data-dir>/etcd.
    etcd_servers: tuple[str, ...] = ()


def open_storage(options: ClusterOptions) -> MemoryStorage:
    """The storage backend the options ask for (raises ``StorageInUse`` or ``OSError`` with a one-line message)."""
    if options.storage == "sqlite":
        return SqliteStorage(
            options.data_dir / SQLITE_FILE,
            history_size=options.watch_history,
            synchronous=options.sqlite_synchronous,
        )
    if options.storage == "etcd":
        return EtcdStorage.open(
            options.data_dir,
            options.etcd_servers,
            history_size=options.watch_history,
            storage_keys={t.storage_key for t in ResourceRegistry().all()},
        )
    if options.storage != "memory":
        raise ValueError(f"unknown storage {options.storage!r} (one of {', '.join(STORAGE_CHOICES)})")
    return MemoryStorage(history_size=options.watch_history, start_revision=_memory_start_revision(options))


def _memory_start_revision(options: ClusterOptions) -> int:
    """Above anything an earlier server on this data dir issued: the clock (see ``clock_revision``), and the
    revision the last one stopped at, in case the clock went back since."""
    try:
        last = int((options.data_dir / MEMORY_REVISION_FILE).read_text().strip())
    except (OSError, ValueError):
        last = 0
    return max(clock_revision(), last + 1)


class LocalCluster:
    def __init__(self, options: ClusterOptions) -> None:
        self.options = options
        options.data_dir.mkdir(parents=True, exist_ok=True)
        self.store = open_storage(options)
        self._storage_closed = False
        self.api = ClusterApi(self.store)
        # Custom resources of CRDs kept by durable storage are served again before anything else runs.
        self._crd_key = self.api.rtype("apiextensions.k8s.io", "v1", "customresourcedefinitions").storage_key
        for st in self.store.scan(self._crd_key):
            customresourcedefinitions.serve(self.api, st.obj)
        self._types_by_storage: dict[str, ResourceType] = {}
        if isinstance(self.store, EtcdStorage):
            self.store.on_foreign_change = self._foreign_change
        self.kubelets = SimulatedKubelets(self.api, heartbeat_interval=options.heartbeat_interval)
        self.controllers = ControllerManager(self.api, options.controllers)
        self.node_metrics: NodeMetrics | None = None
        if options.node_metrics_port is not None:
            self.node_metrics = NodeMetrics(
                self.api,
                model=UsageModel(options.node_usage_share),
                cpu_series=options.node_metrics_cpu_series,
            )
        self.node_metrics_url = ""
        self.server: ApiServer | None = None
        self._runner: web.BaseRunner | None = None
        self.url = ""
        self.kubeconfig_path: Path | None = None
        # Signs and verifies service-account tokens (<data-dir>/pki/sa.key); None until start() over HTTPS.
        self.token_issuer: TokenIssuer | None = None
        self.authorizer: RBACAuthorizer | None = None
        self.control_plane = process_kubelet.control_plane_nodes(
            options.data_dir, options.control_plane_nodes
        )
        self.process_kubelets: process_kubelet.ProcessKubelets | None = None

    def _foreign_change(self, storage_key: str, etype: str, new: Obj | None, old: Obj | None) -> None:
        """A write another API server made over the same etcd: this server's observers (RBAC index,
        controllers, ...) and its serving of custom resources learn of it as of its own writes."""
        rtype = self._types_by_storage.get(storage_key)
        if rtype is None:
            self._types_by_storage = {t.storage_key: t for t in self.api.registry.all()}
            rtype = self._types_by_storage.get(storage_key)
            if rtype is None:
                return
        if storage_key == self._crd_key:
            if new is not None:
                customresourcedefinitions.serve(self.api, new)
            elif old is not None:
                spec = old["spec"]
                for v in spec.get("versions") or []:
                    self.api.registry.remove(spec["group"], v["name"], spec["names"]["plural"])
            self._types_by_storage = {}
        self.api.notify(rtype, etype, new, old)

    @property
    def node_names(self) -> list[str]:
        width = max(1, len(str(self.options.nodes - 1)))
        return [f"{self.options.node_name_prefix}{i:0{width}d}" for i in range(self.options.nodes)]

    async def start(self) -> None:
        o = self.options
        if isinstance(self.store, EtcdStorage):
            self.store.attach_loop(asyncio.get_running_loop())
        o.data_dir.mkdir(parents=True, exist_ok=True)
        self.api.bootstrap()
        # The authorizer watches RBAC writes from here on, so it sees the bootstrap policy being created.
        self.authorizer = RBACAuthorizer(self.api)
        ensure_bootstrap_policy(self.api)
        self.authorizer.aggregate()
        self.kubelets.register_nodes(self.node_names, o.node_shape, o.zones)
        devices.publish(self.api, self.node_names, devices.GpuShape(o.node_gpus))
        first = len(self.node_names)
        self.kubelets.register_node_objects(
            control_plane_node_object(first + i, n.name, o.node_shape, n.ip, str(n.root))
            for i, n in enumerate(self.control_plane)
        )
        self.kubelets.start()
        self.controllers.start()
        if self.node_metrics is not None:
            self.node_metrics.start()
            self.node_metrics_url = await self.node_metrics.serve(o.bind_address, o.node_metrics_port or 0)
        host = o.bind_address
        url_host = f"[{host}]" if ":" in host else host
        if url_host in ("0.0.0.0", "[::]"):
            url_host = "127.0.0.1"
        ssl_ctx: ssl.SSLContext | None = None
        if o.insecure_http:
            self.server = ApiServer(self.api, require_auth=False, bookmark_interval=o.bookmark_interval)
            self.url = f"http://{url_host}:{o.port}"
        else:
            hosts = [host] if host not in ("0.0.0.0", "::", "127.0.0.1", "localhost") else []
            pki = certs.generate_pki(o.data_dir / "pki", hosts)
            # As kube-apiserver: components' delegated authentication verifies client certificates against it.
            ensure_authentication_configmap(self.api, pki.ca_cert_pem)
            ssl_ctx = pki.server_ssl_context()
            self.token_issuer = TokenIssuer(o.data_dir / "pki" / "sa.key")
            static = load_token_file(o.token_auth_file) if o.token_auth_file else {}
            authn = Authenticator(self.api, self.token_issuer, static_tokens=static, admin_token=pki.token)
            authz = self.authorizer if o.authorization_mode == "RBAC" else None
            self.server = ApiServer(
                self.api,
                token=pki.token,
                bookmark_interval=o.bookmark_interval,
                authn=authn,
                authz=authz,
                auth_api=AuthApi(self.api, authn, authz, self.token_issuer),
            )
            self.url = f"https://{url_host}:{o.port}"
        runner = await start_server(self.server, host, o.port, ssl_ctx)
        self._runner = runner
        if o.port == 0:
            sockets = runner.addresses
            self.options.port = int(sockets[0][1])
            self.url = self.url.rsplit(":", 1)[0] + f":{self.options.port}"
        self.kubeconfig_path = o.kubeconfig_out or (o.data_dir / "admin.kubeconfig")
        self.kubeconfig_path.parent.mkdir(parents=True, exist_ok=True)
        if o.insecure_http:
            kubeconfig.write_insecure_kubeconfig(self.kubeconfig_path, self.url)
        else:
            kubeconfig.write_admin_kubeconfig(self.kubeconfig_path, self.url, pki)
        if self.control_plane:
            self._start_process_kubelets(None if o.insecure_http else pki)

    def _start_process_kubelets(self, pki: certs.Pki | None) -> None:
        """The control-plane nodes' kubelet, once the server's address is known (pods get it as in-cluster config)."""
        o = self.options
        api_host = self.url.split("://", 1)[1].rsplit(":", 1)[0].strip("[]")
        options = process_kubelet.RuntimeOptions(
            process_image=o.process_image,
            api_host=api_host,
            api_port=o.port,
            ca_pem=pki.ca_cert_pem if pki is not None else b"",
            token=process_kubelet.token_source(self.api, lambda: self.token_issuer),
        )
        pk = process_kubelet.ProcessKubelets(self.api, self.control_plane, options)
        self.kubelets.process_nodes = set(pk.nodes)
        self.kubelets.claim = pk.claims
        # kubeadm's scheduler.conf (user system:kube-scheduler, bound by the bootstrap RBAC policy), for static
        # pods that mount it from the node's /etc/kubernetes.
        if pki is not None:
            cert, key = certs.client_pair(pki, "scheduler", "system:kube-scheduler")
        for n in self.control_plane:
            conf = n.root / "etc" / "kubernetes" / "scheduler.conf"
            if pki is not None:
                kubeconfig.write_client_kubeconfig(
                    conf, self.url, pki, cert, key, user="system:kube-scheduler"
                )
            else:
                kubeconfig.write_insecure_kubeconfig(conf, self.url)
        if self.server is not None:
            self.server.pod_logs = PodLogs(pk.node_root, pk.container_running)
        pk.start()
        self.process_kubelets = pk

    async def stop(self) -> None:
        if self.process_kubelets is not None:
            await self.process_kubelets.stop()
            self.process_kubelets = None
        await self.controllers.stop()
        await self.kubelets.stop()
        if self.node_metrics is not None:
            await self.node_metrics.close()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        self.close_storage()

    def close_storage(self) -> None:
        """Release the storage (idempotent). The memory backend leaves the revision it reached for the next start."""
        if self._storage_closed:
            return
        self._storage_closed = True
        if self.options.storage == "memory":
            try:
                (self.options.data_dir / MEMORY_REVISION_FILE).write_text(f"{self.store.revision}\n")
            except OSError as e:
                log.warning("cannot record the last revision: %s", e)
        self.store.close()

    async def __aenter__(self) -> LocalCluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


# Seconds between the API server's full garbage collections (see run_forever).
FULL_GC_INTERVAL = 600.0


async def _full_collections(interval: float) -> None:
    while True:
        await asyncio.sleep(interval)
        gc.collect()


async def run_forever(cluster: LocalCluster, ready_message: str) -> None:
    await cluster.start()
    # What start-up built (thousands of nodes and leases) lives as long as the process: keep it out of the
    # garbage collector's full passes, which would otherwise walk all of it and stall the server each time.
    gc.freeze()
    # Objects written later (nodes and pods created through the API, events) are not frozen: a full pass over
    # them stopped the server for 75-490 ms every few tens of seconds under a steady 300 pods/s (the tail of
    # every request in flight). Full passes run on a timer instead of on allocation counts; young ones still
    # free what dies young (stored objects are trees, freed by reference counting).
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 1_000_000_000)
    full_gc = asyncio.create_task(_full_collections(FULL_GC_INTERVAL), name="full gc")
    print(
        ready_message.format(
            url=cluster.url, kubeconfig=cluster.kubeconfig_path, node_metrics_url=cluster.node_metrics_url
        ),
        flush=True,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        full_gc.cancel()
        await cluster.stop()
