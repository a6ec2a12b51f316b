"""The application's plugin catalogue, assembled once here and handed to the scheduler, ``simulate`` and the
benchmark: the in-tree plugins, load-aware scheduling's ``Dynamic``, and out-of-tree plugins installed as
Python packages.

An out-of-tree package registers its plugin under the entry-point group ``kubesched.plugins``, naming its
``PluginDefinition``::

    [project.entry-points."kubesched.plugins"]
    MyPlugin = "my_package.my_plugin:PLUGIN"
"""

from __future__ import annotations

import logging
from importlib.metadata import entry_points

from kubesched.scheduler.framework.catalogue import Catalogue, PluginDefinition

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kubesched.plugins"


def out_of_tree_definitions() -> list[PluginDefinition]:
    """The definitions installed packages register under ``kubesched.plugins``.

    An entry point that fails to load or names something else is an error: a scheduler silently missing a
    plugin its configuration relies on would only fail later, with a less helpful "unknown plugin".
    """
    found: list[PluginDefinition] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        definition = ep.load()
        if not isinstance(definition, PluginDefinition):
            raise TypeError(
                f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) names a "
                f"{type(definition).__name__}, not a PluginDefinition"
            )
        if definition.name != ep.name:
            log.warning(
                "entry point %s (%s) registers a plugin named %s", ep.name, ENTRY_POINT_GROUP, definition.name
            )
        found.append(definition)
    return found


def full_catalogue() -> Catalogue:
    """In-tree plugins, then Dynamic, then installed out-of-tree plugins (a duplicate name is an error)."""
    from kubesched import loadaware
    from kubesched.scheduler.plugins import in_tree_catalogue

    return in_tree_catalogue().extended(loadaware.PLUGIN, *out_of_tree_definitions())


__all__ = ["ENTRY_POINT_GROUP", "full_catalogue", "out_of_tree_definitions"]
