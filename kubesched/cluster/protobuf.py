"""Kubernetes protobuf bodies (``application/vnd.kubernetes.protobuf``) read as the dicts JSON gives.

client-go's typed clients (kubectl's ``create`` generators, ``scale``, ``set image``; kube-scheduler;
controllers) send request bodies as protobuf and do not retry with JSON on 415. A body is the magic
``k8s\\0`` and a ``runtime.Unknown`` message: ``typeMeta`` {apiVersion, kind}, ``raw`` (the object's own
message), ``contentEncoding``, ``contentType``.

Objects are decoded with a declarative schema (``protobuf_fields.json`` beside this module, read by
``load_messages``): per message, per field, its number, JSON name, type and three flags standing for the Go
struct field:

- ``ptr``: a Go pointer, on the wire only when set, so a zero that arrives is kept (``replicas: 0``);
- ``keep``: a non-pointer scalar without ``omitempty``, shown by JSON even when zero (``containerPort: 0``);
- ``inline``: an embedded struct whose fields JSON flattens into the parent (``Volume``/``VolumeSource``).

Go writes every non-pointer field, zero or not; encoding/json drops zero scalars marked ``omitempty`` but
never structs. So the decoder emits what the wire holds, drops zero non-pointer scalars unless ``keep``,
and keeps empty structs (``"status": {}``, ``"creationTimestamp": null``), as kubectl's JSON bodies do.

Kubernetes' own types map to JSON as upstream marshals them: ``resource.Quantity`` → its string,
``intstr.IntOrString`` → int or string, ``metav1.Time`` → ``2006-01-02T15:04:05Z`` (zero → ``null``),
``metav1.MicroTime`` → six fractional digits, ``FieldsV1``/``RawExtension`` → the embedded JSON, ``bytes``
→ base64. Unknown fields of known messages are skipped (logged at debug level); a kind without a schema
raises ``UnsupportedKindError`` (the server answers 415), any other malformed body ``ProtobufError`` (400).

``encode_k8s_protobuf`` writes the bytes Go would (fields in number order, zero non-pointer fields
included, map keys sorted): tests use it, and the server may use it to answer protobuf clients.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import logging
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

PROTOBUF_CONTENT_TYPE = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"

log = logging.getLogger(__name__)

Obj = dict[str, Any]


class ProtobufError(ValueError):
    """The body is not a well-formed Kubernetes protobuf object (the server answers 400)."""


class UnsupportedKindError(ProtobufError):
    """The body is well formed but its kind has no schema here (the server answers 415)."""

    def __init__(self, api_version: str, kind: str) -> None:
        super().__init__(
            f"no protobuf schema for {api_version or '<no apiVersion>'} {kind or '<no kind>'}; "
            f"send it as application/json"
        )
        self.api_version = api_version
        self.kind = kind


# ------------------------------------------------------------------------------------------------------
# Schema


SCALARS = frozenset({"string", "bytes", "bool", "int32", "int64"})
# Messages of apimachinery with their own JSON form.
SPECIALS = frozenset({"quantity", "intorstring", "time", "microtime", "rawjson"})
# Go's zero values in JSON form (bytes as base64)
_ZERO: dict[str, Any] = {"string": "", "bytes": "", "bool": False, "int32": 0, "int64": 0}


@dataclasses.dataclass(frozen=True, slots=True)
class Field:
    number: int
    name: str  # JSON name; for an inline field, only a label
    type: str  # a scalar, a special, or a message name such as "core.PodSpec"
    repeated: bool = False
    map: bool = False  # map<string, type>, on the wire repeated {key = 1, value = 2}
    pointer: bool = False
    keep: bool = False
    inline: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    name: str
    fields: tuple[Field, ...]  # in number order
    by_number: Mapping[int, Field]
    json_keys: frozenset[str]  # its own JSON keys plus those of inline fields
    # Non-pointer singular scalars: (JSON name, zero value); JSON drops the first kind when zero, shows the second.
    omit_zero: tuple[tuple[str, Any], ...]
    show_zero: tuple[tuple[str, Any], ...]


# Read through importlib.resources, so it is found wherever the package is installed.
SCHEMA_FILE: Traversable = resources.files("kubesched.cluster") / "protobuf_fields.json"
_FLAGS = frozenset({"repeated", "map", "ptr", "keep", "inline"})


def load_messages(path: Traversable = SCHEMA_FILE) -> dict[str, Message]:
    """Read the schema table, ``protobuf_fields.json`` beside this module.

    ``{"messages": {"group.Kind": [[number, jsonName, type, *flags], ...]}}``; flags are ``repeated``,
    ``map`` (a ``map<string, type>``), ``ptr``, ``keep`` and ``inline``. The table is kept by hand: field
    numbers and types come from upstream ``generated.proto`` (k8s.io/api and k8s.io/apimachinery, master
    after 1.36), the flags from the Go types (pointer, ``omitempty``, embedded). Field numbers never change
    between releases, so older clients' bodies decode. Fields whose types live in packages not covered here
    (alpha APIs) are left out, and skipped as unknown. Loaded once, at import: only the local cluster's
    server imports this module, and it costs a few milliseconds.
    """
    table = json.loads(path.read_bytes())["messages"]
    raw: dict[str, list[Field]] = {}
    for name, rows in table.items():
        fields: list[Field] = []
        raw[name] = fields
        for row in rows:
            match row:
                case [int(number), str(json_name), str(type_), *flags] if _FLAGS.issuperset(flags):
                    fields.append(
                        Field(
                            number,
                            json_name,
                            type_,
                            repeated="repeated" in flags,
                            map="map" in flags,
                            pointer="ptr" in flags,
                            keep="keep" in flags,
                            inline="inline" in flags,
                        )
                    )
                case _:
                    raise AssertionError(f"{path.name}: {name}: bad field {row!r}")
    messages: dict[str, Message] = {}
    for name, fields in raw.items():
        ordered = tuple(sorted(fields, key=lambda f: f.number))
        plain = [
            f for f in ordered if f.type in SCALARS and not (f.repeated or f.map or f.inline or f.pointer)
        ]
        omit_zero = tuple((f.name, _ZERO[f.type]) for f in plain if not f.keep)
        show_zero = tuple((f.name, _ZERO[f.type]) for f in plain if f.keep)
        messages[name] = Message(
            name, ordered, {f.number: f for f in ordered}, frozenset(), omit_zero, show_zero
        )
    for msg in messages.values():
        for f in msg.fields:
            if f.type not in SCALARS and f.type not in SPECIALS and f.type not in messages:
                raise AssertionError(f"protobuf schema: {msg.name}.{f.name} has unknown type {f.type}")

    def keys(msg: Message) -> frozenset[str]:
        own = {f.name for f in msg.fields if not f.inline}
        for f in msg.fields:
            if f.inline:
                own |= keys(messages[f.type])
        return frozenset(own)

    return {name: dataclasses.replace(m, json_keys=keys(m)) for name, m in messages.items()}


# (apiVersion, kind) → message. DeleteOptions is accepted under any apiVersion: upstream registers it in
# every group version.
_GROUP_VERSIONS = {
    "core": "v1",
    "apps": "apps/v1",
    "batch": "batch/v1",
    "policy": "policy/v1",
    "scheduling": "scheduling.k8s.io/v1",
    "coordination": "coordination.k8s.io/v1",
    "events": "events.k8s.io/v1",
    "autoscaling": "autoscaling/v1",
    "storage": "storage.k8s.io/v1",
    "rbac": "rbac.authorization.k8s.io/v1",
    "authentication": "authentication.k8s.io/v1",
    "authorization": "authorization.k8s.io/v1",
}
_TOP_LEVEL = {
    "core": (
        "Namespace ConfigMap Secret ServiceAccount Service Pod PodTemplate Node Binding Event ResourceQuota "
        "Endpoints ReplicationController PersistentVolume PersistentVolumeClaim LimitRange"
    ),
    "apps": "Deployment ReplicaSet StatefulSet DaemonSet ControllerRevision",
    "batch": "Job CronJob",
    "policy": "PodDisruptionBudget Eviction",
    "scheduling": "PriorityClass",
    "coordination": "Lease",
    "events": "Event",
    "autoscaling": "Scale",
    "storage": "StorageClass CSIDriver CSINode CSIStorageCapacity VolumeAttachment",
    "rbac": "Role ClusterRole RoleBinding ClusterRoleBinding",
    "authentication": "TokenRequest TokenReview SelfSubjectReview",
    "authorization": "SubjectAccessReview LocalSubjectAccessReview SelfSubjectAccessReview SelfSubjectRulesReview",
}
KINDS: dict[tuple[str, str], str] = {
    (_GROUP_VERSIONS[group], kind): f"{group}.{kind}"
    for group, kinds in _TOP_LEVEL.items()
    for kind in kinds.split()
}
_ANY_VERSION_KINDS = {"DeleteOptions": "meta.DeleteOptions"}


def message_for(api_version: str, kind: str) -> str | None:
    """The schema message of a top-level kind, or None when there is none."""
    return KINDS.get((api_version, kind)) or _ANY_VERSION_KINDS.get(kind)


def supported_kinds() -> frozenset[tuple[str, str]]:
    """The (apiVersion, kind) pairs with a schema (DeleteOptions, accepted under any apiVersion, aside)."""
    return frozenset(KINDS)


# ------------------------------------------------------------------------------------------------------
# Wire format

_VARINT, _FIXED64, _LEN, _FIXED32 = 0, 1, 2, 5
_U64 = (1 << 64) - 1


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ProtobufError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise ProtobufError("varint longer than 10 bytes")


def _fields(buf: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of each field: an int for numbers, bytes for length-delimited ones."""
    pos, end = 0, len(buf)
    while pos < end:
        # Single-byte varints (most tags, lengths and numbers) are read inline: this loop is the hot path.
        key = buf[pos]
        key, pos = (key, pos + 1) if key < 0x80 else _read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError("field number 0")
        value: int | bytes
        if wire == _LEN:
            length = buf[pos] if pos < end else 0x80
            length, pos = (length, pos + 1) if length < 0x80 else _read_varint(buf, pos)
            if pos + length > end:
                raise ProtobufError("truncated length-delimited field")
            value, pos = buf[pos : pos + length], pos + length
        elif wire == _VARINT:
            value = buf[pos] if pos < end else 0x80
            value, pos = (value, pos + 1) if value < 0x80 else _read_varint(buf, pos)
        elif wire in (_FIXED64, _FIXED32):
            size = 8 if wire == _FIXED64 else 4
            if pos + size > end:
                raise ProtobufError("truncated fixed-width field")
            value, pos = int.from_bytes(buf[pos : pos + size], "little"), pos + size
        else:  # groups (3, 4) are proto1 relics, never written for Kubernetes types
            raise ProtobufError(f"unsupported wire type {wire}")
        yield number, wire, value


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _signed32(value: int) -> int:
    """An int32 as Go reads it: the varint's low 32 bits."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _text(value: bytes) -> str:
    # Go strings may hold invalid UTF-8; encoding/json writes U+FFFD for it, as "replace" does.
    return value.decode("utf-8", errors="replace")


# ------------------------------------------------------------------------------------------------------
# Decoding


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class _Decoder:
    def __init__(self, messages: Mapping[str, Message]) -> None:
        self.messages = messages
        self.skipped: list[str] = []

    def message(self, buf: bytes, name: str) -> Obj:
        msg = self.messages[name]
        out: Obj = {}
        for number, wire, value in _fields(buf):
            f = msg.by_number.get(number)
            if f is None:
                self.skipped.append(f"{name}#{number}")
                continue
            if f.inline:
                out.update(self.message(self._bytes(f, wire, value), f.type))
            elif f.map:
                key, item = self._map_entry(f, self._bytes(f, wire, value))
                out.setdefault(f.name, {})[key] = item
            elif f.repeated:
                out.setdefault(f.name, []).extend(self._repeated(f, wire, value))
            else:
                out[f.name] = self.value(f, wire, value)
        for key, zero in msg.omit_zero:
            if key in out and out[key] == zero:
                del out[key]
        for key, zero in msg.show_zero:
            out.setdefault(key, zero)
        return out

    def value(self, f: Field, wire: int, value: int | bytes) -> Any:
        t = f.type
        if t in ("int32", "int64", "bool"):
            if not isinstance(value, int) or wire != _VARINT:
                raise ProtobufError(f"{f.name}: expected a varint for {t}")
            if t == "bool":
                return bool(value)
            return _signed32(value) if t == "int32" else _signed(value)
        data = self._bytes(f, wire, value)
        if t == "string":
            return _text(data)
        if t == "bytes":
            return base64.b64encode(data).decode("ascii")
        if t in SPECIALS:
            return self.special(t, data)
        return self.message(data, t)

    def special(self, t: str, data: bytes) -> Any:
        fields = {number: value for number, _, value in _fields(data)}
        if t == "quantity":
            raw = fields.get(1, b"")
            return _text(raw) if isinstance(raw, bytes) and raw else "0"
        if t == "intorstring":
            if fields.get(1, 0) == 1:
                raw = fields.get(3, b"")
                return _text(raw) if isinstance(raw, bytes) else ""
            return _signed32(_int(fields.get(2, 0)))
        if t in ("time", "microtime"):
            if not data:
                return None  # the zero time, which encoding/json writes as null
            seconds, nanos = _signed(_int(fields.get(1, 0))), _signed(_int(fields.get(2, 0)))
            return _format_time(seconds, nanos, micro=t == "microtime")
        # rawjson: FieldsV1 and RawExtension carry JSON text
        raw = fields.get(1, b"")
        if not isinstance(raw, bytes) or not raw:
            return None
        try:
            return json.loads(raw)
        except (ValueError, RecursionError) as e:
            raise ProtobufError(f"embedded raw object is not JSON: {e}") from None

    def _repeated(self, f: Field, wire: int, value: int | bytes) -> list[Any]:
        if f.type in ("int32", "int64", "bool") and wire == _LEN:  # packed, as proto3 encoders write
            assert isinstance(value, bytes)
            return [self.value(f, _VARINT, number) for number in _packed_varints(value)]
        return [self.value(f, wire, value)]

    def _map_entry(self, f: Field, data: bytes) -> tuple[str, Any]:
        key, item, seen = "", None, False
        for number, wire, value in _fields(data):
            if number == 1:
                key = _text(self._bytes(f, wire, value))
            elif number == 2:
                item, seen = self.value(f, wire, value), True
        if not seen:  # Go's zero value of the value type
            item = _ZERO[f.type] if f.type in ("int32", "int64", "bool") else self.value(f, _LEN, b"")
        return key, item

    @staticmethod
    def _bytes(f: Field, wire: int, value: int | bytes) -> bytes:
        if wire != _LEN or not isinstance(value, bytes):
            raise ProtobufError(f"{f.name}: expected a length-delimited field for {f.type}")
        return value


def _int(value: int | bytes) -> int:
    if not isinstance(value, int):
        raise ProtobufError("expected a varint")
    return value


def _packed_varints(data: bytes) -> Iterator[int]:
    pos = 0
    while pos < len(data):
        value, pos = _read_varint(data, pos)
        yield value


def _format_time(seconds: int, nanos: int, *, micro: bool) -> str:
    try:
        if not micro:  # metav1.Time keeps whole seconds only
            return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
        micros = abs(nanos) // 1000 * (1 if nanos >= 0 else -1)  # toward zero, as Go's Duration.Truncate
        return (_EPOCH + timedelta(seconds=seconds, microseconds=micros)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (OverflowError, ValueError):
        raise ProtobufError(f"timestamp out of range: {seconds}s") from None


def _unwrap(data: bytes) -> tuple[str, str, bytes]:
    """apiVersion, kind and the object's bytes out of the ``k8s\\0`` + ``runtime.Unknown`` envelope."""
    if not data.startswith(MAGIC):
        raise ProtobufError("not a Kubernetes protobuf body (it must start with the bytes 'k8s\\x00')")
    api_version = kind = encoding = ""
    raw = b""
    for number, wire, value in _fields(data[len(MAGIC) :]):
        if wire != _LEN or not isinstance(value, bytes):
            continue
        if number == 1:
            for inner, inner_wire, inner_value in _fields(value):
                if inner_wire == _LEN and isinstance(inner_value, bytes):
                    if inner == 1:
                        api_version = _text(inner_value)
                    elif inner == 2:
                        kind = _text(inner_value)
        elif number == 2:
            raw = value
        elif number == 3:
            encoding = _text(value)
    if encoding:
        raise ProtobufError(f"unsupported protobuf contentEncoding {encoding!r}")
    return api_version, kind, raw


def decode_k8s_protobuf(data: bytes) -> Obj:
    """The JSON-shaped object of a Kubernetes protobuf body, ``apiVersion`` and ``kind`` included.

    Raises ``UnsupportedKindError`` for a kind without a schema and ``ProtobufError`` for a malformed body.
    """
    api_version, kind, raw = _unwrap(bytes(data))
    name = message_for(api_version, kind)
    if name is None:
        raise UnsupportedKindError(api_version, kind)
    decoder = _Decoder(MESSAGES)
    body = decoder.message(raw, name)  # recursion is bounded: the schema has no cycles
    if decoder.skipped:
        log.debug("protobuf %s %s: skipped unknown fields %s", api_version, kind, ", ".join(decoder.skipped))
    obj: Obj = {"kind": kind}
    if api_version:
        obj["apiVersion"] = api_version
    obj.update(body)
    return obj


# ------------------------------------------------------------------------------------------------------
# Encoding (what Go's generated marshalers write; used by tests, and available to answer protobuf clients)


def _varint(value: int) -> bytes:
    value &= _U64  # negative numbers go out as ten-byte two's complement, as Go's uint64(v)
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _len_field(number: int, payload: bytes) -> bytes:
    return _tag(number, _LEN) + _varint(len(payload)) + payload


class _Encoder:
    def __init__(self, messages: Mapping[str, Message]) -> None:
        self.messages = messages

    def message(self, obj: Mapping[str, Any], name: str, path: str, *, whole: bool = True) -> bytes:
        """``whole``: ``obj`` is this message alone, not its parent (an inline field, or the top level)."""
        msg = self.messages[name]
        if not isinstance(obj, Mapping):
            raise ProtobufError(f"{path}: expected an object, got {type(obj).__name__}")
        extra = set(obj) - msg.json_keys if whole else ()
        if extra:
            raise ProtobufError(f"{path}: fields not in the {name} schema: {', '.join(sorted(extra))}")
        out = bytearray()
        for f in msg.fields:
            where = f"{path}.{f.name}"
            if f.inline:
                out += _len_field(f.number, self.message(obj, f.type, path, whole=False))
                continue
            value = obj.get(f.name)
            if (f.map and not isinstance(value, Mapping | None)) or (
                f.repeated and not isinstance(value, list | None)
            ):
                raise ProtobufError(f"{where}: expected {'an object' if f.map else 'a list'}")
            if f.map:
                entries: Mapping[str, Any] = value or {}
                for key in sorted(entries):
                    item = self.field(2, f, entries[key], f"{where}[{key}]")
                    out += _len_field(f.number, _len_field(1, str(key).encode()) + item)
            elif f.repeated:
                for i, item in enumerate(value or ()):
                    out += self.field(f.number, f, item, f"{where}[{i}]")
            elif value is not None or not f.pointer:
                out += self.field(f.number, f, value, where)
        return bytes(out)

    def field(self, number: int, f: Field, value: Any, path: str) -> bytes:
        t = f.type
        try:
            if t in ("int32", "int64", "bool"):
                return _tag(number, _VARINT) + _varint(int(value or 0))
            if t == "string":
                return _len_field(number, str(value or "").encode())
            if t == "bytes":
                return _len_field(number, base64.b64decode(value or "", validate=True))
            if t in SPECIALS:
                return _len_field(number, self.special(t, value))
        except (TypeError, ValueError, binascii.Error) as e:
            raise ProtobufError(f"{path}: {e}") from None
        return _len_field(number, self.message(value if value is not None else {}, t, path))

    @staticmethod
    def special(t: str, value: Any) -> bytes:
        if t == "quantity":
            return _len_field(1, str(value if value is not None else "0").encode())
        if t == "intorstring":
            # Go writes all three fields: type (0 int, 1 string), intVal, strVal
            is_str = isinstance(value, str)
            int_val = 0 if is_str else int(value or 0)
            str_val = value.encode() if is_str else b""
            return (
                _tag(1, _VARINT)
                + _varint(is_str)
                + _tag(2, _VARINT)
                + _varint(int_val)
                + _len_field(3, str_val)
            )
        if t in ("time", "microtime"):
            if value is None:
                return b""
            when = datetime.fromisoformat(value).astimezone(UTC) - _EPOCH
            seconds = when.days * 86400 + when.seconds
            nanos = when.microseconds * 1000 if t == "microtime" else 0
            return _tag(1, _VARINT) + _varint(seconds) + _tag(2, _VARINT) + _varint(nanos)
        # rawjson
        if value is None:
            return b""
        return _len_field(1, json.dumps(value, separators=(",", ":")).encode())


def encode_k8s_protobuf(obj: Mapping[str, Any]) -> bytes:
    """The protobuf body a Go client would send for this JSON-shaped object (``apiVersion`` and ``kind`` set).

    Raises ``UnsupportedKindError`` for a kind without a schema and ``ProtobufError`` for fields the schema
    lacks or values of the wrong shape.
    """
    api_version, kind = str(obj.get("apiVersion", "")), str(obj.get("kind", ""))
    name = message_for(api_version, kind)
    if name is None:
        raise UnsupportedKindError(api_version, kind)
    extra = set(obj) - MESSAGES[name].json_keys - {"apiVersion", "kind"}
    if extra:
        raise ProtobufError(f"fields not in the {name} schema: {', '.join(sorted(extra))}")
    raw = _Encoder(MESSAGES).message(obj, name, kind, whole=False)
    type_meta = _len_field(1, api_version.encode()) + _len_field(2, kind.encode())
    unknown = _len_field(1, type_meta) + _len_field(2, raw) + _len_field(3, b"") + _len_field(4, b"")
    return MAGIC + unknown


MESSAGES: Mapping[str, Message] = load_messages()
