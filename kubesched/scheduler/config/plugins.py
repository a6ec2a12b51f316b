"""Extension points as the configuration names them, and the upstream plugins kubesched does not implement.

Which plugins exist, and which points each implements, is the ``Catalogue`` the configuration is loaded
with (``load_config(..., catalogue=...)``; ``kubesched.catalogue.full_catalogue()`` in the application).
"""

from __future__ import annotations

from enum import StrEnum


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


# Upstream in-tree plugins that kubesched does not implement (yet). They appear in upstream default plugin
# sets; unless the catalogue supplies them, they are dropped from the defaults (recorded on the profile) and
# naming one explicitly is an "unknown plugin" error that says so.
UPSTREAM_UNIMPLEMENTED: frozenset[str] = frozenset(
    {
        "NodeDeclaredFeatures",
        "EBSLimits",
        "GCEPDLimits",
        "AzureDiskLimits",
        "CinderLimits",
        "SelectorSpread",
    }
)
