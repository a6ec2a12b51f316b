"""The kubelet's crash-loop back-off: when a container that exited may start again.

As upstream's kubelet (``flowcontrol.Backoff`` with 10 s initial, 300 s maximum): the first restart of a container
is immediate; each restart then opens a window (10 s, doubling up to 5 min) during which a further exit waits for
the window to close and the container shows ``CrashLoopBackOff``. A container that has not been restarted for
twice the maximum starts again from 10 s.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass

INITIAL_SECONDS = 10.0
MAX_SECONDS = 300.0


@dataclass
class _Entry:
    window: float
    last_restart: float


class CrashLoopBackoff:
    def __init__(
        self,
        initial: float = INITIAL_SECONDS,
        maximum: float = MAX_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.initial = initial
        self.maximum = maximum
        self.clock = clock
        self._entries: dict[Hashable, _Entry] = {}

    def delay(self, key: Hashable) -> float:
        """Seconds from now until the container may restart (0: at once)."""
        e = self._entries.get(key)
        if e is None:
            return 0.0
        return max(0.0, e.last_restart + e.window - self.clock())

    def restarted(self, key: Hashable) -> None:
        """Record a restart: the window grows (or starts at ``initial`` after a long quiet time)."""
        now = self.clock()
        e = self._entries.get(key)
        if e is None or now - e.last_restart > 2 * self.maximum:
            self._entries[key] = _Entry(self.initial, now)
        else:
            e.window = min(e.window * 2, self.maximum)
            e.last_restart = now

    def forget(self, key: Hashable) -> None:
        self._entries.pop(key, None)
