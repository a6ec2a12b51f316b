"""CRI-style container logs and the volume/environment helpers of the process kubelet."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from kubesched.cluster.kubelet import logs, volumes


def test_log_writer_keeps_whole_lines_with_stream_and_timestamp(tmp_path: Path) -> None:
    path = logs.container_log_path(tmp_path, "ns", "p", "uid1", "c", 0)
    w = logs.LogWriter(path)
    w.write("stdout", b"one\ntw")
    w.write("stderr", b"err\n")
    w.write("stdout", b"o\n")
    w.write("stdout", b"tail-without-newline")
    w.close()
    lines, _ = logs.read_lines(path, None)
    assert [logs.parse_line(x)[1] for x in lines] == [b"one", b"err", b"two", b"tail-without-newline"]
    assert all(x.split(b" ")[1] in (b"stdout", b"stderr") and x.split(b" ")[2] == b"F" for x in lines)
    assert logs.render(lines[-2:], timestamps=False) == b"two\ntail-without-newline\n"
    assert logs.render(lines[:1], timestamps=True).endswith(b"Z one\n")
    assert logs.read_lines(path, 1)[0] == lines[-1:]
    assert logs.read_lines(path, 0)[0] == []
    assert path == tmp_path / "var/log/pods/ns_p_uid1/c/0.log"


def test_log_files_sort_by_restart_number(tmp_path: Path) -> None:
    for n in (0, 1, 2, 10):
        (tmp_path / f"{n}.log").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert [p.name for p in logs.log_files(tmp_path)] == ["0.log", "1.log", "2.log", "10.log"]


def test_env_from_values_field_refs_configmaps_secrets_and_expansion() -> None:
    objects = {
        ("configmaps", "ns", "cfg"): {"data": {"level": "4", "mode": "fast"}},
        ("secrets", "ns", "sec"): {"data": {"password": base64.b64encode(b"s3cret").decode()}},
    }
    pod = {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u-1", "labels": {"app": "x"}},
        "spec": {"nodeName": "control-plane-0", "serviceAccountName": "sched"},
        "status": {"podIP": "127.0.1.1", "hostIP": "127.0.1.1"},
    }
    container = {
        "envFrom": [{"configMapRef": {"name": "cfg"}, "prefix": "CFG_"}],
        "env": [
            {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
            {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level"}}},
            {"name": "PW", "valueFrom": {"secretKeyRef": {"name": "sec", "key": "password"}}},
            {"name": "OPT", "valueFrom": {"secretKeyRef": {"name": "missing", "key": "k", "optional": True}}},
            {"name": "ADDR", "value": "$(POD_IP):10259 $(UNKNOWN) $$(POD_IP)"},
        ],
    }
    env = volumes.container_env(pod, container, {"BASE": "1"}, lambda *k: objects.get(k))
    assert env["POD_IP"] == "127.0.1.1" and env["NODE"] == "control-plane-0" and env["APP"] == "x"
    assert env["LEVEL"] == "4" and env["PW"] == "s3cret" and "OPT" not in env
    assert env["CFG_mode"] == "fast" and env["BASE"] == "1"
    assert env["ADDR"] == "127.0.1.1:10259 $(UNKNOWN) $(POD_IP)"
    with pytest.raises(volumes.VolumeError, match="not found"):
        volumes.container_env(
            pod,
            {"env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "nope", "key": "k"}}}]},
            {},
            lambda *k: None,
        )


def test_volumes_are_written_under_the_node_root_and_mounted_where_the_spec_says(tmp_path: Path) -> None:
    (tmp_path / "etc/kubernetes").mkdir(parents=True)
    (tmp_path / "etc/kubernetes/scheduler.conf").write_text("kubeconfig")
    objects = {("configmaps", "ns", "cfg"): {"data": {"config.yaml": "a: 1"}}}
    pod = volumes.with_default_service_account_volume(
        {
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {
                "serviceAccountName": "sched",
                "volumes": [
                    {"name": "kc", "hostPath": {"path": "/etc/kubernetes/scheduler.conf", "type": "File"}},
                    {"name": "cfg", "configMap": {"name": "cfg"}},
                    {"name": "scratch", "emptyDir": {}},
                    {
                        "name": "info",
                        "downwardAPI": {
                            "items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]
                        },
                    },
                ],
                "containers": [
                    {
                        "name": "c",
                        "volumeMounts": [
                            {"name": "kc", "mountPath": "/etc/kubernetes/scheduler.conf", "readOnly": True},
                            {"name": "cfg", "mountPath": "/etc/cfg"},
                            {"name": "scratch", "mountPath": "/tmp/scratch"},
                            {"name": "info", "mountPath": "/etc/podinfo"},
                        ],
                    }
                ],
            },
        },
        static=False,
    )
    issued = []

    def token(ns: str, sa: str, aud: list[str], seconds: int, p: dict) -> tuple[str, int]:
        issued.append((ns, sa, seconds, p["metadata"]["uid"]))
        return "TOKEN", 2_000_000_000

    ctx = volumes.VolumeContext(tmp_path, lambda *k: objects.get(k), token, b"CA")
    prepared = volumes.prepare(pod, "u1", ctx)
    mounts = {m["target"]: m for m in volumes.container_mounts(pod["spec"]["containers"][0], prepared.paths)}
    assert mounts["/etc/kubernetes/scheduler.conf"]["source"] == str(
        tmp_path / "etc/kubernetes/scheduler.conf"
    )
    assert mounts["/etc/kubernetes/scheduler.conf"]["readOnly"] is True
    sa_dir = Path(mounts[volumes.SERVICE_ACCOUNT_DIR]["source"])
    assert (sa_dir / "token").read_text() == "TOKEN"
    assert (sa_dir / "ca.crt").read_text() == "CA"  # no kube-root-ca.crt ConfigMap: the cluster CA
    assert (sa_dir / "namespace").read_text() == "ns"
    assert issued == [("ns", "sched", volumes.DEFAULT_TOKEN_SECONDS, "u1")]
    assert prepared.refresh_at is not None
    assert (Path(mounts["/etc/cfg"]["source"]) / "config.yaml").read_text() == "a: 1"
    assert (Path(mounts["/etc/podinfo"]["source"]) / "name").read_text() == "p"
    assert Path(mounts["/tmp/scratch"]["source"]).is_dir()
    assert str(sa_dir).startswith(str(tmp_path / "var/lib/kubelet/pods/u1/volumes/"))
    # A ConfigMap update is picked up on the next pass; a key gone is a file gone.
    objects[("configmaps", "ns", "cfg")] = {"data": {"other.yaml": "b: 2"}}
    volumes.prepare(pod, "u1", ctx)
    assert sorted(p.name for p in Path(mounts["/etc/cfg"]["source"]).iterdir()) == ["other.yaml"]


def test_missing_sources_are_volume_errors(tmp_path: Path) -> None:
    ctx = volumes.VolumeContext(tmp_path, lambda *k: None, lambda *a: ("t", 0), b"")
    pod = {
        "metadata": {"namespace": "ns"},
        "spec": {"volumes": [{"name": "v", "hostPath": {"path": "/nope", "type": "File"}}]},
    }
    with pytest.raises(volumes.VolumeError, match="not a file"):
        volumes.prepare(pod, "u", ctx)
    pod["spec"]["volumes"] = [{"name": "v", "secret": {"secretName": "s"}}]
    with pytest.raises(volumes.VolumeError, match='secret "s" not found'):
        volumes.prepare(pod, "u", ctx)
    pod["spec"]["volumes"] = [{"name": "v", "nfs": {"server": "x"}}]
    with pytest.raises(volumes.VolumeError, match="nfs volumes are not supported"):
        volumes.prepare(pod, "u", ctx)
    # Static pods and pods that opt out get no service-account volume.
    p = {"metadata": {}, "spec": {"containers": [{"name": "c"}]}}
    assert volumes.with_default_service_account_volume(p, static=True) is p
    p2 = {"metadata": {}, "spec": {"automountServiceAccountToken": False, "containers": [{"name": "c"}]}}
    assert volumes.with_default_service_account_volume(p2, static=False) is p2


def test_since_drops_older_lines() -> None:
    lines = [
        b"2026-12-03T10:00:00.100000000Z stdout F old\n",
        b"2026-12-03T10:00:01.000000000Z stdout F new\n",
    ]
    since = logs._since(None, "2026-12-03T10:00:00.5Z")
    assert since == b"2026-12-03T10:00:00.500000000Z"
    assert logs.render(lines, timestamps=False, since=since) == b"new\n"
    assert logs.render(lines, timestamps=False, since=logs._since("3600", None)) == b""
    assert logs._since(None, None) is None
