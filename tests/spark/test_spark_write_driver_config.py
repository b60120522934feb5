"""A `format("lakelog")` write decides its config defaults on the driver: its executors, whose environment is not
the driver's (another $LAKELOG_CONF_DIR, or none), route keys with the driver's partitioner and create a topic only
where the driver's auto.create.topics.enable allows it. The writer is shipped as Spark ships it (pickled)."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from lakelog.client.partitioner import partition_for
from lakelog.config.keys import CONF_DIR_ENV
from lakelog.errors import UnknownTopicOrPartition
from lakelog.log import create_topic
from pyspark_lakelog.options import WriteOptions
from pyspark_lakelog.source import TopicWriter

SCHEMA = StructType([StructField("topic", StringType()), StructField("key", BinaryType()), StructField("value", BinaryType())])
KEYS = [f"key-{number}".encode() for number in range(40)]


def driver_conf(tmp_path: Path, **changes: str) -> Path:
    """The package's config defaults with `changes` (a `kind.properties` file's key=value lines appended)."""
    folder = tmp_path / "driver-conf"
    shutil.copytree(Path(__file__).resolve().parents[2] / "lakelog" / "conf", folder)
    for kind, line in changes.items():
        with (folder / f"{kind}.properties").open("a") as properties:
            properties.write(f"\n{line}\n")
    return folder


def shipped(options: dict[str, str], monkeypatch, conf: Path) -> TopicWriter:
    """A writer made on a 'driver' with $LAKELOG_CONF_DIR=conf, then unpickled where it is unset."""
    monkeypatch.setenv(CONF_DIR_ENV, str(conf))
    made = pickle.dumps(TopicWriter(WriteOptions.parse(options), SCHEMA))
    monkeypatch.delenv(CONF_DIR_ENV)
    return pickle.loads(made)


def test_keys_go_where_the_drivers_partitioner_sends_them(root, monkeypatch, tmp_path):
    create_topic(root, "keyed", 7)
    writer = shipped(
        {"root": root, "topic": "keyed", "transactional.id": "t"},
        monkeypatch,
        driver_conf(tmp_path, producer="partitioner=fnv1a"),
    )
    rows = pa.RecordBatch.from_pydict({"topic": ["keyed"] * len(KEYS), "key": KEYS, "value": KEYS})
    staged = writer.write(iter([rows]))
    counts = {partition: count for _, partition, _, count in staged.files}
    wanted: dict[int, int] = {}
    for key in KEYS:
        wanted[partition_for(key, 7, "fnv1a")] = wanted.get(partition_for(key, 7, "fnv1a"), 0) + 1
    assert counts == wanted
    assert wanted != {p: sum(partition_for(k, 7, "consistent_random") == p for k in KEYS) for p in wanted}
    writer.abort([staged])


def test_a_topic_the_driver_may_not_create_is_not_created_by_an_executor(root, monkeypatch, tmp_path):
    writer = shipped(
        {"root": root, "transactional.id": "t"}, monkeypatch, driver_conf(tmp_path, broker="auto.create.topics.enable=false")
    )
    rows = pa.RecordBatch.from_pydict({"topic": ["missing"], "key": [b"k"], "value": [b"v"]})
    with pytest.raises(UnknownTopicOrPartition):
        writer.write(iter([rows]))
    writer.abort([])
