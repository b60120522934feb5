"""`lakelog upgrade-protocol` (older tables readable by delta-spark) and `lakelog spark-sql-init --register` on an S3
root: the S3A settings a spark-sql shell needs, never a key in clear text unless asked for, and then only in a file
its owner alone can read."""

from __future__ import annotations

import os
import stat

from lakelog import catalog
from lakelog.log import create_topic
from lakelog.store import Table
from lakelog.store.delta.actions import INVARIANTS_FEATURE, LAKELOG_WRITER_FEATURE, PROTOCOL


def test_upgrade_protocol_upgrades_old_tables_once(lakelog, lake, monkeypatch):
    assert lakelog("init", "--root", lake).returncode == 0
    with monkeypatch.context() as old:
        old.setitem(PROTOCOL, "writerFeatures", [LAKELOG_WRITER_FEATURE])
        create_topic(lake, "orders", 2)
    result = lakelog("upgrade-protocol", "--root", lake)
    assert result.returncode == 0, result.stderr
    lines = dict(line.rsplit("\t", 1) for line in result.stdout.splitlines()[1:])
    partitions = {uri: version for uri, version in lines.items() if "/topics/orders/" in uri}
    assert len(partitions) == 2 and set(partitions.values()) == {"1"}, result.stdout
    for uri in partitions:
        assert INVARIANTS_FEATURE in Table.open(uri).protocol["writerFeatures"]
    again = lakelog("upgrade-protocol", "--root", lake)
    assert again.returncode == 0 and {line.rsplit("\t", 1)[1] for line in again.stdout.splitlines()[1:]} == {"-"}


def test_register_on_an_s3_root_prints_no_secret_and_writes_keys_only_to_a_private_file(lakelog, s3_root, tmp_path):
    secret = os.environ["AWS_SECRET_ACCESS_KEY"]
    key_id = os.environ["AWS_ACCESS_KEY_ID"]
    assert lakelog("init", "--root", s3_root).returncode == 0
    create_topic(s3_root, "orders", 1)
    Table.create(catalog.view_path(s3_root, "orders"), catalog.VIEW_SCHEMA, {})
    script = tmp_path / "register.sql"

    plain = lakelog("spark-sql-init", "--register", "--root", s3_root, "--output", script)
    assert plain.returncode == 0, plain.stderr
    assert "CREATE TABLE IF NOT EXISTS `orders_view` USING delta LOCATION" in script.read_text()
    assert f"--conf spark.hadoop.fs.s3a.endpoint={os.environ['AWS_ENDPOINT_URL']}" in plain.stderr
    assert "--conf spark.hadoop.fs.s3.impl=org.apache.hadoop.fs.s3a.S3AFileSystem" in plain.stderr
    for text in (plain.stdout, plain.stderr, script.read_text()):
        assert secret not in text and key_id not in text

    properties = tmp_path / "lakelog.conf"
    properties.write_text("left over\n")
    os.chmod(properties, 0o644)
    private = lakelog("spark-sql-init", "--register", "--root", s3_root, "--output", script, "--properties-file", properties)
    assert private.returncode == 0, private.stderr
    assert stat.S_IMODE(properties.stat().st_mode) == 0o600
    lines = dict(line.split(" ", 1) for line in properties.read_text().splitlines())
    assert lines["spark.hadoop.fs.s3a.secret.key"] == secret and lines["spark.hadoop.fs.s3a.access.key"] == key_id
    assert f"--properties-file {properties}" in private.stderr
    assert secret not in private.stderr and secret not in private.stdout
