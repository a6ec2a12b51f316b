"""The example out-of-tree plugin (``examples/label-preference-plugin``): pip-installed into a folder of its
own, found through the ``kubesched.plugins`` entry point by a fresh ``kubesched`` process, configured in a
profile and used to place a pod; its args are checked by the configuration loader like an in-tree plugin's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "label-preference-plugin"

CLUSTER = textwrap.dedent(
    """
    apiVersion: v1
    kind: List
    items:
    - apiVersion: v1
      kind: Node
      metadata: {name: plain, labels: {kubernetes.io/hostname: plain}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
    - apiVersion: v1
      kind: Node
      metadata: {name: fast, labels: {kubernetes.io/hostname: fast, example.com/tier: fast}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
    - apiVersion: v1
      kind: Node
      metadata: {name: slow, labels: {kubernetes.io/hostname: slow, example.com/tier: slow}}
      status: {allocatable: {cpu: "4", memory: 8Gi, pods: "110"}}
    - apiVersion: v1
      kind: Pod
      metadata: {name: web, namespace: default}
      spec:
        containers:
        - name: c
          image: app:1
          resources: {requests: {cpu: 100m, memory: 64Mi}}
    """
)


def profile(args: str) -> str:
    return textwrap.dedent(
        """
        apiVersion: kubescheduler.config.k8s.io/v1
        kind: KubeSchedulerConfiguration
        profiles:
        - schedulerName: default-scheduler
          plugins:
            multiPoint:
              enabled:
              - name: LabelPreference
                weight: 5
          pluginConfig:
          - name: LabelPreference
            args: {ARGS}
        """
    ).replace("{ARGS}", args)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example installed with pip into its own folder (the project's venv is left as it is)."""
    target = tmp_path_factory.mktemp("site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(EXAMPLE)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    assert list(target.glob("kubesched_label_preference-*.dist-info/entry_points.txt"))
    return target


def simulate(site: Path | None, tmp_path: Path, args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "cluster.yaml").write_text(CLUSTER)
    (tmp_path / "config.yaml").write_text(profile(args))
    env = dict(os.environ)
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kubesched.cli",
            "simulate",
            "--config",
            str(tmp_path / "config.yaml"),
            "--cluster",
            str(tmp_path / "cluster.yaml"),
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_installed_plugin_places_the_pod_by_its_label(installed: Path, tmp_path: Path) -> None:
    proc = simulate(installed, tmp_path, "{labelKey: example.com/tier, values: [fast]}")
    assert proc.returncode == 0, proc.stderr
    (placement,) = json.loads(proc.stdout)["placements"]
    assert placement["node"] == "fast"
    scores = placement["scores"]
    assert scores["fast"]["LabelPreference"] == 100 * 5  # weighted by the profile's weight 5
    assert scores["slow"]["LabelPreference"] == 0
    assert scores["plain"]["LabelPreference"] == 0


def test_installed_plugin_args_are_checked_by_the_loader(installed: Path, tmp_path: Path) -> None:
    proc = simulate(installed, tmp_path, "{labelKey: example.com/tier, colour: blue}")
    assert proc.returncode != 0
    assert "profiles[0].pluginConfig[0].args.colour: Unknown field" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_without_the_package_the_plugin_is_unknown(tmp_path: Path) -> None:
    proc = simulate(None, tmp_path, "{labelKey: example.com/tier}")
    assert proc.returncode != 0
    assert "LabelPreference" in proc.stderr
    assert "Traceback" not in proc.stderr
