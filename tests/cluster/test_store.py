"""The store's revisions, watch history, point-in-time lists and watcher fan-out, checked against a simple model."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.cluster import errors
from kubesched.cluster.storage import memory
from kubesched.cluster.storage.interface import (
    ADDED,
    CONTINUE_EXPIRED,
    DELETED,
    LIST_EXPIRED,
    MODIFIED,
    Stored,
)
from kubesched.cluster.storage.memory import MemoryStorage as Store
from kubesched.cluster.storage.memory import Watcher

PODS = "core/pods"
NODES = "core/nodes"
Obj = dict[str, Any]
Key = tuple[str, str]


def obj(ns: str, name: str, color: str = "red", n: int = 0) -> Obj:
    return {"metadata": {"namespace": ns, "name": name, "labels": {"color": color}}, "n": n}


def is_red(o: Obj) -> bool:
    return o["metadata"]["labels"]["color"] == "red"


def seen(items: list[tuple[str, Stored]]) -> list[tuple[str, int, Key, str]]:
    return [(etype, s.rv, s.key, s.obj["metadata"]["labels"]["color"]) for etype, s in items]


# -- a model of the store: every write of one collection, with the state before and after ----------------------


@dataclass
class Write:
    type: str
    rv: int
    key: Key
    new: Obj | None  # None for deletes
    old: Obj | None  # None for creates


@dataclass
class Model:
    history_size: int
    writes: dict[str, list[Write]] = field(default_factory=dict)

    def compacted(self, col: str) -> int:
        ws = self.writes.get(col, [])
        return ws[-self.history_size - 1].rv if len(ws) > self.history_size else 0

    def state_at(self, col: str, rv: int) -> dict[Key, tuple[int, Obj]]:
        state: dict[Key, tuple[int, Obj]] = {}
        for w in self.writes.get(col, []):
            if w.rv > rv:
                break
            if w.new is None:
                state.pop(w.key, None)
            else:
                state[w.key] = (w.rv, w.new)
        return state

    def events_after(
        self, col: str, rv: int, pred: Any = None, ns: str | None = None
    ) -> list[tuple[str, int, Key]]:
        """What a watcher with (namespace, predicate) sees after ``rv``: selector transitions included."""

        def match(o: Obj | None, key: Key) -> bool:
            return o is not None and (ns is None or key[0] == ns) and (pred is None or pred(o))

        out = []
        for w in self.writes.get(col, []):
            if w.rv <= rv:
                continue
            now, before = match(w.new, w.key), match(w.old, w.key)
            if now and before:
                out.append((MODIFIED, w.rv, w.key))
            elif now:
                out.append((ADDED, w.rv, w.key))
            elif before:
                out.append((DELETED, w.rv, w.key))
        return out


# An operation: (collection, namespace, name, color). It creates, updates or deletes depending on the state:
# absent → create; present and color "gone" → delete; present → update.
op_strategy = st.tuples(
    st.sampled_from([PODS, NODES]),
    st.sampled_from(["a", "b"]),
    st.sampled_from(["x", "y", "z"]),
    st.sampled_from(["red", "blue", "gone"]),
)


def apply_ops(s: Store, model: Model, ops: list[tuple[str, str, str, str]]) -> None:
    counter = 0
    for col, ns, name, color in ops:
        counter += 1
        key = (ns, name)
        cur = s.get(col, key)
        writes = model.writes.setdefault(col, [])
        before = s.revision
        if cur is None:
            new = obj(ns, name, "blue" if color == "gone" else color, counter)
            stored = s.create(col, new)
            writes.append(Write(ADDED, stored.rv, key, stored.obj, None))
        elif color == "gone":
            gone = s.delete(col, cur)
            writes.append(Write(DELETED, gone.rv, key, None, cur.obj))
            stored = gone
        else:
            stored = s.update(col, obj(ns, name, color, counter), cur)
            writes.append(Write(MODIFIED, stored.rv, key, stored.obj, cur.obj))
        # (a) every write takes the next revision of the one global counter
        assert stored.rv == before + 1 == s.revision
        assert stored.obj["metadata"]["resourceVersion"] == str(stored.rv)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ops=st.lists(op_strategy, min_size=1, max_size=40), history_size=st.integers(min_value=1, max_value=15)
)
def test_history_matches_model(ops: list[tuple[str, str, str, str]], history_size: int) -> None:
    s = Store(history_size=history_size)
    model = Model(history_size)
    # A live watcher per collection from the start (with and without a selector) sees every later write.
    live = {col: s.watch(col, namespace=None, predicate=None, since=None)[0] for col in (PODS, NODES)}
    red_a = {col: s.watch(col, namespace="a", predicate=is_red, since=None)[0] for col in (PODS, NODES)}
    apply_ops(s, model, ops)

    for col in (PODS, NODES):
        writes = model.writes.get(col, [])
        # (a) resourceVersions strictly increase; each object's RV is its last write
        rvs = [w.rv for w in writes]
        assert rvs == sorted(set(rvs))
        final = model.state_at(col, s.revision)
        current, list_rv = s.list(col)
        assert list_rv == s.revision
        assert {st_.key: st_.rv for st_ in current} == {k: rv for k, (rv, _) in final.items()}
        assert [st_.key for st_ in current] == sorted(final)
        for st_ in current:
            assert st_.obj["metadata"]["resourceVersion"] == str(st_.rv)
            assert orjson.loads(st_.data) == st_.obj

        compacted = model.compacted(col)
        assert s.collection(col).compacted == compacted
        assert [(e, rv, k) for e, rv, k, _ in seen(live[col].drain())] == model.events_after(col, 0)
        assert [(e, rv, k) for e, rv, k, _ in seen(red_a[col].drain())] == model.events_after(
            col, 0, is_red, "a"
        )

        for n in range(1, s.revision + 1):
            if n < compacted:
                # (c) and (d): compacted revisions are 410 with upstream's wording
                with pytest.raises(errors.ApiError) as list_err:
                    s.list_at(col, n)
                assert (list_err.value.code, list_err.value.message) == (410, LIST_EXPIRED)
                with pytest.raises(errors.ApiError) as watch_err:
                    s.watch(col, namespace=None, predicate=None, since=n)
                assert watch_err.value.code == 410
                assert watch_err.value.reason == "Expired"
                assert watch_err.value.message == f"too old resource version: {n} ({compacted})"
                continue
            # (b) a watch from n replays exactly the events after n, in order, with the stored objects
            w, replay = s.watch(col, namespace=None, predicate=None, since=n)
            assert [(e, x.rv, x.key) for e, x in replay] == model.events_after(col, n)
            for (etype, x), write in zip(replay, [wr for wr in writes if wr.rv > n], strict=True):
                expected = write.new if write.new is not None else write.old
                assert x.obj["metadata"]["resourceVersion"] == str(write.rv)
                assert {k: v for k, v in x.obj.items() if k != "metadata"} == {
                    k: v for k, v in (expected or {}).items() if k != "metadata"
                }
                assert etype == write.type
            w.close()
            # (e) the same replay through a selector: transitions become ADDED / DELETED
            w, replay = s.watch(col, namespace="a", predicate=is_red, since=n)
            assert [(e, x.rv, x.key) for e, x in replay] == model.events_after(col, n, is_red, "a")
            w.close()
            # (c) the list at n is the model's state at n, sorted by key, objects as they were then
            at_n = s.list_at(col, n)
            expected_state = model.state_at(col, n)
            assert [x.key for x in at_n] == sorted(expected_state)
            assert {x.key: (x.rv, x.obj["n"]) for x in at_n} == {
                k: (rv, o["n"]) for k, (rv, o) in expected_state.items()
            }
            red_in_b = s.list_at(col, n, namespace="b", predicate=is_red)
            assert [x.key for x in red_in_b] == sorted(
                k for k, (_, o) in expected_state.items() if k[0] == "b" and is_red(o)
            )


# -- unit tests ---------------------------------------------------------------------------------------------


def test_first_write_gets_revision_two_and_revisions_are_global() -> None:
    s = Store()
    a = s.create(PODS, obj("a", "x"))
    b = s.create(NODES, obj("", "n1"))
    c = s.update(PODS, obj("a", "x", "blue"), a)
    assert (a.rv, b.rv, c.rv) == (2, 3, 4)
    assert s.get(PODS, ("a", "x")) is c
    assert c.obj["metadata"]["resourceVersion"] == "4"


def test_writes_do_not_mutate_the_callers_object_or_the_previous_version() -> None:
    s = Store()
    body = obj("a", "x")
    first = s.create(PODS, body)
    assert "resourceVersion" not in body["metadata"]
    second = s.update(PODS, obj("a", "x", "blue"), first)
    assert first.obj["metadata"]["resourceVersion"] == "2"
    assert second.obj["metadata"]["resourceVersion"] == "3"


def test_deleted_event_carries_last_state_at_the_deletion_revision() -> None:
    s = Store()
    w, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    st1 = s.create(PODS, obj("a", "x", "blue", 7))
    gone = s.delete(PODS, st1)
    assert s.get(PODS, ("a", "x")) is None
    events = w.drain()
    assert [e for e, _ in events] == [ADDED, DELETED]
    assert events[1][1].rv == gone.rv == 3
    assert events[1][1].obj["metadata"]["resourceVersion"] == "3"
    assert events[1][1].obj["n"] == 7


def test_watch_without_revision_starts_with_current_state_sorted() -> None:
    s = Store()
    s.create(PODS, obj("b", "y"))
    s.create(PODS, obj("a", "z", "blue"))
    s.create(PODS, obj("a", "x"))
    _, initial = s.watch(PODS, namespace=None, predicate=None, since=None)
    assert [(e, x.key) for e, x in initial] == [(ADDED, ("a", "x")), (ADDED, ("a", "z")), (ADDED, ("b", "y"))]
    _, initial_red_a = s.watch(PODS, namespace="a", predicate=is_red, since=None)
    assert [x.key for _, x in initial_red_a] == [("a", "x")]


def test_selector_transitions() -> None:
    """ADDED when an object starts matching, DELETED (with its last matching content) when it stops."""
    s = Store()
    w, _ = s.watch(PODS, namespace=None, predicate=is_red, since=None)
    v1 = s.create(PODS, obj("a", "x", "blue", 1))  # not matching: nothing
    v2 = s.update(PODS, obj("a", "x", "red", 2), v1)  # starts matching
    v3 = s.update(PODS, obj("a", "x", "red", 3), v2)  # still matching
    v4 = s.update(PODS, obj("a", "x", "blue", 4), v3)  # stops matching
    v5 = s.update(PODS, obj("a", "x", "blue", 5), v4)  # still not matching
    s.delete(PODS, v5)  # deleting a non-matching object: nothing
    events = w.drain()
    assert [(e, x.rv, x.obj["n"]) for e, x in events] == [(ADDED, 3, 2), (MODIFIED, 4, 3), (DELETED, 5, 3)]
    # The DELETED carries the previous (matching) content, re-versioned at the event's revision.
    deleted = events[2][1]
    assert deleted.obj["metadata"]["labels"]["color"] == "red"
    assert deleted.obj["metadata"]["resourceVersion"] == "5"
    # The stored object itself is untouched.
    assert v3.obj["metadata"]["resourceVersion"] == "4"


def test_namespaced_watcher_ignores_other_namespaces() -> None:
    s = Store()
    w, _ = s.watch(PODS, namespace="a", predicate=None, since=None)
    s.create(PODS, obj("b", "x"))
    s.create(PODS, obj("a", "x"))
    assert [x.key for _, x in w.drain()] == [("a", "x")]


def test_watch_at_the_compaction_boundary() -> None:
    s = Store(history_size=2)
    a = s.create(PODS, obj("a", "x"))  # rv 2
    b = s.update(PODS, obj("a", "x", n=1), a)  # rv 3
    s.update(PODS, obj("a", "x", n=2), b)  # rv 4: drops rv 2 from history
    col = s.collection(PODS)
    assert col.compacted == 2
    # A watch from the compacted revision itself still gets every later event.
    _, replay = s.watch(PODS, namespace=None, predicate=None, since=2)
    assert [x.rv for _, x in replay] == [3, 4]
    with pytest.raises(errors.ApiError) as e:
        s.watch(PODS, namespace=None, predicate=None, since=1)
    assert e.value.status()["message"] == "too old resource version: 1 (2)"
    assert e.value.status()["code"] == 410
    # A list at the compaction boundary still rebuilds; below it is gone.
    assert [x.obj["n"] for x in s.list_at(PODS, 2)] == [0]
    with pytest.raises(errors.ApiError) as le:
        s.list_at(PODS, 1, continuing=True)
    assert (le.value.code, le.value.reason, le.value.message) == (410, "Expired", CONTINUE_EXPIRED)
    # Revisions of other collections do not compact this one.
    for i in range(5):
        s.create(NODES, obj("", f"n{i}"))
    assert col.compacted == 2


def test_fresh_store_replays_from_revision_one() -> None:
    s = Store(history_size=10)
    a = s.create(PODS, obj("a", "x"))
    s.update(PODS, obj("a", "x", "blue"), a)
    _, replay = s.watch(PODS, namespace=None, predicate=None, since=1)
    assert [e for e, _ in replay] == [ADDED, MODIFIED]


def test_list_at_a_revision_after_the_newest_is_the_current_state() -> None:
    s = Store()
    a = s.create(PODS, obj("a", "x"))
    assert [x.rv for x in s.list_at(PODS, s.revision + 10)] == [a.rv]


def test_slow_watcher_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "WATCHER_BUFFER_LIMIT", 3)
    s = Store()
    slow, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    fast, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    for i in range(3):
        s.create(PODS, obj("a", f"p{i}"))
        assert len(fast.drain()) == 1
    assert not slow.closed and len(slow.buffer) == 3
    s.create(PODS, obj("a", "p3"))
    assert slow.closed
    assert slow.expired_message is not None
    assert not slow.buffer
    assert slow not in s.collection(PODS).watchers
    # The fast watcher keeps going; the cut-off one hears nothing more.
    s.create(PODS, obj("a", "p4"))
    assert [x.key[1] for _, x in fast.drain()] == ["p3", "p4"]
    assert not slow.buffer


async def test_watcher_wait_wakes_on_event_and_times_out() -> None:
    s = Store()
    w, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    assert await w.wait(0.01) is False

    async def write_soon() -> None:
        await asyncio.sleep(0.01)
        s.create(PODS, obj("a", "x"))

    task = asyncio.create_task(write_soon())
    assert await w.wait(2.0) is True
    await task
    assert [e for e, _ in w.drain()] == [ADDED]
    w.close()
    assert await w.wait(0.01) is True  # a closed watcher never blocks
    assert w not in s.collection(PODS).watchers


async def test_wait_for_revision() -> None:
    s = Store()
    assert await s.wait_for_revision(1, 0.01) is True
    assert await s.wait_for_revision(3, 0.01) is False

    async def write_twice() -> None:
        await asyncio.sleep(0.01)
        s.create(PODS, obj("a", "x"))
        await asyncio.sleep(0.01)
        s.create(PODS, obj("a", "y"))

    task = asyncio.create_task(write_twice())
    assert await s.wait_for_revision(3, 2.0) is True
    await task
    assert s._revision_waiters == []


def test_drop_collection_closes_its_watchers() -> None:
    s = Store()
    w, _ = s.watch("example.com/widgets", namespace=None, predicate=None, since=None)
    s.create("example.com/widgets", obj("a", "x"))
    s.drop_collection("example.com/widgets")
    assert w.closed
    assert s.list("example.com/widgets")[0] == []


def test_watcher_offer_after_close_is_ignored() -> None:
    s = Store()
    w = Watcher(s.collection(PODS), None, None)
    w.close()
    st1 = s.create(PODS, obj("a", "x"))
    w.offer(memory.Event(ADDED, st1.rv, st1, None))
    assert not w.buffer


def test_superseded_versions_keep_only_their_bytes_and_still_read_back() -> None:
    s = Store()
    first = s.create(PODS, obj("a", "x", "red", 1))
    first_obj = first.obj
    second = s.update(PODS, obj("a", "x", "blue", 2), first)
    # The old version reads back equal, decoded afresh (no dict kept alive by the history).
    assert first.obj == first_obj
    assert first.obj is not first.obj
    assert orjson.loads(first.data) == first_obj
    # The current version is the dict that was stored.
    assert second.obj is second.obj
    gone = s.delete(PODS, second)
    assert gone.obj["n"] == 2 and gone.obj["metadata"]["resourceVersion"] == str(gone.rv)
    assert orjson.loads(gone.data) == gone.obj


def test_holds_namespace() -> None:
    s = Store()
    a = s.create(PODS, obj("a", "x"))
    s.create(NODES, obj("", "n1"))
    assert s.holds_namespace("a")
    assert not s.holds_namespace("b")
    s.delete(PODS, a)
    assert not s.holds_namespace("a")
