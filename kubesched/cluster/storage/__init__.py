"""Object storage behind the API: the ``Storage`` protocol (``interface.py``) and its backends: in memory
(``memory.py``), durable in an SQLite file (``sqlite.py``) or in etcd (``etcd.py``)."""

from kubesched.cluster.storage.etcd import EtcdStorage
from kubesched.cluster.storage.interface import Storage, Stored, Watch
from kubesched.cluster.storage.memory import MemoryStorage
from kubesched.cluster.storage.sqlite import SqliteStorage

__all__ = ["EtcdStorage", "MemoryStorage", "SqliteStorage", "Storage", "Stored", "Watch"]
