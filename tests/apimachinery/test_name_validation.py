"""Name and label validators against plain regex models of the upstream rules."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from kubesched.apimachinery import validation as v

# Mostly valid characters, with a few that are not, so both outcomes are common.
names = st.text(alphabet="abz09-._A/", max_size=70)
long_names = st.builds(lambda a, n: a * n, st.sampled_from(["a", "ab", "a.b", "a-"]), st.integers(0, 140))
any_name = st.one_of(names, long_names)

LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


@given(any_name)
def test_dns_names(value: str) -> None:
    assert (not v.is_dns1123_label(value)) == (len(value) <= 63 and bool(LABEL.fullmatch(value)))
    assert (not v.is_dns1123_subdomain(value)) == (len(value) <= 253 and bool(SUBDOMAIN.fullmatch(value)))
    assert (not v.is_dns1035_label(value)) == (len(value) <= 63 and bool(DNS1035.fullmatch(value)))


@given(any_name)
def test_label_values(value: str) -> None:
    assert (not v.is_label_value(value)) == (
        value == "" or (len(value) <= 63 and bool(NAME.fullmatch(value)))
    )


@given(st.one_of(any_name, st.builds(lambda p, n: f"{p}/{n}", any_name, any_name)))
def test_qualified_names(value: str) -> None:
    prefix, slash, name = value.rpartition("/")
    valid = (
        value.count("/") <= 1
        and (not slash or (0 < len(prefix) <= 253 and bool(SUBDOMAIN.fullmatch(prefix))))
        and 0 < len(name) <= 63
        and bool(NAME.fullmatch(name))
    )
    assert (not v.is_qualified_name(value)) == valid
    # The two wordings of the same rule differ only in how a key with two slashes is described.
    assert len(v.is_label_key(value)) == len(v.is_qualified_name(value))
    if value.count("/") > 1:
        assert v.is_qualified_name(value)[0].startswith("a qualified name must consist")
        assert v.is_label_key(value)[0].startswith("a valid label key must consist")
    else:
        assert v.is_label_key(value) == v.is_qualified_name(value)


@given(any_name)
def test_config_map_keys(value: str) -> None:
    valid = (
        len(value) <= 253
        and bool(re.fullmatch(r"[-._a-zA-Z0-9]+", value))
        and value not in (".", "..")
        and not value.startswith("..")
    )
    assert (not v.is_config_map_key(value)) == valid


def test_messages_are_upstreams() -> None:
    assert v.is_dns1123_label("a.b") == ["must not contain dots"]
    assert v.is_dns1123_subdomain("A") == [
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
        "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
    ]
    assert v.is_qualified_name("a/" + "b" * 64) == ["name part must be no more than 63 characters"]
    assert v.name_is_dns_subdomain("gen-", prefix=True) == []  # a generateName prefix may end in '-'
