"""The event loop a kubesched process runs on: uvloop when it is installed, else asyncio's own.

uvloop (libuv under Cython) does the same work as asyncio's selector loop with fewer Python frames per
callback, and its TLS layer is compiled: the scheduler's two HTTPS requests per pod and the API server's
answers to them cost markedly less CPU on it. Behaviour is asyncio's (same ``asyncio.Runner``: Ctrl-C cancels
the main task, async generators and the default executor are shut down), so a process may run on either.

The choice is ``KUBESCHED_EVENT_LOOP`` (``auto``, the default: uvloop if importable; ``uvloop``; ``asyncio``),
or ``kubesched --event-loop ...``, which sets the variable so that child processes (a benchmark's cluster and
scheduler) follow it.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

ENV = "KUBESCHED_EVENT_LOOP"
CHOICES = ("auto", "uvloop", "asyncio")

T = TypeVar("T")


class EventLoopError(ValueError):
    """An event loop that cannot be had (unknown name, or uvloop asked for but not installed)."""


def chosen(value: str | None = None) -> str:
    """The loop kind to run, ``uvloop`` or ``asyncio``, from ``value`` or else ``KUBESCHED_EVENT_LOOP``."""
    raw = value if value is not None else os.environ.get(ENV, "")
    name = raw.strip().lower() or "auto"
    if name not in CHOICES:
        raise EventLoopError(f"{ENV}={raw!r}: unknown event loop; use one of {', '.join(CHOICES)}")
    if name == "asyncio":
        return "asyncio"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        if name == "uvloop":
            raise EventLoopError(
                f"{ENV}=uvloop, but uvloop is not installed (pip install uvloop, or use asyncio)"
            ) from None
        return "asyncio"
    return "uvloop"


def loop_factory(value: str | None = None) -> Callable[[], asyncio.AbstractEventLoop] | None:
    """A factory for ``asyncio.Runner``; None means asyncio's default loop."""
    if chosen(value) == "asyncio":
        return None
    import uvloop

    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T], *, loop: str | None = None, debug: bool | None = None) -> T:
    """``asyncio.run(main)`` on the chosen loop (``loop`` overrides ``KUBESCHED_EVENT_LOOP``)."""
    try:
        factory = loop_factory(loop)
    except EventLoopError:
        main.close()  # never awaited: no "coroutine was never awaited" warning on top of the error
        raise
    with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
        return runner.run(main)


def running_loop_name() -> str:
    """``uvloop`` or ``asyncio``: the kind of the loop running now (for start-up logs and tests)."""
    loop = asyncio.get_running_loop()
    return "uvloop" if type(loop).__module__.startswith("uvloop") else "asyncio"
