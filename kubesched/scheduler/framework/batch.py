"""Opportunistic batching (KEP-5598, the ``OpportunisticBatching`` gate, beta and on by default in 1.36).

A cycle that scored its feasible nodes keeps them, best first, without the node it chose. The next cycle may take
the head of that list as a *hint* instead of filtering and scoring again, under upstream's rules (all must hold):

- the pod has a signature (every PreFilter/Filter/PreScore/Score plugin of the profile can sign it) equal to the
  signature of the pod that built the list;
- that pod was scheduled in the cycle just before (the cycle count is the previous one plus one) and its
  scheduling cycle succeeded (Reserve and Permit passed);
- the list is younger than 500 ms;
- the node the previous pod took no longer passes the Filter plugins for this pod ("one pod per node": had it
  still fit, its new score would be unknown and it might be the best again);
- the hinted node passes the Filter plugins (with nominated pods), as a nominated node is checked.

Where a batched decision may differ from a full cycle (upstream accepts the same):
1. the hint comes from the earlier cycle's sample of nodes (``percentageOfNodesToScore``), not from the sample a
   full cycle would take now (clusters under 100 nodes are scored whole, so there is no difference there);
2. normalised scores (NormalizeScore over the feasible set: TaintToleration, NodeAffinity's preferred terms,
   InterPodAffinity) were computed with the nodes taken since still in the set;
3. changes to other nodes since the list was built (informer updates within the 500 ms) are not rescored; the
   hinted node is only re-filtered;
4. ties keep the random order drawn when the list was built;
5. a hinted cycle does not advance the rotating start index of the node search (upstream returns before that).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# batch_attempts_total{result}
ATTEMPT_NO_HINT = "no_hint"
ATTEMPT_HINT_USED = "hint_used"
ATTEMPT_HINT_NOT_USED = "hint_not_used"

# batch_cache_flushed_total{reason}
FLUSH_POD_FAILED = "pod_failed"
FLUSH_POD_SKIPPED = "pod_skipped"
FLUSH_NODE_MISSING = "node_missing"
FLUSH_NODE_NOT_FULL = "node_not_full"
FLUSH_EMPTY_LIST = "empty_list"
FLUSH_EXPIRED = "expired"
FLUSH_POD_INCOMPATIBLE = "pod_incompatible"
FLUSH_POD_NOT_BATCHABLE = "pod_not_batchable"

MAX_BATCH_AGE = 0.5  # seconds

# A pod's signature: the scheduler name and each signing plugin's fragment, compared with ``==``.
Signature = tuple[Any, ...]


@dataclass(slots=True)
class _BatchState:
    signature: Signature
    nodes: list[str]  # the remaining nodes, best LAST (``pop()`` takes the best)
    created: float


class OpportunisticBatch:
    """One profile's batch: the ranked nodes of the last scored cycle and what became of the last cycle.

    ``attempts[result]`` and ``flushes[reason]`` count what upstream's ``scheduler_batch_attempts_total`` and
    ``scheduler_batch_cache_flushed_total`` count; the metrics read them at scrape time (a plain increment per
    cycle, no lock). ``clock`` is monotonic seconds (tests replace it)."""

    def __init__(
        self, *, clock: Callable[[], float] = time.monotonic, max_age: float = MAX_BATCH_AGE
    ) -> None:
        self.state: _BatchState | None = None
        self.last_cycle = -1
        self.last_chosen = ""
        self.last_succeeded = False
        self.batched_pods = 0  # pods placed on a hinted node
        self.attempts: dict[str, int] = dict.fromkeys(
            (ATTEMPT_NO_HINT, ATTEMPT_HINT_USED, ATTEMPT_HINT_NOT_USED), 0
        )
        self.flushes: dict[str, int] = {}
        self._clock = clock
        self.max_age = max_age

    def _flush(self, reason: str) -> None:
        # As upstream, a flush is counted only when there was a list to flush.
        if self.state is not None:
            self.flushes[reason] = self.flushes.get(reason, 0) + 1

    def _attempt(self, result: str) -> None:
        self.attempts[result] += 1

    def no_hint(self) -> None:
        """No list to take a hint from (the usual case when nothing is batchable): count the attempt."""
        self.attempts[ATTEMPT_NO_HINT] += 1

    def node_hint(
        self, signature: Signature | None, cycle: int, last_node_rejects: Callable[[str], bool | None]
    ) -> str:
        """The hinted node for this cycle's pod, or ``""``. ``last_node_rejects(name)``: do the Filter plugins
        reject the pod on that node (None: the node is gone)? Asked only when everything else allows a hint."""
        state = self.state
        if not self._compatible(state, signature, cycle, last_node_rejects):
            self._attempt(ATTEMPT_NO_HINT)
            return ""
        assert state is not None
        return state.nodes.pop()

    def _compatible(
        self,
        state: _BatchState | None,
        signature: Signature | None,
        cycle: int,
        last_node_rejects: Callable[[str], bool | None],
    ) -> bool:
        if state is None or not state.nodes:
            return False
        if cycle != self.last_cycle + 1:
            self._flush(FLUSH_POD_SKIPPED)
            return False
        if not self.last_succeeded:
            self._flush(FLUSH_POD_FAILED)
            return False
        if signature is None or signature != state.signature:
            self._flush(FLUSH_POD_INCOMPATIBLE)
            return False
        if self._clock() > state.created + self.max_age:
            self._flush(FLUSH_EXPIRED)
            return False
        rejects = last_node_rejects(self.last_chosen)
        if rejects is None:
            self._flush(FLUSH_NODE_MISSING)
            return False
        if not rejects:
            self._flush(FLUSH_NODE_NOT_FULL)
            return False
        return True

    def store(
        self, signature: Signature | None, hinted: str, chosen: str, others: list[str] | None, cycle: int
    ) -> None:
        """After a cycle chose ``chosen``: remember it; keep the list when the hint was taken, else replace it
        with ``others`` (the other scored nodes, best last) when the pod has a signature."""
        self.last_cycle = cycle
        self.last_chosen = chosen
        self.last_succeeded = False
        if hinted and hinted == chosen:
            self.batched_pods += 1
            self._attempt(ATTEMPT_HINT_USED)
            return
        if hinted:
            self._attempt(ATTEMPT_HINT_NOT_USED)
        if signature is not None and others:
            self.state = _BatchState(signature, others, self._clock())
            return
        self._flush(FLUSH_POD_NOT_BATCHABLE if signature is None else FLUSH_EMPTY_LIST)
        self.state = None

    def pod_succeeded(self) -> None:
        """The last cycle's pod passed Reserve and Permit: its list may serve the next pod."""
        self.last_succeeded = True


__all__ = [
    "ATTEMPT_HINT_NOT_USED",
    "ATTEMPT_HINT_USED",
    "ATTEMPT_NO_HINT",
    "MAX_BATCH_AGE",
    "OpportunisticBatch",
    "Signature",
]
