"""ImageLocality: prefer nodes that already hold the pod's images, weighing each image by its size and by how
widely it is spread (an image on every node says little), clamped between 23 MB and 1000 MB per container."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from kubesched.scheduler.framework.catalogue import PluginDefinition
from kubesched.scheduler.framework.interface import MAX_NODE_SCORE, CycleState

if TYPE_CHECKING:
    from kubesched.scheduler.cache import NodeTable
    from kubesched.scheduler.podinfo import PodInfo

NAME = "ImageLocality"
MB = 1024 * 1024
MIN_THRESHOLD = 23 * MB
MAX_CONTAINER_THRESHOLD = 1000 * MB


class ImageLocality:
    name = NAME
    scores_in_range = True

    def __init__(self, args: None = None, handle: Any = None) -> None:
        pass

    def sign_pod(self, pod: PodInfo) -> tuple[object, ...] | None:
        """Opportunistic batching: the pod's container images decide the score."""
        return pod.images

    def constant_score(self, pod: PodInfo, nodes: NodeTable) -> bool:
        """No node has any of the pod's images: every node scores 0."""
        for image in pod.images:
            if nodes.image_node_count(image):
                return False
        return True

    def score(self, state: CycleState, pod: PodInfo, nodes: NodeTable, idx: np.ndarray) -> np.ndarray:
        total_nodes = nodes.num_nodes
        sums: np.ndarray | None = None
        for image in pod.images:  # init containers and containers, one entry per container
            holders = nodes.image_node_count(image)
            if not holders:
                continue
            spread = holders / total_nodes
            scaled = (nodes.image_sizes(image)[idx].astype(np.float64) * spread).astype(np.int64)
            sums = scaled if sums is None else sums + scaled
        if sums is None or pod.num_containers == 0:
            return np.zeros(len(idx), dtype=np.int64)
        max_threshold = MAX_CONTAINER_THRESHOLD * pod.num_containers
        clamped = np.clip(sums, MIN_THRESHOLD, max_threshold)
        return MAX_NODE_SCORE * (clamped - MIN_THRESHOLD) // (max_threshold - MIN_THRESHOLD)


PLUGIN = PluginDefinition(NAME, ImageLocality)
