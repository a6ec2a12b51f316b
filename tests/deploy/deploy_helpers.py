"""Shared by tests/deploy: render deploy/<mode> with the real kubectl's kustomize, and read the result."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml
from clusterproc import find_kubectl

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# Overlays applied to the API (the static pod is rendered into a manifest folder instead).
API_MODES = ("second-scheduler", "takeover", "load-aware")
MODES = (*API_MODES, "static-pod")
KUBECTL = find_kubectl()

Obj = dict[str, Any]


def kustomize(path: Path) -> list[Obj]:
    """``kubectl kustomize PATH``, as the documents it prints."""
    assert KUBECTL is not None
    r = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return [d for d in yaml.safe_load_all(r.stdout) if d]


def render(mode: str) -> list[Obj]:
    return kustomize(DEPLOY / mode)


def one(docs: list[Obj], kind: str, name: str | None = None) -> Obj:
    found = [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]
    assert len(found) == 1, f"{len(found)} {kind} {name or ''} in the rendered documents"
    return found[0]


def scheduler_config(docs: list[Obj]) -> Obj:
    """The KubeSchedulerConfiguration held by the overlay's ConfigMap (key config.yaml)."""
    cm = next(d for d in docs if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {}))
    return dict(yaml.safe_load(cm["data"]["config.yaml"]))


def pod_spec(docs: list[Obj]) -> Obj:
    for d in docs:
        if d["kind"] == "Deployment":
            return dict(d["spec"]["template"]["spec"])
        if d["kind"] == "Pod":
            return dict(d["spec"])
    raise AssertionError("no Deployment or Pod")


def flag(args: list[str], name: str) -> str | None:
    prefix = f"--{name}="
    return next((a[len(prefix) :] for a in args if a.startswith(prefix)), None)
