"""Kubernetes protobuf bodies (``application/vnd.kubernetes.protobuf``) read as the dicts JSON gives.

client-go's typed clients (kubectl's ``create`` generators, ``scale``, ``set image``; kube-scheduler;
controllers) send request bodies as protobuf and do not retry with JSON on 415. A body is the magic
``k8s\\0`` and a ``runtime.Unknown`` message: ``typeMeta`` {apiVersion, kind}, ``raw`` (the object's own
message), ``contentEncoding``, ``contentType``.

Objects are decoded with a declarative schema (``_SCHEMA`` at the end of this module): per message, per
field, its number, JSON name, type and three flags standing for the Go struct field:

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


def _parse_schema(text: str) -> dict[str, Message]:
    """Read the schema table: a message name on its own line, then one indented line per field."""
    raw: dict[str, list[Field]] = {}
    current: list[Field] | None = None
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if not line[0].isspace():
            current = raw.setdefault(line.strip(), [])
            continue
        number, name, type_, *flags = line.split()
        repeated = type_.startswith("[]")
        is_map = type_.startswith("map:")
        type_ = type_.removeprefix("[]").removeprefix("map:")
        unknown_flags = set(flags) - {"ptr", "keep", "inline"}
        if current is None or unknown_flags:
            raise AssertionError(f"protobuf schema line {lineno}: {line!r}")
        pointer, keep, inline = "ptr" in flags, "keep" in flags, "inline" in flags
        current.append(Field(int(number), name, type_, repeated, is_map, pointer, keep, inline))
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
                for key in sorted(value or {}):
                    entry = _len_field(1, str(key).encode()) + self.field(2, f, value[key], f"{where}[{key}]")
                    out += _len_field(f.number, entry)
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


# ------------------------------------------------------------------------------------------------------
# The schema: a message (group.Kind) on its own line, then "number jsonName type [ptr] [keep] [inline]" per
# field; "[]type" is a repeated field, "map:type" a map<string, type>. Field numbers and types come from
# upstream generated.proto, the flags from the Go types (k8s.io/api and k8s.io/apimachinery, master after
# 1.36; field numbers never change between releases, so older clients' bodies decode). Fields whose types
# live in packages not covered here (alpha APIs) are left out, and skipped as unknown.

_SCHEMA = """
core.Namespace
  1 metadata meta.ObjectMeta
  2 spec core.NamespaceSpec
  3 status core.NamespaceStatus
meta.ObjectMeta
  1 name string
  2 generateName string
  3 namespace string
  4 selfLink string
  5 uid string
  6 resourceVersion string
  7 generation int64
  8 creationTimestamp time
  9 deletionTimestamp time ptr
  10 deletionGracePeriodSeconds int64 ptr
  11 labels map:string
  12 annotations map:string
  13 ownerReferences []meta.OwnerReference
  14 finalizers []string
  17 managedFields []meta.ManagedFieldsEntry
meta.OwnerReference
  1 kind string keep
  3 name string keep
  4 uid string keep
  5 apiVersion string keep
  6 controller bool ptr
  7 blockOwnerDeletion bool ptr
meta.ManagedFieldsEntry
  1 manager string
  2 operation string
  3 apiVersion string
  4 time time ptr
  6 fieldsType string
  7 fieldsV1 rawjson ptr
  8 subresource string
core.NamespaceSpec
  1 finalizers []string
core.NamespaceStatus
  1 phase string
  2 conditions []core.NamespaceCondition
core.NamespaceCondition
  1 type string keep
  2 status string keep
  4 lastTransitionTime time
  5 reason string
  6 message string
core.ConfigMap
  1 metadata meta.ObjectMeta
  2 data map:string
  3 binaryData map:bytes
  4 immutable bool ptr
core.Secret
  1 metadata meta.ObjectMeta
  2 data map:bytes
  3 type string
  4 stringData map:string
  5 immutable bool ptr
core.ServiceAccount
  1 metadata meta.ObjectMeta
  2 secrets []core.ObjectReference
  3 imagePullSecrets []core.LocalObjectReference
  4 automountServiceAccountToken bool ptr
core.ObjectReference
  1 kind string
  2 namespace string
  3 name string
  4 uid string
  5 apiVersion string
  6 resourceVersion string
  7 fieldPath string
core.LocalObjectReference
  1 name string
core.Service
  1 metadata meta.ObjectMeta
  2 spec core.ServiceSpec
  3 status core.ServiceStatus
core.ServiceSpec
  1 ports []core.ServicePort
  2 selector map:string
  3 clusterIP string
  4 type string
  5 externalIPs []string
  7 sessionAffinity string
  8 loadBalancerIP string
  9 loadBalancerSourceRanges []string
  10 externalName string
  11 externalTrafficPolicy string
  12 healthCheckNodePort int32
  13 publishNotReadyAddresses bool
  14 sessionAffinityConfig core.SessionAffinityConfig ptr
  17 ipFamilyPolicy string ptr
  18 clusterIPs []string
  19 ipFamilies []string
  20 allocateLoadBalancerNodePorts bool ptr
  21 loadBalancerClass string ptr
  22 internalTrafficPolicy string ptr
  23 trafficDistribution string ptr
core.ServicePort
  1 name string
  2 protocol string
  3 port int32 keep
  4 targetPort intorstring
  5 nodePort int32
  6 appProtocol string ptr
core.SessionAffinityConfig
  1 clientIP core.ClientIPConfig ptr
core.ClientIPConfig
  1 timeoutSeconds int32 ptr
core.ServiceStatus
  1 loadBalancer core.LoadBalancerStatus
  2 conditions []meta.Condition
core.LoadBalancerStatus
  1 ingress []core.LoadBalancerIngress
core.LoadBalancerIngress
  1 ip string
  2 hostname string
  3 ipMode string ptr
  4 ports []core.PortStatus
core.PortStatus
  1 port int32 keep
  2 protocol string keep
  3 error string ptr
meta.Condition
  1 type string keep
  2 status string keep
  3 observedGeneration int64
  4 lastTransitionTime time
  5 reason string keep
  6 message string keep
core.Pod
  1 metadata meta.ObjectMeta
  2 spec core.PodSpec
  3 status core.PodStatus
core.PodSpec
  1 volumes []core.Volume
  2 containers []core.Container
  3 restartPolicy string
  4 terminationGracePeriodSeconds int64 ptr
  5 activeDeadlineSeconds int64 ptr
  6 dnsPolicy string
  7 nodeSelector map:string
  8 serviceAccountName string
  9 serviceAccount string
  10 nodeName string
  11 hostNetwork bool
  12 hostPID bool
  13 hostIPC bool
  14 securityContext core.PodSecurityContext ptr
  15 imagePullSecrets []core.LocalObjectReference
  16 hostname string
  17 subdomain string
  18 affinity core.Affinity ptr
  19 schedulerName string
  20 initContainers []core.Container
  21 automountServiceAccountToken bool ptr
  22 tolerations []core.Toleration
  23 hostAliases []core.HostAlias
  24 priorityClassName string
  25 priority int32 ptr
  26 dnsConfig core.PodDNSConfig ptr
  27 shareProcessNamespace bool ptr
  28 readinessGates []core.PodReadinessGate
  29 runtimeClassName string ptr
  30 enableServiceLinks bool ptr
  31 preemptionPolicy string ptr
  32 overhead map:quantity
  33 topologySpreadConstraints []core.TopologySpreadConstraint
  34 ephemeralContainers []core.EphemeralContainer
  35 setHostnameAsFQDN bool ptr
  36 os core.PodOS ptr
  37 hostUsers bool ptr
  38 schedulingGates []core.PodSchedulingGate
  39 resourceClaims []core.PodResourceClaim
  40 resources core.ResourceRequirements ptr
  41 hostnameOverride string ptr
  43 schedulingGroup core.PodSchedulingGroup ptr
  44 evictionResponders []core.EvictionResponder
core.Volume
  1 name string keep
  2 volumeSource core.VolumeSource inline
core.VolumeSource
  1 hostPath core.HostPathVolumeSource ptr
  2 emptyDir core.EmptyDirVolumeSource ptr
  3 gcePersistentDisk core.GCEPersistentDiskVolumeSource ptr
  4 awsElasticBlockStore core.AWSElasticBlockStoreVolumeSource ptr
  5 gitRepo core.GitRepoVolumeSource ptr
  6 secret core.SecretVolumeSource ptr
  7 nfs core.NFSVolumeSource ptr
  8 iscsi core.ISCSIVolumeSource ptr
  9 glusterfs core.GlusterfsVolumeSource ptr
  10 persistentVolumeClaim core.PersistentVolumeClaimVolumeSource ptr
  11 rbd core.RBDVolumeSource ptr
  12 flexVolume core.FlexVolumeSource ptr
  13 cinder core.CinderVolumeSource ptr
  14 cephfs core.CephFSVolumeSource ptr
  15 flocker core.FlockerVolumeSource ptr
  16 downwardAPI core.DownwardAPIVolumeSource ptr
  17 fc core.FCVolumeSource ptr
  18 azureFile core.AzureFileVolumeSource ptr
  19 configMap core.ConfigMapVolumeSource ptr
  20 vsphereVolume core.VsphereVirtualDiskVolumeSource ptr
  21 quobyte core.QuobyteVolumeSource ptr
  22 azureDisk core.AzureDiskVolumeSource ptr
  23 photonPersistentDisk core.PhotonPersistentDiskVolumeSource ptr
  24 portworxVolume core.PortworxVolumeSource ptr
  25 scaleIO core.ScaleIOVolumeSource ptr
  26 projected core.ProjectedVolumeSource ptr
  27 storageos core.StorageOSVolumeSource ptr
  28 csi core.CSIVolumeSource ptr
  29 ephemeral core.EphemeralVolumeSource ptr
  30 image core.ImageVolumeSource ptr
core.HostPathVolumeSource
  1 path string keep
  2 type string ptr
core.EmptyDirVolumeSource
  1 medium string
  2 sizeLimit quantity ptr
  3 mode int32 ptr
core.GCEPersistentDiskVolumeSource
  1 pdName string keep
  2 fsType string
  3 partition int32
  4 readOnly bool
core.AWSElasticBlockStoreVolumeSource
  1 volumeID string keep
  2 fsType string
  3 partition int32
  4 readOnly bool
core.GitRepoVolumeSource
  1 repository string keep
  2 revision string
  3 directory string
core.SecretVolumeSource
  1 secretName string
  2 items []core.KeyToPath
  3 defaultMode int32 ptr
  4 optional bool ptr
  5 defaultUser int64 ptr
core.KeyToPath
  1 key string keep
  2 path string keep
  3 mode int32 ptr
  4 user int64 ptr
core.NFSVolumeSource
  1 server string keep
  2 path string keep
  3 readOnly bool
core.ISCSIVolumeSource
  1 targetPortal string keep
  2 iqn string keep
  3 lun int32 keep
  4 iscsiInterface string
  5 fsType string
  6 readOnly bool
  7 portals []string
  8 chapAuthDiscovery bool
  10 secretRef core.LocalObjectReference ptr
  11 chapAuthSession bool
  12 initiatorName string ptr
core.GlusterfsVolumeSource
  1 endpoints string keep
  2 path string keep
  3 readOnly bool
core.PersistentVolumeClaimVolumeSource
  1 claimName string keep
  2 readOnly bool
core.RBDVolumeSource
  1 monitors []string
  2 image string keep
  3 fsType string
  4 pool string
  5 user string
  6 keyring string
  7 secretRef core.LocalObjectReference ptr
  8 readOnly bool
core.FlexVolumeSource
  1 driver string keep
  2 fsType string
  3 secretRef core.LocalObjectReference ptr
  4 readOnly bool
  5 options map:string
core.CinderVolumeSource
  1 volumeID string keep
  2 fsType string
  3 readOnly bool
  4 secretRef core.LocalObjectReference ptr
core.CephFSVolumeSource
  1 monitors []string
  2 path string
  3 user string
  4 secretFile string
  5 secretRef core.LocalObjectReference ptr
  6 readOnly bool
core.FlockerVolumeSource
  1 datasetName string
  2 datasetUUID string
core.DownwardAPIVolumeSource
  1 items []core.DownwardAPIVolumeFile
  2 defaultMode int32 ptr
  3 defaultUser int64 ptr
core.DownwardAPIVolumeFile
  1 path string keep
  2 fieldRef core.ObjectFieldSelector ptr
  3 resourceFieldRef core.ResourceFieldSelector ptr
  4 mode int32 ptr
  5 user int64 ptr
core.ObjectFieldSelector
  1 apiVersion string
  2 fieldPath string keep
core.ResourceFieldSelector
  1 containerName string
  2 resource string keep
  3 divisor quantity
core.FCVolumeSource
  1 targetWWNs []string
  2 lun int32 ptr
  3 fsType string
  4 readOnly bool
  5 wwids []string
core.AzureFileVolumeSource
  1 secretName string keep
  2 shareName string keep
  3 readOnly bool
core.ConfigMapVolumeSource
  1 localObjectReference core.LocalObjectReference inline
  2 items []core.KeyToPath
  3 defaultMode int32 ptr
  4 optional bool ptr
  5 defaultUser int64 ptr
core.VsphereVirtualDiskVolumeSource
  1 volumePath string keep
  2 fsType string
  3 storagePolicyName string
  4 storagePolicyID string
core.QuobyteVolumeSource
  1 registry string keep
  2 volume string keep
  3 readOnly bool
  4 user string
  5 group string
  6 tenant string
core.AzureDiskVolumeSource
  1 diskName string keep
  2 diskURI string keep
  3 cachingMode string ptr
  4 fsType string ptr
  5 readOnly bool ptr
  6 kind string ptr
core.PhotonPersistentDiskVolumeSource
  1 pdID string keep
  2 fsType string
core.ProjectedVolumeSource
  1 sources []core.VolumeProjection
  2 defaultMode int32 ptr
  3 defaultUser int64 ptr
core.VolumeProjection
  1 secret core.SecretProjection ptr
  2 downwardAPI core.DownwardAPIProjection ptr
  3 configMap core.ConfigMapProjection ptr
  4 serviceAccountToken core.ServiceAccountTokenProjection ptr
  5 clusterTrustBundle core.ClusterTrustBundleProjection ptr
  6 podCertificate core.PodCertificateProjection ptr
core.SecretProjection
  1 localObjectReference core.LocalObjectReference inline
  2 items []core.KeyToPath
  4 optional bool ptr
core.DownwardAPIProjection
  1 items []core.DownwardAPIVolumeFile
core.ConfigMapProjection
  1 localObjectReference core.LocalObjectReference inline
  2 items []core.KeyToPath
  4 optional bool ptr
core.ServiceAccountTokenProjection
  1 audience string
  2 expirationSeconds int64 ptr
  3 path string keep
  4 user int64 ptr
core.ClusterTrustBundleProjection
  1 name string ptr
  2 signerName string ptr
  3 labelSelector meta.LabelSelector ptr
  4 path string keep
  5 optional bool ptr
  6 user int64 ptr
meta.LabelSelector
  1 matchLabels map:string
  2 matchExpressions []meta.LabelSelectorRequirement
meta.LabelSelectorRequirement
  1 key string keep
  2 operator string keep
  3 values []string
core.PodCertificateProjection
  1 signerName string
  2 keyType string
  3 maxExpirationSeconds int32 ptr
  4 credentialBundlePath string
  5 keyPath string
  6 certificateChainPath string
  7 userAnnotations map:string
  8 user int64 ptr
core.PortworxVolumeSource
  1 volumeID string keep
  2 fsType string
  3 readOnly bool
core.ScaleIOVolumeSource
  1 gateway string keep
  2 system string keep
  3 secretRef core.LocalObjectReference ptr
  4 sslEnabled bool
  5 protectionDomain string
  6 storagePool string
  7 storageMode string
  8 volumeName string
  9 fsType string
  10 readOnly bool
core.StorageOSVolumeSource
  1 volumeName string
  2 volumeNamespace string
  3 fsType string
  4 readOnly bool
  5 secretRef core.LocalObjectReference ptr
core.CSIVolumeSource
  1 driver string keep
  2 readOnly bool ptr
  3 fsType string ptr
  4 volumeAttributes map:string
  5 nodePublishSecretRef core.LocalObjectReference ptr
core.EphemeralVolumeSource
  1 volumeClaimTemplate core.PersistentVolumeClaimTemplate ptr
core.PersistentVolumeClaimTemplate
  1 metadata meta.ObjectMeta
  2 spec core.PersistentVolumeClaimSpec
core.PersistentVolumeClaimSpec
  1 accessModes []string
  2 resources core.VolumeResourceRequirements
  3 volumeName string
  4 selector meta.LabelSelector ptr
  5 storageClassName string ptr
  6 volumeMode string ptr
  7 dataSource core.TypedLocalObjectReference ptr
  8 dataSourceRef core.TypedObjectReference ptr
  9 volumeAttributesClassName string ptr
core.VolumeResourceRequirements
  1 limits map:quantity
  2 requests map:quantity
core.TypedLocalObjectReference
  1 apiGroup string ptr
  2 kind string keep
  3 name string keep
core.TypedObjectReference
  1 apiGroup string ptr
  2 kind string keep
  3 name string keep
  4 namespace string ptr
core.ImageVolumeSource
  1 reference string
  2 pullPolicy string
core.Container
  1 name string keep
  2 image string
  3 command []string
  4 args []string
  5 workingDir string
  6 ports []core.ContainerPort
  7 env []core.EnvVar
  8 resources core.ResourceRequirements
  9 volumeMounts []core.VolumeMount
  10 livenessProbe core.Probe ptr
  11 readinessProbe core.Probe ptr
  12 lifecycle core.Lifecycle ptr
  13 terminationMessagePath string
  14 imagePullPolicy string
  15 securityContext core.SecurityContext ptr
  16 stdin bool
  17 stdinOnce bool
  18 tty bool
  19 envFrom []core.EnvFromSource
  20 terminationMessagePolicy string
  21 volumeDevices []core.VolumeDevice
  22 startupProbe core.Probe ptr
  23 resizePolicy []core.ContainerResizePolicy
  24 restartPolicy string ptr
  25 restartPolicyRules []core.ContainerRestartRule
core.ContainerPort
  1 name string
  2 hostPort int32
  3 containerPort int32 keep
  4 protocol string
  5 hostIP string
core.EnvFromSource
  1 prefix string
  2 configMapRef core.ConfigMapEnvSource ptr
  3 secretRef core.SecretEnvSource ptr
core.ConfigMapEnvSource
  1 localObjectReference core.LocalObjectReference inline
  2 optional bool ptr
core.SecretEnvSource
  1 localObjectReference core.LocalObjectReference inline
  2 optional bool ptr
core.EnvVar
  1 name string keep
  2 value string
  3 valueFrom core.EnvVarSource ptr
core.EnvVarSource
  1 fieldRef core.ObjectFieldSelector ptr
  2 resourceFieldRef core.ResourceFieldSelector ptr
  3 configMapKeyRef core.ConfigMapKeySelector ptr
  4 secretKeyRef core.SecretKeySelector ptr
  5 fileKeyRef core.FileKeySelector ptr
core.ConfigMapKeySelector
  1 localObjectReference core.LocalObjectReference inline
  2 key string keep
  3 optional bool ptr
core.SecretKeySelector
  1 localObjectReference core.LocalObjectReference inline
  2 key string keep
  3 optional bool ptr
core.FileKeySelector
  1 volumeName string keep
  2 path string keep
  3 key string keep
  4 optional bool ptr
core.ResourceRequirements
  1 limits map:quantity
  2 requests map:quantity
  3 claims []core.ResourceClaim
core.ResourceClaim
  1 name string keep
  2 request string
core.ContainerResizePolicy
  1 resourceName string keep
  2 restartPolicy string keep
core.ContainerRestartRule
  1 action string
  2 exitCodes core.ContainerRestartRuleOnExitCodes ptr
core.ContainerRestartRuleOnExitCodes
  1 operator string
  2 values []int32
core.VolumeMount
  1 name string keep
  2 readOnly bool
  3 mountPath string keep
  4 subPath string
  5 mountPropagation string ptr
  6 subPathExpr string
  7 recursiveReadOnly string ptr
  8 bindMountOptions []string
core.VolumeDevice
  1 name string keep
  2 devicePath string keep
core.Probe
  1 handler core.ProbeHandler inline
  2 initialDelaySeconds int32
  3 timeoutSeconds int32
  4 periodSeconds int32
  5 successThreshold int32
  6 failureThreshold int32
  7 terminationGracePeriodSeconds int64 ptr
core.ProbeHandler
  1 exec core.ExecAction ptr
  2 httpGet core.HTTPGetAction ptr
  3 tcpSocket core.TCPSocketAction ptr
  4 grpc core.GRPCAction ptr
core.ExecAction
  1 command []string
core.HTTPGetAction
  1 path string
  2 port intorstring
  3 host string
  4 scheme string
  5 httpHeaders []core.HTTPHeader
  6 protocol string ptr
core.HTTPHeader
  1 name string keep
  2 value string keep
core.TCPSocketAction
  1 port intorstring
  2 host string
core.GRPCAction
  1 port int32 keep
  2 service string ptr
  3 mode string ptr
core.Lifecycle
  1 postStart core.LifecycleHandler ptr
  2 preStop core.LifecycleHandler ptr
  3 stopSignal string ptr
core.LifecycleHandler
  1 exec core.ExecAction ptr
  2 httpGet core.HTTPGetAction ptr
  3 tcpSocket core.TCPSocketAction ptr
  4 sleep core.SleepAction ptr
core.SleepAction
  1 seconds int64 keep
core.SecurityContext
  1 capabilities core.Capabilities ptr
  2 privileged bool ptr
  3 seLinuxOptions core.SELinuxOptions ptr
  4 runAsUser int64 ptr
  5 runAsNonRoot bool ptr
  6 readOnlyRootFilesystem bool ptr
  7 allowPrivilegeEscalation bool ptr
  8 runAsGroup int64 ptr
  9 procMount string ptr
  10 windowsOptions core.WindowsSecurityContextOptions ptr
  11 seccompProfile core.SeccompProfile ptr
  12 appArmorProfile core.AppArmorProfile ptr
core.Capabilities
  1 add []string
  2 drop []string
core.SELinuxOptions
  1 user string
  2 role string
  3 type string
  4 level string
core.WindowsSecurityContextOptions
  1 gmsaCredentialSpecName string ptr
  2 gmsaCredentialSpec string ptr
  3 runAsUserName string ptr
  4 hostProcess bool ptr
core.SeccompProfile
  1 type string keep
  2 localhostProfile string ptr
core.AppArmorProfile
  1 type string keep
  2 localhostProfile string ptr
core.EphemeralContainer
  1 ephemeralContainerCommon core.EphemeralContainerCommon inline
  2 targetContainerName string
core.EphemeralContainerCommon
  1 name string keep
  2 image string
  3 command []string
  4 args []string
  5 workingDir string
  6 ports []core.ContainerPort
  7 env []core.EnvVar
  8 resources core.ResourceRequirements
  9 volumeMounts []core.VolumeMount
  10 livenessProbe core.Probe ptr
  11 readinessProbe core.Probe ptr
  12 lifecycle core.Lifecycle ptr
  13 terminationMessagePath string
  14 imagePullPolicy string
  15 securityContext core.SecurityContext ptr
  16 stdin bool
  17 stdinOnce bool
  18 tty bool
  19 envFrom []core.EnvFromSource
  20 terminationMessagePolicy string
  21 volumeDevices []core.VolumeDevice
  22 startupProbe core.Probe ptr
  23 resizePolicy []core.ContainerResizePolicy
  24 restartPolicy string ptr
  25 restartPolicyRules []core.ContainerRestartRule
core.PodSecurityContext
  1 seLinuxOptions core.SELinuxOptions ptr
  2 runAsUser int64 ptr
  3 runAsNonRoot bool ptr
  4 supplementalGroups []int64
  5 fsGroup int64 ptr
  6 runAsGroup int64 ptr
  7 sysctls []core.Sysctl
  8 windowsOptions core.WindowsSecurityContextOptions ptr
  9 fsGroupChangePolicy string ptr
  10 seccompProfile core.SeccompProfile ptr
  11 appArmorProfile core.AppArmorProfile ptr
  12 supplementalGroupsPolicy string ptr
  13 seLinuxChangePolicy string ptr
core.Sysctl
  1 name string keep
  2 value string keep
core.Affinity
  1 nodeAffinity core.NodeAffinity ptr
  2 podAffinity core.PodAffinity ptr
  3 podAntiAffinity core.PodAntiAffinity ptr
core.NodeAffinity
  1 requiredDuringSchedulingIgnoredDuringExecution core.NodeSelector ptr
  2 preferredDuringSchedulingIgnoredDuringExecution []core.PreferredSchedulingTerm
core.NodeSelector
  1 nodeSelectorTerms []core.NodeSelectorTerm
core.NodeSelectorTerm
  1 matchExpressions []core.NodeSelectorRequirement
  2 matchFields []core.NodeSelectorRequirement
core.NodeSelectorRequirement
  1 key string keep
  2 operator string keep
  3 values []string
core.PreferredSchedulingTerm
  1 weight int32 keep
  2 preference core.NodeSelectorTerm
core.PodAffinity
  1 requiredDuringSchedulingIgnoredDuringExecution []core.PodAffinityTerm
  2 preferredDuringSchedulingIgnoredDuringExecution []core.WeightedPodAffinityTerm
core.PodAffinityTerm
  1 labelSelector meta.LabelSelector ptr
  2 namespaces []string
  3 topologyKey string keep
  4 namespaceSelector meta.LabelSelector ptr
  5 matchLabelKeys []string
  6 mismatchLabelKeys []string
core.WeightedPodAffinityTerm
  1 weight int32 keep
  2 podAffinityTerm core.PodAffinityTerm
core.PodAntiAffinity
  1 requiredDuringSchedulingIgnoredDuringExecution []core.PodAffinityTerm
  2 preferredDuringSchedulingIgnoredDuringExecution []core.WeightedPodAffinityTerm
core.Toleration
  1 key string
  2 operator string
  3 value string
  4 effect string
  5 tolerationSeconds int64 ptr
core.HostAlias
  1 ip string keep
  2 hostnames []string
core.PodDNSConfig
  1 nameservers []string
  2 searches []string
  3 options []core.PodDNSConfigOption
core.PodDNSConfigOption
  1 name string
  2 value string ptr
core.PodReadinessGate
  1 conditionType string keep
core.TopologySpreadConstraint
  1 maxSkew int32 keep
  2 topologyKey string keep
  3 whenUnsatisfiable string keep
  4 labelSelector meta.LabelSelector ptr
  5 minDomains int32 ptr
  6 nodeAffinityPolicy string ptr
  7 nodeTaintsPolicy string ptr
  8 matchLabelKeys []string
core.PodOS
  1 name string keep
core.PodSchedulingGate
  1 name string keep
core.PodResourceClaim
  1 name string keep
  3 resourceClaimName string ptr
  4 resourceClaimTemplateName string ptr
core.PodSchedulingGroup
  1 podGroupName string ptr
core.EvictionResponder
  1 name string keep
  2 priority int32 ptr
core.PodStatus
  1 phase string
  2 conditions []core.PodCondition
  3 message string
  4 reason string
  5 hostIP string
  6 podIP string
  7 startTime time ptr
  8 containerStatuses []core.ContainerStatus
  9 qosClass string
  10 initContainerStatuses []core.ContainerStatus
  11 nominatedNodeName string
  12 podIPs []core.PodIP
  13 ephemeralContainerStatuses []core.ContainerStatus
  14 resize string
  15 resourceClaimStatuses []core.PodResourceClaimStatus
  16 hostIPs []core.HostIP
  17 observedGeneration int64
  18 extendedResourceClaimStatus core.PodExtendedResourceClaimStatus ptr
  19 allocatedResources map:quantity
  20 resources core.ResourceRequirements ptr
  21 nodeAllocatableResourceClaimStatuses []core.NodeAllocatableResourceClaimStatus
  22 volumeHealth []core.PodVolumeHealth
core.PodCondition
  1 type string keep
  2 status string keep
  3 lastProbeTime time
  4 lastTransitionTime time
  5 reason string
  6 message string
  7 observedGeneration int64
core.HostIP
  1 ip string keep
core.PodIP
  1 ip string keep
core.ContainerStatus
  1 name string keep
  2 state core.ContainerState
  3 lastState core.ContainerState
  4 ready bool keep
  5 restartCount int32 keep
  6 image string keep
  7 imageID string keep
  8 containerID string
  9 started bool ptr
  10 allocatedResources map:quantity
  11 resources core.ResourceRequirements ptr
  12 volumeMounts []core.VolumeMountStatus
  13 user core.ContainerUser ptr
  14 allocatedResourcesStatus []core.ResourceStatus
  15 stopSignal string ptr
core.ContainerState
  1 waiting core.ContainerStateWaiting ptr
  2 running core.ContainerStateRunning ptr
  3 terminated core.ContainerStateTerminated ptr
core.ContainerStateWaiting
  1 reason string
  2 message string
core.ContainerStateRunning
  1 startedAt time
core.ContainerStateTerminated
  1 exitCode int32 keep
  2 signal int32
  3 reason string
  4 message string
  5 startedAt time
  6 finishedAt time
  7 containerID string
core.VolumeMountStatus
  1 name string keep
  2 mountPath string keep
  3 readOnly bool
  4 recursiveReadOnly string ptr
  5 volumeStatus core.VolumeStatus ptr
core.VolumeStatus
  1 image core.ImageVolumeStatus ptr
core.ImageVolumeStatus
  1 imageRef string
core.ContainerUser
  1 linux core.LinuxContainerUser ptr
core.LinuxContainerUser
  1 uid int64 keep
  2 gid int64 keep
  3 supplementalGroups []int64
core.ResourceStatus
  1 name string keep
  2 resources []core.ResourceHealth
core.ResourceHealth
  1 resourceID string keep
  2 health string
  6 message string ptr
core.PodResourceClaimStatus
  1 name string keep
  2 resourceClaimName string ptr
core.PodExtendedResourceClaimStatus
  1 requestMappings []core.ContainerExtendedResourceRequest
  2 resourceClaimName string keep
core.ContainerExtendedResourceRequest
  1 containerName string keep
  2 resourceName string keep
  3 requestName string keep
core.NodeAllocatableResourceClaimStatus
  1 resourceClaimName string keep
  2 containers []string
  4 mapping []core.NodeAllocatableMappedResources
  5 overhead []core.NodeAllocatableOverheadResources
core.NodeAllocatableMappedResources
  1 name string keep
  2 quantity quantity ptr
core.NodeAllocatableOverheadResources
  1 name string keep
  2 perPod quantity ptr
  3 perContainer quantity ptr
core.PodVolumeHealth
  1 name string keep
  2 healthConditions []core.VolumeHealthCondition
  3 lastTransitionTime time
core.VolumeHealthCondition
  1 status string keep
  2 reason string keep
  3 message string
core.PodTemplate
  1 metadata meta.ObjectMeta
  2 template core.PodTemplateSpec
core.PodTemplateSpec
  1 metadata meta.ObjectMeta
  2 spec core.PodSpec
core.Node
  1 metadata meta.ObjectMeta
  2 spec core.NodeSpec
  3 status core.NodeStatus
core.NodeSpec
  1 podCIDR string
  2 externalID string
  3 providerID string
  4 unschedulable bool
  5 taints []core.Taint
  6 configSource core.NodeConfigSource ptr
  7 podCIDRs []string
  8 podPreemptionPolicy core.NodePodPreemptionPolicy ptr
core.Taint
  1 key string keep
  2 value string
  3 effect string keep
  4 timeAdded time ptr
core.NodeConfigSource
  2 configMap core.ConfigMapNodeConfigSource ptr
core.ConfigMapNodeConfigSource
  1 namespace string keep
  2 name string keep
  3 uid string
  4 resourceVersion string
  5 kubeletConfigKey string keep
core.NodePodPreemptionPolicy
  1 disableResizePreemption []string
core.NodeStatus
  1 capacity map:quantity
  2 allocatable map:quantity
  3 phase string
  4 conditions []core.NodeCondition
  5 addresses []core.NodeAddress
  6 daemonEndpoints core.NodeDaemonEndpoints
  7 nodeInfo core.NodeSystemInfo
  8 images []core.ContainerImage
  9 volumesInUse []string
  10 volumesAttached []core.AttachedVolume
  11 config core.NodeConfigStatus ptr
  12 runtimeHandlers []core.NodeRuntimeHandler
  13 features core.NodeFeatures ptr
  14 declaredFeatures []string
core.NodeCondition
  1 type string keep
  2 status string keep
  3 lastHeartbeatTime time
  4 lastTransitionTime time
  5 reason string
  6 message string
core.NodeAddress
  1 type string keep
  2 address string keep
core.NodeDaemonEndpoints
  1 kubeletEndpoint core.DaemonEndpoint
core.DaemonEndpoint
  1 Port int32 keep
core.NodeSystemInfo
  1 machineID string keep
  2 systemUUID string keep
  3 bootID string keep
  4 kernelVersion string keep
  5 osImage string keep
  6 containerRuntimeVersion string keep
  7 kubeletVersion string keep
  8 kubeProxyVersion string keep
  9 operatingSystem string keep
  10 architecture string keep
  11 swap core.NodeSwapStatus ptr
core.NodeSwapStatus
  1 capacity int64 ptr
core.ContainerImage
  1 names []string
  2 sizeBytes int64
core.AttachedVolume
  1 name string keep
  2 devicePath string keep
core.NodeConfigStatus
  1 assigned core.NodeConfigSource ptr
  2 active core.NodeConfigSource ptr
  3 lastKnownGood core.NodeConfigSource ptr
  4 error string
core.NodeRuntimeHandler
  1 name string keep
  2 features core.NodeRuntimeHandlerFeatures ptr
core.NodeRuntimeHandlerFeatures
  1 recursiveReadOnlyMounts bool ptr
  2 userNamespaces bool ptr
core.NodeFeatures
  1 supplementalGroupsPolicy bool ptr
core.Binding
  1 metadata meta.ObjectMeta
  2 target core.ObjectReference
core.Event
  1 metadata meta.ObjectMeta
  2 involvedObject core.ObjectReference
  3 reason string
  4 message string
  5 source core.EventSource
  6 firstTimestamp time
  7 lastTimestamp time
  8 count int32
  9 type string
  10 eventTime microtime
  11 series core.EventSeries ptr
  12 action string
  13 related core.ObjectReference ptr
  14 reportingComponent string keep
  15 reportingInstance string keep
core.EventSource
  1 component string
  2 host string
core.EventSeries
  1 count int32
  2 lastObservedTime microtime
core.ResourceQuota
  1 metadata meta.ObjectMeta
  2 spec core.ResourceQuotaSpec
  3 status core.ResourceQuotaStatus
core.ResourceQuotaSpec
  1 hard map:quantity
  2 scopes []string
  3 scopeSelector core.ScopeSelector ptr
core.ScopeSelector
  1 matchExpressions []core.ScopedResourceSelectorRequirement
core.ScopedResourceSelectorRequirement
  1 scopeName string keep
  2 operator string keep
  3 values []string
core.ResourceQuotaStatus
  1 hard map:quantity
  2 used map:quantity
core.Endpoints
  1 metadata meta.ObjectMeta
  2 subsets []core.EndpointSubset
core.EndpointSubset
  1 addresses []core.EndpointAddress
  2 notReadyAddresses []core.EndpointAddress
  3 ports []core.EndpointPort
core.EndpointAddress
  1 ip string keep
  2 targetRef core.ObjectReference ptr
  3 hostname string
  4 nodeName string ptr
core.EndpointPort
  1 name string
  2 port int32 keep
  3 protocol string
  4 appProtocol string ptr
core.ReplicationController
  1 metadata meta.ObjectMeta
  2 spec core.ReplicationControllerSpec
  3 status core.ReplicationControllerStatus
core.ReplicationControllerSpec
  1 replicas int32 ptr
  2 selector map:string
  3 template core.PodTemplateSpec ptr
  4 minReadySeconds int32
core.ReplicationControllerStatus
  1 replicas int32 keep
  2 fullyLabeledReplicas int32
  3 observedGeneration int64
  4 readyReplicas int32
  5 availableReplicas int32
  6 conditions []core.ReplicationControllerCondition
core.ReplicationControllerCondition
  1 type string keep
  2 status string keep
  3 lastTransitionTime time
  4 reason string
  5 message string
core.PersistentVolume
  1 metadata meta.ObjectMeta
  2 spec core.PersistentVolumeSpec
  3 status core.PersistentVolumeStatus
core.PersistentVolumeSpec
  1 capacity map:quantity
  2 persistentVolumeSource core.PersistentVolumeSource inline
  3 accessModes []string
  4 claimRef core.ObjectReference ptr
  5 persistentVolumeReclaimPolicy string
  6 storageClassName string
  7 mountOptions []string
  8 volumeMode string ptr
  9 nodeAffinity core.VolumeNodeAffinity ptr
  10 volumeAttributesClassName string ptr
core.PersistentVolumeSource
  1 gcePersistentDisk core.GCEPersistentDiskVolumeSource ptr
  2 awsElasticBlockStore core.AWSElasticBlockStoreVolumeSource ptr
  3 hostPath core.HostPathVolumeSource ptr
  4 glusterfs core.GlusterfsPersistentVolumeSource ptr
  5 nfs core.NFSVolumeSource ptr
  6 rbd core.RBDPersistentVolumeSource ptr
  7 iscsi core.ISCSIPersistentVolumeSource ptr
  8 cinder core.CinderPersistentVolumeSource ptr
  9 cephfs core.CephFSPersistentVolumeSource ptr
  10 fc core.FCVolumeSource ptr
  11 flocker core.FlockerVolumeSource ptr
  12 flexVolume core.FlexPersistentVolumeSource ptr
  13 azureFile core.AzureFilePersistentVolumeSource ptr
  14 vsphereVolume core.VsphereVirtualDiskVolumeSource ptr
  15 quobyte core.QuobyteVolumeSource ptr
  16 azureDisk core.AzureDiskVolumeSource ptr
  17 photonPersistentDisk core.PhotonPersistentDiskVolumeSource ptr
  18 portworxVolume core.PortworxVolumeSource ptr
  19 scaleIO core.ScaleIOPersistentVolumeSource ptr
  20 local core.LocalVolumeSource ptr
  21 storageos core.StorageOSPersistentVolumeSource ptr
  22 csi core.CSIPersistentVolumeSource ptr
core.GlusterfsPersistentVolumeSource
  1 endpoints string keep
  2 path string keep
  3 readOnly bool
  4 endpointsNamespace string ptr
core.RBDPersistentVolumeSource
  1 monitors []string
  2 image string keep
  3 fsType string
  4 pool string
  5 user string
  6 keyring string
  7 secretRef core.SecretReference ptr
  8 readOnly bool
core.SecretReference
  1 name string
  2 namespace string
core.ISCSIPersistentVolumeSource
  1 targetPortal string keep
  2 iqn string keep
  3 lun int32 keep
  4 iscsiInterface string
  5 fsType string
  6 readOnly bool
  7 portals []string
  8 chapAuthDiscovery bool
  10 secretRef core.SecretReference ptr
  11 chapAuthSession bool
  12 initiatorName string ptr
core.CinderPersistentVolumeSource
  1 volumeID string keep
  2 fsType string
  3 readOnly bool
  4 secretRef core.SecretReference ptr
core.CephFSPersistentVolumeSource
  1 monitors []string
  2 path string
  3 user string
  4 secretFile string
  5 secretRef core.SecretReference ptr
  6 readOnly bool
core.FlexPersistentVolumeSource
  1 driver string keep
  2 fsType string
  3 secretRef core.SecretReference ptr
  4 readOnly bool
  5 options map:string
core.AzureFilePersistentVolumeSource
  1 secretName string keep
  2 shareName string keep
  3 readOnly bool
  4 secretNamespace string ptr
core.ScaleIOPersistentVolumeSource
  1 gateway string keep
  2 system string keep
  3 secretRef core.SecretReference ptr
  4 sslEnabled bool
  5 protectionDomain string
  6 storagePool string
  7 storageMode string
  8 volumeName string
  9 fsType string
  10 readOnly bool
core.LocalVolumeSource
  1 path string keep
  2 fsType string ptr
core.StorageOSPersistentVolumeSource
  1 volumeName string
  2 volumeNamespace string
  3 fsType string
  4 readOnly bool
  5 secretRef core.ObjectReference ptr
core.CSIPersistentVolumeSource
  1 driver string keep
  2 volumeHandle string keep
  3 readOnly bool
  4 fsType string
  5 volumeAttributes map:string
  6 controllerPublishSecretRef core.SecretReference ptr
  7 nodeStageSecretRef core.SecretReference ptr
  8 nodePublishSecretRef core.SecretReference ptr
  9 controllerExpandSecretRef core.SecretReference ptr
  10 nodeExpandSecretRef core.SecretReference ptr
core.VolumeNodeAffinity
  1 required core.NodeSelector ptr
core.PersistentVolumeStatus
  1 phase string
  2 message string
  3 reason string
  4 lastPhaseTransitionTime time ptr
core.PersistentVolumeClaim
  1 metadata meta.ObjectMeta
  2 spec core.PersistentVolumeClaimSpec
  3 status core.PersistentVolumeClaimStatus
core.PersistentVolumeClaimStatus
  1 phase string
  2 accessModes []string
  3 capacity map:quantity
  4 conditions []core.PersistentVolumeClaimCondition
  5 allocatedResources map:quantity
  7 allocatedResourceStatuses map:string
  8 currentVolumeAttributesClassName string ptr
  9 modifyVolumeStatus core.ModifyVolumeStatus ptr
  10 healthStatus core.VolumeHealthStatus ptr
core.PersistentVolumeClaimCondition
  1 type string keep
  2 status string keep
  3 lastProbeTime time
  4 lastTransitionTime time
  5 reason string
  6 message string
core.ModifyVolumeStatus
  1 targetVolumeAttributesClassName string
  2 status string keep
core.VolumeHealthStatus
  1 healthConditions []core.VolumeHealthCondition
  2 lastTransitionTime time
core.LimitRange
  1 metadata meta.ObjectMeta
  2 spec core.LimitRangeSpec
core.LimitRangeSpec
  1 limits []core.LimitRangeItem
core.LimitRangeItem
  1 type string keep
  2 max map:quantity
  3 min map:quantity
  4 default map:quantity
  5 defaultRequest map:quantity
  6 maxLimitRequestRatio map:quantity
apps.Deployment
  1 metadata meta.ObjectMeta
  2 spec apps.DeploymentSpec
  3 status apps.DeploymentStatus
apps.DeploymentSpec
  1 replicas int32 ptr
  2 selector meta.LabelSelector ptr
  3 template core.PodTemplateSpec
  4 strategy apps.DeploymentStrategy
  5 minReadySeconds int32
  6 revisionHistoryLimit int32 ptr
  7 paused bool
  9 progressDeadlineSeconds int32 ptr
apps.DeploymentStrategy
  1 type string
  2 rollingUpdate apps.RollingUpdateDeployment ptr
apps.RollingUpdateDeployment
  1 maxUnavailable intorstring ptr
  2 maxSurge intorstring ptr
apps.DeploymentStatus
  1 observedGeneration int64
  2 replicas int32
  3 updatedReplicas int32
  4 availableReplicas int32
  5 unavailableReplicas int32
  6 conditions []apps.DeploymentCondition
  7 readyReplicas int32
  8 collisionCount int32 ptr
  9 terminatingReplicas int32 ptr
apps.DeploymentCondition
  1 type string keep
  2 status string keep
  4 reason string
  5 message string
  6 lastUpdateTime time
  7 lastTransitionTime time
apps.ReplicaSet
  1 metadata meta.ObjectMeta
  2 spec apps.ReplicaSetSpec
  3 status apps.ReplicaSetStatus
apps.ReplicaSetSpec
  1 replicas int32 ptr
  2 selector meta.LabelSelector ptr
  3 template core.PodTemplateSpec
  4 minReadySeconds int32
apps.ReplicaSetStatus
  1 replicas int32 keep
  2 fullyLabeledReplicas int32
  3 observedGeneration int64
  4 readyReplicas int32
  5 availableReplicas int32
  6 conditions []apps.ReplicaSetCondition
  7 terminatingReplicas int32 ptr
apps.ReplicaSetCondition
  1 type string keep
  2 status string keep
  3 lastTransitionTime time
  4 reason string
  5 message string
apps.StatefulSet
  1 metadata meta.ObjectMeta
  2 spec apps.StatefulSetSpec
  3 status apps.StatefulSetStatus
apps.StatefulSetSpec
  1 replicas int32 ptr
  2 selector meta.LabelSelector ptr
  3 template core.PodTemplateSpec
  4 volumeClaimTemplates []core.PersistentVolumeClaim
  5 serviceName string keep
  6 podManagementPolicy string
  7 updateStrategy apps.StatefulSetUpdateStrategy
  8 revisionHistoryLimit int32 ptr
  9 minReadySeconds int32
  10 persistentVolumeClaimRetentionPolicy apps.StatefulSetPersistentVolumeClaimRetentionPolicy ptr
  11 ordinals apps.StatefulSetOrdinals ptr
apps.StatefulSetUpdateStrategy
  1 type string
  2 rollingUpdate apps.RollingUpdateStatefulSetStrategy ptr
apps.RollingUpdateStatefulSetStrategy
  1 partition int32 ptr
  2 maxUnavailable intorstring ptr
apps.StatefulSetPersistentVolumeClaimRetentionPolicy
  1 whenDeleted string
  2 whenScaled string
apps.StatefulSetOrdinals
  1 start int32 keep
apps.StatefulSetStatus
  1 observedGeneration int64
  2 replicas int32 keep
  3 readyReplicas int32
  4 currentReplicas int32
  5 updatedReplicas int32
  6 currentRevision string
  7 updateRevision string
  9 collisionCount int32 ptr
  10 conditions []apps.StatefulSetCondition
  11 availableReplicas int32 keep
apps.StatefulSetCondition
  1 type string keep
  2 status string keep
  3 lastTransitionTime time
  4 reason string
  5 message string
apps.DaemonSet
  1 metadata meta.ObjectMeta
  2 spec apps.DaemonSetSpec
  3 status apps.DaemonSetStatus
apps.DaemonSetSpec
  1 selector meta.LabelSelector ptr
  2 template core.PodTemplateSpec
  3 updateStrategy apps.DaemonSetUpdateStrategy
  4 minReadySeconds int32
  6 revisionHistoryLimit int32 ptr
apps.DaemonSetUpdateStrategy
  1 type string
  2 rollingUpdate apps.RollingUpdateDaemonSet ptr
apps.RollingUpdateDaemonSet
  1 maxUnavailable intorstring ptr
  2 maxSurge intorstring ptr
apps.DaemonSetStatus
  1 currentNumberScheduled int32 keep
  2 numberMisscheduled int32 keep
  3 desiredNumberScheduled int32 keep
  4 numberReady int32 keep
  5 observedGeneration int64
  6 updatedNumberScheduled int32
  7 numberAvailable int32
  8 numberUnavailable int32
  9 collisionCount int32 ptr
  10 conditions []apps.DaemonSetCondition
apps.DaemonSetCondition
  1 type string keep
  2 status string keep
  3 lastTransitionTime time
  4 reason string
  5 message string
apps.ControllerRevision
  1 metadata meta.ObjectMeta
  2 data rawjson
  3 revision int64 keep
batch.Job
  1 metadata meta.ObjectMeta
  2 spec batch.JobSpec
  3 status batch.JobStatus
batch.JobSpec
  1 parallelism int32 ptr
  2 completions int32 ptr
  3 activeDeadlineSeconds int64 ptr
  4 selector meta.LabelSelector ptr
  5 manualSelector bool ptr
  6 template core.PodTemplateSpec
  7 backoffLimit int32 ptr
  8 ttlSecondsAfterFinished int32 ptr
  9 completionMode string ptr
  10 suspend bool ptr
  11 podFailurePolicy batch.PodFailurePolicy ptr
  12 backoffLimitPerIndex int32 ptr
  13 maxFailedIndexes int32 ptr
  14 podReplacementPolicy string ptr
  15 managedBy string ptr
  16 successPolicy batch.SuccessPolicy ptr
  17 scheduling batch.JobSchedulingConfiguration ptr
batch.PodFailurePolicy
  1 rules []batch.PodFailurePolicyRule
batch.PodFailurePolicyRule
  1 action string keep
  2 onExitCodes batch.PodFailurePolicyOnExitCodesRequirement ptr
  3 onPodConditions []batch.PodFailurePolicyOnPodConditionsPattern
batch.PodFailurePolicyOnExitCodesRequirement
  1 containerName string ptr
  2 operator string keep
  3 values []int32
batch.PodFailurePolicyOnPodConditionsPattern
  1 type string keep
  2 status string keep
batch.SuccessPolicy
  1 rules []batch.SuccessPolicyRule
batch.SuccessPolicyRule
  1 succeededIndexes string ptr
  2 succeededCount int32 ptr
batch.JobSchedulingConfiguration
batch.JobStatus
  1 conditions []batch.JobCondition
  2 startTime time ptr
  3 completionTime time ptr
  4 active int32
  5 succeeded int32
  6 failed int32
  7 completedIndexes string
  8 uncountedTerminatedPods batch.UncountedTerminatedPods ptr
  9 ready int32 ptr
  10 failedIndexes string ptr
  11 terminating int32 ptr
batch.JobCondition
  1 type string keep
  2 status string keep
  3 lastProbeTime time
  4 lastTransitionTime time
  5 reason string
  6 message string
batch.UncountedTerminatedPods
  1 succeeded []string
  2 failed []string
batch.CronJob
  1 metadata meta.ObjectMeta
  2 spec batch.CronJobSpec
  3 status batch.CronJobStatus
batch.CronJobSpec
  1 schedule string keep
  2 startingDeadlineSeconds int64 ptr
  3 concurrencyPolicy string
  4 suspend bool ptr
  5 jobTemplate batch.JobTemplateSpec
  6 successfulJobsHistoryLimit int32 ptr
  7 failedJobsHistoryLimit int32 ptr
  8 timeZone string ptr
batch.JobTemplateSpec
  1 metadata meta.ObjectMeta
  2 spec batch.JobSpec
batch.CronJobStatus
  1 active []core.ObjectReference
  4 lastScheduleTime time ptr
  5 lastSuccessfulTime time ptr
policy.PodDisruptionBudget
  1 metadata meta.ObjectMeta
  2 spec policy.PodDisruptionBudgetSpec
  3 status policy.PodDisruptionBudgetStatus
policy.PodDisruptionBudgetSpec
  1 minAvailable intorstring ptr
  2 selector meta.LabelSelector ptr
  3 maxUnavailable intorstring ptr
  4 unhealthyPodEvictionPolicy string ptr
policy.PodDisruptionBudgetStatus
  1 observedGeneration int64
  2 disruptedPods map:time
  3 disruptionsAllowed int32 keep
  4 currentHealthy int32 keep
  5 desiredHealthy int32 keep
  6 expectedPods int32 keep
  7 conditions []meta.Condition
policy.Eviction
  1 metadata meta.ObjectMeta
  2 deleteOptions meta.DeleteOptions ptr
meta.DeleteOptions
  1 gracePeriodSeconds int64 ptr
  2 preconditions meta.Preconditions ptr
  3 orphanDependents bool ptr
  4 propagationPolicy string ptr
  5 dryRun []string
  6 ignoreStoreReadErrorWithClusterBreakingPotential bool ptr
meta.Preconditions
  1 uid string ptr
  2 resourceVersion string ptr
scheduling.PriorityClass
  1 metadata meta.ObjectMeta
  2 value int32 keep
  3 globalDefault bool
  4 description string
  5 preemptionPolicy string ptr
coordination.Lease
  1 metadata meta.ObjectMeta
  2 spec coordination.LeaseSpec
coordination.LeaseSpec
  1 holderIdentity string ptr
  2 leaseDurationSeconds int32 ptr
  3 acquireTime microtime ptr
  4 renewTime microtime ptr
  5 leaseTransitions int32 ptr
  6 strategy string ptr
  7 preferredHolder string ptr
events.Event
  1 metadata meta.ObjectMeta
  2 eventTime microtime
  3 series events.EventSeries ptr
  4 reportingController string
  5 reportingInstance string
  6 action string
  7 reason string
  8 regarding core.ObjectReference
  9 related core.ObjectReference ptr
  10 note string
  11 type string
  12 deprecatedSource core.EventSource
  13 deprecatedFirstTimestamp time
  14 deprecatedLastTimestamp time
  15 deprecatedCount int32
events.EventSeries
  1 count int32 keep
  2 lastObservedTime microtime
autoscaling.Scale
  1 metadata meta.ObjectMeta
  2 spec autoscaling.ScaleSpec
  3 status autoscaling.ScaleStatus
autoscaling.ScaleSpec
  1 replicas int32
autoscaling.ScaleStatus
  1 replicas int32 keep
  2 selector string
storage.StorageClass
  1 metadata meta.ObjectMeta
  2 provisioner string keep
  3 parameters map:string
  4 reclaimPolicy string ptr
  5 mountOptions []string
  6 allowVolumeExpansion bool ptr
  7 volumeBindingMode string ptr
  8 allowedTopologies []core.TopologySelectorTerm
core.TopologySelectorTerm
  1 matchLabelExpressions []core.TopologySelectorLabelRequirement
core.TopologySelectorLabelRequirement
  1 key string keep
  2 values []string
storage.CSIDriver
  1 metadata meta.ObjectMeta
  2 spec storage.CSIDriverSpec
storage.CSIDriverSpec
  1 attachRequired bool ptr
  2 podInfoOnMount bool ptr
  3 volumeLifecycleModes []string
  4 storageCapacity bool ptr
  5 fsGroupPolicy string ptr
  6 tokenRequests []storage.TokenRequest
  7 requiresRepublish bool ptr
  8 seLinuxMount bool ptr
  9 nodeAllocatableUpdatePeriodSeconds int64 ptr
  10 serviceAccountTokenInSecrets bool ptr
  11 preventPodSchedulingIfMissing bool ptr
storage.TokenRequest
  1 audience string keep
  2 expirationSeconds int64 ptr
storage.CSINode
  1 metadata meta.ObjectMeta
  2 spec storage.CSINodeSpec
  3 status storage.CSINodeStatus
storage.CSINodeSpec
  1 drivers []storage.CSINodeDriver
storage.CSINodeDriver
  1 name string keep
  2 nodeID string keep
  3 topologyKeys []string
  4 allocatable storage.VolumeNodeResources ptr
storage.VolumeNodeResources
  1 count int32 ptr
storage.CSINodeStatus
  1 storageHealth []storage.StorageHealth
storage.StorageHealth
  1 name string keep
  2 healthConditions []storage.StorageHealthCondition
storage.StorageHealthCondition
  1 status string keep
  2 reason string keep
  3 message string
  4 accessMode string ptr
  5 volumeMode string ptr
  6 lastTransitionTime time
storage.CSIStorageCapacity
  1 metadata meta.ObjectMeta
  2 nodeTopology meta.LabelSelector ptr
  3 storageClassName string keep
  4 capacity quantity ptr
  5 maximumVolumeSize quantity ptr
storage.VolumeAttachment
  1 metadata meta.ObjectMeta
  2 spec storage.VolumeAttachmentSpec
  3 status storage.VolumeAttachmentStatus
storage.VolumeAttachmentSpec
  1 attacher string keep
  2 source storage.VolumeAttachmentSource
  3 nodeName string keep
storage.VolumeAttachmentSource
  1 persistentVolumeName string ptr
  2 inlineVolumeSpec core.PersistentVolumeSpec ptr
storage.VolumeAttachmentStatus
  1 attached bool keep
  2 attachmentMetadata map:string
  3 attachError storage.VolumeError ptr
  4 detachError storage.VolumeError ptr
storage.VolumeError
  1 time time
  2 message string
  3 errorCode int32 ptr
"""

MESSAGES: Mapping[str, Message] = _parse_schema(_SCHEMA)
