"""Request bodies decoded within kube-apiserver's bounds: size, nesting depth and YAML alias expansion.

- A body over ``MAX_BODY_BYTES`` (3 MiB, kube-apiserver's ``MaxRequestBodyBytes``) is refused with 413 before it
  is read (by its Content-Length) or as soon as the stream passes the limit (``apiserver.py``).
- JSON is parsed by orjson; only a body with more brackets than ``MAX_DEPTH`` can nest that deep, so only such a
  body is walked to measure its depth (a pod body costs two ``bytes.count`` calls).
- YAML is parsed by libyaml with scalars kept as JSON knows them (timestamps stay strings, as sigs.k8s.io/yaml
  converts YAML to JSON), then walked once: nesting deeper than ``MAX_DEPTH``, self-referencing anchors, and
  aliases that expand the document past ``MAX_ALIAS_EXPANSION`` times its size are refused, as go-yaml refuses
  "excessive aliasing"; map keys that are not strings become strings, as in YAML-to-JSON conversion.

Errors are ``BodyError`` with the message of the 400 the server answers.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import yaml

MAX_BODY_BYTES = 3 * 1024 * 1024
# Deeper than any Kubernetes object (CRD schemas included) and well under what orjson can serialise (254 levels).
MAX_DEPTH = 200
# A YAML document may expand through aliases to this many times its own node count (beyond a small floor).
MAX_ALIAS_EXPANSION = 10
_ALIAS_FLOOR = 10_000
_MAX_NODES = 2_000_000


class BodyError(Exception):
    """A body that cannot be decoded within the bounds (400 BadRequest)."""


def too_large_message() -> str:
    return f"Request entity too large: limit is {MAX_BODY_BYTES}"


def parse_json(raw: bytes) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        raise BodyError(str(e)) from None
    if raw.count(b"{") + raw.count(b"[") > MAX_DEPTH:
        _Walk(convert_keys=False).run(value)
    return value


class _Repeated(dict[str, Any]):
    """A JSON object whose text repeated some of its keys (the last value kept, as orjson keeps it)."""

    repeated: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) == len(pairs):
        return obj
    out = _Repeated(obj)
    seen: set[str] = set()
    out.repeated = [k for k, _ in pairs if k in seen or seen.add(k)]  # type: ignore[func-returns-value]
    return out


def duplicate_fields(raw: bytes) -> list[str]:
    """Paths of the keys a JSON body repeats within one object (``spec.containers[0].name``), which strict
    decoding refuses; orjson keeps the last value silently, so only Strict requests pay this second parse."""
    try:
        value = json.loads(raw, object_pairs_hook=_pairs)
    except (ValueError, RecursionError):
        return []
    found: list[str] = []
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            if isinstance(node, _Repeated):
                found.extend(f"{path}.{k}" if path else k for k in dict.fromkeys(node.repeated))
            stack.extend((v, f"{path}.{k}" if path else k) for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return sorted(found)


def _timestamp_as_text(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    return loader.construct_scalar(node)


def _refuse_binary(loader: yaml.SafeLoader, node: yaml.Node) -> Any:
    raise BodyError("yaml: binary values are not supported")


_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_BaseLoader):
    """libyaml's safe loader with JSON's scalars: timestamps are strings, binary is refused."""


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
_Loader.add_constructor("tag:yaml.org,2002:binary", _refuse_binary)


def parse_yaml(raw: bytes) -> Any:
    """One YAML document (JSON is YAML) as JSON values. Costs a walk of the result: call off the event loop for
    large bodies."""
    try:
        value = yaml.load(raw, Loader=_Loader)
    except yaml.YAMLError as e:
        raise BodyError(f"yaml: {e}".replace("\n", " ")) from None
    except RecursionError:
        raise BodyError(f"yaml: exceeded max depth of {MAX_DEPTH}") from None
    return _Walk(convert_keys=True).run(value)


class _Walk:
    """Measures depth and expanded size, finds cycles, and (for YAML) makes keys strings and rejects values JSON
    has no form for. Shared subtrees (aliases) are measured once and remembered by identity."""

    def __init__(self, *, convert_keys: bool) -> None:
        self.convert_keys = convert_keys
        self.memo: dict[int, tuple[int, int]] = {}  # id -> (expanded nodes, height)
        self.distinct = 0  # nodes as written in the document (a shared subtree counts once)
        self.active: set[int] = set()
        self.keep: list[Any] = []  # holds converted containers alive so their ids stay unique

    def run(self, value: Any) -> Any:
        out, nodes, _height = self._visit(value, 0)
        if nodes > _MAX_NODES or (
            nodes > _ALIAS_FLOOR and nodes > MAX_ALIAS_EXPANSION * max(self.distinct, 1)
        ):
            raise BodyError("yaml: document contains excessive aliasing")
        return out

    def _visit(self, value: Any, depth: int) -> tuple[Any, int, int]:
        t = type(value)
        if t is not dict and t is not list:
            if value is None or t is str or t is int or t is float or t is bool:
                self.distinct += 1
                return value, 1, 0
            raise BodyError(f"the value {str(value)[:50]!r} has no JSON form")
        vid = id(value)
        seen = self.memo.get(vid)
        if seen is not None:
            if depth + seen[1] > MAX_DEPTH:
                raise BodyError(f"exceeded max depth of {MAX_DEPTH}")
            return value, seen[0], seen[1]
        if vid in self.active:
            raise BodyError("yaml: an anchor refers to itself")
        if depth >= MAX_DEPTH:
            raise BodyError(f"exceeded max depth of {MAX_DEPTH}")
        self.active.add(vid)
        self.distinct += 1
        nodes, height = 1, 0
        if t is dict:
            odd_keys = False
            for k, v in value.items():
                _, n, h = self._visit(v, depth + 1)
                nodes += n
                height = max(height, h + 1)
                odd_keys = odd_keys or type(k) is not str
            if odd_keys and self.convert_keys:
                rebuilt = {k if type(k) is str else _key_text(k): v for k, v in value.items()}
                value.clear()
                value.update(rebuilt)
        else:
            for v in value:
                _, n, h = self._visit(v, depth + 1)
                nodes += n
                height = max(height, h + 1)
        if nodes > _MAX_NODES:
            raise BodyError("yaml: document contains excessive aliasing")
        self.active.discard(vid)
        self.memo[vid] = (nodes, height)
        self.keep.append(value)
        return value, nodes, height


def _key_text(key: Any) -> str:
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, int | float | str):
        return str(key)
    raise BodyError(f"yaml: invalid map key: {str(key)[:50]!r}")
