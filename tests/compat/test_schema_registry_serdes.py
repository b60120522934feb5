"""confluent-kafka's own schema-registry serializers over lakelog.schema_registry: its serdes unit tests, ported.

confluent's tests (tests/schema_registry/_sync/test_{avro,json,proto}_serdes.py) run its serializers on its
mock client; here they run on lakelog's `SchemaRegistryClient` over a root, with confluent's own `Schema` and
`SchemaReference` objects handed to it, as a framework would. The cases kept are those that need no data-contract
rules (CEL, encryption, JSONata): a root's registry keeps no rule sets.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastavro")
from confluent_kafka.schema_registry import Schema, SchemaReference  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext, SerializationError  # noqa: E402

from lakelog.schema_registry import SchemaRegistryClient  # noqa: E402

TOPIC = "topic1"
SUBJECT = TOPIC + "-value"
CONTEXT = SerializationContext(TOPIC, MessageField.VALUE)
BASIC_FIELDS = [
    {"name": "intField", "type": "int"},
    {"name": "doubleField", "type": "double"},
    {"name": "stringField", "type": "string"},
    {"name": "booleanField", "type": "boolean"},
    {"name": "bytesField", "type": "bytes"},
]
BASIC_VALUE = {"intField": 123, "doubleField": 45.67, "stringField": "hi", "booleanField": True, "bytesField": b"foobar"}


@pytest.fixture
def client(root: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": f"lakelog:{root}"})


def test_avro_basic_round_trip_registers_once(client, root):
    schema = {"type": "record", "name": "test", "fields": BASIC_FIELDS}
    serialize = AvroSerializer(client, json.dumps(schema), conf={"auto.register.schemas": True})
    data = serialize(BASIC_VALUE, CONTEXT)
    assert data[0] == 0 and int.from_bytes(data[1:5], "big") == client.get_latest_version(SUBJECT).schema_id
    # A deserializer in another client of the root finds the writer's schema by the id in the frame.
    assert AvroDeserializer(SchemaRegistryClient({"lakelog.root": root}))(data, CONTEXT) == BASIC_VALUE
    assert client.get_versions(SUBJECT) == [1]


def test_avro_nested_record(client):
    nested = {"type": "record", "name": "nested", "fields": BASIC_FIELDS}
    schema = {"type": "record", "name": "test", "fields": [{"name": "nested", "type": nested}]}
    value = {"nested": BASIC_VALUE}
    data = AvroSerializer(client, json.dumps(schema))(value, CONTEXT)
    assert AvroDeserializer(client)(data, CONTEXT) == value


def test_avro_references_with_latest_version(client):
    """confluent's test_avro_serialize_references: a referenced record registered under its own subject."""
    client.register_schema("ref", Schema(json.dumps({"type": "record", "name": "ref", "fields": BASIC_FIELDS})))
    schema = {"type": "record", "name": "test", "fields": [{"name": "refField", "type": "ref"}]}
    client.register_schema(SUBJECT, Schema(json.dumps(schema), "AVRO", [SchemaReference("ref", "ref", 1)]))
    serialize = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})
    value = {"refField": BASIC_VALUE}
    assert AvroDeserializer(client)(serialize(value, CONTEXT), CONTEXT) == value


def test_avro_union_of_records(client):
    schema = [
        {"type": "record", "name": "A", "fields": [{"name": "a", "type": "int"}]},
        {"type": "record", "name": "B", "fields": [{"name": "b", "type": "string"}]},
    ]
    data = AvroSerializer(client, json.dumps(schema))({"b": "x"}, CONTEXT)
    assert AvroDeserializer(client)(data, CONTEXT) == {"b": "x"}


def test_avro_schema_evolution_reads_old_data_with_the_latest(client):
    """confluent's test_avro_schema_evolution: a field dropped, an optional one added (BACKWARD compatible)."""
    first = {"name": "SchemaEvolution", "type": "record", "fields": [{"name": "fieldToDelete", "type": "string"}]}
    second = {
        "name": "SchemaEvolution",
        "type": "record",
        "fields": [{"name": "newOptionalField", "type": ["string", "null"], "default": "optional"}],
    }
    client.register_schema(SUBJECT, Schema(json.dumps(first)))
    data = AvroSerializer(client, None, conf={"auto.register.schemas": False, "use.latest.version": True})(
        {"fieldToDelete": "bye"}, CONTEXT
    )
    client.register_schema(SUBJECT, Schema(json.dumps(second)))
    client.clear_latest_caches()
    read = AvroDeserializer(client, conf={"use.latest.version": True})(data, CONTEXT)
    assert read.get("fieldToDelete") is None and read.get("newOptionalField") == "optional"


def test_json_basic_round_trip_and_failing_validation(client):
    schema = {
        "type": "object",
        "properties": {"intField": {"type": "integer"}, "stringField": {"type": "string"}},
        "required": ["intField"],
    }
    serialize = JSONSerializer(json.dumps(schema), client)
    value = {"intField": 123, "stringField": "hi"}
    data = serialize(value, CONTEXT)
    assert JSONDeserializer(None, schema_registry_client=client)(data, CONTEXT) == value
    with pytest.raises(SerializationError):
        serialize({"intField": "not an int"}, CONTEXT)


def test_json_references(client):
    """confluent's test_json_serialize_references: a $ref to a schema registered under its own subject."""
    referenced = {"type": "object", "properties": {"intField": {"type": "integer"}}}
    client.register_schema("ref", Schema(json.dumps(referenced), "JSON"))
    schema = {"type": "object", "properties": {"otherField": {"$ref": "ref"}}}
    client.register_schema(SUBJECT, Schema(json.dumps(schema), "JSON", [SchemaReference("ref", "ref", 1)]))
    serialize = JSONSerializer(None, client, conf={"auto.register.schemas": False, "use.latest.version": True})
    value = {"otherField": {"intField": 7}}
    assert JSONDeserializer(None, schema_registry_client=client)(serialize(value, CONTEXT), CONTEXT) == value


def test_protobuf_round_trip_and_wire_compatibility(client):
    pytest.importorskip("google.protobuf")
    from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer

    from lakelog.schema_registry import SchemaRegistryError

    author = _message_class("lakelog_test_author.proto", "Author", [("name", 1, 9), ("id", 2, 5), ("works", 3, 9)])
    serialize = ProtobufSerializer(author, client, conf={"use.deprecated.format": False})
    value = author(name="Kafka", id=123, works="The Castle")
    data = serialize(value, CONTEXT)
    assert ProtobufDeserializer(author, {"use.deprecated.format": False}, client)(data, CONTEXT) == value
    # Field 2 turned from int32 to string: its bytes no longer parse, so BACKWARD refuses it with 409.
    changed = _message_class("lakelog_test_author2.proto", "Author", [("name", 1, 9), ("id", 2, 9)])
    with pytest.raises(SchemaRegistryError) as raised:
        ProtobufSerializer(changed, client, conf={"use.deprecated.format": False})(changed(name="K", id="x"), CONTEXT)
    assert raised.value.error_code == 409


def _message_class(file_name: str, message: str, fields: list[tuple[str, int, int]]):
    """A message class built from a FileDescriptorProto (no protoc): fields as (name, number, type)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(name=file_name, package="lakelog.test", syntax="proto3")
    described = proto.message_type.add(name=message)
    for name, number, field_type in fields:
        described.field.add(name=name, number=number, type=field_type, label=1)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(f"lakelog.test.{message}"))
