"""Lease-based leader election, following client-go's ``tools/leaderelection`` algorithm, on asyncio.

The decisive rule (client-go's): timestamps written in the Lease are never compared with the local clock. A
candidate remembers *when it last saw the lease record change* (``observed_time``, local monotonic time) and
considers the holder alive until ``observed_time + leaseDurationSeconds``. Clock skew between machines
therefore does not matter.

Time is injectable: ``clock`` (monotonic seconds), ``sleep`` and ``wall_clock`` (seconds since the epoch, for
the MicroTime stamps written into the Lease), so tests run the algorithm on a fake clock.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import random
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from kubesched.apimachinery.timefmt import format_micro_time
from kubesched.client.rest import ApiError

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2
LEASE_API_VERSION = "coordination.k8s.io/v1"


class LeaseClient(Protocol):
    """The three calls leader election makes (``ApiClient`` has them)."""

    async def get(self, api_version: str, plural: str, name: str, *, namespace: str | None = ...) -> Any: ...

    async def create(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = ...
    ) -> Any: ...

    async def replace(
        self, api_version: str, plural: str, name: str, body: dict[str, Any], *, namespace: str | None = ...
    ) -> Any: ...


def default_identity() -> str:
    """``<hostname>_<uuid4>``, as kube-scheduler and kube-controller-manager use."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True)
class LeaderElectionRecord:
    """The part of a Lease's spec that leader election reads and writes."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    leader_transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> LeaderElectionRecord:
        spec = spec or {}
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            leader_transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "leaseTransitions": self.leader_transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = self.acquire_time
        if self.renew_time is not None:
            spec["renewTime"] = self.renew_time
        return spec


class _LeaseLock:
    """client-go's LeaseLock: get/create/update a Lease, caching the last one read or written so that an
    update carries its resourceVersion (a concurrent writer makes it fail with 409)."""

    def __init__(self, client: LeaseClient, namespace: str, name: str) -> None:
        self.client = client
        self.namespace = namespace
        self.name = name
        self.lease: dict[str, Any] | None = None

    def describe(self) -> str:
        return f"{self.namespace}/{self.name}"

    async def get(self) -> LeaderElectionRecord:
        lease = await self.client.get(LEASE_API_VERSION, "leases", self.name, namespace=self.namespace)
        self.lease = lease
        return LeaderElectionRecord.from_spec(lease.get("spec"))

    async def create(self, record: LeaderElectionRecord) -> None:
        body = {
            "apiVersion": LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.to_spec(),
        }
        self.lease = await self.client.create(LEASE_API_VERSION, "leases", body, namespace=self.namespace)

    async def update(self, record: LeaderElectionRecord) -> None:
        if self.lease is None:
            raise RuntimeError("lease not initialized: get or create it first")
        body = {**self.lease, "spec": record.to_spec()}
        self.lease = await self.client.replace(
            LEASE_API_VERSION, "leases", self.name, body, namespace=self.namespace
        )


Callback = Callable[..., Any]


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity``.

    ``await run()`` acquires the lease (retrying every ``retry_period`` * [1, 2.2)), then leads: ``leading``
    is set, ``on_started_leading()`` is called (a coroutine result runs as a task, cancelled when leadership
    ends), and the lease is renewed every ``retry_period``. When a renewal does not succeed within
    ``renew_deadline``, or another holder is seen, ``leading`` is cleared *before anything else*, the
    leading task is cancelled, the lease released if ``release_on_cancel``, ``on_stopped_leading()`` called,
    and ``run()`` returns. Cancelling ``run()`` ends leadership the same way. ``on_new_leader(identity)`` is
    called whenever the observed holder changes. Callbacks may be plain functions or coroutine functions.
    """

    def __init__(
        self,
        client: LeaseClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = False,
        clock: Callable[[], float] = time.monotonic,
        on_started_leading: Callback | None = None,
        on_stopped_leading: Callback | None = None,
        on_new_leader: Callback | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError(f"renew_deadline must be greater than retry_period*{JITTER_FACTOR}")
        if lease_duration < 1:
            raise ValueError("lease_duration must be at least one second (the Lease stores whole seconds)")
        if renew_deadline <= 0 or retry_period <= 0:
            raise ValueError("renew_deadline and retry_period must be greater than zero")
        if not identity:
            raise ValueError("identity must not be empty")
        if not name or not namespace:
            raise ValueError("the lease needs a namespace and a name")
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self.release_on_cancel = release_on_cancel
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.leading = asyncio.Event()
        self._lock = _LeaseLock(client, namespace, name)
        self._clock = clock
        self._sleep = sleep
        self._wall_clock = wall_clock
        self._observed = LeaderElectionRecord()
        self._observed_raw: LeaderElectionRecord | None = None  # last record read from the server
        self._observed_time = 0.0
        self._reported_leader = ""
        self._background: set[asyncio.Task[Any]] = set()

    # ---- state ----

    @property
    def is_leader(self) -> bool:
        """True while this candidate leads (same as ``leading.is_set()``)."""
        return self.leading.is_set()

    @property
    def leader(self) -> str:
        """Identity of the last observed holder ("" if none)."""
        return self._observed.holder_identity

    def check(self, max_tolerable_expired: float) -> bool:
        """Health check (client-go's watchdog): False if we believe we lead but have not renewed for longer
        than the lease duration plus ``max_tolerable_expired`` seconds."""
        if not self._observed_is_me():
            return True
        return self._clock() - self._observed_time <= self.lease_duration + max_tolerable_expired

    # ---- the loop ----

    async def run(self) -> None:
        """Campaign, lead until leadership is lost, then return. Cancellation ends it (and leadership)."""
        await self._acquire()
        self.leading.set()
        lead_task: asyncio.Task[Any] | None = None
        try:
            lead_task = self._start_leading()
            await self._renew()
        finally:
            self.leading.clear()
            if lead_task is not None and not lead_task.done():
                lead_task.cancel()
                await asyncio.gather(lead_task, return_exceptions=True)
            if self.release_on_cancel:
                await self._release()
            await self._invoke(self.on_stopped_leading)

    def _start_leading(self) -> asyncio.Task[Any] | None:
        if self.on_started_leading is None:
            return None
        result = self.on_started_leading()
        if inspect.isawaitable(result):
            return asyncio.ensure_future(result)
        return None

    async def _acquire(self) -> None:
        """client-go acquire: JitterUntil(tryAcquireOrRenew, retryPeriod, 1.2, sliding) until success."""
        log.info("attempting to acquire leader lease %s...", self._lock.describe())
        while True:
            succeeded = await self._try_acquire_or_renew()
            self._maybe_report_transition()
            if succeeded:
                log.info("successfully acquired lease %s", self._lock.describe())
                return
            await self._sleep(self.retry_period * (1.0 + random.random() * JITTER_FACTOR))

    async def _renew(self) -> None:
        """client-go renew: every retryPeriod, renew within renewDeadline; return when that fails."""
        while True:
            renewed = await self._renew_within_deadline()
            self._maybe_report_transition()
            if not renewed:
                log.info("failed to renew lease %s; stopped leading", self._lock.describe())
                return
            await self._sleep(self.retry_period)

    async def _renew_within_deadline(self) -> bool:
        # PollImmediateUntil(retryPeriod) bounded by a renewDeadline timeout.
        deadline = self._clock() + self.renew_deadline
        while True:
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            try:
                async with asyncio.timeout(remaining):
                    if await self._try_acquire_or_renew():
                        return True
            except TimeoutError:
                return False
            if self._observed.holder_identity and not self._observed_is_me():
                # Someone else holds the lease: no point polling until the deadline (client-go would), we
                # know we are not leading, and the scheduler must stop at once.
                return False
            remaining = deadline - self._clock()
            if remaining <= 0:
                return False
            await self._sleep(min(self.retry_period, remaining))

    async def _try_acquire_or_renew(self) -> bool:
        now = self._clock()
        stamp = format_micro_time(self._wall_clock())
        desired = LeaderElectionRecord(
            holder_identity=self.identity,
            lease_duration_seconds=int(self.lease_duration),
            acquire_time=stamp,
            renew_time=stamp,
        )
        # 1. Fast path: we lead and the lease is valid; update optimistically with the cached lease.
        if self._observed_is_me() and self._lease_valid(now):
            desired = replace(
                desired,
                acquire_time=self._observed.acquire_time,
                leader_transitions=self._observed.leader_transitions,
            )
            try:
                await self._lock.update(desired)
            except Exception as e:
                log.warning(
                    "failed to update lease %s optimistically (%s); trying the slow path",
                    self._lock.describe(),
                    e,
                )
            else:
                self._set_observed(desired)
                return True
        # 2. Read the lease, creating it if missing.
        try:
            current = await self._lock.get()
        except ApiError as e:
            if not e.is_not_found():
                log.warning("error retrieving lease %s: %s", self._lock.describe(), e)
                return False
            try:
                await self._lock.create(desired)
            except Exception as e2:
                log.warning("error creating lease %s: %s", self._lock.describe(), e2)
                return False
            self._set_observed(desired)
            return True
        except Exception as e:
            log.warning("error retrieving lease %s: %s", self._lock.describe(), e)
            return False
        # 3. A record different from the one seen last restarts the holder's lease on our clock.
        if current != self._observed_raw:
            self._set_observed(current)
            self._observed_raw = current
        if current.holder_identity and self._lease_valid(now) and not self._observed_is_me():
            return False
        # 4. Take it over (or renew it on the slow path).
        if self._observed_is_me():
            desired = replace(
                desired, acquire_time=current.acquire_time, leader_transitions=current.leader_transitions
            )
        else:
            desired = replace(desired, leader_transitions=current.leader_transitions + 1)
        try:
            await self._lock.update(desired)
        except Exception as e:
            log.info("failed to update lease %s: %s", self._lock.describe(), e)
            return False
        self._set_observed(desired)
        return True

    async def _release(self) -> bool:
        """Hand the lease back: empty holder, 1 s duration, so that others can take it at once."""
        if not self._observed_is_me():
            return True
        stamp = format_micro_time(self._wall_clock())
        released = LeaderElectionRecord(
            holder_identity="",
            lease_duration_seconds=1,
            acquire_time=stamp,
            renew_time=stamp,
            leader_transitions=self._observed.leader_transitions,
        )
        try:
            async with asyncio.timeout(self.renew_deadline):
                await self._lock.update(released)
        except Exception as e:
            log.warning("failed to release lease %s: %s", self._lock.describe(), e)
            return False
        self._set_observed(released)
        return True

    # ---- bookkeeping ----

    def _observed_is_me(self) -> bool:
        return self._observed.holder_identity == self.identity

    def _lease_valid(self, now: float) -> bool:
        return self._observed_time + self._observed.lease_duration_seconds > now

    def _set_observed(self, record: LeaderElectionRecord) -> None:
        self._observed = record
        self._observed_time = self._clock()

    def _maybe_report_transition(self) -> None:
        holder = self._observed.holder_identity
        if holder == self._reported_leader:
            return
        self._reported_leader = holder
        if self.on_new_leader is not None:
            try:
                result = self.on_new_leader(holder)
            except Exception:
                log.exception("on_new_leader failed")
                return
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                self._background.add(task)
                task.add_done_callback(self._background.discard)

    async def _invoke(self, callback: Callback | None) -> None:
        if callback is None:
            return
        try:
            result = callback()
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("leader election callback %r failed", callback)
