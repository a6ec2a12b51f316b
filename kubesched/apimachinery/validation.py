"""Names, label keys and values (``k8s.io/apimachinery/pkg/util/validation`` and ``api/validate/content``).

Each ``is_*`` function returns the list of reasons a value is invalid, empty when it is valid, worded exactly as
upstream (the API server puts them in its 422 causes and the selector parser in its 400s).
"""

from __future__ import annotations

import re
from functools import lru_cache

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + "(\\." + DNS1123_LABEL_FMT + ")*"
DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = "(" + LABEL_KEY_FMT + ")?"
CONFIG_MAP_KEY_FMT = "[-._a-zA-Z0-9]+"

_DNS1123_LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character"
)
_DNS1123_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)
_DNS1035_LABEL_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
    "start with an alphabetic character, and end with an alphanumeric character"
)
_LABEL_KEY_MSG = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
_LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_CONFIG_MAP_KEY_MSG = "a valid config key must consist of alphanumeric characters, '-', '_' or '.'"

_dns1123_label_re = re.compile(DNS1123_LABEL_FMT)
_dns1123_subdomain_re = re.compile(DNS1123_SUBDOMAIN_FMT)
_dns1035_label_re = re.compile(DNS1035_LABEL_FMT)
_label_key_re = re.compile(LABEL_KEY_FMT)
_label_value_re = re.compile(LABEL_VALUE_FMT)
_config_map_key_re = re.compile(CONFIG_MAP_KEY_FMT)

# Upstream's shared field-error details (k8s.io/apimachinery/pkg/api/validation).
FIELD_IMMUTABLE = "field is immutable"
IS_NEGATIVE = "must be greater than or equal to 0"
NOT_POSITIVE = "must be greater than zero"


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream's wording for a failed format check, examples included (the odd double space is theirs)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    return f"must be no more than {length} characters"


def is_dns1123_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _dns1123_label_re.fullmatch(value):
        if _dns1123_subdomain_re.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _dns1123_subdomain_re.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _dns1035_label_re.fullmatch(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``[prefix/]name`` as ``labels.Requirement`` checks keys (util/validation's ``IsQualifiedName`` wording)."""
    return list(_qualified_name_errors(value, "a qualified name "))


def is_label_key(value: str) -> list[str]:
    """A label key as object metadata validation words it (also annotation keys, finalizers, taint keys)."""
    return list(_qualified_name_errors(value, "a valid label key "))


@lru_cache(maxsize=4096)
def _qualified_name_errors(value: str, what: str) -> tuple[str, ...]:
    # The same few keys (label keys, reportingController, finalizers) come with every write: remember them.
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return (
            what
            + regex_error(_LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')",
        )
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + max_len_error(63))
    if not _label_key_re.fullmatch(name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return tuple(errs)


def is_label_value(value: str) -> list[str]:
    """A label value: empty, or at most 63 characters of the label-name alphabet."""
    return list(_label_value_errors(value))


@lru_cache(maxsize=4096)
def _label_value_errors(value: str) -> tuple[str, ...]:
    # Selectors and label writes repeat the same values; the regex costs more than the lookup.
    errs: list[str] = []
    if len(value) > 63:
        errs.append(max_len_error(63))
    if not _label_value_re.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return tuple(errs)


def is_config_map_key(value: str) -> list[str]:
    errs: list[str] = []
    if len(value) > 253:
        errs.append(max_len_error(253))
    if not _config_map_key_re.fullmatch(value):
        errs.append(regex_error(_CONFIG_MAP_KEY_MSG, CONFIG_MAP_KEY_FMT, "key.name", "KEY_NAME", "key-name"))
    if value == ".":
        errs.append("must not be '.'")
    elif value == "..":
        errs.append("must not be '..'")
    elif value.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _mask_trailing_dash(name: str) -> str:
    # A generateName prefix may end in '-': the random suffix follows it.
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns_subdomain(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def validate_path_segment_name(name: str, prefix: bool = False) -> list[str]:
    """The rule every stored name obeys: it must fit in one URL path segment."""
    if not prefix and name in (".", ".."):
        return [f"may not be '{name}'"]
    return [f"may not contain '{bad}'" for bad in ("/", "%") if bad in name]
