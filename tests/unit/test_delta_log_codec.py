"""lakelog's Delta log codec: actions, schemas, snapshot replay and checkpoints, on commits built in memory.

The invariants: a commit's actions come back from its bytes as they went in; replaying commits one by
one gives the state replaying them all at once gives, and the state a checkpoint of any intermediate
version followed by the remaining commits gives (what a cold open does); the Arrow schema of a
`schemaString` lakelog writes is the one delta-rs derives from the same Arrow schema.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from hypothesis import given, settings
from hypothesis import strategies as st

from lakelog.log.partition_file import partition_files
from lakelog.log.records import PARTITION_SCHEMA
from lakelog.store.delta.actions import (
    COMMIT_ID_KEY,
    LAKELOG_WRITER_FEATURE,
    MalformedCommit,
    add_action,
    commit_id_of,
    commit_info,
    decode_commit,
    encode_commit,
    metadata_action,
    protocol_action,
    remove_action,
    txn_action,
)
from lakelog.store.delta.checkpoint import CHECKPOINT_SCHEMA, checkpoint_table, read_last_checkpoint, snapshot_from_checkpoint
from lakelog.store.delta.log import DeltaLog, _groups_with_live_actions
from lakelog.store.delta.schema import UnsupportedSchema, arrow_schema, schema_string
from lakelog.store.delta.snapshot import Snapshot, SnapshotError, replay
from lakelog.store.io.location import Location

SCHEMAS = [
    PARTITION_SCHEMA,
    pa.schema([pa.field("a", pa.int8()), pa.field("b", pa.uint32(), False), pa.field("c", pa.large_string())]),
    pa.schema([pa.field("d", pa.date32()), pa.field("t", pa.timestamp("ms")), pa.field("z", pa.timestamp("us", tz="UTC"))]),
    pa.schema([pa.field("m", pa.map_(pa.string(), pa.float64())), pa.field("x", pa.decimal128(12, 3))]),
    pa.schema([pa.field("s", pa.struct([("l", pa.list_(pa.field("i", pa.int16(), False))), ("b", pa.binary())]))]),
    pa.schema([pa.field("meta", pa.int64(), metadata={"comment": "kept"})]),
]


@pytest.mark.parametrize("schema", SCHEMAS, ids=range(len(SCHEMAS)))
def test_a_schema_reads_back_as_delta_rs_reads_the_same_schema(schema, tmp_path):
    reference = DeltaTable.create(str(tmp_path / "t"), schema)
    assert json.loads(schema_string(schema)) == json.loads(reference.schema().to_json())
    assert arrow_schema(schema_string(schema)) == pa.schema(reference.schema().to_arrow())


def test_types_delta_has_none_for_are_refused():
    for data_type in (pa.timestamp("s"), pa.timestamp("us", tz="Europe/Paris"), pa.duration("s")):
        with pytest.raises(UnsupportedSchema):
            schema_string(pa.schema([pa.field("x", data_type)]))


def test_a_commit_round_trips_and_names_its_commit_id():
    actions = [
        add_action("a.parquet", 10, 5, True, '{"numRecords": 1}'),
        txn_action("app", 3, 5),
        commit_info(5, "WRITE", "c1", {"mode": "Append"}, {"lakelog.operation": "test"}),
        remove_action("b.parquet", 5, False, 7),
    ]
    decoded = decode_commit(encode_commit(actions))
    assert "commitInfo" in decoded[0], "commitInfo is the first line"
    assert sorted(map(json.dumps, decoded)) == sorted(map(json.dumps, actions))
    assert commit_id_of(decoded) == "c1" and decoded[0]["commitInfo"][COMMIT_ID_KEY] == "c1"
    assert decoded[0]["commitInfo"]["lakelog.operation"] == "test"
    with pytest.raises(MalformedCommit):
        decode_commit(b'{"add": {}}\n{not json')


def test_new_tables_declare_the_writer_feature_only_lakelog_implements():
    protocol = protocol_action()["protocol"]
    # `invariants` too: Delta's Spark connector refuses to read a table with NOT NULL columns that does not list it.
    assert protocol == {"minReaderVersion": 1, "minWriterVersion": 7, "writerFeatures": ["invariants", LAKELOG_WRITER_FEATURE]}


def created() -> tuple[int, list[dict]]:
    schema = schema_string(pa.schema([pa.field("offset", pa.int64())]))
    return 0, [commit_info(0, "CREATE TABLE", "c0", {}, None), protocol_action(), metadata_action("id-1", schema, {"k": "v"}, 0)]


# One commit: files added (by number), files removed (by number), txn versions, a config change.
commit_strategy = st.tuples(
    st.lists(st.integers(0, 30), max_size=4),
    st.lists(st.integers(0, 30), max_size=4),
    st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 1000), max_size=2),
    st.booleans(),
)


def build(specs) -> list[tuple[int, list[dict]]]:
    commits = [created()]
    schema = commits[0][1][2]["metaData"]["schemaString"]
    for version, (adds, removes, txns, reconfigure) in enumerate(specs, 1):
        actions: list[dict] = [commit_info(version, "WRITE", f"c{version}", {}, None)]
        actions += [remove_action(f"f{n}.parquet", 1000 + version, True, n) for n in removes]
        stats = lambda n: json.dumps({"numRecords": n, "minValues": {"offset": n}, "maxValues": {"offset": n + 1}})  # noqa: E731
        actions += [add_action(f"f{n}.parquet", n, version, True, stats(n)) for n in adds]
        actions += [txn_action(app, value, version) for app, value in txns.items()]
        if reconfigure:
            actions.append(metadata_action("id-1", schema, {"k": str(version)}, 0))
        commits.append((version, actions))
    return commits


def state(snapshot: Snapshot) -> tuple:
    return (
        snapshot.version,
        snapshot.table_id,
        snapshot.configuration,
        snapshot.protocol,
        {path: (body["size"], body["stats"], body["modificationTime"]) for path, body in snapshot.adds.items()},
        {path: body["deletionTimestamp"] for path, body in snapshot.tombstones.items()},
        {app: body["version"] for app, body in snapshot.txns.items()},
        [(entry.path, entry.min_offset, entry.max_offset, entry.num_records) for entry in partition_files(snapshot)],
    )


def model(commits) -> tuple:
    """The spec's reconciliation written plainly: over all actions in order, the last one per path, app id, kind wins."""
    last_file: dict[str, tuple[str, dict]] = {}
    txns: dict[str, int] = {}
    metadata = protocol = None
    for _version, actions in commits:
        for action in actions:
            for kind in ("add", "remove"):
                if kind in action:
                    last_file[action[kind]["path"]] = (kind, action[kind])
            if "txn" in action:
                txns[action["txn"]["appId"]] = action["txn"]["version"]
            metadata = action.get("metaData", metadata)
            protocol = action.get("protocol", protocol)
    adds = {
        path: (body["size"], body["stats"], body["modificationTime"]) for path, (kind, body) in last_file.items() if kind == "add"
    }
    removes = {path: body["deletionTimestamp"] for path, (kind, body) in last_file.items() if kind == "remove"}
    return commits[-1][0], metadata["id"], metadata["configuration"], protocol, adds, removes, txns


@settings(max_examples=60, deadline=None)
@given(st.lists(commit_strategy, max_size=12), st.data())
def test_replay_is_incremental_and_a_checkpoint_anywhere_gives_the_same_state(specs, data):
    commits = build(specs)
    whole = replay(commits)
    incremental = Snapshot(-1)
    for version, actions in commits:
        incremental.apply(actions, version)
        assert incremental.version == version
        partition_files(incremental)  # ordered once per version, as the log asks: carried across appends
    assert state(incremental) == state(whole)
    assert state(whole)[:7] == model(commits)
    at = data.draw(st.integers(0, len(commits) - 1))
    head = replay(commits[: at + 1])
    sink = pa.BufferOutputStream()
    pq.write_table(checkpoint_table(head, tombstone_cutoff_ms=0), sink)
    written = pq.read_table(pa.BufferReader(sink.getvalue()))
    assert written.schema == CHECKPOINT_SCHEMA
    resumed = replay(commits[at + 1 :], snapshot_from_checkpoint([written], at))
    assert state(resumed) == state(whole)


def test_apply_refuses_a_commit_out_of_order():
    snapshot = replay([created()])
    with pytest.raises(SnapshotError):
        snapshot.apply([], 2)


def test_a_checkpoint_leaves_out_expired_tombstones_and_a_reader_drops_them_too():
    commits = build([([1, 2], [], {}, False), ([], [1], {}, False), ([], [2], {}, False)])
    snapshot = replay(commits)
    cutoff = 1003  # f1 was removed at 1002, f2 at 1003
    table = checkpoint_table(snapshot, cutoff)
    removed = [row["path"] for row in table.column("remove").to_pylist() if row]
    assert removed == ["f2.parquet"]
    assert snapshot.expire_tombstones(cutoff) == 1 and set(snapshot.tombstones) == {"f2.parquet"}


def test_delta_rs_reads_a_checkpoint_lakelog_wrote():
    folder = tempfile.mkdtemp()
    try:
        commits = build([([1, 2, 3], [], {"app": 7}, False), ([4], [2], {"app": 9}, True)])
        for name in ("f1", "f2", "f3", "f4"):
            pq.write_table(pa.table({"offset": pa.array([int(name[1:])], pa.int64())}), f"{folder}/{name}.parquet")
        os.makedirs(f"{folder}/_delta_log")
        snapshot = replay(commits)
        for path, body in list(snapshot.adds.items()):
            snapshot.adds[path] = dict(body, size=os.path.getsize(f"{folder}/{path}"))
        # lakelog's own writer: the tombstone (f2) in a row group of its own.
        DeltaLog(Location.of(folder)).write_checkpoint(snapshot, 0)
        written = pq.ParquetFile(f"{folder}/_delta_log/{2:020d}.checkpoint.parquet").metadata
        assert written.num_row_groups == 2 and _groups_with_live_actions(written) == [0]
        assert read_last_checkpoint(b'{"version": 2, "size": 7}') == (2, None)
        reference = DeltaTable(folder)  # no commit file at all: the checkpoint alone
        assert reference.version() == 2
        assert sorted(reference.to_pyarrow_table().column("offset").to_pylist()) == [1, 3, 4]
        assert reference.transaction_version("app") == 9
        assert reference.metadata().configuration == {"k": "2"}
    finally:
        shutil.rmtree(folder)


@settings(deadline=None, max_examples=40)  # writes files: timings vary with the machine's load
@given(st.lists(commit_strategy, min_size=1, max_size=12), st.data())
def test_a_cold_open_from_a_checkpoint_on_disk_has_the_tombstones_of_a_replay(specs, data):
    """The checkpoint's tombstones are decoded only when asked for (a cold open needs none): asked for after
    the commits that follow the checkpoint (some re-add a removed path, some remove it again), they are the replay's."""
    commits = build(specs)
    at = data.draw(st.integers(1, len(commits) - 1))
    # Written as one row group (as other writers may), by lakelog's writer (tombstones apart), or with no statistics.
    layout = data.draw(st.sampled_from(["one row group", "lakelog", "no statistics"]))
    folder = tempfile.mkdtemp()
    try:
        os.makedirs(f"{folder}/_delta_log")
        for version, actions in commits:
            with open(f"{folder}/_delta_log/{version:020d}.json", "wb") as out:
                out.write(encode_commit(actions))
        checkpoint = f"{folder}/_delta_log/{at:020d}.checkpoint.parquet"
        if layout == "lakelog":
            DeltaLog(Location.of(folder)).write_checkpoint(replay(commits[: at + 1]), 0)
        else:
            table = checkpoint_table(replay(commits[: at + 1]), 0)
            with pq.ParquetWriter(checkpoint, table.schema, write_statistics=layout == "one row group") as writer:
                for start in range(0, table.num_rows, 1 if layout == "no statistics" else table.num_rows):
                    writer.write_table(table.slice(start, 1 if layout == "no statistics" else table.num_rows))
            with open(f"{folder}/_delta_log/_last_checkpoint", "w") as out:
                out.write(json.dumps({"version": at, "size": 1}))
        loaded = DeltaLog(Location.of(folder)).load()
        assert state(loaded) == state(replay(commits))
    finally:
        shutil.rmtree(folder)
