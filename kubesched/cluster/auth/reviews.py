"""The create-only APIs of authentication and authorization, and impersonation.

- ``POST .../serviceaccounts/<name>/token`` (TokenRequest): a signed token for the ServiceAccount, optionally bound
  to a Pod (it dies with the Pod), with upstream's defaults and limits;
- TokenReview, SelfSubjectReview (``kubectl auth whoami``);
- SubjectAccessReview, LocalSubjectAccessReview, SelfSubjectAccessReview (``kubectl auth can-i``),
  SelfSubjectRulesReview (``kubectl auth can-i --list``).

None of them is stored: the answer is the request with its ``status`` filled in (201 Created, as upstream).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from kubesched.apimachinery.timefmt import format_rfc3339, now_rfc3339
from kubesched.cluster import errors
from kubesched.cluster.auth.rbac import Attributes, RBACAuthorizer, forbidden_error
from kubesched.cluster.auth.tokens import (
    DEFAULT_EXPIRATION_SECONDS,
    MIN_EXPIRATION_SECONDS,
    BoundObject,
    TokenIssuer,
)
from kubesched.cluster.auth.user import (
    ANONYMOUS_USER,
    AUTHENTICATED,
    UNAUTHENTICATED,
    UserInfo,
    service_account_groups,
    split_service_account_username,
)

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.auth.authn import Authenticator
    from kubesched.cluster.resources import ResourceType

Obj = dict[str, Any]

AUTHN_GROUP = "authentication.k8s.io"
AUTHZ_GROUP = "authorization.k8s.io"
REVIEW_GROUPS = frozenset({AUTHN_GROUP, AUTHZ_GROUP})
MAX_EXPIRATION_SECONDS = 1 << 32


class AuthApi:
    """Serves the reviews and TokenRequest for ``apiserver.py`` (which has authenticated and authorized the call)."""

    def __init__(
        self,
        api: ClusterApi,
        authn: Authenticator,
        authz: RBACAuthorizer | None,
        issuer: TokenIssuer | None,
    ) -> None:
        self.api = api
        self.authn = authn
        self.authz = authz
        self.issuer = issuer

    def _allowed(self, user: UserInfo, a: Attributes) -> bool:
        return True if self.authz is None else self.authz.authorize(user, a)

    # -- reviews --------------------------------------------------------------------------------------------

    def review(self, rtype: ResourceType, body: Any, namespace: str | None, user: UserInfo) -> Obj:
        if not isinstance(body, dict):
            raise errors.bad_request("the body of the request must be an object")
        out: Obj = {
            "kind": rtype.kind,
            "apiVersion": rtype.api_version,
            "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None},
        }
        spec = body.get("spec") or {}
        if rtype.plural == "selfsubjectreviews":
            out["status"] = {"userInfo": user.to_api()}
            return out
        out["spec"] = spec
        if rtype.plural == "tokenreviews":
            out["status"] = self._token_review(spec)
        elif rtype.plural == "selfsubjectrulesreviews":
            ns = str(spec.get("namespace") or "")
            if self.authz is None:
                res = [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}]
                non: list[Obj] = [{"verbs": ["*"], "nonResourceURLs": ["*"]}]
            else:
                res, non = self.authz.rules_review(user, ns)
            out["status"] = {"resourceRules": res, "nonResourceRules": non, "incomplete": False}
        else:
            subject = user
            if rtype.plural in ("subjectaccessreviews", "localsubjectaccessreviews"):
                subject = _subject_of(rtype.kind, spec)
            elif spec.get("user") or spec.get("groups"):
                raise errors.invalid(
                    rtype.kind, "", [errors.field_invalid("spec", "", "user and groups must be empty")]
                )
            attrs = _review_attributes(rtype.kind, spec, namespace if rtype.namespaced else None)
            allowed = self._allowed(subject, attrs)
            status: Obj = {"allowed": allowed}
            if allowed and self.authz is not None:
                status["reason"] = self.authz.explain(subject, attrs)
            out["status"] = status
        return out

    def _token_review(self, spec: Obj) -> Obj:
        token = str(spec.get("token") or "")
        wanted = [str(a) for a in spec.get("audiences") or []]
        if not token:
            raise errors.invalid("TokenReview", "", [errors.field_required("spec.token")])
        user = self.authn.static_token_user(token)  # constant time, as the authenticator compares
        api_audiences = list(self.issuer.api_audiences) if self.issuer else []
        if user is not None:
            # Static tokens are for the API server only: they pass when the audiences asked include it.
            matched = [a for a in wanted if a in api_audiences] if wanted else api_audiences
            if wanted and not matched:
                return {"authenticated": False, "error": "token audiences are not valid for the request"}
            return {"authenticated": True, "user": user.to_api(), "audiences": matched}
        claims = self.authn.service_account_claims(token, wanted or None)
        if claims is None:
            return {
                "authenticated": False,
                "error": "[invalid bearer token, service account token is not valid]",
            }
        return {"authenticated": True, "user": claims.user().to_api(), "audiences": list(claims.audiences)}

    # -- TokenRequest ---------------------------------------------------------------------------------------

    def token_request(self, namespace: str, sa_name: str, body: Any) -> Obj:
        if self.issuer is None:
            raise errors.ApiError(404, "NotFound", "the server could not find the requested resource")
        sa_type = self.api.rtype("", "v1", "serviceaccounts")
        sa = self.api.get(sa_type, namespace, sa_name)
        req = body if isinstance(body, dict) else {}
        spec = dict(req.get("spec") or {})
        exp = spec.get("expirationSeconds")
        exp = DEFAULT_EXPIRATION_SECONDS if exp in (None, 0) else exp
        causes = []
        if not isinstance(exp, int):
            causes.append(errors.field_invalid("spec.expirationSeconds", exp, "must be an integer"))
        elif exp < MIN_EXPIRATION_SECONDS:
            causes.append(
                errors.field_invalid(
                    "spec.expirationSeconds", exp, "may not specify a duration less than 10 minutes"
                )
            )
        elif exp > MAX_EXPIRATION_SECONDS:
            causes.append(
                errors.field_invalid(
                    "spec.expirationSeconds", exp, "may not specify a duration larger than 2^32 seconds"
                )
            )
        audiences = [str(a) for a in spec.get("audiences") or []] or list(self.issuer.api_audiences)
        ref = spec.get("boundObjectRef")
        pod: BoundObject | None = None
        node: BoundObject | None = None
        if isinstance(ref, dict) and ref:
            kind = ref.get("kind")
            if kind not in ("Pod", "Secret", "Node"):
                causes.append(
                    errors.field_not_supported("spec.boundObjectRef.kind", kind, ["Pod", "Node", "Secret"])
                )
            elif kind == "Pod":
                pod, node = self._bound_pod(namespace, ref)
            elif kind == "Node":
                node = self._bound_object("nodes", None, ref)
            else:
                self._bound_object("secrets", namespace, ref)
        if causes:
            raise errors.invalid("TokenRequest", sa_name, causes, AUTHN_GROUP)
        assert isinstance(exp, int)
        sa_uid = str((sa.obj.get("metadata") or {}).get("uid") or "")
        token, expires = self.issuer.issue(namespace, sa_name, sa_uid, audiences, exp, pod, bound_node=node)
        out_spec: Obj = {"audiences": audiences, "expirationSeconds": exp, "boundObjectRef": ref or None}
        return {
            "kind": "TokenRequest",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"name": sa_name, "namespace": namespace, "creationTimestamp": now_rfc3339()},
            "spec": out_spec,
            "status": {"token": token, "expirationTimestamp": format_rfc3339(expires)},
        }

    def _bound_object(self, plural: str, namespace: str | None, ref: Obj) -> BoundObject:
        rtype = self.api.rtype("", "v1", plural)
        st = self.api.get(rtype, namespace, str(ref.get("name") or ""))
        uid = str((st.obj.get("metadata") or {}).get("uid") or "")
        if ref.get("uid") and ref["uid"] != uid:
            raise errors.ApiError(
                409,
                "Conflict",
                f"the UID in the bound object reference ({ref['uid']}) does not match the UID in record. "
                "The object might have been deleted and then recreated",
            )
        return BoundObject(rtype.kind, st.key[1], uid)

    def _bound_pod(self, namespace: str, ref: Obj) -> tuple[BoundObject, BoundObject | None]:
        pod = self._bound_object("pods", namespace, ref)
        st = self.api.get(self.api.rtype("", "v1", "pods"), namespace, pod.name)
        node_name = (st.obj.get("spec") or {}).get("nodeName")
        node = None
        if node_name:
            nst = self.api.lookup(self.api.rtype("", "v1", "nodes"), None, node_name)
            uid = str(((nst.obj.get("metadata") or {}).get("uid") if nst is not None else "") or "")
            node = BoundObject("Node", node_name, uid)
        return pod, node

    # -- impersonation --------------------------------------------------------------------------------------

    def impersonate(self, headers: Mapping[str, str], user: UserInfo) -> UserInfo:
        """The user named by ``Impersonate-*`` headers, if ``user`` may impersonate each part (verb
        ``impersonate`` on users/serviceaccounts, groups, uids, userextras), as upstream's filter does."""
        getall = getattr(headers, "getall", None)

        def values(name: str) -> list[str]:
            if getall is not None:
                return [str(v) for v in getall(name, [])]
            v = headers.get(name)
            return [v] if v is not None else []

        name = headers.get("Impersonate-User") or ""
        groups = values("Impersonate-Group")
        uid = headers.get("Impersonate-Uid") or ""
        extra: dict[str, list[str]] = {}
        for key in headers:
            if key.lower().startswith("impersonate-extra-"):
                extra.setdefault(unquote(key[len("impersonate-extra-") :]).lower(), values(key))
        if not name:
            raise errors.ApiError(
                500,
                "InternalError",
                "Internal error occurred: requested impersonation without a user (Impersonate-User)",
            )
        checks: list[Attributes] = []
        sa = split_service_account_username(name)
        if sa is not None:
            checks.append(_impersonate("serviceaccounts", sa[1], namespace=sa[0]))
        else:
            checks.append(_impersonate("users", name))
        checks += [_impersonate("groups", g) for g in groups]
        if uid:
            checks.append(_impersonate("uids", uid))
        for key, vals in extra.items():
            checks += [_impersonate("userextras", v, group=AUTHN_GROUP, subresource=key) for v in vals]
        for a in checks:
            if not self._allowed(user, a):
                raise forbidden_error(user, a)
        if sa is not None and not groups:
            group_list = list(service_account_groups(sa[0]))
        else:
            group_list = list(groups)
        marker = UNAUTHENTICATED if name == ANONYMOUS_USER else AUTHENTICATED
        if marker not in group_list:
            group_list.append(marker)
        return UserInfo(
            name, uid=uid, groups=tuple(group_list), extra={k: tuple(v) for k, v in extra.items()}
        )


def _impersonate(
    resource: str, name: str, *, namespace: str = "", group: str = "", subresource: str = ""
) -> Attributes:
    return Attributes(
        verb="impersonate",
        resource_request=True,
        api_group=group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        path="",
    )


def _subject_of(kind: str, spec: Obj) -> UserInfo:
    name = str(spec.get("user") or "")
    groups = tuple(str(g) for g in spec.get("groups") or [])
    if not name and not groups:
        raise errors.invalid(
            kind,
            "",
            [errors.field_invalid("spec.user", "", "at least one of user or group must be specified")],
            AUTHZ_GROUP,
        )
    extra = {str(k): tuple(str(x) for x in v or []) for k, v in (spec.get("extra") or {}).items()}
    return UserInfo(name, uid=str(spec.get("uid") or ""), groups=groups, extra=extra)


def _review_attributes(kind: str, spec: Obj, url_namespace: str | None) -> Attributes:
    res: Obj = spec.get("resourceAttributes") or {}
    non: Obj = spec.get("nonResourceAttributes") or {}
    if bool(res) == bool(non):
        raise errors.invalid(
            kind,
            "",
            [
                errors.field_invalid(
                    "spec.resourceAttributes",
                    "",
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            ],
            AUTHZ_GROUP,
        )
    if non:
        if url_namespace is not None:
            raise errors.invalid(
                kind,
                "",
                [
                    errors.field_invalid(
                        "spec.nonResourceAttributes", "", "disallowed on this kind of request"
                    )
                ],
                AUTHZ_GROUP,
            )
        return Attributes(
            verb=str(non.get("verb") or ""), resource_request=False, path=str(non.get("path") or "")
        )
    namespace = str(res.get("namespace") or "")
    if url_namespace is not None:
        if namespace and namespace != url_namespace:
            raise errors.invalid(
                kind,
                "",
                [
                    errors.field_invalid(
                        "spec.resourceAttributes.namespace", namespace, "must match metadata.namespace"
                    )
                ],
                AUTHZ_GROUP,
            )
        namespace = url_namespace
    return Attributes(
        verb=str(res.get("verb") or ""),
        resource_request=True,
        api_group=str(res.get("group") or ""),
        api_version=str(res.get("version") or ""),
        resource=str(res.get("resource") or ""),
        subresource=str(res.get("subresource") or ""),
        namespace=namespace,
        name=str(res.get("name") or ""),
    )
