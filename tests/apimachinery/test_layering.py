"""``kubesched.apimachinery`` is the ground floor: it imports nothing else of kubesched."""

from __future__ import annotations

import ast
from pathlib import Path

import kubesched.apimachinery

PACKAGE = Path(kubesched.apimachinery.__file__).parent


def test_imports_nothing_else_of_kubesched() -> None:
    offenders: list[str] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:  # relative: must stay inside the package
                    if node.level > 1:
                        offenders.append(f"{path.name}: relative import above the package")
                    continue
                names = [node.module or ""]
            else:
                continue
            offenders += [
                f"{path.name}: {n}"
                for n in names
                if n.split(".")[0] == "kubesched" and not n.startswith("kubesched.apimachinery")
            ]
    assert offenders == []
