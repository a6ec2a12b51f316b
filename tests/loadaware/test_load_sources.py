"""Load sources: annotations parsed once per node version into slot columns; the in-memory store (direct mode)
read through its change log."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from la_helpers import CPU5, MEM5, NOW, SHANGHAI, cluster, crane, node, pod

import kubesched.loadaware.annotations as annotations
import kubesched.loadaware.sources as sources
from kubesched.loadaware.sources import AnnotationLoadSource, InMemoryLoadStore, LoadSource, StoreLoadSource
from kubesched.scheduler.cache import NodeTable


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every annotation string the annotation source parses."""
    seen: list[str] = []
    real = sources.parse_annotation

    def counting(text: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(text)
        return real(text, *args, **kwargs)

    monkeypatch.setattr(sources, "parse_annotation", counting)
    return seen


def slots(table: NodeTable, *names: str) -> np.ndarray:
    return np.array([table.index[n] for n in names], dtype=np.intp)


def test_columns_hold_values_and_timestamps() -> None:
    c = cluster(
        node("a", {CPU5: crane(0.5), MEM5: crane(0.25, age=600)}), node("b", {CPU5: "garbage"}), node("c")
    )
    source = AnnotationLoadSource((CPU5, MEM5), SHANGHAI)
    assert isinstance(source, LoadSource)
    cols = source.columns(c.table, slots(c.table, "b", "a", "c"))
    assert cols.metrics == (CPU5, MEM5) and cols.row(MEM5) == 1
    assert np.isnan(cols.values[0, 0]) and cols.values[0, 1] == 0.5 and np.isnan(cols.values[0, 2])
    assert cols.timestamps[0, 1] == NOW - 60 and cols.timestamps[1, 1] == NOW - 600
    assert np.isnan(cols.timestamps[1, 0])


def test_each_node_is_parsed_once_per_version(parses: list[str]) -> None:
    c = cluster(node("a", {CPU5: crane(0.5)}), node("b", {CPU5: crane(0.7)}))
    table = c.table
    source = AnnotationLoadSource((CPU5, MEM5), SHANGHAI)
    idx = slots(table, "a", "b")
    source.columns(table, idx)
    assert len(parses) == 2
    source.columns(table, idx)
    assert len(parses) == 2  # nothing changed
    c.on_pod_add(pod("x", node_name="a"))  # moves a's row_version, not its annotations
    assert source.columns(table, idx).values[0].tolist() == [0.5, 0.7]
    assert len(parses) == 2
    c.on_node_update(None, node("b", {CPU5: crane(0.9), "unrelated": "x"}))
    cols = source.columns(table, idx)
    assert parses[2:] == [crane(0.9)]
    assert cols.values[0].tolist() == [0.5, 0.9]


def test_only_candidates_are_parsed(parses: list[str]) -> None:
    c = cluster(*(node(f"n{i}", {CPU5: crane(i / 100)}) for i in range(10)))
    source = AnnotationLoadSource((CPU5,), SHANGHAI)
    source.columns(c.table, slots(c.table, "n3"))
    assert parses == [crane(0.03)]


def test_removed_node_and_reused_slot() -> None:
    c = cluster(node("a", {CPU5: crane(0.5)}), node("b", {CPU5: crane(0.6)}))
    table = c.table
    source = AnnotationLoadSource((CPU5,), SHANGHAI)
    source.columns(table, slots(table, "a", "b"))
    old = table.index["a"]
    c.on_node_delete(node("a"))
    c.on_node_add(node("z", {CPU5: crane(0.1)}))
    assert table.index["z"] == old  # the freed slot is reused
    assert source.columns(table, slots(table, "z", "b")).values[0].tolist() == [0.1, 0.6]
    c.on_node_add(node("y"))  # no annotations at all
    assert np.isnan(source.columns(table, slots(table, "y")).values[0, 0])


def test_table_growth_and_a_new_table() -> None:
    c = cluster(*(node(f"n{i}", {CPU5: crane(0.5)}) for i in range(3)))
    source = AnnotationLoadSource((CPU5,), SHANGHAI)
    source.columns(c.table, c.table.slots())
    for i in range(3, 200):  # grows the table past its initial 64 slots
        c.on_node_add(node(f"n{i}", {CPU5: crane(i / 1000)}))
    cols = source.columns(c.table, c.table.slots())
    assert cols.values.shape == (1, 200)
    assert cols.values[0, c.table.index["n150"]] == 0.15
    other = cluster(node("n0", {CPU5: crane(0.9)}))  # a different table: start over
    assert source.columns(other.table, other.table.slots()).values[0].tolist() == [0.9]


def test_identical_timestamps_are_parsed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    real = annotations.parse_timestamp

    def counting(text: str, zone: Any) -> float:
        calls.append(text)
        return real(text, zone)

    monkeypatch.setattr(annotations, "parse_timestamp", counting)
    c = cluster(*(node(f"n{i}", {CPU5: crane(0.5), MEM5: crane(0.4)}) for i in range(20)))
    AnnotationLoadSource((CPU5, MEM5), SHANGHAI).columns(c.table, c.table.slots())
    assert len(calls) == 1  # 40 annotations, one timestamp string


# --- direct mode ---------------------------------------------------------------------------------------------


def test_store_source_follows_writes() -> None:
    c = cluster(node("a"), node("b"))
    table = c.table
    store = InMemoryLoadStore()
    source = StoreLoadSource(store, (CPU5, MEM5))
    idx = slots(table, "a", "b")
    assert np.isnan(source.columns(table, idx).values).all()
    store.update("a", CPU5, 0.5, NOW - 10)
    store.update_many([("b", CPU5, 0.7, NOW - 20), ("b", MEM5, -1.0, NOW), ("ghost", CPU5, 0.1, NOW)])
    cols = source.columns(table, idx)
    assert cols.values[0].tolist() == [0.5, 0.7]
    assert cols.timestamps[0].tolist() == [NOW - 10, NOW - 20]
    assert np.isnan(cols.values[1, 1])  # negative values are unusable
    c.on_node_add(node("ghost"))  # a new node: rebuilt, and the sample written earlier appears
    assert source.columns(table, slots(table, "ghost")).values[0].tolist() == [0.1]
    store.remove_node("a")
    assert np.isnan(source.columns(table, idx).values[0, 0])
    assert store.sample("b", CPU5) == (0.7, NOW - 20) and store.sample("a", CPU5) is None


def test_store_log_overflow_forces_a_rebuild() -> None:
    c = cluster(node("a"))
    store = InMemoryLoadStore(max_log=4)
    source = StoreLoadSource(store, (CPU5,))
    idx = slots(c.table, "a")
    source.columns(c.table, idx)
    for i in range(10):
        store.update("a", CPU5, i / 10, NOW)
    assert store.log_epoch > 0
    assert source.columns(c.table, idx).values[0].tolist() == [0.9]
