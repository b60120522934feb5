"""A lake holding every kind of table lakelog writes, and the rows lakelog's reader gives of a table.

The conformance tests build it and read it back with other Delta readers (delta-rs; Delta Lake's Spark connector):
idempotent appends, transactions with their markers, aborts, compaction (removes and adds with dataChange false),
retention (delete-records: removes and the log start txn), config changes (metaData), checkpoints (every
`INTERVAL` commits, the log kept for no time), and the internal logs the clients write (transaction state,
producer ids, consumer offsets, group metadata).
"""

from __future__ import annotations

import pyarrow as pa

from lakelog import Consumer, Producer, TopicPartition
from lakelog.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic, ResourceType
from lakelog.log.partition_file import PARTITION_ORDER
from lakelog.store import Location, Table
from lakelog.store.upkeep.maintenance import compact

INTERVAL = 4


def tables_under(root: str) -> list[Location]:
    """Every Delta table under the root (a folder holding `_delta_log`)."""
    location = Location.of(root)
    found = []
    for entry in location.list(recursive=True):
        if entry.is_dir and entry.name == "_delta_log":
            found.append(Location(entry.uri.rsplit("/", 1)[0], location.io))
    return sorted(found, key=lambda table: table.uri)


def sorted_rows(table: pa.Table) -> list[tuple]:
    return sorted(tuple(repr(value) for value in row.values()) for row in table.to_pylist())


def lakelog_rows(table: Table) -> pa.Table:
    pieces = [table.read_data_file(entry) for entry in table.data_files()]
    return pa.concat_tables(pieces) if pieces else table.schema.empty_table()


def write_every_kind(root: str) -> None:
    admin = AdminClient({"lakelog.root": root})
    config = {"checkpoint.interval.commits": str(INTERVAL), "delta.log.retention.ms": "0"}
    futures = admin.create_topics([NewTopic("events", num_partitions=2, config=config)])
    for future in futures.values():
        future.result()
    # Idempotent appends.
    producer = Producer({"lakelog.root": root, "linger.ms": 0})
    for index in range(6):
        producer.produce("events", value=f"plain-{index}", key=f"k{index % 3}", partition=index % 2)
        producer.flush()
    producer.close()
    # Transactions: committed and aborted, with their markers.
    transactional = Producer({"lakelog.root": root, "transactional.id": "conformance"})
    transactional.init_transactions()
    for outcome in ("commit", "abort", "commit"):
        transactional.begin_transaction()
        for partition in range(2):
            transactional.produce("events", value=f"{outcome}-{partition}", partition=partition)
        if outcome == "commit":
            transactional.commit_transaction()
        else:
            transactional.abort_transaction()
    transactional.close()
    # Consumer offsets and group metadata (internal logs).
    consumer = Consumer({"lakelog.root": root, "group.id": "readers", "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition("events", 0, 0)])
    consumer.consume(num_messages=100, timeout=1)
    consumer.commit(asynchronous=False)
    consumer.close()
    # A config change (metaData), then retention (delete-records: removes and the log start txn).
    resource = ConfigResource(
        ResourceType.TOPIC,
        "events",
        incremental_configs=[ConfigEntry("retention.bytes", "1000000", incremental_operation=AlterConfigOpType.SET)],
    )
    admin.incremental_alter_configs([resource])[resource].result()
    for future in admin.delete_records([TopicPartition("events", 1, 2)]).values():
        future.result()
    # Compaction: merges with removes and adds of dataChange false.
    partition = Table.open(Location.of(root) / "topics" / "events" / "0")
    assert compact(partition, PARTITION_ORDER, fan_in=2) is not None
