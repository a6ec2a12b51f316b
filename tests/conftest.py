"""Suite-wide settings: the import path of the shared helpers, Hypothesis profiles, and how the tests are spread
over pytest-xdist workers (see below).

Hypothesis: the ``ci`` profile (the default) has no per-example deadline, since a loaded 2-core machine running two
workers makes wall-clock deadlines flaky (a test's own ``@settings`` still wins); ``KUBESCHED_HYPOTHESIS=thorough``
runs the property tests that do not set their own count with 1,000 examples instead of 100.

xdist (``make test``: ``-n 2 --dist loadfile --no-loadscope-reorder``): a test module runs whole on one worker,
so a module-scoped fixture (a cluster process, a browser, a built image) is built once; a session-scoped one of a
folder's conftest at most once per worker. Modules that start processes (any test marked ``slow``) come first, so
the long ones do not land at the end of the run on one worker while the other idles. (``--dist loadgroup`` does
not group under pytest 9.2: xdist 3.8 renames node ids through an attribute pytest no longer reads.)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

THOROUGH = os.environ.get("KUBESCHED_HYPOTHESIS", "") == "thorough"

settings.register_profile("ci", deadline=None, print_blob=True)
settings.register_profile("thorough", deadline=None, print_blob=True, max_examples=1000)
settings.load_profile("thorough" if THOROUGH else "ci")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Modules that start processes (any test marked ``slow``) first, each module's tests in their own order."""
    slow = {item.path for item in items if item.get_closest_marker("slow")}
    order = {id(item): i for i, item in enumerate(items)}
    items.sort(key=lambda item: (item.path not in slow, order[id(item)]))
