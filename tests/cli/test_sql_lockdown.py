"""`lakelog sql` is read-only over the root's tables (finding 8: it was an unrestricted DuckDB session that read
`/proc/self/environ`, overwrote a topic's table with `COPY ... TO`, and created database files with `ATTACH`)."""

from __future__ import annotations

import os

import pytest

from lakelog import sql
from lakelog.cli import EXIT_BAD_INPUT, main
from lakelog.errors import CorruptRecord, InvalidRequest
from lakelog.jobs.status import refresh_status
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.store import Location


@pytest.fixture
def orders(root: str) -> str:
    create_topic(root, "orders", 2)
    for partition in range(2):
        open_partition(root, "orders", partition).append(payload_table([b"a", b"b", b"c"]))
    return "orders"


def files_under(root: str) -> list[tuple[str, int]]:
    return sorted((entry.uri, entry.size) for entry in Location.of(root).list(recursive=True) if not entry.is_dir)


def refused(root: str, query: str) -> str:
    with pytest.raises(InvalidRequest) as error:
        sql.query(root, query)
    text = str(error.value)
    assert "lakelog sql reads the root's tables and nothing else" in text and "\n" not in text, text
    return text


def test_a_query_reads_no_file_by_path(root, orders):
    """Finding 8: `read_text('/proc/self/environ')` returned the environment with the AWS secret."""
    refused(root, "SELECT content FROM read_text('/proc/self/environ')")
    data_file = next(uri for uri, _ in files_under(root) if uri.endswith(".parquet"))
    refused(root, f"SELECT count(*) FROM read_parquet('{data_file}')")


def test_copy_to_the_root_is_refused_and_the_topic_is_unchanged(root, orders):
    """Finding 8: `COPY ... TO '<root>/topics/keep' (OVERWRITE)` deleted a topic's table."""
    before = files_under(root)
    rows = sql.read_committed(root, orders)
    for target in (f"{root}/topics/{orders}", f"{root}/topics/{orders}/0/_delta_log/00000000000000000099.json"):
        refused(root, f"COPY (SELECT * FROM {orders}) TO '{target}' (FORMAT parquet, OVERWRITE)")
    refused(root, f"EXPORT DATABASE '{root}/exported'")
    assert files_under(root) == before
    assert sql.read_committed(root, orders).equals(rows)


def test_attach_install_load_and_settings_are_refused(root, orders, tmp_path):
    """Finding 8: `ATTACH` created database files; extensions and settings could reopen the file system."""
    refused(root, f"ATTACH '{tmp_path / 'x.duckdb'}' AS x")
    assert not os.path.exists(tmp_path / "x.duckdb")
    for query in ("INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true", "RESET lock_configuration"):
        refused(root, query)


def test_the_cli_prints_a_refused_query_as_one_lakelog_line(root, orders, capsys):
    code = main(["sql", "SELECT * FROM read_text('/proc/self/environ')", "--root", root])
    captured = capsys.readouterr()
    assert code == EXIT_BAD_INPUT and captured.out == ""
    assert captured.err.startswith("lakelog: INVALID_REQUEST: lakelog sql reads the root's tables and nothing else")
    assert len(captured.err.strip().splitlines()) == 1 and os.environ.get("PATH", "") not in captured.err


@pytest.mark.roots("local", "s3")
def test_queries_over_topics_and_status_tables_still_work(root, orders):
    """The tables are registered before the lock: a topic read twice in one query, a status table by its columns."""
    assert sql.query(root, "SELECT count(*) AS n FROM orders").to_pylist() == [{"n": 6}]
    joined = sql.query(root, 'SELECT count(*) AS n FROM orders a JOIN orders b USING (partition, "offset")')
    assert joined.to_pylist() == [{"n": 6}]
    refresh_status(root, orders, lambda status_of, tasks: [status_of(task) for task in tasks])
    status = sql.query(root, "SELECT partition, high_watermark FROM orders_status ORDER BY partition")
    assert status.to_pylist() == [{"partition": 0, "high_watermark": 3}, {"partition": 1, "high_watermark": 3}]
    assert sorted(sql.query(root, "SHOW TABLES").column("name").to_pylist()) == ["orders", "orders_status"]


def test_a_topic_is_read_when_a_query_scans_it_and_its_damage_is_lakelog_s_error(root, orders):
    """Finding 11: DuckDB gets each topic as a stream read while the query runs (no table loaded whole when the
    session opens); a data file missing under it is CorruptRecord, not a DuckDB error."""
    data_file = next(uri for uri, _ in files_under(root) if uri.endswith(".parquet") and f"/topics/{orders}/0/" in uri)
    Location.of(root).io.delete(data_file)
    sources: dict = {}
    connect = sql.connect(root, f"SELECT count(*) FROM {orders}", sources=sources)  # reads no row yet
    connect.close()
    assert isinstance(sources[orders], sql.ArrowStream)
    with pytest.raises(CorruptRecord, match="is missing"):
        sql.query(root, f"SELECT count(*) FROM {orders}")


def test_a_status_table_missing_a_file_is_corrupt_record(root, orders):
    """A view or status table read as a dataset by column still reports a missing file as lakelog's error."""
    refresh_status(root, orders, lambda status_of, tasks: [status_of(task) for task in tasks])
    status = next(uri for uri, _ in files_under(root) if uri.endswith(".parquet") and f"/status/{orders}/" in uri)
    Location.of(root).io.delete(status)
    with pytest.raises(CorruptRecord, match="is missing"):
        sql.query(root, f"SELECT count(*) FROM {orders}_status")
