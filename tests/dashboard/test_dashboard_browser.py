"""The dashboard in a real headless browser (Debian's chromium + chromedriver through Selenium) against the local
cluster and a ``kubesched scheduler --explain`` process.

What a user would check: the page loads and shows every node, a pod created through the API appears on its node
without a reload, clicking it explains the placement with exactly the numbers ``kubesched simulate -o json``
prints for that pod on the same state, a pending pod shows its FailedScheduling message, the scheduler panel
shows the queue, and a pasted object that is not a valid pod gets a clear message on the page.

Screenshots go to ``$KUBESCHED_ARTIFACTS`` (default ``tests/artifacts/``). ``scripts/ensure-chromium.sh`` installs
the browser; without it these tests skip.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from clusterproc import ClusterProcess, SchedulerProcess, free_port, start_cluster, start_scheduler

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if os.path.exists("/usr/bin/chromium") else None)
CHROMEDRIVER = shutil.which("chromedriver") or (
    "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None
)
try:
    import selenium  # noqa: F401

    HAVE_SELENIUM = True
except ImportError:
    HAVE_SELENIUM = False

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAVE_SELENIUM, reason="selenium is not installed (pip install selenium)"),
    pytest.mark.skipif(
        CHROMIUM is None or CHROMEDRIVER is None,
        reason="chromium/chromedriver not found: run scripts/ensure-chromium.sh "
        "(apt-get install chromium chromium-driver)",
    ),
]

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("KUBESCHED_ARTIFACTS") or REPO / "tests" / "artifacts") / "dashboard"
SEED = "7"
T = TypeVar("T")


def wait_for(what: str, fn: Callable[[], T | None], timeout: float = 30.0) -> T:
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = fn()
            if value:
                return value
        except Exception as e:  # the DOM is being redrawn under us: try again
            last = e
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}" + (f" (last error: {last})" if last else ""))


def click(driver: Any, css: str) -> None:
    """Click the element ``css`` finds, looking it up again if a live update redrew it meanwhile."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By

    def attempt() -> bool:
        try:
            driver.find_element(By.CSS_SELECTOR, css).click()
        except StaleElementReferenceException:
            return False
        return True

    wait_for(f"a click on {css}", attempt, timeout=10)


def api(kubeconfig: Path, fn: Callable[[Any], Any]) -> Any:
    from kubesched.client.config import load_config
    from kubesched.client.rest import ApiClient

    async def go() -> Any:
        async with ApiClient(load_config(str(kubeconfig))) as client:
            return await fn(client)

    return asyncio.run(go())


def make_pod(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": memory}},
                }
            ]
        },
    }


class Dashboard:
    def __init__(self, kubeconfig: Path, scheduler_port: int) -> None:
        self.port = free_port()
        cmd = [
            sys.executable,
            "-m",
            "kubesched.cli",
            "dashboard",
            "--kubeconfig",
            str(kubeconfig),
            "--port",
            str(self.port),
            "--seed",
            SEED,
            "--scheduler-poll-interval",
            "1",
            "--scheduler-url",
            f"https://127.0.0.1:{scheduler_port}",
        ]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if "serving on" not in line:
            self.proc.kill()
            raise RuntimeError(f"the dashboard did not start: {line}{self.proc.stdout.read()}")
        self.url = line.split("serving on ", 1)[1].strip()

    def stop(self) -> int:
        self.proc.terminate()
        try:
            return self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ClusterProcess, SchedulerProcess, Dashboard]]:
    cluster = start_cluster(
        tmp_path_factory.mktemp("cluster"), "--nodes", "3", "--node-cpu", "4", "--node-memory", "8Gi"
    )
    sched = start_scheduler(cluster.kubeconfig, "--explain", "--leader-elect=true", "--seed", SEED)
    dash = Dashboard(cluster.kubeconfig, sched.port)
    yield cluster, sched, dash
    assert dash.stop() == 0
    sched.stop()
    cluster.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="kubesched-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM or ""
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1600,1100",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER or ""), options=options)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()
    shutil.rmtree(profile, ignore_errors=True)


def shot(driver: Any, name: str) -> None:
    driver.save_screenshot(str(ARTIFACTS / f"{name}.png"))


def simulate_json(cluster: ClusterProcess, pod_key: str, tmp: Path) -> dict[str, Any]:
    """``kubesched simulate -o json`` on the cluster as it is, with ``pod_key`` taken off its node and the other
    pending pods left out (what the dashboard explains)."""

    async def dump(client: Any) -> list[dict[str, Any]]:
        nodes = (await client.list_all("v1", "nodes"))["items"]
        pods = (await client.list_all("v1", "pods"))["items"]
        return [{"kind": "Node", "apiVersion": "v1", **n} for n in nodes] + [
            {"kind": "Pod", "apiVersion": "v1", **p} for p in pods
        ]

    objects = api(cluster.kubeconfig, dump)
    kept = []
    for obj in objects:
        if obj["kind"] == "Pod":
            key = f"{obj['metadata']['namespace']}/{obj['metadata']['name']}"
            if key == pod_key:
                obj = {
                    **obj,
                    "spec": {k: v for k, v in obj["spec"].items() if k != "nodeName"},
                    "status": {"phase": "Pending"},
                }
            elif not obj["spec"].get("nodeName"):
                continue
        kept.append(obj)
    path = tmp / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": kept}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubesched.cli",
            "simulate",
            "--cluster",
            str(path),
            "--seed",
            SEED,
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    [placement] = json.loads(out.stdout)["placements"]
    return placement


def test_page_follows_the_cluster_and_explains_a_placement(
    stack: tuple[ClusterProcess, SchedulerProcess, Dashboard], browser: Any, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    cluster, _sched, dash = stack
    d = browser
    d.get(dash.url)
    tiles = wait_for("3 node tiles", lambda: len(d.find_elements(By.CSS_SELECTOR, ".node-tile")) == 3 or None)
    assert tiles
    names = [t.get_attribute("data-node") for t in d.find_elements(By.CSS_SELECTOR, ".node-tile")]
    assert names == ["node-0", "node-1", "node-2"]
    wait_for(
        "live connection", lambda: d.find_element(By.ID, "connection").get_attribute("data-state") == "live"
    )
    wait_for("the leader lease", lambda: "kube-system/kube-scheduler" in d.find_element(By.ID, "leases").text)
    shot(d, "01-nodes")

    # A pod created through the API appears on its node, without a reload.
    api(
        cluster.kubeconfig,
        lambda c: c.create("v1", "pods", make_pod("web-1", "1500m", "1Gi"), namespace="default"),
    )
    chip = wait_for(
        "web-1 on a node",
        lambda: d.find_elements(By.CSS_SELECTOR, '.node-tile .pod-chip[data-pod="default/web-1"]'),
    )[0]
    tile = chip.find_element(By.XPATH, "./ancestor::div[contains(@class, 'node-tile')]")
    bound_to = tile.get_attribute("data-node")
    assert "1.5 / 4" in tile.text  # the CPU meter counts the new request
    shot(d, "02-pod-scheduled")

    # Clicking it explains the decision with simulate's numbers.
    click(d, '.node-tile .pod-chip[data-pod="default/web-1"]')
    wait_for(
        "the explanation",
        lambda: (
            d.find_element(By.ID, "explain").get_attribute("data-pod") == "default/web-1"
            and d.find_element(By.ID, "explain").get_attribute("data-loading") is None
            and d.find_elements(By.CSS_SELECTOR, "#explain table.scores")
        ),
    )
    explain = d.find_element(By.ID, "explain")
    assert f"Bound to {bound_to}" in explain.text
    want = simulate_json(cluster, "default/web-1", tmp_path)
    assert explain.find_element(By.CSS_SELECTOR, "[data-chosen]").get_attribute("data-chosen") == want["node"]
    shown: dict[str, dict[str, int]] = {}
    for row in explain.find_elements(By.CSS_SELECTOR, "table.scores tr[data-node]"):
        cells = row.find_elements(By.CSS_SELECTOR, "td[data-plugin]")
        shown[row.get_attribute("data-node")] = {
            c.get_attribute("data-plugin"): int(c.text) for c in cells if c.text != ""
        }
    assert shown == want["scores"]
    assert len(shown) == 3 and all("NodeResourcesFit" in s for s in shown.values())
    shot(d, "03-explained")


def test_pending_pod_scheduler_queue_and_what_if(
    stack: tuple[ClusterProcess, SchedulerProcess, Dashboard], browser: Any
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    cluster, _sched, dash = stack
    d = browser
    d.get(dash.url)
    api(
        cluster.kubeconfig,
        lambda c: c.create("v1", "pods", make_pod("too-big", "40", "1Gi"), namespace="default"),
    )
    item = wait_for(
        "the FailedScheduling message",
        lambda: [
            li
            for li in d.find_elements(By.CSS_SELECTOR, '#pending li[data-pod="default/too-big"]')
            if "Insufficient cpu" in li.text
        ],
    )[0]
    assert "0/3 nodes are available" in item.text
    # The scheduler's own view: the pod waits in unschedulablePods, rejected by NodeResourcesFit.
    wait_for(
        "the queue",
        lambda: (
            "default/too-big" in d.find_element(By.ID, "scheduler").text
            and "NodeResourcesFit" in d.find_element(By.ID, "scheduler").text
        ),
    )
    wait_for("metrics samples", lambda: d.find_elements(By.CSS_SELECTOR, "#scheduler svg.spark"))
    click(d, '#pending li[data-pod="default/too-big"]')
    wait_for("why it fits nowhere", lambda: "fits nowhere" in d.find_element(By.ID, "explain").text)
    shot(d, "04-pending-explained")

    # What-if with something that is not a pod: a message on the page, nothing broken.
    Select(d.find_element(By.ID, "whatif-pod")).select_by_value("")
    box = d.find_element(By.ID, "whatif-manifest")
    box.clear()
    box.send_keys("kind: Pod\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}")
    d.find_element(By.ID, "whatif-run").click()
    error = wait_for(
        "the error message",
        lambda: (
            d.find_element(By.ID, "whatif-error").is_displayed() and d.find_element(By.ID, "whatif-error")
        ),
    )
    assert "invalid quantity 'lots'" in error.text
    shot(d, "05-whatif-invalid")
    box.clear()
    box.send_keys("[1, 2")
    d.find_element(By.ID, "whatif-run").click()
    wait_for("the YAML error", lambda: "not valid YAML or JSON" in d.find_element(By.ID, "whatif-error").text)

    # A valid one: where it would go, nothing created.
    box.clear()
    box.send_keys(
        "kind: Pod\nmetadata: {name: probe}\nspec: {containers: [{name: c, resources: {requests: {cpu: '2'}}}]}"
    )
    d.find_element(By.ID, "whatif-run").click()
    wait_for("the what-if result", lambda: d.find_elements(By.CSS_SELECTOR, "#whatif-result table.scores"))
    assert not d.find_element(By.ID, "whatif-error").is_displayed()
    assert "default/probe" in d.find_element(By.ID, "whatif-result").text
    pods = api(cluster.kubeconfig, lambda c: c.list_all("v1", "pods"))["items"]
    assert "probe" not in {p["metadata"]["name"] for p in pods}
    shot(d, "06-whatif")
