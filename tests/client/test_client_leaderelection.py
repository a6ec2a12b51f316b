"""client-go's leader election algorithm on a virtual clock with an in-memory Lease API."""

from __future__ import annotations

import asyncio
import copy
import heapq
import itertools
import re
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.apimachinery.timefmt import format_micro_time
from kubesched.client import ApiError, LeaderElector, default_identity
from kubesched.client.leaderelection import LeaderElectionRecord

EPOCH = 1_780_000_000.0
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class VirtualClock:
    """Monotonic time that moves only when every task is waiting on ``sleep``."""

    def __init__(self) -> None:
        self.now = 0.0
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()

    def __call__(self) -> float:
        return self.now

    def wall(self) -> float:
        return EPOCH + self.now

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + seconds, next(self._seq), fut))
        await fut

    async def settle(self) -> None:
        for _ in range(30):
            await asyncio.sleep(0)

    async def run_until(self, t: float, on_step: Callable[[], None] | None = None) -> None:
        """Advance to ``t``, waking sleepers in order; ``on_step`` is checked after every wake-up."""
        await self.settle()
        while self._sleepers and self._sleepers[0][0] <= t:
            wake, _, fut = heapq.heappop(self._sleepers)
            self.now = max(self.now, wake)
            if not fut.done():
                fut.set_result(None)
            await self.settle()
            if on_step is not None:
                on_step()
        self.now = max(self.now, t)
        await self.settle()


class FakeLeaseApi:
    """Leases with strict optimistic concurrency (409 on a stale resourceVersion, AlreadyExists on create)."""

    def __init__(self) -> None:
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.revision = 0
        self.conflicts = 0
        self.updates = 0

    def spec(self, name: str = "sched", namespace: str = "kube-system") -> dict[str, Any]:
        return self.leases[(namespace, name)]["spec"]

    def _store(self, key: tuple[str, str], body: dict[str, Any]) -> dict[str, Any]:
        self.revision += 1
        obj = copy.deepcopy(body)
        obj["metadata"]["resourceVersion"] = str(self.revision)
        self.leases[key] = obj
        return copy.deepcopy(obj)

    async def get(self, api_version: str, plural: str, name: str, *, namespace: str | None = None) -> Any:
        await asyncio.sleep(0)
        assert (api_version, plural) == ("coordination.k8s.io/v1", "leases")
        lease = self.leases.get((namespace or "", name))
        if lease is None:
            raise ApiError(404, "NotFound", f'leases.coordination.k8s.io "{name}" not found')
        return copy.deepcopy(lease)

    async def create(
        self, api_version: str, plural: str, body: dict[str, Any], *, namespace: str | None = None
    ) -> Any:
        await asyncio.sleep(0)
        key = (namespace or "", body["metadata"]["name"])
        if key in self.leases:
            raise ApiError(409, "AlreadyExists", f'leases.coordination.k8s.io "{key[1]}" already exists')
        return self._store(key, body)

    async def replace(
        self, api_version: str, plural: str, name: str, body: dict[str, Any], *, namespace: str | None = None
    ) -> Any:
        await asyncio.sleep(0)
        key = (namespace or "", name)
        current = self.leases.get(key)
        if current is None:
            raise ApiError(404, "NotFound", "not found")
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            self.conflicts += 1
            raise ApiError(409, "Conflict", "the object has been modified")
        self.updates += 1
        return self._store(key, body)


class Partition:
    """One candidate's view of the API; ``down`` makes every call fail like an unreachable server."""

    def __init__(self, api: FakeLeaseApi) -> None:
        self.api = api
        self.down = False

    def __getattr__(self, verb: str) -> Any:
        call = getattr(self.api, verb)

        async def maybe_fail(*args: Any, **kwargs: Any) -> Any:
            if self.down:
                await asyncio.sleep(0)
                raise ConnectionError("connection refused")
            return await call(*args, **kwargs)

        return maybe_fail


class Candidate:
    def __init__(self, name: str, api: FakeLeaseApi, clock: VirtualClock, **kwargs: Any) -> None:
        self.net = Partition(api)
        self.started: list[float] = []
        self.stopped: list[float] = []
        self.leaders: list[str] = []
        self.lead_task_cancelled = False
        self.elector = LeaderElector(
            self.net,
            namespace="kube-system",
            name="sched",
            identity=name,
            clock=clock,
            sleep=clock.sleep,
            wall_clock=clock.wall,
            on_started_leading=self._lead,
            on_stopped_leading=lambda: self.stopped.append(clock.now),
            on_new_leader=self.leaders.append,
            **kwargs,
        )
        self._clock = clock
        self.task: asyncio.Task[None] | None = None

    async def _lead(self) -> None:
        self.started.append(self._clock.now)
        try:
            await asyncio.Event().wait()  # "schedule" until cancelled
        except asyncio.CancelledError:
            self.lead_task_cancelled = True
            raise

    def start(self) -> None:
        self.task = asyncio.ensure_future(self.elector.run())

    @property
    def leading(self) -> bool:
        return self.elector.leading.is_set()


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def api() -> FakeLeaseApi:
    return FakeLeaseApi()


def never_two_leaders(*candidates: Candidate) -> Callable[[], None]:
    def check() -> None:
        assert sum(c.leading for c in candidates) <= 1, "two candidates lead at once"

    return check


async def stop_all(*candidates: Candidate) -> None:
    for c in candidates:
        if c.task is not None:
            c.task.cancel()
    await asyncio.gather(*(c.task for c in candidates if c.task), return_exceptions=True)


# ---- validation and helpers ----


@pytest.mark.parametrize(
    ("lease", "renew", "retry", "message"),
    [
        (10, 10, 2, "lease_duration must be greater than renew_deadline"),
        (15, 2.4, 2, "renew_deadline must be greater than retry_period"),
        (15, 10, 0, "renew_deadline and retry_period must be greater than zero"),
        (0.9, 0.5, 0.1, "at least one second"),
    ],
)
def test_durations_are_validated_like_client_go(
    lease: float, renew: float, retry: float, message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        LeaderElector(
            FakeLeaseApi(),
            namespace="ns",
            name="l",
            identity="me",
            lease_duration=lease,
            renew_deadline=renew,
            retry_period=retry,
        )


def test_identity_and_micro_time_format() -> None:
    ident = default_identity()
    host, _, uid = ident.rpartition("_")
    assert host and re.fullmatch(r"[0-9a-f-]{36}", uid)
    assert format_micro_time(0.5) == "1970-01-01T00:00:00.500000Z"
    assert format_micro_time(1_700_000_000.123456) == "2023-11-14T22:13:20.123456Z"


# ---- the algorithm ----


async def test_single_candidate_creates_the_lease_and_renews_it(
    clock: VirtualClock, api: FakeLeaseApi
) -> None:
    a = Candidate("a", api, clock)
    a.start()
    try:
        await clock.run_until(0.0)
        assert a.leading and a.elector.is_leader and a.started == [0.0]
        assert a.leaders == ["a"]
        spec = api.spec()
        assert spec["holderIdentity"] == "a" and spec["leaseDurationSeconds"] == 15
        assert spec["leaseTransitions"] == 0
        assert MICRO_TIME.match(spec["acquireTime"]) and spec["acquireTime"] == spec["renewTime"]
        acquired = spec["acquireTime"]

        await clock.run_until(9.0)
        spec = api.spec()
        # client-go renews immediately after acquiring, then every retry_period: t=0, 2, 4, 6, 8.
        assert api.updates == 5
        assert spec["acquireTime"] == acquired and spec["renewTime"] == format_micro_time(EPOCH + 8.0)
        assert spec["leaseTransitions"] == 0
        assert a.elector.check(max_tolerable_expired=0.0)
    finally:
        await stop_all(a)
    assert a.stopped == [9.0] and not a.leading and a.lead_task_cancelled


async def test_follower_waits_while_leader_renews_then_takes_over_after_expiry(
    clock: VirtualClock, api: FakeLeaseApi
) -> None:
    a = Candidate("a", api, clock)
    b = Candidate("b", api, clock)
    a.start()
    await clock.run_until(0.0)
    b.start()
    safe = never_two_leaders(a, b)
    try:
        await clock.run_until(60.0, safe)
        assert a.leading and not b.leading and b.started == []
        assert b.leaders == ["a"]  # on_new_leader reports the holder it observed

        # a loses the API server. Its next renewal starts retry_period after the last success and gives
        # up after renew_deadline: it stops leading 12 s after the last renewal, before the 15 s lease ends.
        a.net.down = True
        last_renew = 60.0
        await clock.run_until(last_renew + 2.0 + 10.0 - 0.01, safe)
        assert a.leading
        await clock.run_until(last_renew + 2.0 + 10.0, safe)
        assert not a.leading and a.stopped == [last_renew + 12.0]
        assert a.lead_task_cancelled
        assert a.task is not None and a.task.done()  # run() returned

        # b takes over only once the lease it last saw changing has expired on its own clock: at least
        # 15 s after the last renewal, at most 15 s + two jittered retry periods (seeing the change late,
        # then retrying late).
        await clock.run_until(last_renew + 15.0, safe)
        assert not b.leading
        await clock.run_until(last_renew + 15.0 + 2 * 4.4, safe)
        assert b.leading and b.started
        spec = api.spec()
        assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
        assert b.leaders == ["a", "b"]
    finally:
        await stop_all(a, b)


async def test_concurrent_takeover_conflicts_and_one_wins(clock: VirtualClock, api: FakeLeaseApi) -> None:
    # A stale lease of a dead holder.
    api._store(
        ("kube-system", "sched"),
        {
            "metadata": {"name": "sched", "namespace": "kube-system"},
            "spec": LeaderElectionRecord("dead", 15, "t", "t", 4).to_spec(),
        },
    )
    cands = [Candidate(n, api, clock) for n in ("a", "b", "c")]
    for c in cands:
        c.start()
    safe = never_two_leaders(*cands)
    try:
        await clock.run_until(0.0, safe)
        assert not any(c.leading for c in cands)  # the lease looks alive: just observed it change
        await clock.run_until(14.9, safe)
        assert not any(c.leading for c in cands)  # 15 s on each candidate's own clock
        await clock.run_until(25.0, safe)
        winners = [c for c in cands if c.leading]
        assert len(winners) == 1
        spec = api.spec()
        assert spec["holderIdentity"] == winners[0].elector.identity
        assert spec["leaseTransitions"] == 5
        assert all(c.elector.leader == spec["holderIdentity"] for c in cands)
        assert all(c.leaders == ["dead", spec["holderIdentity"]] for c in cands)
    finally:
        await stop_all(*cands)


async def test_simultaneous_updates_one_gets_a_conflict(clock: VirtualClock, api: FakeLeaseApi) -> None:
    """Two candidates read the same expired lease; both PUT with its resourceVersion; exactly one wins."""
    api._store(
        ("kube-system", "sched"),
        {"metadata": {"name": "sched", "namespace": "kube-system"}, "spec": {"holderIdentity": ""}},
    )
    a = Candidate("a", api, clock)
    b = Candidate("b", api, clock)
    a.start()
    b.start()
    await clock.run_until(0.0)
    try:
        assert api.conflicts == 1
        assert sum(c.leading for c in (a, b)) == 1
        assert api.spec()["leaseTransitions"] == 1
    finally:
        await stop_all(a, b)


async def test_release_on_cancel_lets_the_next_candidate_in_at_once(
    clock: VirtualClock, api: FakeLeaseApi
) -> None:
    a = Candidate("a", api, clock, release_on_cancel=True)
    b = Candidate("b", api, clock)
    a.start()
    await clock.run_until(0.0)
    b.start()
    try:
        await clock.run_until(30.0)
        assert a.leading and not b.leading
        await stop_all(a)
        assert not a.leading and a.stopped == [30.0]
        spec = api.spec()
        assert spec["holderIdentity"] == "" and spec["leaseDurationSeconds"] == 1
        assert spec["leaseTransitions"] == 0  # a release is not a transition
        # b sees an empty holder on its next retry (≤ 4.4 s) instead of waiting out 15 s.
        await clock.run_until(34.5)
        assert b.leading
        assert api.spec()["leaseTransitions"] == 1
    finally:
        await stop_all(a, b)


async def test_without_release_the_lease_is_kept_until_it_expires(
    clock: VirtualClock, api: FakeLeaseApi
) -> None:
    a = Candidate("a", api, clock)
    a.start()
    await clock.run_until(5.0)
    await stop_all(a)
    assert api.spec()["holderIdentity"] == "a"


async def test_stops_at_once_when_another_holder_appears(clock: VirtualClock, api: FakeLeaseApi) -> None:
    a = Candidate("a", api, clock)
    a.start()
    try:
        await clock.run_until(10.0)
        assert a.leading
        # Someone (an operator, a split-brain peer) overwrote the lease with a valid holder.
        api._store(
            ("kube-system", "sched"),
            {
                "metadata": {"name": "sched", "namespace": "kube-system"},
                "spec": LeaderElectionRecord("intruder", 15, "t", "t", 7).to_spec(),
            },
        )
        await clock.run_until(12.0)  # the next renewal: fast path 409, slow path sees "intruder"
        assert not a.leading and a.stopped == [12.0] and a.lead_task_cancelled
        assert a.elector.leader == "intruder" and a.leaders == ["a", "intruder"]
    finally:
        await stop_all(a)


async def test_transitions_count_each_change_of_holder(clock: VirtualClock, api: FakeLeaseApi) -> None:
    a = Candidate("a", api, clock)
    b = Candidate("b", api, clock)
    a.start()
    await clock.run_until(0.0)
    b.start()
    try:
        a.net.down = True  # a → b
        await clock.run_until(40.0)
        assert b.leading and api.spec()["leaseTransitions"] == 1
        a.net.down = False
        a.start()  # a campaigns again
        b.net.down = True  # b → a
        await clock.run_until(80.0)
        assert a.leading and not b.leading
        assert api.spec()["holderIdentity"] == "a" and api.spec()["leaseTransitions"] == 2
    finally:
        await stop_all(a, b)


async def test_health_check_fails_when_renewals_stall(clock: VirtualClock, api: FakeLeaseApi) -> None:
    a = Candidate("a", api, clock)
    a.start()
    await clock.run_until(0.0)
    try:
        assert a.elector.check(0.0)
        # Pretend the renew loop is wedged: time passes without renewals being observed.
        a.elector._observed_time -= 30.0
        assert not a.elector.check(max_tolerable_expired=10.0)
        assert a.elector.check(max_tolerable_expired=20.0)
    finally:
        await stop_all(a)
