"""The ``kubesched`` command: one entry point, a subcommand per part of the system.

Each subcommand lives beside the code it drives and exposes ``add_arguments(parser)`` and ``run(args) -> int``;
this module only wires them together, so ``kubesched --help`` lists every part.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# subcommand → (module, one-line help). Modules are imported lazily so `kubesched cluster up` does not pay for
# numpy and the scheduler framework, and vice versa.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "cluster": (
        "kubesched.cluster.cli",
        "run a local Kubernetes-API-compatible cluster with simulated nodes",
    ),
    "scheduler": ("kubesched.scheduler.cli", "run the scheduler (a drop-in for kube-scheduler)"),
    "simulate": (
        "kubesched.scheduler.simulate",
        "schedule pods from a file offline and show why each landed where",
    ),
    "bench": ("kubesched.bench.cli", "run scheduler_perf-style benchmarks"),
    "annotator": (
        "kubesched.loadaware.cli",
        "write node load annotations from Prometheus (crane-scheduler-controller's job)",
    ),
    "dashboard": ("kubesched.dashboard.cli", "a read-only web page: the cluster live, placements explained"),
    "takeover": ("kubesched.ops.takeover", "take the default scheduler's Lease for kubesched, safely"),
    "doctor": ("kubesched.ops.doctor", "explain a cluster's scheduling health on one screen"),
    "chaos": ("kubesched.ops.chaos", "delete pods and the leader for a while; check scheduling keeps up"),
    "operator": (
        "kubesched.operator.main",
        "install and maintain the scheduler as static pods through a KubeScheduler resource",
    ),
    "installer": (
        "kubesched.operator.installer_cmd",
        "install one revision of the scheduler's static pod on this node (run by the operator)",
    ),
    "render": (
        "kubesched.operator.render",
        "write the bootstrap scheduler's static pod and config and the operator's install manifests",
    ),
}
# Subcommands that build schedulers: their ``run(args, catalogue)`` gets the application's plugin catalogue,
# assembled here, at the edge, once (``kubesched.catalogue``).
WITH_CATALOGUE = frozenset({"scheduler", "simulate", "bench", "dashboard"})


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand's module is imported (the others stay unloaded)."""
    parser = argparse.ArgumentParser(prog="kubesched", description="A Kubernetes scheduler stack in Python.")
    parser.add_argument(
        "--event-loop",
        choices=("auto", "uvloop", "asyncio"),
        help="the event loop of this process and the kubesched processes it starts (default: auto, uvloop "
        "when installed; same as KUBESCHED_EVENT_LOOP)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if only is not None and name != only:
            continue
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name != module:
                raise
            p.set_defaults(_unavailable=module)
            continue
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _subcommand(argv: list[str]) -> str | None:
    """The first word that is neither an option nor the top-level ``--event-loop``'s value."""
    skip = False
    for a in argv:
        if skip:
            skip = False
        elif a == "--event-loop":
            skip = True
        elif not a.startswith("-"):
            return a
    return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    chosen = _subcommand(argv)
    parser = build_parser(chosen if chosen in SUBCOMMANDS else None)
    args = parser.parse_args(argv)
    if args.event_loop is not None:
        from kubesched import eventloop

        # Through the environment, so that the processes this one starts (cluster, scheduler) follow it.
        os.environ[eventloop.ENV] = args.event_loop
    if args.command is None:
        parser.print_help()
        return 2
    if getattr(args, "_unavailable", None):
        print(f"kubesched {args.command}: not available in this build ({args._unavailable})", file=sys.stderr)
        return 2
    try:
        if args.command in WITH_CATALOGUE:
            from kubesched.catalogue import full_catalogue

            return int(args._run(args, full_catalogue()) or 0)
        return int(args._run(args) or 0)
    except Exception as e:
        # The last line of defence for bad input: the project's own typed errors that a command did not turn
        # into its message are one line, not a traceback. Anything else is a bug and keeps its traceback.
        if not _is_input_error(e):
            raise
        from kubesched.client.config import one_line

        print(f"kubesched {args.command}: {one_line(e)}", file=sys.stderr)
        return 1


# (module, class): errors that describe bad input (configuration, kubeconfig, policy, quantity, selector, an
# object the API refused). Looked up only in modules already imported, so nothing is loaded for the check.
INPUT_ERRORS = (
    ("kubesched.client.config", "ConfigError"),
    ("kubesched.scheduler.config.errors", "ConfigError"),
    ("kubesched.loadaware.policy", "PolicyError"),
    ("kubesched.serving.options", "AuthSetupError"),
    ("kubesched.apimachinery.quantity", "QuantityError"),
    ("kubesched.apimachinery.labels", "SelectorError"),
    ("kubesched.cluster.errors", "ApiError"),
    ("kubesched.eventloop", "EventLoopError"),
)


def _is_input_error(e: BaseException) -> bool:
    for module, name in INPUT_ERRORS:
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and isinstance(e, cls):
            return True
    return False


if __name__ == "__main__":
    sys.exit(main())
