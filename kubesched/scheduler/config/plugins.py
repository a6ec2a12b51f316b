"""Extension points, and the plugin registry the configuration is checked against.

``KNOWN_PLUGINS`` holds the in-tree plugins kubesched implements, each with the extension points it
implements in Kubernetes 1.36. Out-of-tree plugins (for instance crane's ``Dynamic``) join through the
``plugin_registry`` argument of ``load_config``/``default_config``: a mapping of name -> ``PluginSpec`` that
extends or overrides this table.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from pydantic import BaseModel

from .args import IN_TREE_ARGS


class ExtensionPoint(StrEnum):
    """The framework's extension points, named as in the configuration's ``plugins`` field."""

    PRE_ENQUEUE = "preEnqueue"
    QUEUE_SORT = "queueSort"
    PRE_FILTER = "preFilter"
    FILTER = "filter"
    POST_FILTER = "postFilter"
    PRE_SCORE = "preScore"
    SCORE = "score"
    RESERVE = "reserve"
    PERMIT = "permit"
    PRE_BIND = "preBind"
    BIND = "bind"
    POST_BIND = "postBind"


# Not an extension point of its own: a plugin enabled here is expanded into every point it implements.
MULTI_POINT = "multiPoint"

EXTENSION_POINTS: tuple[ExtensionPoint, ...] = tuple(ExtensionPoint)


def point_attribute(point: str) -> str:
    """The snake_case attribute name of a point: "preFilter" -> "pre_filter", "multiPoint" -> "multi_point"."""
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in point)


@dataclass(frozen=True)
class PluginSpec:
    """What the configuration needs to know about a plugin.

    ``args_model``: a pydantic ``BaseModel`` subclass that decodes the plugin's ``pluginConfig`` args (give
    it ``extra="forbid"`` to make unknown fields errors; a ``validate_args(path) -> list[FieldError]`` method,
    if present, adds semantic checks). With ``None`` the args reach the plugin as a plain dict.
    ``default_args``: builds the args used when the profile has no ``pluginConfig`` entry for the plugin;
    when ``None`` and ``args_model`` is set, the model's own defaults are used; otherwise the plugin gets None.
    """

    name: str
    extension_points: frozenset[str]
    args_model: type[BaseModel] | None = None
    default_args: Callable[[], Any] | None = None

    def __post_init__(self) -> None:
        unknown = set(self.extension_points) - set(EXTENSION_POINTS)
        if unknown:
            raise ValueError(f"plugin {self.name!r} declares unknown extension points {sorted(unknown)}")
        if self.args_model is not None and not (
            isinstance(self.args_model, type) and issubclass(self.args_model, BaseModel)
        ):
            raise TypeError(f"plugin {self.name!r}: args_model must be a pydantic BaseModel subclass")

    def implements(self, point: str) -> bool:
        return point in self.extension_points


def _spec(name: str, *points: ExtensionPoint) -> PluginSpec:
    model = IN_TREE_ARGS.get(name)
    return PluginSpec(name, frozenset(points), args_model=model, default_args=model)


_P = ExtensionPoint

KNOWN_PLUGINS: Mapping[str, PluginSpec] = MappingProxyType(
    {
        spec.name: spec
        for spec in (
            _spec("PrioritySort", _P.QUEUE_SORT),
            _spec("SchedulingGates", _P.PRE_ENQUEUE),
            _spec("NodeName", _P.FILTER),
            _spec("NodePorts", _P.PRE_FILTER, _P.FILTER),
            _spec("NodeUnschedulable", _P.FILTER),
            _spec("NodeResourcesFit", _P.PRE_FILTER, _P.FILTER, _P.PRE_SCORE, _P.SCORE),
            _spec("NodeResourcesBalancedAllocation", _P.PRE_SCORE, _P.SCORE),
            _spec("NodeAffinity", _P.PRE_FILTER, _P.FILTER, _P.PRE_SCORE, _P.SCORE),
            _spec("TaintToleration", _P.FILTER, _P.PRE_SCORE, _P.SCORE),
            _spec("PodTopologySpread", _P.PRE_FILTER, _P.FILTER, _P.PRE_SCORE, _P.SCORE),
            _spec("InterPodAffinity", _P.PRE_FILTER, _P.FILTER, _P.PRE_SCORE, _P.SCORE),
            _spec("ImageLocality", _P.SCORE),
            # Supports pods without resource claims only; those with claims are refused at PreFilter.
            _spec(
                "DynamicResources",
                _P.PRE_ENQUEUE, _P.PRE_FILTER, _P.FILTER, _P.POST_FILTER, _P.RESERVE, _P.PRE_BIND,
            ),
            # In 1.36 DefaultPreemption also gates pods whose preemption is still in flight (PreEnqueue).
            _spec("DefaultPreemption", _P.PRE_ENQUEUE, _P.POST_FILTER),
            _spec("DefaultBinder", _P.BIND),
        )
    }
)

# Upstream in-tree plugins that kubesched does not implement (yet). They appear in upstream default plugin
# sets; unless a registry supplies them, they are dropped from the defaults (recorded on the profile) and
# naming one explicitly is an "unknown plugin" error that says so.
UPSTREAM_UNIMPLEMENTED: frozenset[str] = frozenset(
    {
        "VolumeRestrictions",
        "VolumeBinding",
        "VolumeZone",
        "NodeVolumeLimits",
        "NodeDeclaredFeatures",
        "EBSLimits",
        "GCEPDLimits",
        "AzureDiskLimits",
        "CinderLimits",
        "SelectorSpread",
    }
)


def build_registry(plugin_registry: Mapping[str, PluginSpec] | None = None) -> dict[str, PluginSpec]:
    """The in-tree table extended (or overridden, name by name) by ``plugin_registry``."""
    registry = dict(KNOWN_PLUGINS)
    for name, spec in (plugin_registry or {}).items():
        if not isinstance(spec, PluginSpec):
            raise TypeError(f"plugin_registry[{name!r}] must be a PluginSpec, got {type(spec).__name__}")
        if spec.name != name:
            raise ValueError(f"plugin_registry key {name!r} does not match its PluginSpec name {spec.name!r}")
        registry[name] = spec
    return registry
