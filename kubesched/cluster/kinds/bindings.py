"""pods/binding (and the legacy namespaced ``bindings``): upstream's BindingREST checks and the bound pod."""

from __future__ import annotations

from typing import Any

from kubesched.apimachinery.timefmt import now_rfc3339
from kubesched.cluster import errors
from kubesched.cluster.resources import Obj
from kubesched.cluster.storage.interface import Stored


def pod_name_of(binding: Obj, url_name: str | None) -> tuple[str, Any]:
    """Check a Binding body; returns (pod name, target node name)."""
    if not isinstance(binding, dict) or binding.get("kind") not in (None, "Binding"):
        raise errors.bad_request("the body of the request must be a Binding")
    bmeta = binding.get("metadata") or {}
    pod_name = url_name or bmeta.get("name") or ""
    if url_name is not None and bmeta.get("name") and bmeta["name"] != url_name:
        raise errors.bad_request("name in URL does not match name in Binding object")
    target = binding.get("target") or {}
    if not target.get("name"):
        raise errors.invalid("Binding", pod_name, [errors.field_required("target.name")])
    if target.get("kind") not in (None, "", "Node"):
        raise errors.invalid(
            "Binding", pod_name, [errors.field_not_supported("target.kind", target.get("kind"), ["Node"])]
        )
    return pod_name, target["name"]


def _storage_failure(namespace: str, pod_name: str) -> str:
    # Preconditions are checked by storage, whose failure upstream reports as a Conflict on pods.
    return (
        f"StorageError: invalid object, Code: 4, Key: /registry/pods/{namespace}/{pod_name}, "
        "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
    )


def bound_pod(st: Stored, namespace: str, pod_name: str, binding: Obj, node: Any) -> Obj:
    """The pod ``st`` assigned to ``node``, or the Conflict upstream answers (preconditions, already bound)."""
    pod = st.obj
    meta = pod.get("metadata") or {}
    bmeta = binding.get("metadata") or {}
    if bmeta.get("uid") and bmeta["uid"] != meta.get("uid"):
        raise errors.conflict(
            "pods",
            pod_name,
            f"{_storage_failure(namespace, pod_name)}UID in precondition: {bmeta['uid']}, "
            f"UID in object meta: {meta.get('uid')}",
        )
    if bmeta.get("resourceVersion") and str(bmeta["resourceVersion"]) != str(st.rv):
        raise errors.conflict(
            "pods",
            pod_name,
            f"{_storage_failure(namespace, pod_name)}ResourceVersion in precondition: {bmeta['resourceVersion']}, "
            f"ResourceVersion in object meta: {st.rv}",
        )
    spec = pod.get("spec") or {}
    if meta.get("deletionTimestamp"):
        raise errors.conflict(
            "pods/binding", pod_name, f"pod {pod_name} is being deleted, cannot be assigned to a host"
        )
    if spec.get("nodeName"):
        raise errors.conflict(
            "pods/binding", pod_name, f'pod {pod_name} is already assigned to node "{spec["nodeName"]}"'
        )
    if spec.get("schedulingGates"):
        raise errors.conflict("pods/binding", pod_name, f"pod {pod_name} has non-empty .spec.schedulingGates")
    new = dict(pod)
    new["spec"] = dict(spec, nodeName=node)
    nmeta = dict(meta)
    if bmeta.get("annotations"):
        nmeta["annotations"] = dict(meta.get("annotations") or {}, **bmeta["annotations"])
    nmeta.pop("resourceVersion", None)
    new["metadata"] = nmeta
    status = dict(pod.get("status") or {})
    status.pop("nominatedNodeName", None)
    conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
    conds.append(
        {"type": "PodScheduled", "status": "True", "lastProbeTime": None, "lastTransitionTime": now_rfc3339()}
    )
    status["conditions"] = conds
    new["status"] = status
    return new
