"""How kubesched components talk to a Kubernetes API server: raw dicts and orjson over aiohttp.

- :mod:`~kubesched.client.config`: where the server is and how to authenticate (kubeconfig, --master, in-cluster).
- :mod:`~kubesched.client.rest`: :class:`ApiClient`, the verbs, watches, :class:`ApiError`.
- :mod:`~kubesched.client.informer`: :class:`Informer`, a watched local mirror of one kind of object.
- :mod:`~kubesched.client.leaderelection`: :class:`LeaderElector`, client-go's Lease algorithm.
- :mod:`~kubesched.client.events`: :class:`EventRecorder`, events.k8s.io/v1 with series aggregation.
"""

from kubesched.client.config import ClientConfig, ConfigError, load_config, load_in_cluster_config
from kubesched.client.events import EventRecorder, object_reference
from kubesched.client.informer import (
    Backoff,
    DeletedFinalStateUnknown,
    Informer,
    freeze_gc,
    object_key,
    wait_for_cache_sync,
)
from kubesched.client.leaderelection import LeaderElectionRecord, LeaderElector, default_identity
from kubesched.client.rest import ApiClient, ApiError, WatchStream, resource_path

__all__ = [
    "ApiClient",
    "ApiError",
    "Backoff",
    "ClientConfig",
    "ConfigError",
    "DeletedFinalStateUnknown",
    "EventRecorder",
    "Informer",
    "LeaderElectionRecord",
    "LeaderElector",
    "WatchStream",
    "default_identity",
    "freeze_gc",
    "load_config",
    "load_in_cluster_config",
    "object_key",
    "object_reference",
    "resource_path",
    "wait_for_cache_sync",
]
