"""The public entry points: load a configuration from a file or text, or build the default one."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .errors import ConfigError, ErrorType, FieldError, malformed, not_supported
from .resolve import resolve_document
from .types import API_GROUP, KIND, SUPPORTED_API_VERSIONS, SchedulerConfiguration

if TYPE_CHECKING:
    from kubesched.scheduler.framework.catalogue import Catalogue

log = logging.getLogger(__name__)

ConfigSource = str | bytes | os.PathLike[str]


def _in_tree(catalogue: Catalogue | None) -> Catalogue:
    if catalogue is not None:
        return catalogue
    # Imported here: the plugin modules import this package for their args' base model.
    from kubesched.scheduler.plugins import in_tree_catalogue

    return in_tree_catalogue()


def load_config(path_or_text: ConfigSource, *, catalogue: Catalogue | None = None) -> SchedulerConfiguration:
    """Load, default, merge and validate a KubeSchedulerConfiguration.

    ``path_or_text``: a path (``os.PathLike``, or a one-line string naming a file), or the YAML/JSON text
    itself (``str`` or ``bytes``). ``catalogue``: the plugins that exist (default: the in-tree ones).
    Raises ``ConfigError`` listing every problem found.
    """
    text, source = _read(path_or_text)
    data = parse_document(text, source=source)
    config = resolve_document(data, _in_tree(catalogue), source=source)
    for warning in config.warnings:
        log.warning("scheduler configuration: %s", warning)
    return config


def default_config(*, version: str = "v1", catalogue: Catalogue | None = None) -> SchedulerConfiguration:
    """The configuration kube-scheduler runs with when given no ``--config``: one default profile.

    ``version``: "v1", "v1beta3" or "v1beta2" (or the full ``kubescheduler.config.k8s.io/...`` form).
    """
    api_version = version if "/" in version else f"{API_GROUP}/{version}"
    if api_version not in SUPPORTED_API_VERSIONS:
        raise ConfigError([not_supported("apiVersion", version, SUPPORTED_API_VERSIONS)])
    return resolve_document({"apiVersion": api_version, "kind": KIND}, _in_tree(catalogue))


def parse_document(text: str, *, source: str | None = None) -> dict[str, Any]:
    """YAML or JSON text to a mapping; duplicate keys and syntax errors are reported with their line."""
    try:
        if text.lstrip().startswith("{"):
            data = json.loads(text, object_pairs_hook=_no_duplicate_keys)
        else:
            data = yaml.load(text, Loader=_StrictLoader)  # a SafeLoader subclass
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [malformed(f"line {exc.lineno}, column {exc.colno}: {exc.msg}")], source=source
        ) from None
    except _DuplicateJSONKey as exc:
        raise ConfigError([malformed(str(exc))], source=source) from None
    except yaml.MarkedYAMLError as exc:
        raise ConfigError([malformed(_describe_yaml_error(exc))], source=source) from None
    except yaml.YAMLError as exc:
        raise ConfigError([malformed(str(exc))], source=source) from None
    if data is None:
        raise ConfigError([malformed("the document is empty")], source=source)
    if not isinstance(data, dict):
        found = type(data).__name__
        raise ConfigError(
            [malformed(f"expected a {KIND} object (a mapping), found a {found}")], source=source
        )
    return data


def _read(path_or_text: ConfigSource) -> tuple[str, str]:
    """The text and a name for it in messages."""
    if isinstance(path_or_text, bytes):
        return _decode(path_or_text, "<bytes>"), "<bytes>"
    if isinstance(path_or_text, os.PathLike):
        return _read_file(Path(path_or_text))
    text = path_or_text
    # One line without a mapping colon reads as a file name; so does any existing file's name.
    looks_like_path = bool(text.strip()) and "\n" not in text and not text.lstrip().startswith("{")
    if looks_like_path and (":" not in text or Path(text).is_file()):
        return _read_file(Path(text))
    return text, "<text>"


def _read_file(path: Path) -> tuple[str, str]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(
            [FieldError("", ErrorType.NOT_FOUND, str(path), "config file does not exist")]
        ) from None
    except OSError as exc:
        raise ConfigError([FieldError("", ErrorType.INVALID, str(path), exc.strerror or str(exc))]) from None
    return _decode(data, str(path)), str(path)


def _decode(data: bytes, source: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            [malformed(f"not UTF-8 text: {exc.reason} at byte {exc.start}")], source=source
        ) from None


class _DuplicateJSONKey(ValueError):
    pass


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateJSONKey(f'key "{key}" already set in object')
        result[key] = value
    return result


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate mapping keys, as kube-scheduler's strict decoding does."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                is_duplicate = key in seen
            except TypeError:
                continue  # unhashable keys are rejected by the base constructor with its own message
            if is_duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f'key "{key}" already set in map', key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _describe_yaml_error(exc: yaml.MarkedYAMLError) -> str:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or exc.context or "invalid YAML"
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context = f" ({exc.context})" if exc.context and exc.problem else ""
    return f"{where}{problem}{context}"
