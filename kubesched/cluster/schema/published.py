"""Kubernetes' published OpenAPI definitions of the built-in kinds, as the ``kubernetes-validate`` package ships
them (JSON Schema, one ``$defs`` table per Kubernetes version).

Loaded once, lazily (the table is ~4 MB of JSON, ~40 ms to read): the first request that needs a schema pays for it.
``definition_for(group, version, kind)`` finds a kind's definition by its ``x-kubernetes-group-version-kind``.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import Any

import orjson

# The newest schemas of the Kubernetes version this server imitates (kubernetes-validate names them by release).
KUBERNETES_VERSION = "1.36.0"
_PACKAGE = "kubernetes_validate"
_FOLDER = f"kubernetes-json-schema/v{KUBERNETES_VERSION}-local"

Schema = dict[str, Any]


@functools.cache
def definitions() -> dict[str, Schema]:
    """Every definition by its OpenAPI name (``io.k8s.api.core.v1.PodSpec``)."""
    path = resources.files(_PACKAGE).joinpath(_FOLDER, "_definitions.json")
    data = orjson.loads(path.read_bytes())
    defs: dict[str, Schema] = data["$defs"]
    return defs


@functools.cache
def _by_gvk() -> dict[tuple[str, str, str], str]:
    out: dict[tuple[str, str, str], str] = {}
    for name, schema in definitions().items():
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            key = (gvk.get("group", ""), gvk.get("version", ""), gvk.get("kind", ""))
            # A kind listed under several definitions (meta/v1 DeleteOptions in every group) keeps the first.
            out.setdefault(key, name)
    return out


def definition_for(group: str, version: str, kind: str) -> str | None:
    """The definition name of a built-in kind, None for kinds Kubernetes does not publish."""
    return _by_gvk().get((group, version, kind))


def ref_name(ref: str) -> str:
    """``io.k8s.api.core.v1.PodSpec`` from ``#/$defs/...`` or ``/api/_definitions.json#/$defs/...``."""
    return ref.rsplit("/", 1)[-1]
