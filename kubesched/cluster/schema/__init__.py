"""Kubernetes' published schemas of the built-in kinds, applied as kube-apiserver's typed decoding applies them.

- ``published.py``: the OpenAPI definitions of Kubernetes 1.36 as the ``kubernetes-validate`` package ships them.
- ``decode.py``: each definition compiled into a checker of JSON types, integer ranges, unknown and required fields.

``check_object`` is what the API layer calls for every body a client sends (create, update, patch result, apply
configuration): decoding errors raise ``DecodeError`` (400), unknown fields follow ``fieldValidation`` and missing
required fields come back for the 422 the kind's validation gives.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesched.cluster.schema import decode
from kubesched.cluster.schema.decode import DecodeError, Findings, Path, check, render
from kubesched.cluster.schema.published import KUBERNETES_VERSION, definition_for, definitions

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
FIELD_VALIDATIONS = (IGNORE, STRICT, WARN)
OBJECT_META = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

__all__ = [
    "FIELD_VALIDATIONS",
    "IGNORE",
    "KUBERNETES_VERSION",
    "OBJECT_META",
    "STRICT",
    "WARN",
    "Checked",
    "DecodeError",
    "check_metadata",
    "check_object",
    "definition_for",
    "definitions",
    "warm",
]


@dataclass(slots=True)
class Checked:
    """What a check found that is not a decoding error."""

    warnings: list[str] = field(default_factory=list)  # unknown fields, under fieldValidation=Warn
    missing: list[str] = field(default_factory=list)  # required fields the object lacks (outside status)


_NOTHING = Checked()


def _settle(found: Findings, mode: str, *, required: bool) -> Checked:
    if not found.unknown and not (required and found.missing):
        return _NOTHING
    out = Checked()
    if found.unknown:
        if mode == STRICT:
            # Reported in the order the decoder met them, each once.
            seen = dict.fromkeys(render(path, key) for _parent, key, path in found.unknown)
            raise DecodeError("strict decoding error: " + ", ".join(f'unknown field "{p}"' for p in seen))
        for parent, key, path in found.unknown:
            if mode == WARN:
                out.warnings.append(f'unknown field "{render(path, key)}"')
            parent.pop(key, None)  # a Go struct has nowhere to keep it
    if required:
        for path, key in found.missing:
            where = render(path, key)
            if where != "status" and not where.startswith(("status.", "status[")):
                out.missing.append(where)
    return out


def check_object(
    group: str, version: str, kind: str, obj: Any, mode: str, *, required: bool = True
) -> Checked:
    """Check a built-in kind's object as kube-apiserver decodes it (see the module docstring). Kinds without a
    published schema pass unchecked. ``obj`` loses its unknown fields unless ``mode`` is Strict."""
    key = (group, version, kind)
    fn = _KIND_CHECKERS.get(key, _UNKNOWN)
    if fn is _UNKNOWN:
        definition = definition_for(group, version, kind)
        fn = _KIND_CHECKERS[key] = None if definition is None else decode.checker(definition)
    if fn is None:
        return _NOTHING
    return _settle(decode.run(fn, obj), mode, required=required)


# The compiled checker of each kind checked so far (None: not published), so a body's check starts at once.
_KIND_CHECKERS: dict[tuple[str, str, str], Any] = {}
_UNKNOWN: Any = object()


def check_metadata(meta: Any, mode: str) -> Checked:
    """A custom resource's ``metadata``, which is typed ObjectMeta even where the rest is free-form."""
    found = check(OBJECT_META, meta, root=_METADATA_ROOT)
    return _settle(found, mode, required=False)


_METADATA_ROOT: Path = (None, "metadata")


def warm() -> None:
    """Load the definitions and compile the most used checkers now (both are cached for the process)."""
    check_object("", "v1", "Pod", {}, IGNORE)
    check_object("", "v1", "Binding", {}, IGNORE)
