"""lakelog.schema_registry's SchemaRegistryClient on a root: confluent's API, codes and compatibility levels.

Schemas are rows of the root's `__schemas` log: a second client (or process) sees every registration, ids are
global and stable, and a refused request leaves the tables byte for byte as they were (S8.3).
"""

from __future__ import annotations

import json

import pytest
from helpers import table_fingerprint

from lakelog.schema_registry import RegisteredSchema, Schema, SchemaReference, SchemaRegistryClient, SchemaRegistryError

USER_V1 = {"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}
USER_V2 = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "age", "type": "int", "default": 0}]}
# A field without a default: data written with USER_V1 has no value for it.
USER_REQUIRED_EMAIL = {**USER_V1, "fields": [*USER_V1["fields"], {"name": "email", "type": "string"}]}


def avro(schema: dict) -> Schema:
    return Schema(json.dumps(schema), "AVRO")


@pytest.fixture
def client(root: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": f"lakelog:{root}"})


def code_of(raised: pytest.ExceptionInfo[SchemaRegistryError]) -> tuple[int, int]:
    return raised.value.http_status_code, raised.value.error_code


def test_register_gives_one_id_per_schema_and_versions_per_subject(client, root):
    first = client.register_schema("users-value", avro(USER_V1))
    assert client.register_schema("users-value", avro(USER_V1)) == first
    # The same text, reformatted, is the same schema; another subject shares its id, as confluent's registry does.
    assert client.register_schema("people-value", Schema(json.dumps(USER_V1, indent=2))) == first
    second = client.register_schema("users-value", avro(USER_V2))
    assert second == first + 1
    latest = client.get_latest_version("users-value")
    assert isinstance(latest, RegisteredSchema)
    assert (latest.schema_id, latest.subject, latest.version) == (second, "users-value", 2)
    assert json.loads(client.get_version("users-value", 1).schema.schema_str) == USER_V1
    assert json.loads(client.get_schema(second).schema_str) == USER_V2
    assert client.get_subjects() == ["people-value", "users-value"]
    assert client.get_versions("users-value") == [1, 2]
    assert client.lookup_schema("users-value", avro(USER_V2)).version == 2
    assert client.get_subjects_by_schema_id(first) == ["people-value", "users-value"]
    # Another client of the root reads the same rows.
    other = SchemaRegistryClient({"lakelog.root": root})
    assert other.get_latest_version("users-value").schema_id == second


def test_errors_carry_confluents_codes(client):
    with pytest.raises(SchemaRegistryError) as raised:
        client.get_latest_version("nobody-value")
    assert code_of(raised) == (404, 40401)
    with pytest.raises(SchemaRegistryError) as raised:
        client.get_schema(99)
    assert code_of(raised) == (404, 40403)
    client.register_schema("users-value", avro(USER_V1))
    with pytest.raises(SchemaRegistryError) as raised:
        client.get_version("users-value", 7)
    assert code_of(raised) == (404, 40402)
    with pytest.raises(SchemaRegistryError) as raised:
        client.lookup_schema("users-value", avro(USER_V2))
    assert code_of(raised) == (404, 40403)
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema("users-value", Schema('{"type": "record"}'))
    assert code_of(raised) == (422, 42201)
    with pytest.raises(SchemaRegistryError) as raised:
        client.set_compatibility("users-value", "SIDEWAYS")
    assert code_of(raised) == (422, 42203)
    with pytest.raises(SchemaRegistryError) as raised:
        client.get_compatibility("users-value")
    assert code_of(raised) == (404, 40408)
    assert "HTTP status code 404, SR code 40408" in str(raised.value)


def test_S8_3_an_incompatible_schema_is_409_and_leaves_the_tables_unchanged(client, root):
    client.register_schema("users-value", avro(USER_V1))
    before = table_fingerprint(root)
    for refused in (
        lambda: client.register_schema("users-value", avro(USER_REQUIRED_EMAIL)),
        lambda: client.register_schema("users-value", Schema("not json", "JSON")),
        lambda: client.delete_subject("users-value", permanent=True),
        lambda: client.set_compatibility(None, "NOPE"),
    ):
        with pytest.raises(SchemaRegistryError) as raised:
            refused()
        assert raised.value.error_code in (409, 42201, 40405, 42203)
    assert table_fingerprint(root) == before
    assert client.get_versions("users-value") == [1]


def test_compatibility_levels_and_test_compatibility(client):
    assert client.get_compatibility() == "BACKWARD"
    client.register_schema("users-value", avro(USER_V1))
    assert client.test_compatibility("users-value", avro(USER_V2))
    assert not client.test_compatibility("users-value", avro(USER_REQUIRED_EMAIL))
    assert client.set_compatibility("users-value", "none") == "NONE"
    assert client.get_compatibility("users-value") == "NONE"
    client.register_schema("users-value", avro(USER_REQUIRED_EMAIL))
    # FORWARD: the old schema must read the new one's data; dropping a field without default from the old breaks it.
    client.set_compatibility("users-value", "FORWARD")
    assert not client.test_compatibility("users-value", avro(USER_V1))
    # BACKWARD_TRANSITIVE holds a new schema to every version, not only the latest.
    client.set_compatibility("users-value", "BACKWARD_TRANSITIVE")
    email_only = {**USER_V1, "fields": [*USER_REQUIRED_EMAIL["fields"][1:]]}
    assert not client.test_compatibility_all_versions("users-value", avro(email_only))
    client.set_compatibility(level="FULL")
    assert client.get_compatibility() == "FULL"


def test_delete_soft_then_permanent_keeps_ids(client):
    schema_id = client.register_schema("users-value", avro(USER_V1))
    client.register_schema("users-value", avro(USER_V2))
    with pytest.raises(SchemaRegistryError) as raised:
        client.delete_subject("users-value", permanent=True)
    assert code_of(raised) == (404, 40405)
    assert client.delete_subject("users-value") == [1, 2]
    assert client.get_subjects() == [] and client.get_subjects(deleted=True) == ["users-value"]
    with pytest.raises(SchemaRegistryError) as raised:
        client.get_latest_version("users-value")
    assert code_of(raised) == (404, 40401)
    assert client.get_version("users-value", 1, deleted=True).schema_id == schema_id
    assert client.delete_subject("users-value", permanent=True) == [1, 2]
    # A schema's id outlives its versions: registering it again gives it back.
    assert client.get_schema(schema_id) is not None
    assert client.register_schema("users-value", avro(USER_V1)) == schema_id
    assert client.get_latest_version("users-value").version == 1
    with pytest.raises(SchemaRegistryError) as raised:
        client.delete_subject("nobody")
    assert code_of(raised) == (404, 40401)


def test_references_resolve_through_registered_versions(client):
    address = {"type": "record", "name": "Address", "namespace": "shop", "fields": [{"name": "city", "type": "string"}]}
    client.register_schema("address", avro(address))
    order = {"type": "record", "name": "Order", "namespace": "shop", "fields": [{"name": "to", "type": "Address"}]}
    order_id = client.register_schema(
        "orders-value", Schema(json.dumps(order), "AVRO", [SchemaReference("shop.Address", "address", 1)])
    )
    assert client.get_schema(order_id).references == (SchemaReference("shop.Address", "address", 1),)
    with pytest.raises(SchemaRegistryError) as raised:
        client.register_schema(
            "orders2-value", Schema(json.dumps(order), "AVRO", [SchemaReference("shop.Address", "address", 9)])
        )
    assert code_of(raised) == (422, 42201)


def test_a_url_that_is_not_a_root_is_refused_in_one_line(root):
    with pytest.raises(ValueError, match="lakelog:<root>"):
        SchemaRegistryClient({"url": "http://localhost:8081"})
    with pytest.raises(ValueError, match="Unrecognized properties: color"):
        SchemaRegistryClient({"url": f"lakelog:{root}", "color": "blue"})
    # confluent's connection keys mean nothing on a root and are accepted.
    SchemaRegistryClient({"url": f"lakelog:{root}", "basic.auth.user.info": "u:p"})


def test_S9_3_the_schemas_log_compacts_by_key_and_replays_to_the_same_registry(client, root):
    from lakelog.coordinator.compaction.internal_compaction import compact_internal_logs
    from lakelog.coordinator.schemas.registry import SchemaRegistry
    from lakelog.coordinator.schemas.state import snapshot_of

    client.set_compatibility(None, "NONE")
    for n in range(4):
        client.set_compatibility("users-value", "FULL")
        client.set_compatibility("users-value", "NONE")
        client.register_schema("users-value", avro({**USER_V1, "name": f"User{n}"}))
    client.register_schema("gone-value", avro(USER_V2))
    client.delete_subject("gone-value")
    client.delete_subject("gone-value", permanent=True)
    client.delete_version("users-value", 2)
    before = snapshot_of(SchemaRegistry(root).state())
    (done,) = compact_internal_logs(root)
    assert done.log_name == "__schemas" and done.error is None
    registry = SchemaRegistry(root)
    assert snapshot_of(registry.state()) == before
    # 17 rows: 9 levels (8 of users-value, 1 global), 5 versions, 3 deletions. Dropped: the 7 superseded levels of
    # users-value; kept: the versions (one soft-deleted, with its deletion), the row that gave gone-value's schema
    # its id with the two deletions after it, and the last level of each key.
    assert done.compaction is not None
    assert done.compaction.records_before - done.compaction.records_after == 7
    # The permanently deleted subject's schema keeps its id.
    assert client.register_schema("gone-value", avro(USER_V2)) == before_id(before, USER_V2)


def before_id(snapshot: dict, schema: dict) -> int:
    (found,) = [int(i) for i, fields in snapshot["schemas"].items() if json.loads(fields["schema"]) == schema]
    return found


def test_verify_checks_the_schemas_log_as_every_internal_log(client, root):
    from lakelog.jobs.verify.root import verify_root

    client.register_schema("users-value", avro(USER_V1))
    report = verify_root(root)
    assert report.clean, report.findings
    assert any(summary.table.startswith("__schemas") for summary in report.partitions), report.partitions
