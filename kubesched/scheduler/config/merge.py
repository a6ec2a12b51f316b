"""Merging a profile's ``plugins`` into the defaults, and expanding ``multiPoint``, as kube-scheduler does.

Two steps, as upstream:

1. ``merge_plugins`` (upstream ``mergePluginSet``, per extension point and for ``multiPoint``): a custom
   ``disabled`` name drops that default, ``"*"`` drops them all; a custom ``enabled`` plugin that is also a
   default takes the default's place (keeping its position, taking the custom weight); other custom plugins
   follow the defaults in the user's order. ``disabled`` lists are kept for step 2.
2. ``expand_multi_point`` (upstream framework ``expandMultiPointPlugins``): each ``multiPoint`` plugin joins
   every point it implements, unless that point disables it (or disables ``"*"``). A plugin also enabled at
   the specific point overrides its multiPoint entry, and is moved first; then come the multiPoint plugins,
   then the rest of the specific ones. A score weight comes from the ``score`` entry if there is one, else
   from the ``multiPoint`` entry; unset means 1.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .plugins import EXTENSION_POINTS, MULTI_POINT, ExtensionPoint, point_attribute
from .types import PluginEntry, PluginRef, PluginSet, ProfilePlugins

ALL_POINTS: tuple[str, ...] = (*EXTENSION_POINTS, MULTI_POINT)
_EMPTY = PluginSet()


def merge_plugin_set(default: PluginSet, custom: PluginSet) -> PluginSet:
    """One extension point's custom set merged into its default set (see module docstring, step 1)."""
    disabled = (*custom.disabled, *default.disabled)
    disabled_names = set(disabled)
    # The last custom entry for a name is the one that replaces a default, as upstream's map does.
    custom_index = {entry.name: i for i, entry in enumerate(custom.enabled)}
    replaced: set[int] = set()
    enabled: list[PluginEntry] = []
    if "*" not in disabled_names:
        for entry in default.enabled:
            if entry.name in disabled_names:
                continue
            if entry.name in custom_index:
                i = custom_index[entry.name]
                replaced.add(i)
                entry = custom.enabled[i]
            enabled.append(entry)
    enabled.extend(entry for i, entry in enumerate(custom.enabled) if i not in replaced)
    return PluginSet(enabled=tuple(enabled), disabled=disabled)


def merge_plugins(defaults: Mapping[str, PluginSet], custom: Mapping[str, PluginSet]) -> dict[str, PluginSet]:
    """Every extension point (and ``multiPoint``) merged; points absent on either side count as empty."""
    return {
        str(point): merge_plugin_set(defaults.get(point, _EMPTY), custom.get(point, _EMPTY))
        for point in ALL_POINTS
    }


@dataclass(frozen=True)
class DuplicatePlugin:
    """A plugin that would run twice at one extension point (upstream: "already registered")."""

    point: str
    name: str


def expand_multi_point(
    merged: Mapping[str, PluginSet], points_of: Callable[[str], frozenset[str]]
) -> tuple[ProfilePlugins, list[DuplicatePlugin]]:
    """The plugins that run at each point, with score weights (see module docstring, step 2)."""
    multi = merged.get(MULTI_POINT, _EMPTY).enabled
    duplicates: list[DuplicatePlugin] = []
    by_point: dict[str, tuple[PluginRef, ...]] = {}
    for point in EXTENSION_POINTS:
        plugin_set = merged.get(point, _EMPTY)
        specific: list[str] = []
        for entry in plugin_set.enabled:
            if entry.name in specific:
                duplicates.append(DuplicatePlugin(point, entry.name))
            else:
                specific.append(entry.name)
        disabled = set(plugin_set.disabled)
        if "*" in disabled:
            order = specific
        else:
            overrides: set[str] = set()
            from_multi: list[str] = []
            for entry in multi:
                if point not in points_of(entry.name) or entry.name in disabled:
                    continue
                if entry.name in specific:
                    overrides.add(entry.name)
                elif entry.name in from_multi:
                    duplicates.append(DuplicatePlugin(point, entry.name))
                else:
                    from_multi.append(entry.name)
            order = (
                [n for n in specific if n in overrides]
                + from_multi
                + [n for n in specific if n not in overrides]
            )
        if point == ExtensionPoint.SCORE:
            weights = _score_weights(plugin_set.enabled, multi)
            by_point[point] = tuple(PluginRef(name, weights[name]) for name in order)
        else:
            by_point[point] = tuple(PluginRef(name) for name in order)
    return ProfilePlugins(**{point_attribute(p): refs for p, refs in by_point.items()}), duplicates


def _score_weights(score_entries: tuple[PluginEntry, ...], multi: tuple[PluginEntry, ...]) -> dict[str, int]:
    weights: dict[str, int] = {}
    for entry in (*score_entries, *multi):
        if entry.name not in weights:
            weights[entry.name] = entry.weight or 1
    return weights
