"""Pods: defaults the scheduler relies on, priority admission, graceful deletion, field selectors, printer."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

from kubesched.cluster import errors, validation
from kubesched.cluster.kinds.printing import (
    AGE_COLUMN,
    NAME_COLUMN,
    Column,
    age,
    as_dict,
    as_list,
    col,
    created,
    meta_of,
    name_of,
)
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import FieldGetter, Obj, ResourceType, field_path

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi

PRIORITY_CLASSES = "scheduling.k8s.io/priorityclasses"


def _pod_ip(obj: Obj) -> str:
    st = obj.get("status") or {}
    ips = st.get("podIPs") or []
    if ips:
        return str(ips[0].get("ip", ""))
    return str(st.get("podIP") or "")


FIELDS: dict[str, FieldGetter] = {
    "spec.nodeName": field_path("spec.nodeName"),
    "spec.restartPolicy": field_path("spec.restartPolicy"),
    "spec.schedulerName": field_path("spec.schedulerName"),
    "spec.serviceAccountName": field_path("spec.serviceAccountName"),
    "spec.hostNetwork": field_path("spec.hostNetwork", "false"),
    "status.phase": field_path("status.phase"),
    "status.podIP": _pod_ip,
    "status.nominatedNodeName": field_path("status.nominatedNodeName"),
}

# -- defaults ---------------------------------------------------------------------------------------------------


def container_defaults(c: Obj) -> Obj:
    c = dict(c)
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    image = str(c.get("image") or "")
    tagless = "@" not in image and ":" not in image.rsplit("/", 1)[-1]
    if "imagePullPolicy" not in c:
        c["imagePullPolicy"] = "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    res = dict(c.get("resources") or {})
    if res.get("limits") and not res.get("requests"):
        # Requests default to limits (upstream defaulting), which is what the scheduler then counts.
        res["requests"] = dict(res["limits"])
    elif res.get("limits"):
        req = dict(res["requests"])
        for k, v in res["limits"].items():
            req.setdefault(k, v)
        res["requests"] = req
    c["resources"] = res
    return c


def qos_class(spec: Obj) -> str:
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    any_set = False
    guaranteed = True
    for c in containers:
        res = c.get("resources") or {}
        req = res.get("requests") or {}
        lim = res.get("limits") or {}
        if req or lim:
            any_set = True
        for r in ("cpu", "memory"):
            if r not in lim or (r in req and str(req[r]) != str(lim[r])):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# -- table ------------------------------------------------------------------------------------------------------

COLUMNS: list[Column] = [
    NAME_COLUMN,
    col("Ready", "Ready containers out of all containers."),
    col("Status", "The pod's aggregate state."),
    col("Restarts", "Container restarts, and how long ago the last one was."),
    AGE_COLUMN,
    col("IP", "The pod's IP address.", priority=1),
    col("Node", "The node the pod is bound to.", priority=1),
    col("Nominated Node", "The node preemption made room on, if any.", priority=1),
    col("Readiness Gates", "Readiness gates that are true out of all.", priority=1),
]


def _restartable_init(container: Any) -> bool:
    return as_dict(container).get("restartPolicy") == "Always"


def _terminated_reason(terminated: dict[str, Any], prefix: str = "") -> str:
    if terminated.get("reason"):
        return prefix + str(terminated["reason"])
    if terminated.get("signal"):
        return f"{prefix}Signal:{terminated['signal']}"
    return f"{prefix}ExitCode:{terminated.get('exitCode', 0)}"


def pod_status_reason(pod: Obj) -> tuple[str, int, int, int, str]:
    """(STATUS, ready containers, all containers, restarts, last restart time) as kubectl shows them."""
    spec, status = as_dict(pod.get("spec")), as_dict(pod.get("status"))
    phase = str(status.get("phase") or "")
    reason = str(status.get("reason") or phase)
    conditions = [as_dict(c) for c in as_list(status.get("conditions"))]
    if any(c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated" for c in conditions):
        reason = "SchedulingGated"
    init_specs = {str(as_dict(c).get("name")): c for c in as_list(spec.get("initContainers"))}
    total = len(as_list(spec.get("containers"))) + sum(_restartable_init(c) for c in init_specs.values())
    ready, restarts, sidecar_restarts = 0, 0, 0
    last_restart, last_sidecar_restart = "", ""

    initializing = False
    init_statuses = [as_dict(s) for s in as_list(status.get("initContainerStatuses"))]
    for i, cs in enumerate(init_statuses):
        restarts += int(cs.get("restartCount") or 0)
        finished = str(as_dict(as_dict(cs.get("lastState")).get("terminated")).get("finishedAt") or "")
        last_restart = max(last_restart, finished)
        sidecar = _restartable_init(init_specs.get(str(cs.get("name"))))
        if sidecar:
            sidecar_restarts += int(cs.get("restartCount") or 0)
            last_sidecar_restart = max(last_sidecar_restart, finished)
        state = as_dict(cs.get("state"))
        terminated, waiting = as_dict(state.get("terminated")), as_dict(state.get("waiting"))
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
        for cs in reversed([as_dict(s) for s in as_list(status.get("containerStatuses"))]):
            restarts += int(cs.get("restartCount") or 0)
            finished = str(as_dict(as_dict(cs.get("lastState")).get("terminated")).get("finishedAt") or "")
            last_restart = max(last_restart, finished)
            state = as_dict(cs.get("state"))
            waiting, terminated = as_dict(state.get("waiting")), as_dict(state.get("terminated"))
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

    deleting = bool(meta_of(pod).get("deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"
    return reason, ready, total, restarts, last_restart


def print_row(pod: Obj, now: dt.datetime) -> list[Any]:
    spec, status = as_dict(pod.get("spec")), as_dict(pod.get("status"))
    reason, ready, total, restarts, last_restart = pod_status_reason(pod)
    restarts_cell = str(restarts)
    if restarts and last_restart:
        restarts_cell = f"{restarts} ({age(last_restart, now)} ago)"
    ips = as_list(status.get("podIPs"))
    ip = str(as_dict(ips[0]).get("ip") or "") if ips else str(status.get("podIP") or "")
    gates = [as_dict(g).get("conditionType") for g in as_list(spec.get("readinessGates"))]
    gates_cell = "<none>"
    if gates:
        truth = {as_dict(c).get("type"): as_dict(c).get("status") for c in as_list(status.get("conditions"))}
        gates_cell = f"{sum(truth.get(g) == 'True' for g in gates)}/{len(gates)}"
    return [
        name_of(pod),
        f"{ready}/{total}",
        reason,
        restarts_cell,
        created(pod, now),
        ip or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gates_cell,
    ]


# -- strategy ---------------------------------------------------------------------------------------------------


class PodStrategy(Strategy):
    fields = FIELDS
    columns = COLUMNS

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        spec = dict(obj.get("spec") or {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("securityContext", {})
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("serviceAccountName", "default")
        self._admit_priority(api, obj, spec)
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = list(spec.get("tolerations") or [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(
                t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations
            ):
                tolerations.append(
                    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                )
        spec["tolerations"] = tolerations
        for field_name in ("containers", "initContainers"):
            if field_name in spec:
                spec[field_name] = [container_defaults(c) for c in spec[field_name] or []]
        obj["spec"] = spec
        status = dict(obj.get("status") or {})
        status.setdefault("phase", "Pending")
        status["qosClass"] = qos_class(spec)
        obj["status"] = status

    @staticmethod
    def _admit_priority(api: ClusterApi, obj: Obj, spec: Obj) -> None:
        """The Priority admission plugin: spec.priority from the named class, or the global default."""
        pcname = spec.get("priorityClassName")
        if pcname:
            pc = api.store.get(PRIORITY_CLASSES, ("", pcname))
            if pc is None:
                raise errors.forbidden(
                    f'pods "{obj["metadata"].get("name", "")}" is forbidden: no PriorityClass with name {pcname} was found',
                    name=obj["metadata"].get("name"),
                    resource="pods",
                )
            spec["priority"] = int(pc.obj.get("value", 0))
            spec.setdefault("preemptionPolicy", pc.obj.get("preemptionPolicy", "PreemptLowerPriority"))
        elif "priority" not in spec:
            default_pc = next(
                (st.obj for st in api.store.scan(PRIORITY_CLASSES) if st.obj.get("globalDefault")), None
            )
            if default_pc is not None:
                spec["priorityClassName"] = default_pc["metadata"]["name"]
                spec["priority"] = int(default_pc.get("value", 0))
            else:
                spec["priority"] = 0

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return validation.validate_pod(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return validation.validate_pod_update(new, old)

    def grace_period(self, obj: Obj, options: Obj) -> int:
        spec = obj.get("spec") or {}
        if not spec.get("nodeName"):
            return 0  # an unscheduled pod has no kubelet to wait for
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return 0
        g = options.get("gracePeriodSeconds")
        if g is None:
            g = spec.get("terminationGracePeriodSeconds", 30)
        g = int(g)
        return 1 if g < 0 else g

    def print_row(self, obj: Obj, now: Any) -> list[Any]:
        return print_row(obj, now)

    def row_conditions(self, obj: Obj) -> list[dict[str, str]] | None:
        phase = as_dict(obj.get("status")).get("phase")
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


STRATEGY = PodStrategy()
