"""`lakelog sql` (DuckDB over read_committed topics) and `lakelog spark-sql-init` (S5.2)."""

from __future__ import annotations

import csv
import io
import json

from lakelog.log import BatchHeader, ControlType, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED


def ok(result) -> str:
    assert result.returncode == 0, f"exit {result.returncode}: {result.stderr}"
    return result.stdout


def history(lake: str) -> None:
    """orders-0: v0, an aborted transaction, v3, a committed one, an open one; orders-1: w0. LSO 0: 6."""
    create_topic(lake, "orders", 2)
    log = open_partition(lake, "orders", 0)
    log.append(payload_table([b"v0"], keys=[b"a"]))
    log.append(payload_table([b"aborted"]), BatchHeader(1, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    log.append_marker(1, 1, ControlType.ABORT)
    log.append(payload_table([b"v3"], keys=[b"b"]))
    log.append(payload_table([b"committed"]), BatchHeader(2, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    log.append_marker(2, 1, ControlType.COMMIT)
    log.append(payload_table([b"open"]), BatchHeader(3, 0, 0, is_transactional=True), transaction=_UNVERIFIED)
    open_partition(lake, "orders", 1).append(payload_table([b"w0", b"\xff"]))


def test_sql_reads_each_topic_in_read_committed(lakelog, lake):
    ok(lakelog("init", "--root", lake))
    history(lake)
    out = ok(lakelog("sql", 'SELECT partition, "offset", value FROM orders ORDER BY ALL', "--root", lake, "--format", "json"))
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows == [
        {"partition": 0, "offset": 0, "value": "v0"},
        {"partition": 0, "offset": 3, "value": "v3"},
        {"partition": 0, "offset": 4, "value": "committed"},
        {"partition": 1, "offset": 0, "value": "w0"},
        {"partition": 1, "offset": 1, "value": "/w=="},
    ]
    out = ok(
        lakelog(
            "sql",
            "SELECT topic, count(*) AS n, max(timestampType) AS t FROM orders GROUP BY topic",
            "--root",
            lake,
            "--format",
            "csv",
        )
    )
    assert list(csv.reader(io.StringIO(out))) == [["topic", "n", "t"], ["orders", "5", "0"]]
    table = ok(lakelog("sql", "SELECT count(*) AS n FROM orders", "--root", lake))
    assert "n" in table and "5" in table


def test_sql_errors_are_one_line(lakelog, lake):
    ok(lakelog("init", "--root", lake))
    history(lake)
    missing = lakelog("sql", "SELECT * FROM nowhere", "--root", lake)
    assert missing.returncode == 2 and missing.stderr.startswith("lakelog: INVALID_REQUEST: DuckDB: Catalog Error")
    assert len(missing.stderr.strip().splitlines()) == 1
    reserved = lakelog("sql", "SELECT offset FROM orders", "--root", lake)
    assert reserved.returncode == 2 and "DuckDB" in reserved.stderr
    nowhere = lakelog("sql", "SELECT 1", "--root", lake + "-missing")
    assert nowhere.returncode == 2 and "does not exist" in nowhere.stderr


def test_spark_sql_init_names_every_topic(lakelog, lake, tmp_path):
    ok(lakelog("init", "--root", lake))
    history(lake)
    create_topic(lake, "my.events-v2", 1)
    text = ok(lakelog("spark-sql-init", "--root", lake))
    statements = [line for line in text.splitlines() if line.startswith("CREATE")]
    assert statements == [
        f"CREATE OR REPLACE TEMPORARY VIEW `my.events-v2` USING lakelog OPTIONS (`root` '{lake}', `topic` 'my.events-v2', `isolation.level` 'read_committed');",
        f"CREATE OR REPLACE TEMPORARY VIEW `orders` USING lakelog OPTIONS (`root` '{lake}', `topic` 'orders', `isolation.level` 'read_committed');",
    ]
    target = tmp_path / "init.sql"
    result = lakelog("spark-sql-init", "--root", lake, "--output", target)
    assert result.returncode == 0 and target.read_text() == text
    assert "spark-sql -i" in result.stderr
    assert lakelog("spark-sql-init", "--root", lake + "-missing").returncode == 2


def test_sql_tables_are_discoverable_without_reading_their_rows(lakelog, lake, monkeypatch):
    """SHOW TABLES and information_schema.tables list every table; listing reads no topic's rows."""
    from lakelog import sql

    ok(lakelog("init", "--root", lake))
    history(lake)
    create_topic(lake, "orders-copy", 1)
    assert "orders-copy" in ok(lakelog("sql", "SHOW TABLES", "--root", lake))

    def no_rows(root, topic):
        raise AssertionError(f"a listing read the rows of {topic}")

    monkeypatch.setattr(sql, "read_committed", no_rows)
    assert sorted(sql.query(lake, "SHOW TABLES").column("name").to_pylist()) == ["orders", "orders-copy"]
    listed = sql.query(lake, "SELECT table_name, table_type FROM information_schema.tables ORDER BY 1").to_pylist()
    assert listed == [{"table_name": "orders", "table_type": "VIEW"}, {"table_name": "orders-copy", "table_type": "VIEW"}]
    columns = sql.query(lake, "SELECT DISTINCT table_name, column_name FROM information_schema.columns").to_pylist()
    assert {"table_name": "orders", "column_name": "value"} in columns


def test_a_missing_table_names_what_makes_it(lakelog, lake):
    ok(lakelog("init", "--root", lake))
    history(lake)
    hints = {
        "orders_view": "`spark-submit pipelines/materialize_committed_view.py --topic orders` (not run on this root yet)",
        "orders_status": "`spark-submit pipelines/partition_status.py --topic orders`",
        "nosuch_view": "the materialized read_committed view of topic nosuch, which this root does not hold",
        "quality_results": "it exists once a write to a topic with a suite (lakelog quality set) has been validated",
        "nowhere": "SHOW TABLES lists them",
    }
    for name, hint in hints.items():
        missing = lakelog("sql", f"SELECT * FROM {name}", "--root", lake)
        assert missing.returncode == 2 and len(missing.stderr.strip().splitlines()) == 1, missing.stderr
        assert hint in missing.stderr, missing.stderr
