"""The kubelets of the local cluster.

- ``simulated.py``: every simulated node (KWOK-style, in-process): Node objects, heartbeat Leases, pods that
  "run" without any process.
- ``runtime.py``: the kubelet of a control-plane node, which runs pods of the kubesched image as real local
  processes (``static.py`` reads its manifest folder, ``volumes.py`` lays out volumes, ``probes.py`` runs
  probes, ``logs.py`` keeps container logs, ``launch.py`` is the in-mount-namespace launcher).
"""

from kubesched.cluster.kubelet.simulated import (
    KUBELET_VERSION,
    SIMULATED_ANNOTATION,
    ZONES_DEFAULT,
    NodeShape,
    SimulatedKubelets,
    node_object,
)

__all__ = [
    "KUBELET_VERSION",
    "SIMULATED_ANNOTATION",
    "ZONES_DEFAULT",
    "NodeShape",
    "SimulatedKubelets",
    "node_object",
]
