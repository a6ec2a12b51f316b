"""Static pods: the manifest folder of a control-plane node (``<node-root>/etc/kubernetes/manifests/``).

As upstream's file source: every regular file whose name does not start with ``.`` holds one Pod (YAML or JSON);
subfolders and hidden files are ignored. Files are expected to be replaced by an atomic rename (write
``.name.tmp``, then ``mv``), as kubeadm and every tool writing to a kubelet's manifest folder do, so a file is
only ever read whole. A file that cannot be read as a Pod is reported once per version of the file and left out
(the pod it held stops, as upstream), without touching the other pods.

The folder is re-read when its listing or a file's (inode, size, mtime) changes, every ``interval`` seconds.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import yaml

Obj = dict[str, Any]

CONFIG_HASH = "kubernetes.io/config.hash"
CONFIG_MIRROR = "kubernetes.io/config.mirror"
CONFIG_SOURCE = "kubernetes.io/config.source"
CONFIG_SEEN = "kubernetes.io/config.seen"


class ManifestError(Exception):
    pass


@dataclass(frozen=True)
class StaticPod:
    """A static pod as the kubelet runs it: the manifest's Pod for this node, with its config hash as uid."""

    file: str
    pod: Obj = field(compare=False)
    uid: str  # config hash: changes whenever the manifest (or the node) does

    @property
    def namespace(self) -> str:
        return str(self.pod["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.pod["metadata"]["name"])

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name


def parse_manifest(data: bytes, file: str, node: str) -> StaticPod:
    """The static pod a manifest describes on ``node`` (named ``<name>-<node>``), or ManifestError."""
    try:
        docs = [d for d in yaml.safe_load_all(data) if d is not None]
    except yaml.YAMLError as e:
        raise ManifestError(f"not valid YAML or JSON: {e}") from None
    if len(docs) != 1:
        raise ManifestError(f"expected one Pod, found {len(docs)} documents")
    pod = docs[0]
    if not isinstance(pod, dict):
        raise ManifestError("the manifest is not an object")
    if pod.get("kind") != "Pod" or pod.get("apiVersion") != "v1":
        raise ManifestError(
            f"expected apiVersion v1, kind Pod; got {pod.get('apiVersion')} {pod.get('kind')}"
        )
    meta = pod.get("metadata")
    if not isinstance(meta, dict) or not meta.get("name"):
        raise ManifestError("metadata.name is required")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        raise ManifestError("spec is required")
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        raise ManifestError("spec.containers must list at least one container")
    for i, c in enumerate(containers):
        if not isinstance(c, dict) or not c.get("name") or not c.get("image"):
            raise ManifestError(f"spec.containers[{i}]: name and image are required")
    canonical = orjson.dumps(pod, option=orjson.OPT_SORT_KEYS)
    uid = hashlib.md5(node.encode() + b"\0" + canonical).hexdigest()
    meta = dict(meta)
    meta["name"] = f"{meta['name']}-{node}"
    meta["namespace"] = meta.get("namespace") or "default"
    meta["uid"] = uid
    annotations = dict(meta.get("annotations") or {})
    annotations.update({CONFIG_HASH: uid, CONFIG_MIRROR: uid, CONFIG_SOURCE: "file"})
    meta["annotations"] = annotations
    spec = dict(spec)
    spec["nodeName"] = node
    # As the kubelet: static pods tolerate every NoExecute taint (they are not evicted from their node).
    tolerations = list(spec.get("tolerations") or [])
    if not any(
        t.get("operator") == "Exists" and t.get("effect") == "NoExecute" and not t.get("key")
        for t in tolerations
    ):
        tolerations.append({"operator": "Exists", "effect": "NoExecute"})
    spec["tolerations"] = tolerations
    spec.setdefault("restartPolicy", "Always")
    out = dict(pod)
    out["metadata"] = meta
    out["spec"] = spec
    out.pop("status", None)
    return StaticPod(file=file, pod=out, uid=uid)


Signature = tuple[int, int, int]  # inode, size, mtime_ns


class ManifestFolder:
    """Reads a manifest folder into the set of static pods it describes, re-reading only changed files."""

    def __init__(self, folder: Path, node: str, on_error: Callable[[str, str], None]) -> None:
        self.folder = folder
        self.node = node
        self.on_error = on_error
        self._cache: dict[str, tuple[Signature, StaticPod | None]] = {}
        self._duplicates: set[tuple[str, Signature]] = set()

    def scan(self) -> dict[tuple[str, str], StaticPod]:
        """The static pods now in the folder, by (namespace, name); the first file wins a duplicate name."""
        seen: dict[str, Signature] = {}
        try:
            entries = sorted(os.scandir(self.folder), key=lambda e: e.name)
        except FileNotFoundError:
            entries = []
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                if not e.is_file():
                    continue
                st = e.stat()
            except OSError:
                continue
            seen[e.name] = (st.st_ino, st.st_size, st.st_mtime_ns)
        for name in list(self._cache):
            if name not in seen:
                del self._cache[name]
        pods: dict[tuple[str, str], StaticPod] = {}
        for name, sig in seen.items():
            cached = self._cache.get(name)
            if cached is None or cached[0] != sig:
                cached = (sig, self._read(name))
                self._cache[name] = cached
            sp = cached[1]
            if sp is None:
                continue
            if sp.key in pods:
                if (name, sig) not in self._duplicates:
                    self._duplicates.add((name, sig))
                    self.on_error(name, f"a pod named {sp.name} is already defined by {pods[sp.key].file}")
                continue
            pods[sp.key] = sp
        return pods

    def _read(self, name: str) -> StaticPod | None:
        try:
            data = (self.folder / name).read_bytes()
            return parse_manifest(data, name, self.node)
        except ManifestError as e:
            self.on_error(name, str(e))
        except OSError as e:
            self.on_error(name, f"cannot read: {e.strerror or e}")
        return None


@dataclass
class Changes:
    added: list[StaticPod]
    changed: list[tuple[StaticPod, StaticPod]]  # (old, new)
    removed: list[StaticPod]


def diff(old: dict[tuple[str, str], StaticPod], new: dict[tuple[str, str], StaticPod]) -> Changes:
    added = [sp for k, sp in new.items() if k not in old]
    removed = [sp for k, sp in old.items() if k not in new]
    changed = [(old[k], sp) for k, sp in new.items() if k in old and old[k].uid != sp.uid]
    return Changes(added, changed, removed)
