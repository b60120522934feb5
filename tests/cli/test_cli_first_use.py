"""What a new user meets first on the command line: --version, a group's actions, produce's stdin format, and
`load --key-column` spreading rows over partitions as the Producer does."""

from __future__ import annotations

import json

from lakelog import version
from lakelog.client.partitioner import partition_for
from lakelog.config import load as load_config
from lakelog.log import create_topic, open_partition


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def rows_of(root: str, topic: str, partition: int) -> list[tuple]:
    log = open_partition(root, topic, partition)
    if log.log_end_offset() == 0:
        return []
    rows = log.fetch(0, max_records=1_000).rows
    columns = (rows.column(name).to_pylist() for name in ("key", "value", "control"))
    return [(key, value) for key, value, control in zip(*columns, strict=True) if control is None]  # no markers


def test_version_is_lakelogs(lakelog):
    assert ok(lakelog("--version")).strip() == f"lakelog {version()}"


def test_a_command_group_without_its_action_names_its_actions(lakelog):
    for group, actions in {
        "topics": "create, list, describe, delete-records",
        "coordinator": "sweep",
        "quality": "set, show, delete, report",
    }.items():
        refused = lakelog(group)
        assert refused.returncode == 2
        assert refused.stderr.strip() == f"lakelog {group}: an action is required ({actions}); see lakelog {group} --help"
    for group in ("transactions", "groups"):
        assert "list" in lakelog(group).stderr
    assert lakelog().stderr.startswith("lakelog: a command is required (init, topics, produce")


def test_produce_help_names_every_stdin_field(lakelog):
    text = ok(lakelog("produce", "--help"))
    for field in ("value, key", "partition", "headers", "timestamp", "expected_offset", "check.expected.offsets"):
        assert field in text


def test_stdin_fields_reach_the_log(lakelog, lake):
    create_topic(lake, "ledger", 2, {"check.expected.offsets": "true"})
    line = {"key": "k", "value": "entry 0", "partition": 1, "expected_offset": 0, "headers": {"h": "v"}, "timestamp": 1234}
    ok(lakelog("produce", "--topic", "ledger", "--root", lake, stdin=json.dumps(line) + "\n"))
    [printed] = [json.loads(text) for text in ok(lakelog("consume", "--topic", "ledger", "--root", lake)).splitlines()]
    assert printed == {
        **{k: line[k] for k in ("key", "value", "partition", "timestamp", "headers")},
        "topic": "ledger",
        "offset": 0,
    }
    # Without its expected offset, the topic refuses the line (KIP-27), and says so.
    refused = lakelog("produce", "--topic", "ledger", "--root", lake, stdin='{"value": "x", "partition": 1}\n')
    assert refused.returncode == 1 and "1 failed" in refused.stderr


def test_a_bare_json_string_is_stored_as_its_text_as_an_objects_string_value_is(lakelog, lake):
    create_topic(lake, "t", 1)
    stdin = '"hello world"\n{"value": "hello world"}\n42\n{"value": 42}\n[1, 2]\n{"other": "x"}\n'
    ok(lakelog("produce", "--topic", "t", "--root", lake, stdin=stdin))
    assert [value for _, value in rows_of(lake, "t", 0)] == [
        b"hello world",
        b"hello world",
        b"42",
        b"42",
        b"[1, 2]",
        b'{"other": "x"}',
    ]


def test_load_with_a_key_column_spreads_rows_by_key_as_the_producer_does(lakelog, lake, tmp_path):
    create_topic(lake, "orders", 3)
    rows = [{"customer": f"c{n % 7}", "n": n} for n in range(40)]
    source = tmp_path / "orders.jsonl"
    source.write_text("".join(json.dumps(row) + "\n" for row in rows))
    args = ("load", "--topic", "orders", str(source), "--key-column", "customer", "--no-progress", "--root", lake)
    first = json.loads(ok(lakelog(*args)))
    assert (first["total_rows"], first["appended_by_this_run"]) == (40, 40)
    partitioner = load_config("producer")["partitioner"]
    for partition in range(3):
        stored = rows_of(lake, "orders", partition)
        expected = [row for row in rows if partition_for(row["customer"].encode(), 3, partitioner) == partition]
        assert [json.loads(value) for _, value in stored] == expected  # in source order within each partition
        assert all(key.decode() == json.loads(value)["customer"] for key, value in stored)
    assert sum(1 for p in range(3) if rows_of(lake, "orders", p)) > 1
    # Exactly once: a run again appends nothing.
    again = json.loads(ok(lakelog(*args)))
    assert (again["load_id"], again["appended_by_this_run"]) == (first["load_id"], 0)
    assert sum(len(rows_of(lake, "orders", p)) for p in range(3)) == 40
    # --partition keeps the one-partition load; the help shows the default.
    assert "default: 0; with --key-column" in " ".join(ok(lakelog("load", "--help")).split())


def test_every_cli_error_is_one_line_with_a_kafka_code(lakelog, lake):
    """produce's failed deliveries, an unknown transactional id, deleting a missing group: `lakelog: CODE: ...`."""
    ok(lakelog("init", "--root", lake))
    ok(lakelog("topics", "create", "--topic", "t", "--root", lake))
    cases = {
        "OFFSET_MISMATCH": (
            ("produce", "--topic", "t"),
            '{"value": "x", "expected_offset": 5}\n{"value": "y", "expected_offset": 6}\n',
        ),
        "TRANSACTIONAL_ID_NOT_FOUND": (("transactions", "describe", "--transactional-id", "nosuch"), None),
        "GROUP_ID_NOT_FOUND": (("groups", "delete", "--group", "nosuch"), None),
    }
    for code, (args, stdin) in cases.items():
        refused = lakelog(*args, "--root", lake, stdin=stdin)
        assert refused.returncode != 0
        assert len(refused.stderr.splitlines()) == 1, refused.stderr
        assert refused.stderr.startswith(f"lakelog: {code}: "), refused.stderr
    produced = lakelog("produce", "--topic", "t", "--root", lake, stdin='{"value": "x", "expected_offset": 5}\n')
    assert produced.stderr.strip() == (
        "lakelog: OFFSET_MISMATCH: delivered 0 message(s), 1 failed: t-0: expected offset 5 is not the log end offset 0"
    )
