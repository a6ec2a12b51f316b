"""Discovery documents built from the resource registry: ``/version``, ``/api``, ``/apis``, per-group and
per-group-version resource lists, and aggregated discovery (``apidiscovery.k8s.io/v2``).

kubectl asks ``/api`` and ``/apis`` for aggregated discovery and then needs no per-group-version requests; the
official Python client only reads the legacy documents. Both are served from the same registry, so a CRD added at
run time shows up everywhere at once. Bodies are cached per ``registry.generation``; callers must not mutate them.
"""

from __future__ import annotations

import platform
import re
import weakref
from collections.abc import Callable
from importlib import metadata
from typing import Any

from kubesched.cluster.resources import ResourceRegistry, ResourceType

Body = dict[str, Any]

AGGREGATED_CONTENT_TYPE = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

SERVER_MAJOR = "1"
SERVER_MINOR = "32"
GIT_VERSION = "v1.32.0+kubesched"

# Subresource name → (verbs, response kind as (group, version, kind) or None for the parent's own kind).
SUBRESOURCES: dict[str, tuple[tuple[str, ...], tuple[str, str, str] | None]] = {
    "status": (("get", "patch", "update"), None),
    "scale": (("get", "patch", "update"), ("autoscaling", "v1", "Scale")),
    "binding": (("create",), ("", "v1", "Binding")),
    "eviction": (("create",), ("policy", "v1", "Eviction")),
    "finalize": (("update",), None),
    "log": (("get",), None),
    "token": (("create",), ("authentication.k8s.io", "v1", "TokenRequest")),
}


def version_info(
    *, major: str = SERVER_MAJOR, minor: str = SERVER_MINOR, git_version: str = GIT_VERSION
) -> Body:
    """The ``/version`` body. kubectl's dispatcher picks its client by ``minor``, so it must say 32."""
    return {
        "major": major,
        "minor": minor,
        "gitVersion": git_version,
        "gitCommit": f"kubesched-{_package_version()}",
        "gitTreeState": "clean",
        "buildDate": "2024-12-11T00:00:00Z",
        "goVersion": f"python{platform.python_version()}",
        "compiler": platform.python_implementation().lower(),
        "platform": f"{platform.system().lower()}/{_arch()}",
    }


def _package_version() -> str:
    try:
        return metadata.version("kubesched")
    except metadata.PackageNotFoundError:
        return "dev"


def _arch() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine, machine)


def media_ranges(accept: str) -> list[tuple[str, dict[str, str]]]:
    """``Accept`` split into (media type, parameters) pairs, in the order given."""
    out = []
    for part in accept.split(","):
        pieces = [p.strip() for p in part.split(";")]
        if not pieces[0]:
            continue
        params = {}
        for piece in pieces[1:]:
            key, _, value = piece.partition("=")
            params[key.strip().lower()] = value.strip().strip('"')
        out.append((pieces[0].lower(), params))
    return out


def wants_aggregated(accept_header: str) -> bool:
    """True when the client accepts aggregated discovery v2 (kubectl does; the Python clients do not)."""
    for media_type, params in media_ranges(accept_header or ""):
        if (
            media_type in ("application/json", "*/*")
            and params.get("as") == "APIGroupDiscoveryList"
            and params.get("g") == "apidiscovery.k8s.io"
            and params.get("v") == "v2"
        ):
            return True
    return False


_VERSION_RE = re.compile(r"v(\d+)(?:(alpha|beta)(\d+))?")


def version_priority(version: str) -> tuple[int, int, int, str]:
    """Sort key putting versions in Kubernetes order: v2 > v1 > v1beta2 > v1beta1 > v1alpha1 > anything else."""
    m = _VERSION_RE.fullmatch(version)
    if m is None:
        return (3, 0, 0, version)
    stability = {None: 0, "beta": 1, "alpha": 2}[m.group(2)]
    return (stability, -int(m.group(1)), -int(m.group(3) or 0), "")


def _gv(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


def _subresource_kind(rtype: ResourceType, sub: str) -> tuple[str, str, str]:
    fixed = SUBRESOURCES.get(sub, ((), None))[1]
    return fixed if fixed is not None else (rtype.group, rtype.version, rtype.kind)


def _subresource_verbs(sub: str) -> list[str]:
    return list(SUBRESOURCES.get(sub, (("get", "patch", "update"), None))[0])


class Discovery:
    """Discovery bodies for one registry, rebuilt when its ``generation`` moves."""

    def __init__(self, registry: ResourceRegistry, *, server_address: str = "") -> None:
        self.registry = registry
        self.server_address = server_address
        self._generation = -1
        self._cache: dict[tuple[Any, ...], Any] = {}

    def _cached(self, key: tuple[Any, ...], build: Callable[[], Any]) -> Any:
        if self._generation != self.registry.generation:
            self._cache.clear()
            self._generation = self.registry.generation
        if key not in self._cache:
            self._cache[key] = build()
        return self._cache[key]

    # -- what is served ------------------------------------------------------------------------------------

    def _versions(self, group: str) -> list[str]:
        """Served versions of a group, preferred first (Kubernetes version order, stable among equals)."""
        versions = self.registry.groups().get(group, [])
        return sorted(versions, key=version_priority)

    def _groups(self) -> list[str]:
        return [g for g in self.registry.groups() if g]

    # -- legacy --------------------------------------------------------------------------------------------

    def api_versions(self) -> Body:
        """``GET /api`` (legacy ``APIVersions``)."""

        def build() -> Body:
            body: Body = {"kind": "APIVersions", "versions": self._versions("") or ["v1"]}
            if self.server_address:
                body["serverAddressByClientCIDRs"] = [
                    {"clientCIDR": "0.0.0.0/0", "serverAddress": self.server_address}
                ]
            return body

        return self._cached(("api",), build)

    def _group_body(self, group: str) -> Body:
        versions = [{"groupVersion": _gv(group, v), "version": v} for v in self._versions(group)]
        return {"name": group, "versions": versions, "preferredVersion": versions[0]}

    def api_group_list(self) -> Body:
        """``GET /apis`` (legacy ``APIGroupList``)."""
        return self._cached(
            ("apis",),
            lambda: {
                "kind": "APIGroupList",
                "apiVersion": "v1",
                "groups": [self._group_body(g) for g in self._groups()],
            },
        )

    def api_group(self, group: str) -> Body | None:
        """``GET /apis/<group>`` (``APIGroup``), or None when the group is not served."""
        if not group or group not in self.registry.groups():
            return None
        return self._cached(
            ("group", group), lambda: {"kind": "APIGroup", "apiVersion": "v1", **self._group_body(group)}
        )

    def api_resource_list(self, group: str, version: str) -> Body | None:
        """``GET /api/v1`` or ``GET /apis/<group>/<version>`` (``APIResourceList``), or None if not served."""
        types = self.registry.in_group_version(group, version)
        if not types:
            return None

        def build() -> Body:
            resources: list[Body] = []
            for t in types:
                resources.append(self._legacy_resource(t))
                for sub in t.subresources:
                    resources.append(self._legacy_subresource(t, sub))
            return {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": _gv(group, version),
                "resources": resources,
            }

        return self._cached(("resources", group, version), build)

    @staticmethod
    def _legacy_resource(t: ResourceType) -> Body:
        entry: Body = {
            "name": t.plural,
            "singularName": t.singular,
            "namespaced": t.namespaced,
            "kind": t.kind,
            "verbs": list(t.verbs),
        }
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        return entry

    @staticmethod
    def _legacy_subresource(t: ResourceType, sub: str) -> Body:
        group, version, kind = _subresource_kind(t, sub)
        entry: Body = {"name": f"{t.plural}/{sub}", "singularName": "", "namespaced": t.namespaced}
        if (group, version) != (t.group, t.version):
            entry["group"], entry["version"] = group, version
        entry["kind"] = kind
        entry["verbs"] = _subresource_verbs(sub)
        return entry

    # -- aggregated (apidiscovery.k8s.io/v2) ----------------------------------------------------------------

    def aggregated(self, core: bool) -> Body:
        """The ``APIGroupDiscoveryList`` for ``/api`` (``core=True``) or ``/apis``; send it with
        ``Content-Type: AGGREGATED_CONTENT_TYPE``."""

        def build() -> Body:
            groups = [""] if core else self._groups()
            return {
                "kind": "APIGroupDiscoveryList",
                "apiVersion": "apidiscovery.k8s.io/v2",
                "metadata": {},
                "items": [self._aggregated_group(g) for g in groups],
            }

        return self._cached(("aggregated", core), build)

    def _aggregated_group(self, group: str) -> Body:
        versions = []
        for version in self._versions(group):
            resources = [self._aggregated_resource(t) for t in self.registry.in_group_version(group, version)]
            versions.append({"version": version, "resources": resources, "freshness": "Current"})
        return {"metadata": {"name": group}, "versions": versions}

    @staticmethod
    def _aggregated_resource(t: ResourceType) -> Body:
        entry: Body = {
            "resource": t.plural,
            "responseKind": {"group": t.group, "version": t.version, "kind": t.kind},
            "scope": "Namespaced" if t.namespaced else "Cluster",
            "singularResource": t.singular,
            "verbs": list(t.verbs),
        }
        if t.short_names:
            entry["shortNames"] = list(t.short_names)
        if t.categories:
            entry["categories"] = list(t.categories)
        if t.subresources:
            entry["subresources"] = []
            for sub in t.subresources:
                group, version, kind = _subresource_kind(t, sub)
                entry["subresources"].append(
                    {
                        "subresource": sub,
                        "responseKind": {"group": group, "version": version, "kind": kind},
                        "verbs": _subresource_verbs(sub),
                    }
                )
        return entry


# -- module-level entry points (one cached Discovery per registry) ------------------------------------------------

_per_registry: weakref.WeakKeyDictionary[ResourceRegistry, Discovery] = weakref.WeakKeyDictionary()


def for_registry(registry: ResourceRegistry) -> Discovery:
    """The shared, cached ``Discovery`` of a registry."""
    found = _per_registry.get(registry)
    if found is None:
        found = _per_registry[registry] = Discovery(registry)
    return found


def api_versions(registry: ResourceRegistry | None = None, *, server_address: str = "") -> Body:
    """``GET /api``. Without a registry: the core group's only version, v1."""
    if registry is None:
        body: Body = {"kind": "APIVersions", "versions": ["v1"]}
        if server_address:
            body["serverAddressByClientCIDRs"] = [
                {"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}
            ]
        return body
    return for_registry(registry).api_versions()


def api_group_list(registry: ResourceRegistry) -> Body:
    """``GET /apis`` (legacy)."""
    return for_registry(registry).api_group_list()


def api_group(registry: ResourceRegistry, group: str) -> Body | None:
    """``GET /apis/<group>``, or None when not served."""
    return for_registry(registry).api_group(group)


def api_resource_list(registry: ResourceRegistry, group: str, version: str) -> Body | None:
    """``GET /api/<version>`` (group "") or ``GET /apis/<group>/<version>``, or None when not served."""
    return for_registry(registry).api_resource_list(group, version)


def aggregated(registry: ResourceRegistry, core: bool) -> Body:
    """Aggregated discovery for ``/api`` (``core=True``) or ``/apis``."""
    return for_registry(registry).aggregated(core)
