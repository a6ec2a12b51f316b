"""Runs the operator's controllers, level-based.

Informers watch what the controllers read (the operand namespace's configmaps, secrets and pods, the operator and
user-config namespaces' configmaps, the nodes, and the three custom resources). Any change marks every controller
dirty; each controller has its own loop that, once dirty (changes within ``debounce`` seconds are coalesced),
calls ``await controller.sync(ctx)``. Every ``resync_period`` seconds each controller syncs anyway. A controller
that leaves ``requeue_after`` set (the installer during a back-off) is synced again after that long.

A sync that raises is logged, counted and retried after ``backoff_base * 2^(failures-1)`` seconds, at most
``backoff_max``; a success resets the count. Controllers recompute everything from the cluster on each sync, so
nothing is lost when the process restarts: a new leader resumes a rollout from the observed state. The first
pass after start runs the controllers one after another in the order given (config side before revisions).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.client.informer import Informer, wait_for_cache_sync
from kubesched.operator import contract as c
from kubesched.operator.metrics import OperatorMetrics

log = logging.getLogger(__name__)

DEFAULT_RESYNC_PERIOD = 60.0


@dataclass(frozen=True)
class Watch:
    api_version: str
    plural: str
    namespace: str | None = None


def default_watches(ctx: c.OperatorContext) -> list[Watch]:
    return [
        Watch(c.KUBESCHEDULER_API_VERSION, c.KUBESCHEDULER_PLURAL),
        Watch(c.SCHEDULER_CONFIG_API_VERSION, c.SCHEDULER_CONFIG_PLURAL),
        Watch(c.CLUSTEROPERATOR_API_VERSION, c.CLUSTEROPERATOR_PLURAL),
        Watch("v1", "nodes"),
        Watch("v1", "configmaps", ctx.operand_namespace),
        Watch("v1", "secrets", ctx.operand_namespace),
        Watch("v1", "pods", ctx.operand_namespace),
        Watch("v1", "configmaps", ctx.operator_namespace),
        Watch("v1", "configmaps", ctx.user_config_namespace),
    ]


@dataclass
class _State:
    controller: c.Controller
    dirty: asyncio.Event = field(default_factory=asyncio.Event)
    failures: int = 0
    syncs: int = 0
    errors: int = 0
    last_error: str = ""


class Runtime:
    """``await run()`` until cancelled. ``states`` shows each controller's sync and error counts."""

    def __init__(
        self,
        ctx: c.OperatorContext,
        controllers: Sequence[c.Controller],
        *,
        resync_period: float = DEFAULT_RESYNC_PERIOD,
        metrics: OperatorMetrics | None = None,
        watches: list[Watch] | None = None,
        backoff_base: float = 1.0,
        backoff_max: float = 60.0,
        debounce: float = 0.05,
    ) -> None:
        self.ctx = ctx
        self.states = [_State(ctrl) for ctrl in controllers]
        self.resync_period = resync_period
        self.metrics = metrics
        self.watches = default_watches(ctx) if watches is None else watches
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.debounce = debounce
        self.informers: list[Informer] = []
        self.started = asyncio.Event()

    def trigger(self, *_: Any) -> None:
        for st in self.states:
            st.dirty.set()

    def _on_kubescheduler(self, *objs: Any) -> None:
        self.trigger()
        if self.metrics is not None:
            self.metrics.observe_kubescheduler(objs[-1] if objs and isinstance(objs[-1], dict) else None)

    async def run(self) -> None:
        for w in self.watches:
            inf = Informer(self.ctx.client, w.api_version, w.plural, namespace=w.namespace)
            if w.plural == c.KUBESCHEDULER_PLURAL:
                inf.add_handler(self._on_kubescheduler, self._on_kubescheduler, self._on_kubescheduler)
            else:
                inf.add_handler(self.trigger, self.trigger, self.trigger)
            inf.start()
            self.informers.append(inf)
        await wait_for_cache_sync(*self.informers, timeout=30.0)
        # One pass in order first: the config side's output is then complete before the first revision is cut
        # (otherwise revision 1 would hold the default config and revision 2 follow at once).
        first: list[float | None] = []
        for st in self.states:
            st.dirty.clear()
            first.append(await self.sync_once(st))
        tasks = [
            asyncio.create_task(self._loop(st, delay), name=f"controller {st.controller.name}")
            for st, delay in zip(self.states, first, strict=True)
        ]
        self.started.set()
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for inf in self.informers:
                await inf.stop()

    async def _loop(self, st: _State, delay: float | None = None) -> None:
        while True:
            timeout = self.resync_period if delay is None else min(delay, self.resync_period)
            try:
                await asyncio.wait_for(st.dirty.wait(), timeout)
            except TimeoutError:
                pass
            await asyncio.sleep(self.debounce)
            st.dirty.clear()
            delay = await self.sync_once(st)

    async def sync_once(self, st: _State) -> float | None:
        """One sync of ``st``'s controller; the delay before the next one it asks for (None: only on change or
        resync)."""
        name = st.controller.name
        started = time.perf_counter()
        error = False
        try:
            await st.controller.sync(self.ctx)
        except asyncio.CancelledError:
            raise
        except Exception as e:
            error = True
            st.failures += 1
            st.errors += 1
            st.last_error = f"{type(e).__name__}: {e}"
            log.warning("controller %s: sync failed (%d in a row): %s", name, st.failures, st.last_error)
        else:
            st.failures = 0
        finally:
            st.syncs += 1
            if self.metrics is not None:
                self.metrics.observe_sync(name, time.perf_counter() - started, error)
        if error:
            return float(min(self.backoff_max, self.backoff_base * 2 ** (st.failures - 1)))
        requeue = getattr(st.controller, "requeue_after", None)
        return float(requeue) if requeue else None
