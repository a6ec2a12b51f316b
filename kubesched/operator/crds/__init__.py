"""The operator's CustomResourceDefinitions, shipped as YAML beside this module, and ``ensure_crds`` which
installs the missing ones (and updates those an older release installed) and waits until the API server serves
them (condition ``Established``).

The same files install by hand: ``kubectl apply -f kubesched/operator/crds/`` (or ``kubesched render``'s
``manifests/`` output).
"""

from __future__ import annotations

import asyncio
import time
from importlib import resources
from typing import Any

import yaml

from kubesched.client.rest import ApiClient, ApiError

CRD_API_VERSION = "apiextensions.k8s.io/v1"
CRD_PLURAL = "customresourcedefinitions"
CRD_FILES = (
    "kubeschedulers.operator.openshift.io.yaml",
    "schedulers.config.openshift.io.yaml",
    "clusteroperators.config.openshift.io.yaml",
)


def crd_texts() -> dict[str, str]:
    """File name -> YAML text of each CRD, in install order."""
    base = resources.files(__name__)
    return {name: base.joinpath(name).read_text(encoding="utf-8") for name in CRD_FILES}


def crd_objects() -> list[dict[str, Any]]:
    """The CRDs as objects, in install order."""
    return [yaml.safe_load(text) for text in crd_texts().values()]


def is_established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


# What we own in a CRD's spec: an installed CRD that differs here (an older release's schema) is updated.
OWNED_SPEC_FIELDS = ("group", "names", "scope", "versions")


def differs(installed: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether an installed CRD lacks what ``wanted`` says (server-set defaults such as ``conversion`` and the
    names' ``singular``/``listKind`` filled in by the server are not differences)."""
    have, want = installed.get("spec") or {}, wanted.get("spec") or {}
    for field in OWNED_SPEC_FIELDS:
        if field == "names":
            names = have.get("names") or {}
            if any(names.get(k) != v for k, v in (want.get("names") or {}).items()):
                return True
        elif have.get(field) != want.get(field):
            return True
    return False


async def ensure_crds(client: ApiClient, *, timeout: float = 60.0) -> list[str]:
    """Create the CRDs the cluster lacks and update those installed from an older schema, then wait until every
    one is Established. Returns the names created or updated. Raises ``TimeoutError`` naming the CRDs still not
    established."""
    changed: list[str] = []
    names: list[str] = []
    for crd in crd_objects():
        name = crd["metadata"]["name"]
        names.append(name)
        try:
            installed = await client.get(CRD_API_VERSION, CRD_PLURAL, name)
        except ApiError as e:
            if not e.is_not_found():
                raise
        else:
            if differs(installed, crd):
                body = {**installed, "spec": {**(installed.get("spec") or {}), **crd["spec"]}}
                await client.replace(
                    CRD_API_VERSION, CRD_PLURAL, name, body
                )  # a conflict is retried by the caller
                changed.append(name)
            continue
        try:
            await client.create(CRD_API_VERSION, CRD_PLURAL, crd)
            changed.append(name)
        except ApiError as e:
            if not e.is_already_exists():  # another operator replica was faster
                raise
    deadline = time.monotonic() + timeout
    pending = list(names)
    while pending:
        still = []
        for name in pending:
            try:
                crd = await client.get(CRD_API_VERSION, CRD_PLURAL, name)
            except ApiError as e:
                if not e.is_not_found():
                    raise
                still.append(name)
                continue
            if not is_established(crd):
                still.append(name)
        pending = still
        if pending:
            if time.monotonic() > deadline:
                raise TimeoutError(f"CustomResourceDefinitions not established after {timeout:g}s: {pending}")
            await asyncio.sleep(0.2)
    return changed


__all__ = ["CRD_FILES", "crd_objects", "crd_texts", "differs", "ensure_crds", "is_established"]
