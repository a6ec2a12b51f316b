"""The HTTP face of the local cluster: Kubernetes REST paths, discovery, OpenAPI and streaming watches (aiohttp).

Requests are parsed into (group, version, namespace, resource, name, subresource) and handed to ``ClusterApi``;
answers are the stored objects' cached serialisations, so a list or a watch fan-out costs byte joins, not JSON
encoding. Errors leave as ``metav1.Status`` bodies with upstream reasons and codes.
"""

from __future__ import annotations

import asyncio
import base64
import hmac
import logging
import random
import ssl
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import orjson
from aiohttp import web

from kubesched.cluster import discovery, errors, openapi, protobuf, schema, tables
from kubesched.cluster.api import ClusterApi
from kubesched.cluster.auth.authn import Authenticator
from kubesched.cluster.auth.rbac import RBACAuthorizer, forbidden_error, request_attributes
from kubesched.cluster.auth.reviews import REVIEW_GROUPS, AuthApi
from kubesched.cluster.auth.user import ANONYMOUS_USER, UserInfo
from kubesched.cluster.resources import ResourceType
from kubesched.cluster.schema import bodies
from kubesched.cluster.storage.interface import ADDED, BOOKMARK, DELETED, ERROR, MODIFIED, Stored

log = logging.getLogger("kubesched.apiserver")

JSON = "application/json"
PUBLIC_PATHS = {"/version", "/healthz", "/livez", "/readyz"}
TOO_LARGE_RV_WAIT = 3.0
# kube-apiserver's MaxRequestBodyBytes: larger bodies get 413 before they are read (or once they pass it).
CLIENT_MAX_SIZE = bodies.MAX_BODY_BYTES
# YAML bodies larger than this are parsed on a worker thread, so the event loop keeps serving meanwhile.
YAML_INLINE_BYTES = 64 * 1024
BODY_CONTENT_TYPES = (JSON, "application/yaml", "application/vnd.kubernetes.protobuf")
PATCH_CONTENT_TYPES = (
    "application/json-patch+json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/apply-patch+yaml",
    "application/apply-patch+cbor",
)
# The options of write requests as upstream validates them (apimachinery's ValidateCreateOptions and friends).
FIELD_MANAGER_MAX_LENGTH = 128
PROPAGATION_POLICIES = ("Foreground", "Background", "Orphan")
_OPTIONS_KIND = {
    "POST": "CreateOptions",
    "PUT": "UpdateOptions",
    "PATCH": "PatchOptions",
    "DELETE": "DeleteOptions",
}
# A watch that wakes for a new event lets the writes already under way run first (one pass of the event loop,
# no added delay), unless WATCH_BATCH_EVENTS are already buffered: during a burst of writes (thousands of
# bindings a second) each chunk then carries many events, so the server and every watcher pay one TLS record,
# one send and one read per batch instead of per event. kube-apiserver likewise flushes a watch only when its
# queue runs empty. (A 5 ms window batched more but changed the load-aware e2e comparison's placements, which
# depend on how soon the scheduler sees changes.) Negative: write at once.
WATCH_BATCH_SECONDS = 0.0
WATCH_BATCH_EVENTS = 256
# The start of a watch event's line, by event type.
_EVENT_PREFIX = {t: b'{"type":"' + t.encode() + b'","object":' for t in (ADDED, MODIFIED, DELETED)}
# Initial events of a watch (a WatchList's replay of every object) written per chunk.
INITIAL_EVENTS_PAGE = 1000
# The authenticated (possibly impersonated) user of a request, for the handlers that answer about it (reviews).
USER_KEY = web.RequestKey("user", UserInfo)


@dataclass(slots=True)
class Target:
    rtype: ResourceType
    namespace: str | None
    name: str | None
    subresource: str | None


def _json_response(body: Any, status: int = 200, content_type: str = JSON) -> web.Response:
    data = body if isinstance(body, bytes) else orjson.dumps(body)
    return web.Response(body=data, status=status, content_type=content_type)


def _error_response(err: errors.ApiError) -> web.Response:
    return _json_response(err.status(), err.code)


def _add_warnings(resp: web.StreamResponse, warnings: list[str]) -> None:
    """``Warning: 299 - "text"`` headers, as kube-apiserver sends them (kubectl prints ``Warning: text``)."""
    for text in dict.fromkeys(warnings):
        escaped = text.replace("\\", "\\\\").replace('"', '\\"')
        # A field name may hold anything; a header may not hold control characters.
        escaped = "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped)
        resp.headers.add("Warning", f'299 - "{escaped}"')


def _int_param(q: Any, key: str) -> int | None:
    """An integer query parameter; 400 with Go's parse error for anything else (upstream's parameter codec)."""
    raw = q.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw, 10)
    except ValueError:
        raise errors.bad_request(f'strconv.ParseInt: parsing "{raw}": invalid syntax') from None


@dataclass(slots=True, frozen=True)
class WriteOptions:
    """The query options of a write, validated."""

    dry_run: bool
    field_validation: str
    field_manager: str | None


# The options of a write without a query string (the scheduler's bindings and events): nothing to validate.
_DEFAULT_WRITE_OPTIONS = WriteOptions(False, schema.WARN, None)


def _has_query(request: web.Request) -> bool:
    """Whether the request target carries a query string (parsing an absent one still costs yarl's machinery)."""
    return "?" in request.raw_path


def _write_options(request: web.Request) -> WriteOptions:
    """dryRun, fieldValidation and fieldManager as upstream validates them: 422 on the request's options kind."""
    if not _has_query(request):
        return _DEFAULT_WRITE_OPTIONS
    q = request.query
    causes: list[dict[str, str]] = []
    dry = q.getall("dryRun", [])
    for value in dry:
        if value != "All":
            causes.append(errors.field_not_supported("dryRun", value, ["All"]))
    deleting = request.method == "DELETE"
    validation = q.get("fieldValidation") or schema.WARN  # kube-apiserver's default
    if not deleting and validation not in schema.FIELD_VALIDATIONS:
        causes.append(
            errors.field_not_supported("fieldValidation", validation, list(schema.FIELD_VALIDATIONS))
        )
    manager = q.get("fieldManager")
    if manager is not None and not deleting:
        if len(manager.encode()) > FIELD_MANAGER_MAX_LENGTH:
            causes.append(
                {
                    "reason": "FieldValueTooLong",
                    "message": f"Too long: may not be more than {FIELD_MANAGER_MAX_LENGTH} bytes",
                    "field": "fieldManager",
                }
            )
        elif not manager.isprintable():
            causes.append(
                errors.field_invalid("fieldManager", manager, "must only contain printable characters")
            )
    if causes:
        raise errors.invalid(_OPTIONS_KIND.get(request.method, "CreateOptions"), "", causes, "meta.k8s.io")
    return WriteOptions("All" in dry, validation, manager or None)


_GO_TRUE = ("1", "t", "T", "TRUE", "true", "True")
_GO_FALSE = ("0", "f", "F", "FALSE", "false", "False")
BOOL_PARAMS = ("watch", "allowWatchBookmarks", "force", "orphanDependents", "pretty")


def _qbool(q: Any, key: str) -> bool:
    return str(q.get(key, "")) in _GO_TRUE


def _check_bool_params(q: Any) -> None:
    """Boolean query parameters as Go's strconv.ParseBool reads them (400 for anything else; empty is false)."""
    for key in BOOL_PARAMS:
        raw = q.get(key)
        if raw and raw not in _GO_TRUE and raw not in _GO_FALSE:
            raise errors.bad_request(f'strconv.ParseBool: parsing "{raw}": invalid syntax')


def _encode_continue(rv: int, key: tuple[str, str]) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"rv": rv, "start": list(key)})).decode()


def _decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        raw = orjson.loads(base64.urlsafe_b64decode(token.encode() + b"=" * (-len(token) % 4)))
        return int(raw["rv"]), (str(raw["start"][0]), str(raw["start"][1]))
    except Exception as e:
        raise errors.bad_request(f"continue key is not valid: {e}") from None


_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}


def _anonymous_forbidden(request: web.Request) -> errors.ApiError:
    """403 for an anonymous request, worded as kube-apiserver's RBAC denial (resource or non-resource form)."""
    user = 'User "system:anonymous"'
    parts = [unquote(p) for p in request.path.strip("/").split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return errors.forbidden(f'forbidden: {user} cannot {request.method.lower()} path "{request.path}"')
    namespace = ""
    if rest[0] == "namespaces" and len(rest) >= 2:
        namespace = rest[1]  # upstream counts a namespace itself as in its own namespace
        if len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource += "/" + rest[2]
    if request.method == "GET":
        verb = "watch" if _qbool(request.query, "watch") else ("get" if name else "list")
    elif request.method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _VERBS.get(request.method, request.method.lower())
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    subject = errors.qualified(rest[0], group) + (f' "{name}"' if name else "")
    return errors.forbidden(
        f'{subject} is forbidden: {user} cannot {verb} resource "{resource}" in API group "{group}" {scope}',
        name=name or None,
        resource=rest[0],
        group=group,
    )


def _parse_rv(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise errors.bad_request(f"invalid resource version: {value}") from None


class ApiServer:
    """aiohttp application serving ``ClusterApi`` over the Kubernetes REST conventions."""

    def __init__(
        self,
        api: ClusterApi,
        *,
        token: str | None = None,
        require_auth: bool = True,
        bookmark_interval: float = 60.0,
        authn: Authenticator | None = None,
        authz: RBACAuthorizer | None = None,
        auth_api: AuthApi | None = None,
    ) -> None:
        self.api = api
        self.token = token
        self.require_auth = require_auth
        # With ``authn``, requests are authenticated as kube-apiserver does (auth/authn.py) and, with ``authz``,
        # authorized by RBAC; without ``authz`` any authenticated user may do anything (--authorization-mode
        # AlwaysAllow). Without ``authn``: the older check (certificate or admin token, else 403).
        self.authn = authn
        self.authz = authz
        self.auth_api = auth_api
        self.bookmark_interval = bookmark_interval
        # Serves pods/log (kubelet/logs.PodLogs) when the cluster runs process pods; else logs are empty.
        self.pod_logs: Any = None
        self.app = web.Application(client_max_size=CLIENT_MAX_SIZE)
        self.app.router.add_route("*", "/{tail:.*}", self.handle)
        self.app.on_shutdown.append(self._on_shutdown)

    async def _on_shutdown(self, app: web.Application) -> None:
        self.api.store.close_watchers()

    # -- entry -------------------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        try:
            if self.authn is not None and self.require_auth:
                request[USER_KEY] = self._authorize(request)
            else:
                self._authenticate(request)
            return await self._dispatch(request)
        except errors.ApiError as e:
            return _error_response(e)
        except (ConnectionResetError, asyncio.CancelledError):
            raise
        except Exception as e:  # a bug must still answer as Kubernetes would, and be visible in the log
            log.exception("internal error serving %s %s", request.method, request.path_qs)
            return _error_response(errors.internal(str(e)))

    def _authenticate(self, request: web.Request) -> None:
        if not self.require_auth or request.path in PUBLIC_PATHS:
            return
        transport = request.transport
        if transport is not None:
            cert = transport.get_extra_info("peercert")
            if cert:
                return  # verified by the TLS layer against our CA
        auth = request.headers.get("Authorization", "")
        if self.token and hmac.compare_digest(auth.encode(), f"Bearer {self.token}".encode()):
            return
        if auth.startswith("Bearer "):
            raise errors.unauthorized()
        raise _anonymous_forbidden(request)

    def _authorize(self, request: web.Request) -> UserInfo:
        """The request's user, once it is known to be allowed to do what it asks (401/403 otherwise)."""
        assert self.authn is not None
        user = self.authn.authenticate(request)  # cached per connection for certificates: the hot path
        headers = request.headers
        if "Impersonate-User" in headers or "Impersonate-Group" in headers or "Impersonate-Uid" in headers:
            assert self.auth_api is not None
            user = self.auth_api.impersonate(headers, user)
        if user.is_master:
            return user
        if self.authz is None:  # AlwaysAllow: only anonymous requests are limited, to the public paths
            if user.name == ANONYMOUS_USER and request.path not in PUBLIC_PATHS:
                raise forbidden_error(user, request_attributes(request.method, request.path, request.query))
            return user
        attrs = request_attributes(request.method, request.path, request.query)
        if not self.authz.authorize(user, attrs):
            raise forbidden_error(user, attrs)
        return user

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        method = request.method
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        if path == "/version":
            return _json_response(discovery.version_info())
        parts = path.strip("/").split("/") if path != "/" else []
        if "%" in path:  # unquote changes nothing without one
            parts = [unquote(p) for p in parts]
        if not parts:
            return _json_response({"paths": sorted(["/api", "/apis", "/version", "/healthz", "/openapi/v3"])})
        if parts[0] == "openapi":
            if not openapi.is_built(self.api.registry):
                # The first build converts hundreds of published definitions (~0.3 s): off the event loop.
                await asyncio.to_thread(openapi.openapi_index, self.api.registry)
            return self._openapi(parts)
        accept = request.headers.get("Accept", "")
        if parts[0] == "api":
            if len(parts) == 1:
                if discovery.wants_aggregated(accept):
                    return _json_response(
                        discovery.aggregated(self.api.registry, core=True),
                        content_type=discovery.AGGREGATED_CONTENT_TYPE,
                    )
                return _json_response(discovery.api_versions())
            if len(parts) == 2:
                body = discovery.api_resource_list(self.api.registry, "", parts[1])
                if body is None:
                    raise errors.path_not_found()
                return _json_response(body)
            return await self._resource(request, "", parts[1], parts[2:], method)
        if parts[0] == "apis":
            if len(parts) == 1:
                if discovery.wants_aggregated(accept):
                    return _json_response(
                        discovery.aggregated(self.api.registry, core=False),
                        content_type=discovery.AGGREGATED_CONTENT_TYPE,
                    )
                return _json_response(discovery.api_group_list(self.api.registry))
            if len(parts) == 2:
                body = discovery.api_group(self.api.registry, parts[1])
                if body is None:
                    raise errors.path_not_found()
                return _json_response(body)
            if len(parts) == 3:
                body = discovery.api_resource_list(self.api.registry, parts[1], parts[2])
                if body is None:
                    raise errors.path_not_found()
                return _json_response(body)
            return await self._resource(request, parts[1], parts[2], parts[3:], method)
        raise errors.path_not_found()

    def _openapi(self, parts: list[str]) -> web.Response:
        if len(parts) >= 2 and parts[1] == "v3":
            if len(parts) == 2:
                return _json_response(openapi.openapi_index(self.api.registry))
            doc = openapi.openapi_group_version(self.api.registry, "/".join(parts[2:]))
            if doc is not None:
                return _json_response(doc)
        raise errors.path_not_found()

    # -- resource routing -----------------------------------------------------------------------------------

    def _target(self, group: str, version: str, rest: list[str]) -> Target:
        reg = self.api.registry
        if not rest:
            raise errors.path_not_found()
        namespace: str | None = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            namespace = rest[1]
            rest = rest[2:]
        rtype = reg.get(group, version, rest[0])
        if rtype is None:
            raise errors.path_not_found()
        if namespace is not None and not rtype.namespaced:
            raise errors.path_not_found()
        name = rest[1] if len(rest) > 1 else None
        sub = rest[2] if len(rest) > 2 else None
        if len(rest) > 3:
            raise errors.path_not_found()
        if sub is not None and sub not in rtype.subresources:
            raise errors.path_not_found()
        return Target(rtype, namespace, name, sub)

    async def _resource(
        self, request: web.Request, group: str, version: str, rest: list[str], method: str
    ) -> web.StreamResponse:
        t = self._target(group, version, rest)
        if _has_query(request):
            q = request.query
            _check_bool_params(q)
            watch = _qbool(q, "watch")
        else:
            watch = False
        if t.name is None:
            if method == "GET":
                if watch:
                    return await self._watch(request, t)
                return await self._list(request, t)
            if method == "POST":
                return await self._create(request, t)
            if method == "DELETE":
                return await self._delete_collection(request, t)
            raise errors.method_not_allowed()
        if t.rtype.plural == "bindings":
            raise errors.method_not_allowed()
        if t.subresource == "log":
            if method != "GET":
                raise errors.method_not_allowed()
            for key in ("tailLines", "limitBytes", "sinceSeconds"):
                _int_param(request.query, key)  # PodLogOptions' integers: 400 before the log reader sees them
            pod = self.api.get(t.rtype, t.namespace, t.name).obj
            if self.pod_logs is None:
                return web.Response(body=b"", content_type="text/plain")
            return await self.pod_logs.serve(request, pod)
        if method == "GET":
            st = self.api.get(t.rtype, t.namespace, t.name)
            if t.subresource == "scale":
                return _json_response(self.api.scale_of(t.rtype, st.obj))
            return self._object_response(request, t.rtype, st)
        if method == "PUT":
            return await self._update(request, t)
        if method == "PATCH":
            return await self._patch(request, t)
        if method == "DELETE" and t.subresource is None:
            return await self._delete(request, t)
        if method == "POST" and t.subresource == "token" and self.auth_api is not None:
            body = await self._body(request)
            _decode_only("authentication.k8s.io", "v1", "TokenRequest", body, _write_options(request))
            return _json_response(self.auth_api.token_request(t.namespace or "default", t.name, body), 201)
        if method == "POST" and t.subresource == "binding":
            opts = _write_options(request)
            body = await self._body(request)
            warnings: list[str] = []
            resp = _json_response(
                self.api.bind(
                    t.namespace or "default",
                    t.name,
                    body,
                    url_name=t.name,
                    field_validation=opts.field_validation,
                    warnings=warnings,
                ),
                201,
            )
            _add_warnings(resp, warnings)
            return resp
        raise errors.method_not_allowed()

    # -- reads --------------------------------------------------------------------------------------------

    def _object_bytes(self, rtype: ResourceType, st: Stored) -> bytes:
        conv = self.api.view_converter(rtype)
        return st.data if conv is None else orjson.dumps(conv(st.obj))

    def _object_response(
        self, request: web.Request, rtype: ResourceType, st: Stored, status: int = 200
    ) -> web.Response:
        if tables.wants_table(request.headers.get("Accept", "")):
            obj = self.api.to_view(rtype, st.obj)
            return _json_response(tables.to_table(rtype, [obj], resource_version=str(st.rv)), status)
        return _json_response(self._object_bytes(rtype, st), status)

    async def _list(self, request: web.Request, t: Target) -> web.Response:
        q = request.query
        rtype = t.rtype
        pred = self.api.predicate(rtype, q.get("labelSelector"), q.get("fieldSelector"))
        limit = max(_int_param(q, "limit") or 0, 0)  # a negative limit means none, as in the storage layer
        rv_param = q.get("resourceVersion")
        rv_match = q.get("resourceVersionMatch")
        cont = q.get("continue")
        if rv_match and rv_match not in ("NotOlderThan", "Exact"):
            raise errors.bad_request(f'resourceVersionMatch: Unsupported value: "{rv_match}"')
        if rv_match and not rv_param:
            raise errors.bad_request("resourceVersionMatch is forbidden unless resourceVersion is provided")
        if cont and rv_param:
            raise errors.bad_request("specifying resource version is not allowed when using continue")
        start_after: tuple[str, str] | None = None
        if cont:
            list_rv, start_after = _decode_continue(cont)
            items = self.api.store.list_at(rtype.storage_key, list_rv, t.namespace, pred, continuing=True)
        else:
            want = _parse_rv(rv_param)
            exact = rv_match == "Exact" or (want not in (None, 0) and limit > 0 and rv_match is None)
            if want and want > self.api.store.revision:
                if not await self.api.store.wait_for_revision(want, TOO_LARGE_RV_WAIT):
                    raise self._too_large(want)
            if exact and want:
                items = self.api.store.list_at(rtype.storage_key, want, t.namespace, pred)
                list_rv = want
            else:
                items, list_rv = self.api.store.list(rtype.storage_key, t.namespace, pred)
                if want == 0 and rv_match is None:
                    limit = 0  # served "from cache": the whole list, as the watch cache historically did
        if start_after is not None:
            items = [st for st in items if st.key > start_after]
        next_token = ""
        remaining = 0
        if limit and len(items) > limit:
            remaining = len(items) - limit
            items = items[:limit]
            next_token = _encode_continue(list_rv, items[-1].key)
        if tables.wants_table(request.headers.get("Accept", "")):
            objs = [self.api.to_view(rtype, st.obj) for st in items]
            table = tables.to_table(rtype, objs, resource_version=str(list_rv), continue_token=next_token)
            return _json_response(table)
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if next_token:
            meta["continue"] = next_token
            meta["remainingItemCount"] = remaining
        conv = self.api.view_converter(rtype)
        if conv is None:
            payload = b",".join(st.data for st in items)
        else:
            payload = b",".join(orjson.dumps(conv(st.obj)) for st in items)
        head = orjson.dumps({"kind": rtype.list_kind, "apiVersion": rtype.api_version, "metadata": meta})
        return _json_response(head[:-1] + b',"items":[' + payload + b"]}")

    def _too_large(self, want: int) -> errors.ApiError:
        return errors.ApiError(
            504,
            "Timeout",
            f"Too large resource version: {want}, current: {self.api.store.revision}",
            details={
                "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
                "retryAfterSeconds": 1,
            },
        )

    async def _watch(self, request: web.Request, t: Target) -> web.StreamResponse:
        q = request.query
        rtype = t.rtype
        pred = self.api.predicate(rtype, q.get("labelSelector"), q.get("fieldSelector"))
        bookmarks = _qbool(q, "allowWatchBookmarks")
        send_initial = q.get("sendInitialEvents")
        rv_match = q.get("resourceVersionMatch")
        want = _parse_rv(q.get("resourceVersion"))
        if send_initial is not None:
            if rv_match != "NotOlderThan":
                raise errors.invalid(
                    "ListOptions",
                    "",
                    [
                        errors.field_forbidden(
                            "resourceVersionMatch",
                            "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                        )
                    ],
                )
        elif rv_match:
            raise errors.bad_request("resourceVersionMatch is forbidden for watch")
        initial_state = send_initial == "true" or (send_initial is None and not want)
        if want and want > self.api.store.revision:
            if not await self.api.store.wait_for_revision(want, TOO_LARGE_RV_WAIT):
                raise self._too_large(want)
        # Without initial events, "" and "0" both mean: changes from now on.
        since = None if initial_state else (want or self.api.store.revision)
        timeout_s = float(_int_param(q, "timeoutSeconds") or random.uniform(1800, 3600))
        # Subscribing may raise 410 Expired; as kube-apiserver does, that goes out as an ERROR event in a 200.
        try:
            watcher, initial = self.api.store.watch(
                rtype.storage_key, namespace=t.namespace, predicate=pred, since=since
            )
            initial_rv = self.api.store.revision  # taken with the subscription, before any await
        except errors.ApiError as e:
            if e.code != 410:
                raise
            resp = await self._start_stream(request)
            await resp.write(orjson.dumps({"type": ERROR, "object": e.status()}) + b"\n")
            await resp.write_eof()
            return resp
        conv = self.api.view_converter(rtype)
        as_table = tables.wants_table(request.headers.get("Accept", ""))
        first_table = [True]

        def encode(etype: str, st: Stored) -> bytes:
            if as_table:
                obj = self.api.to_view(rtype, st.obj)
                tbl = tables.to_table(
                    rtype, [obj], resource_version=str(st.rv), include_columns=first_table[0]
                )
                first_table[0] = False
                return b'{"type":"' + etype.encode() + b'","object":' + orjson.dumps(tbl) + b"}\n"
            data = st.data if conv is None else orjson.dumps(conv(st.obj))
            return b'{"type":"' + etype.encode() + b'","object":' + data + b"}\n"

        def encode_all(items: list[tuple[str, Stored]]) -> bytes:
            """The events as one chunk: the pieces of every line joined once, so each object's cached bytes
            are copied once (into the chunk), not once per concatenation."""
            if as_table:
                return b"".join([encode(et, st) for et, st in items])
            parts: list[bytes] = []
            append = parts.append
            for et, st in items:
                prefix = _EVENT_PREFIX.get(et)
                append(b'{"type":"' + et.encode() + b'","object":' if prefix is None else prefix)
                append(st.data if conv is None else orjson.dumps(conv(st.obj)))
                append(b"}\n")
            return b"".join(parts)

        def bookmark(rv: int, extra: dict[str, Any] | None = None) -> bytes:
            # Shaped as kube-apiserver 1.36 sends it: kind, apiVersion and metadata with only these keys.
            meta: dict[str, Any] = {"resourceVersion": str(rv)}
            if extra:
                meta["annotations"] = extra
            obj = {"kind": rtype.kind, "apiVersion": rtype.api_version, "metadata": meta}
            return orjson.dumps({"type": BOOKMARK, "object": obj}) + b"\n"

        resp = await self._start_stream(request)
        deadline = time.monotonic() + timeout_s
        try:
            # The initial events go out a page at a time: one chunk of every stored object (50,000 pods: over
            # 100 MB) was a copy of them all in memory and one long stretch without the loop serving anyone.
            # Live events wait in the watcher meanwhile, so the order is unchanged.
            chunk = b""
            for first in range(0, len(initial), INITIAL_EVENTS_PAGE):
                if chunk:
                    await resp.write(chunk)
                page = initial[first : first + INITIAL_EVENTS_PAGE]
                chunk = encode_all(page)
            if send_initial == "true" and bookmarks:
                chunk += bookmark(initial_rv, {"k8s.io/initial-events-end": "true"})
            if chunk:
                await resp.write(chunk)
            next_bookmark = time.monotonic() + self.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    break
                wait_for = min(deadline, next_bookmark) - now if bookmarks else deadline - now
                got = await watcher.wait(max(wait_for, 0.0))
                if watcher.expired_message is not None:
                    err = errors.expired(watcher.expired_message)
                    await resp.write(orjson.dumps({"type": ERROR, "object": err.status()}) + b"\n")
                    break
                if watcher.closed and not watcher.pending:
                    break
                if got:
                    if (
                        WATCH_BATCH_SECONDS >= 0
                        and not watcher.closed
                        and watcher.pending < WATCH_BATCH_EVENTS
                    ):
                        # Let the writes already under way land first, then send them in one chunk.
                        await asyncio.sleep(WATCH_BATCH_SECONDS)
                    items = watcher.drain()
                    if items:
                        await resp.write(encode_all(items))
                if bookmarks and time.monotonic() >= next_bookmark and not watcher.pending:
                    await resp.write(bookmark(self.api.store.revision))
                    next_bookmark = time.monotonic() + self.bookmark_interval
            if bookmarks and not watcher.closed:
                items = watcher.drain()
                await resp.write(encode_all(items) + bookmark(self.api.store.revision))
            await resp.write_eof()
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        finally:
            watcher.close()
        return resp

    async def _start_stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(status=200, headers={"Content-Type": JSON, "Cache-Control": "no-cache"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        return resp

    # -- writes -------------------------------------------------------------------------------------------

    async def _body(
        self, request: web.Request, *, patch: bool = False, strict: ResourceType | None = None
    ) -> Any:
        """The decoded body (None if empty) within kube-apiserver's bounds (``schema/bodies.py``): 413 above
        3 MiB, 415 for a media type it does not decode, 400 for what does not parse. ``strict``: the kind of a
        fieldValidation=Strict write, whose JSON body may not repeat a field."""
        length = request.content_length
        if length is not None and length > bodies.MAX_BODY_BYTES:
            raise errors.ApiError(413, "RequestEntityTooLarge", bodies.too_large_message())
        payload = request.content
        if payload.is_eof():
            # The whole body has arrived with the request (any small POST): take it from the buffer at once,
            # without read()'s loop of readany() calls and its copy through a bytearray.
            raw = payload.read_nowait(-1)
            if len(raw) > CLIENT_MAX_SIZE:
                raise errors.ApiError(413, "RequestEntityTooLarge", bodies.too_large_message())
        else:
            try:
                raw = await request.read()
            except web.HTTPRequestEntityTooLarge:
                raise errors.ApiError(413, "RequestEntityTooLarge", bodies.too_large_message()) from None
        if not raw:
            return None
        ctype = request.headers.get("Content-Type", JSON).split(";")[0].strip().lower() or JSON
        if ctype == protobuf.PROTOBUF_CONTENT_TYPE:
            # client-go's typed clients (kubectl create namespace/deployment/...) send protobuf and never fall back.
            try:
                return protobuf.decode_k8s_protobuf(raw)
            except protobuf.UnsupportedKindError as e:
                raise errors.ApiError(
                    415,
                    "UnsupportedMediaType",
                    f"the body of the request was in an unknown format - {e.api_version} {e.kind} is not supported "
                    "as protobuf by this server; send application/json",
                ) from None
            except protobuf.ProtobufError as e:
                raise errors.bad_request(f"the request body could not be decoded as protobuf: {e}") from None
        if patch:
            if ctype not in PATCH_CONTENT_TYPES:
                raise errors.unsupported_media_type(ctype)
        elif ctype not in BODY_CONTENT_TYPES:
            raise errors.ApiError(
                415,
                "UnsupportedMediaType",
                "the body of the request was in an unknown format - accepted media types include: "
                + ", ".join(BODY_CONTENT_TYPES),
            )
        try:
            try:
                value = bodies.parse_json(raw)  # kubectl sends JSON even for apply-patch+yaml
                if strict is not None and ctype != "application/json-patch+json":
                    repeated = bodies.duplicate_fields(raw)
                    if repeated:
                        listed = ", ".join(f'duplicate field "{p}"' for p in repeated)
                        raise errors.bad_request(
                            f'{strict.kind} in version "{strict.version}" cannot be handled as a {strict.kind}: '
                            f"strict decoding error: {listed}"
                        )
                return value
            except bodies.BodyError as e:
                if not ctype.endswith("yaml"):
                    raise errors.bad_request(f"the request body could not be decoded: {e}") from None
            if len(raw) > YAML_INLINE_BYTES:
                return await asyncio.to_thread(bodies.parse_yaml, raw)
            return bodies.parse_yaml(raw)
        except bodies.BodyError as e:
            raise errors.bad_request(f"the request body could not be decoded: {e}") from None

    def _respond(
        self, request: web.Request, rtype: ResourceType, st: Stored, status: int, warnings: list[str]
    ) -> web.Response:
        resp = self._object_response(request, rtype, st, status)
        if warnings:
            _add_warnings(resp, warnings)
        return resp

    async def _create(self, request: web.Request, t: Target) -> web.Response:
        opts = _write_options(request)
        body = await self._body(request, strict=t.rtype if opts.field_validation == schema.STRICT else None)
        warnings: list[str] = []
        if t.rtype.plural == "bindings":
            ns = t.namespace or "default"
            resp = _json_response(
                self.api.bind(ns, "", body or {}, field_validation=opts.field_validation, warnings=warnings),
                201,
            )
            _add_warnings(resp, warnings)
            return resp
        if t.rtype.group in REVIEW_GROUPS and self.auth_api is not None:
            _decode_only(t.rtype.group, t.rtype.version, t.rtype.kind, body, opts)
            user = request.get(USER_KEY) or UserInfo(ANONYMOUS_USER)
            return _json_response(self.auth_api.review(t.rtype, body, t.namespace, user), 201)
        st = self.api.create(
            t.rtype,
            body,
            t.namespace,
            field_manager=opts.field_manager,
            dry_run=opts.dry_run,
            field_validation=opts.field_validation,
            warnings=warnings,
        )
        return self._respond(request, t.rtype, st, 201, warnings)

    async def _update(self, request: web.Request, t: Target) -> web.Response:
        opts = _write_options(request)
        body = await self._body(request, strict=t.rtype if opts.field_validation == schema.STRICT else None)
        assert t.name is not None
        if t.subresource == "scale":
            return _json_response(self.api.update_scale(t.rtype, t.namespace, t.name, _scale_body(body)))
        if t.subresource == "binding":
            raise errors.method_not_allowed()
        warnings: list[str] = []
        st, created = self.api.update(
            t.rtype,
            body,
            t.namespace,
            t.name,
            subresource=t.subresource,
            field_manager=opts.field_manager,
            dry_run=opts.dry_run,
            field_validation=opts.field_validation,
            warnings=warnings,
        )
        return self._respond(request, t.rtype, st, 201 if created else 200, warnings)

    async def _patch(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        opts = _write_options(request)
        body = await self._body(
            request, patch=True, strict=t.rtype if opts.field_validation == schema.STRICT else None
        )
        ctype = request.headers.get("Content-Type", "")
        if t.subresource == "scale":
            current = self.api.scale_of(t.rtype, self.api.get(t.rtype, t.namespace, t.name).obj)
            from kubesched.cluster import patch as patching

            if ctype.startswith("application/json-patch"):
                if not isinstance(body, list):
                    raise errors.bad_request(
                        "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"
                    )
                new = patching.json_patch(current, body)
            else:
                if not isinstance(body, dict):
                    raise errors.bad_request("the merge patch must be an object")
                new = patching.merge_patch(current, body)
            return _json_response(self.api.update_scale(t.rtype, t.namespace, t.name, _scale_body(new)))
        warnings: list[str] = []
        st, created = self.api.patch(
            t.rtype,
            t.namespace,
            t.name,
            body,
            ctype,
            subresource=t.subresource,
            field_manager=opts.field_manager,
            force=_qbool(request.query, "force"),
            dry_run=opts.dry_run,
            field_validation=opts.field_validation,
            warnings=warnings,
        )
        return self._respond(request, t.rtype, st, 201 if created else 200, warnings)

    async def _delete_options(self, request: web.Request) -> tuple[dict[str, Any], bool]:
        """The DeleteOptions of a DELETE (body and query), checked as upstream decodes them; and dryRun."""
        opts = _write_options(request)
        body = await self._body(request)
        if body is None:
            options: dict[str, Any] = {}
        elif isinstance(body, dict):
            try:
                schema.check_object("meta.k8s.io", "v1", "DeleteOptions", body, schema.IGNORE, required=False)
            except schema.DecodeError as e:
                raise errors.bad_request(str(e)) from None
            options = body
        else:
            raise errors.bad_request(
                "json: cannot unmarshal "
                + ("array" if isinstance(body, list) else "value")
                + " into Go value of type v1.DeleteOptions"
            )
        q = request.query
        grace = _int_param(q, "gracePeriodSeconds")
        if grace is not None:
            options["gracePeriodSeconds"] = grace
        if "propagationPolicy" in q:
            options["propagationPolicy"] = q["propagationPolicy"]
        if "orphanDependents" in q:
            options["orphanDependents"] = _qbool(q, "orphanDependents")
        policy = options.get("propagationPolicy")
        if policy is not None and policy not in PROPAGATION_POLICIES:
            raise errors.invalid(
                "DeleteOptions",
                "",
                [errors.field_not_supported("propagationPolicy", policy, list(PROPAGATION_POLICIES))],
                "meta.k8s.io",
            )
        return options, opts.dry_run or "All" in (options.get("dryRun") or [])

    async def _delete(self, request: web.Request, t: Target) -> web.Response:
        assert t.name is not None
        options, dry_run = await self._delete_options(request)
        st, _removed = self.api.delete(t.rtype, t.namespace, t.name, options, dry_run=dry_run)
        return self._object_response(request, t.rtype, st, 200)

    async def _delete_collection(self, request: web.Request, t: Target) -> web.Response:
        q = request.query
        options, dry_run = await self._delete_options(request)
        pred = self.api.predicate(t.rtype, q.get("labelSelector"), q.get("fieldSelector"))
        items, _ = self.api.store.list(t.rtype.storage_key, t.namespace, pred)
        for st in items:
            try:
                self.api.delete(t.rtype, st.key[0] or None, st.key[1], options, dry_run=dry_run)
            except errors.ApiError as e:
                if e.code != 404:
                    raise
        return _json_response(errors.success(200))


def _decode_only(group: str, version: str, kind: str, body: Any, opts: WriteOptions) -> None:
    """The typed decoding of a body that is answered, not stored (reviews, TokenRequest): 400 as upstream."""
    if body is None:
        return
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of the request must be a {kind}")
    try:
        schema.check_object(group, version, kind, body, opts.field_validation, required=False)
    except schema.DecodeError as e:
        raise errors.bad_request(
            f'{kind} in version "{version}" cannot be handled as a {kind}: {e}'
        ) from None


def _scale_body(body: Any) -> dict[str, Any]:
    """An autoscaling/v1 Scale as upstream decodes it (400 for wrong types)."""
    if not isinstance(body, dict):
        raise errors.bad_request("the body of the request must be a Scale")
    try:
        schema.check_object("autoscaling", "v1", "Scale", body, schema.IGNORE, required=False)
    except schema.DecodeError as e:
        raise errors.bad_request(f'Scale in version "v1" cannot be handled as a Scale: {e}') from None
    return body


class _Runner(web.ServerRunner):
    """Serves ``ApiServer.handle`` on aiohttp's low-level server: every path goes to the one handler anyway,
    so the Application's router, match info and middleware chain were pure per-request cost."""

    def __init__(self, server: ApiServer) -> None:
        self._api_server = server

        def make_request(
            message: Any, payload: Any, protocol: Any, writer: Any, task: asyncio.Task[None]
        ) -> web.BaseRequest:
            return web.BaseRequest(
                message,
                payload,
                protocol,
                writer,
                task,
                asyncio.get_running_loop(),
                client_max_size=CLIENT_MAX_SIZE,
            )

        low = web.Server(server.handle, request_factory=make_request, access_log=None)  # type: ignore[arg-type]
        super().__init__(low, handle_signals=False, shutdown_timeout=1.0)

    async def shutdown(self) -> None:
        await self._api_server._on_shutdown(self._api_server.app)


async def start_server(
    server: ApiServer, host: str, port: int, ssl_context: ssl.SSLContext | None
) -> web.BaseRunner:
    # The published schemas (~4 MB of JSON) load once per process, on a worker thread rather than on the event
    # loop during the first write.
    await asyncio.to_thread(schema.warm)
    runner = _Runner(server)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=ssl_context, backlog=1024, reuse_address=True)
    await site.start()
    return runner
