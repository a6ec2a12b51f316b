"""``resource_path`` leaves plain names as they are and quotes the rest exactly as ``urllib.parse.quote`` does."""

from __future__ import annotations

from urllib.parse import quote

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.client.rest import resource_path

segments = st.one_of(
    st.text("abz09-._~", max_size=12),
    st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8),
    st.sampled_from(["", "a b", "a/b", "a%2Fb", "x:y", "é", "a?b", "a#b"]),
)


def _reference(
    api_version: str, plural: str, namespace: str | None, name: str | None, sub: str | None
) -> str:
    parts = ["/api/" + api_version if "/" not in api_version else "/apis/" + api_version]
    if namespace:
        parts.append("namespaces/" + quote(namespace, safe=""))
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=":"))
    if sub:
        parts.append(sub)
    return "/".join(parts)


@settings(max_examples=500, deadline=None)
@given(
    st.sampled_from(["v1", "events.k8s.io/v1"]),
    st.one_of(st.none(), segments),
    segments,
    st.sampled_from([None, "binding", "status"]),
)
def test_same_path_as_quoting_every_segment(
    api_version: str, namespace: str | None, name: str, sub: str | None
) -> None:
    if sub and not name:
        sub = None
    assert resource_path(api_version, "pods", namespace, name, sub) == _reference(
        api_version, "pods", namespace, name, sub
    )
