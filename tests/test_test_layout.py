"""The test folders have no __init__.py, so pytest imports every test module by its file name: two test files
with one name in different folders make collection fail (import file mismatch) on a fresh clone."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).parent


def test_test_module_names_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if ".hypothesis" not in p.parts)
    assert [n for n, count in names.items() if count > 1] == []
