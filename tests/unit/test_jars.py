"""lakelog.jars: a jars folder counts only with the stamp of the pom the package carries; what a session is told."""

from __future__ import annotations

import logging

from lakelog import jars
from lakelog.cli import main


def fetched_folder(tmp_path, stamp: str):
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "delta-spark_4.1_2.13-4.4.0.jar").write_bytes(b"")
    (folder / "hadoop-aws-3.4.2.jar").write_bytes(b"")
    (folder / jars.STAMP).write_text(stamp + "\n")
    return folder


def test_a_folder_stamped_with_the_pom_gives_the_session_its_jars_on_the_class_path_and_delta(tmp_path):
    folder = fetched_folder(tmp_path, jars.pom_digest())
    conf = jars.spark_conf(folder)
    assert conf["spark.driver.extraClassPath"].split(":") == [
        str(folder / "delta-spark_4.1_2.13-4.4.0.jar"),
        str(folder / "hadoop-aws-3.4.2.jar"),
    ]
    assert conf["spark.sql.extensions"] == "io.delta.sql.DeltaSparkSessionExtension"
    assert conf["spark.sql.catalog.spark_catalog"] == "org.apache.spark.sql.delta.catalog.DeltaCatalog"
    assert "spark.jars.packages" not in conf, "Spark never fetches at run time"


def test_jars_fetched_from_another_pom_or_none_give_no_conf_and_one_line_saying_how_to_fetch(tmp_path, caplog, capsys):
    stale = fetched_folder(tmp_path, "0" * 64)  # another Delta release's pom
    assert jars.fetched_jars(stale) is None and jars.spark_conf(stale) == {}
    assert jars.spark_conf(tmp_path / "absent") == {}
    assert main(["jars", "conf", "--into", str(stale)]) == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert str(stale) in line and "lakelog jars fetch" in line


def test_local_sessions_say_in_one_line_what_is_missing(tmp_path, monkeypatch, caplog):
    from pyspark_lakelog import delta_conf

    monkeypatch.setenv(jars.JARS_DIR_VARIABLE, str(tmp_path / "absent"))
    with caplog.at_level(logging.WARNING):
        assert delta_conf() == {}
    (record,) = [record for record in caplog.records if record.name == "pyspark_lakelog.session"]
    assert "\n" not in record.getMessage() and "lakelog jars fetch" in record.getMessage()


def test_the_pom_the_package_carries_pins_delta_for_spark_4_1_and_s3a():
    pom = jars.POM.read_text()
    assert "<artifactId>delta-spark_4.1_2.13</artifactId>" in pom and "<artifactId>hadoop-aws</artifactId>" in pom


def test_s3a_takes_lakelogs_s3_settings_and_s3_uris_path_style_for_an_endpoint_of_its_own():
    from lakelog.store.io.s3_settings import s3_settings
    from pyspark_lakelog.s3a import spark_s3a

    environ = {"AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ALLOW_HTTP": "true", "AWS_REGION": "eu-west-1"}
    conf = spark_s3a(s3_settings({"access_key_id": "AKEY", "secret_access_key": "SECRET"}, environ))
    assert conf["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert (conf["spark.hadoop.fs.s3a.access.key"], conf["spark.hadoop.fs.s3a.secret.key"]) == ("AKEY", "SECRET")
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    # AWS itself: no endpoint, so virtual-hosted style and TLS, and the SDK's own credential chain.
    aws = spark_s3a(s3_settings(None, {}))
    assert not any(key.startswith("spark.hadoop.fs.s3a.") for key in aws), aws
