"""What the ResourceClaim controller does, done offline for ``simulate``: claims from a pending pod's templates.

The claim is named as the controller names it (``<pod>-<claim>-<5 characters>``), the characters taken from a
hash of the pod's uid so that a simulation repeats; it is added to ``DraObjects`` and recorded in the pod's
``status.resourceClaimStatuses``. A template that is not in the cluster file leaves the pod as it is (it then
waits at PreEnqueue, as in a cluster).
"""

from __future__ import annotations

import hashlib
from typing import Any

from kubesched.scheduler.dra.objects import DraObjects

_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # the API server's generateName alphabet
POD_CLAIM_NAME_ANNOTATION = "resource.kubernetes.io/pod-claim-name"


def _suffix(seed: str) -> str:
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(_ALPHABET[b % len(_ALPHABET)] for b in digest[:5])


def instantiate_claims(objects: DraObjects, pod: dict[str, Any]) -> dict[str, Any]:
    """``pod`` with claims created for its templates (the same object when there is nothing to do)."""
    spec = pod.get("spec") or {}
    wanted = [pc for pc in spec.get("resourceClaims") or () if pc.get("resourceClaimTemplateName")]
    if not wanted:
        return pod
    meta = pod.get("metadata") or {}
    ns, name, uid = (
        str(meta.get("namespace") or "default"),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )
    statuses = list((pod.get("status") or {}).get("resourceClaimStatuses") or ())
    recorded = {s.get("name") for s in statuses}
    added = False
    for pc in wanted:
        if pc.get("name") in recorded:
            continue
        template = objects.template(ns, str(pc["resourceClaimTemplateName"]))
        if template is None:
            continue
        claim_name = f"{name}-{pc.get('name')}"[:57] + "-" + _suffix(f"{uid}/{ns}/{name}/{pc.get('name')}")
        tmeta = (template.get("spec") or {}).get("metadata") or {}
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "name": claim_name,
                "namespace": ns,
                "labels": dict(tmeta.get("labels") or {}),
                "annotations": {
                    **(tmeta.get("annotations") or {}),
                    POD_CLAIM_NAME_ANNOTATION: pc.get("name"),
                },
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": name, "uid": uid, "controller": True}
                ],
            },
            "spec": (template.get("spec") or {}).get("spec") or {},
        }
        objects.upsert("ResourceClaim", claim)
        statuses.append({"name": pc.get("name"), "resourceClaimName": claim_name})
        added = True
    if not added:
        return pod
    return {**pod, "status": {**(pod.get("status") or {}), "resourceClaimStatuses": statuses}}


__all__ = ["instantiate_claims"]
