"""Informers across repeated API server restarts (each one expires every watch: resumptions get 410).

A kubesched ``Informer`` follows ConfigMaps while a writer creates, updates and deletes them and the server is
SIGKILLed and started again three times. Afterwards the informer's store and what its handlers were told both
equal the server's state: nothing lost, no object added twice, no ghost of a deleted one.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import signal
from pathlib import Path
from typing import Any

import pytest
from clusterproc import ClusterProcess, free_port, start_cluster

from kubesched.client.config import load_config
from kubesched.client.informer import Informer, object_key
from kubesched.client.rest import ApiClient

NEEDS_ETCD = pytest.mark.skipif(
    shutil.which("etcd") is None,
    reason="etcd is not installed (Debian: apt-get install etcd-server; make test installs it)",
)


@pytest.mark.parametrize("storage", ["sqlite", pytest.param("etcd", marks=NEEDS_ETCD)])
async def test_informer_converges_across_restarts(tmp_path: Path, storage: str) -> None:
    port = free_port()
    flags = ("--port", str(port), "--storage", storage, "--no-controllers", "--nodes", "1")
    server: ClusterProcess = await asyncio.to_thread(start_cluster, tmp_path, *flags, timeout=120)
    mirror: dict[str, str] = {}  # what the handlers said: key -> resourceVersion
    duplicates: list[str] = []

    def on_add(obj: dict[str, Any]) -> None:
        key = object_key(obj)
        if key in mirror:
            duplicates.append(key)
        mirror[key] = obj["metadata"]["resourceVersion"]

    def on_update(old: dict[str, Any], new: dict[str, Any]) -> None:
        mirror[object_key(new)] = new["metadata"]["resourceVersion"]

    def on_delete(obj: Any) -> None:
        mirror.pop(getattr(obj, "key", None) or object_key(obj), None)

    rng = random.Random(13)
    client = ApiClient(load_config(str(server.kubeconfig)), max_retries=0, timeout=10)
    informer = Informer(client, "v1", "configmaps", namespace="default")
    informer.add_handler(on_add, on_update, on_delete)
    writes = 0
    stop = asyncio.Event()

    async def writer() -> None:
        nonlocal writes
        names: list[str] = []
        i = 0
        while not stop.is_set():
            try:
                roll = rng.random()
                if names and roll < 0.25:
                    name = names.pop(rng.randrange(len(names)))
                    await client.delete("v1", "configmaps", name, namespace="default")
                elif names and roll < 0.5:
                    name = rng.choice(names)
                    cur = await client.get("v1", "configmaps", name, namespace="default")
                    cur["data"] = {"n": str(i)}
                    await client.replace("v1", "configmaps", name, cur, namespace="default")
                else:
                    await client.create(
                        "v1", "configmaps", {"metadata": {"name": f"cm-{i}"}, "data": {}}, namespace="default"
                    )
                    names.append(f"cm-{i}")
                i += 1
                writes += 1
            except Exception:  # the server is down or the write's outcome is unknown: carry on
                await asyncio.sleep(0.1)

    informer.start()
    try:
        assert await informer.has_synced(60)
        task = asyncio.create_task(writer())
        for _ in range(3):
            target = writes + 40
            while writes < target:
                await asyncio.sleep(0.05)
            server.proc.send_signal(signal.SIGKILL)
            await asyncio.to_thread(server.proc.wait, 30)
            server = await asyncio.to_thread(start_cluster, tmp_path, *flags, timeout=120)
        target = writes + 40
        while writes < target:
            await asyncio.sleep(0.05)
        stop.set()
        await task

        async def server_state() -> dict[str, str]:
            got = await client.list("v1", "configmaps", namespace="default")
            return {object_key(o): o["metadata"]["resourceVersion"] for o in got["items"]}

        want = await server_state()
        for _ in range(600):
            if (
                mirror == want
                and {k: o["metadata"]["resourceVersion"] for k, o in informer.store.items()} == want
            ):
                break
            await asyncio.sleep(0.1)
        assert mirror == want, (len(mirror), len(want))
        assert {k: o["metadata"]["resourceVersion"] for k, o in informer.store.items()} == want
        assert not duplicates, duplicates[:5]
        assert len(want) > 20
    finally:
        await informer.stop()
        await client.close()
        server.stop()
