"""What the volume plugins cost a pod without volumes: one PreFilter call each, answered SKIP (so Filter and
Score never run for it), VolumeBinding's SKIP at PreScore and a Reserve that reads one key; and no table listener
until a pod with volumes is seen. Counted with spies on the real framework, not timed."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
from volume_objects import THREE_ZONES, pod, pvc, storage_class

from kubesched.scheduler.cache import Cache
from kubesched.scheduler.config import default_config
from kubesched.scheduler.framework.handle import Handle
from kubesched.scheduler.framework.interface import CycleState
from kubesched.scheduler.framework.runtime import Framework
from kubesched.scheduler.plugins import in_tree_catalogue
from kubesched.scheduler.volumes.listers import static_volumes
from kubesched.scheduler.volumes.usage import VolumeUsage

VOLUME_PLUGINS = ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone")


def spied_framework(objects: list[dict[str, Any]]) -> tuple[Framework, Cache, Counter[str]]:
    cache = Cache()
    for n in THREE_ZONES:
        cache.on_node_add(n)
    fw = Framework.from_profile(
        default_config().profiles[0],
        in_tree_catalogue(),
        Handle(cache=cache, volumes=static_volumes(objects)),
    )
    calls: Counter[str] = Counter()
    for name in VOLUME_PLUGINS:
        plugin = fw.plugin(name)
        for method in ("pre_filter", "filter", "pre_score", "score", "reserve"):
            original = getattr(plugin, method, None)
            if original is None:
                continue

            def spy(*args: Any, _o: Any = original, _k: str = f"{name}.{method}") -> Any:
                calls[_k] += 1
                return _o(*args)

            setattr(plugin, method, spy)
    return fw, cache, calls


def one_cycle(fw: Framework, cache: Cache, the_pod: dict[str, Any]) -> CycleState:
    state = CycleState()
    pi = cache.pod_info(the_pod)
    _, status, _ = fw.run_pre_filter(state, pi)
    assert status.ok
    idx = np.array(sorted(cache.table.index.values()), dtype=np.intp)
    fw._filter_chunk(state, pi, cache.table, idx)
    fw._score_nodes(state, pi, cache.table, idx, False)
    assert fw.run_reserve(state, pi, "node-a").ok
    return state


def test_a_pod_without_volumes_skips_filter_and_score() -> None:
    fw, cache, calls = spied_framework([])
    projected = {"name": "kube-api-access", "projected": {"sources": []}}  # what every real pod carries
    state = one_cycle(fw, cache, pod("plain", volumes=[projected]))
    assert set(VOLUME_PLUGINS) <= state.skip_filter
    assert "VolumeBinding" in state.skip_score
    assert calls == Counter(
        {f"{n}.pre_filter": 1 for n in VOLUME_PLUGINS}
        | {"VolumeBinding.pre_score": 1, "VolumeBinding.reserve": 1}
    )
    # No listener on the node table until a pod with volumes comes.
    usage = fw.handle.singletons.find(VolumeUsage)
    assert usage is None or usage.table is None


def test_a_pod_with_a_claim_runs_the_filters() -> None:
    objs = [storage_class("std", provisioner="csi.example.com"), pvc("c", "std")]
    fw, cache, calls = spied_framework(objs)
    state = one_cycle(fw, cache, pod("with-claim", "c"))
    assert calls["VolumeBinding.filter"] == 1 and calls["NodeVolumeLimits.filter"] == 1
    assert "VolumeZone" in state.skip_filter  # an unbound WaitForFirstConsumer claim has no zone yet
    assert "VolumeRestrictions" in state.skip_filter  # no disks, no ReadWriteOncePod claim
    usage = fw.handle.singletons.find(VolumeUsage)
    assert usage is not None and usage.table is cache.table
