"""An in-process cluster for controller tests: ``ClusterApi`` + ``ControllerManager`` on a fake clock, no HTTP,
no asyncio workers (``settle`` drains the queues), and a tiny kubelet stand-in that makes pods Ready on demand."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kubesched.apimachinery.timefmt import format_rfc3339
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.controllers import ControllerManager
from kubesched.cluster.controllers.base import FakeClock, copy_json, is_pod_active, is_pod_ready, meta_of

Obj = dict[str, Any]
NS = "default"


def template(
    labels: dict[str, str], image: str = "nginx:1", annotations: dict[str, str] | None = None
) -> Obj:
    meta: Obj = {"labels": dict(labels)}
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": image}]}}


@dataclass
class Env:
    api: ClusterApi
    clock: FakeClock
    mgr: ControllerManager

    def rt(self, plural: str) -> Any:
        group = {"deployments": "apps", "replicasets": "apps", "poddisruptionbudgets": "policy"}.get(
            plural, ""
        )
        return self.api.rtype(group, "v1", plural)

    def settle(self) -> int:
        return self.mgr.drain()

    def get(self, plural: str, name: str) -> Obj:
        return self.api.get(self.rt(plural), NS, name).obj

    def create(self, plural: str, body: Obj) -> Obj:
        return self.api.create(self.rt(plural), body, NS).obj

    def update(self, plural: str, name: str, change: Any) -> Obj:
        obj = copy_json(self.get(plural, name))  # stored objects are shared: never mutate them
        change(obj)
        return self.api.update(self.rt(plural), obj, NS, name)[0].obj

    def pods(self, *, active_only: bool = True) -> list[Obj]:
        items, _ = self.api.store.list(self.rt("pods").storage_key, NS)
        return [s.obj for s in items if not active_only or is_pod_active(s.obj)]

    def pods_of(self, owner: Obj) -> list[Obj]:
        uid = meta_of(owner)["uid"]
        return [
            p
            for p in self.pods()
            if any(
                r.get("uid") == uid and r.get("controller") for r in meta_of(p).get("ownerReferences") or ()
            )
        ]

    def set_ready(self, pod: Obj, ready: bool = True, node: str = "node-0") -> None:
        """What the kubelet reports once a pod runs: phase Running and the Ready condition."""
        name = meta_of(pod)["name"]
        cur = self.api.get(self.rt("pods"), NS, name).obj
        new = dict(cur)
        ts = format_rfc3339(self.clock.now())
        new["status"] = dict(
            cur.get("status") or {},
            phase="Running",
            conditions=[{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ts}],
        )
        self.api.update(self.rt("pods"), new, NS, name, subresource="status")

    def ready_all(self) -> int:
        n = 0
        for p in self.pods():
            if not is_pod_ready(p):
                self.set_ready(p)
                n += 1
        return n

    def delete(self, plural: str, name: str) -> None:
        self.api.delete(self.rt(plural), NS, name)


def make_env(*controllers: str) -> Env:
    api = ClusterApi()
    api.bootstrap()
    clock = FakeClock()
    mgr = ControllerManager(
        api, controllers or ("deployment", "replicaset", "disruption", "replicationcontroller"), clock=clock
    )
    mgr.start_sync()
    return Env(api, clock, mgr)


def deployment(name: str, replicas: int, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    labels = labels or {"app": name}
    body: Obj = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": template(labels),
        },
    }
    body["spec"].update(spec)
    return body


def replicaset(name: str, replicas: int, labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    labels = labels or {"app": name}
    body: Obj = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(labels)},
            "template": template(labels),
        },
    }
    body["spec"].update(spec)
    return body
