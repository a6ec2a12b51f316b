"""``kubesched doctor``: a cluster's scheduling health on one screen (or ``-o json``).

Reads Leases, pods, nodes, the schedulers' ``Scheduled``/``FailedScheduling`` events and the ConfigMaps that
scheduler pods mount (a bounded number of LISTs, nothing written), looks for scheduler processes on this machine
that talk to the same API server, and hands everything to ``diagnose.diagnose``.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from kubesched.client.rest import ApiClient, ApiError
from kubesched.ops.common import (
    LeaseInfo,
    add_connection_arguments,
    ago,
    connect,
    list_items,
    local_scheduler_processes,
    run_command,
    scheduler_configmaps,
    schedulers_in_pods,
)
from kubesched.ops.diagnose import RECENT_SECONDS, Snapshot, diagnose
from kubesched.ops.timeline import SchedEvent


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_connection_arguments(p)
    p.add_argument("-o", "--output", choices=("text", "json"), default="text")
    p.add_argument("--recent", type=float, default=RECENT_SECONDS, metavar="SECONDS",
                   help="events younger than this count as current conflicts (600)")  # fmt: skip
    p.add_argument("--no-processes", action="store_true",
                   help="do not look for scheduler processes on this machine (/proc)")  # fmt: skip
    p.add_argument("--strict", action="store_true", help="exit 3 when a problem is found (default: 0)")


def run(args: argparse.Namespace) -> int:
    return run_command("doctor", lambda: _main(args))


async def gather(client: ApiClient, args: argparse.Namespace) -> Snapshot:
    leases = [
        LeaseInfo.from_object(le)
        for le in await list_items(client, "coordination.k8s.io/v1", "leases")
        if (le.get("metadata") or {}).get("namespace") != "kube-node-lease"  # node heartbeats, not leaders
    ]
    pods = await list_items(client, "v1", "pods")
    nodes = await list_items(client, "v1", "nodes")
    events: list[SchedEvent] = []
    for reason in ("FailedScheduling", "Scheduled"):
        try:
            items = await list_items(client, "events.k8s.io/v1", "events", field_selector=f"reason={reason}")
        except ApiError as e:
            if e.status not in (400, 403, 404):
                raise
            items = []  # no events.k8s.io or not allowed: doctor still says the rest
        events.extend(e for e in (SchedEvent.from_object(i) for i in items) if e is not None)
    schedulers = schedulers_in_pods(pods, await scheduler_configmaps(client, pods))
    if not args.no_processes:
        schedulers += local_scheduler_processes(client.config.server)
    return Snapshot(time.time(), leases, pods, nodes, events, schedulers, args.recent)


async def _main(args: argparse.Namespace) -> int:
    client = connect(args)
    try:
        snap = await gather(client, args)
    finally:
        await client.close()
    report = diagnose(snap)
    if args.output == "json":
        print(json.dumps(report, indent=2), flush=True)
    else:
        render(report, Console(highlight=False))
    return 3 if args.strict and not report["ok"] else 0


def _table(title: str, *columns: str) -> Table:
    t = Table(title=title, title_justify="left", title_style="bold", expand=False, pad_edge=False)
    for c in columns:
        t.add_column(c, overflow="fold")
    return t


def render(r: dict[str, Any], console: Console) -> None:
    verdict = (
        Text("healthy: nothing to report", style="bold green")
        if r["ok"]
        else Text(f"{r['problems']} problem(s) found", style="bold red")
    )
    console.print(Text("kubesched doctor: ", style="bold") + verdict)
    if r["no_scheduler_up"]:
        console.print(
            Text(
                "No scheduler is up: no fresh Lease and no running scheduler serves any name.",
                style="bold red",
            )
        )

    t = _table("Leases", "lease", "holder", "state", "held for", "renewed", "serves")
    for le in r["leases"]:
        style = {"fresh": "green", "expired": "red", "released": "yellow"}[le["state"]]
        t.add_row(
            le["lease"], le["holder"] or "-", Text(le["state"], style=style), ago(le["held_for_seconds"]),
            f"{ago(le['renewed_seconds_ago'])} ago (of {le['duration_seconds']:g}s)", ", ".join(le["scheduler_names"]),
        )  # fmt: skip
    console.print(t if r["leases"] else Text("Leases: none"))

    if r["schedulers"]:
        t = _table("Scheduler names served", "schedulerName", "evidence")
        for name, evidence in r["schedulers"].items():
            t.add_row(name, "; ".join(evidence))
        console.print(t)

    if r["unserved"]:
        t = _table(
            "Pending for a schedulerName no running scheduler serves", "pod", "schedulerName", "pending"
        )
        for row in r["unserved"]:
            t.add_row(row["pod"], Text(row["scheduler_name"], style="red"), ago(row["pending_seconds"]))
        console.print(t)
    if r["pending"]:
        t = _table("Pending", "pod", "schedulerName", "pending", "latest FailedScheduling")
        for row in r["pending"]:
            t.add_row(row["pod"], row["scheduler_name"], ago(row["pending_seconds"]), row["message"])
        console.print(t)
    if r["conflicts"]:
        t = _table("Binding conflicts", "kind", "scheduler", "detail")
        for c in r["conflicts"]:
            t.add_row(Text(c["kind"], style="red"), c["scheduler"], c["detail"])
        console.print(t)
    if r["nodes"]:
        t = _table("Nodes", "node", "problems")
        for n in r["nodes"]:
            t.add_row(n["node"], "; ".join(n["problems"]))
        console.print(t)
    for h in r["hints"]:
        if h["command"]:
            console.print(Text(f"To place {h['pod']} with no scheduler ({h['note']}):", style="bold"))
            console.print(h["command"], markup=False, highlight=False, soft_wrap=True)
        else:
            console.print(Text(f"{h['pod']}: {h['note']}", style="yellow"))
    if r["hints"]:
        console.print(
            "A new critical pod can be placed the same way: set spec.nodeName in its manifest before creating it.",
            markup=False,
        )
