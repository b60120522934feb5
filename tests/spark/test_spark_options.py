"""Bad read options fail when the DataFrame is made, naming the lakelog error and what was wrong.

Spark wraps a Python data source's exception (`AnalysisException`,
PYTHON_DATA_SOURCE_ERROR); its message carries the lakelog error class and its
one-line reason, not a Java stack trace alone.
"""

from __future__ import annotations

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
        ({"topic": "t", "startingOffsets": '{"t": {"0": 0, "1": 99}}'}, "OffsetOutOfRange: t-1: starting offset 99 is outside [0, 3]"),
        ({"topic": "t", "startingOffsets": "latest"}, "latest (-1) is not allowed in a batch read"),
        ({"topic": "t", "isolation.level": "dirty"}, "InvalidConfig: isolation.level must be one of"),
        ({"topic": "t", "startingOffset": "earliest"}, "InvalidConfig: unknown option(s) ['startingoffset']"),
        ({}, "InvalidConfig: lakelog reads need exactly one of the options topic, view or status"),
        ({"view": "t"}, "UnknownTopicOrPartition: topic t has no materialized view"),
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
    assert "lakelog.errors." in text
