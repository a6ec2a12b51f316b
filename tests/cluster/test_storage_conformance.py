"""What every ``Storage`` backend must do, run against each backend (add a durable one to ``BACKENDS``).

The contract is the one ``ClusterApi`` and the HTTP layer rely on (``storage/interface.py``): one global revision,
sorted lists, lists at an older revision and 410 beyond the kept history, write preconditions (409), watches with
replay, selector transitions and 410, and waiting for a future revision. Backend internals (how history is kept,
when exactly it is compacted) are tested per backend elsewhere (``test_store.py`` for the in-memory one).
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.cluster import errors
from kubesched.cluster.storage import MemoryStorage, SqliteStorage, Storage
from kubesched.cluster.storage.etcd import EtcdStorage, LocalEtcd
from kubesched.cluster.storage.interface import (
    ADDED,
    CONTINUE_EXPIRED,
    DELETED,
    LIST_EXPIRED,
    MODIFIED,
    Stored,
)

Obj = dict[str, Any]
PODS = "/pods"
NODES = "/nodes"


def _sqlite(history: int) -> Storage:
    return SqliteStorage(
        Path(tempfile.mkdtemp(prefix="kubesched-sqlite-")) / "state.db", history_size=history
    )


_etcd_server: list[LocalEtcd] = []
_prefixes = itertools.count()


def _etcd(history: int) -> Storage:
    """One etcd for the session (started on first use, stopped at exit); each store under a prefix of its own."""
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed (Debian: apt-get install etcd-server; make test installs it)")
    if not _etcd_server:
        local = LocalEtcd(Path(tempfile.mkdtemp(prefix="kubesched-etcd-")))
        local.start()
        atexit.register(local.stop)
        _etcd_server.append(local)
    return EtcdStorage(_etcd_server[0].url, history_size=history, prefix=f"/t{next(_prefixes)}/registry")


# name -> factory(history_size): the backend with at least that many events of watch history per resource.
BACKENDS: dict[str, Callable[[int], Storage]] = {
    "memory": lambda history: MemoryStorage(history_size=history),
    "sqlite": _sqlite,
    "etcd": _etcd,
}


@pytest.fixture(params=sorted(BACKENDS))
def make(request: pytest.FixtureRequest) -> Iterator[Callable[[int], Storage]]:
    made: list[Storage] = []

    def factory(history: int) -> Storage:
        made.append(BACKENDS[request.param](history))
        return made[-1]

    yield factory
    for st in made:
        st.close()
        if isinstance(st, SqliteStorage):
            shutil.rmtree(st.path.parent, ignore_errors=True)


@pytest.fixture
def s(make: Callable[[int], Storage]) -> Storage:
    return make(1000)


def pod(ns: str, name: str, color: str = "red", n: int = 0) -> Obj:
    return {"metadata": {"namespace": ns, "name": name, "labels": {"color": color}}, "n": n}


def node(name: str) -> Obj:
    return {"metadata": {"name": name}}


def is_red(o: Obj) -> bool:
    return bool(o["metadata"]["labels"]["color"] == "red")


def keys(items: list[Stored]) -> list[tuple[str, str]]:
    return [st.key for st in items]


def events(items: list[tuple[str, Stored]]) -> list[tuple[str, int, str, str]]:
    return [(etype, st.rv, st.key[1], st.obj["metadata"]["labels"]["color"]) for etype, st in items]


# -- revisions and reads -------------------------------------------------------------------------------------------


def test_every_write_takes_the_next_revision(s: Storage) -> None:
    start = s.revision
    a = s.create(PODS, pod("default", "a"))
    assert a.rv == start + 1 == s.revision
    assert a.obj["metadata"]["resourceVersion"] == str(a.rv)
    assert a.key == ("default", "a")
    # One revision across resources, as etcd's.
    n = s.create(NODES, node("n1"))
    assert n.rv == a.rv + 1 and n.key == ("", "n1")
    a2 = s.update(PODS, dict(a.obj, n=1), a)
    assert a2.rv == n.rv + 1 and a2.obj["n"] == 1
    gone = s.delete(PODS, a2)
    assert gone.rv == a2.rv + 1 == s.revision
    # The deletion carries the last state at the deletion revision.
    assert gone.obj["n"] == 1 and gone.obj["metadata"]["resourceVersion"] == str(gone.rv)
    assert s.get(PODS, ("default", "a")) is None


def test_writes_do_not_touch_the_callers_dict(s: Storage) -> None:
    body = pod("default", "a")
    st = s.create(PODS, body)
    assert "resourceVersion" not in body["metadata"]
    assert s.get(PODS, ("default", "a")) is st
    assert st.data  # serialised form available to answer with


def test_list_is_sorted_filtered_and_consistent(s: Storage) -> None:
    for ns, name, color in [("b", "x", "red"), ("a", "z", "blue"), ("a", "y", "red"), ("b", "a", "red")]:
        s.create(PODS, pod(ns, name, color))
    s.create(NODES, node("n1"))
    items, rv = s.list(PODS)
    assert keys(items) == [("a", "y"), ("a", "z"), ("b", "a"), ("b", "x")]
    assert rv == s.revision
    assert keys(s.list(PODS, "a")[0]) == [("a", "y"), ("a", "z")]
    assert keys(s.list(PODS, None, is_red)[0]) == [("a", "y"), ("b", "a"), ("b", "x")]
    assert keys(s.list(PODS, "b", is_red)[0]) == [("b", "a"), ("b", "x")]
    assert s.list("/never-written")[0] == []
    assert sorted(st.key for st in s.scan(PODS)) == keys(items)
    assert sorted(st.key for st in s.scan(PODS, "a")) == [("a", "y"), ("a", "z")]


def test_list_at_an_older_revision(s: Storage) -> None:
    a = s.create(PODS, pod("default", "a", "red"))
    s.create(PODS, pod("default", "b", "blue"))
    at = s.revision
    s.update(PODS, pod("default", "a", "blue", n=1), a)
    s.create(PODS, pod("default", "c", "red"))
    b = s.get(PODS, ("default", "b"))
    assert b is not None
    s.delete(PODS, b)
    then = s.list_at(PODS, at)
    assert [(st.key[1], st.obj["metadata"]["labels"]["color"], st.rv) for st in then] == [
        ("a", "red", a.rv),
        ("b", "blue", b.rv),
    ]
    assert keys(s.list_at(PODS, at, "default", is_red)) == [("default", "a")]
    assert keys(s.list_at(PODS, s.revision)) == [("default", "a"), ("default", "c")]


def test_list_at_a_compacted_revision_is_gone(make: Callable[[int], Storage]) -> None:
    s = make(2)
    first = s.create(PODS, pod("default", "a"))
    for i in range(10):
        s.create(PODS, pod("default", f"p{i}"))
    with pytest.raises(errors.ApiError) as err:
        s.list_at(PODS, first.rv)
    assert err.value.code == 410 and err.value.message == LIST_EXPIRED
    with pytest.raises(errors.ApiError) as err:
        s.list_at(PODS, first.rv, continuing=True)
    assert err.value.code == 410 and err.value.message == CONTINUE_EXPIRED


def test_holds_namespace(s: Storage) -> None:
    assert not s.holds_namespace("team")
    st = s.create(PODS, pod("team", "a"))
    s.create(NODES, node("n1"))
    assert s.holds_namespace("team") and not s.holds_namespace("other")
    s.delete(PODS, st)
    assert not s.holds_namespace("team")


# -- preconditions -------------------------------------------------------------------------------------------------


def test_create_on_a_taken_key_is_already_exists(s: Storage) -> None:
    s.create(PODS, pod("default", "a"))
    rev = s.revision
    with pytest.raises(errors.ApiError) as err:
        s.create(PODS, pod("default", "a"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    assert s.revision == rev
    s.create(PODS, pod("other", "a"))  # same name, other namespace: another key


def test_update_and_delete_of_a_stale_version_conflict(s: Storage) -> None:
    v1 = s.create(PODS, pod("default", "a"))
    v2 = s.update(PODS, pod("default", "a", n=2), v1)
    rev = s.revision
    for write in (lambda: s.update(PODS, pod("default", "a", n=3), v1), lambda: s.delete(PODS, v1)):
        with pytest.raises(errors.ApiError) as err:
            write()
        assert err.value.code == 409 and err.value.reason == "Conflict"
    assert s.revision == rev and s.get(PODS, ("default", "a")) is v2
    gone = s.delete(PODS, v2)
    with pytest.raises(errors.ApiError) as err:
        s.update(PODS, pod("default", "a", n=4), v2)  # deleted meanwhile
    assert err.value.code == 409
    assert gone.rv == s.revision


# -- watch ---------------------------------------------------------------------------------------------------------


def test_watch_from_now_sends_current_state_then_changes(s: Storage) -> None:
    a = s.create(PODS, pod("default", "a"))
    s.create(PODS, pod("default", "b", "blue"))
    s.create(PODS, pod("other", "c"))
    w, initial = s.watch(PODS, namespace="default", predicate=None, since=None)
    assert [(e, st.key[1]) for e, st in initial] == [(ADDED, "a"), (ADDED, "b")]
    assert w.pending == 0
    a2 = s.update(PODS, pod("default", "a", n=1), a)
    s.create(PODS, pod("other", "d"))  # another namespace: not seen
    s.delete(PODS, a2)
    assert w.pending == 2
    got = w.drain()
    assert [(e, st.rv) for e, st in got] == [(MODIFIED, a2.rv), (DELETED, s.revision)]
    assert w.pending == 0
    w.close()
    assert w.closed
    s.create(PODS, pod("default", "e"))
    assert w.pending == 0


def test_watch_replays_history_with_selector_transitions(s: Storage) -> None:
    since = s.revision
    a = s.create(PODS, pod("default", "a", "red"))
    a2 = s.update(PODS, pod("default", "a", "blue"), a)  # stops matching
    a3 = s.update(PODS, pod("default", "a", "red", n=1), a2)  # matches again
    s.create(PODS, pod("default", "b", "blue"))  # never matches
    s.delete(PODS, a3)
    w, initial = s.watch(PODS, namespace=None, predicate=is_red, since=since)
    assert events(initial) == [
        (ADDED, a.rv, "a", "red"),
        # DELETED for the watcher it stopped matching, with the last content it matched, at the new revision
        (DELETED, a2.rv, "a", "red"),
        (ADDED, a3.rv, "a", "red"),
        (DELETED, s.revision, "a", "red"),
    ]
    # The same transitions live.
    c = s.create(PODS, pod("default", "c", "red"))
    c2 = s.update(PODS, pod("default", "c", "blue"), c)
    assert events(w.drain()) == [(ADDED, c.rv, "c", "red"), (DELETED, c2.rv, "c", "red")]
    w.close()


def test_watch_from_the_newest_revision_sends_nothing_first(s: Storage) -> None:
    s.create(PODS, pod("default", "a"))
    w, initial = s.watch(PODS, namespace=None, predicate=None, since=s.revision)
    assert initial == []
    w.close()


def test_watch_beyond_history_is_gone(make: Callable[[int], Storage]) -> None:
    s = make(2)
    first = s.create(PODS, pod("default", "a"))
    for i in range(10):
        s.create(PODS, pod("default", f"p{i}"))
    with pytest.raises(errors.ApiError) as err:
        s.watch(PODS, namespace=None, predicate=None, since=first.rv)
    assert err.value.code == 410
    assert re.fullmatch(rf"too old resource version: {first.rv} \(\d+\)", err.value.message)


async def test_watch_wait_wakes_on_a_write_and_times_out(s: Storage) -> None:
    w, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    assert await w.wait(0.01) is False
    loop = asyncio.get_running_loop()
    loop.call_later(0.01, lambda: s.create(PODS, pod("default", "a")))
    assert await w.wait(5) is True and w.pending == 1
    assert await w.wait(5) is True  # events buffered: at once
    w.drain()
    loop.call_later(0.01, w.close)
    assert await w.wait(5) is True and w.closed
    assert w.expired_message is None


def test_drop_collection_and_close_watchers_end_watches(s: Storage) -> None:
    s.create("example.com/widgets", pod("default", "w"))
    widgets, _ = s.watch("example.com/widgets", namespace=None, predicate=None, since=None)
    pods, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    s.drop_collection("example.com/widgets")
    assert widgets.closed and not pods.closed
    assert s.list("example.com/widgets")[0] == []
    s.close_watchers()
    assert pods.closed


async def test_wait_for_revision(s: Storage) -> None:
    assert await s.wait_for_revision(s.revision, 0.01) is True
    want = s.revision + 1
    assert await s.wait_for_revision(want, 0.01) is False
    asyncio.get_running_loop().call_later(0.01, lambda: s.create(PODS, pod("default", "a")))
    assert await s.wait_for_revision(want, 5) is True
