"""The manifest folder of a control-plane node: what is read, what is skipped, what counts as a change."""

from __future__ import annotations

import os
from pathlib import Path

from kubesched.cluster.kubelet import static

POD = """apiVersion: v1
kind: Pod
metadata:
  name: kube-scheduler
  namespace: kube-system
spec:
  containers:
  - name: kube-scheduler
    image: kubesched
    command: [kubesched, scheduler, {flag}]
"""


def write_atomically(folder: Path, name: str, text: str) -> None:
    tmp = folder / f".{name}.tmp"
    tmp.write_text(text)
    os.replace(tmp, folder / name)


def make(tmp_path: Path) -> tuple[static.ManifestFolder, list[tuple[str, str]]]:
    errors: list[tuple[str, str]] = []
    return static.ManifestFolder(tmp_path, "control-plane-0", lambda f, m: errors.append((f, m))), errors


def test_a_manifest_becomes_a_static_pod_named_after_the_node(tmp_path: Path) -> None:
    folder, errors = make(tmp_path)
    write_atomically(tmp_path, "kube-scheduler.yaml", POD.format(flag="-v=2"))
    pods = folder.scan()
    assert errors == []
    (sp,) = pods.values()
    assert sp.key == ("kube-system", "kube-scheduler-control-plane-0")
    meta = sp.pod["metadata"]
    assert meta["annotations"][static.CONFIG_MIRROR] == sp.uid == meta["annotations"][static.CONFIG_HASH]
    assert meta["annotations"][static.CONFIG_SOURCE] == "file"
    assert sp.pod["spec"]["nodeName"] == "control-plane-0"
    assert {"operator": "Exists", "effect": "NoExecute"} in sp.pod["spec"]["tolerations"]


def test_hidden_files_and_folders_are_never_read(tmp_path: Path) -> None:
    """Writers put the half-written file at a dot-name and rename it: the dot-file is invisible."""
    folder, errors = make(tmp_path)
    (tmp_path / ".kube-scheduler.yaml.tmp").write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: half")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "p.yaml").write_text(POD.format(flag="-v=1"))
    assert folder.scan() == {}
    assert errors == []
    os.replace(tmp_path / ".kube-scheduler.yaml.tmp", tmp_path / "kube-scheduler.yaml")
    (tmp_path / "kube-scheduler.yaml").write_text(POD.format(flag="-v=1"))
    assert len(folder.scan()) == 1


def test_a_changed_file_is_a_changed_pod_and_a_removed_file_a_removed_pod(tmp_path: Path) -> None:
    folder, _ = make(tmp_path)
    write_atomically(tmp_path, "s.yaml", POD.format(flag="-v=2"))
    first = folder.scan()
    assert static.diff({}, first).added == list(first.values())
    same = folder.scan()
    changes = static.diff(first, same)
    assert (changes.added, changes.changed, changes.removed) == ([], [], [])
    write_atomically(tmp_path, "s.yaml", POD.format(flag="-v=4"))
    second = folder.scan()
    changes = static.diff(first, second)
    assert [(o.uid, n.uid) for o, n in changes.changed] == [
        (next(iter(first.values())).uid, next(iter(second.values())).uid)
    ]
    assert next(iter(second.values())).pod["spec"]["containers"][0]["command"][-1] == "-v=4"
    (tmp_path / "s.yaml").unlink()
    assert static.diff(second, folder.scan()).removed == list(second.values())


def test_a_malformed_manifest_is_reported_once_and_skipped_without_stopping_the_others(
    tmp_path: Path,
) -> None:
    folder, errors = make(tmp_path)
    write_atomically(tmp_path, "good.yaml", POD.format(flag="-v=2"))
    write_atomically(tmp_path, "bad.yaml", "apiVersion: v1\nkind: Pod\nmetadata: [not, a, map\n")
    write_atomically(tmp_path, "notapod.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")
    pods = folder.scan()
    assert [sp.file for sp in pods.values()] == ["good.yaml"]
    assert sorted(f for f, _ in errors) == ["bad.yaml", "notapod.yaml"]
    assert "not valid YAML" in dict(errors)["bad.yaml"]
    assert "kind Pod" in dict(errors)["notapod.yaml"]
    folder.scan()
    assert len(errors) == 2  # the same version of a file is reported once
    write_atomically(
        tmp_path,
        "bad.yaml",
        POD.replace("kube-scheduler\n  namespace", "other\n  namespace").format(flag="-v=1"),
    )
    assert sorted(sp.file for sp in folder.scan().values()) == ["bad.yaml", "good.yaml"]


def test_two_files_with_one_pod_name_keep_the_first(tmp_path: Path) -> None:
    folder, errors = make(tmp_path)
    write_atomically(tmp_path, "a.yaml", POD.format(flag="-v=1"))
    write_atomically(tmp_path, "b.yaml", POD.format(flag="-v=2"))
    assert [sp.file for sp in folder.scan().values()] == ["a.yaml"]
    assert errors and errors[0][0] == "b.yaml"
