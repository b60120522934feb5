"""The `lakelog` command line, run for real as `python -m lakelog.cli` in a subprocess.

Contract (lakelog/cli/): every command takes --root; bad input exits 2 with one
line on stderr and, being refused, leaves the root as it was (S8.3); a failed
delivery exits 1.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import table_fingerprint

from lakelog import Producer
from lakelog.log import create_topic, open_partition


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def values_in_log(root: str, topic: str, partition: int = 0) -> list[bytes]:
    log = open_partition(root, topic, partition)
    if log.log_end_offset() == 0:
        return []
    rows = log.fetch(0, max_records=1_000_000).rows
    assert rows.column("offset").to_pylist() == list(range(log.log_end_offset()))
    return rows.column("value").to_pylist()


# -- init and topics -------------------------------------------------------------------


def test_init_creates_the_root(lakelog, lake):
    out = ok(lakelog("init", "--root", lake))
    assert "ready" in out
    assert (Path(lake) / "topics").is_dir()
    assert ok(lakelog("topics", "list", "--root", lake)) == ""


def test_root_may_come_from_the_environment(lakelog, lake):
    ok(lakelog("topics", "create", "--topic", "from-env", env={"LAKELOG_ROOT": lake}))
    assert ok(lakelog("topics", "list", env={"LAKELOG_ROOT": lake})) == "from-env\n"


def test_topics_create_list_and_describe(lakelog, lake):
    ok(lakelog("init", "--root", lake))
    out = ok(
        lakelog(
            "topics",
            "create",
            "--topic",
            "orders",
            "--partitions",
            "3",
            "--config",
            "check.expected.offsets=true",
            "--config",
            "compression.type=zstd",
            "--root",
            lake,
        )
    )
    assert "orders" in out and "3 partition" in out
    ok(lakelog("topics", "create", "--topic", "audit", "--root", lake))
    assert ok(lakelog("topics", "list", "--root", lake)) == "audit\norders\n"

    text = ok(lakelog("topics", "describe", "--topic", "orders", "--root", lake))
    assert "Topic: orders" in text and "PartitionCount: 3" in text
    assert "check.expected.offsets=True" in text and "compression.type=zstd" in text

    description = json.loads(ok(lakelog("topics", "describe", "--topic", "orders", "--json", "--root", lake)))
    assert description["name"] == "orders"
    assert [
        (p["id"], p["log_start_offset"], p["high_watermark"], p["log_end_offset"], p["files"], p["table_version"])
        for p in description["partitions"]
    ] == [(0, 0, 0, 0, 0, 0), (1, 0, 0, 0, 0, 0), (2, 0, 0, 0, 0, 0)]
    assert description["config"]["num.partitions"] == 3
    assert description["config"]["check.expected.offsets"] is True
    assert description["config"]["compression.type"] == "zstd"


# -- produce and consume ---------------------------------------------------------------


def test_the_topic_is_a_flag_everywhere_and_the_old_positional_form_still_works_with_a_deprecation_line(lakelog, lake):
    """Kafka's tools take --topic; the positional topic some commands took is accepted with one warning line."""
    ok(lakelog("topics", "create", "--topic", "flagged", "--root", lake))
    old = lakelog("topics", "create", "positional", "--root", lake)
    assert old.returncode == 0, old.stderr
    assert "deprecated: write `lakelog topics create --topic positional`" in old.stderr and old.stderr.count("\n") == 1
    assert "positional" in ok(lakelog("topics", "list", "--root", lake))
    for command in (["quality", "report"], ["consume"], ["topics", "describe"]):
        flagged = lakelog(*command, "--topic", "flagged", "--root", lake)
        assert flagged.returncode == 0 and "deprecated" not in flagged.stderr, flagged.stderr
    before = table_fingerprint(lake)
    both = lakelog("topics", "describe", "flagged", "--topic", "positional", "--root", lake)
    assert both.returncode == 2 and both.stderr.strip().endswith(
        "two topics given, --topic positional and flagged: give one, as --topic"
    )
    neither = lakelog("produce", "--root", lake, stdin='"x"\n')
    assert neither.returncode == 2 and neither.stderr.strip() == "lakelog produce: --topic is required", neither.stderr
    assert table_fingerprint(lake) == before  # S8.3: refused, nothing written


def test_produce_json_lines_from_stdin_and_consume_them_back(lakelog, lake):
    ok(lakelog("topics", "create", "--topic", "events", "--root", lake))
    stdin = "\n".join(
        [
            json.dumps({"value": "plain", "key": "k1"}),
            json.dumps({"value": {"nested": [1, 2]}, "headers": {"trace": "t-1"}}),
            json.dumps(42),
            "",
            json.dumps({"anything": "else"}),
            json.dumps({"value": "pinned", "partition": 0, "timestamp": 1_600_000_000_000}),
        ]
    )
    result = lakelog("produce", "--topic", "events", "--root", lake, stdin=stdin)
    ok(result)
    assert result.stdout == ""
    assert "delivered 5 message(s), 0 failed" in result.stderr

    assert values_in_log(lake, "events") == [
        b"plain",
        b'{"nested": [1, 2]}',
        b"42",
        b'{"anything": "else"}',
        b"pinned",
    ]
    printed = json_lines(ok(lakelog("consume", "--topic", "events", "--root", lake)))
    assert [(m["topic"], m["partition"], m["offset"], m["key"], m["value"]) for m in printed] == [
        ("events", 0, 0, "k1", "plain"),
        ("events", 0, 1, None, '{"nested": [1, 2]}'),
        ("events", 0, 2, None, "42"),
        ("events", 0, 3, None, '{"anything": "else"}'),
        ("events", 0, 4, None, "pinned"),
    ]
    assert printed[1]["headers"] == {"trace": "t-1"}
    assert "headers" not in printed[0]
    assert printed[4]["timestamp"] == 1_600_000_000_000


def test_consume_offset_max_messages_from_end_and_partitions(lakelog, lake):
    create_topic(lake, "multi", 2)
    producer = Producer({"lakelog.root": lake})
    for i in range(6):
        producer.produce("multi", f"m{i}", partition=i % 2)
    producer.flush()

    def offsets(*args):
        return [
            (m["partition"], m["offset"], m["value"])
            for m in json_lines(ok(lakelog("consume", "--topic", "multi", "--root", lake, *args)))
        ]

    assert sorted(offsets()) == [(0, 0, "m0"), (0, 1, "m2"), (0, 2, "m4"), (1, 0, "m1"), (1, 1, "m3"), (1, 2, "m5")]
    assert offsets("--partition", "1") == [(1, 0, "m1"), (1, 1, "m3"), (1, 2, "m5")]
    assert offsets("--partition", "0", "--offset", "1") == [(0, 1, "m2"), (0, 2, "m4")]
    assert offsets("--partition", "0", "--max-messages", "2") == [(0, 0, "m0"), (0, 1, "m2")]
    assert offsets("--from-end") == []


def test_produce_with_a_wrong_expected_offset_exits_1_and_writes_nothing(lakelog, lake):
    """S2.1, S8.3: the refused batch is reported as a failed delivery; the table is unchanged."""
    create_topic(lake, "t", 1)
    ok(lakelog("produce", "--topic", "t", "--root", lake, stdin='{"value": "first"}\n'))
    before = table_fingerprint(lake + "/topics")
    result = lakelog("produce", "--topic", "t", "--root", lake, stdin='{"value": "late", "expected_offset": 0}\n')
    assert result.returncode == 1
    assert "delivered 0 message(s), 1 failed" in result.stderr
    assert "log end offset 1" in result.stderr
    assert table_fingerprint(lake + "/topics") == before
    ok(lakelog("produce", "--topic", "t", "--root", lake, stdin='{"value": "second", "expected_offset": 1}\n'))
    assert values_in_log(lake, "t") == [b"first", b"second"]


# -- load ----------------------------------------------------------------------------------

ROWS = [{"id": i, "name": f"name-{i}", "amount": i * 1.5} for i in range(1, 26)]


def write_source(folder, kind: str, rows=ROWS):
    if kind == "parquet":
        path = folder / "source.parquet"
        pq.write_table(pa.Table.from_pylist(rows), path, row_group_size=7)
    elif kind == "csv":
        path = folder / "source.csv"
        lines = ["id,name,amount"] + [f"{r['id']},{r['name']},{r['amount']}" for r in rows]
        path.write_text("\n".join(lines) + "\n")
    else:
        path = folder / "source.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.mark.parametrize("kind", ["parquet", "csv", "jsonl"])
def test_S2_4_load_appends_every_row_once_in_order_and_a_rerun_appends_nothing(lakelog, lake, tmp_path, kind):
    create_topic(lake, "loaded", 1)
    source = write_source(tmp_path, kind)
    args = ("load", "--topic", "loaded", source, "--key-column", "id", "--batch-records", "4", "--no-progress", "--root", lake)
    first = json.loads(ok(lakelog(*args)))
    assert (first["start_offset"], first["end_offset"], first["total_rows"]) == (0, 25, 25)
    assert (first["appended_by_this_run"], first["resumed_from_row"]) == (25, 0)
    assert open_partition(lake, "loaded", 0).version == 7  # ceil(25 / 4) commits

    printed = json_lines(ok(lakelog("consume", "--topic", "loaded", "--root", lake)))
    assert [m["offset"] for m in printed] == list(range(25))
    assert [json.loads(m["value"]) for m in printed] == ROWS
    assert [m["key"] for m in printed] == [str(r["id"]) for r in ROWS]

    again = json.loads(ok(lakelog(*args)))
    assert (again["load_id"], again["appended_by_this_run"], again["resumed_from_row"]) == (first["load_id"], 0, 25)
    assert open_partition(lake, "loaded", 0).log_end_offset() == 25


def test_load_after_existing_data_starts_at_the_log_end_offset(lakelog, lake, tmp_path):
    create_topic(lake, "t", 1)
    ok(lakelog("produce", "--topic", "t", "--root", lake, stdin='"before"\n'))
    source = write_source(tmp_path, "jsonl", ROWS[:3])
    result = json.loads(ok(lakelog("load", "--topic", "t", source, "--no-progress", "--root", lake)))
    assert (result["start_offset"], result["end_offset"]) == (1, 4)
    assert values_in_log(lake, "t") == [b"before"] + [json.dumps(r).encode() for r in ROWS[:3]]  # a JSON string is its text


def test_load_reports_the_true_row_count_of_a_csv_with_quoted_newlines(lakelog, lake, tmp_path):
    create_topic(lake, "t", 1)
    source = tmp_path / "notes.csv"
    source.write_text('id,note\n1,"first line\nsecond line"\n2,plain\n')
    result = json.loads(ok(lakelog("load", "--topic", "t", source, "--no-progress", "--root", lake)))
    assert [json.loads(v) for v in values_in_log(lake, "t")] == [
        {"id": 1, "note": "first line\nsecond line"},
        {"id": 2, "note": "plain"},
    ]
    assert (result["total_rows"], result["end_offset"], result["appended_by_this_run"]) == (2, 2, 2)


# -- bad input: exit 2, one line on stderr, nothing written ---------------------------------


@pytest.fixture
def populated(lake, tmp_path) -> dict[str, str]:
    """A root with topic t (one partition, three messages), a plain file, and a good source."""
    create_topic(lake, "t", 1)
    producer = Producer({"lakelog.root": lake})
    for value in ("a", "b", "c"):
        producer.produce("t", value)
    producer.flush()
    file = tmp_path / "a-file"
    file.write_text("not a folder")
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("a,b\n1,2\n3\n")
    bad_parquet = tmp_path / "bad.parquet"
    bad_parquet.write_bytes(b"garbage")
    good = write_source(tmp_path, "jsonl", ROWS[:2])
    return {
        "root": lake,
        "file": str(file),
        "bad_csv": str(bad_csv),
        "bad_parquet": str(bad_parquet),
        "good": str(good),
    }


def refused_cleanly(result, before, after, *, mentions: str) -> None:
    assert result.returncode == 2, f"exit {result.returncode}: {result.stderr}"
    lines = result.stderr.splitlines()
    assert len(lines) == 1, f"stderr is not one line: {result.stderr!r}"
    assert mentions.lower() in lines[0].lower()
    assert result.stdout == ""
    assert after == before


BAD_INPUT = {
    "unknown command": (["frobnicate", "--root", "{root}"], None, "invalid choice"),
    "no command": (["--root", "{root}"], None, "command"),
    "no topics action": (["topics"], None, "an action is required (create, list"),
    "missing --root": (["topics", "list"], None, "--root"),
    "missing --root for produce": (["produce", "--topic", "t"], '"x"\n', "--root"),
    "bad topic name": (["topics", "create", "--topic", "bad name!", "--root", "{root}"], None, "bad name!"),
    "dot topic name": (["topics", "create", "--topic", "..", "--root", "{root}"], None, ".."),
    "unknown config key": (
        ["topics", "create", "--topic", "u", "--config", "no.such.key=1", "--root", "{root}"],
        None,
        "no.such.key",
    ),
    "bad config value": (
        ["topics", "create", "--topic", "u", "--config", "num.partitions=many", "--root", "{root}"],
        None,
        "num.partitions",
    ),
    "config without =": (
        ["topics", "create", "--topic", "u", "--config", "check.expected.offsets", "--root", "{root}"],
        None,
        "KEY=VALUE",
    ),
    "zero partitions": (["topics", "create", "--topic", "u", "--partitions", "0", "--root", "{root}"], None, "partitions"),
    "existing topic": (["topics", "create", "--topic", "t", "--root", "{root}"], None, "exists"),
    "root is a file (init)": (["init", "--root", "{file}"], None, "file"),
    "root is a file (list)": (["topics", "list", "--root", "{file}"], None, "file"),
    "root is a file (produce)": (["produce", "--topic", "t", "--root", "{file}"], '"x"\n', "file"),
    "malformed JSON on stdin": (["produce", "--topic", "t", "--root", "{root}"], "{not json\n", "line 1"),
    "unknown field on stdin": (["produce", "--topic", "t", "--root", "{root}"], '{"value": "x", "colour": "red"}\n', "colour"),
    "unknown topic (produce)": (["produce", "--topic", "nosuch", "--root", "{root}"], '"x"\n', "nosuch"),
    "unknown topic (consume)": (["consume", "--topic", "nosuch", "--root", "{root}"], None, "nosuch"),
    "unknown topic (describe)": (["topics", "describe", "--topic", "nosuch", "--root", "{root}"], None, "nosuch"),
    "unknown topic (load)": (["load", "--topic", "nosuch", "{good}", "--no-progress", "--root", "{root}"], None, "nosuch"),
    "unknown partition (consume)": (["consume", "--topic", "t", "--partition", "3", "--root", "{root}"], None, "3"),
    "--offset with two partitions": (
        ["consume", "--topic", "t", "--partition", "0", "--partition", "1", "--offset", "0", "--root", "{root}"],
        None,
        "--offset",
    ),
    "missing load source": (
        ["load", "--topic", "t", "{root}/missing.csv", "--no-progress", "--root", "{root}"],
        None,
        "missing.csv",
    ),
    "non-integer partition": (["produce", "--topic", "t", "--partition", "zero", "--root", "{root}"], '"x"\n', "zero"),
}


@pytest.mark.parametrize("case", list(BAD_INPUT))
def test_bad_input_exits_2_with_one_line_and_writes_nothing(lakelog, populated, case):
    """S8.3: every refused command leaves the root byte for byte as it was."""
    args, stdin, mentions = BAD_INPUT[case]
    args = [arg.format(**populated) for arg in args]
    before = (table_fingerprint(populated["root"]), open(populated["file"]).read())
    result = lakelog(*args, stdin=stdin)
    after = (table_fingerprint(populated["root"]), open(populated["file"]).read())
    refused_cleanly(result, before, after, mentions=mentions)


@pytest.mark.parametrize("source", ["bad_csv", "bad_parquet"])
def test_load_of_an_unreadable_source_exits_2_with_one_line(lakelog, populated, source):
    before = table_fingerprint(populated["root"])
    result = lakelog("load", "--topic", "t", populated[source], "--no-progress", "--root", populated["root"])
    refused_cleanly(result, before, table_fingerprint(populated["root"]), mentions=source.split("_")[1])


@pytest.mark.parametrize(
    ("bad_line", "mentions"),
    [("{not json", "line 3"), ('{"value": "x", "partition": 9}', "9"), ('{"value": "x", "colour": "red"}', "colour")],
    ids=["malformed JSON", "unknown partition", "unknown field"],
)
def test_produce_bad_input_on_a_later_line_writes_nothing(lakelog, populated, bad_line, mentions):
    before = table_fingerprint(populated["root"])
    stdin = '"one"\n"two"\n' + bad_line + "\n"
    result = lakelog("produce", "--topic", "t", "--linger-ms", "0", "--root", populated["root"], stdin=stdin)
    assert result.returncode == 2
    assert values_in_log(populated["root"], "t") == [b"a", b"b", b"c"]
    refused_cleanly(result, before, table_fingerprint(populated["root"]), mentions=mentions)
