"""``kubesched installer``: what an installer pod runs on a control-plane node (library-go's ``installerpod``).

It copies revision N of the scheduler's inputs from the API onto the node and hands the kubelet the new static pod:

1. every configmap ``<name>-N`` → ``<resource-dir>/<pod>-N/configmaps/<name>/<key>`` and every secret
   ``<name>-N`` → ``.../secrets/<name>/<key>`` (files 0600), with ``REVISION``, ``NODE_NAME`` and
   ``NODE_ENVVAR_NAME`` substituted as upstream does. The folder is written beside its final place and renamed
   into it, so a scheduler never reads half a revision. A required object that is missing is an error (exit 1,
   one line); an optional one is skipped.
2. the pod manifest (key ``pod.yaml`` of ``<pod>-N``) is written to ``<resource-dir>/<pod>-N/<pod>.yaml`` and then
   to ``<pod-manifest-dir>/<pod>.yaml`` through a temporary file that is fsync'd and renamed over the old one:
   the kubelet sees the old manifest or the new one, never half a file.
3. with ``--protected-revisions``, the folders ``<pod>-<n>`` of older revisions not listed are removed (upstream
   runs a separate pruner pod for this; here the installer prunes after installing).

``--remove`` takes the static pod off the node instead (the operator's ``managementState: Removed``): the manifest
is deleted, the resource folders stay.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import logging
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from kubesched.client.config import ConfigError, load_config
from kubesched.client.rest import ApiClient, ApiError
from kubesched.operator import contract as c

log = logging.getLogger("kubesched.installer")

Obj = dict[str, Any]

POD_KEY = "pod.yaml"


class InstallError(Exception):
    """The revision cannot be installed; the message says why in one line."""


@dataclass
class InstallOptions:
    revision: int
    namespace: str
    pod: str = c.POD_CONFIGMAP
    configmaps: list[str] = field(default_factory=list)
    optional_configmaps: list[str] = field(default_factory=list)
    secrets: list[str] = field(default_factory=list)
    optional_secrets: list[str] = field(default_factory=list)
    resource_dir: Path = Path(c.RESOURCE_DIR)
    pod_manifest_dir: Path = Path(c.POD_MANIFEST_DIR)
    node_name: str = ""
    protected_revisions: list[int] | None = None

    @property
    def revision_dir(self) -> Path:
        return self.resource_dir / f"{self.pod}-{self.revision}"

    @property
    def manifest_name(self) -> str:
        return f"{self.pod}.yaml"


@dataclass
class Revision:
    """Revision N's content, as files: ``{kind: {name: {key: bytes}}}`` with kind ``configmaps`` or ``secrets``."""

    files: dict[str, dict[str, dict[str, bytes]]]
    pod_manifest: bytes


def substitute(data: bytes, revision: int, node: str) -> bytes:
    """Upstream's placeholders: ``REVISION``, ``NODE_NAME``, ``NODE_ENVVAR_NAME`` (text values only)."""
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data
    text = text.replace("REVISION", str(revision))
    text = text.replace("NODE_ENVVAR_NAME", re.sub(r"[-.]", "_", node))
    text = text.replace("NODE_NAME", node)
    return text.encode()


def object_files(obj: Obj, secret: bool) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for key, value in (obj.get("data") or {}).items():
        out[key] = base64.b64decode(value) if secret else str(value).encode()
    for key, value in (obj.get("binaryData") or {}).items():
        out[key] = base64.b64decode(value)
    return out


async def fetch_revision(client: ApiClient, opts: InstallOptions) -> Revision:
    """Read ``<name>-N`` of every configmap and secret the options name (and the pod configmap)."""
    files: dict[str, dict[str, dict[str, bytes]]] = {"configmaps": {}, "secrets": {}}
    wanted: list[tuple[str, str, bool]] = []
    names = [opts.pod, *[n for n in opts.configmaps if n != opts.pod]]
    wanted += [("configmaps", n, False) for n in names]
    wanted += [("configmaps", n, True) for n in opts.optional_configmaps]
    wanted += [("secrets", n, False) for n in opts.secrets]
    wanted += [("secrets", n, True) for n in opts.optional_secrets]
    for plural, name, optional in wanted:
        full = f"{name}-{opts.revision}"
        try:
            obj = await client.get("v1", plural, full, namespace=opts.namespace)
        except ApiError as e:
            if e.is_not_found():
                if optional:
                    continue
                raise InstallError(f"required {plural[:-1]} {opts.namespace}/{full} not found") from None
            raise InstallError(f"reading {plural[:-1]} {opts.namespace}/{full}: {e}") from None
        raw = object_files(obj, plural == "secrets")
        files[plural][name] = {k: substitute(v, opts.revision, opts.node_name) for k, v in raw.items()}
    pod = files["configmaps"].get(opts.pod, {}).get(POD_KEY)
    if pod is None:
        raise InstallError(f"configmap {opts.namespace}/{opts.pod}-{opts.revision} has no {POD_KEY} key")
    return Revision(files, string_labels(pod))


def string_labels(manifest: bytes) -> bytes:
    """The manifest with label and annotation values as strings: an unquoted ``revision: REVISION`` becomes
    ``revision: 3`` once substituted, which YAML reads as a number and a kubelet refuses. Other manifests are
    returned byte for byte."""
    try:
        doc = yaml.safe_load(manifest)
    except yaml.YAMLError:
        return manifest
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    if not isinstance(meta, dict):
        return manifest
    changed = False
    for key in ("labels", "annotations"):
        values = meta.get(key)
        if not isinstance(values, dict):
            continue
        for k, v in values.items():
            if not isinstance(v, str) and v is not None:
                values[k] = str(v).lower() if isinstance(v, bool) else str(v)
                changed = True
    if not changed:
        return manifest
    return yaml.safe_dump(doc, sort_keys=False).encode()


def write_atomically(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``path`` so a reader sees the old content or the new, never part: a hidden temporary file in the
    same folder, fsync'd, renamed over ``path``; then the folder is fsync'd."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_revision_dir(rev: Revision, opts: InstallOptions) -> Path:
    """Lay out ``<resource-dir>/<pod>-N/`` beside its place, then rename it there (replacing an older copy)."""
    final = opts.revision_dir
    final.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.", suffix=".staging", dir=final.parent))
    try:
        for kind, objects in rev.files.items():
            for name, keys in objects.items():
                folder = staging / kind / name
                folder.mkdir(parents=True, exist_ok=True)
                for key, data in keys.items():
                    target = folder / key
                    target.write_bytes(data)
                    target.chmod(0o700 if key.endswith(".sh") else 0o600)
        (staging / opts.manifest_name).write_bytes(rev.pod_manifest)
        staging.chmod(0o755)
        old: Path | None = None
        if final.exists():
            old = final.with_name(f".{final.name}.old-{os.getpid()}")
            os.replace(final, old)
        os.replace(staging, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return final


def prune_revision_dirs(resource_dir: Path, pod: str, max_eligible: int, protected: set[int]) -> list[Path]:
    """Remove ``<pod>-<n>`` folders with n <= ``max_eligible`` not in ``protected``; the removed ones."""
    removed: list[Path] = []
    if not resource_dir.is_dir():
        return removed
    pattern = re.compile(rf"^{re.escape(pod)}-(\d+)$")
    for entry in sorted(resource_dir.iterdir()):
        m = pattern.match(entry.name)
        if not m or not entry.is_dir():
            continue
        n = int(m.group(1))
        if n <= max_eligible and n not in protected:
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(entry)
    return removed


def remove_manifest(manifest_dir: Path, pod: str) -> bool:
    """Delete ``<manifest-dir>/<pod>.yaml``; whether it was there."""
    path = manifest_dir / f"{pod}.yaml"
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


async def install(client: ApiClient, opts: InstallOptions) -> Path:
    """The whole installation of revision N on this node; the manifest path."""
    rev = await fetch_revision(client, opts)
    folder = write_revision_dir(rev, opts)
    write_atomically(opts.pod_manifest_dir / opts.manifest_name, rev.pod_manifest)
    log.info("installed revision %d: %s, manifest %s", opts.revision, folder, opts.pod_manifest_dir)
    if opts.protected_revisions is not None:
        keep = {*opts.protected_revisions, opts.revision}
        for d in prune_revision_dirs(opts.resource_dir, opts.pod, opts.revision, keep):
            log.info("pruned %s", d)
    return opts.pod_manifest_dir / opts.manifest_name


async def record(client: ApiClient, opts: InstallOptions, etype: str, reason: str, note: str) -> None:
    """An event about this installer pod (``$POD_NAME``), as upstream's installer records; best effort."""
    pod = os.environ.get("POD_NAME")
    if not pod:
        return
    from kubesched.client.events import EventRecorder

    recorder = EventRecorder(client, "static-pod-installer", f"installer-{opts.node_name or 'node'}")
    ref = {"apiVersion": "v1", "kind": "Pod", "namespace": opts.namespace, "name": pod}
    recorder.event(ref, etype, reason, "Install", note)
    try:
        await recorder.flush(5)
    finally:
        await recorder.close(1)


INSTALLER_SA = "installer-sa"


def node_pod(
    namespace: str, name: str, node: str, image: str, args: list[str], labels: dict[str, str]
) -> Obj:
    """A pod that runs ``kubesched installer <args>`` on ``node`` (installer, pruner and remover pods): pinned by
    ``nodeName``, every taint tolerated, ``system-node-critical``, never restarted, the node's ``/etc/kubernetes``
    mounted, as service account ``installer-sa``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {
            "nodeName": node,
            "serviceAccountName": INSTALLER_SA,
            "priorityClassName": "system-node-critical",
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "installer",
                    "image": image,
                    "command": ["kubesched", "installer"],
                    "args": args,
                    "env": [
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
                    ],
                    "resources": {"requests": {"cpu": "150m", "memory": "200M"}},
                    "terminationMessagePolicy": "FallbackToLogsOnError",
                    "volumeMounts": [{"name": "kubelet-dir", "mountPath": "/etc/kubernetes/"}],
                }
            ],
            "volumes": [
                {"name": "kubelet-dir", "hostPath": {"path": "/etc/kubernetes/", "type": "DirectoryOrCreate"}}
            ],
        },
    }


# ---- the command ---------------------------------------------------------------------------------------------


def _names(values: list[str] | None) -> list[str]:
    """Repeatable, comma-separated flag values as one list."""
    return [n.strip() for v in values or [] for n in v.split(",") if n.strip()]


def _revisions(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a comma-separated list of revisions: {text!r}") from None


def _positive(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a revision number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError("revisions start at 1")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", default=None, help="kubeconfig (default: in-cluster service account)")
    p.add_argument("--revision", type=_positive, help="the revision to install")
    p.add_argument("--namespace", default=c.OPERAND_NAMESPACE, help="where the revision's copies are")
    p.add_argument(
        "--pod", default=c.POD_CONFIGMAP, help="configmap holding pod.yaml; also the manifest's name"
    )
    p.add_argument("--configmaps", action="append", help="required configmaps (comma-separated, repeatable)")
    p.add_argument("--optional-configmaps", action="append", help="configmaps copied when present")
    p.add_argument("--secrets", action="append", help="required secrets")
    p.add_argument("--optional-secrets", action="append", help="secrets copied when present")
    p.add_argument("--resource-dir", default=c.RESOURCE_DIR, help="where revision folders go")
    p.add_argument("--pod-manifest-dir", default=c.POD_MANIFEST_DIR, help="the kubelet's static pod folder")
    p.add_argument("--node-name", default=None, help="this node (default: $NODE_NAME)")
    p.add_argument(
        "--protected-revisions",
        type=_revisions,
        default=None,
        help="after installing, remove older revision folders except these (comma-separated)",
    )
    p.add_argument("--timeout-duration", type=float, default=120.0, help="give up after this many seconds")
    p.add_argument(
        "--remove", action="store_true", help="remove the static pod manifest instead of installing"
    )
    p.add_argument(
        "--prune-only",
        action="store_true",
        help="only remove revision folders <= --max-eligible-revision not in --protected-revisions (a pruner pod)",
    )
    p.add_argument("--max-eligible-revision", type=_positive, default=None, help="with --prune-only")
    p.add_argument("-v", "--v", dest="verbosity", type=int, default=2, help="log verbosity")


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.DEBUG if args.verbosity >= 4 else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    manifest_dir = Path(args.pod_manifest_dir)
    if args.remove:
        removed = remove_manifest(manifest_dir, args.pod)
        where = manifest_dir / f"{args.pod}.yaml"
        print(f"removed {where}" if removed else f"{where} was not there")
        return 0
    if args.prune_only:
        if args.max_eligible_revision is None or args.protected_revisions is None:
            print(
                "kubesched installer: --prune-only needs --max-eligible-revision and --protected-revisions",
                file=sys.stderr,
            )
            return 2
        pruned = prune_revision_dirs(
            Path(args.resource_dir), args.pod, args.max_eligible_revision, set(args.protected_revisions)
        )
        print(f"pruned {len(pruned)} revision folders: {', '.join(d.name for d in pruned) or 'none'}")
        return 0
    if args.revision is None:
        print("kubesched installer: --revision is required (or --remove)", file=sys.stderr)
        return 2
    opts = InstallOptions(
        revision=args.revision,
        namespace=args.namespace,
        pod=args.pod,
        configmaps=_names(args.configmaps),
        optional_configmaps=_names(args.optional_configmaps),
        secrets=_names(args.secrets),
        optional_secrets=_names(args.optional_secrets),
        resource_dir=Path(args.resource_dir),
        pod_manifest_dir=manifest_dir,
        node_name=args.node_name or os.environ.get("NODE_NAME", ""),
        protected_revisions=args.protected_revisions,
    )
    try:
        config = load_config(args.kubeconfig)
    except ConfigError as e:
        print(f"kubesched installer: {e}", file=sys.stderr)
        return 1

    async def main() -> Path:
        async with ApiClient(config, max_retries=3) as client:
            try:
                manifest = await asyncio.wait_for(install(client, opts), args.timeout_duration)
            except (InstallError, TimeoutError, OSError, ApiError) as e:
                await record(
                    client,
                    opts,
                    "Warning",
                    "StaticPodInstallerFailed",
                    f"Installing revision {opts.revision}: {e}",
                )
                raise
            await record(
                client,
                opts,
                "Normal",
                "StaticPodInstallerCompleted",
                f"Successfully installed revision {opts.revision}",
            )
            return manifest

    try:
        manifest = asyncio.run(main())
    except InstallError as e:
        print(f"kubesched installer: {e}", file=sys.stderr)
        return 1
    except TimeoutError:
        print(f"kubesched installer: gave up after {args.timeout_duration:g}s", file=sys.stderr)
        return 1
    except (OSError, ApiError) as e:
        print(f"kubesched installer: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(f"installed revision {opts.revision} into {opts.revision_dir}; static pod manifest {manifest}")
    return 0
