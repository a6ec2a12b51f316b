"""``kubesched simulate --plot``: the utilisation numbers (checked by hand on small clusters), the figure at
few and at many nodes, and the command's errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.plots import DPI
from kubesched.scheduler.config import default_config
from kubesched.scheduler.plot import BARS_UP_TO, Utilisation, utilisation, utilisation_figure
from kubesched.scheduler.simulate import Placement, read_objects, simulate

pytest.importorskip("matplotlib")
FIXTURES = Path(__file__).parent / "simulate"
GI, MI = 2**30, 2**20


def node(name: str, amounts: dict[str, str], part: str = "allocatable") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "status": {part: amounts}}


def pod(name: str, containers: list[tuple[str, str]], **spec: Any) -> dict[str, Any]:
    status = spec.pop("status", None)
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {"name": f"c{i}", "image": "app:1", "resources": {"requests": {"cpu": c, "memory": m}}}
                for i, (c, m) in enumerate(containers)
            ],
            **spec,
        },
    }
    if status:
        obj["status"] = status
    return obj


def small_cluster() -> list[dict[str, Any]]:
    return [
        node("n1", {"cpu": "4", "memory": "8Gi", "pods": "110"}),
        node("n2", {"cpu": "2", "memory": "4Gi"}, part="capacity"),  # allocatable falls back to capacity
        # On n1: two containers, 750m and 1.5Gi.
        pod("a", [("500m", "1Gi"), ("250m", "512Mi")], nodeName="n1", status={"phase": "Running"}),
        # Finished: holds nothing.
        pod("done", [("1", "1Gi")], nodeName="n2", status={"phase": "Succeeded"}),
        # Pending: the 1500m init container is the CPU peak, plus 100m/64Mi overhead -> 1600m, 2Gi + 64Mi.
        pod(
            "b",
            [("1", "2Gi")],
            initContainers=[
                {
                    "name": "i",
                    "image": "app:1",
                    "resources": {"requests": {"cpu": "1500m", "memory": "256Mi"}},
                }
            ],
            overhead={"cpu": "100m", "memory": "64Mi"},
        ),
        pod("c", [("3", "1Gi")]),
    ]


def test_utilisation_is_requests_over_allocatable_by_hand() -> None:
    placements = [Placement("default/b", "n2"), Placement("default/c", None, "0/2 nodes are available")]
    u = utilisation(small_cluster(), placements)
    assert u.nodes == ["n1", "n2"]
    assert u.cpu_allocatable == [4000, 2000] and u.memory_allocatable == [8 * GI, 4 * GI]
    assert u.cpu_before == [750, 0] and u.memory_before == [GI + 512 * MI, 0]
    assert u.cpu_after == [750, 1600] and u.memory_after == [GI + 512 * MI, 2 * GI + 64 * MI]
    assert (u.placed, u.unplaced) == (1, 1)
    assert Utilisation.ratio(u.cpu_after, u.cpu_allocatable) == [750 / 4000, 1600 / 2000]
    assert Utilisation.ratio(u.memory_before, u.memory_allocatable) == [1.5 / 8, 0.0]
    assert Utilisation.ratio([5], [0]) == [0.0]  # a node with nothing allocatable


def test_preemption_victims_leave_and_the_placed_pods_arrive() -> None:
    # preemption.yaml: n1 and n2 (2 CPU, 4Gi) each hold a 1500m/1Gi pod; "urgent" (1 CPU) evicts "low" from
    # n1, then "later" (500m) fits on n1 beside it.
    objects = read_objects(FIXTURES / "preemption.yaml")
    placements = await_simulation(objects)
    assert [(p.pod, p.node, p.preempted) for p in placements] == [
        ("default/urgent", "n1", ["default/low"]),
        ("default/later", "n1", []),
    ]
    u = utilisation(objects, placements)
    assert u.cpu_before == [1500, 1500] and u.memory_before == [GI, GI]
    assert u.cpu_after == [1000 + 500, 1500] and u.memory_after == [2 * GI, GI]


def await_simulation(objects: list[dict[str, Any]]) -> list[Placement]:
    import asyncio

    return asyncio.run(simulate(default_config(), objects, seed=1))


def png_size(path: Path) -> tuple[int, int]:
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    height, width = matplotlib.image.imread(path).shape[:2]
    return width, height


@pytest.mark.parametrize("nodes", [5, BARS_UP_TO + 1, 5000])
def test_figure_at_few_and_many_nodes(tmp_path: Path, nodes: int) -> None:
    names = [f"node-{i:05d}" for i in range(nodes)]
    cpu = [(i * 37) % 4000 for i in range(nodes)]
    u = Utilisation(
        names,
        [4000] * nodes,
        [8 * GI] * nodes,
        cpu,
        [c + 500 for c in cpu],
        [GI] * nodes,
        [2 * GI] * nodes,
        9,
        1,
    )
    out = utilisation_figure(u, tmp_path / "u.png")
    width = 12.0 if nodes <= BARS_UP_TO else 11.0
    assert png_size(out) == (round(width * DPI), 8 * DPI)


def test_cli_plot_writes_the_figure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from kubesched.cli import main

    out = tmp_path / "sim.png"
    rc = main(["simulate", "--cluster", str(FIXTURES / "preemption.yaml"), "-o", "json", "--plot", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert '"placements"' in captured.out  # the usual output, unchanged
    assert png_size(out) == (12 * DPI, 8 * DPI)


@pytest.mark.parametrize(
    ("path", "message"),
    [("/nonexistent-dir/sim.png", "directory /nonexistent-dir does not exist"), ("{tmp}/sim.gif", "'.gif'")],
)
def test_cli_bad_plot_path_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: str, message: str
) -> None:
    from kubesched.cli import main

    rc = main(
        ["simulate", "--cluster", str(FIXTURES / "preemption.yaml"), "--plot", path.format(tmp=tmp_path)]
    )
    captured = capsys.readouterr()
    assert rc == 1
    assert captured.out == ""  # refused before simulating
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kubesched simulate: --plot") and message in lines[0]
