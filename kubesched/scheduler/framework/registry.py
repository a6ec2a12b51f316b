"""Plugin registry (name -> factory) and the ``Handle`` plugins get at construction.

A factory is any callable ``(args, handle) -> plugin``; a plugin class whose ``__init__`` takes
``(args, handle)`` is one. ``args`` is whatever the configuration resolved for the plugin: a pydantic model
(in-tree args), a plain dict (out-of-tree plugins, tests) or None; ``get_arg`` reads any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from kubesched.scheduler.cache import Cache, NodeTable
    from kubesched.scheduler.framework.runtime import Framework
    from kubesched.scheduler.podinfo import PodInfo
    from kubesched.scheduler.resources import ResourceIndex

PluginFactory = Callable[[Any, "Handle"], Any]


class Nominator(Protocol):
    """What the framework needs from the scheduling queue's nominator (pods nominated by preemption).

    ``nodes()`` lists the nodes that have nominated pods (``nodes_with_nominated_pods()`` is accepted too).
    """

    def nominated_pods_for_node(self, node_name: str) -> list[PodInfo]: ...

    def nodes(self) -> Collection[str]: ...


@dataclass
class Handle:
    """What plugins may use besides the pod: the cache, the API, the event recorder, the nominator.

    ``framework`` is set by the Framework that built the plugin (each framework gets its own copy of the
    handle), so a plugin such as DefaultPreemption can run the profile's filters. ``shared`` holds anything
    else the scheduler wants to hand to plugins (listers of namespaces, PDBs, ...), by name.
    """

    cache: Cache | None = None
    client: Any = None
    recorder: Any = None
    nominator: Nominator | None = None
    parallelism: int = 16
    framework: Framework | None = None
    shared: dict[str, Any] = field(default_factory=dict)

    @property
    def nodes(self) -> NodeTable:
        if self.cache is None:
            raise RuntimeError("this handle has no cache")
        return self.cache.table

    @property
    def res(self) -> ResourceIndex:
        if self.cache is None:
            raise RuntimeError("this handle has no cache")
        return self.cache.res


class Registry:
    """Plugin name -> factory."""

    def __init__(self, factories: Mapping[str, PluginFactory] | None = None) -> None:
        self._factories: dict[str, PluginFactory] = dict(factories or {})

    def register(self, name: str, factory: PluginFactory) -> None:
        if name in self._factories:
            raise ValueError(f"a plugin named {name!r} is already registered")
        self._factories[name] = factory

    def unregister(self, name: str) -> None:
        if name not in self._factories:
            raise KeyError(f"no plugin named {name!r} is registered")
        del self._factories[name]

    def merge(self, other: Registry | Mapping[str, PluginFactory]) -> None:
        """Add every plugin of ``other``; a name registered in both is an error (as upstream's Merge)."""
        items = other.items() if isinstance(other, Mapping) else other._factories.items()
        for name, factory in items:
            self.register(name, factory)

    def create(self, name: str, args: Any, handle: Handle) -> Any:
        factory = self._factories.get(name)
        if factory is None:
            raise KeyError(f"plugin {name!r} does not exist in the registry")
        plugin = factory(args, handle)
        if getattr(plugin, "name", None) is None:
            plugin.name = name
        return plugin

    def __contains__(self, name: object) -> bool:
        return name in self._factories

    def __getitem__(self, name: str) -> PluginFactory:
        return self._factories[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._factories)

    def __len__(self) -> int:
        return len(self._factories)

    def names(self) -> list[str]:
        return list(self._factories)

    def items(self) -> list[tuple[str, PluginFactory]]:
        return list(self._factories.items())


def _snake(camel: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)


_MISSING = object()


def get_arg(args: Any, key: str, default: Any = None) -> Any:
    """Read one field of plugin args given as a dict (camelCase keys), a pydantic model or another object
    (snake_case attributes), or None. ``key`` is the camelCase wire name (``"scoringStrategy"``)."""
    if args is None:
        return default
    if isinstance(args, Mapping):
        if key in args:
            return args[key]
        snake = _snake(key)
        return args.get(snake, default)
    value = getattr(args, _snake(key), _MISSING)
    if value is _MISSING:
        value = getattr(args, key, _MISSING)
    return default if value is _MISSING else value


__all__ = ["Handle", "Nominator", "PluginFactory", "Registry", "get_arg"]
