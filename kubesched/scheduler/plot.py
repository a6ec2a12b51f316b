"""``kubesched simulate --plot FILE``: every node's requested/allocatable CPU and memory, before and after the
simulated placements.

Requests are counted as the scheduler counts them (``podinfo.compute_requests``: containers, init-container
peak, pod-level requests, overhead); "before" is the bound, non-terminal pods of the dump, "after" is that
minus preemption victims plus the pods placed. Up to ``BARS_UP_TO`` nodes each node is a pair of bars (sorted
by its utilisation after); above that, before and after are each drawn as a sorted curve, which stays
readable at 5,000 nodes. matplotlib is imported only when the figure is drawn (``kubesched.plots``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.plots import PlotError, check_path, pyplot, save
from kubesched.scheduler.podinfo import TERMINAL_PHASES, compute_requests
from kubesched.scheduler.resources import CPU, MEMORY, ResourceIndex, resource_amount

if TYPE_CHECKING:
    from kubesched.scheduler.simulate import Placement

BARS_UP_TO = 40  # nodes; beyond this, bars and their labels no longer fit


@dataclass
class Utilisation:
    """Per node, in the dump's node order: allocatable and requested amounts (millicores, bytes)."""

    nodes: list[str]
    cpu_allocatable: list[int]
    memory_allocatable: list[int]
    cpu_before: list[int]
    cpu_after: list[int]
    memory_before: list[int]
    memory_after: list[int]
    placed: int  # pods placed by the simulation
    unplaced: int

    @staticmethod
    def ratio(requested: Sequence[int], allocatable: Sequence[int]) -> list[float]:
        """requested / allocatable per node; 0 for a node with nothing allocatable."""
        return [r / a if a > 0 else 0.0 for r, a in zip(requested, allocatable, strict=True)]


def _key(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace') or 'default'}/{meta.get('name') or ''}"


def _allocatable(node: Mapping[str, Any], name: str) -> int:
    status = node.get("status") or {}
    amounts = status.get("allocatable") or status.get("capacity") or {}
    return resource_amount(name, amounts[name]) if name in amounts else 0


def utilisation(objects: Iterable[Mapping[str, Any]], placements: Iterable[Placement]) -> Utilisation:
    """Requested CPU and memory per node before and after ``placements`` (what ``simulate`` returned for
    ``objects``)."""
    res = ResourceIndex()
    nodes: list[Mapping[str, Any]] = []
    pods: dict[str, Mapping[str, Any]] = {}
    for obj in objects:
        if obj.get("kind") == "Node":
            nodes.append(obj)
        elif obj.get("kind") == "Pod":
            pods[_key(obj)] = obj

    def requests(pod: Mapping[str, Any]) -> tuple[int, int]:
        vector = compute_requests(pod.get("spec") or {}, res).vector
        return int(vector[CPU]), int(vector[MEMORY])

    names = [str((n.get("metadata") or {}).get("name") or "") for n in nodes]
    index = {name: i for i, name in enumerate(names)}
    cpu = [0] * len(names)
    mem = [0] * len(names)
    on_node: dict[str, int] = {}  # pod key -> node index, for the pods counted
    for key, pod in pods.items():
        node = (pod.get("spec") or {}).get("nodeName")
        if node in index and (pod.get("status") or {}).get("phase") not in TERMINAL_PHASES:
            c, m = requests(pod)
            cpu[index[node]] += c
            mem[index[node]] += m
            on_node[key] = index[node]
    cpu_after, mem_after = list(cpu), list(mem)
    placed = unplaced = 0
    for p in placements:
        for victim in p.preempted:
            i = on_node.pop(victim, None)
            if i is not None:
                c, m = requests(pods[victim])
                cpu_after[i] -= c
                mem_after[i] -= m
        if p.node is None:
            unplaced += 1
            continue
        placed += 1
        if p.node in index and p.pod in pods:
            c, m = requests(pods[p.pod])
            cpu_after[index[p.node]] += c
            mem_after[index[p.node]] += m
            on_node[p.pod] = index[p.node]
    return Utilisation(
        nodes=names,
        cpu_allocatable=[_allocatable(n, "cpu") for n in nodes],
        memory_allocatable=[_allocatable(n, "memory") for n in nodes],
        cpu_before=cpu,
        cpu_after=cpu_after,
        memory_before=mem,
        memory_after=mem_after,
        placed=placed,
        unplaced=unplaced,
    )


def _panel(ax: Any, names: list[str], before: list[float], after: list[float], resource: str) -> None:
    n = len(names)
    if n <= BARS_UP_TO:
        order = sorted(range(n), key=lambda i: (-after[i], names[i]))
        x = list(range(n))
        ax.bar(
            [i - 0.2 for i in x], [100 * before[i] for i in order], width=0.4, color="#9ecae1", label="before"
        )
        ax.bar(
            [i + 0.2 for i in x], [100 * after[i] for i in order], width=0.4, color="#08519c", label="after"
        )
        ax.set_xticks(
            x,
            [names[i] for i in order],
            rotation=45 if n > 6 else 0,
            ha="right" if n > 6 else "center",
            fontsize="small",
        )
        ax.set_xlabel("node (sorted by utilisation after)")
    else:
        # One curve each, every node sorted on its own: the distribution is what is readable at this size.
        x = list(range(1, n + 1))
        b = sorted((100 * v for v in before), reverse=True)
        a = sorted((100 * v for v in after), reverse=True)
        ax.fill_between(x, a, color="#08519c", alpha=0.35, step="mid", label="after")
        ax.plot(x, a, color="#08519c", linewidth=1.2, drawstyle="steps-mid")
        ax.plot(x, b, color="#3182bd", linewidth=1.5, linestyle="--", drawstyle="steps-mid", label="before")
        ax.set_xlim(1, n)
        ax.set_xlabel("nodes, each curve sorted from most to least utilised (rank)")
    mean_b = 100 * sum(before) / n
    mean_a = 100 * sum(after) / n
    ax.axhline(100, color="black", linewidth=0.8, linestyle=":")
    ax.set_ylabel(f"{resource} requested / allocatable (%)")
    top = max([100.0, *(100 * v for v in after), *(100 * v for v in before)])
    ax.set_ylim(0, top * 1.08)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(
        loc="upper right",
        fontsize="small",
        title=f"mean {mean_b:.0f} % → {mean_a:.0f} %",
        title_fontsize="small",
    )
    ax.set_title(f"{resource}", fontsize="medium")


def utilisation_figure(util: Utilisation, path: str | Path) -> Path:
    """Draw CPU and memory utilisation per node (before vs after) and write it to ``path``."""
    plt = pyplot()
    n = len(util.nodes)
    width = 12.0 if n <= BARS_UP_TO else 11.0
    fig, axes = plt.subplots(2, 1, figsize=(width, 8.0), layout="constrained")
    if n == 0:
        for ax in axes:
            ax.text(0.5, 0.5, "the cluster has no nodes", ha="center", va="center", transform=ax.transAxes)
    else:
        _panel(
            axes[0],
            util.nodes,
            Utilisation.ratio(util.cpu_before, util.cpu_allocatable),
            Utilisation.ratio(util.cpu_after, util.cpu_allocatable),
            "CPU",
        )
        _panel(
            axes[1],
            util.nodes,
            Utilisation.ratio(util.memory_before, util.memory_allocatable),
            Utilisation.ratio(util.memory_after, util.memory_allocatable),
            "memory",
        )
    fig.suptitle(
        f"kubesched simulate: node utilisation by requests, {n} node{'s' if n != 1 else ''}, "
        f"{util.placed} pod{'s' if util.placed != 1 else ''} placed, {util.unplaced} not",
        fontweight="bold",
    )
    return save(fig, path)


def write_plot(
    objects: Iterable[Mapping[str, Any]], placements: Iterable[Placement], path: str | Path
) -> Path:
    """``simulate --plot``: the utilisation of ``objects`` after ``placements``, drawn to ``path``."""
    return utilisation_figure(utilisation(objects, placements), path)


# What ``simulate.run`` calls: None when fine, else the one-line problem (so the command stays a few lines).


def plot_path_problem(path: str) -> str | None:
    """Checked before simulating: a known format, a writable directory, matplotlib installed."""
    try:
        check_path(path)
    except PlotError as e:
        return str(e)
    return None


def plot_problem(
    objects: Iterable[Mapping[str, Any]], placements: Iterable[Placement], path: str
) -> str | None:
    """Draw the figure; the problem if it could not be written."""
    try:
        write_plot(objects, placements, path)
    except PlotError as e:
        return str(e)
    return None


__all__ = [
    "BARS_UP_TO",
    "Utilisation",
    "plot_path_problem",
    "plot_problem",
    "utilisation",
    "utilisation_figure",
    "write_plot",
]
