"""Plugin definitions and the catalogue of them: what the configuration is checked against and what the
framework builds plugins from.

A plugin module declares one ``PluginDefinition``: the plugin's name, its factory and its typed args. The
extension points it implements are read off the plugin class (the methods it defines), so they are never
restated. A ``Catalogue`` maps names to definitions; the application assembles one (``kubesched.catalogue``)
and hands it to the configuration loader and to the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from pydantic import BaseModel

if TYPE_CHECKING:
    from kubesched.scheduler.framework.handle import Handle
    from kubesched.scheduler.framework.runtime import Framework

# (validated args model, or None for a plugin without args; handle) -> plugin.
PluginFactory = Callable[[Any, "Handle"], Any]

# Extension point (as named in the configuration) -> the method a plugin class defines to implement it.
POINT_METHODS: Mapping[str, str] = MappingProxyType(
    {
        "preEnqueue": "pre_enqueue",
        "queueSort": "sort_key",
        "preFilter": "pre_filter",
        "filter": "filter",
        "postFilter": "post_filter",
        "preScore": "pre_score",
        "score": "score",
        "reserve": "reserve",
        "permit": "permit",
        "preBind": "pre_bind",
        "bind": "bind",
        "postBind": "post_bind",
    }
)


def points_of(cls: type) -> frozenset[str]:
    """The extension points a plugin class implements: those whose method it defines."""
    return frozenset(point for point, method in POINT_METHODS.items() if callable(getattr(cls, method, None)))


class PluginService(Protocol):
    """Work a plugin needs beside the scheduling cycle, run by ``kubesched scheduler`` (load-aware scheduling's
    Prometheus pollers and hot-value rebuild). ``frameworks`` are the scheduler's profiles by name."""

    async def start(
        self, client: Any, frameworks: Mapping[str, Framework], list_nodes: Callable[[], list[dict[str, Any]]]
    ) -> None:
        """Once the informers have synced (on standbys too)."""
        ...

    async def leading(self, client: Any, frameworks: Mapping[str, Framework]) -> None:
        """Right before this scheduler starts scheduling (as leader, or at once without leader election)."""
        ...

    async def stop(self) -> None: ...


@dataclass(frozen=True)
class PluginDefinition:
    """One plugin: ``name``, ``factory(args, handle)``, and ``args``, the pydantic model of its ``pluginConfig``
    args (None when it takes none).

    The factory always receives a validated ``args`` instance when ``args`` is set (the model's defaults when
    the profile configures nothing), and None otherwise. ``version_defaults`` holds, per configuration
    ``apiVersion``, wire-form fields whose default differs from the model's (none of the in-tree plugins needs
    one today: kube-scheduler's v1, v1beta3 and v1beta2 args defaults are equal). ``plugin_type`` is the class
    the extension points are read from; it defaults to ``factory`` when that is a class. ``service`` builds
    the plugin's background work for the scheduler command, if it has any.
    """

    name: str
    factory: PluginFactory
    args: type[BaseModel] | None = None
    version_defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    plugin_type: type | None = None
    service: Callable[[], PluginService] | None = None
    extension_points: frozenset[str] = field(init=False)

    def __post_init__(self) -> None:
        cls = self.plugin_type if self.plugin_type is not None else self.factory
        if not isinstance(cls, type):
            raise TypeError(
                f"plugin {self.name!r}: give plugin_type when the factory is not the plugin class"
            )
        if self.args is not None and not (isinstance(self.args, type) and issubclass(self.args, BaseModel)):
            raise TypeError(f"plugin {self.name!r}: args must be a pydantic BaseModel subclass")
        object.__setattr__(self, "extension_points", points_of(cls))

    def implements(self, point: str) -> bool:
        return point in self.extension_points

    def default_args(self, api_version: str | None = None) -> BaseModel | None:
        """The args a profile without a ``pluginConfig`` entry for this plugin runs with."""
        if self.args is None:
            return None
        return self.args.model_validate(dict(self.version_defaults.get(api_version or "", {})))

    def defaults_for(self, api_version: str | None) -> Mapping[str, Any]:
        """Wire-form fields to apply under configured args in ``api_version`` (``version_defaults``)."""
        return self.version_defaults.get(api_version or "", {})

    def build(self, args: Any, handle: Handle) -> Any:
        """The plugin, from validated args (None: the defaults)."""
        if args is None and self.args is not None:
            args = self.default_args()
        plugin = self.factory(args, handle)
        if getattr(plugin, "name", None) is None:
            plugin.name = self.name
        return plugin


class Catalogue(Mapping[str, PluginDefinition]):
    """Plugin name -> definition. Immutable; ``extended`` makes a larger one."""

    __slots__ = ("_definitions",)

    def __init__(self, definitions: Iterable[PluginDefinition] = ()) -> None:
        self._definitions: dict[str, PluginDefinition] = {}
        for definition in definitions:
            self._add(definition)

    def _add(self, definition: PluginDefinition) -> None:
        if not isinstance(definition, PluginDefinition):
            raise TypeError(f"a catalogue holds PluginDefinitions, got {type(definition).__name__}")
        if definition.name in self._definitions:
            raise ValueError(f"a plugin named {definition.name!r} is already registered")
        self._definitions[definition.name] = definition

    def extended(self, *definitions: PluginDefinition) -> Catalogue:
        """This catalogue plus ``definitions``; a name already present is an error (as upstream's Merge)."""
        out = Catalogue(self._definitions.values())
        for definition in definitions:
            out._add(definition)
        return out

    def create(self, name: str, args: Any, handle: Handle) -> Any:
        definition = self._definitions.get(name)
        if definition is None:
            raise KeyError(f"plugin {name!r} does not exist in the registry")
        return definition.build(args, handle)

    def services(self) -> list[PluginService]:
        """A fresh background service of every plugin that has one."""
        return [d.service() for d in self._definitions.values() if d.service is not None]

    def __getitem__(self, name: str) -> PluginDefinition:
        return self._definitions[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._definitions)

    def __len__(self) -> int:
        return len(self._definitions)

    def __repr__(self) -> str:
        return f"Catalogue({', '.join(self._definitions)})"


__all__ = ["POINT_METHODS", "Catalogue", "PluginDefinition", "PluginFactory", "PluginService", "points_of"]
