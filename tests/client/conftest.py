"""Fixtures for the client tests (helpers live in client_fakes.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from client_fakes import FakeCollection, FakeServer


@pytest.fixture
async def server() -> AsyncIterator[FakeServer]:
    srv = FakeServer()
    await srv.start()
    yield srv
    await srv.stop()


@pytest.fixture
def collection(server: FakeServer) -> FakeCollection:
    coll = FakeCollection()
    server.handler = coll.handle
    return coll
