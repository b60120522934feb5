"""Other readers read every table lakelog writes: delta-rs, the reference reader, at every version.

lakelog makes its own commits (lakelog.store.delta.actions, delta_log, checkpoint). Through the public
API this writes a lake with every kind of table lakelog writes: idempotent appends, transactions with
their markers, aborts, compaction (removes and adds with dataChange false), retention (delete-records:
removes and the log start txn), config changes (metaData), checkpoints, and the internal logs the
clients write (transaction state, producer ids, consumer offsets, group metadata). Then, for every table
found under the root and every version still in its log, delta-rs's `DeltaTable(uri, version=v)` must
read the same rows, the same `txn` versions and the same configuration as lakelog's snapshot of that
version. After log cleanup, versions at and after the kept checkpoints are read again through
delta-rs's checkpoint reader (the commits before them are gone). And a conforming writer must refuse
to write a lakelog table (its writer feature), leaving it unchanged.
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from lake_kinds import lakelog_rows, sorted_rows, tables_under, write_every_kind

from lakelog.store import Location, Table
from lakelog.store.delta.actions import LAKELOG_WRITER_FEATURE
from lakelog.store.delta.log import DeltaLog
from lakelog.store.delta.snapshot import replay
from lakelog.store.upkeep.maintenance import cleanup_log

pytestmark = pytest.mark.roots("local", "s3")


def replayed(location: Location, version: int) -> tuple:
    """The state at `version` replayed from the JSON commits alone (no checkpoint): the oracle a checkpoint must match."""
    delta_log = DeltaLog(location)
    snapshot = replay([(v, delta_log.read_commit(v)) for v in range(version + 1)])
    return (
        sorted(f"{location.uri}/{path}" for path in snapshot.adds),
        {app_id: snapshot.app_version(app_id) for app_id in snapshot.txns},
        snapshot.configuration,
    )


def reference_state(reference: DeltaTable, app_ids) -> tuple:
    return (
        sorted(reference.file_uris()),
        {app_id: reference.transaction_version(app_id) for app_id in app_ids},
        dict(reference.metadata().configuration),
    )


def assert_same_at(location: Location, version: int, oracle: tuple | None = None) -> None:
    options = location.io.delta_options()
    reference = DeltaTable(location.uri, version=version, storage_options=options)
    mine = Table.open(location, version=version)
    assert reference.version() == mine.version == version
    where = f"{location.uri} at version {version}"
    if oracle is not None:
        assert reference_state(reference, oracle[1]) == oracle, where
        assert (sorted(mine.data_paths()), {app: mine.app_version(app) for app in oracle[1]}, mine.configuration) == oracle
    assert sorted(reference.file_uris()) == sorted(mine.data_paths()), where
    assert sorted_rows(reference.to_pyarrow_table()) == sorted_rows(lakelog_rows(mine)), where
    assert dict(reference.metadata().configuration) == mine.configuration, where
    assert pa.schema(reference.schema().to_arrow()) == mine.schema, where
    assert reference.metadata().id == mine.table_id, where
    for app_id in mine._snapshot.txns:
        assert reference.transaction_version(app_id) == mine.app_version(app_id), (where, app_id)


def test_delta_rs_reads_every_table_lakelog_writes_at_every_version(root):
    write_every_kind(root)
    tables = tables_under(root)
    names = " ".join(table.uri for table in tables)
    for kind in ("topics/events/0", "__transaction_state", "__consumer_offsets", "__producer_ids"):
        assert kind in names, (kind, names)
    checked = 0
    for location in tables:
        latest = Table.open(location)
        assert latest._snapshot.protocol["writerFeatures"] == ["invariants", LAKELOG_WRITER_FEATURE], location.uri
        for version in range(latest.version + 1):
            assert_same_at(location, version, replayed(location, version))
            checked += 1
    assert checked > 25
    # Every kind of commit was among them.
    events = Table.open(Location.of(root) / "topics" / "events" / "0")
    operations = {entry.get("operation") for entry in events.history(1000)}
    assert {"CREATE TABLE", "WRITE", "SET TBLPROPERTIES"} <= operations, operations
    kinds = {kind for version in range(events.version + 1) for kind in _kinds(events, version)}
    assert {"add", "remove", "txn", "metaData", "protocol", "commitInfo"} <= kinds, kinds


def _kinds(table: Table, version: int) -> set[str]:
    return {key for action in DeltaLog(table.location).read_commit(version) or [] for key in action}


def test_delta_rs_reads_lakelog_checkpoints_after_cleanup(root):
    write_every_kind(root)
    for location in tables_under(root):
        table = Table.open(location)
        oracles = {version: replayed(location, version) for version in range(table.version + 1)}
        cleanup_log(table, keep_checkpoints=1, retention_s=0)
        delta_log = DeltaLog(location)
        names = set(delta_log.names())
        checkpoints = sorted(int(name[:20]) for name in names if name.endswith(".checkpoint.parquet"))
        if not checkpoints:
            continue
        first = checkpoints[0]
        assert f"{first - 1:020d}.json" not in names or first == 0, "the commits behind the checkpoint are gone"
        for version in range(first, table.version + 1):
            assert_same_at(location, version, oracles[version])
        # The newest state too, opened the way delta-rs opens it (from _last_checkpoint).
        reference = DeltaTable(location.uri, storage_options=location.io.delta_options())
        assert reference.version() == table.version


def test_a_conforming_writer_refuses_a_lakelog_table_and_changes_nothing(root):
    write_every_kind(root)
    location = Location.of(root) / "topics" / "events" / "1"
    before = Table.open(location)
    listed = sorted(entry.name for entry in location.list(recursive=True))
    options = location.io.delta_options()
    rows = DeltaTable(location.uri, storage_options=options).to_pyarrow_table().slice(0, 1)
    with pytest.raises(Exception, match="(?i)unsupported|feature"):
        write_deltalake(location.uri, rows, mode="append", storage_options=options)
    with pytest.raises(Exception, match="(?i)unsupported|feature"):
        write_deltalake(DeltaTable(location.uri, storage_options=options), rows, mode="append")
    assert sorted(entry.name for entry in location.list(recursive=True)) == listed
    assert Table.open(location).version == before.version
    # Readers still read it whole.
    assert DeltaTable(location.uri, storage_options=options).version() == before.version


def test_lakelog_reads_and_appends_to_a_table_delta_rs_wrote_with_its_checkpoint(root):
    """Tables written before lakelog made its own commits: delta-rs's commits and checkpoint, then lakelog's appends."""
    location = Location.of(root) / "written-by-delta-rs"
    options = location.io.delta_options()
    rows = pa.table({"offset": pa.array([0], pa.int64()), "value": pa.array([b"a"], pa.binary())})
    for _ in range(3):
        write_deltalake(location.uri, rows, mode="append", storage_options=options)
    DeltaTable(location.uri, storage_options=options).create_checkpoint()
    write_deltalake(location.uri, rows, mode="append", storage_options=options)
    names = set(DeltaLog(location).names())
    assert f"{2:020d}.checkpoint.parquet" in names and "_last_checkpoint" in names
    for version in range(4):
        assert_same_at(location, version, replayed(location, version))
    table = Table.open(location)
    assert table.append(rows, app_versions={"app": 7}) == 4
    assert_same_at(location, 4, replayed(location, 4))
    assert DeltaTable(location.uri, storage_options=options).to_pyarrow_table().num_rows == 5
