"""`lakelog sink postgres|duckdb` run for real: a topic into a table, once; bad input and an unreachable database
each say so in one line."""

from __future__ import annotations

import json

from lakelog import Producer
from lakelog.log import create_topic

COLUMNS = "id:bigint,name:text,amount:numeric"


def test_lakelog_sink_duckdb_and_postgres_on_the_command_line(lakelog, root, tmp_path, postgres_dsn):
    create_topic(root, "orders", 1)
    producer = Producer({"lakelog.root": root})
    for i in range(3):
        producer.produce("orders", value=json.dumps({"id": i, "name": f"n{i}", "amount": i}))
    producer.flush()
    common = ("--topic", "orders", "--table", "orders", "--columns", COLUMNS, "--root", root)
    for target in (("duckdb", "--database", str(tmp_path / "cli.duckdb")), ("postgres", "--dsn", postgres_dsn)):
        first = lakelog("sink", *target, *common)
        assert first.returncode == 0, first.stderr
        assert json.loads(first.stdout)["rows"] == 3 and json.loads(first.stdout)["positions"] == {"0": 3}
        again = lakelog("sink", *target, *common)
        assert json.loads(again.stdout)["rows"] == 0 and json.loads(again.stdout)["epoch"] == 2
    bad = lakelog("sink", "postgres", "--dsn", "host=127.0.0.1 port=1 dbname=x connect_timeout=2", *common)
    assert bad.returncode == 1 and bad.stderr.startswith("lakelog: KAFKA_STORAGE_ERROR: PostgreSQL: cannot connect")
    assert len(bad.stderr.strip().splitlines()) == 1
    typo = lakelog(
        "sink", "duckdb", "--database", str(tmp_path / "x.duckdb"), *common[:4], "--columns", "id:bigint,x:wat", "--root", root
    )
    assert typo.returncode == 2 and "type 'wat' is not one of" in typo.stderr
