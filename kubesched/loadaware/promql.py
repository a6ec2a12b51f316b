"""How a node's series is found in Prometheus: the ``instance`` matching mode and the query template.

crane asks ``<metric>{instance=~"<InternalIP>"} /100``, then ``instance=~"<InternalIP>:.+"``, then the node
name, and users whose ``instance`` label is none of those get nothing (crane-scheduler#8, #39). Here the mode
is chosen (``instanceMatch``) and the query is a template (``promeQueryTemplate``) with the placeholders
``$metric``, ``$selector`` (the label matchers for the node), ``$node``, ``$ip`` and ``$cluster``.

Modes: ``auto`` (crane's order: ip, ip:port, nodename), ``ip``, ``ip:port``, ``nodename``, and
``label:<name>`` (series whose Prometheus label ``<name>`` equals the node name, e.g. ``label:node``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from string import Template

DEFAULT_QUERY_TEMPLATE = "$metric{$selector} / 100"
PLACEHOLDERS = ("metric", "selector", "node", "ip", "cluster")
INSTANCE_MATCH_MODES = ("auto", "ip", "ip:port", "nodename", "label:<name>")
CLUSTER_LABEL = "cluster"

_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RE2_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$])")


@dataclass(frozen=True, slots=True)
class InstanceMatch:
    mode: str  # "auto", "ip", "ip:port", "nodename" or "label"
    label: str = ""  # the Prometheus label for mode "label"


def parse_instance_match(text: str) -> InstanceMatch:
    """``"ip"``, ``"label:node"``... to an ``InstanceMatch``; ``ValueError`` names the accepted forms."""
    if text in ("auto", "ip", "ip:port", "nodename"):
        return InstanceMatch(text)
    if text.startswith("label:"):
        label = text[len("label:") :]
        if _LABEL_NAME.fullmatch(label):
            return InstanceMatch("label", label)
        raise ValueError(f"{label!r} is not a Prometheus label name")
    raise ValueError(f"must be one of {', '.join(INSTANCE_MATCH_MODES)}")


def _quote(value: str) -> str:
    """A PromQL double-quoted string literal."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _regex_literal(value: str) -> str:
    """``value`` as an RE2 pattern matching itself (crane leaves the dots of an IP unescaped)."""
    return _RE2_SPECIAL.sub(r"\\\1", value)


def selectors(match: InstanceMatch, node_name: str, ip: str = "", cluster: str = "") -> list[str]:
    """The label matchers to try for a node, in order (several only for ``auto``)."""
    address = ip or node_name  # crane falls back to the node name when the node has no InternalIP
    host = f"[{address}]" if ":" in address else address  # IPv6 targets are written [addr]:port
    by_mode = {
        "ip": f"instance={_quote(address)}",
        "ip:port": f"instance=~{_quote(_regex_literal(host) + ':[0-9]+')}",
        "nodename": f"instance={_quote(node_name)}",
    }
    if match.mode == "auto":
        found = [by_mode["ip"], by_mode["ip:port"], by_mode["nodename"]]
    elif match.mode == "label":
        found = [f"{match.label}={_quote(node_name)}"]
    else:
        found = [by_mode[match.mode]]
    if cluster:
        found = [f"{s},{CLUSTER_LABEL}={_quote(cluster)}" for s in found]
    return list(dict.fromkeys(found))


def check_template(template: str) -> None:
    """``ValueError`` unless ``template`` uses only the known placeholders (and ``$metric`` at least)."""
    t = Template(template)
    if not t.is_valid():
        raise ValueError("invalid placeholder syntax: write $name or ${name}, and $$ for a literal $")
    unknown = sorted(set(t.get_identifiers()) - set(PLACEHOLDERS))
    if unknown:
        raise ValueError(f"unknown placeholder(s) {', '.join(unknown)}; known: {', '.join(PLACEHOLDERS)}")
    if "metric" not in t.get_identifiers():
        raise ValueError("must contain $metric")


def render_query(
    template: str, metric: str, selector: str, *, node: str = "", ip: str = "", cluster: str = ""
) -> str:
    """The PromQL for one metric of one node."""
    return Template(template).substitute(metric=metric, selector=selector, node=node, ip=ip, cluster=cluster)


__all__ = [
    "DEFAULT_QUERY_TEMPLATE",
    "INSTANCE_MATCH_MODES",
    "PLACEHOLDERS",
    "InstanceMatch",
    "check_template",
    "parse_instance_match",
    "render_query",
    "selectors",
]
