"""Throughput and memory, measured as scheduler_perf does.

scheduler_perf's throughput collector samples the number of scheduled pods once a second and records
``new pods / elapsed`` per interval; an interval in which nothing was scheduled is not recorded as 0 but merged
into the next one (each merged interval then counts as one sample of the same rate). The summary is the mean of
the samples and their percentiles (the sample at index ``ceil(n * p / 100) - 1`` of the sorted list).

We have every bind time, so the samples are computed afterwards from them, on one-second intervals starting
when the measured pods were handed to the scheduler (or, where start-up should not count, at the first
binding). A trailing partial interval shorter than half a second is
folded into the sample before it; a run too short for any sample reports one sample, the overall rate.
"""

from __future__ import annotations

import math
import os
import resource
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

SAMPLE_INTERVAL = 1.0
MIN_TRAILING_FRACTION = 0.5


@dataclass
class Throughput:
    """Pods scheduled per second: mean and percentiles of the one-second samples."""

    average: float = 0.0
    p50: float = 0.0
    p90: float = 0.0
    p99: float = 0.0
    samples: list[float] = field(default_factory=list)

    def as_json(self) -> dict[str, float]:
        return {
            "average": round(self.average, 1),
            "p50": round(self.p50, 1),
            "p90": round(self.p90, 1),
            "p99": round(self.p99, 1),
        }


def percentile(sorted_samples: Sequence[float], pct: int) -> float:
    """scheduler_perf's percentile: the sample at ``ceil(n * pct / 100) - 1``."""
    if not sorted_samples:
        return 0.0
    index = max(0, math.ceil(len(sorted_samples) * pct / 100) - 1)
    return float(sorted_samples[index])


def throughput_samples(
    bind_times: Sequence[float], start: float | None = None, interval: float = SAMPLE_INTERVAL
) -> list[float]:
    """Per-interval rates from bind times (any clock, seconds), with empty intervals merged into the next.

    Intervals start at ``start`` (when the measured pods were handed over), or at the first binding.
    """
    if not bind_times:
        return []
    times = sorted(bind_times)
    first = times[0] if start is None else min(start, times[0])
    end = times[-1]
    full = int((end - first) // interval)
    counts = [0] * (full + 1)
    for t in times:
        counts[min(int((t - first) // interval), full)] += 1
    trailing = (end - first) - full * interval
    # Groups of (pods, seconds, intervals): an empty interval joins the next non-empty one; a short trailing
    # interval joins the group before it (dropping it would lose the burst a starved loop ends with).
    groups: list[list[float]] = []
    pending = 0
    for i, count in enumerate(counts):
        last = i == full
        length = trailing if last else interval
        if last and length < MIN_TRAILING_FRACTION * interval and groups:
            groups[-1][0] += count
            groups[-1][1] += length + pending * interval
            break
        if count == 0:
            pending += 1
            continue
        groups.append([count, length + pending * interval, pending + 1])
        pending = 0
    samples: list[float] = []
    for pods, seconds, intervals in groups:
        rate = pods / seconds if seconds > 0 else float(pods)
        samples.extend([rate] * int(intervals))
    if not samples:
        span = end - first
        samples = [len(times) / span] if span > 0 else [float(len(times))]
    return samples


def summarize(bind_times: Sequence[float], start: float | None = None) -> Throughput:
    samples = throughput_samples(bind_times, start)
    if not samples:
        return Throughput()
    ordered = sorted(samples)
    return Throughput(
        average=sum(samples) / len(samples),
        p50=percentile(ordered, 50),
        p90=percentile(ordered, 90),
        p99=percentile(ordered, 99),
        samples=samples,
    )


def series(
    bind_times: Mapping[str, float], handed_over: Mapping[str, float], start: float
) -> dict[str, list[float]]:
    """What ``--plot`` draws, kept only when it is asked for: every measured pod's binding as seconds after
    ``start`` (sorted), and its latency: from when the scheduler could first see it (created, or ``start`` if
    created before) to its binding, queue wait included. Rounded to the microsecond to keep the result small.
    """
    return {
        "bindSeconds": sorted(round(t - start, 6) for t in bind_times.values()),
        "latencySeconds": sorted(
            round(t - max(handed_over.get(key, start), start), 6) for key, t in bind_times.items()
        ),
    }


def peak_rss(pid: int | None = None) -> int:
    """Peak resident set size in bytes of ``pid`` (default: this process).

    Linux's ``VmHWM`` is the high-water mark of the current address space, so it does not include the memory
    of whatever process forked this one (``ru_maxrss`` does). 0 when it cannot be read.
    """
    path = f"/proc/{pid if pid is not None else 'self'}/status"
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    if pid is None or pid == os.getpid():
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return rss if sys.platform == "darwin" else rss * 1024
    return 0


def latency_summary(bind_times: Mapping[str, float], handed_over: Mapping[str, float]) -> dict[str, float]:
    """Create-to-bound latency of every bound pod that was handed over, in milliseconds: p50/p90/p99 (the same
    nearest-rank percentiles as the throughput samples), max and the count."""
    latencies = sorted(t - handed_over[k] for k, t in bind_times.items() if k in handed_over)
    if not latencies:
        return {"count": 0}
    return {
        "count": len(latencies),
        "p50": round(percentile(latencies, 50) * 1e3, 2),
        "p90": round(percentile(latencies, 90) * 1e3, 2),
        "p99": round(percentile(latencies, 99) * 1e3, 2),
        "max": round(latencies[-1] * 1e3, 2),
    }
