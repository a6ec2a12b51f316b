"""RBAC authorization as kube-apiserver evaluates it, with request attributes read off the URL.

``request_attributes`` turns a method, path and query into upstream's ``authorizer.Attributes`` (verb, API group,
resource, subresource, namespace, name, or a non-resource path). ``RBACAuthorizer`` answers whether a user may do
that: members of ``system:masters`` always may (upstream's privileged-group authorizer runs first); everyone else
through the rules of the Roles and ClusterRoles their RoleBindings and ClusterRoleBindings grant.

Bindings are indexed by subject (``u:<user>``, ``g:<group>``; a ServiceAccount subject is the user
``system:serviceaccount:<ns>:<name>``), so a decision reads the bindings of one user and its few groups, never all of
them. The index is kept current by ``ClusterApi`` observers (called synchronously on every committed write), and
decisions are memoised per (user, attributes) until any RBAC object changes. ClusterRoles with an
``aggregationRule`` get their rules rewritten in the stored object as upstream's aggregation controller does.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from kubesched.cluster import errors
from kubesched.cluster.auth.user import UserInfo, service_account_username
from kubesched.cluster.selectors import LabelSelector

if TYPE_CHECKING:
    from kubesched.cluster.api import ClusterApi
    from kubesched.cluster.resources import ResourceType

log = logging.getLogger("kubesched.rbac")

RBAC_GROUP = "rbac.authorization.k8s.io"
AGGREGATION_MANAGER = "clusterrole-aggregation-controller"
_METHOD_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
# Subresources of a namespace itself: /api/v1/namespaces/<ns>/status is the namespace's status, not a resource.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_DECISION_CACHE_LIMIT = 50_000

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a request asks to do (upstream's ``authorizer.AttributesRecord`` without the user)."""

    verb: str
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


def request_attributes(method: str, path: str, query: Mapping[str, str] | None = None) -> Attributes:
    """Upstream's RequestInfoFactory: resource requests under /api and /apis, everything else a path."""
    parts = [unquote(p) for p in path.strip("/").split("/") if p]
    method = method.upper()
    q = query or {}
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Attributes(
            verb=method.lower() if method != "HEAD" else "head", resource_request=False, path=path
        )
    watch_prefix = False
    if rest[0] == "watch":  # the deprecated /watch/ path prefix
        watch_prefix, rest = True, rest[1:]
        if not rest:
            return Attributes(verb=method.lower(), resource_request=False, path=path)
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if method in ("GET", "HEAD"):
        if watch_prefix or str(q.get("watch", "")).lower() in ("true", "1"):
            verb = "watch"
        else:
            verb = "get" if name else "list"
        if verb in ("list", "watch") and not name:
            # A list or watch of one object by field selector is authorized as that name, as upstream does.
            for term in str(q.get("fieldSelector", "")).split(","):
                key, eq, value = term.partition("=")
                if eq and key.strip() == "metadata.name" and not value.startswith("="):
                    name = value.strip()
    elif method == "DELETE":
        verb = "delete" if name else "deletecollection"
    else:
        verb = _METHOD_VERBS.get(method, method.lower())
    return Attributes(
        verb=verb,
        resource_request=True,
        api_group=group,
        api_version=version,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
        path=path,
    )


def forbidden_message(user: UserInfo, a: Attributes) -> str:
    """The sentence upstream's 403 carries after ``... is forbidden: ``."""
    if not a.resource_request:
        return f'User "{user.name}" cannot {a.verb} path "{a.path}"'
    scope = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    return f'User "{user.name}" cannot {a.verb} resource "{a.combined_resource}" in API group "{a.api_group}" {scope}'


def forbidden_error(user: UserInfo, a: Attributes, reason: str = "") -> errors.ApiError:
    """The 403 ``metav1.Status`` of a denied request, worded as kube-apiserver's."""
    msg = forbidden_message(user, a) + (f": {reason}" if reason else "")
    if not a.resource_request:
        return errors.forbidden(f"forbidden: {msg}")
    subject = errors.qualified(a.resource, a.api_group) + (f' "{a.name}"' if a.name else "")
    return errors.forbidden(
        f"{subject} is forbidden: {msg}", name=a.name or None, resource=a.resource, group=a.api_group
    )


# ---------------------------------------------------------------------------------------------------------
# Rules


@dataclass(frozen=True, slots=True)
class Rule:
    """One PolicyRule, its lists as frozensets for membership tests."""

    verbs: frozenset[str]
    api_groups: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    resource_names: frozenset[str] = frozenset()
    non_resource_urls: tuple[str, ...] = ()
    source: Obj = field(default_factory=dict, compare=False, hash=False)

    @classmethod
    def from_api(cls, rule: Obj) -> Rule:
        return cls(
            verbs=frozenset(rule.get("verbs") or ()),
            api_groups=frozenset(rule.get("apiGroups") or ()),
            resources=frozenset(rule.get("resources") or ()),
            resource_names=frozenset(rule.get("resourceNames") or ()),
            non_resource_urls=tuple(rule.get("nonResourceURLs") or ()),
            source=rule,
        )

    def allows(self, a: Attributes) -> bool:
        if "*" not in self.verbs and a.verb not in self.verbs:
            return False
        if not a.resource_request:
            return any(_url_matches(u, a.path) for u in self.non_resource_urls)
        if "*" not in self.api_groups and a.api_group not in self.api_groups:
            return False
        res = self.resources
        if not ("*" in res or a.combined_resource in res or (a.subresource and f"*/{a.subresource}" in res)):
            return False
        return not self.resource_names or a.name in self.resource_names


def _url_matches(rule_url: str, path: str) -> bool:
    if rule_url == "*" or rule_url == path:
        return True
    return rule_url.endswith("*") and path.startswith(rule_url[:-1])


def _rules(obj: Obj) -> tuple[Rule, ...]:
    return tuple(Rule.from_api(r) for r in obj.get("rules") or () if isinstance(r, dict))


@dataclass(frozen=True, slots=True)
class _Grant:
    """One binding as the index holds it: where it applies ("" = cluster-wide) and which role it names."""

    namespace: str
    role_kind: str
    role_name: str
    binding: str


def _subject_keys(subject: Obj, binding_namespace: str) -> str | None:
    kind, name = subject.get("kind"), subject.get("name") or ""
    if kind == "User":
        return "u:" + name
    if kind == "Group":
        return "g:" + name
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return "u:" + service_account_username(ns, name) if ns else None
    return None


# ---------------------------------------------------------------------------------------------------------
# The authorizer


class RBACAuthorizer:
    """Decides requests from the RBAC objects in ``api``'s store (see the module docstring)."""

    def __init__(self, api: ClusterApi, *, always_allow: bool = False) -> None:
        self.api = api
        self.always_allow = always_allow
        self._roles: dict[tuple[str, str], tuple[Rule, ...]] = {}
        self._cluster_roles: dict[str, tuple[Rule, ...]] = {}
        self._grants: dict[str, list[_Grant]] = {}
        self._binding_subjects: dict[tuple[str, str, str], list[str]] = {}
        self._decisions: dict[tuple[Any, ...], bool] = {}
        self._aggregating = False
        self._types = {
            plural: api.registry.get(RBAC_GROUP, "v1", plural)
            for plural in ("roles", "clusterroles", "rolebindings", "clusterrolebindings")
        }
        self.reload()
        api.observers.append(self._observe)

    # -- index ----------------------------------------------------------------------------------------------

    def reload(self) -> None:
        """Rebuild the index from the store (at start; observers keep it current afterwards)."""
        self._roles.clear()
        self._cluster_roles.clear()
        self._grants.clear()
        self._binding_subjects.clear()
        self._decisions.clear()
        for plural, rtype in self._types.items():
            if rtype is None:
                continue
            for st in self.api.store.scan(rtype.storage_key):
                self._put(plural, st.obj)

    def _put(self, plural: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace") or "", meta.get("name") or ""
        if plural == "roles":
            self._roles[(ns, name)] = _rules(obj)
        elif plural == "clusterroles":
            self._cluster_roles[name] = _rules(obj)
        else:
            self._drop_binding(plural, ns, name)
            ref = obj.get("roleRef") or {}
            grant = _Grant(ns, str(ref.get("kind") or ""), str(ref.get("name") or ""), name)
            keys = []
            for subject in obj.get("subjects") or ():
                key = _subject_keys(subject, ns) if isinstance(subject, dict) else None
                if key is not None:
                    self._grants.setdefault(key, []).append(grant)
                    keys.append(key)
            self._binding_subjects[(plural, ns, name)] = keys

    def _drop(self, plural: str, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        ns, name = meta.get("namespace") or "", meta.get("name") or ""
        if plural == "roles":
            self._roles.pop((ns, name), None)
        elif plural == "clusterroles":
            self._cluster_roles.pop(name, None)
        else:
            self._drop_binding(plural, ns, name)

    def _drop_binding(self, plural: str, ns: str, name: str) -> None:
        for key in self._binding_subjects.pop((plural, ns, name), ()):
            grants = self._grants.get(key)
            if grants:
                grants[:] = [g for g in grants if not (g.namespace == ns and g.binding == name)]
                if not grants:
                    del self._grants[key]

    def _observe(self, rtype: ResourceType, etype: str, new: Obj | None, old: Obj | None) -> None:
        if rtype.group != RBAC_GROUP:
            return  # every write of every kind passes here: one comparison for all the others
        self._decisions.clear()
        plural = rtype.plural
        if etype == "DELETED":
            if old is not None:
                self._drop(plural, old)
        elif new is not None:
            self._put(plural, new)
        if plural == "clusterroles" and not self._aggregating:
            self.aggregate()

    # -- aggregation ----------------------------------------------------------------------------------------

    def aggregate(self) -> None:
        """Write into every ClusterRole with an aggregationRule the rules of the ClusterRoles it selects,
        as upstream's clusterrole-aggregation controller does (selectors in order, roles by name, no duplicates)."""
        rtype = self._types["clusterroles"]
        if rtype is None:
            return
        self._aggregating = True
        try:
            # A change can feed another aggregated role (edit aggregates into admin): repeat until stable.
            for _ in range(8):
                changed = False
                roles = sorted(self.api.store.scan(rtype.storage_key), key=lambda st: st.key[1])
                for st in roles:
                    rule = st.obj.get("aggregationRule")
                    if not isinstance(rule, dict):
                        continue
                    wanted = _aggregated_rules(st.obj, rule, roles)
                    if wanted == list(st.obj.get("rules") or []):
                        continue
                    new = dict(st.obj)
                    new["rules"] = wanted
                    try:
                        self.api.update(rtype, new, None, st.key[1], field_manager=AGGREGATION_MANAGER)
                        changed = True
                    except errors.ApiError as e:  # raced by a writer: the next change aggregates again
                        log.debug("aggregating %s: %s", st.key[1], e)
                if not changed:
                    break
        finally:
            self._aggregating = False

    # -- decisions ------------------------------------------------------------------------------------------

    def authorize(self, user: UserInfo, a: Attributes) -> bool:
        if self.always_allow or user.is_master:
            return True
        key = (user.name, user.groups, a)
        hit = self._decisions.get(key)
        if hit is not None:
            return hit
        allowed = any(r.allows(a) for r in self._rules_for(user, a.namespace))
        if len(self._decisions) >= _DECISION_CACHE_LIMIT:
            self._decisions.clear()
        self._decisions[key] = allowed
        return allowed

    def _rules_for(self, user: UserInfo, namespace: str) -> Iterable[Rule]:
        """Rules granted to ``user`` cluster-wide and in ``namespace`` (lazily, so a decision stops at the first
        match)."""
        keys = ["u:" + user.name, *("g:" + g for g in user.groups)]
        for key in keys:
            for g in self._grants.get(key, ()):
                if g.namespace and g.namespace != namespace:
                    continue
                if g.role_kind == "ClusterRole":
                    yield from self._cluster_roles.get(g.role_name, ())
                elif g.role_kind == "Role" and g.namespace:
                    yield from self._roles.get((g.namespace, g.role_name), ())

    def explain(self, user: UserInfo, a: Attributes) -> str:
        """Why ``user`` may do ``a``, worded as upstream's RBAC reason (for access reviews)."""
        if self.always_allow:
            return ""
        if user.is_master:
            return ""
        for key in ["u:" + user.name, *("g:" + g for g in user.groups)]:
            for g in self._grants.get(key, ()):
                if g.namespace and g.namespace != a.namespace:
                    continue
                if g.role_kind == "ClusterRole":
                    rules = self._cluster_roles.get(g.role_name, ())
                else:
                    rules = self._roles.get((g.namespace, g.role_name), ())
                if any(r.allows(a) for r in rules):
                    kind, who = ("User", key[2:]) if key.startswith("u:") else ("Group", key[2:])
                    if g.namespace:
                        return (
                            f'RBAC: allowed by RoleBinding "{g.binding}/{g.namespace}" of {g.role_kind} '
                            f'"{g.role_name}" to {kind} "{who}"'
                        )
                    return f'RBAC: allowed by ClusterRoleBinding "{g.binding}" of ClusterRole "{g.role_name}" to {kind} "{who}"'
        return ""

    def rules_review(self, user: UserInfo, namespace: str) -> tuple[list[Obj], list[Obj]]:
        """(resourceRules, nonResourceRules) of SelfSubjectRulesReview for ``user`` in ``namespace``."""
        if self.always_allow or user.is_master:
            return (
                [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
            )
        resource_rules: list[Obj] = []
        non_resource_rules: list[Obj] = []
        seen: set[int] = set()
        for r in self._rules_for(user, namespace):
            if id(r) in seen:
                continue
            seen.add(id(r))
            if r.non_resource_urls:
                non_resource_rules.append(
                    {"verbs": sorted(r.verbs), "nonResourceURLs": list(r.non_resource_urls)}
                )
            if r.resources or r.api_groups:
                out: Obj = {"verbs": sorted(r.verbs), "apiGroups": sorted(r.api_groups)}
                out["resources"] = sorted(r.resources)
                if r.resource_names:
                    out["resourceNames"] = sorted(r.resource_names)
                resource_rules.append(out)
        return resource_rules, non_resource_rules


def _aggregated_rules(target: Obj, rule: Obj, roles: list[Any]) -> list[Obj]:
    out: list[Obj] = []
    me = (target.get("metadata") or {}).get("name")
    for sel in rule.get("clusterRoleSelectors") or ():
        if not isinstance(sel, dict):
            continue
        try:
            selector = LabelSelector.from_dict(sel)
        except (errors.ApiError, ValueError, AttributeError):
            continue
        for st in roles:
            if st.key[1] == me or not selector.matches((st.obj.get("metadata") or {}).get("labels")):
                continue
            for r in st.obj.get("rules") or ():
                if r not in out:
                    out.append(r)
    return out
