"""What every controller shares, as kube-controller-manager's controllers share client-go's machinery.

- ``Clock``: wall time in seconds; tests pass a ``FakeClock`` so ``minReadySeconds`` and progress deadlines are
  deterministic.
- ``WorkQueue``: keys, not objects, deduplicated while waiting (a burst of pod events becomes one sync), never
  processed twice at once, delayed re-adds and per-key exponential back-off for failed syncs.
- ``Expectations``: the pods (or ReplicaSets) a controller has asked for and not yet seen. A controller does not
  act on a key whose expectations are pending, so it never creates twice for one shortfall.
- ``Controller``: one work queue and a ``sync(key)``; driven by an asyncio task in the server, or synchronously
  by ``drain`` in tests.
- Helpers on objects: controller references, readiness, int-or-percent, conditions, time parsing, events.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import heapq
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from kubesched.apimachinery.timefmt import format_rfc3339
from kubesched.cluster import errors

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.resources import ResourceType

log = logging.getLogger("kubesched.controllers")

Obj = dict[str, Any]
Key = tuple[str, str]  # (namespace, name)

FIELD_MANAGER = "kube-controller-manager"
# How long an unmet expectation is trusted (upstream's ExpectationsTimeout): a lost watch event must not wedge a
# controller forever.
EXPECTATIONS_TTL = 300.0


class Clock:
    """Wall-clock seconds (``time.time``)."""

    def now(self) -> float:
        return time.time()


class FakeClock(Clock):
    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.t = start

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


# -- work queue -------------------------------------------------------------------------------------------------


class WorkQueue:
    """client-go's rate-limited delaying work queue, single-threaded: a key waits at most once, is never handed out
    while it is being processed (a re-add during processing runs after ``done``), and failures back off
    exponentially per key (``base * 2**n`` up to ``cap``) until ``forget``."""

    def __init__(self, clock: Clock, *, base_delay: float = 0.005, max_delay: float = 60.0) -> None:
        self.clock = clock
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._queue: deque[Key] = deque()
        self._dirty: set[Key] = set()
        self._processing: set[Key] = set()
        self._delayed: list[tuple[float, int, Key]] = []
        self._seq = 0
        self._failures: dict[Key, int] = {}
        self._wakeup: asyncio.Event | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: Key) -> None:
        if key in self._dirty:
            return
        self._dirty.add(key)
        if key in self._processing:
            return
        self._queue.append(key)
        if self._wakeup is not None:
            self._wakeup.set()

    def add_after(self, key: Key, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        self._seq += 1
        heapq.heappush(self._delayed, (self.clock.now() + delay, self._seq, key))
        if self._wakeup is not None:
            self._wakeup.set()

    def add_rate_limited(self, key: Key) -> None:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, min(self.base_delay * 2**n, self.max_delay))

    def forget(self, key: Key) -> None:
        self._failures.pop(key, None)

    def failures(self, key: Key) -> int:
        return self._failures.get(key, 0)

    def _promote_due(self) -> None:
        now = self.clock.now()
        while self._delayed and self._delayed[0][0] <= now:
            self.add(heapq.heappop(self._delayed)[2])

    def get(self) -> Key | None:
        """The next ready key (now marked as processing), or None."""
        self._promote_due()
        if not self._queue:
            return None
        key = self._queue.popleft()
        self._processing.add(key)
        self._dirty.discard(key)
        return key

    def done(self, key: Key) -> None:
        self._processing.discard(key)
        if key in self._dirty:
            self._queue.append(key)

    def next_due_in(self) -> float | None:
        """Seconds until the earliest delayed key is due (None: nothing delayed)."""
        if not self._delayed:
            return None
        return max(0.0, self._delayed[0][0] - self.clock.now())

    async def wait(self) -> None:
        """Until a key may be ready (added, or a delayed one due)."""
        if self._wakeup is None:
            self._wakeup = asyncio.Event()
        self._wakeup.clear()
        if self._queue:
            return
        timeout = self.next_due_in()
        try:
            await asyncio.wait_for(self._wakeup.wait(), timeout)
        except TimeoutError:
            pass


# -- expectations -------------------------------------------------------------------------------------------------


@dataclass
class _Expectation:
    adds: int = 0
    deletes: set[Key] = field(default_factory=set)
    since: float = 0.0


class Expectations:
    """Creations (a count) and deletions (the keys asked to go) a controller waits to observe, per owner key
    (upstream's ControllerExpectations with UIDTrackingExpectations' deletion tracking)."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._by_key: dict[Key, _Expectation] = {}

    def expect_creations(self, key: Key, count: int) -> None:
        self._by_key[key] = _Expectation(adds=count, since=self.clock.now())

    def expect_deletions(self, key: Key, dependents: list[Key]) -> None:
        self._by_key[key] = _Expectation(deletes=set(dependents), since=self.clock.now())

    def creation_observed(self, key: Key) -> None:
        exp = self._by_key.get(key)
        if exp is not None and exp.adds > 0:
            exp.adds -= 1

    def deletion_observed(self, key: Key, dependent: Key) -> None:
        exp = self._by_key.get(key)
        if exp is not None:
            exp.deletes.discard(dependent)

    def satisfied(self, key: Key) -> bool:
        exp = self._by_key.get(key)
        if exp is None:
            return True  # nothing asked for yet (a new controller, or one recreated)
        if exp.adds <= 0 and not exp.deletes:
            return True
        return self.clock.now() - exp.since > EXPECTATIONS_TTL

    def pending(self, key: Key) -> tuple[int, int]:
        exp = self._by_key.get(key)
        return (0, 0) if exp is None else (exp.adds, len(exp.deletes))

    def forget(self, key: Key) -> None:
        self._by_key.pop(key, None)


# -- the controller skeleton --------------------------------------------------------------------------------------


class Controller:
    """A work queue of keys and the ``sync`` that reconciles one; subclasses add event handlers."""

    name = "controller"

    def __init__(self, api: ClusterApi, clock: Clock) -> None:
        self.api = api
        self.clock = clock
        self.queue = WorkQueue(clock)
        self.events = EventRecorder(api, self.name, clock)

    def sync(self, key: Key) -> None:
        raise NotImplementedError

    def start(self) -> None:
        """Fill caches from what is stored and queue every object (the informers' initial list)."""

    def process_one(self) -> bool:
        """Sync the next ready key; False when none is ready."""
        key = self.queue.get()
        if key is None:
            return False
        try:
            self.sync(key)
        except errors.ApiError as e:
            # Conflicts are the normal price of optimistic concurrency: retry soon without noise.
            if e.code != 409:
                log.warning("%s: syncing %s/%s: %s", self.name, key[0], key[1], e)
            self.queue.add_rate_limited(key)
        except Exception:
            log.exception("%s: syncing %s/%s", self.name, key[0], key[1])
            self.queue.add_rate_limited(key)
        else:
            self.queue.forget(key)
        finally:
            self.queue.done(key)
        return True

    async def run(self) -> None:
        while True:
            if not self.process_one():
                await self.queue.wait()
                continue
            await asyncio.sleep(0)  # requests and the kubelet run between syncs


# -- object helpers -----------------------------------------------------------------------------------------------


def meta_of(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def key_of(obj: Obj) -> Key:
    meta = meta_of(obj)
    return (meta.get("namespace") or "", meta.get("name") or "")


def controller_ref(obj: Obj) -> Obj | None:
    for ref in meta_of(obj).get("ownerReferences") or ():
        if ref.get("controller"):
            return ref
    return None


def new_controller_ref(owner: Obj) -> Obj:
    meta = meta_of(owner)
    return {
        "apiVersion": owner.get("apiVersion"),
        "kind": owner.get("kind"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


_META_THAT_MATTERS = ("generation", "labels", "annotations", "ownerReferences", "deletionTimestamp", "uid")


def with_owner_refs(obj: Obj, refs: list[Obj]) -> Obj:
    """A copy of ``obj`` (top level and metadata) whose ownerReferences are ``refs`` (none: the field is dropped)."""
    meta = dict(meta_of(obj))
    if refs:
        meta["ownerReferences"] = refs
    else:
        meta.pop("ownerReferences", None)
    return {**obj, "metadata": meta}


def only_status_changed(new: Obj, old: Obj | None) -> bool:
    """A write that changed nothing a controller of this object acts on (typically its own status write)."""
    if old is None or new.get("spec") != old.get("spec"):
        return False
    nm, om = meta_of(new), meta_of(old)
    return all(nm.get(k) == om.get(k) for k in _META_THAT_MATTERS)


def copy_json(obj: Any) -> Any:
    """A deep copy of JSON-shaped data (stored objects are shared and must never be mutated)."""
    return orjson.loads(orjson.dumps(obj))


def is_pod_active(pod: Obj) -> bool:
    """Counts towards a replica count: not finished, not being deleted (upstream ``IsPodActive``)."""
    return (pod.get("status") or {}).get("phase") not in ("Succeeded", "Failed") and not meta_of(pod).get(
        "deletionTimestamp"
    )


def pod_ready_condition(pod: Obj) -> Obj | None:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == "Ready":
            return c
    return None


def is_pod_ready(pod: Obj) -> bool:
    c = pod_ready_condition(pod)
    return c is not None and c.get("status") == "True"


def parse_time(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def is_pod_available(pod: Obj, min_ready_seconds: int, now: float) -> bool:
    """Ready for at least ``minReadySeconds`` (upstream ``IsPodAvailable``)."""
    c = pod_ready_condition(pod)
    if c is None or c.get("status") != "True":
        return False
    if min_ready_seconds <= 0:
        return True
    since = parse_time(c.get("lastTransitionTime"))
    return since is not None and since + min_ready_seconds <= now


def scaled_value(value: Any, total: int, round_up: bool) -> int:
    """An int-or-percent field against ``total`` (upstream ``GetScaledValueFromIntOrPercent``)."""
    if value is None:
        return 0
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.endswith("%"):
        try:
            pct = int(value[:-1])
        except ValueError:
            raise ValueError(f"invalid value for IntOrString: invalid value {value!r}") from None
        exact = pct * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    if isinstance(value, str):
        raise ValueError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    raise ValueError(f"invalid value for IntOrString: {value!r}")


def get_condition(status: Obj, ctype: str) -> Obj | None:
    for c in status.get("conditions") or ():
        if c.get("type") == ctype:
            return c
    return None


def remove_condition(status: Obj, ctype: str) -> None:
    conds = [c for c in status.get("conditions") or () if c.get("type") != ctype]
    if conds:
        status["conditions"] = conds
    else:
        status.pop("conditions", None)


def now_text(clock: Clock) -> str:
    return format_rfc3339(clock.now())


class EventRecorder:
    """Writes core/v1 Events as a controller's ``record.EventRecorder`` does (source = the controller's name)."""

    def __init__(self, api: ClusterApi, component: str, clock: Clock) -> None:
        self.api = api
        self.component = component
        self.clock = clock
        self._seq = 0
        self._rtype: ResourceType | None = None

    def emit(self, obj: Obj, etype: str, reason: str, message: str) -> None:
        if self._rtype is None:
            self._rtype = self.api.rtype("", "v1", "events")
        meta = meta_of(obj)
        ns = meta.get("namespace") or "default"
        ts = now_text(self.clock)
        self._seq += 1
        body = {
            "metadata": {
                "name": f"{meta.get('name')}.{int(self.clock.now() * 1e9) + self._seq:x}",
                "namespace": ns,
            },
            "involvedObject": {
                "apiVersion": obj.get("apiVersion"),
                "kind": obj.get("kind"),
                "name": meta.get("name"),
                "namespace": ns,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "source": {"component": self.component},
            "firstTimestamp": ts,
            "lastTimestamp": ts,
            "count": 1,
            "type": etype,
            "reportingComponent": self.component,
            "reportingInstance": "",
        }
        try:
            self.api.create(self._rtype, body, ns)
        except errors.ApiError as e:  # an event is best effort, as upstream's recorder
            log.debug("%s: event %s not recorded: %s", self.component, reason, e)


OnEvent = Callable[["ResourceType", str, Obj | None, Obj | None], None]
