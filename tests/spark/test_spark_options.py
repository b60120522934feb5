"""Bad read options fail when the DataFrame is made, naming the lakelog error and what was wrong.

Spark wraps a Python data source's exception (`AnalysisException`,
PYTHON_DATA_SOURCE_ERROR); its message carries the lakelog error class and its
one-line reason, not a Java stack trace alone.
"""

from __future__ import annotations

import socket

import pytest

from lakelog.log import create_topic

pytestmark = pytest.mark.spark


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"topic": "nope"}, "UnknownTopicOrPartition: topic nope does not exist under"),
        ({"topic": "t", "startingOffsets": '{"t": {"0": 1'}, "InvalidRequest: startingOffsets is neither"),
        ({"topic": "t", "endingOffsets": "[1, 2]"}, "InvalidRequest: endingOffsets must be a JSON object"),
        ({"topic": "t", "startingOffsets": '{"t": {"0": 0}}'}, "must give an offset for every partition of t (0-1)"),
        ({"topic": "t", "startingOffsets": '{"u": {"0": 0}}'}, "UnknownTopicOrPartition: startingOffsets names topic(s) ['u']"),
        (
            {"topic": "t", "startingOffsets": '{"t": {"0": 0, "1": 99}}'},
            "OffsetOutOfRange: t-1: starting offset 99 is outside [0, 3]",
        ),
        ({"topic": "t", "startingOffsets": "latest"}, "latest (-1) is not allowed in a batch read"),
        ({"topic": "t", "isolation.level": "dirty"}, "InvalidConfig: isolation.level must be one of"),
        ({"topic": "t", "startingOffset": "earliest"}, "InvalidConfig: unknown option(s) ['startingoffset']"),
        ({}, "InvalidConfig: lakelog reads need exactly one of the options subscribe (or topic), subscribePattern, assign, view"),
        ({"view": "t"}, "UnknownTopicOrPartition: topic t has no materialized view"),
        ({"quality": "results"}, "UnknownTopicOrPartition: no quality results under"),
        ({"quality": "suites"}, "InvalidConfig: option quality names the table results, not 'suites'"),
        ({"topic": "t", "root": "{missing}"}, "InvalidConfig: lakelog root"),
    ],
)
def test_bad_read_options_fail_with_a_lakelog_error(spark, root, tmp_path, options, message):
    from lakelog.log import open_partition, payload_table

    create_topic(root, "t", 2)
    open_partition(root, "t", 1).append(payload_table([b"a", b"b", b"c"]))
    values = {"root": root, **options}
    if values["root"] == "{missing}":
        values["root"] = str(tmp_path / "does-not-exist")
    with pytest.raises(Exception) as caught:
        spark.read.format("lakelog").options(**values).load().collect()
    text = str(caught.value)
    assert message in text, text
    # lakelog's one line is the first line Spark shows: no Python traceback before it.
    assert "lakelog.errors." in text.splitlines()[0] and message in text.splitlines()[0], text
    assert "Traceback" not in text, text


def closed_port() -> int:
    """A TCP port on 127.0.0.1 where nothing listened a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def storage_options_of(s3) -> dict[str, str]:
    """The emulator's settings as the data source's `storage.<key>` options, in mixed case as users write them."""
    env = s3.env()
    return {
        "Storage.Endpoint_URL": env["AWS_ENDPOINT_URL"],
        "storage.region": env["AWS_REGION"],
        "storage.access_key_id": env["AWS_ACCESS_KEY_ID"],
        "storage.secret_access_key": env["AWS_SECRET_ACCESS_KEY"],
        "storage.AWS_ALLOW_HTTP": "true",
    }


def test_storage_options_given_explicitly_read_and_write_an_s3_root(spark, s3, s3_root):
    """`storage.<key>` options name the S3 store for a read, a view read and a write; an endpoint where nothing
    listens fails the read with KafkaStorageError although the AWS_* environment names the emulator, so the
    options, not the environment, were used (on the driver, and on the executors through the pickled root)."""
    from lakelog.log import open_partition, payload_table

    create_topic(s3_root, "t", 2)
    open_partition(s3_root, "t", 1).append(payload_table([b"a", b"b", b"c"]))
    options = storage_options_of(s3)
    read = spark.read.format("lakelog").option("root", s3_root).option("topic", "t").options(**options).load()
    assert sorted(bytes(row.value) for row in read.collect()) == [b"a", b"b", b"c"]

    data = spark.createDataFrame([("k", "d"), ("k", "e")], "key string, value string")
    data.write.format("lakelog").mode("append").option("root", s3_root).option("topic", "t").options(**options).option(
        "transactional.id", "explicit"
    ).save()
    again = spark.read.format("lakelog").option("root", s3_root).option("topic", "t").options(**options).load()
    assert sorted(bytes(row.value) for row in again.collect()) == [b"a", b"b", b"c", b"d", b"e"]

    nowhere = {**options, "Storage.Endpoint_URL": f"http://127.0.0.1:{closed_port()}", "storage.connect_timeout": "2s"}
    with pytest.raises(Exception) as caught:
        spark.read.format("lakelog").option("root", s3_root).option("topic", "t").options(**nowhere).load().collect()
    assert "lakelog.errors.KafkaStorageError" in str(caught.value) and "cannot reach" in str(caught.value), str(caught.value)

    empty = f"{s3_root}-nothing-here"
    with pytest.raises(Exception, match="InvalidConfig: lakelog root s3://.* does not exist"):
        spark.read.format("lakelog").option("root", empty).option("topic", "t").options(**options).load().collect()


def test_an_unknown_storage_option_is_refused_naming_it(spark, root):
    create_topic(root, "t", 1)
    with pytest.raises(Exception) as caught:
        spark.read.format("lakelog").option("root", root).option("topic", "t").option("storage.colour", "blue").load().collect()
    text = str(caught.value)
    assert "lakelog.errors.InvalidConfig: unknown option storage.colour" in text, text
    data = spark.createDataFrame([("v",)], "value string")
    with pytest.raises(Exception) as caught:
        data.write.format("lakelog").mode("append").option("root", root).option("topic", "t").option(
            "transactional.id", "x"
        ).option("Storage.Colour", "blue").save()
    text = str(caught.value)
    assert "lakelog.errors.InvalidConfig: unknown option storage.colour" in text, text
