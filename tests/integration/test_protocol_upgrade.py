"""Tables written before lakelog declared the `invariants` writer feature get it by one protocol-only commit each.

The old lake is every kind of table lakelog writes (tests/lake_kinds.py), written while lakelog's protocol was the
old one (writer features: lakelogStrictCommit only). `upgrade_root` commits, on each table, exactly version v+1
holding a protocol action and nothing else; data files, metadata, app transactions and rows stay; delta-rs and
lakelog read every version as before; lakelog keeps writing; a second run commits nothing. (delta-spark reading the
upgraded tables: tests/spark/test_protocol_upgrade_spark.py.)
"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable
from lake_kinds import lakelog_rows, sorted_rows, tables_under, write_every_kind

from lakelog import Producer
from lakelog.jobs.protocol_upgrade import upgrade_root, upgraded
from lakelog.store import Location, Table
from lakelog.store.delta.actions import INVARIANTS_FEATURE, LAKELOG_WRITER_FEATURE, PROTOCOL, decode_commit

pytestmark = pytest.mark.roots("local", "s3")

OLD_PROTOCOL = {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": [LAKELOG_WRITER_FEATURE]}


def write_old_lake(root: str, monkeypatch) -> None:
    """Every kind of table, written by lakelog as it was before `invariants` was declared."""
    with monkeypatch.context() as old:
        old.setitem(PROTOCOL, "writerFeatures", [LAKELOG_WRITER_FEATURE])
        write_every_kind(root)


def state(location: Location) -> tuple:
    table = Table.open(location)
    return (sorted(table.data_paths()), table.configuration, table.table_id, sorted_rows(lakelog_rows(table)))


def test_old_tables_are_upgraded_by_one_protocol_commit_each_and_read_as_before(root, monkeypatch):
    write_old_lake(root, monkeypatch)
    before = {location.uri: (Table.open(location).version, state(location)) for location in tables_under(root)}
    # The root's own table was made by `initialise_root` (the fixture), with today's protocol: left as it is.
    tables = [location for location in tables_under(root) if Table.open(location).protocol == OLD_PROTOCOL]
    assert len(tables) >= 5 and len(tables) == len(before) - 1

    done = upgrade_root(root)

    assert set(done) == set(before)
    for uri, version in done.items():
        if uri not in {location.uri for location in tables}:
            assert version is None and Table.open(Location.of(uri)).version == before[uri][0]
    for location in tables:
        version, was = before[location.uri]
        assert done[location.uri] == version + 1, location.uri
        table = Table.open(location)
        assert table.version == version + 1
        assert table.protocol == {
            "minReaderVersion": 1,
            "minWriterVersion": 7,
            "writerFeatures": [LAKELOG_WRITER_FEATURE, INVARIANTS_FEATURE],
        }
        # The commit holds the protocol and its commitInfo, nothing else.
        actions = decode_commit(location.io.read((location / "_delta_log" / f"{version + 1:020d}.json").uri))
        assert sorted(next(iter(action)) for action in actions) == ["commitInfo", "protocol"]
        assert table.history(1)[0]["operation"] == "UPGRADE PROTOCOL"
        assert state(location) == was, location.uri
        # delta-rs reads the upgraded version, and the one before it, with lakelog's rows.
        options = location.io.delta_options()
        for at in (version, version + 1):
            reference = DeltaTable(location.uri, version=at, storage_options=options)
            assert sorted_rows(reference.to_pyarrow_table()) == sorted_rows(lakelog_rows(Table.open(location, version=at)))
        assert INVARIANTS_FEATURE in (reference.protocol().writer_features or [])

    # lakelog keeps writing the upgraded tables; nothing is left to upgrade.
    producer = Producer({"lakelog.root": root, "linger.ms": 0})
    producer.produce("events", value="after", partition=0)
    assert producer.flush(30) == 0
    producer.close()
    assert all(version is None for version in upgrade_root(root).values())


def test_the_upgraded_protocol_keeps_what_the_old_one_declared():
    """A legacy writer version's implied features are listed (nothing taken away); reader features kept;
    a table with everything gets no upgrade."""
    assert upgraded({"minReaderVersion": 1, "minWriterVersion": 2}) == {
        "minReaderVersion": 1,
        "minWriterVersion": 7,
        "writerFeatures": ["appendOnly", "invariants", LAKELOG_WRITER_FEATURE],
    }
    assert upgraded(
        {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["v2Checkpoint"], "writerFeatures": ["v2Checkpoint"]}
    ) == {
        "minReaderVersion": 3,
        "minWriterVersion": 7,
        "readerFeatures": ["v2Checkpoint"],
        "writerFeatures": ["v2Checkpoint", INVARIANTS_FEATURE, LAKELOG_WRITER_FEATURE],
    }
    assert upgraded(PROTOCOL) is None
    assert upgraded({**PROTOCOL, "writerFeatures": [LAKELOG_WRITER_FEATURE, "deletionVectors", INVARIANTS_FEATURE]}) is None
