"""``kubesched installer``: the layout it writes, the atomic manifest write, pruning, removal, errors."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli import main as cli_main
from kubesched.operator import contract as c
from kubesched.operator.installer_cmd import (
    InstallError,
    InstallOptions,
    Revision,
    install,
    prune_revision_dirs,
    record,
    remove_manifest,
    string_labels,
    substitute,
    write_atomically,
    write_revision_dir,
)
from kubesched.operator.revision import RevisionController


def test_substitute_placeholders() -> None:
    out = substitute(b"rev=REVISION node=NODE_NAME env=NODE_ENVVAR_NAME", 7, "control-plane-0.x")
    assert out == b"rev=7 node=control-plane-0.x env=control_plane_0_x"
    assert substitute(b"\xff\xfeREVISION", 7, "n") == b"\xff\xfeREVISION"  # binary left alone


def test_string_labels() -> None:
    raw = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels:\n    revision: 3\n    enabled: true\n"
    doc = yaml.safe_load(string_labels(raw))
    assert doc["metadata"]["labels"] == {"revision": "3", "enabled": "true"}
    quoted = b"apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {revision: '3'}\n"
    assert string_labels(quoted) == quoted  # nothing to fix: byte for byte
    assert string_labels(b"not: [yaml") == b"not: [yaml"


def test_write_atomically_never_shows_half_a_file(tmp_path: Path) -> None:
    target = tmp_path / "manifests" / "kube-scheduler-pod.yaml"
    versions = [bytes([65 + i]) * (200_000 + i * 1000) for i in range(5)]
    write_atomically(target, versions[0])
    seen: set[bytes] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            seen.add(target.read_bytes())

    t = threading.Thread(target=reader)
    t.start()
    try:
        for i in range(60):
            write_atomically(target, versions[i % len(versions)])
    finally:
        stop.set()
        t.join()
    assert seen <= set(versions)  # every read was one whole version
    assert target.read_bytes() == versions[59 % 5]
    assert oct(target.stat().st_mode & 0o777) == "0o600"
    assert [p.name for p in target.parent.iterdir()] == [target.name]  # no temporary left behind


def test_revision_dir_layout_and_replacement(tmp_path: Path) -> None:
    opts = InstallOptions(revision=3, namespace="ns", resource_dir=tmp_path / "res", pod="kube-scheduler-pod")
    rev = Revision(
        {
            "configmaps": {"config": {"config.yaml": b"a: 1"}, "kube-scheduler-pod": {"pod.yaml": b"pod"}},
            "secrets": {"token": {"token": b"t0k", "run.sh": b"#!/bin/sh"}},
        },
        b"pod",
    )
    folder = write_revision_dir(rev, opts)
    assert folder == tmp_path / "res" / "kube-scheduler-pod-3"
    assert (folder / "configmaps" / "config" / "config.yaml").read_bytes() == b"a: 1"
    assert (folder / "secrets" / "token" / "token").read_bytes() == b"t0k"
    assert (folder / "secrets" / "token" / "token").stat().st_mode & 0o777 == 0o600
    assert (folder / "secrets" / "token" / "run.sh").stat().st_mode & 0o777 == 0o700
    assert (folder / "kube-scheduler-pod.yaml").read_bytes() == b"pod"
    rev.files["configmaps"]["config"] = {"config.yaml": b"a: 2"}
    write_revision_dir(rev, opts)
    assert (folder / "configmaps" / "config" / "config.yaml").read_bytes() == b"a: 2"
    assert sorted(p.name for p in (tmp_path / "res").iterdir()) == ["kube-scheduler-pod-3"]


def test_prune_revision_dirs(tmp_path: Path) -> None:
    for n in range(1, 9):
        (tmp_path / f"kube-scheduler-pod-{n}").mkdir()
    (tmp_path / "kube-scheduler-certs").mkdir()
    (tmp_path / "other-pod-1").mkdir()
    removed = prune_revision_dirs(tmp_path, "kube-scheduler-pod", 7, {2, 6, 7})
    assert sorted(p.name for p in removed) == [f"kube-scheduler-pod-{n}" for n in (1, 3, 4, 5)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "kube-scheduler-certs",
        "kube-scheduler-pod-2",
        "kube-scheduler-pod-6",
        "kube-scheduler-pod-7",
        "kube-scheduler-pod-8",
        "other-pod-1",
    ]


def test_remove_manifest(tmp_path: Path) -> None:
    (tmp_path / "kube-scheduler-pod.yaml").write_text("x")
    assert remove_manifest(tmp_path, "kube-scheduler-pod")
    assert not remove_manifest(tmp_path, "kube-scheduler-pod")


def _opts(tmp_path: Path, revision: int = 1) -> InstallOptions:
    return InstallOptions(
        revision=revision,
        namespace=c.OPERAND_NAMESPACE,
        configmaps=[c.CONFIG_CONFIGMAP, c.KUBECONFIG_CONFIGMAP],
        optional_configmaps=[c.SERVICEACCOUNT_CA_CONFIGMAP],
        secrets=[c.CLIENT_TOKEN_SECRET],
        optional_secrets=[c.SERVING_CERT_SECRET],
        resource_dir=tmp_path / "etc/kubernetes/static-pod-resources",
        pod_manifest_dir=tmp_path / "etc/kubernetes/manifests",
        node_name="control-plane-0",
    )


async def test_install_a_revision_from_the_api(op_ctx: c.OperatorContext, kit: Any, tmp_path: Path) -> None:
    client = op_ctx.client
    await kit.create_kubescheduler(client)
    await kit.put_inputs(client)
    await RevisionController().sync(op_ctx)
    opts = _opts(tmp_path)
    manifest = await install(client, opts)
    assert manifest == tmp_path / "etc/kubernetes/manifests/kube-scheduler-pod.yaml"
    pod = yaml.safe_load(manifest.read_text())
    assert pod["metadata"]["labels"]["revision"] == "1"  # REVISION substituted
    res = tmp_path / "etc/kubernetes/static-pod-resources/kube-scheduler-pod-1"
    assert (res / "configmaps/config/config.yaml").read_text() == kit.sample_inputs()["config"]["config.yaml"]
    assert (res / "configmaps/scheduler-kubeconfig/kubeconfig").exists()
    assert (res / "secrets/kube-scheduler-client-token/token").read_bytes() == b"secret"
    assert not (res / "secrets/serving-cert").exists()  # optional and absent
    assert (res / "kube-scheduler-pod.yaml").read_text() == manifest.read_text()

    # Revision 2, installed with revision 1 protected; then 3 with only itself kept.
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "two"})
    await RevisionController().sync(op_ctx)
    await kit.put_input(client, c.CONFIG_CONFIGMAP, {"config.yaml": "three"})
    await RevisionController().sync(op_ctx)
    opts2 = _opts(tmp_path, 2)
    opts2.protected_revisions = [1]
    await install(client, opts2)
    assert yaml.safe_load(manifest.read_text())["metadata"]["labels"]["revision"] == "2"
    assert res.exists()
    opts3 = _opts(tmp_path, 3)
    opts3.protected_revisions = []
    await install(client, opts3)
    names = sorted(p.name for p in res.parent.iterdir())
    assert names == ["kube-scheduler-pod-3"]


async def test_install_missing_revision_is_one_line(op_ctx: c.OperatorContext, tmp_path: Path) -> None:
    with pytest.raises(
        InstallError, match=r"^required configmap openshift-kube-scheduler/kube-scheduler-pod-9"
    ):
        await install(op_ctx.client, _opts(tmp_path, 9))
    assert not (tmp_path / "etc/kubernetes/manifests").exists()


def test_command_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["installer", "--kubeconfig", str(tmp_path / "nope"), "--revision", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "does not exist" in err
    assert cli_main(["installer"]) == 2
    assert "--revision is required" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli_main(["installer", "--revision", "zero"])
    assert "not a revision number" in capsys.readouterr().err


def test_command_remove(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "kube-scheduler-pod.yaml").write_text("x")
    assert cli_main(["installer", "--remove", "--pod-manifest-dir", str(tmp_path)]) == 0
    assert not os.listdir(tmp_path)
    assert "removed" in capsys.readouterr().out


async def test_installer_records_an_event(
    op_ctx: c.OperatorContext, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("POD_NAME", "installer-1-cp-a")
    opts = _opts(tmp_path)
    await record(
        op_ctx.client, opts, "Normal", "StaticPodInstallerCompleted", "Successfully installed revision 1"
    )
    items = (await op_ctx.client.list("events.k8s.io/v1", "events", namespace=c.OPERAND_NAMESPACE))["items"]
    (event,) = [e for e in items if e["reason"] == "StaticPodInstallerCompleted"]
    assert (
        event["regarding"]["name"] == "installer-1-cp-a"
        and event["note"] == "Successfully installed revision 1"
    )


def test_command_prune_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for n in (1, 2, 3):
        (tmp_path / f"kube-scheduler-pod-{n}").mkdir()
    assert cli_main(["installer", "--prune-only", "--resource-dir", str(tmp_path)]) == 2
    assert "--max-eligible-revision" in capsys.readouterr().err
    argv = ["installer", "--prune-only", "--resource-dir", str(tmp_path), "--max-eligible-revision=3"]
    assert cli_main([*argv, "--protected-revisions=3"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["kube-scheduler-pod-3"]
    assert "pruned 2 revision folders" in capsys.readouterr().out
