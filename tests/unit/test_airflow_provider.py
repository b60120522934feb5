"""The Airflow provider's pure parts: connection parsing, topic Asset URIs, and its registration with Airflow.

The hook's module imports Airflow, whose first import configures logging (tests/conftest.py): it is imported
by the tests that use it (the `hooks` fixture), never when this module is collected.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType

import pytest

from lakelog.airflow.assets import sanitize_uri, topic_asset_uri
from lakelog.errors import InvalidConfig
from lakelog.store import initialise_root


@pytest.fixture
def hooks() -> ModuleType:
    """lakelog.airflow.hooks.lakelog (parse_connection, LakelogHook), imported when a test runs."""
    return importlib.import_module("lakelog.airflow.hooks.lakelog")


def test_a_connection_extra_gives_the_root_storage_options_and_client_configs(hooks):
    extra = {
        "root": "s3://bucket/lake",
        "storage_options": {"region": "eu-west-1"},
        "config": {"transaction.timeout.ms": 30000},
        "producer": {"linger.ms": 5},
    }
    connection = hooks.parse_connection("c", json.dumps(extra), login="AK", password="SK")
    assert connection.root == "s3://bucket/lake"
    assert connection.storage_options == {"region": "eu-west-1", "access_key_id": "AK", "secret_access_key": "SK"}
    assert connection.client_config("producer") == {
        "lakelog.root": "s3://bucket/lake",
        "lakelog.storage.region": "eu-west-1",
        "lakelog.storage.access_key_id": "AK",
        "lakelog.storage.secret_access_key": "SK",
        "transaction.timeout.ms": 30000,
        "linger.ms": 5,
    }
    assert "linger.ms" not in connection.client_config("consumer")
    assert connection.client_config("admin", {"transaction.timeout.ms": 1})["transaction.timeout.ms"] == 1


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({}, "extra has no root"),
        ("{not json", "extra is not JSON"),
        ([1], "must be a JSON object"),
        ({"root": "/lake", "rooot": 1}, "unknown extra keys \\['rooot'\\]"),
        ({"root": "/lake", "producer": "linger.ms=5"}, "extra.producer must be a JSON object"),
    ],
)
def test_a_malformed_connection_is_invalid_config_naming_what_is_wrong(hooks, extra, words):
    with pytest.raises(InvalidConfig, match=words) as raised:
        hooks.parse_connection("lakelog_default", extra)
    assert "lakelog_default" in str(raised.value) and "\n" not in str(raised.value)


def test_the_hook_reads_a_connection_from_the_environment(hooks, monkeypatch, tmp_path):
    monkeypatch.setenv("AIRFLOW_CONN_LAKELOG_DEFAULT", json.dumps({"conn_type": "lakelog", "extra": {"root": str(tmp_path)}}))
    hook = hooks.LakelogHook()
    reachable, message = hook.test_connection()  # a folder that is no lakelog root (yet): say how one is made
    assert not reachable and f"lakelog init --root {tmp_path}" in message and "\n" not in message
    initialise_root(str(tmp_path))
    assert hook.root == str(tmp_path)
    assert hook.test_connection() == (True, f"lakelog root {tmp_path} is reachable")
    with pytest.raises(InvalidConfig, match="'elsewhere' is not defined.*AIRFLOW_CONN_ELSEWHERE"):
        _ = hooks.LakelogHook("elsewhere").root


def test_topic_assets_name_the_root_by_scheme_and_path():
    import urllib.parse

    assert topic_asset_uri("/data/lake", "orders") == "lakelog://file/data/lake/orders"
    assert topic_asset_uri("s3://bucket/prefix", "orders") == "lakelog://s3/bucket/prefix/orders"
    sanitize_uri(urllib.parse.urlsplit("lakelog://s3/bucket/prefix/orders"))
    for bad in ("lakelog://s3/orders", "lakelog://bucket/prefix/orders", "lakelog://file/lake/orders?x=1"):
        with pytest.raises(ValueError):
            sanitize_uri(urllib.parse.urlsplit(bad))


def test_airflow_finds_the_provider_its_connection_type_and_its_asset_scheme():
    from airflow.providers_manager import ProvidersManager
    from airflow.sdk import Asset

    manager = ProvidersManager()
    assert "lakelog" in manager.providers
    info = manager.providers["lakelog"].data
    assert info["connection-types"] == [
        {"hook-class-name": "lakelog.airflow.hooks.lakelog.LakelogHook", "connection-type": "lakelog"}
    ]
    assert Asset("lakelog://s3/bucket/lake/orders").uri == "lakelog://s3/bucket/lake/orders"
    with pytest.raises(ValueError, match="no query"):
        Asset("lakelog://s3/bucket/lake/orders?x=1")


def test_importing_the_provider_package_does_not_import_airflow():
    import subprocess
    import sys

    code = "import sys, lakelog.airflow; lakelog.airflow.get_provider_info(); print('airflow' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


def test_spark_jobs_get_secrets_in_their_environment_and_the_other_storage_options_as_arguments(monkeypatch):
    from lakelog.airflow.hooks.spark_submit import SparkSubmitHook

    connection = {
        "conn_type": "lakelog",
        "login": "AKEY",
        "password": "SECRET",
        "extra": {"root": "s3://bucket/lake", "storage_options": {"endpoint_url": "http://127.0.0.1:9", "timeout": "5s"}},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKELOG_DEFAULT", json.dumps(connection))
    hook = SparkSubmitHook()
    command = hook.build_command("pipelines.partition_status", ["--topic", "orders"])
    environment = hook.build_environment("pipelines.partition_status")
    assert command[-6:] == ["--root", "s3://bucket/lake", "--topic", "orders", "--storage-option", "timeout=5s"]
    assert "SECRET" not in " ".join(command) and "AKEY" not in " ".join(command)
    assert (environment["AWS_ACCESS_KEY_ID"], environment["AWS_SECRET_ACCESS_KEY"]) == ("AKEY", "SECRET")
    assert environment["AWS_ENDPOINT_URL"] == "http://127.0.0.1:9"
