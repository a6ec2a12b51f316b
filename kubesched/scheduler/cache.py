"""The scheduler's view of the cluster: node state in numpy columns (``NodeTable``) and assumed pods (``Cache``).

A node lives in a *slot* (a row of every column) for as long as it exists; freed slots are reused. Plugins get
an array of slots per cycle and answer for all of them at once, which is why everything a Filter or Score needs
per node is kept here as a column: allocatable and requested resources, unschedulable, taint-set ids, label
columns, image sizes, host ports.

Upstream counterparts: ``backend/cache/cache.go`` (assumed pods, informer handlers) and ``framework/types.go``
(``NodeInfo`` accounting: ``Requested``, ``NonZeroRequested``, ``UsedPorts``, ``ImageStates``).

Rules for readers: arrays may be replaced when the table grows (more slots or more resource columns), so take
them from the table at the start of a cycle and do not keep them across cycles; everything returned is live
state, not a copy, and must not be mutated.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Protocol

import numpy as np

from kubesched.scheduler.podinfo import PodInfo
from kubesched.scheduler.resources import ResourceIndex

log = logging.getLogger(__name__)

Taint = tuple[str, str, str]  # (key, value, effect)
_MAX_LOG = 1 << 18
PortKey = tuple[str, str, int]  # (protocol, host IP, port)


class TableListener(Protocol):
    """Keeps an incremental index over the table (topology counts, affinity terms...)."""

    def on_pod_added(self, pi: PodInfo, slot: int) -> None: ...

    def on_pod_removed(self, pi: PodInfo, slot: int) -> None: ...

    def on_node_changed(self, slot: int) -> None: ...


# Kinds of node change, named as upstream's ActionTypes so the queue can map them to cluster events.
NODE_ALLOCATABLE = "UpdateNodeAllocatable"
NODE_LABEL = "UpdateNodeLabel"
NODE_TAINT = "UpdateNodeTaint"
NODE_CONDITION = "UpdateNodeCondition"
NODE_ANNOTATION = "UpdateNodeAnnotation"


def _taints_of(node: Mapping[str, Any]) -> tuple[tuple[Taint, ...], tuple[dict[str, Any], ...]]:
    raw = tuple((node.get("spec") or {}).get("taints") or ())
    return tuple((t.get("key") or "", t.get("value") or "", t.get("effect") or "") for t in raw), raw


def _images_of(node: Mapping[str, Any]) -> dict[str, int]:
    sizes: dict[str, int] = {}
    for image in (node.get("status") or {}).get("images") or ():
        size = int(image.get("sizeBytes") or 0)
        for name in image.get("names") or ():
            sizes[name] = size
    return sizes


def _conditions_key(node: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    conds = (node.get("status") or {}).get("conditions") or ()
    return tuple((c.get("type") or "", c.get("status") or "") for c in conds)


class NodeTable:
    """Node state as columns indexed by slot. See the module docstring for the rules."""

    def __init__(self, res: ResourceIndex | None = None, initial_capacity: int = 64) -> None:
        self.res = res if res is not None else ResourceIndex()
        self.capacity = 0
        self.num_nodes = 0
        self._width = 0  # resource columns currently allocated
        self.valid = np.zeros(0, dtype=bool)
        self.names: list[str | None] = []
        self.index: dict[str, int] = {}  # name -> slot, nodes that exist
        self._slot_of_name: dict[str, int] = {}  # also slots kept for pods whose node is absent
        self._nodes: list[dict[str, Any] | None] = []
        # (capacity, width) arrays kept column-major, so that one resource over a set of slots is a fast
        # ``arr.T[col].take(idx)`` and all resources are ``arr.T.take(idx, axis=1)``.
        self.allocatable = np.zeros((0, 0), dtype=np.int64, order="F")
        self.requested = np.zeros((0, 0), dtype=np.int64, order="F")
        self.free = np.zeros((0, 0), dtype=np.int64, order="F")  # allocatable - requested
        self.nonzero_requested = np.zeros((0, 2), dtype=np.int64, order="F")
        self._zero_alloc = np.zeros(0, dtype=np.int64)  # per column: existing nodes with allocatable 0
        self.unschedulable = np.zeros(0, dtype=bool)
        self.num_unschedulable = 0
        # Stamp of each slot's last change (node object, pods on it): equal stamps mean nothing changed.
        self.row_version = np.zeros(0, dtype=np.int64)
        self._stamp = 0
        # Every change as the slot it touched, in order; readers remember how far they have read.
        # Cleared (and ``log_epoch`` bumped) when it gets long, so a reader behind must start over.
        self.change_log: list[int] = []
        self.log_epoch = 0
        # Nonzero while a caller has changed ``free`` in place without ``touch`` (preemption's what-ifs, which
        # put it back before returning): answers memoised per slot from the change log must not be used then.
        self.unlogged_edits = 0
        self.labels: list[dict[str, str]] = []
        self.label_version = 0
        self._label_cols: dict[str, np.ndarray] = {}
        self.taints: list[tuple[dict[str, Any], ...]] = []
        self.taint_group = np.zeros(0, dtype=np.int32)
        self.taint_sets: list[tuple[Taint, ...]] = [()]
        self._taint_set_ids: dict[tuple[Taint, ...], int] = {(): 0}
        self.num_tainted = 0
        self.used_ports: list[set[PortKey] | None] = []
        self._port_counts: list[Counter[PortKey] | None] = []
        self.port_slots: set[int] = set()
        self._node_images: list[dict[str, int]] = []
        self._images: dict[str, dict[int, int]] = {}
        self._image_arrays: dict[str, np.ndarray] = {}
        self._conditions: list[tuple[tuple[str, str], ...]] = []
        self._annotations: list[Mapping[str, str]] = []
        self._pods: list[dict[str, PodInfo]] = []
        self._pod_slot: dict[str, int] = {}
        self._free: list[int] = []
        self._slots_cache: np.ndarray | None = None
        self.node_version = 0  # bumps when the set of nodes changes
        self._listeners: list[TableListener] = []
        # Each listener with its optional ``on_pod_replaced`` (looked up once, used for every confirmed binding).
        self._replacers: list[tuple[TableListener, Callable[[PodInfo, PodInfo, int], None] | None]] = []
        self._shared: dict[str, Any] = {}
        self._grow(max(1, initial_capacity))
        self.ensure_columns()

    # --- shape ---------------------------------------------------------------------------------------------

    @property
    def width(self) -> int:
        """Number of resource columns in ``allocatable``/``requested``."""
        return self._width

    def ensure_columns(self) -> None:
        """Widen the resource arrays if the ResourceIndex grew (cheap when it did not)."""
        need = self.res.count
        if need <= self._width:
            return
        extra = np.zeros((self.capacity, need - self._width), dtype=np.int64)
        self.allocatable = np.asfortranarray(np.hstack((self.allocatable, extra)))
        self.requested = np.asfortranarray(np.hstack((self.requested, extra)))
        self.free = np.asfortranarray(np.hstack((self.free, extra)))
        added = np.full(need - self._width, self.num_nodes, dtype=np.int64)
        self._zero_alloc = np.concatenate((self._zero_alloc, added))
        self._width = need

    def _grow(self, new_capacity: int) -> None:
        old = self.capacity
        if new_capacity <= old:
            return
        add = new_capacity - old
        self.valid = np.concatenate((self.valid, np.zeros(add, dtype=bool)))
        rows = np.zeros((add, self._width), dtype=np.int64)
        self.allocatable = np.asfortranarray(np.vstack((self.allocatable, rows)))
        self.requested = np.asfortranarray(np.vstack((self.requested, rows)))
        self.free = np.asfortranarray(np.vstack((self.free, rows)))
        nz = np.zeros((add, 2), dtype=np.int64)
        self.nonzero_requested = np.asfortranarray(np.vstack((self.nonzero_requested, nz)))
        self.unschedulable = np.concatenate((self.unschedulable, np.zeros(add, dtype=bool)))
        self.row_version = np.concatenate((self.row_version, np.zeros(add, dtype=np.int64)))
        self.taint_group = np.concatenate((self.taint_group, np.zeros(add, dtype=np.int32)))
        for key, col in self._label_cols.items():
            self._label_cols[key] = np.concatenate((col, np.full(add, None, dtype=object)))
        for key, arr in self._image_arrays.items():
            self._image_arrays[key] = np.concatenate((arr, np.zeros(add, dtype=np.int64)))
        self.names.extend([None] * add)
        self._nodes.extend([None] * add)
        self.labels.extend({} for _ in range(add))
        self.taints.extend(() for _ in range(add))
        self.used_ports.extend([None] * add)
        self._port_counts.extend([None] * add)
        self._node_images.extend({} for _ in range(add))
        self._conditions.extend(() for _ in range(add))
        self._annotations.extend({} for _ in range(add))
        self._pods.extend({} for _ in range(add))
        self._free.extend(range(new_capacity - 1, old - 1, -1))  # pop() hands out the lowest slot first
        self.capacity = new_capacity

    def _take_slot(self, name: str) -> int:
        if not self._free:
            self._grow(self.capacity * 2)
        slot = self._free.pop()
        self.names[slot] = name
        self._slot_of_name[name] = slot
        return slot

    def _release_slot(self, slot: int) -> None:
        name = self.names[slot]
        if name is not None:
            self._slot_of_name.pop(name, None)
        self.names[slot] = None
        self.allocatable[slot] = 0
        self.requested[slot] = 0
        self.free[slot] = 0
        self.nonzero_requested[slot] = 0
        self._free.append(slot)

    def slots(self) -> np.ndarray:
        """Slots of existing nodes, ascending (cached until a node is added or removed)."""
        if self._slots_cache is None:
            cache = np.flatnonzero(self.valid).astype(np.intp)
            cache.flags.writeable = False
            self._slots_cache = cache
        return self._slots_cache

    def __contains__(self, name: object) -> bool:
        return name in self.index

    def node(self, slot: int) -> dict[str, Any]:
        node = self._nodes[slot]
        if node is None:
            raise KeyError(f"slot {slot} holds no node")
        return node

    def node_by_name(self, name: str) -> dict[str, Any] | None:
        slot = self.index.get(name)
        return None if slot is None else self._nodes[slot]

    # --- listeners -----------------------------------------------------------------------------------------

    def add_listener(self, listener: TableListener) -> None:
        if listener not in self._listeners:
            self._listeners.append(listener)
            self._replacers.append((listener, getattr(listener, "on_pod_replaced", None)))

    def shared(self, key: str, make: Callable[[], Any]) -> Any:
        """One object per table and ``key``, built by ``make()`` on first use: indexes several plugins keep over
        the same pods (say, per-node pod counts) are then maintained once per pod event instead of once each."""
        found = self._shared.get(key)
        if found is None:
            found = self._shared[key] = make()
        return found

    def touch(self, slot: int) -> None:
        """Mark ``slot`` changed: new ``row_version`` stamp, an entry in ``change_log``."""
        self._stamp += 1
        self.row_version[slot] = self._stamp
        log = self.change_log
        if len(log) >= _MAX_LOG:
            log.clear()
            self.log_epoch += 1
        log.append(slot)

    def _node_changed(self, slot: int) -> None:
        self.touch(slot)
        for lst in self._listeners:
            lst.on_node_changed(slot)

    # --- nodes ---------------------------------------------------------------------------------------------

    def add_node(self, node: dict[str, Any]) -> int:
        """Add (or, if it exists, update) a node; returns its slot."""
        name = (node.get("metadata") or {}).get("name") or ""
        slot = self.index.get(name)
        if slot is not None:
            self.update_node(node)
            return slot
        slot = self._slot_of_name.get(name)  # pods may have arrived before their node
        if slot is None:
            slot = self._take_slot(name)
        self.valid[slot] = True
        self.index[name] = slot
        self.num_nodes += 1
        self._zero_alloc += self.allocatable[slot] == 0
        self._slots_cache = None
        self.node_version += 1
        self._set_node(slot, node)
        self._node_changed(slot)
        return slot

    def update_node(self, node: dict[str, Any]) -> set[str]:
        """Replace a node's object; returns the kinds of change (``UpdateNodeLabel``, ``UpdateNodeTaint``...)."""
        name = (node.get("metadata") or {}).get("name") or ""
        slot = self.index.get(name)
        if slot is None:
            self.add_node(node)
            return {"Add"}
        changes = self._set_node(slot, node)
        self._node_changed(slot)
        return changes

    def remove_node(self, name: str) -> int | None:
        """Remove a node; its slot stays reserved while pods still point at it. Returns the slot."""
        slot = self.index.pop(name, None)
        if slot is None:
            return None
        self.valid[slot] = False
        self.num_nodes -= 1
        self._slots_cache = None
        self.node_version += 1
        if self.unschedulable[slot]:
            self.num_unschedulable -= 1
            self.unschedulable[slot] = False
        if self.taint_group[slot]:
            self.num_tainted -= 1
            self.taint_group[slot] = 0
        self.taints[slot] = ()
        self._set_labels(slot, {})
        self._set_images(slot, {})
        self._zero_alloc -= self.allocatable[slot] == 0
        self.allocatable[slot] = 0
        self.free[slot] = -self.requested[slot]
        self._nodes[slot] = None
        self._conditions[slot] = ()
        self._annotations[slot] = {}
        if not self._pods[slot]:
            self._release_slot(slot)
        self._node_changed(slot)
        return slot

    def _set_node(self, slot: int, node: dict[str, Any]) -> set[str]:
        changes: set[str] = set()
        self._nodes[slot] = node
        meta = node.get("metadata") or {}
        spec = node.get("spec") or {}
        status = node.get("status") or {}

        alloc = self.res.parse_list(status.get("allocatable"))
        self.ensure_columns()
        row = self.allocatable[slot]
        if not np.array_equal(row[: len(alloc)], alloc) or row[len(alloc) :].any():
            was_zero = row == 0
            row[:] = 0
            row[: len(alloc)] = alloc
            self._zero_alloc += (row == 0).astype(np.int64) - was_zero
            self.free[slot] = row - self.requested[slot]
            changes.add(NODE_ALLOCATABLE)

        unsched = bool(spec.get("unschedulable"))
        if unsched != bool(self.unschedulable[slot]):
            self.num_unschedulable += 1 if unsched else -1
            self.unschedulable[slot] = unsched
            changes.add(NODE_TAINT)  # upstream reports spec.unschedulable changes as a taint update

        taint_key, raw_taints = _taints_of(node)
        gid = self._taint_set_ids.get(taint_key)
        if gid is None:
            gid = len(self.taint_sets)
            self.taint_sets.append(taint_key)
            self._taint_set_ids[taint_key] = gid
        old_gid = int(self.taint_group[slot])
        if gid != old_gid:
            self.num_tainted += (gid != 0) - (old_gid != 0)
            self.taint_group[slot] = gid
            changes.add(NODE_TAINT)
        self.taints[slot] = raw_taints

        labels = meta.get("labels") or {}
        if labels != self.labels[slot]:
            self._set_labels(slot, dict(labels))
            changes.add(NODE_LABEL)

        images = _images_of(node)
        if images != self._node_images[slot]:
            self._set_images(slot, images)

        conds = _conditions_key(node)
        if conds != self._conditions[slot]:
            self._conditions[slot] = conds
            changes.add(NODE_CONDITION)
        annotations = meta.get("annotations") or {}
        if annotations != self._annotations[slot]:
            self._annotations[slot] = annotations
            changes.add(NODE_ANNOTATION)
        return changes

    def _set_labels(self, slot: int, labels: dict[str, str]) -> None:
        self.labels[slot] = labels
        for key, col in self._label_cols.items():
            col[slot] = labels.get(key)
        self.label_version += 1

    def label_column(self, key: str) -> np.ndarray:
        """The value of label ``key`` per slot (None where absent or no node); cached, kept current."""
        col = self._label_cols.get(key)
        if col is None:
            col = np.full(self.capacity, None, dtype=object)
            for slot in self.slots():
                value = self.labels[slot].get(key)
                if value is not None:
                    col[slot] = value
            self._label_cols[key] = col
        return col

    # --- images --------------------------------------------------------------------------------------------

    def _set_images(self, slot: int, images: dict[str, int]) -> None:
        old = self._node_images[slot]
        for name in old.keys() - images.keys():
            holders = self._images.get(name)
            if holders is not None:
                holders.pop(slot, None)
                if not holders:
                    del self._images[name]
            self._image_arrays.pop(name, None)
        for name, size in images.items():
            if old.get(name) != size:
                self._images.setdefault(name, {})[slot] = size
                self._image_arrays.pop(name, None)
        self._node_images[slot] = images

    def image_node_count(self, image: str) -> int:
        """Number of nodes that report ``image`` (exact name, as in ``status.images[].names``)."""
        holders = self._images.get(image)
        return len(holders) if holders else 0

    def image_sizes(self, image: str) -> np.ndarray:
        """Size in bytes of ``image`` on each slot (0 where absent); cached until the image's holders change."""
        arr = self._image_arrays.get(image)
        if arr is None:
            arr = np.zeros(self.capacity, dtype=np.int64)
            for slot, size in (self._images.get(image) or {}).items():
                arr[slot] = size
            arr.flags.writeable = False
            if len(self._image_arrays) > 512:
                self._image_arrays.clear()
            self._image_arrays[image] = arr
        return arr

    def node_images(self, slot: int) -> Mapping[str, int]:
        return self._node_images[slot]

    # --- pods ----------------------------------------------------------------------------------------------

    def pods_on(self, slot: int) -> dict[str, PodInfo]:
        """uid -> PodInfo of the pods (assumed included) on ``slot``. Live: do not mutate."""
        return self._pods[slot]

    def pod_slot(self, uid: str) -> int | None:
        return self._pod_slot.get(uid)

    def pod(self, uid: str) -> PodInfo | None:
        slot = self._pod_slot.get(uid)
        return None if slot is None else self._pods[slot].get(uid)

    @property
    def num_pods(self) -> int:
        return len(self._pod_slot)

    def iter_pods(self) -> Iterator[tuple[PodInfo, int]]:
        for uid, slot in self._pod_slot.items():
            yield self._pods[slot][uid], slot

    def add_pod(self, pi: PodInfo, node_name: str, *, notify: bool = True) -> int:
        """Account ``pi`` on ``node_name`` (the node need not exist yet). ``notify=False`` skips the listeners,
        for what-if evaluations that undo themselves."""
        if pi.uid in self._pod_slot:
            raise ValueError(f"pod {pi.key} ({pi.uid}) is already in the node table")
        slot = self._slot_of_name.get(node_name)
        if slot is None:
            slot = self._take_slot(node_name)
        if len(pi.requests) > self._width:
            self.ensure_columns()
        n = len(pi.requests)
        self.requested[slot, :n] += pi.requests
        self.free[slot, :n] -= pi.requests
        nz = self.nonzero_requested[slot]
        nz[0] += pi.nonzero_cpu
        nz[1] += pi.nonzero_mem
        self._pods[slot][pi.uid] = pi
        self._pod_slot[pi.uid] = slot
        self.touch(slot)
        if pi.host_ports:
            counts = self._port_counts[slot]
            if counts is None:
                counts = self._port_counts[slot] = Counter()
                self.used_ports[slot] = set()
            for port in pi.host_ports:
                counts[port] += 1
                self.used_ports[slot].add(port)  # type: ignore[union-attr]
            self.port_slots.add(slot)
        if notify:
            for lst in self._listeners:
                lst.on_pod_added(pi, slot)
        return slot

    def remove_pod(self, uid: str, *, notify: bool = True) -> PodInfo | None:
        slot = self._pod_slot.pop(uid, None)
        if slot is None:
            return None
        pi = self._pods[slot].pop(uid)
        self.touch(slot)
        n = len(pi.requests)
        self.requested[slot, :n] -= pi.requests
        self.free[slot, :n] += pi.requests
        nz = self.nonzero_requested[slot]
        nz[0] -= pi.nonzero_cpu
        nz[1] -= pi.nonzero_mem
        if pi.host_ports:
            counts = self._port_counts[slot]
            used = self.used_ports[slot]
            if counts is not None and used is not None:
                for port in pi.host_ports:
                    counts[port] -= 1
                    if counts[port] <= 0:
                        del counts[port]
                        used.discard(port)
                if not counts:
                    self._port_counts[slot] = None
                    self.used_ports[slot] = None
                    self.port_slots.discard(slot)
        if notify:
            for lst in self._listeners:
                lst.on_pod_removed(pi, slot)
        if not self.valid[slot] and not self._pods[slot]:
            self._release_slot(slot)
        return pi

    def restore_pod_order(self, slot: int, uids: list[str]) -> None:
        """Put the pods of ``slot`` back in the order of ``uids`` (exactly the uids there now). A what-if that
        removed and re-added pods moved them to the end; upstream works on a copy, so the order (which breaks
        ties between equally important preemption victims) must not change."""
        pods = self._pods[slot]
        if list(pods) != uids:
            ordered = {uid: pods[uid] for uid in uids}
            pods.clear()
            pods.update(ordered)

    def replace_pod(self, pi: PodInfo) -> None:
        """Swap in a new version of a pod already on its node whose footprint (``same_footprint``) is unchanged:
        no column update and no ``touch``, since nothing computed from the row can differ. The pod still moves
        to the end of its node's pods, as a remove and re-add would."""
        slot = self._pod_slot[pi.uid]
        pods = self._pods[slot]
        old = pods.pop(pi.uid)
        pods[pi.uid] = pi
        for lst, replaced in self._replacers:
            if replaced is not None:
                replaced(old, pi, slot)
            else:
                lst.on_pod_removed(old, slot)
                lst.on_pod_added(pi, slot)

    def update_pod(self, old: PodInfo, new: PodInfo) -> None:
        """Replace ``old`` by ``new`` (same uid), moving it if ``new.node_name`` names another node."""
        slot = self._pod_slot.get(old.uid)
        if slot is None:
            if new.node_name:
                self.add_pod(new, new.node_name)
            return
        node_name = new.node_name or self.names[slot] or ""
        self.remove_pod(old.uid)
        self.add_pod(new, node_name)

    def zero_allocatable(self, col: int) -> int:
        """How many existing nodes have no allocatable of resource column ``col``."""
        return int(self._zero_alloc[col]) if col < self._width else self.num_nodes

    def column(self, arr: np.ndarray, col: int, idx: np.ndarray) -> np.ndarray:
        """``arr[idx, col]`` for one of the column-major arrays, the fast way."""
        return arr.T[col].take(idx)


def same_footprint(a: PodInfo, b: PodInfo) -> bool:
    """Whether two versions of a pod count the same on a node: resources, ports, and what the indexes over
    existing pods read (namespace, labels, pod (anti-)affinity, priority, deletion)."""
    return (
        a.nonzero_cpu == b.nonzero_cpu
        and a.nonzero_mem == b.nonzero_mem
        and a.namespace == b.namespace
        and a.priority == b.priority
        and a.deletion_ts == b.deletion_ts
        and a.host_ports == b.host_ports
        and (a.requests is b.requests or np.array_equal(a.requests, b.requests))
        and a.labels == b.labels
        and a.pod_affinity == b.pod_affinity
        and a.pod_anti_affinity == b.pod_anti_affinity
    )


class SlotMemo:
    """Per-node results of a pure function of a node's row (resources, pods, node object) and a key (say, the
    pod's request vector), kept for every node and brought up to date from the table's ``change_log``.

    Typical use: a Score plugin's result for the replicas of one Deployment, which differ from the previous
    cycle only on the node that took the last replica. A new key costs one vectorised pass over all nodes;
    after that a lookup is one ``take`` plus recomputing the few slots that changed.
    """

    def __init__(self, max_keys: int = 32, dtype: Any = np.int64) -> None:
        self.max_keys = max_keys
        self.dtype = dtype
        self._entries: dict[Any, list[Any]] = {}  # key -> [values, log epoch, log position]

    def get(
        self,
        nodes: NodeTable,
        key: Any,
        idx: np.ndarray,
        compute: Callable[[np.ndarray], np.ndarray],
        compute_one: Callable[[int], int] | None = None,
    ) -> np.ndarray:
        """``compute(idx)``, from remembered answers for unchanged slots. ``compute`` must accept any slots,
        including ones without a node; ``compute_one(slot)``, if given, is the same for one slot."""
        log = nodes.change_log
        entry = self._entries.get(key)
        if entry is not None and entry[1] == nodes.log_epoch and len(entry[0]) == nodes.capacity:
            # The usual cases first: nothing changed since the last lookup, or one slot (the node that took the
            # last pod), recomputed in plain Python when the caller can.
            values = entry[0]
            seen = entry[2]
            n = len(log)
            if seen == n:
                return values.take(idx)
            if n - seen == 1 and compute_one is not None:
                slot = log[seen]
                values[slot] = compute_one(slot)
                entry[2] = n
                return values.take(idx)
        if (
            entry is None
            or entry[1] != nodes.log_epoch
            or len(entry[0]) != nodes.capacity
            or len(log) - entry[2] > max(64, nodes.num_nodes // 8)
        ):
            if entry is None and len(self._entries) >= self.max_keys:
                self._entries.pop(next(iter(self._entries)))
            values = np.zeros(nodes.capacity, dtype=self.dtype)
            every = nodes.slots()
            if len(every):
                values[every] = compute(every)
            self._entries[key] = [values, nodes.log_epoch, len(log)]
            return values.take(idx)
        values = entry[0]
        if entry[2] < len(log):
            pending = log[entry[2] :]
            if compute_one is not None and len(pending) <= 4:
                # The usual case (the node that took the last pod): plain Python, no arrays to build.
                for slot in set(pending):
                    values[slot] = compute_one(slot)
            else:
                changed = np.array(sorted(set(pending)), dtype=np.intp)
                values[changed] = compute(changed)
            entry[2] = len(log)
        return values.take(idx)

    def clear(self) -> None:
        self._entries.clear()


class Cache:
    """The NodeTable plus upstream's assumed-pod bookkeeping and informer handlers.

    A pod is *assumed* on a node between the scheduling cycle and the informer reporting it bound: it already
    counts on the node so the next cycles see the resources taken. Assumed pods never expire (upstream's
    default since 1.2x): only ``forget`` or the informer removes them.
    """

    def __init__(self, res: ResourceIndex | None = None) -> None:
        self.res = res if res is not None else ResourceIndex()
        self.table = NodeTable(self.res)
        self._assumed: dict[str, PodInfo] = {}
        self._infos: dict[str, PodInfo] = {}  # uid -> informer PodInfo (last version seen)

    # --- building PodInfo ----------------------------------------------------------------------------------

    def pod_info(self, pod: dict[str, Any]) -> PodInfo:
        """A PodInfo for ``pod``, reusing the one already built for the same object version."""
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or ""
        known = self._infos.get(uid) or self._assumed.get(uid)
        if known is not None and known.pod is pod:
            return known
        rv = meta.get("resourceVersion")
        if (
            known is not None
            and rv
            and known.resource_version == rv
            and known.node_name == ((pod.get("spec") or {}).get("nodeName") or "")
        ):
            return known
        if known is not None:
            rebound = known.bound_version(pod)
            if rebound is not None:
                return rebound
        return PodInfo.from_pod(pod, self.res)

    # --- queries -------------------------------------------------------------------------------------------

    @property
    def pods(self) -> dict[str, PodInfo]:
        """Every scheduled pod the cache accounts for (assumed ones included), uid -> PodInfo."""
        return {pi.uid: pi for pi, _ in self.table.iter_pods()}

    def get_pod(self, uid: str) -> PodInfo | None:
        return self.table.pod(uid)

    def is_assumed(self, uid: str) -> bool:
        return uid in self._assumed

    @property
    def assumed(self) -> Mapping[str, PodInfo]:
        return self._assumed

    def stats(self) -> dict[str, int]:
        """For ``scheduler_scheduler_cache_size{type=nodes|pods|assumed_pods}``."""
        return {
            "nodes": self.table.num_nodes,
            "pods": self.table.num_pods,
            "assumed_pods": len(self._assumed),
        }

    # --- assumed pods --------------------------------------------------------------------------------------

    def assume(self, pi: PodInfo, node_name: str) -> PodInfo:
        """Count ``pi`` on ``node_name`` before the binding lands; returns the assumed PodInfo."""
        if self.table.pod_slot(pi.uid) is not None:
            raise ValueError(f"pod {pi.key} ({pi.uid}) is in the cache, so can't be assumed")
        assumed = pi.assumed_on(node_name)
        self.table.add_pod(assumed, node_name)
        self._assumed[pi.uid] = assumed
        return assumed

    def forget(self, uid: str) -> PodInfo | None:
        """Undo ``assume`` (binding failed or the pod was rejected after Reserve)."""
        pi = self._assumed.pop(uid, None)
        if pi is None:
            return None
        return self.table.remove_pod(uid)

    # --- informer: nodes -----------------------------------------------------------------------------------

    def on_node_add(self, node: dict[str, Any]) -> int:
        return self.table.add_node(node)

    def on_node_update(self, old: dict[str, Any] | None, new: dict[str, Any]) -> set[str]:
        return self.table.update_node(new)

    def on_node_delete(self, node: dict[str, Any]) -> None:
        self.table.remove_node((node.get("metadata") or {}).get("name") or "")

    # --- informer: pods ------------------------------------------------------------------------------------

    def on_pod_add(self, pod: dict[str, Any]) -> PodInfo | None:
        """A pod the informer reports. Only bound, non-terminal pods are accounted; returns the PodInfo kept."""
        pi = self.pod_info(pod)
        uid = pi.uid
        if not pi.node_name or pi.is_terminal:
            self._drop(uid)
            return None
        self._infos[uid] = pi
        assumed = self._assumed.pop(uid, None)
        current = self.table.pod(uid)
        if current is not None:
            if assumed is not None and assumed.node_name != pi.node_name:
                log.warning(
                    "pod %s was assumed on %s but bound to %s", pi.key, assumed.node_name, pi.node_name
                )
            if current.node_name == pi.node_name and same_footprint(current, pi):
                self.table.replace_pod(pi)  # the usual confirmation of an assumed pod: nothing to recount
            else:
                self.table.update_pod(current, pi)
        else:
            self.table.add_pod(pi, pi.node_name)
        return pi

    def on_pod_update(self, old: dict[str, Any] | None, new: dict[str, Any]) -> PodInfo | None:
        return self.on_pod_add(new)

    def on_pod_delete(self, pod: dict[str, Any]) -> PodInfo | None:
        uid = (pod.get("metadata") or {}).get("uid") or ""
        return self._drop(uid)

    def _drop(self, uid: str) -> PodInfo | None:
        self._infos.pop(uid, None)
        self._assumed.pop(uid, None)
        return self.table.remove_pod(uid)
