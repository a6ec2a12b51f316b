"""What every ``--plot FILE`` shares: checking the path up front, matplotlib on demand, saving.

matplotlib is an optional extra (``kubesched[plot]``) and heavy to import (~0.3 s), so nothing here imports
it at module level: the CLI pays for it only when ``--plot`` is given. The figures themselves live beside the
data they draw (``kubesched/bench/plot.py``, ``kubesched/scheduler/plot.py``); this module imports nothing of
kubesched, so both may use it without breaking the one-way import order.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

# Formats matplotlib's Agg (and its vector back ends) write without any extra dependency.
FORMATS = (".png", ".svg", ".pdf")
INSTALL_HINT = "matplotlib is not installed: install kubesched[plot] (pip install 'kubesched[plot]')"
DPI = 110


class PlotError(Exception):
    """A plot cannot be written; the message is one line for the user."""


def check_path(path: str | os.PathLike[str]) -> Path:
    """The plot's destination, checked before any long run: a known format, an existing writable directory,
    matplotlib importable. Raises ``PlotError`` saying what is wrong."""
    p = Path(path)
    if p.suffix.lower() not in FORMATS:
        raise PlotError(f"{p}: unsupported format {p.suffix or '(none)'!r}; use one of {', '.join(FORMATS)}")
    if p.is_dir():
        raise PlotError(f"{p}: is a directory")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise PlotError(f"{p}: directory {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise PlotError(f"{p}: not writable")
    if importlib.util.find_spec("matplotlib") is None:
        raise PlotError(INSTALL_HINT)
    return p


def pyplot() -> Any:
    """``matplotlib.pyplot`` on the non-interactive Agg back end (no display needed, none used)."""
    try:
        import matplotlib
    except ImportError:
        raise PlotError(INSTALL_HINT) from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, path: str | os.PathLike[str]) -> Path:
    """Write ``fig`` to ``path`` (format from the extension) and close it; ``PlotError`` on I/O errors."""
    plt = pyplot()
    p = Path(path)
    try:
        fig.savefig(p, dpi=DPI, format=p.suffix.lower().lstrip(".") or None)
    except OSError as e:
        raise PlotError(f"{p}: {e.strerror or e}") from None
    finally:
        plt.close(fig)
    return p


def time_unit(max_seconds: float) -> tuple[str, float]:
    """A readable unit for durations up to ``max_seconds``: (label, factor to multiply seconds by)."""
    if max_seconds < 1e-3:
        return "µs", 1e6
    if max_seconds < 1.0:
        return "ms", 1e3
    return "s", 1.0


__all__ = ["FORMATS", "INSTALL_HINT", "PlotError", "check_path", "pyplot", "save", "time_unit"]
