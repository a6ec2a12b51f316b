"""Object storage behind the API: the ``Storage`` protocol (``interface.py``) and its backends (``memory.py``)."""

from kubesched.cluster.storage.interface import Storage, Stored, Watch
from kubesched.cluster.storage.memory import MemoryStorage

__all__ = ["MemoryStorage", "Storage", "Stored", "Watch"]
