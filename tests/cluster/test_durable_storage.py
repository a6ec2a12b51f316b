"""Durable backends across a reopen: what was written is read back with its revisions, the revision never goes
backwards, resumptions from before the reopen get 410; etcd: a second store over the same etcd sees the first's
writes. (The shared contract is ``test_storage_conformance.py``; restarts of whole servers are
``test_durable_restart.py``.)"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.cluster import errors
from kubesched.cluster.local import ClusterOptions, open_storage
from kubesched.cluster.storage import MemoryStorage, SqliteStorage
from kubesched.cluster.storage.etcd import EtcdStorage, LocalEtcd, etcd_resource
from kubesched.cluster.storage.interface import ADDED, MODIFIED
from kubesched.cluster.storage.sqlite import StorageInUse

PODS = "/pods"
Obj = dict[str, Any]


def pod(ns: str, name: str, n: int = 0) -> Obj:
    return {"metadata": {"namespace": ns, "name": name}, "n": n}


def snapshot(s: MemoryStorage) -> dict[tuple[str, str, str], tuple[int, Obj]]:
    return {
        (sk, *st.key): (st.rv, st.obj) for sk, col in s.collections().items() for st in col.objects.values()
    }


# -- sqlite ----------------------------------------------------------------------------------------------------------


def test_sqlite_reopen_keeps_objects_and_revisions(tmp_path: Path) -> None:
    path = tmp_path / "db" / "state.db"
    s = SqliteStorage(path)
    a = s.create(PODS, pod("default", "a"))
    b = s.create(PODS, pod("default", "b"))
    a2 = s.update(PODS, pod("default", "a", n=2), a)
    s.create("/nodes", {"metadata": {"name": "n1"}})
    s.create("example.com/widgets", pod("team", "w"))
    gone = s.delete(PODS, b)  # the newest write is a deletion: the revision must not fall back below it
    before, rev = snapshot(s), s.revision
    s.close()

    s = SqliteStorage(path)
    assert snapshot(s) == before and s.revision == rev == gone.rv
    assert s.recovered == 3
    got = s.get(PODS, ("default", "a"))
    assert got is not None and got.rv == a2.rv and got.obj["metadata"]["resourceVersion"] == str(a2.rv)
    assert got.data == a2.data  # the stored bytes are served as they were written
    # History before the reopen is gone: watches and lists from earlier revisions relist.
    with pytest.raises(errors.ApiError) as err:
        s.watch(PODS, namespace=None, predicate=None, since=a2.rv)
    assert err.value.code == 410
    with pytest.raises(errors.ApiError) as err:
        s.list_at(PODS, a2.rv)
    assert err.value.code == 410
    # From the recovered revision on, watches work and writes continue the sequence.
    w, initial = s.watch(PODS, namespace=None, predicate=None, since=s.revision)
    assert initial == []
    c = s.create(PODS, pod("default", "c"))
    assert c.rv == rev + 1 and [(e, x.rv) for e, x in w.drain()] == [(ADDED, c.rv)]
    # Preconditions hold against recovered versions.
    with pytest.raises(errors.ApiError) as err:
        s.create(PODS, pod("default", "a"))
    assert err.value.code == 409
    assert s.update(PODS, pod("default", "a", n=3), got).rv == c.rv + 1
    s.close()


def test_sqlite_full_sync_mode(tmp_path: Path) -> None:
    s = SqliteStorage(tmp_path / "state.db", synchronous="full")
    assert s._db.execute("PRAGMA synchronous").fetchone() == (2,)  # FULL: an fsync per commit
    a = s.create(PODS, pod("default", "a"))
    s.close()
    s = SqliteStorage(tmp_path / "state.db")
    assert s._db.execute("PRAGMA synchronous").fetchone() == (1,)  # NORMAL, the default
    got = s.get(PODS, ("default", "a"))
    assert got is not None and got.rv == a.rv
    s.close()


def test_sqlite_file_is_held_by_one_server(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    s = SqliteStorage(path)
    with pytest.raises(StorageInUse, match=r"state\.db is in use by pid \d+"):
        SqliteStorage(path)
    s.close()
    SqliteStorage(path).close()  # released on close


def test_sqlite_write_that_cannot_be_made_durable_changes_nothing(tmp_path: Path) -> None:
    s = SqliteStorage(tmp_path / "state.db")
    a = s.create(PODS, pod("default", "a"))
    rev = s.revision
    w, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    s._db.execute("PRAGMA query_only = ON")  # every write now fails in SQLite
    for write in (
        lambda: s.create(PODS, pod("default", "b")),
        lambda: s.update(PODS, pod("default", "a", n=1), a),
        lambda: s.delete(PODS, a),
    ):
        with pytest.raises(errors.ApiError) as err:
            write()
        assert err.value.code == 500
    assert s.revision == rev and s.get(PODS, ("default", "a")) is a and w.pending == 0
    s._db.execute("PRAGMA query_only = OFF")
    assert s.create(PODS, pod("default", "b")).rv == rev + 1
    s.close()


OPS = st.lists(
    st.tuples(st.sampled_from(["create", "update", "delete"]), st.sampled_from(["a", "b", "c", "d"])),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, reopen_every=st.integers(min_value=1, max_value=15))
def test_sqlite_matches_memory_through_reopens(ops: list[tuple[str, str]], reopen_every: int) -> None:
    """Any sequence of writes, with reopens in between, leaves the same objects and revisions as memory would."""
    folder = Path(tempfile.mkdtemp(prefix="kubesched-sqlite-prop-"))
    try:
        model = MemoryStorage()
        s = SqliteStorage(folder / "state.db")
        for i, (op, name) in enumerate(ops):
            key = ("ns", name)
            cur, mcur = s.get(PODS, key), model.get(PODS, key)
            if op == "create" and cur is None:
                assert mcur is None
                model.create(PODS, pod("ns", name, i))
                s.create(PODS, pod("ns", name, i))
            elif op == "update" and cur is not None and mcur is not None:
                model.update(PODS, pod("ns", name, i), mcur)
                s.update(PODS, pod("ns", name, i), cur)
            elif op == "delete" and cur is not None and mcur is not None:
                model.delete(PODS, mcur)
                s.delete(PODS, cur)
            if (i + 1) % reopen_every == 0:
                s.close()
                s = SqliteStorage(folder / "state.db")
            assert s.revision == model.revision
            assert snapshot(s) == snapshot(model)
        s.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# -- memory: a restarted server does not honour an earlier one's revisions ---------------------------------------------


def test_memory_storage_starts_above_earlier_revisions(tmp_path: Path) -> None:
    options = ClusterOptions(data_dir=tmp_path, storage="memory")
    first = open_storage(options)
    a = first.create(PODS, pod("default", "a"))
    (tmp_path / "memory-revision").write_text(f"{first.revision + 10**17}\n")  # as if the clock went back
    second = open_storage(options)
    assert second.revision == first.revision + 10**17 + 1
    # A client resuming from anything the first server issued is told to relist, not served silently.
    for since in (a.rv, second.revision - 1):
        with pytest.raises(errors.ApiError) as err:
            second.watch(PODS, namespace=None, predicate=None, since=since)
        assert err.value.code == 410
    w, initial = second.watch(PODS, namespace=None, predicate=None, since=second.revision)
    assert initial == [] and not w.closed
    assert second.create(PODS, pod("default", "b")).rv == second.revision


def test_open_storage_refuses_an_unknown_backend(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown storage 'disk'"):
        open_storage(ClusterOptions(data_dir=tmp_path, storage="disk"))


# -- etcd -------------------------------------------------------------------------------------------------------------


def test_etcd_keys_follow_kube_apiserver() -> None:
    assert etcd_resource("/pods") == "pods"
    assert etcd_resource("/nodes") == "minions"
    assert etcd_resource("/services") == "services/specs"
    assert etcd_resource("/endpoints") == "services/endpoints"
    assert etcd_resource("core/events") == "events"
    assert etcd_resource("apps/deployments") == "deployments"
    assert etcd_resource("coordination.k8s.io/leases") == "leases"
    assert etcd_resource("rbac.authorization.k8s.io/clusterroles") == "clusterroles"
    assert etcd_resource("apiextensions.k8s.io/customresourcedefinitions") == (
        "apiextensions.k8s.io/customresourcedefinitions"
    )
    assert etcd_resource("example.com/widgets") == "example.com/widgets"


@pytest.fixture(scope="module")
def etcd_url() -> Iterator[str]:
    if shutil.which("etcd") is None:
        pytest.skip("etcd is not installed (Debian: apt-get install etcd-server; make test installs it)")
    folder = Path(tempfile.mkdtemp(prefix="kubesched-etcd-"))
    local = LocalEtcd(folder)
    url = local.start()
    yield url
    local.stop()
    shutil.rmtree(folder, ignore_errors=True)


def test_etcd_layout_and_reopen(etcd_url: str) -> None:
    from kubesched.cluster.storage.etcd import EtcdClient

    keys = {"/pods", "/nodes", "apps/deployments"}
    s = EtcdStorage(etcd_url, storage_keys=keys, prefix="/reopen/registry")
    a = s.create(PODS, pod("default", "a"))
    s.create("/nodes", {"metadata": {"name": "n1"}})
    s.create("apps/deployments", pod("default", "d"))
    s.create("example.com/widgets", pod("team", "w"))
    b = s.create(PODS, pod("default", "b"))
    gone = s.delete(PODS, b)
    before, rev = snapshot(s), s.revision
    s.close()

    raw, etcd_rev = EtcdClient(etcd_url).range_prefix(b"/reopen/registry/")
    import base64

    assert sorted(base64.b64decode(kv["key"]).decode() for kv in raw) == [
        "/reopen/registry/deployments/default/d",
        "/reopen/registry/example.com/widgets/team/w",
        "/reopen/registry/minions/n1",
        "/reopen/registry/pods/default/a",
    ]
    assert etcd_rev == gone.rv  # resourceVersion is etcd's revision
    assert int(next(kv for kv in raw if b"pods" in base64.b64decode(kv["key"]))["mod_revision"]) == a.rv

    s = EtcdStorage(etcd_url, storage_keys=keys, prefix="/reopen/registry")
    assert snapshot(s) == {k: v for k, v in before.items()} and s.revision >= rev
    with pytest.raises(errors.ApiError) as err:
        s.watch(PODS, namespace=None, predicate=None, since=a.rv)
    assert err.value.code == 410
    s.close()


def test_etcd_second_server_sees_the_first_ones_writes(etcd_url: str) -> None:
    one = EtcdStorage(etcd_url, storage_keys={PODS}, prefix="/multi/registry")
    a = one.create(PODS, pod("default", "a"))
    two = EtcdStorage(etcd_url, storage_keys={PODS}, prefix="/multi/registry")
    got = two.get(PODS, ("default", "a"))
    assert got is not None and got.rv == a.rv
    w, _ = two.watch(PODS, namespace=None, predicate=None, since=two.revision)
    # Live: writes of the first server reach the second one's cache and watchers, in etcd's order.
    a2 = one.update(PODS, pod("default", "a", n=1), a)
    b = one.create(PODS, pod("default", "b"))
    import time

    deadline = time.monotonic() + 30
    while two.revision < b.rv and time.monotonic() < deadline:
        time.sleep(0.02)
        two.get(PODS, ("default", "b"))  # reads apply what the watch brought
    assert [(e, x.rv, x.key[1]) for e, x in w.drain()] == [(MODIFIED, a2.rv, "a"), (ADDED, b.rv, "b")]
    # The preconditions are etcd's: a stale version read by the second server conflicts there too.
    with pytest.raises(errors.ApiError) as err:
        two.update(PODS, pod("default", "a", n=9), got)
    assert err.value.code == 409
    cur = two.get(PODS, ("default", "a"))
    assert cur is not None and cur.rv == a2.rv
    gone = two.delete(PODS, cur)
    deadline = time.monotonic() + 30
    while one.get(PODS, ("default", "a")) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert one.get(PODS, ("default", "a")) is None and one.revision >= gone.rv
    with pytest.raises(errors.ApiError) as err:
        one.create(PODS, pod("default", "b"))
    assert err.value.code == 409 and err.value.reason == "AlreadyExists"
    w.close()
    one.close()
    two.close()


def test_etcd_compaction_past_the_watch_reloads_and_expires_watches(etcd_url: str) -> None:
    import socket

    from kubesched.cluster.storage.etcd import EtcdClient

    s = EtcdStorage(etcd_url, storage_keys={PODS}, prefix="/compact/registry")
    other = EtcdStorage(etcd_url, storage_keys={PODS}, prefix="/compact/registry")
    a = s.create(PODS, pod("default", "a"))
    b = other.create(PODS, pod("default", "b"))
    wait_until(lambda: s.get(PODS, ("default", "b")) is not None)
    w, _ = s.watch(PODS, namespace=None, predicate=None, since=None)
    # The store's watch drops while etcd compacts past the revision it will resume from (as after a long
    # disconnection): etcd refuses the resumption and the store must reload.
    s._watch_from = a.rv
    EtcdClient(etcd_url).compact(b.rv)
    s._watch_conn.sock.shutdown(socket.SHUT_RDWR)
    c = other.create(PODS, pod("default", "c"))
    wait_until(lambda: s.get(PODS, ("default", "c")) is not None)
    assert w.closed and w.expired_message and "too old resource version" in w.expired_message
    got = s.get(PODS, ("default", "c"))
    assert got is not None and got.rv == c.rv and s.floor >= b.rv
    assert sorted(x.key[1] for x in s.list(PODS)[0]) == ["a", "b", "c"]
    with pytest.raises(errors.ApiError) as err:
        s.watch(PODS, namespace=None, predicate=None, since=a.rv)
    assert err.value.code == 410
    # And it keeps following etcd afterwards.
    d = other.create(PODS, pod("default", "d"))
    wait_until(lambda: s.get(PODS, ("default", "d")) is not None)
    got_d = s.get(PODS, ("default", "d"))
    assert got_d is not None and got_d.rv == d.rv
    s.close()
    other.close()


def wait_until(fn: Any, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.02)
