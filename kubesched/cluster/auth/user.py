"""Who a request is: the user, group and extra names kube-apiserver's authenticators produce.

The well-known names live here so the authenticators, the authorizer and the bootstrap policy spell them once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

SYSTEM_MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS_USER = "system:anonymous"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SA_USER_PREFIX = "system:serviceaccount:"
SA_GROUP_PREFIX = "system:serviceaccounts:"

# Extra keys upstream attaches to a service account's identity (``serviceaccount.go``).
EXTRA_CREDENTIAL_ID = "authentication.kubernetes.io/credential-id"
EXTRA_POD_NAME = "authentication.kubernetes.io/pod-name"
EXTRA_POD_UID = "authentication.kubernetes.io/pod-uid"
EXTRA_NODE_NAME = "authentication.kubernetes.io/node-name"
EXTRA_NODE_UID = "authentication.kubernetes.io/node-uid"


@dataclass(frozen=True, slots=True)
class UserInfo:
    """An authenticated (or anonymous) identity; ``groups`` keeps the authenticator's order."""

    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, hash=False)

    @property
    def is_master(self) -> bool:
        return SYSTEM_MASTERS in self.groups

    def to_api(self) -> dict[str, object]:
        """The ``authentication.k8s.io/v1`` UserInfo shape (TokenReview, SelfSubjectReview)."""
        out: dict[str, object] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


ANONYMOUS = UserInfo(ANONYMOUS_USER, groups=(UNAUTHENTICATED,))


def service_account_username(namespace: str, name: str) -> str:
    return f"{SA_USER_PREFIX}{namespace}:{name}"


def split_service_account_username(username: str) -> tuple[str, str] | None:
    """(namespace, name) of ``system:serviceaccount:<ns>:<name>``; None for any other user."""
    if not username.startswith(SA_USER_PREFIX):
        return None
    rest = username[len(SA_USER_PREFIX) :]
    ns, sep, name = rest.partition(":")
    if not sep or not ns or not name or ":" in name:
        return None
    return ns, name


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return (SERVICE_ACCOUNTS, SA_GROUP_PREFIX + namespace, AUTHENTICATED)
