"""The API's verbs on objects, independent of HTTP: what kube-apiserver's generic registry and admission do.

``ClusterApi`` implements create/get/list/update/patch/delete and the subresources (status, binding, finalize, scale)
for every served type: server-owned metadata (uid, resourceVersion, generation, timestamps, managedFields),
optimistic concurrency, finalizers and graceful deletion, background garbage collection. Where kinds differ
(defaults, validation, status/spec split, namespace lifecycle, CRDs, the two views of events) it asks the kind's
strategy (``kinds/``); objects are read and written only through the ``Storage`` protocol. The HTTP layer
(``apiserver.py``) and in-process components (the simulated kubelet) both call it, so they see exactly the same
semantics.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable
from typing import Any

import orjson

from kubesched.apimachinery.timefmt import format_rfc3339, now_micro, now_rfc3339
from kubesched.cluster import errors, patch, schema
from kubesched.cluster.kinds import Strategy, bindings, namespaces, strategy_for
from kubesched.cluster.kinds.customresources import dig
from kubesched.cluster.resources import ResourceRegistry, ResourceType
from kubesched.cluster.selectors import FieldSelector, LabelSelector
from kubesched.cluster.storage import MemoryStorage, Storage
from kubesched.cluster.storage.interface import Predicate, Stored, object_key

Obj = dict[str, Any]

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
GENERATE_NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2000001000, "system-cluster-critical": 2000000000}
# etcd's default --max-request-bytes: kube-apiserver cannot store an object larger than this.
MAX_OBJECT_BYTES = 1536 * 1024

__all__ = ["ClusterApi", "now_micro", "now_rfc3339"]  # the clock helpers stay importable from here


def new_uid() -> str:
    """A random (version 4) UUID in its canonical text form, as ``str(uuid.uuid4())`` gives it, without building
    a ``UUID`` object (its constructor checks and converts more than a fresh random value needs)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = raw.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def deepcopy(obj: Any) -> Any:
    # orjson round-trip: several times faster than copy.deepcopy for JSON-shaped data.
    return orjson.loads(orjson.dumps(obj))


class ClusterApi:
    """Object semantics over a ``Storage`` for the types in a ``ResourceRegistry``."""

    def __init__(self, store: Storage | None = None, registry: ResourceRegistry | None = None) -> None:
        self.store: Storage = store if store is not None else MemoryStorage()
        self.registry = registry or ResourceRegistry()
        # Hooks run after a write commits: (rtype, event type, new object or None, old object or None).
        self.observers: list[Callable[[ResourceType, str, Obj | None, Obj | None], None]] = []
        self._ns_type = self.registry.get("", "v1", "namespaces")
        self._pod_type = self.registry.get("", "v1", "pods")

    # -- boot ----------------------------------------------------------------------------------------------

    def bootstrap(self) -> None:
        """Objects a fresh control plane has: the default namespaces, their service accounts, system priorities."""
        for ns in DEFAULT_NAMESPACES:
            if self.lookup(self.rtype("", "v1", "namespaces"), None, ns) is None:
                self.create(self.rtype("", "v1", "namespaces"), {"metadata": {"name": ns}}, None)
        pc = self.rtype("scheduling.k8s.io", "v1", "priorityclasses")
        for name, value in SYSTEM_PRIORITY_CLASSES.items():
            if self.lookup(pc, None, name) is None:
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

    def notify(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        """Tell the in-process observers about a committed write."""
        for fn in self.observers:
            fn(rtype, etype, new, old)

    def lookup(self, rtype: ResourceType, namespace: str | None, name: str) -> Stored | None:
        """The stored object, None if there is none (``get`` raises 404 instead)."""
        return self.store.get(rtype.storage_key, (namespace or "", name) if rtype.namespaced else ("", name))

    def _require(self, rtype: ResourceType, namespace: str | None, name: str) -> Stored:
        st = self.lookup(rtype, namespace, name)
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
            err.details["causes"] = [
                {
                    "reason": "NamespaceTerminating",
                    "message": f"namespace {namespace} is being terminated",
                    "field": "metadata.namespace",
                }
            ]
            raise err

    def to_view(self, rtype: ResourceType, obj: Obj) -> Obj:
        """The object as this type's API shows it (events.k8s.io/v1 sees converted core events)."""
        conv = strategy_for(rtype).to_view
        return obj if conv is None else conv(obj)

    def view_converter(self, rtype: ResourceType) -> Callable[[Obj], Obj] | None:
        return strategy_for(rtype).to_view

    def _from_view(self, strategy: Strategy, obj: Obj) -> Obj:
        conv = strategy.from_view
        return obj if conv is None else conv(obj)

    def _check_type_meta(self, rtype: ResourceType, obj: Obj) -> None:
        api_version = obj.get("apiVersion")
        kind = obj.get("kind")
        if api_version is not None and api_version != rtype.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({rtype.api_version})"
            )
        if kind is not None and kind != rtype.kind:
            raise errors.bad_request(
                f"the kind in the data ({kind}) does not match the expected kind ({rtype.kind})"
            )

    def _decode_check(
        self,
        rtype: ResourceType,
        obj: Obj,
        field_validation: str | None,
        warnings: list[str] | None,
        *,
        required: bool = True,
    ) -> list[str]:
        """What kube-apiserver's decoding into the kind's Go type refuses (400), checked against the published
        schema; unknown fields follow ``field_validation`` (None: a trusted in-process caller, not checked).
        Returns the required fields the object lacks, for the kind's 422."""
        if field_validation is None:
            return []
        try:
            if rtype.crd is None:
                checked = schema.check_object(
                    rtype.group, rtype.version, rtype.kind, obj, field_validation, required=required
                )
            else:
                if obj.get("kind") is None or obj.get("apiVersion") is None:
                    # Unstructured decoding takes the kind from the body and insists on it.
                    missing = "Kind" if obj.get("kind") is None else "apiVersion"
                    raise errors.bad_request(f"Object '{missing}' is missing in '{_compact(obj)}'")
                checked = schema.check_metadata(obj.get("metadata"), field_validation)
        except schema.DecodeError as e:
            raise errors.bad_request(
                f'{rtype.kind} in version "{rtype.version}" cannot be handled as a {rtype.kind}: {e}'
            ) from None
        if warnings is not None:
            warnings.extend(checked.warnings)
        return checked.missing

    # -- reads ---------------------------------------------------------------------------------------------

    def get(self, rtype: ResourceType, namespace: str | None, name: str) -> Stored:
        return self._require(rtype, namespace, name)

    def predicate(
        self, rtype: ResourceType, label_selector: str | None, field_selector: str | None
    ) -> Predicate | None:
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
        fmatch = fs.predicate()
        if ls is None:
            return fmatch
        lsel = ls

        def pred(o: Obj) -> bool:
            if not lsel.matches((o.get("metadata") or {}).get("labels")):
                return False
            return fmatch(o)

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
        field_validation: str | None = None,
        warnings: list[str] | None = None,
    ) -> Stored:
        """POST. ``trusted`` skips decoding checks and validation for objects an in-process component built from
        an already-validated template (the simulated kubelet registering thousands of nodes at start-up).
        ``field_validation`` (Strict, Warn, Ignore) checks the body against the kind's published schema, as
        kube-apiserver decodes a client's body; in-process callers leave it None. Warnings are appended to
        ``warnings``."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        self._check_type_meta(rtype, body)
        missing = self._decode_check(rtype, body, field_validation, warnings)
        strategy = strategy_for(rtype)
        obj = self._from_view(strategy, dict(body))
        meta = dict(obj.get("metadata") or {})
        obj["metadata"] = meta
        obj["apiVersion"] = strategy.stored_api_version(rtype)
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
            decode_problem = strategy.decode_error(rtype, shaped)
            if decode_problem:
                raise errors.bad_request(decode_problem)
            causes = _with_required(strategy.validate_create(rtype, shaped), missing)
            if causes:
                raise errors.invalid(rtype.kind, str(meta.get("name") or ""), causes, rtype.group)
        self._check_namespace_for_create(rtype, meta.get("namespace"), requested_name)
        if self.lookup(rtype, meta.get("namespace"), meta["name"]) is not None:
            raise errors.already_exists(rtype.plural, meta["name"], rtype.group)

        for key in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
            meta.pop(key, None)
        meta["uid"] = new_uid()
        meta["creationTimestamp"] = now_rfc3339()
        if strategy.tracks_generation(rtype):
            meta["generation"] = 1
        strategy.prepare_for_create(self, rtype, obj)
        if field_manager:
            obj = patch.record_update(
                None,
                obj,
                manager=field_manager,
                api_version=rtype.api_version,
                now=now_rfc3339(),
                kind=rtype.kind,
                builtin=rtype.builtin,
            )
        if not trusted:
            _check_size(obj)
        if dry_run:
            return Stored(obj, 0, object_key(obj))
        st = self.store.create(rtype.storage_key, obj)
        strategy.after_create(self, rtype, st.obj)
        self.notify(rtype, "ADDED", st.obj, None)
        return st

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
        field_validation: str | None = None,
        warnings: list[str] | None = None,
    ) -> tuple[Stored, bool]:
        """PUT. Returns (stored, created). ``field_validation`` and ``warnings`` as for ``create``."""
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        self._check_type_meta(rtype, body)
        missing = self._decode_check(rtype, body, field_validation, warnings, required=subresource is None)
        body_name = (body.get("metadata") or {}).get("name")
        if body_name and body_name != name:
            raise errors.bad_request(
                f"the name of the object ({body_name}) does not match the name on the URL ({name})"
            )
        old = self.lookup(rtype, namespace, name)
        if old is None:
            if rtype.allow_create_on_update and subresource is None and create_if_missing:
                obj = dict(body)
                obj["metadata"] = dict(obj.get("metadata") or {}, name=name)
                obj["metadata"].pop("resourceVersion", None)
                return self.create(
                    rtype,
                    obj,
                    namespace,
                    field_manager=field_manager,
                    dry_run=dry_run,
                    field_validation=field_validation,
                    warnings=warnings,
                ), True
            raise errors.not_found(rtype.plural, name, rtype.group)
        new = self._from_view(strategy_for(rtype), dict(body))
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
        return self.commit_update(
            rtype,
            old,
            new,
            subresource=subresource,
            field_manager=field_manager,
            dry_run=dry_run,
            missing=missing,
        ), False

    def commit_update(
        self,
        rtype: ResourceType,
        old: Stored,
        new: Obj,
        *,
        subresource: str | None,
        field_manager: str | None,
        dry_run: bool = False,
        operation: str = "Update",
        missing: list[str] | None = None,
    ) -> Stored:
        """Merge server-owned state into ``new`` and store it, unless nothing changed. ``missing``: required
        fields the request's object lacks (from the schema check), reported with the kind's own 422 causes."""
        strategy = strategy_for(rtype)
        prev = old.obj
        new = dict(new)
        new["apiVersion"] = prev.get("apiVersion", rtype.api_version)
        new["kind"] = rtype.kind
        meta = dict(new.get("metadata") or {})
        pmeta = prev.get("metadata") or {}
        # A subresource write takes only its own fields from the request (.status, a namespace's finalizers).
        merged = (
            strategy.subresource_update(rtype, subresource, new, prev) if subresource is not None else None
        )
        if merged is not None:
            new = merged
            meta = dict(pmeta)
        else:
            strategy.main_resource_update(rtype, new, prev)
            # Server-owned metadata cannot be changed by clients.
            for key in (
                "uid",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "generation",
            ):
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
                        [
                            errors.field_forbidden(
                                "metadata.finalizers",
                                "no new finalizers can be added if the object is being deleted, "
                                f"found new finalizers []string{{{listed}}}",
                            )
                        ],
                        rtype.group,
                    )
        meta.pop("resourceVersion", None)
        new["metadata"] = meta

        if subresource is None:
            decode_problem = strategy.decode_error(rtype, new)
            if decode_problem:
                raise errors.bad_request(decode_problem)
            causes = _with_required(strategy.validate_update(rtype, new, prev), missing)
            if causes:
                raise errors.invalid(rtype.kind, pmeta.get("name", ""), causes, rtype.group)
            strategy.prepare_for_update(new, prev)

        if (
            subresource is None
            and strategy.tracks_generation(rtype)
            and strategy.spec_changed(rtype, new, prev)
        ):
            meta["generation"] = int(pmeta.get("generation") or 1) + 1
        if field_manager and operation == "Update":
            new = patch.record_update(
                prev,
                new,
                manager=field_manager,
                api_version=rtype.api_version,
                now=now_rfc3339(),
                kind=rtype.kind,
                builtin=rtype.builtin,
                subresource=subresource or "",
            )
        if _without_rv(new) == _without_rv(prev):
            return old  # a no-op write: no new revision, no event
        _check_size(new)
        if dry_run:
            return Stored(new, old.rv, old.key)
        # Deletion completes when the last finalizer goes away from an object already marked for deletion.
        if (
            meta.get("deletionTimestamp")
            and not meta.get("finalizers")
            and not int(meta.get("deletionGracePeriodSeconds") or 0)
            and not strategy.deletion_blocked(new)
        ):
            st = self.store.update(rtype.storage_key, new, old)
            self.notify(rtype, "MODIFIED", st.obj, prev)
            return self.remove(rtype, st)
        st = self.store.update(rtype.storage_key, new, old)
        strategy.after_update(self, rtype, st.obj)
        self.notify(rtype, "MODIFIED", st.obj, prev)
        return st

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
        field_validation: str | None = None,
        warnings: list[str] | None = None,
    ) -> tuple[Stored, bool]:
        """PATCH with the type the Content-Type names. Returns (stored, created) — apply may create.
        ``field_validation`` and ``warnings`` as for ``create``: the apply configuration, or the patched object,
        is checked against the kind's schema."""
        ctype = content_type.split(";")[0].strip().lower()
        strategy = strategy_for(rtype)
        old = self.lookup(rtype, namespace, name)
        if ctype == "application/apply-patch+yaml":
            if not field_manager:
                raise errors.bad_request(
                    "PATCH requests with the apply-patch content type must specify a field manager"
                )
            if not isinstance(patch_body, dict):
                raise errors.bad_request("the apply patch must be an object")
            self._check_type_meta(rtype, patch_body)
            # An apply configuration is a partial object: typed and without unknown fields, but nothing required.
            self._decode_check(rtype, patch_body, field_validation, warnings, required=False)
            applied_name = (patch_body.get("metadata") or {}).get("name")
            if applied_name and applied_name != name:
                raise errors.bad_request(
                    f"the name of the object ({applied_name}) does not match the name on the URL ({name})"
                )
            live = self.to_view(rtype, old.obj) if old is not None else None
            if rtype.status_subresource and subresource is None:
                patch_body = {k: v for k, v in patch_body.items() if k != "status"}
            elif subresource == "status":
                patch_body = {
                    k: v for k, v in patch_body.items() if k in ("apiVersion", "kind", "metadata", "status")
                }
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
                return self.create(
                    rtype, result, namespace, dry_run=dry_run, field_validation=field_validation
                ), True
            return self.commit_update(
                rtype,
                old,
                self._from_view(strategy, result),
                subresource=subresource,
                field_manager=field_manager,
                dry_run=dry_run,
                operation="Apply",
            ), False

        if old is None:
            raise errors.not_found(rtype.plural, name, rtype.group)
        current = self.to_view(rtype, old.obj)
        if ctype == "application/json-patch+json":
            if not isinstance(patch_body, list):
                raise errors.bad_request(
                    "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
                )
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
            new = patch.strategic_merge_patch(current, patch_body, rtype.kind, rtype.api_version)
        else:
            raise errors.unsupported_media_type(ctype)
        if not isinstance(new, dict):
            raise errors.bad_request("the patched object must be an object")
        self._check_type_meta(rtype, new)
        missing = self._decode_check(rtype, new, field_validation, warnings, required=subresource is None)
        # A resourceVersion in the patch is a precondition.
        want_rv = (new.get("metadata") or {}).get("resourceVersion")
        if want_rv and str(want_rv) != str(old.rv):
            raise errors.stale(rtype.plural, name, rtype.group)
        if rtype.status_subresource and subresource is None:
            new["status"] = old.obj.get("status")
        return self.commit_update(
            rtype,
            old,
            self._from_view(strategy, new),
            subresource=subresource,
            field_manager=field_manager,
            dry_run=dry_run,
            missing=missing,
        ), False

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

        strategy = strategy_for(rtype)
        grace = strategy.grace_period(old.obj, options)
        special = strategy.delete(self, rtype, old)  # namespace lifecycle, CRD
        if special is not None:
            return special

        if finalizers or grace > 0:
            if meta.get("deletionTimestamp"):
                # Already terminating: a shorter grace period may still be applied.
                cur = meta.get("deletionGracePeriodSeconds")
                if grace == 0 and not finalizers:
                    return self.remove(rtype, old), True
                if cur is None or grace >= int(cur):
                    return old, False
            new = dict(old.obj)
            nmeta = dict(meta)
            nmeta["deletionTimestamp"] = format_rfc3339(time.time() + grace)
            nmeta["deletionGracePeriodSeconds"] = grace
            nmeta["finalizers"] = finalizers
            if not finalizers:
                nmeta.pop("finalizers")
            new["metadata"] = nmeta
            nmeta.pop("resourceVersion", None)
            old_obj = old.obj  # read before the store retires it (see ``bind``)
            st = self.store.update(rtype.storage_key, new, old)
            self.notify(rtype, "MODIFIED", st.obj, old_obj)
            if "orphan" in finalizers or "foregroundDeletion" in finalizers:
                return self._propagate_deletion(rtype, st)
            return st, False
        return self.remove(rtype, old), True

    def remove(self, rtype: ResourceType, st: Stored) -> Stored:
        """Delete ``st`` from storage now, then do what controllers would do next."""
        gone = self.store.delete(rtype.storage_key, st)
        last = gone.obj  # decoded once: the store keeps deleted versions serialised
        self.notify(rtype, "DELETED", None, last)
        # What controllers would do next, done at once: collect the dependents (background cascading deletion),
        # let a foreground-deleting owner go once its last blocking dependent is gone, finalize an emptied
        # terminating namespace.
        meta = last.get("metadata") or {}
        if strategy_for(rtype).owns_dependents:
            self._collect_dependents(meta.get("uid"))
        if meta.get("ownerReferences"):
            self._resume_foreground_owners(last)
        if (
            rtype.namespaced
            and self._ns_type is not None
            and not self.store.holds_namespace(meta.get("namespace", ""))
        ):
            ns = self.store.get(self._ns_type.storage_key, ("", meta.get("namespace", "")))
            if ns is not None and (ns.obj.get("metadata") or {}).get("deletionTimestamp"):
                namespaces.sweep_namespace(self, self._ns_type, meta.get("namespace", ""))
        return gone

    def finish_graceful_delete(self, rtype: ResourceType, namespace: str | None, name: str) -> None:
        """What a kubelet does once a terminating pod's containers stopped: the final delete with grace 0."""
        st = self.lookup(rtype, namespace, name)
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
                old_obj = st.obj  # read before the store retires it (see ``bind``)
                st2 = self.store.update(rtype.storage_key, new, st)
                self.notify(rtype, "MODIFIED", st2.obj, old_obj)
            return
        self.remove(rtype, st)

    def _dependents(self, owner_uid: str) -> list[tuple[ResourceType, Stored]]:
        """Objects with an ownerReference to ``owner_uid`` (a scan: owners are deleted rarely)."""
        found: list[tuple[ResourceType, Stored]] = []
        seen: set[str] = set()
        for rtype in self.registry.all():
            if rtype.storage_key in seen or "delete" not in rtype.verbs:
                continue
            seen.add(rtype.storage_key)
            for st in self.store.scan(rtype.storage_key):
                if any(ref.get("uid") == owner_uid for ref in owner_references(st.obj)):
                    found.append((rtype, st))
        return found

    def _owner_of(self, dependent: Obj, ref: Obj) -> tuple[ResourceType, Stored] | None:
        """The live object an ownerReference points at (same namespace, or cluster-scoped), if its uid matches."""
        otype = self.registry.by_kind(str(ref.get("apiVersion", "")), str(ref.get("kind", "")))
        if otype is None:
            return None
        ns = (dependent.get("metadata") or {}).get("namespace") if otype.namespaced else None
        st = self.lookup(otype, ns, str(ref.get("name", "")))
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
            others = [ref for ref in owner_references(cur.obj) if ref.get("uid") != owner_uid]
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
        return self.commit_update(rtype, st, new, subresource=None, field_manager=None)

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
        can_own = strategy_for(rtype).owns_dependents
        if "orphan" in finalizers:
            for dtype, dep in self._dependents(uid) if can_own else []:
                refs = owner_references(dep.obj)
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
                refs = owner_references(dep.obj)
                if any(ref.get("uid") == uid and ref.get("blockOwnerDeletion") for ref in refs):
                    cur = self.lookup(rtype, st.key[0] or None, st.key[1])
                    return (cur or st), cur is None
            return self._drop_finalizer(rtype, st, "foregroundDeletion")
        return st, False

    def _drop_finalizer(self, rtype: ResourceType, st: Stored, finalizer: str) -> tuple[Stored, bool]:
        cur = self.lookup(rtype, st.key[0] or None, st.key[1])
        if cur is None or (cur.obj.get("metadata") or {}).get("uid") != (st.obj.get("metadata") or {}).get(
            "uid"
        ):
            return st, True
        new = dict(cur.obj)
        nmeta = dict(cur.obj.get("metadata") or {})
        remaining = [f for f in nmeta.get("finalizers") or [] if f != finalizer]
        if remaining:
            nmeta["finalizers"] = remaining
        else:
            nmeta.pop("finalizers", None)
        new["metadata"] = nmeta
        out = self.commit_update(rtype, cur, new, subresource=None, field_manager=None)
        return out, self.lookup(rtype, st.key[0] or None, st.key[1]) is None

    def _resume_foreground_owners(self, removed: Obj) -> None:
        """A blocking dependent went away: an owner waiting for it in foreground deletion may now go too."""
        for ref in owner_references(removed):
            if not ref.get("blockOwnerDeletion"):
                continue
            owner = self._owner_of(removed, ref)
            if owner is None:
                continue
            otype, ost = owner
            ometa = ost.obj.get("metadata") or {}
            if ometa.get("deletionTimestamp") and "foregroundDeletion" in (ometa.get("finalizers") or []):
                self._propagate_deletion(otype, ost)

    def sweep_namespace(self, name: str) -> None:
        """Delete what is left in a terminating namespace; finalize it once empty."""
        assert self._ns_type is not None
        namespaces.sweep_namespace(self, self._ns_type, name)

    # -- subresources --------------------------------------------------------------------------------------

    def bind(
        self,
        namespace: str,
        name: str,
        binding: Obj,
        *,
        url_name: str | None = None,
        field_validation: str | None = None,
        warnings: list[str] | None = None,
    ) -> Obj:
        """POST pods/{name}/binding (and the legacy namespaced ``bindings``), as upstream's BindingREST."""
        assert self._pod_type is not None
        if field_validation is not None and isinstance(binding, dict):
            try:
                checked = schema.check_object("", "v1", "Binding", binding, field_validation, required=False)
            except schema.DecodeError as e:
                raise errors.bad_request(
                    f'Binding in version "v1" cannot be handled as a Binding: {e}'
                ) from None
            if warnings is not None:
                warnings.extend(checked.warnings)
        pod_name, node = bindings.pod_name_of(binding, url_name)
        st = self._require(self._pod_type, namespace, pod_name)
        new = bindings.bound_pod(st, namespace, pod_name, binding, node)
        # The old version as it was read: once replaced, the store keeps it only as bytes (``Stored.retire``),
        # and reading ``st.obj`` afterwards would decode the whole pod again for the observers.
        old_obj = st.obj
        st2 = self.store.update(self._pod_type.storage_key, new, st)
        self.notify(self._pod_type, "MODIFIED", st2.obj, old_obj)
        return errors.success(201)

    def scale_of(self, rtype: ResourceType, obj: Obj) -> Obj:
        strategy = strategy_for(rtype)
        spec_path, status_path = strategy.scale_paths(rtype)
        meta = obj.get("metadata") or {}
        scale: Obj = {
            "kind": "Scale",
            "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": dig(obj, spec_path) or 0},
            "status": {"replicas": dig(obj, status_path) or 0},
        }  # fmt: skip
        sel = strategy.scale_selector(rtype, obj)
        if sel:
            scale["status"]["selector"] = sel
        return scale

    def update_scale(self, rtype: ResourceType, namespace: str | None, name: str, scale: Obj) -> Obj:
        old = self._require(rtype, namespace, name)
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or replicas < 0:
            raise errors.invalid(
                "Scale",
                name,
                [errors.field_invalid("spec.replicas", replicas, "must be greater than or equal to 0")],
                "autoscaling",
            )
        want_rv = (scale.get("metadata") or {}).get("resourceVersion")
        if want_rv and str(want_rv) != str(old.rv):
            raise errors.stale(rtype.plural, name, rtype.group)
        path, _ = strategy_for(rtype).scale_paths(rtype)
        new = deepcopy(old.obj)
        _set(new, path, replicas)
        st = self.commit_update(rtype, old, new, subresource=None, field_manager=None)
        return self.scale_of(rtype, st.obj)


# -- small helpers ------------------------------------------------------------------------------------------


def owner_references(obj: Obj) -> list[Obj]:
    """An object's ownerReferences, skipping anything that is not one (objects stored before the schema check, or
    by trusted in-process writers, must never break the garbage collector)."""
    meta = obj.get("metadata")
    refs = meta.get("ownerReferences") if isinstance(meta, dict) else None
    if not isinstance(refs, list):
        return []
    return [ref for ref in refs if isinstance(ref, dict)]


def _with_required(causes: list[dict[str, str]], missing: list[str] | None) -> list[dict[str, str]]:
    """The kind's causes plus a Required value for each schema-required field they do not already name."""
    if not missing:
        return causes
    named = {c.get("field") for c in causes}
    return causes + [errors.field_required(f) for f in missing if f not in named]


def _check_size(obj: Obj) -> None:
    """etcd refuses a request over its limit; kube-apiserver passes that on (see MAX_OBJECT_BYTES)."""
    if len(orjson.dumps(obj)) > MAX_OBJECT_BYTES:
        raise errors.ApiError(
            413, "RequestEntityTooLarge", "Request entity too large: etcdserver: request is too large"
        )


def _compact(obj: Obj, limit: int = 200) -> str:
    text = orjson.dumps(obj).decode()
    return text if len(text) <= limit else text[:limit] + "..."


def _without_rv(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if not meta or "resourceVersion" not in meta:
        return obj
    out = dict(obj)
    out["metadata"] = {k: v for k, v in meta.items() if k not in ("resourceVersion", "managedFields")}
    return out


def _set(obj: Obj, path: str, value: Any) -> None:
    parts = path.strip(".").split(".")
    cur = obj
    for part in parts[:-1]:
        cur = cur.setdefault(part, {})
    cur[parts[-1]] = value
