"""The controllers' shared view of pods: an index by controlling owner, and which namespaces anyone selects in.

kube-controller-manager's controllers share one pod informer; here the ``ClusterApi`` observer hook feeds this
index synchronously at commit time. It holds only pods that have a controller (``owned_by``): a bare pod costs one
check of its ownerReferences and, if no controller selects pods in its namespace, nothing more. That keeps the
benchmark's 10,000 bare pods free of controller work.
"""

from __future__ import annotations

from collections import Counter

from kubesched.cluster.controllers.base import Key, Obj, controller_ref, key_of, meta_of


class PodIndex:
    def __init__(self) -> None:
        self._owned: dict[str, dict[Key, Obj]] = {}  # controller uid -> pod key -> pod
        # Namespaces in which some ReplicaSet, ReplicationController or PodDisruptionBudget selects pods: orphan
        # pods elsewhere need no further look.
        self.selecting: Counter[str] = Counter()

    def owned_by(self, uid: str) -> dict[Key, Obj]:
        return self._owned.get(uid) or {}

    def observe(self, new: Obj | None, old: Obj | None) -> None:
        """Keep the index current after a committed pod write (either side may be None)."""
        new_ref = controller_ref(new) if new is not None else None
        old_ref = controller_ref(old) if old is not None else None
        if old_ref is not None and (new_ref is None or new_ref.get("uid") != old_ref.get("uid")):
            assert old is not None
            self._drop(str(old_ref.get("uid")), key_of(old))
        if new_ref is not None:
            assert new is not None
            self._owned.setdefault(str(new_ref.get("uid")), {})[key_of(new)] = new

    def _drop(self, uid: str, key: Key) -> None:
        pods = self._owned.get(uid)
        if pods is not None:
            pods.pop(key, None)
            if not pods:
                del self._owned[uid]

    def remove(self, old: Obj) -> None:
        ref = controller_ref(old)
        if ref is not None:
            self._drop(str(ref.get("uid")), key_of(old))

    def wants(self, pod: Obj) -> bool:
        """Whether any controller may care about this pod (it has owners, or its namespace is selected in)."""
        meta = meta_of(pod)
        return bool(meta.get("ownerReferences")) or meta.get("namespace", "") in self.selecting
