"""library-go's sparse-config merge (``resourcemerge.MergeProcessConfig``), for the scheduler's configuration.

The scheduler's ``config.yaml`` is the merge, in order, of a default configuration, the observed configuration and
``spec.unsupportedConfigOverrides``. Each input is an unvalidated snippet (JSON or YAML text, bytes, or an already
decoded mapping); validation happens once, on the result. The rules:

- a mapping in the overlay merges key by key into the base's mapping at the same path (a non-mapping there is
  replaced by an empty mapping first);
- anything else in the overlay (a scalar, a list, ``null``) replaces the base's value wholesale: lists are never
  merged element by element, and ``null`` sets the key to null rather than deleting it;
- keys the overlay does not mention are kept: an overlay never deletes;
- an empty snippet (no bytes, only whitespace, ``null``) is skipped;
- an overlay that sets ``apiVersion`` or ``kind`` to something other than the base's is an error.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any

import yaml

Snippet = str | bytes | Mapping[str, Any] | None


class MergeError(ValueError):
    """A snippet that cannot be merged: not a mapping, malformed, or changing apiVersion/kind."""


def decode_snippet(snippet: Snippet, what: str = "snippet") -> dict[str, Any] | None:
    """A snippet as a fresh mapping, or None when it is empty. ``what`` names it in errors."""
    if snippet is None:
        return None
    if isinstance(snippet, Mapping):
        return copy.deepcopy(dict(snippet))
    text = snippet.decode("utf-8", "replace") if isinstance(snippet, bytes) else snippet
    if not text.strip():
        return None
    try:
        data = yaml.safe_load(text)  # YAML is a superset of JSON
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e)
        raise MergeError(f"{what} is not valid YAML or JSON{where}: {problem}") from None
    if data is None:
        return None
    if not isinstance(data, dict):
        raise MergeError(f"{what} must be a mapping, not {_type_name(data)}")
    return data


def merge_into(base: dict[str, Any], overlay: Mapping[str, Any]) -> dict[str, Any]:
    """Merge ``overlay`` into ``base`` in place (see the module's rules) and return ``base``."""
    for key, value in overlay.items():
        if isinstance(value, Mapping):
            current = base.get(key)
            if not isinstance(current, dict):
                current = {}
                base[key] = current
            merge_into(current, value)
        else:
            base[key] = copy.deepcopy(value)
    return base


def merge_config(*snippets: Snippet, names: tuple[str, ...] | None = None) -> dict[str, Any]:
    """Merge the snippets in order; the first non-empty one is the base.

    ``names`` (one per snippet) name them in errors, e.g. ``("the default config", "spec.observedConfig")``.
    Raises :class:`MergeError`.
    """
    result: dict[str, Any] | None = None
    for i, snippet in enumerate(snippets):
        what = names[i] if names is not None and i < len(names) else f"snippet {i + 1}"
        data = decode_snippet(snippet, what)
        if data is None:
            continue
        if result is None:
            result = data
            continue
        for field in ("apiVersion", "kind"):
            if field in data and data[field] != result.get(field):
                raise MergeError(
                    f"{what} changes {field}: {_gvk(data, result)} does not equal {_gvk(result, result)}"
                )
        merge_into(result, data)
    return result if result is not None else {}


def to_json(config: Mapping[str, Any]) -> str:
    """The merged configuration as library-go writes it: compact JSON with sorted keys (same input, same bytes)."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def _gvk(data: Mapping[str, Any], base: Mapping[str, Any]) -> str:
    return f"{data.get('apiVersion', base.get('apiVersion'))}/{data.get('kind', base.get('kind'))}"


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return type(value).__name__


__all__ = ["MergeError", "Snippet", "decode_snippet", "merge_config", "merge_into", "to_json"]
