"""Former home of the in-memory store, kept so existing imports work; new code imports ``cluster.storage``.

(``cluster/cli.py`` still imports ``DEFAULT_HISTORY_SIZE`` from here.)
"""

from kubesched.cluster.storage.interface import (
    ADDED,
    BOOKMARK,
    CONTINUE_EXPIRED,
    DELETED,
    ERROR,
    LIST_EXPIRED,
    MODIFIED,
    Key,
    Obj,
    Predicate,
    Stored,
    object_key,
    with_rv,
)
from kubesched.cluster.storage.memory import DEFAULT_HISTORY_SIZE, Collection, Event, Watcher
from kubesched.cluster.storage.memory import MemoryStorage as Store

__all__ = [
    "ADDED",
    "BOOKMARK",
    "CONTINUE_EXPIRED",
    "DEFAULT_HISTORY_SIZE",
    "DELETED",
    "ERROR",
    "LIST_EXPIRED",
    "MODIFIED",
    "Collection",
    "Event",
    "Key",
    "Obj",
    "Predicate",
    "Store",
    "Stored",
    "Watcher",
    "object_key",
    "with_rv",
]
