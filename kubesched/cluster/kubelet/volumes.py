"""Volumes of a process pod, laid out under its node's root folder, and the environment of its containers.

Each volume becomes a folder ``<node-root>/var/lib/kubelet/pods/<uid>/volumes/<name>/`` (``hostPath`` is the
path inside the node root instead); the launcher bind-mounts those at the container's ``mountPath``. Files are
written by rename, so a mounted folder sees a new service-account token or ConfigMap value whole, as with
upstream's atomic writer. Supported: ``hostPath``, ``configMap``, ``secret``, ``emptyDir``, ``downwardAPI``
and ``projected`` (serviceAccountToken, configMap, secret, downwardAPI). Pods with a service account get
upstream's ``kube-api-access`` volume at ``/var/run/secrets/kubernetes.io/serviceaccount`` (token, ca.crt,
namespace) unless ``automountServiceAccountToken`` is false.
"""

from __future__ import annotations

import base64
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Obj = dict[str, Any]

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
DEFAULT_TOKEN_SECONDS = 3607  # what upstream's admission puts in kube-api-access volumes
DEFAULT_MODE = 0o644
# (namespace, service account, audiences, expiration seconds, pod) -> (token, expiry as Unix seconds)
TokenSource = Callable[[str, str, list[str], int, Obj], tuple[str, int]]


class VolumeError(Exception):
    """A volume that cannot be set up now (a missing ConfigMap, a hostPath of the wrong type, ...)."""


@dataclass
class VolumeContext:
    node_root: Path
    get_object: Callable[[str, str, str], Obj | None]  # (plural, namespace, name) -> object or None
    token: TokenSource
    ca_pem: bytes


@dataclass
class PreparedVolumes:
    paths: dict[str, Path] = field(default_factory=dict)  # volume name -> host path
    refresh_at: float | None = None  # monotonic time at which tokens need renewing


def pod_dir(node_root: Path, uid: str) -> Path:
    return node_root / "var" / "lib" / "kubelet" / "pods" / uid


def with_default_service_account_volume(pod: Obj, static: bool) -> Obj:
    """The pod with upstream's ``kube-api-access`` projected volume added (what ServiceAccount admission does)."""
    spec = pod.get("spec") or {}
    if static or spec.get("automountServiceAccountToken") is False:
        return pod
    containers = spec.get("containers") or []
    if any(
        m.get("mountPath") == SERVICE_ACCOUNT_DIR for c in containers for m in c.get("volumeMounts") or []
    ):
        return pod
    name = "kube-api-access-kubesched"
    volume = {
        "name": name,
        "projected": {
            "defaultMode": 0o644,
            "sources": [
                {"serviceAccountToken": {"expirationSeconds": DEFAULT_TOKEN_SECONDS, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        },
    }
    mount = {"name": name, "mountPath": SERVICE_ACCOUNT_DIR, "readOnly": True}
    new_spec = dict(spec)
    new_spec["volumes"] = [*(spec.get("volumes") or []), volume]
    new_spec["containers"] = [
        dict(c, volumeMounts=[*(c.get("volumeMounts") or []), mount]) for c in containers
    ]
    return dict(pod, spec=new_spec)


def prepare(pod: Obj, uid: str, ctx: VolumeContext) -> PreparedVolumes:
    """Write every volume of the pod (again: re-running refreshes tokens, ConfigMaps and Secrets)."""
    base = pod_dir(ctx.node_root, uid) / "volumes"
    out = PreparedVolumes()
    for v in (pod.get("spec") or {}).get("volumes") or []:
        name = str(v.get("name"))
        if "hostPath" in v:
            out.paths[name] = _host_path(v["hostPath"], ctx.node_root)
            continue
        target = base / name
        if "emptyDir" in v:
            target.mkdir(parents=True, exist_ok=True)
        elif "configMap" in v:
            _write_files(target, _from_object(v["configMap"], "configmaps", pod, ctx), v["configMap"])
        elif "secret" in v:
            src = dict(v["secret"], name=v["secret"].get("secretName"))
            _write_files(target, _from_object(src, "secrets", pod, ctx), src)
        elif "downwardAPI" in v:
            files = _downward_files(v["downwardAPI"].get("items") or [], pod)
            _write_files(target, files, v["downwardAPI"])
        elif "projected" in v:
            files, expires = _projected(v["projected"], pod, ctx)
            _write_files(target, files, v["projected"])
            if expires is not None:
                at = time.monotonic() + 0.8 * max(0.0, expires - time.time())
                out.refresh_at = at if out.refresh_at is None else min(out.refresh_at, at)
        else:
            kind = next((k for k in v if k != "name"), "?")
            raise VolumeError(f'volume "{name}": {kind} volumes are not supported by the kubesched kubelet')
        out.paths[name] = target
    return out


def container_mounts(container: Obj, volumes: Mapping[str, Path]) -> list[Obj]:
    """The launcher's mounts for one container: host source, container target, read-only."""
    mounts = []
    for m in container.get("volumeMounts") or []:
        src = volumes.get(str(m.get("name")))
        if src is None:
            raise VolumeError(f'volumeMount "{m.get("name")}" names no volume of the pod')
        if m.get("subPath"):
            src = src / str(m["subPath"]).lstrip("/")
            if not src.exists():
                src.mkdir(parents=True, exist_ok=True)  # as upstream, a missing subPath becomes a folder
        mounts.append(
            {"source": str(src), "target": str(m["mountPath"]), "readOnly": bool(m.get("readOnly"))}
        )
    return mounts


def remove_pod_dir(node_root: Path, uid: str) -> None:
    shutil.rmtree(pod_dir(node_root, uid), ignore_errors=True)


# -- sources ------------------------------------------------------------------------------------------------------


def _host_path(hp: Obj, node_root: Path) -> Path:
    """A hostPath inside the node's root folder; ``type`` checked and ``*OrCreate`` honoured as upstream."""
    rel = os.path.normpath("/" + str(hp.get("path") or "/")).lstrip("/")
    path = node_root / rel
    kind = hp.get("type") or ""
    if kind == "DirectoryOrCreate":
        path.mkdir(parents=True, exist_ok=True)
    elif kind == "FileOrCreate":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(exist_ok=True)
    elif kind == "Directory" and not path.is_dir():
        raise VolumeError(f"hostPath type check failed: {hp.get('path')} is not a directory")
    elif kind == "File" and not path.is_file():
        raise VolumeError(f"hostPath type check failed: {hp.get('path')} is not a file")
    elif kind == "" and not path.exists():
        path.mkdir(
            parents=True, exist_ok=True
        )  # upstream's unset type creates nothing; a missing path is a folder
    return path


def _from_object(src: Obj, plural: str, pod: Obj, ctx: VolumeContext) -> dict[str, bytes]:
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    name = str(src.get("name") or "")
    obj = ctx.get_object(plural, namespace, name)
    if obj is None and plural == "configmaps" and name == "kube-root-ca.crt":
        obj = {"data": {"ca.crt": ctx.ca_pem.decode()}}  # the cluster CA when no controller published it
    if obj is None:
        if src.get("optional"):
            return {}
        kind = "configmap" if plural == "configmaps" else "secret"
        raise VolumeError(f'{kind} "{name}" not found')
    data: dict[str, bytes] = {}
    for k, v in (obj.get("data") or {}).items():
        data[k] = base64.b64decode(v) if plural == "secrets" else str(v).encode()
    for k, v in (obj.get("binaryData") or {}).items():
        data[k] = base64.b64decode(v)
    if plural == "secrets":
        for k, v in (obj.get("stringData") or {}).items():
            data[k] = str(v).encode()
    items = src.get("items")
    if not items:
        return data
    out = {}
    for it in items:
        key = str(it.get("key"))
        if key not in data:
            if src.get("optional"):
                continue
            raise VolumeError(f'key "{key}" not found in {plural[:-1]} "{name}"')
        out[str(it.get("path") or key)] = data[key]
    return out


def _projected(p: Obj, pod: Obj, ctx: VolumeContext) -> tuple[dict[str, bytes], float | None]:
    files: dict[str, bytes] = {}
    expires: float | None = None
    meta = pod.get("metadata") or {}
    for s in p.get("sources") or []:
        if "serviceAccountToken" in s:
            t = s["serviceAccountToken"]
            sa = str((pod.get("spec") or {}).get("serviceAccountName") or "default")
            audiences = [t["audience"]] if t.get("audience") else []
            seconds = int(t.get("expirationSeconds") or DEFAULT_TOKEN_SECONDS)
            token, exp = ctx.token(str(meta.get("namespace") or "default"), sa, audiences, seconds, pod)
            files[str(t.get("path") or "token")] = token.encode()
            expires = float(exp) if expires is None else min(expires, float(exp))
        elif "configMap" in s:
            files.update(_from_object(s["configMap"], "configmaps", pod, ctx))
        elif "secret" in s:
            files.update(_from_object(s["secret"], "secrets", pod, ctx))
        elif "downwardAPI" in s:
            files.update(_downward_files(s["downwardAPI"].get("items") or [], pod))
        else:
            raise VolumeError(
                f"projected source {next(iter(s), '?')} is not supported by the kubesched kubelet"
            )
    return files, expires


def _downward_files(items: list[Obj], pod: Obj) -> dict[str, bytes]:
    out = {}
    for it in items:
        if "fieldRef" in it:
            value = field_ref(pod, str(it["fieldRef"].get("fieldPath")))
        elif "resourceFieldRef" in it:
            value = resource_field_ref(pod, it["resourceFieldRef"])
        else:
            raise VolumeError(f"downwardAPI item {it.get('path')}: needs fieldRef or resourceFieldRef")
        out[str(it.get("path"))] = value.encode()
    return out


def _write_files(target: Path, files: Mapping[str, bytes], src: Obj) -> None:
    """Make ``target`` hold exactly ``files``; each written by rename so a reader never sees half a file."""
    target.mkdir(parents=True, exist_ok=True)
    mode = int(src.get("defaultMode") or DEFAULT_MODE)
    modes = {
        str(it.get("path") or it.get("key")): int(it["mode"]) for it in src.get("items") or [] if "mode" in it
    }
    for rel, data in files.items():
        path = target / rel.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            if path.read_bytes() == data:
                continue
        except OSError:
            pass
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, modes.get(rel, mode))
        os.replace(tmp, path)
    keep = {str((target / rel.lstrip("/")).relative_to(target)) for rel in files}
    for p in target.rglob("*"):
        if p.is_file() and not p.name.startswith(".") and str(p.relative_to(target)) not in keep:
            p.unlink(missing_ok=True)


# -- the downward API, for volumes and env ---------------------------------------------------------------------

_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def field_ref(pod: Obj, path: str) -> str:
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    m = _SUBSCRIPT.match(path)
    if m:
        return str((meta.get(m.group(1)) or {}).get(m.group(2), ""))
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.hostIP": status.get("hostIP"),
        "status.podIP": status.get("podIP"),
    }
    if path in simple:
        return str(simple[path] or "")
    if path in ("metadata.labels", "metadata.annotations"):
        d = meta.get(path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(d.items()))
    if path == "status.podIPs":
        return ",".join(str(i.get("ip")) for i in status.get("podIPs") or [])
    if path == "status.hostIPs":
        return ",".join(str(i.get("ip")) for i in status.get("hostIPs") or [])
    raise VolumeError(f"fieldRef {path} is not supported")


def resource_field_ref(pod: Obj, ref: Obj, container: Obj | None = None) -> str:
    """``limits.cpu`` and friends: the container's limit, else its request, else 0 (divisor not applied)."""
    if container is None:
        name = ref.get("containerName")
        container = next(
            (c for c in (pod.get("spec") or {}).get("containers") or [] if c.get("name") == name), {}
        )
    kind, _, resource = str(ref.get("resource") or "").partition(".")
    res = container.get("resources") or {}
    value = (res.get(kind) or {}).get(resource) or (res.get("limits") or {}).get(resource)
    return str(value or "0")


def container_env(
    pod: Obj, container: Obj, base: Mapping[str, str], get_object: Callable[[str, str, str], Obj | None]
) -> dict[str, str]:
    """The container's environment: ``base``, then ``envFrom``, then ``env`` (with ``$(VAR)`` expansion)."""
    namespace = str((pod.get("metadata") or {}).get("namespace") or "default")
    env = dict(base)
    for ef in container.get("envFrom") or []:
        prefix = str(ef.get("prefix") or "")
        ref = ef.get("configMapRef") or ef.get("secretRef")
        if not ref:
            continue
        plural = "configmaps" if "configMapRef" in ef else "secrets"
        obj = get_object(plural, namespace, str(ref.get("name")))
        if obj is None:
            if ref.get("optional"):
                continue
            raise VolumeError(f'{plural[:-1]} "{ref.get("name")}" not found')
        for k, v in (obj.get("data") or {}).items():
            env[prefix + k] = base64.b64decode(v).decode() if plural == "secrets" else str(v)
    for e in container.get("env") or []:
        name = str(e.get("name"))
        if "value" in e or "valueFrom" not in e:
            env[name] = expand(str(e.get("value") or ""), env)
            continue
        vf = e["valueFrom"] or {}
        if "fieldRef" in vf:
            env[name] = field_ref(pod, str(vf["fieldRef"].get("fieldPath")))
        elif "resourceFieldRef" in vf:
            env[name] = resource_field_ref(pod, vf["resourceFieldRef"], container)
        elif "configMapKeyRef" in vf or "secretKeyRef" in vf:
            secret = "secretKeyRef" in vf
            ref = vf["secretKeyRef" if secret else "configMapKeyRef"]
            obj = get_object("secrets" if secret else "configmaps", namespace, str(ref.get("name")))
            data = (obj or {}).get("data") or {}
            key = str(ref.get("key"))
            if key not in data:
                if ref.get("optional"):
                    continue
                what = "secret" if secret else "configmap"
                if obj is None:
                    raise VolumeError(f'{what} "{ref.get("name")}" not found')
                raise VolumeError(
                    f"couldn't find key {key} in {what[0].upper() + what[1:]} {namespace}/{ref.get('name')}"
                )
            env[name] = base64.b64decode(data[key]).decode() if secret else str(data[key])
    return env


_VAR = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.\-]*)\)")


def expand(text: str, env: Mapping[str, str]) -> str:
    """Upstream's ``$(VAR)`` expansion: defined names are replaced, ``$$`` escapes, unknown ones stay."""

    def sub(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        return env[name] if name in env else m.group(0)

    return _VAR.sub(sub, text)
