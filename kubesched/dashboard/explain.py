"""Click-a-pod explanations and the what-if panel: ``kubesched simulate``'s engine on the cluster as it is now.

Both build the dump ``kubesched simulate --cluster`` would read from ``kubectl get nodes,pods -A -o yaml`` taken
this instant, with two changes that make the answer about one pod:

- the pod asked about is pending in it (a bound pod is taken off its node: "where would it go now?");
- the other pending pods are left out, so they do not take room before it.

So ``kubesched simulate -o json`` run on that dump prints the same placement, filtered nodes and per-plugin
scores (score x weight) as the page shows. Nothing is ever written to the cluster.

Simulations run one at a time in a worker thread: at thousands of nodes one takes a noticeable fraction of a
second of CPU, and the event loop must keep serving watches and the page meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson
import yaml

from kubesched.dashboard.model import ClusterModel, pod_key
from kubesched.scheduler.simulate import ClusterDumpError, SimulationError, simulate

if TYPE_CHECKING:
    from kubesched.scheduler.config import SchedulerConfiguration
    from kubesched.scheduler.framework.catalogue import Catalogue

log = logging.getLogger(__name__)

Obj = dict[str, Any]
MAX_MANIFEST_BYTES = 256 * 1024


class BadRequest(ValueError):
    """The request cannot be answered as asked; the message says why (shown on the page, HTTP 400)."""


class NotFound(LookupError):
    pass


def as_pending(pod: Mapping[str, Any], scheduler_name: str | None = None) -> Obj:
    """A copy of ``pod`` as it was before scheduling: no node, no status, optionally another profile."""
    out = dict(pod)
    spec = dict(out.get("spec") or {})
    spec.pop("nodeName", None)
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    out["spec"] = spec
    out["status"] = {"phase": "Pending"}
    out.setdefault("kind", "Pod")
    out.setdefault("apiVersion", "v1")
    return out


def dump_for(model: ClusterModel, pod: Obj) -> list[Obj]:
    """Nodes, bound pods, and ``pod`` (pending, replacing any pod with its key): what is simulated."""
    key = pod_key(pod)
    objects: list[Obj] = [{"kind": "Node", "apiVersion": "v1", **n} for n in model.node_list()]
    for other in model.pod_list():
        if pod_key(other) == key or not (other.get("spec") or {}).get("nodeName"):
            continue
        objects.append({"kind": "Pod", "apiVersion": "v1", **other})
    objects.append(pod)
    return objects


def parse_manifest(text: str) -> Obj:
    """One Pod from YAML or JSON text, or ``BadRequest`` saying what is wrong with it."""
    if not text.strip():
        raise BadRequest("paste a Pod manifest (YAML or JSON)")
    if len(text.encode()) > MAX_MANIFEST_BYTES:
        raise BadRequest(f"the manifest is larger than {MAX_MANIFEST_BYTES // 1024} KiB")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise BadRequest(f"not valid YAML or JSON{where}: {e.problem or e}") from None
    except yaml.YAMLError as e:
        raise BadRequest(f"not valid YAML or JSON: {e}") from None
    if len(docs) != 1:
        raise BadRequest(f"expected exactly one Pod, found {len(docs)} documents")
    doc = docs[0]
    if not isinstance(doc, dict):
        raise BadRequest(f"expected a Pod object, found {type(doc).__name__}")
    kind = doc.get("kind")
    if kind != "Pod":
        raise BadRequest(f"expected kind: Pod, found kind: {kind!r}" if kind else "the object has no kind")
    meta = doc.get("metadata")
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise BadRequest("metadata must be a mapping")
    for k in ("name", "namespace"):
        if k in meta and not isinstance(meta[k], str):
            raise BadRequest(f"metadata.{k} must be a string")
    meta = {**meta, "name": meta.get("name") or "what-if"}
    meta.setdefault("namespace", "default")
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        raise BadRequest("spec must be a mapping with the pod's containers")
    return {**doc, "metadata": meta}


class Explainer:
    """Runs ``simulate()`` for the dashboard with the configuration given by ``--config`` (or the default)."""

    def __init__(
        self, config: SchedulerConfiguration, catalogue: Catalogue | None, *, seed: int | None = None
    ) -> None:
        self.config = config
        self.catalogue = catalogue
        self.seed = seed
        self._lock = asyncio.Lock()

    @property
    def profiles(self) -> list[str]:
        return [p.scheduler_name for p in self.config.profiles]

    async def _run(self, objects: list[Obj]) -> list[Any]:
        def work() -> list[Any]:
            return asyncio.run(simulate(self.config, objects, seed=self.seed, catalogue=self.catalogue))

        async with self._lock:
            return await asyncio.to_thread(work)

    async def _simulate_one(self, model: ClusterModel, pod: Obj) -> Obj:
        key = pod_key(pod)
        try:
            placements = await self._run(dump_for(model, pod))
        except ClusterDumpError as e:
            raise BadRequest(f"the pod cannot be simulated: {e}") from None
        except SimulationError as e:
            raise BadRequest(f"the scheduler profile cannot be built: {e}") from None
        except Exception as e:  # a malformed field a plugin trips over: the page says so, the server lives on
            log.warning("simulation of %s failed", key, exc_info=True)
            raise BadRequest(f"the pod cannot be simulated: {type(e).__name__}: {e}") from None
        mine = [p for p in placements if p.pod == key]
        if not mine:
            scheduler = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
            raise BadRequest(
                f'no profile serves schedulerName "{scheduler}" (profiles: {", ".join(self.profiles)})'
            )
        out = mine[-1].to_json()
        out["profile"] = (pod.get("spec") or {}).get("schedulerName") or "default-scheduler"
        out["nodesConsidered"] = len(model.nodes)
        return out

    async def explain(self, model: ClusterModel, key: str) -> Obj:
        """Where ``key`` would be placed now, and why; with where it actually is."""
        pod = model.pod_object(key)
        if pod is None:
            raise NotFound(f"no pod {key}")
        spec = pod.get("spec") or {}
        result = await self._simulate_one(model, as_pending(pod))
        result["boundTo"] = spec.get("nodeName") or None
        result["phase"] = (pod.get("status") or {}).get("phase") or "Pending"
        return result

    async def what_if(self, model: ClusterModel, body: Any) -> Obj:
        """``{"pod": "ns/name"} or {"manifest": "<yaml/json>"}``, with an optional ``"profile"``."""
        if not isinstance(body, dict):
            raise BadRequest('expected a JSON object: {"pod": "namespace/name"} or {"manifest": "..."}')
        profile = body.get("profile") or None
        if profile is not None and (not isinstance(profile, str) or profile not in self.profiles):
            raise BadRequest(f"unknown profile {profile!r} (profiles: {', '.join(self.profiles)})")
        if body.get("pod"):
            key = body["pod"]
            if not isinstance(key, str):
                raise BadRequest("pod must be namespace/name")
            found = model.pod_object(key)
            if found is None:
                raise BadRequest(f"no pod {key} in the cluster")
            pod = as_pending(found, profile)
        elif "manifest" in body:
            text = body["manifest"]
            if isinstance(text, dict):
                text = orjson.dumps(text).decode()
            if not isinstance(text, str):
                raise BadRequest("manifest must be YAML or JSON text")
            pod = as_pending(parse_manifest(text), profile)
        else:
            raise BadRequest('pick a pending pod ("pod") or paste a manifest ("manifest")')
        result = await self._simulate_one(model, pod)
        result["whatIf"] = True
        return result
