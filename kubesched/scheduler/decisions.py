"""A bounded log of recent scheduling decisions with their per-plugin scores (``--explain``).

kube-scheduler answers "why did my pod land there?" only through verbose logs. With ``--explain`` kubesched keeps
the last decisions in memory, in the same shape ``kubesched simulate`` prints, and serves them on the secure port at
``/debug/decisions``. Recording scores costs a little per cycle, so it is off by default.
"""

from __future__ import annotations

from collections import deque
from typing import Any


class DecisionLog:
    def __init__(self, size: int = 1000) -> None:
        self._entries: deque[dict[str, Any]] = deque(maxlen=size)

    def record(
        self,
        pod: str,
        node: str | None,
        *,
        profile: str,
        message: str = "",
        filtered: dict[str, list[str]] | None = None,
        scores: dict[str, dict[str, int]] | None = None,
        total_scores: dict[str, int] | None = None,
    ) -> None:
        entry: dict[str, Any] = {"pod": pod, "node": node, "profile": profile}
        if node is None:
            entry["message"] = message
        entry["filtered"] = filtered or {}
        out: dict[str, dict[str, int]] = {}
        for name, per_plugin in (scores or {}).items():
            row = dict(per_plugin)
            row["total"] = (total_scores or {}).get(name, sum(per_plugin.values()))
            out[name] = row
        entry["scores"] = out
        self._entries.append(entry)

    def snapshot(self) -> list[dict[str, Any]]:
        return list(self._entries)
