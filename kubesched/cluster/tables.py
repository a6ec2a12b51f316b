"""Server-side ``meta.k8s.io/v1`` Tables, what ``kubectl get`` asks for and prints as is.

Like kube-apiserver, the server renders every column, wide ones included (``priority: 1``; kubectl shows them with
``-o wide``), and computes ages itself: an Age cell holds "5m2s", not a timestamp. Custom resources get
``additionalPrinterColumns`` (``date`` columns also rendered as ages), or Name and Age when the CRD declares none.
Kinds with no printer upstream (CustomResourceDefinition) get Name and "Created At", an RFC 3339 date column.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from kubesched.cluster.discovery import media_ranges
from kubesched.cluster.resources import Obj, ResourceType

Column = dict[str, Any]
Row = dict[str, Any]
Printer = Callable[[Obj, dt.datetime], list[Any]]

TABLE_CONTENT_TYPE = "application/json;as=Table;v=v1;g=meta.k8s.io"


def wants_table(accept_header: str) -> bool:
    """True when the client accepts a ``meta.k8s.io/v1`` Table (kubectl get does)."""
    for media_type, params in media_ranges(accept_header or ""):
        if (
            media_type in ("application/json", "*/*")
            and params.get("as") == "Table"
            and params.get("g") == "meta.k8s.io"
            and params.get("v") == "v1"
        ):
            return True
    return False


# -- time ------------------------------------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """An age the way kubectl prints one: ~2-3 significant figures ("45s", "3m2s", "2d3h", "400d", "3y12d")."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        years, days = hours // 24 // 365, (hours // 24) % 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def parse_time(value: Any) -> dt.datetime | None:
    """An RFC 3339 timestamp (Time or MicroTime) as an aware datetime, None if absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)


def age(timestamp: Any, now: dt.datetime) -> str:
    """Time since ``timestamp`` for an Age cell; "<unknown>" when there is none."""
    when = parse_time(timestamp)
    if when is None:
        return "<unknown>"
    return human_duration((now - when).total_seconds())


# -- small accessors ---------------------------------------------------------------------------------------------


def _d(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _l(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _meta(obj: Obj) -> dict[str, Any]:
    return _d(obj.get("metadata"))


def _name(obj: Obj) -> str:
    return str(_meta(obj).get("name") or "")


def _created(obj: Obj, now: dt.datetime) -> str:
    return age(_meta(obj).get("creationTimestamp"), now)


def _col(name: str, description: str, *, type: str = "string", priority: int = 0, format: str = "") -> Column:
    return {"name": name, "type": type, "format": format, "description": description, "priority": priority}


NAME_COLUMN = _col("Name", "Name of the object, unique within its namespace.", format="name")
AGE_COLUMN = _col("Age", "Time since the object was created.")


# -- pods --------------------------------------------------------------------------------------------------------

POD_COLUMNS = [
    NAME_COLUMN,
    _col("Ready", "Ready containers out of all containers."),
    _col("Status", "The pod's aggregate state."),
    _col("Restarts", "Container restarts, and how long ago the last one was."),
    AGE_COLUMN,
    _col("IP", "The pod's IP address.", priority=1),
    _col("Node", "The node the pod is bound to.", priority=1),
    _col("Nominated Node", "The node preemption made room on, if any.", priority=1),
    _col("Readiness Gates", "Readiness gates that are true out of all.", priority=1),
]


def _restartable_init(container: Any) -> bool:
    return _d(container).get("restartPolicy") == "Always"


def _terminated_reason(terminated: dict[str, Any], prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def pod_status_reason(pod: Obj) -> tuple[str, int, int, int, str]:
    """(STATUS, ready containers, all containers, restarts, last restart time) as kubectl shows them."""
    spec, status = _d(pod.get("spec")), _d(pod.get("status"))
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    conditions = [_d(c) for c in _l(status.get("conditions"))]
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions):
        reason = "SchedulingGated"
    init_specs = {str(_d(c).get("name")): c for c in _l(spec.get("initContainers"))}
    total = len(_l(spec.get("containers"))) + sum(_restartable_init(c) for c in init_specs.values())
    ready, restarts, sidecar_restarts = 0, 0, 0
    last_restart, last_sidecar_restart = "", ""

    initializing = False
    init_statuses = [_d(s) for s in _l(status.get("initContainerStatuses"))]
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        finished = str(_d(_d(cs.get("lastState")).get("terminated")).get("finishedAt") or "")
        last_restart = max(last_restart, finished)
        sidecar = _restartable_init(init_specs.get(str(cs.get("name"))))
        if sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            last_sidecar_restart = max(last_sidecar_restart, finished)
        state = _d(cs.get("state"))
        terminated, waiting = _d(state.get("terminated")), _d(state.get("waiting"))
        if state.get("terminated") is not None and terminated.get("exitCode", 0) == 0:
            continue
        if sidecar and cs.get("started"):
            ready += bool(cs.get("ready"))
            continue
        if state.get("terminated") is not None:
            reason = _terminated_reason(terminated, "Init:")
        elif waiting.get("reason") and waiting.get("reason") != "PodInitializing":
            reason = f"Init:{waiting['reason']}"
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        initializing = True
        break

    initialized = any(c.get("type") == "Initialized" and c.get("status") == "True" for c in conditions)
    if not initializing or initialized:
        restarts, last_restart = sidecar_restarts, last_sidecar_restart
        running = False
        for cs in reversed([_d(s) for s in _l(status.get("containerStatuses"))]):
            restarts += int(cs.get("restartCount") or 0)
            finished = str(_d(_d(cs.get("lastState")).get("terminated")).get("finishedAt") or "")
            last_restart = max(last_restart, finished)
            state = _d(cs.get("state"))
            waiting, terminated = _d(state.get("waiting")), _d(state.get("terminated"))
            if waiting.get("reason"):
                reason = str(waiting["reason"])
            elif state.get("terminated") is not None:
                reason = _terminated_reason(terminated)
            elif cs.get("ready") and state.get("running") is not None:
                running = True
                ready += 1
        if reason == "Completed" and running:
            has_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
            reason = "Running" if has_ready else "NotReady"

    deleting = bool(_meta(pod).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def _pod_cells(pod: Obj, now: dt.datetime) -> list[Any]:
    spec, status = _d(pod.get("spec")), _d(pod.get("status"))
    reason, ready, total, restarts, last_restart = pod_status_reason(pod)
    restarts_cell = str(restarts)
    if restarts and last_restart:
        restarts_cell = f"{restarts} ({age(last_restart, now)} ago)"
    ips = _l(status.get("podIPs"))
    ip = str(_d(ips[0]).get("ip") or "") if ips else str(status.get("podIP") or "")
    gates = [_d(g).get("conditionType") for g in _l(spec.get("readinessGates"))]
    gates_cell = "<none>"
    if gates:
        truth = {_d(c).get("type"): _d(c).get("status") for c in _l(status.get("conditions"))}
        gates_cell = f"{sum(truth.get(g) == 'True' for g in gates)}/{len(gates)}"
    return [
        _name(pod),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        _created(pod, now),
        ip or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


def _pod_conditions(pod: Obj) -> list[dict[str, str]] | None:
    phase = _d(pod.get("status")).get("phase")
    if phase == "Succeeded":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    if phase == "Failed":
        return [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]
    return None


# -- nodes -------------------------------------------------------------------------------------------------------

NODE_COLUMNS = [
    NAME_COLUMN,
    _col("Status", "Node readiness, and whether scheduling is disabled."),
    _col("Roles", "Roles from node-role.kubernetes.io/* labels."),
    AGE_COLUMN,
    _col("Version", "The kubelet version the node reports."),
    _col("Internal-IP", "First internal address.", priority=1),
    _col("External-IP", "First external address.", priority=1),
    _col("OS-Image", "Operating system image.", priority=1),
    _col("Kernel-Version", "Kernel version.", priority=1),
    _col("Container-Runtime", "Container runtime and version.", priority=1),
]


def node_roles(node: Obj) -> list[str]:
    roles: set[str] = set()
    for key, value in _d(_meta(node).get("labels")).items():
        if key.startswith("node-role.kubernetes.io/") and key[len("node-role.kubernetes.io/") :]:
            roles.add(key[len("node-role.kubernetes.io/") :])
        elif key == "kubernetes.io/role" and value:
            roles.add(str(value))
    return sorted(roles)


def _node_cells(node: Obj, now: dt.datetime) -> list[Any]:
    status = _d(node.get("status"))
    states = []
    for c in map(_d, _l(status.get("conditions"))):
        if c.get("type") == "Ready":
            states = ["Ready" if c.get("status") == "True" else "NotReady"]
    states = states or ["Unknown"]
    if _d(node.get("spec")).get("unschedulable"):
        states.append("SchedulingDisabled")
    info = _d(status.get("nodeInfo"))

    def address(kind: str) -> str:
        for a in map(_d, _l(status.get("addresses"))):
            if a.get("type") == kind:
                return str(a.get("address") or "")
        return "<none>"

    return [
        _name(node),
        ",".join(states),
        ",".join(node_roles(node)) or "<none>",
        _created(node, now),
        str(info.get("kubeletVersion") or ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


# -- events ------------------------------------------------------------------------------------------------------

EVENT_COLUMNS = [
    _col("Last Seen", "When the event last happened."),
    _col("Type", "Normal or Warning."),
    _col("Reason", "Short machine-readable reason."),
    _col("Object", "The object the event is about."),
    _col("Subobject", "The part of the object, if any.", priority=1),
    _col("Source", "The component that reported the event.", priority=1),
    _col("Message", "Human-readable description."),
    _col("First Seen", "When the event first happened.", priority=1),
    _col("Count", "How many times it happened.", priority=1),
    _col("Name", "Name of the event object.", priority=1, format="name"),
]


def _event_cells(rtype: ResourceType, event: Obj, now: dt.datetime) -> list[Any]:
    v1 = rtype.group == "events.k8s.io"
    involved = _d(event.get("regarding" if v1 else "involvedObject"))
    source = _d(event.get("deprecatedSource" if v1 else "source"))
    first_ts = event.get("deprecatedFirstTimestamp" if v1 else "firstTimestamp")
    last_ts = event.get("deprecatedLastTimestamp" if v1 else "lastTimestamp")
    count = event.get("deprecatedCount" if v1 else "count") or 0
    controller = event.get("reportingController" if v1 else "reportingComponent") or ""
    message = str(event.get("note" if v1 else "message") or "")

    first = age(first_ts, now) if parse_time(first_ts) else age(event.get("eventTime"), now)
    last = age(last_ts, now) if parse_time(last_ts) else first
    series = event.get("series")
    if isinstance(series, dict):
        last = age(series.get("lastObservedTime"), now)
        count = series.get("count") or 0
    elif not count:
        count = 1  # events written through events.k8s.io carry no count when they happened once
    kind = str(involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    component = source.get("component") or controller
    instance = source.get("host") or event.get("reportingInstance") or ""
    return [
        last,
        event.get("type") or "",
        event.get("reason") or "",
        target,
        involved.get("fieldPath") or "",
        f"{component}, {instance}" if instance else str(component),
        message.strip(),
        first,
        int(count),
        _name(event),
    ]


# -- other built-in kinds ----------------------------------------------------------------------------------------

NAMESPACE_COLUMNS = [NAME_COLUMN, _col("Status", "Active or Terminating."), AGE_COLUMN]
DEPLOYMENT_COLUMNS = [
    NAME_COLUMN,
    _col("Ready", "Ready replicas out of desired."),
    _col("Up-to-date", "Replicas running the latest template."),
    _col("Available", "Replicas available to serve."),
    AGE_COLUMN,
    _col("Containers", "Container names in the template.", priority=1),
    _col("Images", "Container images in the template.", priority=1),
    _col("Selector", "The label selector for the pods.", priority=1),
]
REPLICASET_COLUMNS = [
    NAME_COLUMN,
    _col("Desired", "Desired replicas.", type="integer"),
    _col("Current", "Replicas that exist.", type="integer"),
    _col("Ready", "Ready replicas.", type="integer"),
    AGE_COLUMN,
    _col("Containers", "Container names in the template.", priority=1),
    _col("Images", "Container images in the template.", priority=1),
    _col("Selector", "The label selector for the pods.", priority=1),
]
LEASE_COLUMNS = [NAME_COLUMN, _col("Holder", "The current holder of the lease."), AGE_COLUMN]
CONFIGMAP_COLUMNS = [NAME_COLUMN, _col("Data", "Number of entries.", type="integer"), AGE_COLUMN]
SECRET_COLUMNS = [
    NAME_COLUMN,
    _col("Type", "The secret's type."),
    _col("Data", "Number of entries.", type="integer"),
    AGE_COLUMN,
]
PRIORITYCLASS_COLUMNS = [
    NAME_COLUMN,
    _col("Value", "The priority value.", type="integer"),
    _col("Global-Default", "Whether this is the default for pods without a class.", type="boolean"),
    AGE_COLUMN,
    _col("Preemption-Policy", "Whether pods of this class may preempt others.", priority=1),
]
DEFAULT_COLUMNS = [NAME_COLUMN, AGE_COLUMN]
CREATED_AT_COLUMNS = [NAME_COLUMN, _col("Created At", "When the object was created.", type="date")]


def selector_string(selector: Any) -> str:
    """A LabelSelector in kubectl's text form ("app=web,tier in (a,b)"); "<none>" when empty."""
    selector = _d(selector)
    parts = [f"{k}={v}" for k, v in sorted(_d(selector.get("matchLabels")).items())]
    for expr in map(_d, _l(selector.get("matchExpressions"))):
        key, op, values = expr.get("key"), expr.get("operator"), sorted(map(str, _l(expr.get("values"))))
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or "<none>"


def _template_containers(obj: Obj) -> tuple[str, str]:
    containers = [
        _d(c) for c in _l(_d(_d(_d(obj.get("spec")).get("template")).get("spec")).get("containers"))
    ]
    return ",".join(str(c.get("name") or "") for c in containers), ",".join(
        str(c.get("image") or "") for c in containers
    )


def _deployment_cells(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    desired = spec.get("replicas", 1)
    names, images = _template_containers(obj)
    return [
        _name(obj),
        f"{int(status.get('readyReplicas') or 0)}/{int(desired if desired is not None else 1)}",
        int(status.get("updatedReplicas") or 0),
        int(status.get("availableReplicas") or 0),
        _created(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


def _replicaset_cells(obj: Obj, now: dt.datetime) -> list[Any]:
    spec, status = _d(obj.get("spec")), _d(obj.get("status"))
    desired = spec.get("replicas", 1)
    names, images = _template_containers(obj)
    return [
        _name(obj),
        int(desired if desired is not None else 1),
        int(status.get("replicas") or 0),
        int(status.get("readyReplicas") or 0),
        _created(obj, now),
        names,
        images,
        selector_string(spec.get("selector")),
    ]


_BUILTIN: dict[tuple[str, str], tuple[list[Column], Printer]] = {
    ("", "Pod"): (POD_COLUMNS, _pod_cells),
    ("", "Node"): (NODE_COLUMNS, _node_cells),
    ("", "Namespace"): (
        NAMESPACE_COLUMNS,
        lambda o, now: [_name(o), _d(o.get("status")).get("phase") or "", _created(o, now)],
    ),
    ("apps", "Deployment"): (DEPLOYMENT_COLUMNS, _deployment_cells),
    ("apps", "ReplicaSet"): (REPLICASET_COLUMNS, _replicaset_cells),
    ("coordination.k8s.io", "Lease"): (
        LEASE_COLUMNS,
        lambda o, now: [_name(o), _d(o.get("spec")).get("holderIdentity") or "", _created(o, now)],
    ),
    ("", "ConfigMap"): (
        CONFIGMAP_COLUMNS,
        lambda o, now: [_name(o), len(_d(o.get("data"))) + len(_d(o.get("binaryData"))), _created(o, now)],
    ),
    ("", "Secret"): (
        SECRET_COLUMNS,
        lambda o, now: [_name(o), o.get("type") or "", len(_d(o.get("data"))), _created(o, now)],
    ),
    ("scheduling.k8s.io", "PriorityClass"): (
        PRIORITYCLASS_COLUMNS,
        lambda o, now: [
            _name(o),
            int(o.get("value") or 0),
            bool(o.get("globalDefault")),
            _created(o, now),
            o.get("preemptionPolicy") or "PreemptLowerPriority",
        ],
    ),
    ("apiextensions.k8s.io", "CustomResourceDefinition"): (
        CREATED_AT_COLUMNS,
        lambda o, now: [_name(o), _meta(o).get("creationTimestamp") or ""],
    ),
}


# -- custom resources --------------------------------------------------------------------------------------------

_JSONPATH_TOKEN = re.compile(
    r"""\.(?P<field>(?:\\.|[^.\[\\])+)"""
    r"""|\[(?P<index>-?\d+)\]"""
    r"""|\['(?P<quoted>[^']*)'\]"""
    r"""|\[\?\(@\.(?P<fpath>[A-Za-z0-9_.\-]+)\s*==\s*(?:"(?P<fdq>[^"]*)"|'(?P<fsq>[^']*)'|(?P<fnum>[^)\s]+))\s*\)\]"""
    r"""|\[\*\]"""
)


def jsonpath_get(obj: Any, path: str) -> tuple[bool, Any]:
    """The first value at a simple JSONPath (``.a.b``, ``[0]``, ``['k']``, ``[?(@.type=="Ready")]``, ``[*]``).

    Returns (found, value). This is the subset CRD printer columns use in practice.
    """
    path = path.strip()
    if path.startswith("{") and path.endswith("}"):
        path = path[1:-1]
    if path.startswith("$"):
        path = path[1:]
    current: list[Any] = [obj]
    pos = 0
    while pos < len(path):
        m = _JSONPATH_TOKEN.match(path, pos)
        if m is None:
            return False, None
        pos = m.end()
        nxt: list[Any] = []
        for value in current:
            if m.group("field") is not None or m.group("quoted") is not None:
                key = (
                    m.group("quoted")
                    if m.group("quoted") is not None
                    else m.group("field").replace("\\.", ".")
                )
                if isinstance(value, dict) and key in value:
                    nxt.append(value[key])
            elif m.group("index") is not None:
                i = int(m.group("index"))
                if isinstance(value, list) and -len(value) <= i < len(value):
                    nxt.append(value[i])
            elif m.group("fpath") is not None:
                wanted = next(g for g in (m.group("fdq"), m.group("fsq"), m.group("fnum")) if g is not None)
                for item in _l(value):
                    ok, got = jsonpath_get(item, "." + m.group("fpath"))
                    if ok and _printed(got) == wanted:
                        nxt.append(item)
            else:  # [*]
                nxt.extend(_l(value))
        current = nxt
        if not current:
            return False, None
    return True, current[0]


def _printed(value: Any) -> str:
    # kubectl's JSONPath printing: strings bare, booleans lowercase, objects and lists as JSON.
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value, separators=(",", ":"))


def _cell_for(column_type: str, value: Any, now: dt.datetime) -> Any:
    if value is None:
        return None
    if column_type == "string":
        return _printed(value)
    if column_type == "integer":
        return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if column_type == "number":
        return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    if column_type == "boolean":
        return value if isinstance(value, bool) else None
    if column_type == "date":
        if not isinstance(value, str):
            return None
        return age(value, now) if parse_time(value) else "<invalid>"
    return None


def _crd_columns(rtype: ResourceType) -> list[dict[str, Any]]:
    assert rtype.crd is not None
    for version in _l(_d(rtype.crd.get("spec")).get("versions")):
        if _d(version).get("name") == rtype.version:
            columns = _l(_d(version).get("additionalPrinterColumns"))
            if columns:
                return [_d(c) for c in columns]
    return [{"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
             "description": "Time since the object was created."}]  # fmt: skip


def _custom_table(rtype: ResourceType) -> tuple[list[Column], Printer]:
    printer_columns = _crd_columns(rtype)
    columns = [NAME_COLUMN] + [
        {
            "name": c.get("name", ""),
            "type": c.get("type", "string"),
            "format": c.get("format", ""),
            "description": c.get("description")
            or f"Custom resource definition column (in JSONPath format): {c.get('jsonPath', '')}",
            "priority": int(c.get("priority") or 0),
        }
        for c in printer_columns
    ]

    def cells(obj: Obj, now: dt.datetime) -> list[Any]:
        out: list[Any] = [_name(obj)]
        for c in printer_columns:
            found, value = jsonpath_get(obj, str(c.get("jsonPath", "")))
            out.append(_cell_for(str(c.get("type", "string")), value, now) if found else None)
        return out

    return columns, cells


def columns_and_printer(rtype: ResourceType) -> tuple[list[Column], Callable[[Obj, dt.datetime], list[Any]]]:
    """The column definitions and row printer for a kind."""
    if rtype.crd is not None:
        return _custom_table(rtype)
    if rtype.kind == "Event" and rtype.group in ("", "events.k8s.io"):
        return EVENT_COLUMNS, lambda obj, now: _event_cells(rtype, obj, now)
    found = _BUILTIN.get((rtype.group, rtype.kind))
    if found is not None:
        return found
    return DEFAULT_COLUMNS, lambda obj, now: [_name(obj), _created(obj, now)]


def _row_object(obj: Obj, include_object: str) -> dict[str, Any] | None:
    if include_object == "None":
        return None
    if include_object == "Object":
        return obj
    # PartialObjectMetadata (the default; "Metadata" on the wire)
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": _meta(obj)}


def to_table(
    rtype: ResourceType,
    objects: Iterable[Obj],
    *,
    include_object: str = "PartialObjectMetadata",
    now: dt.datetime | None = None,
    resource_version: str = "",
    continue_token: str = "",
    include_columns: bool = True,
) -> dict[str, Any]:
    """A ``meta.k8s.io/v1`` Table of ``objects`` (as seen through ``rtype``'s API).

    ``include_object`` is the ``includeObject`` query parameter: "PartialObjectMetadata" (or "Metadata"),
    "Object" or "None". ``include_columns=False`` leaves out the column definitions, as for watch events after
    the first one.
    """
    now = now or dt.datetime.now(dt.UTC)
    columns, printer = columns_and_printer(rtype)
    rows: list[Row] = []
    for obj in objects:
        row: Row = {"cells": printer(obj, now)}
        if rtype.kind == "Pod" and rtype.group == "":
            conditions = _pod_conditions(obj)
            if conditions:
                row["conditions"] = conditions
        embedded = _row_object(obj, include_object)
        if embedded is not None:
            row["object"] = embedded
        rows.append(row)
    metadata: dict[str, Any] = {}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    if continue_token:
        metadata["continue"] = continue_token
    table: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata}
    table["columnDefinitions"] = columns if include_columns else []
    table["rows"] = rows
    return table
