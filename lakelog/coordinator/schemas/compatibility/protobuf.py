"""Protobuf compatibility on the wire: can a reader's messages parse the bytes of the writer's?

A schema is a serialized `FileDescriptorProto`, base64-encoded (what confluent's ProtobufSerializer registers and
asks back with `fmt="serialized"`); `.proto` text is refused, for lakelog has no `.proto` parser. Rules (confluent's,
on the wire): a message of the writer is in the reader's file; a field number both have keeps a wire-compatible
type (varints int32/int64/uint32/uint64/bool/enum together, sint32/sint64, fixed32/sfixed32, fixed64/sfixed64,
string/bytes/message of the same type); a proto2 `required` field of the reader is one of the writer's. The rules
are the same both ways, so BACKWARD and FORWARD agree.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

_VARINTS = {3, 4, 5, 8, 13, 14}  # int64 uint64 int32 bool uint32 enum
_ZIGZAG = {17, 18}  # sint32 sint64
_FIXED32 = {7, 15}  # fixed32 sfixed32
_FIXED64 = {6, 16}  # fixed64 sfixed64
_LENGTH = {9, 12}  # string bytes
_MESSAGE = 11
_REQUIRED = 2
_WIRE_GROUPS = (_VARINTS, _ZIGZAG, _FIXED32, _FIXED64, _LENGTH)


class ProtobufSchemaError(ValueError):
    """A schema that is not a serialized FileDescriptorProto."""


def parse(text: str) -> dict[str, dict[int, tuple[int, str, int]]]:
    """Each message of the file by full name: field number -> (type, type name, label)."""
    try:
        from google.protobuf import descriptor_pb2
    except ImportError:  # pragma: no cover - protobuf is installed with confluent-kafka's protobuf extra
        raise ProtobufSchemaError("Protobuf schemas need the protobuf package") from None
    try:
        data = base64.b64decode(text, validate=True)
        proto = descriptor_pb2.FileDescriptorProto.FromString(data)
    except (binascii.Error, ValueError, Exception) as error:  # DecodeError is a plain Exception subclass
        raise ProtobufSchemaError(f"not a base64 serialized FileDescriptorProto ({error})") from None
    messages: dict[str, dict[int, tuple[int, str, int]]] = {}
    prefix = f".{proto.package}" if proto.package else ""

    def walk(message: Any, scope: str) -> None:
        name = f"{scope}.{message.name}"
        messages[name] = {field.number: (field.type, field.type_name, field.label) for field in message.field}
        for nested in message.nested_type:
            walk(nested, name)

    for message in proto.message_type:
        walk(message, prefix)
    return messages


def incompatibilities(reader: dict[str, dict[int, tuple[int, str, int]]], writer: dict[str, Any]) -> list[str]:
    """Why the reader's file cannot parse every message of the writer's; empty if it can."""
    problems: list[str] = []
    for name, w_fields in writer.items():
        r_fields = reader.get(name)
        if r_fields is None:
            problems.append(f"{name}: the writer's message is missing from the reader")
            continue
        for number, (r_type, r_type_name, r_label) in r_fields.items():
            found = w_fields.get(number)
            if found is None:
                if r_label == _REQUIRED:
                    problems.append(f"{name} field {number}: the reader requires a field the writer lacks")
                continue
            w_type, w_type_name, _ = found
            if not _wire_compatible(r_type, r_type_name, w_type, w_type_name):
                problems.append(f"{name} field {number}: type {w_type} is not read as type {r_type}")
    return problems


def _wire_compatible(r_type: int, r_type_name: str, w_type: int, w_type_name: str) -> bool:
    if r_type == w_type:
        return r_type != _MESSAGE or r_type_name == w_type_name
    return any(r_type in group and w_type in group for group in _WIRE_GROUPS)
