"""The API's verbs on objects, independent of HTTP: what kube-apiserver's registry and admission do.

``ClusterApi`` implements create/get/list/update/patch/delete and the subresources (status, binding, finalize, scale)
for every served type, with server-owned metadata (uid, resourceVersion, generation, timestamps, managedFields),
per-kind defaults and validation, optimistic concurrency, finalizers and graceful deletion, namespace lifecycle,
CustomResourceDefinitions and the two views of events. The HTTP layer (``apiserver.py``) and in-process components
(the simulated kubelet) both call it, so they see exactly the same semantics.
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import orjson

from kubesched.cluster import errors, events_conv, patch, validation
from kubesched.cluster.resources import ResourceRegistry, ResourceType
from kubesched.cluster.selectors import FieldSelector, LabelSelector
from kubesched.cluster.store import Predicate, Store, Stored, object_key

Obj = dict[str, Any]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
# Kinds whose deletion triggers the garbage collector's search for dependents (ownerReferences). Scanning for
# dependents of every deleted pod would cost O(objects) per delete for nothing: pods own nothing in practice.
OWNER_KINDS = frozenset(
    {"Node", "Deployment", "ReplicaSet", "StatefulSet", "DaemonSet", "ReplicationController", "Job", "CronJob",
     "Service", "ConfigMap", "Secret", "ServiceAccount", "CustomResourceDefinition"}
)
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}


_last_second: list[Any] = [None, ""]  # the last whole second formatted: strftime is slow for every write


def now_rfc3339() -> str:
    second = int(time.time())
    if _last_second[0] != second:
        _last_second[1] = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _last_second[0] = second
    return _last_second[1]  # type: ignore[no-any-return]


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def deepcopy(obj: Any) -> Any:
    # orjson round-trip: several times faster than copy.deepcopy for JSON-shaped data.
    return orjson.loads(orjson.dumps(obj))


def _kind_name(rtype: ResourceType) -> str:
    return rtype.kind


class ClusterApi:
    """Object semantics over a ``Store`` for the types in a ``ResourceRegistry``."""

    def __init__(self, store: Store | None = None, registry: ResourceRegistry | None = None) -> None:
        self.store = store or Store()
        self.registry = registry or ResourceRegistry()
        # Hooks run after a write commits: (rtype, event type, new object or None, old object or None).
        self.observers: list[Callable[[ResourceType, str, Obj | None, Obj | None], None]] = []
        self._ns_type = self.registry.get("", "v1", "namespaces")
        self._pod_type = self.registry.get("", "v1", "pods")
        self._crd_type = self.registry.get("apiextensions.k8s.io", "v1", "customresourcedefinitions")

    # -- boot ----------------------------------------------------------------------------------------------

    def bootstrap(self) -> None:
        """Objects a fresh control plane has: the default namespaces, their service accounts, system priorities."""
        for ns in DEFAULT_NAMESPACES:
            if self._get_stored(self.rtype("", "v1", "namespaces"), None, ns) is None:
                self.create(self.rtype("", "v1", "namespaces"), {"metadata": {"name": ns}}, None)
        pc = self.rtype("scheduling.k8s.io", "v1", "priorityclasses")
        for name, value in SYSTEM_PRIORITY_CLASSES.items():
            if self._get_stored(pc, None, name) is None:
                self.create(
                    pc,
                    {
                        "metadata": {"name": name},
                        "value": value,
                        "description": "Used for system critical pods that must not be moved from their current node.",
                        "preemptionPolicy": "PreemptLowerPriority",
                    },
                    None,
                )

    def rtype(self, group: str, version: str, plural: str) -> ResourceType:
        t = self.registry.get(group, version, plural)
        if t is None:
            raise errors.path_not_found()
        return t

    # -- helpers -------------------------------------------------------------------------------------------

    def _notify(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        for fn in self.observers:
            fn(rtype, etype, new, old)

    def _get_stored(self, rtype: ResourceType, namespace: str | None, name: str) -> Stored | None:
        return self.store.get(rtype.storage_key, (namespace or "", name) if rtype.namespaced else ("", name))

    def _require(self, rtype: ResourceType, namespace: str | None, name: str) -> Stored:
        st = self._get_stored(rtype, namespace, name)
        if st is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        return st

    def _check_namespace_for_create(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        if not rtype.namespaced or self._ns_type is None:
            return
        ns = self.store.get(self._ns_type.storage_key, ("", namespace or ""))
        if ns is None:
            raise errors.not_found("namespaces", namespace or "")
        if ns.obj.get("metadata", {}).get("deletionTimestamp"):
            # NamespaceLifecycle admission: a Forbidden on the object, with a cause naming the namespace.
            resource = errors.qualified(rtype.plural, rtype.group)
            subject = f'{resource} "{name}"' if name else resource
            err = errors.forbidden(
                f"{subject} is forbidden: unable to create new content in namespace {namespace} "
                "because it is being terminated",
                name=name,
                resource=rtype.plural,
                group=rtype.group,
            )
            assert err.details is not None
            err.details["causes"] = [{"reason": "NamespaceTerminating", "message": f"namespace {namespace} is being "
                                      "terminated", "field": "metadata.namespace"}]
            raise err

    def to_view(self, rtype: ResourceType, obj: Obj) -> Obj:
        """The object as this type's API shows it (events.k8s.io/v1 sees converted core events)."""
        if rtype.storage == "core/events" and rtype.group == "events.k8s.io":
            return events_conv.core_to_v1(obj)
        return obj

    def view_converter(self, rtype: ResourceType) -> Callable[[Obj], Obj] | None:
        if rtype.storage == "core/events" and rtype.group == "events.k8s.io":
            return events_conv.core_to_v1
        return None

    def _from_view(self, rtype: ResourceType, obj: Obj) -> Obj:
        if rtype.storage == "core/events" and rtype.group == "events.k8s.io":
            return events_conv.v1_to_core(obj)
        return obj

    def _check_type_meta(self, rtype: ResourceType, obj: Obj) -> None:
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if api_version is not None and api_version != rtype.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rtype.api_version})"
            )
        if kind is not None and kind != rtype.kind:
            raise errors.bad_request(f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})")

    # -- reads ---------------------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Stored:
        return self._require(rtype, namespace, name)

    def predicate(self, rtype: ResourceType, label_selector: str | None, field_selector: str | None) -> Predicate | None:
        ls = LabelSelector.parse(label_selector) if label_selector else None
        fs = FieldSelector.parse(field_selector, rtype) if field_selector else None
        if ls is not None and ls.empty:
            ls = None
        if ls is None and fs is None:
            return None
        if fs is None:
            assert ls is not None
            lsel = ls
            return lambda o: lsel.matches((o.get("metadata") or {}).get("labels"))
        # Field getters read the stored form (events.k8s.io/v1's regarding.* read involvedObject.*): no conversion.
        fsel = fs

        def pred(o: Obj) -> bool:
            if ls is not None and not ls.matches((o.get("metadata") or {}).get("labels")):
                return False
            return fsel.matches(o)

        return pred

    # -- create --------------------------------------------------------------------------------------------

    def create(
        self,
        rtype: ResourceType,
        body: Obj,
        namespace: str | None,
        *,
        field_manager: str | None = None,
        dry_run: bool = False,
        trusted: bool = False,
    ) -> Stored:
        """POST. ``trusted`` skips decoding checks and validation for objects an in-process component built from
        an already-validated template (the simulated kubelet registering thousands of nodes at start-up)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        self._check_type_meta(rtype, body)
        obj = self._from_view(rtype, dict(body))
        meta = dict(obj.get("metadata") or {})
        obj["metadata"] = meta
        obj["apiVersion"] = "v1" if rtype.storage == "core/events" else rtype.api_version
        obj["kind"] = rtype.kind
        if rtype.namespaced:
            body_ns = meta.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request"
                )
            meta["namespace"] = namespace or body_ns or "default"
        else:
            meta.pop("namespace", None)
        requested_name = str(meta.get("name") or "")  # admission errors name the object as the request did
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + "".join(random.choices(GENERATE_NAME_ALPHABET, k=5))

        if not trusted:
            shaped = {**body, "metadata": meta}
            decode_problem = validation.decode_error(rtype, shaped)
            if decode_problem:
                raise errors.bad_request(decode_problem)
            causes = validation.validate_create(rtype, shaped)
            if causes:
                raise errors.invalid(rtype.kind, str(meta.get("name") or ""), causes, rtype.group)
        self._check_namespace_for_create(rtype, meta.get("namespace"), requested_name)
        if self._get_stored(rtype, meta.get("namespace"), meta["name"]) is not None:
            raise errors.already_exists(rtype.plural, meta["name"], rtype.group)

        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        meta["uid"] = str(uuid.uuid4())
        meta["creationTimestamp"] = now_rfc3339()
        if rtype.has_generation or rtype.crd is not None:
            meta["generation"] = 1
        if rtype.status_subresource and rtype.crd is not None:
            obj.pop("status", None)  # CRs with a status subresource ignore status on create

        self._defaults_on_create(rtype, obj)
        if field_manager:
            obj = patch.record_update(None, obj, manager=field_manager, api_version=rtype.api_version,
                                      now=now_rfc3339(), kind=rtype.kind, builtin=rtype.builtin)
        if dry_run:
            return Stored(obj, 0, object_key(obj))
        st = self.store.create(rtype.storage_key, obj)
        self._after_create(rtype, st.obj)
        self._notify(rtype, "ADDED", st.obj, None)
        return st

    def _defaults_on_create(self, rtype: ResourceType, obj: Obj) -> None:
        kind = (rtype.group, rtype.plural)
        if kind == ("", "namespaces"):
            meta = obj["metadata"]
            labels = dict(meta.get("labels") or {})
            labels["kubernetes.io/metadata.name"] = meta["name"]
            meta["labels"] = labels
            spec = dict(obj.get("spec") or {})
            spec.setdefault("finalizers", ["kubernetes"])
            obj["spec"] = spec
            obj["status"] = {"phase": "Active"}
        elif kind == ("", "pods"):
            self._pod_defaults(obj)
        elif kind == ("", "nodes"):
            status = dict(obj.get("status") or {})
            if "capacity" in status and "allocatable" not in status:
                status["allocatable"] = dict(status["capacity"])
            obj["status"] = status
        elif kind == ("apiextensions.k8s.io", "customresourcedefinitions"):
            self._crd_defaults(obj)
        elif kind == ("", "services"):
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
        elif kind in (("apps", "deployments"), ("apps", "replicasets"), ("apps", "statefulsets")):
            spec = dict(obj.get("spec") or {})
            spec.setdefault("replicas", 1)
            obj["spec"] = spec
        elif kind == ("scheduling.k8s.io", "priorityclasses"):
            obj.setdefault("preemptionPolicy", "PreemptLowerPriority")

    def _pod_defaults(self, obj: Obj) -> None:
        spec = dict(obj.get("spec") or {})
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("securityContext", {})
        spec.setdefault("enableServiceLinks", True)
        spec.setdefault("serviceAccountName", "default")
        pcname = spec.get("priorityClassName")
        if pcname:
            pc = self.store.get("scheduling.k8s.io/priorityclasses", ("", pcname))
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
                (st.obj for st in self.store.collection("scheduling.k8s.io/priorityclasses").objects.values()
                 if st.obj.get("globalDefault")),
                None,
            )
            if default_pc is not None:
                spec["priorityClassName"] = default_pc["metadata"]["name"]
                spec["priority"] = int(default_pc.get("value", 0))
            else:
                spec["priority"] = 0
        spec.setdefault("preemptionPolicy", "PreemptLowerPriority")
        tolerations = list(spec.get("tolerations") or [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == key and t.get("effect") in (None, "", "NoExecute") for t in tolerations):
                tolerations.append(
                    {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
                )
        spec["tolerations"] = tolerations
        for field_name in ("containers", "initContainers"):
            if field_name in spec:
                spec[field_name] = [self._container_defaults(c) for c in spec[field_name] or []]
        obj["spec"] = spec
        status = dict(obj.get("status") or {})
        status.setdefault("phase", "Pending")
        status["qosClass"] = _qos_class(spec)
        obj["status"] = status

    @staticmethod
    def _container_defaults(c: Obj) -> Obj:
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

    def _crd_defaults(self, obj: Obj) -> None:
        spec = dict(obj.get("spec") or {})
        names = dict(spec.get("names") or {})
        if names.get("kind"):
            names.setdefault("singular", names["kind"].lower())
            names.setdefault("listKind", names["kind"] + "List")
        spec["names"] = names
        spec.setdefault("conversion", {"strategy": "None"})
        obj["spec"] = spec
        storage = [v["name"] for v in spec.get("versions") or [] if v.get("storage")]
        ts = now_rfc3339()
        obj["status"] = {
            "acceptedNames": {k: v for k, v in names.items()},
            "storedVersions": storage,
            "conditions": [
                {"type": "NamesAccepted", "status": "True", "lastTransitionTime": ts, "reason": "NoConflicts",
                 "message": "no conflicts found"},
                {"type": "Established", "status": "True", "lastTransitionTime": ts,
                 "reason": "InitialNamesAccepted", "message": "the initial names have been accepted"},
            ],
        }

    def _after_create(self, rtype: ResourceType, obj: Obj) -> None:
        if rtype is self._crd_type:
            self._serve_crd(obj)
        elif rtype is self._ns_type:
            sa = self.registry.get("", "v1", "serviceaccounts")
            name = obj["metadata"]["name"]
            if sa is not None and self.store.get(sa.storage_key, (name, "default")) is None:
                # What the controller manager's service-account controller does for every namespace.
                self.create(sa, {"metadata": {"name": "default", "namespace": name}}, name)

    def _serve_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        names = spec["names"]
        for v in spec.get("versions") or []:
            if not v.get("served", True):
                self.registry.remove(spec["group"], v["name"], names["plural"])
                continue
            sub = v.get("subresources") or {}
            subresources = tuple(s for s in ("status", "scale") if s in sub)
            self.registry.add(
                ResourceType(
                    spec["group"],
                    v["name"],
                    names["plural"],
                    names["kind"],
                    spec.get("scope", "Namespaced") == "Namespaced",
                    short_names=tuple(names.get("shortNames") or ()),
                    categories=tuple(names.get("categories") or ()),
                    subresources=subresources,
                    allow_unconditional_update=False,
                    storage=f"{spec['group']}/{names['plural']}",
                    crd=crd,
                    builtin=False,
                )
            )

    def _unserve_crd(self, crd: Obj) -> None:
        spec = crd["spec"]
        for v in spec.get("versions") or []:
            self.registry.remove(spec["group"], v["name"], spec["names"]["plural"])
        self.store.drop_collection(f"{spec['group']}/{spec['names']['plural']}")

    # -- update --------------------------------------------------------------------------------------------

    def update(
        self,
        rtype: ResourceType,
        body: Obj,
        namespace: str | None,
        name: str,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
        create_if_missing: bool = True,
    ) -> tuple[Stored, bool]:
        """PUT. Returns (stored, created)."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        self._check_type_meta(rtype, body)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        old = self._get_stored(rtype, namespace, name)
        if old is None:
            if rtype.allow_create_on_update and subresource is None and create_if_missing:
                obj = dict(body)
                obj["metadata"] = dict(obj.get("metadata") or {}, name=name)
                obj["metadata"].pop("resourceVersion", None)
                return self.create(rtype, obj, namespace, field_manager=field_manager, dry_run=dry_run), True
            raise errors.not_found(rtype.plural, name, rtype.group)
        new = self._from_view(rtype, dict(body))
        rv = (new.get("metadata") or {}).get("resourceVersion")
        if rv:
            if str(rv) != str(old.rv):
                raise errors.stale(rtype.plural, name, rtype.group)
        elif not rtype.allow_unconditional_update and subresource is None:
            raise errors.invalid(
                rtype.kind,
                name,
                [errors.field_invalid("metadata.resourceVersion", 0, "must be specified for an update")],
                rtype.group,
            )
        return self._commit_update(rtype, old, new, subresource=subresource, field_manager=field_manager,
                                   dry_run=dry_run), False

    def _commit_update(
        self,
        rtype: ResourceType,
        old: Stored,
        new: Obj,
        *,
        subresource: str | None,
        field_manager: str | None,
        dry_run: bool = False,
        operation: str = "Update",
    ) -> Stored:
        """Merge server-owned state into ``new`` and store it, unless nothing changed."""
        prev = old.obj
        new = dict(new)
        new["apiVersion"] = prev.get("apiVersion", rtype.api_version)
        new["kind"] = rtype.kind
        meta = dict(new.get("metadata") or {})
        pmeta = prev.get("metadata") or {}
        if subresource == "status":
            # Only .status comes from the request; everything else stays as stored.
            merged = dict(prev)
            if "status" in new:
                merged["status"] = new["status"]
            new = merged
            meta = dict(pmeta)
        elif subresource == "finalize":
            merged = dict(prev)
            merged["spec"] = dict(prev.get("spec") or {}, finalizers=list((new.get("spec") or {}).get("finalizers") or []))
            new = merged
            meta = dict(pmeta)
        else:
            if rtype.status_subresource and "status" in prev:
                new["status"] = prev["status"]
            elif rtype.status_subresource:
                new.pop("status", None)
            # Server-owned metadata cannot be changed by clients.
            for key in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
                if key in pmeta:
                    meta[key] = pmeta[key]
                else:
                    meta.pop(key, None)
            if rtype.namespaced:
                meta["namespace"] = pmeta.get("namespace")
            meta["name"] = pmeta.get("name")
            if pmeta.get("deletionTimestamp"):
                added = set(meta.get("finalizers") or []) - set(pmeta.get("finalizers") or [])
                if added:
                    listed = ", ".join(f'"{f}"' for f in sorted(added))
                    raise errors.invalid(
                        rtype.kind,
                        pmeta.get("name", ""),
                        [errors.field_forbidden("metadata.finalizers",
                                                "no new finalizers can be added if the object is being deleted, "
                                                f"found new finalizers []string{{{listed}}}")],
                        rtype.group,
                    )
        meta.pop("resourceVersion", None)
        new["metadata"] = meta

        if subresource is None:
            decode_problem = validation.decode_error(rtype, new)
            if decode_problem:
                raise errors.bad_request(decode_problem)
            causes = validation.validate_update(rtype, new, prev)
            if causes:
                raise errors.invalid(rtype.kind, pmeta.get("name", ""), causes, rtype.group)
            self._update_side_rules(rtype, new, prev)

        if (rtype.has_generation or rtype.crd is not None) and subresource is None:
            if _spec_changed(rtype, new, prev):
                meta["generation"] = int(pmeta.get("generation") or 1) + 1
        if field_manager and operation == "Update":
            new = patch.record_update(prev, new, manager=field_manager, api_version=rtype.api_version,
                                      now=now_rfc3339(), kind=rtype.kind, builtin=rtype.builtin,
                                      subresource=subresource or "")
        if _without_rv(new) == _without_rv(prev):
            return old  # a no-op write: no new revision, no event
        if dry_run:
            return Stored(new, old.rv, old.key)
        # Deletion completes when the last finalizer goes away from an object already marked for deletion.
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not int(meta.get("deletionGracePeriodSeconds") or 0)
            and not _ns_finalizers_pending(rtype, new)
        ):
            st = self.store.update(rtype.storage_key, new, old)
            self._notify(rtype, "MODIFIED", st.obj, prev)
            return self._remove(rtype, st)
        st = self.store.update(rtype.storage_key, new, old)
        if rtype is self._crd_type:
            self._serve_crd(st.obj)
        self._notify(rtype, "MODIFIED", st.obj, prev)
        return st

    def _update_side_rules(self, rtype: ResourceType, new: Obj, prev: Obj) -> None:
        if rtype is self._ns_type:
            new["status"] = prev.get("status", {"phase": "Active"})
            spec = dict(new.get("spec") or {})
            spec["finalizers"] = (prev.get("spec") or {}).get("finalizers", [])
            new["spec"] = spec
        elif rtype is self._crd_type:
            new["status"] = prev.get("status")

    # -- patch ---------------------------------------------------------------------------------------------

    def patch(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        patch_body: Any,
        content_type: str,
        *,
        subresource: str | None = None,
        field_manager: str | None = None,
        force: bool = False,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """PATCH with the type the Content-Type names. Returns (stored, created) — apply may create."""
        ctype = content_type.split(";")[0].strip().lower()
        old = self._get_stored(rtype, namespace, name)
        if ctype == "application/apply-patch+yaml":
            if not field_manager:
                raise errors.bad_request("PATCH requests with the apply-patch content type must specify a field manager")
            if not isinstance(patch_body, dict):
                raise errors.bad_request("the apply patch must be an object")
            self._check_type_meta(rtype, patch_body)
            applied_name = (patch_body.get("metadata") or {}).get("name")
            if applied_name and applied_name != name:
                raise errors.bad_request(
                    f"the name of the object ({applied_name}) does not match the name on the URL ({name})"
                )
            live = self.to_view(rtype, old.obj) if old is not None else None
            if rtype.status_subresource and subresource is None:
                patch_body = {k: v for k, v in patch_body.items() if k != "status"}
            elif subresource == "status":
                patch_body = {k: v for k, v in patch_body.items() if k in ("apiVersion", "kind", "metadata", "status")}
            result = patch.server_side_apply(
                live,
                patch_body,
                manager=field_manager,
                force=force,
                kind=rtype.kind,
                api_version=rtype.api_version,
                now=now_rfc3339(),
                builtin=rtype.builtin,
                subresource=subresource or "",
            )
            if old is None:
                if subresource is not None:
                    raise errors.not_found(rtype.plural, name, rtype.group)
                result.setdefault("metadata", {})["name"] = name
                return self.create(rtype, result, namespace, dry_run=dry_run), True
            return self._commit_update(rtype, old, self._from_view(rtype, result), subresource=subresource,
                                       field_manager=field_manager, dry_run=dry_run, operation="Apply"), False

        if old is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        current = self.to_view(rtype, old.obj)
        if ctype == "application/json-patch+json":
            if not isinstance(patch_body, list):
                raise errors.bad_request("json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp")
            new = patch.json_patch(current, patch_body)
        elif ctype == "application/merge-patch+json":
            if not isinstance(patch_body, dict):
                raise errors.bad_request("the merge patch must be an object")
            new = patch.merge_patch(current, patch_body)
        elif ctype == "application/strategic-merge-patch+json":
            if not rtype.builtin:
                raise errors.unsupported_media_type(ctype)
            if not isinstance(patch_body, dict):
                raise errors.bad_request("the strategic merge patch must be an object")
            new = patch.strategic_merge_patch(current, patch_body, rtype.kind)
        else:
            raise errors.unsupported_media_type(ctype)
        # A resourceVersion in the patch is a precondition.
        want_rv = (new.get("metadata") or {}).get("resourceVersion")
        if want_rv and str(want_rv) != str(old.rv):
            raise errors.stale(rtype.plural, name, rtype.group)
        if rtype.status_subresource and subresource is None:
            new["status"] = old.obj.get("status")
        return self._commit_update(rtype, old, self._from_view(rtype, new), subresource=subresource,
                                   field_manager=field_manager, dry_run=dry_run), False

    # -- delete --------------------------------------------------------------------------------------------

    def delete(
        self,
        rtype: ResourceType,
        namespace: str | None,
        name: str,
        options: Obj | None = None,
        *,
        dry_run: bool = False,
    ) -> tuple[Stored, bool]:
        """DELETE. Returns (the object as it now is or was last, removed-now)."""
        options = options or {}
        old = self._require(rtype, namespace, name)
        pre = options.get("preconditions") or {}
        meta = old.obj.get("metadata") or {}
        # Upstream's BeforeDelete names the kind, not the resource, in these conflicts.
        if pre.get("uid") and pre["uid"] != meta.get("uid"):
            raise errors.conflict(
                rtype.kind,
                name,
                f"the UID in the precondition ({pre['uid']}) does not match the UID in record ({meta.get('uid')}). "
                "The object might have been deleted and then recreated",
                rtype.group,
            )
        if pre.get("resourceVersion") and str(pre["resourceVersion"]) != str(old.rv):
            raise errors.conflict(
                rtype.kind,
                name,
                f"the ResourceVersion in the precondition ({pre['resourceVersion']}) does not match the "
                f"ResourceVersion in record ({old.rv}). The object might have been modified",
                rtype.group,
            )
        if dry_run:
            return old, False

        finalizers = list(meta.get("finalizers") or [])
        policy = options.get("propagationPolicy")
        if options.get("orphanDependents") is True and policy is None:
            policy = "Orphan"
        if policy == "Foreground" and "foregroundDeletion" not in finalizers:
            finalizers.append("foregroundDeletion")
        elif policy == "Orphan" and "orphan" not in finalizers:
            finalizers.append("orphan")

        grace = self._grace_period(rtype, old.obj, options)
        if rtype is self._ns_type:
            return self._delete_namespace(old), False
        if rtype is self._crd_type:
            self._unserve_crd(old.obj)
            return self._remove(rtype, old), True

        if finalizers or grace > 0:
            if meta.get("deletionTimestamp"):
                # Already terminating: a shorter grace period may still be applied.
                cur = meta.get("deletionGracePeriodSeconds")
                if grace == 0 and not finalizers:
                    return self._remove(rtype, old), True
                if cur is None or grace >= int(cur):
                    return old, False
            new = dict(old.obj)
            nmeta = dict(meta)
            nmeta["deletionTimestamp"] = _rfc3339_in(grace)
            nmeta["deletionGracePeriodSeconds"] = grace
            nmeta["finalizers"] = finalizers
            if not finalizers:
                nmeta.pop("finalizers")
            new["metadata"] = nmeta
            nmeta.pop("resourceVersion", None)
            st = self.store.update(rtype.storage_key, new, old)
            self._notify(rtype, "MODIFIED", st.obj, old.obj)
            if "orphan" in finalizers or "foregroundDeletion" in finalizers:
                return self._propagate_deletion(rtype, st)
            return st, False
        return self._remove(rtype, old), True

    def _grace_period(self, rtype: ResourceType, obj: Obj, options: Obj) -> int:
        if rtype is not self._pod_type:
            return 0
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

    def _remove(self, rtype: ResourceType, st: Stored) -> Stored:
        gone = self.store.delete(rtype.storage_key, st)
        last = gone.obj  # decoded once: the store keeps deleted versions serialised
        self._notify(rtype, "DELETED", None, last)
        # What controllers would do next, done at once: collect the dependents (background cascading deletion),
        # let a foreground-deleting owner go once its last blocking dependent is gone, finalize an emptied
        # terminating namespace.
        meta = last.get("metadata") or {}
        if rtype.kind in OWNER_KINDS or rtype.crd is not None:
            self._collect_dependents(meta.get("uid"))
        if meta.get("ownerReferences"):
            self._resume_foreground_owners(last)
        if rtype.namespaced and self._ns_type is not None and not self.store.holds_namespace(meta.get("namespace", "")):
            ns = self.store.get(self._ns_type.storage_key, ("", meta.get("namespace", "")))
            if ns is not None and (ns.obj.get("metadata") or {}).get("deletionTimestamp"):
                self.sweep_namespace(meta.get("namespace", ""))
        return gone

    def finish_graceful_delete(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        """What a kubelet does once a terminating pod's containers stopped: the final delete with grace 0."""
        st = self._get_stored(rtype, namespace, name)
        if st is None:
            return
        meta = st.obj.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            return
        if meta.get("finalizers"):
            new = dict(st.obj)
            nmeta = dict(meta, deletionGracePeriodSeconds=0)
            new["metadata"] = nmeta
            if _without_rv(new) != _without_rv(st.obj):
                st2 = self.store.update(rtype.storage_key, new, st)
                self._notify(rtype, "MODIFIED", st2.obj, st.obj)
            return
        self._remove(rtype, st)

    def _dependents(self, owner_uid: str) -> list[tuple[ResourceType, Stored]]:
        """Objects with an ownerReference to ``owner_uid`` (a scan: owners are deleted rarely)."""
        found: list[tuple[ResourceType, Stored]] = []
        seen: set[str] = set()
        for rtype in self.registry.all():
            if rtype.storage_key in seen or "delete" not in rtype.verbs:
                continue
            seen.add(rtype.storage_key)
            for st in list(self.store.collection(rtype.storage_key).objects.values()):
                refs = (st.obj.get("metadata") or {}).get("ownerReferences") or []
                if any(ref.get("uid") == owner_uid for ref in refs):
                    found.append((rtype, st))
        return found

    def _owner_of(self, dependent: Obj, ref: Obj) -> tuple[ResourceType, Stored] | None:
        """The live object an ownerReference points at (same namespace, or cluster-scoped), if its uid matches."""
        otype = self.registry.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if otype is None:
            return None
        ns = (dependent.get("metadata") or {}).get("namespace") if otype.namespaced else None
        st = self._get_stored(otype, ns, str(ref.get("name", "")))
        if st is None or (st.obj.get("metadata") or {}).get("uid") != ref.get("uid"):
            return None
        return otype, st

    def _collect_dependents(self, owner_uid: str | None) -> None:
        """Background cascading deletion: what the garbage collector does once an owner is gone.

        A dependent that still has another live owner loses only the dangling reference; one with none left
        is deleted.
        """
        if not owner_uid:
            return
        for rtype, st in self._dependents(owner_uid):
            cur = self.store.get(rtype.storage_key, st.key)
            if cur is None:
                continue
            refs = (cur.obj.get("metadata") or {}).get("ownerReferences") or []
            others = [ref for ref in refs if ref.get("uid") != owner_uid]
            try:
                if any(self._owner_of(cur.obj, ref) is not None for ref in others):
                    self._set_owner_references(rtype, cur, others)
                else:
                    self.delete(rtype, st.key[0], st.key[1], {"propagationPolicy": "Background"})
            except errors.ApiError:
                pass

    def _set_owner_references(self, rtype: ResourceType, st: Stored, refs: list[Obj]) -> Stored:
        new = dict(st.obj)
        nmeta = dict(st.obj.get("metadata") or {})
        if refs:
            nmeta["ownerReferences"] = refs
        else:
            nmeta.pop("ownerReferences", None)
        new["metadata"] = nmeta
        return self._commit_update(rtype, st, new, subresource=None, field_manager=None)

    def _propagate_deletion(self, rtype: ResourceType, st: Stored) -> tuple[Stored, bool]:
        """The garbage collector's part of an Orphan or Foreground deletion, done at once.

        Orphan: drop the owner's references from its dependents, then the ``orphan`` finalizer. Foreground: delete
        the dependents, then drop ``foregroundDeletion`` once no dependent with ``blockOwnerDeletion`` remains
        (a later removal of the last one resumes this). Dropping the last finalizer completes the deletion.
        Returns (the object as it now is or was last, removed).
        """
        meta = st.obj.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        finalizers = list(meta.get("finalizers") or [])
        can_own = rtype.kind in OWNER_KINDS or rtype.crd is not None
        if "orphan" in finalizers:
            for dtype, dep in self._dependents(uid) if can_own else []:
                refs = (dep.obj.get("metadata") or {}).get("ownerReferences") or []
                self._set_owner_references(dtype, dep, [ref for ref in refs if ref.get("uid") != uid])
            return self._drop_finalizer(rtype, st, "orphan")
        if "foregroundDeletion" in finalizers:
            dependents = self._dependents(uid) if can_own else []
            for dtype, dep in dependents:
                if not (dep.obj.get("metadata") or {}).get("deletionTimestamp"):
                    try:
                        self.delete(dtype, dep.key[0], dep.key[1], {"propagationPolicy": "Background"})
                    except errors.ApiError:
                        pass
            for _, dep in self._dependents(uid) if dependents else []:
                refs = (dep.obj.get("metadata") or {}).get("ownerReferences") or []
                if any(ref.get("uid") == uid and ref.get("blockOwnerDeletion") for ref in refs):
                    cur = self._get_stored(rtype, st.key[0] or None, st.key[1])
                    return (cur or st), cur is None
            return self._drop_finalizer(rtype, st, "foregroundDeletion")
        return st, False

    def _drop_finalizer(self, rtype: ResourceType, st: Stored, finalizer: str) -> tuple[Stored, bool]:
        cur = self._get_stored(rtype, st.key[0] or None, st.key[1])
        if cur is None or (cur.obj.get("metadata") or {}).get("uid") != (st.obj.get("metadata") or {}).get("uid"):
            return st, True
        new = dict(cur.obj)
        nmeta = dict(cur.obj.get("metadata") or {})
        remaining = [f for f in nmeta.get("finalizers") or [] if f != finalizer]
        if remaining:
            nmeta["finalizers"] = remaining
        else:
            nmeta.pop("finalizers", None)
        new["metadata"] = nmeta
        out = self._commit_update(rtype, cur, new, subresource=None, field_manager=None)
        return out, self._get_stored(rtype, st.key[0] or None, st.key[1]) is None

    def _resume_foreground_owners(self, removed: Obj) -> None:
        """A blocking dependent went away: an owner waiting for it in foreground deletion may now go too."""
        for ref in (removed.get("metadata") or {}).get("ownerReferences") or []:
            if not ref.get("blockOwnerDeletion"):
                continue
            owner = self._owner_of(removed, ref)
            if owner is None:
                continue
            otype, ost = owner
            ometa = ost.obj.get("metadata") or {}
            if ometa.get("deletionTimestamp") and "foregroundDeletion" in (ometa.get("finalizers") or []):
                self._propagate_deletion(otype, ost)

    def _delete_namespace(self, old: Stored) -> Stored:
        """Mark the namespace Terminating, delete its content, then finalize it (the namespace controller's job)."""
        assert self._ns_type is not None
        meta = old.obj.get("metadata") or {}
        if not meta.get("deletionTimestamp"):
            new = dict(old.obj)
            new["metadata"] = dict(meta, deletionTimestamp=now_rfc3339(), deletionGracePeriodSeconds=0)
            new["metadata"].pop("resourceVersion", None)
            new["status"] = {
                "phase": "Terminating",
                "conditions": [
                    {"type": "NamespaceDeletionContentFailure", "status": "False", "reason": "ContentDeleted",
                     "message": "All content successfully deleted, may be waiting on finalization",
                     "lastTransitionTime": now_rfc3339()},
                ],
            }
            old = self.store.update(self._ns_type.storage_key, new, old)
            self._notify(self._ns_type, "MODIFIED", old.obj, None)
        self.sweep_namespace(meta["name"])
        return self.store.get(self._ns_type.storage_key, ("", meta["name"])) or old

    def sweep_namespace(self, name: str) -> None:
        """Delete what is left in a terminating namespace; finalize it once empty."""
        assert self._ns_type is not None
        remaining = 0
        seen: set[str] = set()
        for rtype in self.registry.all():
            if not rtype.namespaced or rtype.storage_key in seen or "delete" not in rtype.verbs:
                continue
            seen.add(rtype.storage_key)
            col = self.store.collection(rtype.storage_key)
            for st in list(col.iter_objects(name)):
                try:
                    _, removed = self.delete(rtype, name, st.key[1], {"propagationPolicy": "Background"})
                except errors.ApiError:
                    removed = False
                if not removed:
                    remaining += 1
        if remaining:
            return
        ns = self.store.get(self._ns_type.storage_key, ("", name))
        if ns is None or not (ns.obj.get("metadata") or {}).get("deletionTimestamp"):
            return
        spec_fin = [f for f in (ns.obj.get("spec") or {}).get("finalizers") or [] if f != "kubernetes"]
        if spec_fin != list((ns.obj.get("spec") or {}).get("finalizers") or []):
            new = dict(ns.obj)
            new["spec"] = dict(ns.obj.get("spec") or {}, finalizers=spec_fin)
            new["metadata"] = dict(ns.obj["metadata"])
            new["metadata"].pop("resourceVersion", None)
            ns = self.store.update(self._ns_type.storage_key, new, ns)
            self._notify(self._ns_type, "MODIFIED", ns.obj, None)
        if not spec_fin and not (ns.obj.get("metadata") or {}).get("finalizers"):
            self._remove(self._ns_type, ns)

    # -- subresources --------------------------------------------------------------------------------------

    def bind(self, namespace: str, name: str, binding: Obj, *, url_name: str | None = None) -> Obj:
        """POST pods/{name}/binding (and the legacy namespaced ``bindings``), as upstream's BindingREST."""
        assert self._pod_type is not None
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
        st = self._require(self._pod_type, namespace, pod_name)
        pod = st.obj
        meta = pod.get("metadata") or {}
        # Preconditions are checked by storage, whose failure upstream reports as a Conflict on pods.
        storage_failure = f"StorageError: invalid object, Code: 4, Key: /registry/pods/{namespace}/{pod_name}, " \
                          "ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: "
        if bmeta.get("uid") and bmeta["uid"] != meta.get("uid"):
            raise errors.conflict(
                "pods", pod_name,
                f"{storage_failure}UID in precondition: {bmeta['uid']}, UID in object meta: {meta.get('uid')}",
            )
        if bmeta.get("resourceVersion") and str(bmeta["resourceVersion"]) != str(st.rv):
            raise errors.conflict(
                "pods", pod_name,
                f"{storage_failure}ResourceVersion in precondition: {bmeta['resourceVersion']}, "
                f"ResourceVersion in object meta: {st.rv}",
            )
        spec = pod.get("spec") or {}
        if meta.get("deletionTimestamp"):
            raise errors.conflict("pods/binding", pod_name, f"pod {pod_name} is being deleted, cannot be assigned to a host")
        if spec.get("nodeName"):
            raise errors.conflict(
                "pods/binding", pod_name, f'pod {pod_name} is already assigned to node "{spec["nodeName"]}"'
            )
        if spec.get("schedulingGates"):
            raise errors.conflict("pods/binding", pod_name, f"pod {pod_name} has non-empty .spec.schedulingGates")
        new = dict(pod)
        new["spec"] = dict(spec, nodeName=target["name"])
        nmeta = dict(meta)
        if bmeta.get("annotations"):
            nmeta["annotations"] = dict(meta.get("annotations") or {}, **bmeta["annotations"])
        nmeta.pop("resourceVersion", None)
        new["metadata"] = nmeta
        status = dict(pod.get("status") or {})
        status.pop("nominatedNodeName", None)
        conds = [c for c in status.get("conditions") or [] if c.get("type") != "PodScheduled"]
        conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                      "lastTransitionTime": now_rfc3339()})
        status["conditions"] = conds
        new["status"] = status
        st2 = self.store.update(self._pod_type.storage_key, new, st)
        self._notify(self._pod_type, "MODIFIED", st2.obj, pod)
        return errors.success(201)

    def scale_of(self, rtype: ResourceType, obj: Obj) -> Obj:
        spec_path, status_path, selector_path = ".spec.replicas", ".status.replicas", ".status.selector"
        if rtype.crd is not None:
            for v in rtype.crd["spec"].get("versions") or []:
                if v["name"] == rtype.version:
                    sc = (v.get("subresources") or {}).get("scale") or {}
                    spec_path = sc.get("specReplicasPath", spec_path)
                    status_path = sc.get("statusReplicasPath", status_path)
                    selector_path = sc.get("labelSelectorPath", "")
        meta = obj.get("metadata") or {}
        scale: Obj = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": _dig(obj, spec_path) or 0},
            "status": {"replicas": _dig(obj, status_path) or 0},
        }
        sel = _dig(obj, selector_path) if selector_path else None
        if rtype.crd is None:
            ls = (obj.get("spec") or {}).get("selector") or {}
            sel = ",".join(f"{k}={v}" for k, v in (ls.get("matchLabels") or {}).items()) if isinstance(ls, dict) else ls
        if sel:
            scale["status"]["selector"] = sel
        return scale

    def update_scale(self, rtype: ResourceType, namespace: str | None, name: str, scale: Obj) -> Obj:
        old = self._require(rtype, namespace, name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid("Scale", name, [errors.field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")], "autoscaling")
        want_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if want_rv and str(want_rv) != str(old.rv):
            raise errors.stale(rtype.plural, name, rtype.group)
        path = ".spec.replicas"
        if rtype.crd is not None:
            for v in rtype.crd["spec"].get("versions") or []:
                if v["name"] == rtype.version:
                    path = ((v.get("subresources") or {}).get("scale") or {}).get("specReplicasPath", path)
        new = deepcopy(old.obj)
        _set(new, path, replicas)
        st = self._commit_update(rtype, old, new, subresource=None, field_manager=None)
        return self.scale_of(rtype, st.obj)


# -- small helpers ------------------------------------------------------------------------------------------


def _without_rv(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not meta or "resourceVersion" not in meta:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in meta.items() if k not in ("resourceVersion", "managedFields")}
    return out


def _spec_changed(rtype: ResourceType, new: Obj, prev: Obj) -> bool:
    skip = {"metadata", "status"} if (rtype.status_subresource or rtype.crd is None) else {"metadata"}
    if rtype.crd is None:
        skip = {"metadata", "status"}
    keys = (set(new) | set(prev)) - skip - {"apiVersion", "kind"}
    return any(new.get(k) != prev.get(k) for k in keys)


def _ns_finalizers_pending(rtype: ResourceType, obj: Obj) -> bool:
    return rtype.group == "" and rtype.plural == "namespaces" and bool((obj.get("spec") or {}).get("finalizers"))


def _rfc3339_in(seconds: int) -> str:
    return datetime.fromtimestamp(time.time() + seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _qos_class(spec: Obj) -> str:
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


def _dig(obj: Obj, path: str) -> Any:
    cur: Any = obj
    for part in path.strip(".").split("."):
        if not isinstance(cur, dict):
            return None
        cur = cur.get(part)
    return cur


def _set(obj: Obj, path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value
