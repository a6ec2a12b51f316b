"""Services: type, session affinity, a cluster IP and port defaults; names are RFC 1123 labels (1.36)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from kubesched.apimachinery.validation import name_is_dns_label
from kubesched.cluster import validation
from kubesched.cluster.kinds.strategy import Cause, Strategy
from kubesched.cluster.resources import Obj, ResourceType

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi


class ServiceStrategy(Strategy):
    owns_dependents = True  # EndpointSlices
    # RelaxedServiceNameValidation (beta and on by default in 1.36).
    name_check = staticmethod(name_is_dns_label)

    def validate_object(self, rtype: ResourceType, obj: Obj) -> list[Cause]:
        return super().validate_object(rtype, obj) + validation.validate_service(obj)

    def validate_update(self, rtype: ResourceType, new: Obj, old: Obj) -> list[Cause]:
        return super().validate_update(rtype, new, old) + validation.validate_service(new)

    def prepare_for_create(self, api: ClusterApi, rtype: ResourceType, obj: Obj) -> None:
        spec = dict(obj.get("spec") or {})
        spec.setdefault("type", "ClusterIP")
        spec.setdefault("sessionAffinity", "None")
        if spec.get("type") != "ExternalName" and "clusterIP" not in spec:
            n = random.randint(1, 65000)
            spec["clusterIP"] = f"10.96.{n // 256}.{n % 256}"
            spec["clusterIPs"] = [spec["clusterIP"]]
        ports = []
        for p in spec.get("ports") or []:
            p = dict(p)
            p.setdefault("protocol", "TCP")
            p.setdefault("targetPort", p.get("port"))
            ports.append(p)
        if ports:
            spec["ports"] = ports
        obj["spec"] = spec


STRATEGY = ServiceStrategy()
