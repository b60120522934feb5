"""Roots on Azure Blob Storage and Google Cloud Storage (S12.1-S12.3), on their emulators (Azurite, fake-gcs-server,
tests/cloud_emulators.py): the subset of the store-facing paths CI runs on every change. The file IO's every
request, the store check at open (a store that ignores the conditional create refused, the tables unchanged, S8.3),
a commit whose answer is lost, a transaction, a short storage-fault round and the settings' secrets kept out of
every output. The foundation, transaction, group, retention and chaos suites run on both in the release tier.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import urllib.parse
import uuid
from pathlib import Path

import pyarrow as pa
import pytest
from s3proxy import NoConditionalPutProxy
from s3proxy_process import ProxyProcess

from lakelog import Consumer, Producer, TopicPartition
from lakelog.errors import InvalidConfig, KafkaStorageError, SaslAuthenticationFailed
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.store import Location, check_root

# On one worker: each emulator starts once for the module (Azurite takes 2-10 s on a loaded machine), not per worker.
pytestmark = pytest.mark.xdist_group("cloud-stores")

REPO = Path(__file__).resolve().parents[2]
COMMIT_FILE = r"/_delta_log/\d{20}\.json$"
KINDS = ("azure", "gcs")
# The request a commit is: Azure's Put Blob, GCS's upload.
COMMIT_METHOD = {"azure": "PUT", "gcs": "POST"}


@pytest.fixture(params=KINDS)
def store(request):
    """(kind, emulator, a fresh root URI, a function making a root's options for an endpoint URL)."""
    kind = request.param
    if kind == "azure":
        emulator = request.getfixturevalue("azurite")
        root = request.getfixturevalue("azure_root")

        def options(endpoint_url: str, **more: str) -> dict[str, str]:
            # A SAS signs the URL, not the headers: a proxy may strip If-None-Match without breaking a signature.
            return {
                "connection_string": None,
                "account_name": emulator.account,
                "sas_token": emulator.sas_token(),
                "blob_endpoint": emulator.blob_endpoint(endpoint_url),
                **more,
            }
    else:
        emulator = request.getfixturevalue("fake_gcs")
        root = request.getfixturevalue("gcs_root")

        def options(endpoint_url: str, **more: str) -> dict[str, str]:
            return {"emulator_host": endpoint_url, **more}

    return kind, emulator, root, options


def objects(kind: str, emulator) -> list[tuple[str, str]]:
    return emulator.blob_names() if kind == "azure" else emulator.object_names()


# -- URIs -------------------------------------------------------------------------------------------------------


def test_S12_1_every_spelling_of_an_azure_or_gcs_root_is_one_uri(monkeypatch):
    monkeypatch.setenv("AZURE_STORAGE_ACCOUNT_NAME", "acct")
    assert Location.of("az://lake/prefix/").uri == "az://lake/prefix"
    abfss = Location.of("abfss://lake@acct.dfs.core.windows.net/prefix")
    assert (abfss.uri, abfss.io.settings["account_name"], abfss.bucket) == ("az://lake/prefix", "acct", "lake")
    assert Location.of("abfs://lake@acct.blob.core.windows.net/p").uri == "az://lake/p"
    assert Location.of("gs://bucket/a/b").uri == "gs://bucket/a/b"
    with pytest.raises(InvalidConfig, match="names the storage account 'other'"):
        Location.of("abfss://lake@other.dfs.core.windows.net/prefix")
    with pytest.raises(InvalidConfig, match="abfss://container@account"):
        Location.of("abfss://lake@nowhere/prefix")
    monkeypatch.delenv("AZURE_STORAGE_ACCOUNT_NAME")
    monkeypatch.delenv("AZURE_STORAGE_CONNECTION_STRING", raising=False)
    with pytest.raises(InvalidConfig, match="needs an account"):
        Location.of("az://lake/prefix")


# -- the file IO, request by request -------------------------------------------------------------------------------


def test_S12_1_the_file_io_reads_writes_lists_and_deletes_through_the_store(store):
    kind, _, root, _ = store
    location = check_root(root)
    io = location.io
    commit = (location / "t/_delta_log/00000000000000000000.json").uri
    assert io.put_if_absent(commit, b"first") is True
    assert io.put_if_absent(commit, b"second") is False
    assert io.read(commit) == b"first"
    assert io.read_range(commit, 1, 3) == b"irs"
    io.write((location / "t/data/a.parquet").uri, b"x")
    io.write((location / "t/data/a.parquet").uri, b"yy")
    assert io.read((location / "t/data/a.parquet").uri) == b"yy"
    assert [entry.name for entry in (location / "t").list()] == ["_delta_log", "data"]
    assert [(entry.name, entry.is_dir) for entry in (location / "t").list(recursive=True)] == [
        ("_delta_log", True),
        ("00000000000000000000.json", False),
        ("data", True),
        ("a.parquet", False),
    ]
    assert io.glob((location / "t/**/*.parquet").uri) == [(location / "t/data/a.parquet").uri]
    assert io.is_dir((location / "t").uri) and io.file_exists(commit) and not io.exists((location / "nope").uri)
    assert io.info(commit).size == 5
    with pytest.raises(FileNotFoundError):
        io.read((location / "nope").uri)
    table = pa.table({"n": list(range(100))})
    io.write_parquet(table, (location / "t/data/b.parquet").uri)
    assert io.read_parquet((location / "t/data/b.parquet").uri).equals(table)
    assert io.parquet_metadata((location / "t/data/b.parquet").uri).num_rows == 100
    io.move((location / "t/data/a.parquet").uri, (location / "t/data/c.parquet").uri)
    assert [entry.name for entry in (location / "t/data").list()] == ["b.parquet", "c.parquet"]
    assert io.delete((location / "t/data/c.parquet").uri) is True
    assert io.delete((location / "t/data/c.parquet").uri) is False
    io.delete_tree((location / "t").uri)
    assert (location / "t").list(recursive=True) == [] and not io.exists((location / "t").uri)
    # pyarrow's readers take the same requests (lakelog sql's datasets).
    io.write_parquet(table, (location / "u/b.parquet").uri)
    import pyarrow.dataset as ds

    assert ds.dataset([io.path((location / "u/b.parquet").uri)], filesystem=io.filesystem).to_table().num_rows == 100


def test_S12_1_a_missing_container_an_unreachable_store_and_wrong_keys_are_told_apart(store, azurite):
    kind, emulator, root, options = store
    missing = f"{root.split('://')[0]}://nosuch{uuid.uuid4().hex[:8]}/lake"
    with pytest.raises(InvalidConfig, match="does not exist"):
        check_root(missing)
    with pytest.raises(KafkaStorageError, match="cannot reach") as raised:
        check_root(root, options("http://127.0.0.1:9", max_retries="0", connect_timeout="1s"))
    assert raised.value.args[0].retriable()
    if kind == "azure":
        wrong = {"connection_string": azurite.connection_string().replace(azurite.key, "d3Jvbmcga2V5IGZvciB0aGUgdGVzdA==")}
        with pytest.raises(SaslAuthenticationFailed, match="refused the credentials"):
            check_root(root, wrong)


# -- the store check ----------------------------------------------------------------------------------------------


def test_S12_2_a_store_that_ignores_the_conditional_create_is_refused_at_open_and_changes_nothing(store):
    """The proxy strips If-None-Match (Azure) / ifGenerationMatch (GCS): the probe's second create overwrites, so
    the root is refused at open, before any table is touched (S8.3: the tables are as they were)."""
    kind, emulator, root, options = store
    create_topic(check_root(root), "t", 1)
    open_partition(root, "t", 0).append(payload_table([b"kept"]))
    before = objects(kind, emulator)
    with NoConditionalPutProxy(emulator.endpoint_url) as proxy:
        with pytest.raises(InvalidConfig, match="overwrote an object"):
            check_root(root, options(proxy.endpoint_url))
        assert any(request.stripped for request in proxy.requests), proxy.requests
    assert objects(kind, emulator) == before
    assert open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist() == [b"kept"]
    # The same store without the proxy is accepted: the refusal was the store's behaviour, not the root.
    with ProxyProcess(emulator.endpoint_url, strip=False) as transparent:
        assert check_root(root, options(transparent.endpoint_url)).uri == root


@pytest.mark.parametrize("max_retries", ["0", "3"], ids=["no-store-retries", "store-retries"])
def test_S12_3_a_commit_whose_answer_was_lost_is_found_in_the_log_and_reported_committed(store, max_retries):
    """The commit's conditional create reaches the store, its answer never comes back: without retries the client
    library reports a connection error, with them its retry meets its own commit (409/412). Either way the writer
    reads the version back, finds its own commit, and reports success once."""
    kind, emulator, root, options = store
    with ProxyProcess(emulator.endpoint_url, strip=False) as proxy:
        location = check_root(root, options(proxy.endpoint_url, max_retries=max_retries))
        create_topic(location, "t", 1)
        log = open_partition(location, "t", 0)
        log.append(payload_table([b"before"]))
        proxy.lose_responses(COMMIT_FILE, method=COMMIT_METHOD[kind], times=1)
        result = log.append(payload_table([b"lost answer"]))
        assert [request.response_lost for request in proxy.requests].count(True) == 1
    assert (result.base_offset, result.duplicate) == (1, False)
    fresh = open_partition(root, "t", 0)
    assert fresh.fetch(0).rows.column("value").to_pylist() == [b"before", b"lost answer"]
    assert fresh.log_end_offset() == 2


# -- the clients ---------------------------------------------------------------------------------------------------


def test_S4_a_transaction_commits_and_aborts_and_read_committed_sees_only_the_committed(store):
    _, _, root, _ = store
    create_topic(check_root(root), "t", 2)
    producer = Producer({"lakelog.root": root, "transactional.id": "tx"})
    producer.init_transactions()
    for outcome in ("commit", "abort"):
        producer.begin_transaction()
        for partition in range(2):
            producer.produce("t", value=f"{outcome}-{partition}".encode(), partition=partition)
        producer.commit_transaction() if outcome == "commit" else producer.abort_transaction()
    producer.close()
    consumer = Consumer({"lakelog.root": root, "group.id": "g", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition("t", partition, 0) for partition in range(2)])
    values = sorted(message.value() for message in consumer.consume(num_messages=10, timeout=2) if message.error() is None)
    consumer.commit(asynchronous=False)
    consumer.close()
    assert values == [b"commit-0", b"commit-1"]


def test_S12_2_a_short_storage_fault_round_loses_nothing(store, tmp_path, rng):
    """Two of the storage nemesis's kinds of damage, on a short round (the whole round runs in the release tier)."""
    from chaos.checker import check, fault_outcomes, found
    from chaos.history import read_history
    from chaos.nemesis import STORAGE_FAULTS
    from chaos.storage import run_storage_workload

    _, _, root, _ = store
    kinds = rng.sample(sorted(STORAGE_FAULTS), 2)
    run_storage_workload(root, str(tmp_path), rng, kinds=kinds, steps=(2, 1), records=2)
    history = read_history(str(tmp_path))
    result = check(history)
    assert found(result) == {}
    assert [fault for fault in fault_outcomes(history, result) if fault["outcome"] not in ("survived", "refused")] == []


# -- secrets -------------------------------------------------------------------------------------------------------


def test_S12_1_the_account_key_and_sas_appear_in_no_output_of_a_failing_run(azurite, azure_root, caplog, tmp_path):
    """The account's key (random per emulator: the marker) and a SAS are absent from the log lines, the errors, the
    reprs and the CLI's output of runs that fail: a wrong endpoint, a store refused, a missing topic."""
    marker, sas = azurite.key, azurite.sas_token()
    signature = urllib.parse.unquote([part for part in sas.split("&") if part.startswith("sig=")][0].split("=", 1)[1])
    # The signature's longest run of letters and digits: found however a URL encodes its '+', '/' and '='.
    signature = max(re.findall(r"[A-Za-z0-9]+", signature), key=len)
    caplog.set_level(logging.DEBUG)
    shown: list[str] = []
    location = check_root(azure_root)
    shown += [repr(location.io), repr(location), str(location)]
    for options in (
        {"blob_endpoint": "http://127.0.0.1:9/x", "max_retries": "0", "connect_timeout": "1s"},
        {"connection_string": None, "account_name": azurite.account, "sas_token": sas, "blob_endpoint": "http://127.0.0.1:9/x"},
    ):
        with pytest.raises(KafkaStorageError) as raised:
            check_root(azure_root, {**options, "max_retries": "0"})
        shown += [str(raised.value), repr(raised.value)]
    with NoConditionalPutProxy(azurite.endpoint_url) as proxy:
        options = {"connection_string": None, "account_name": azurite.account, "sas_token": sas}
        with pytest.raises(InvalidConfig) as refused:
            check_root(azure_root, {**options, "blob_endpoint": azurite.blob_endpoint(proxy.endpoint_url)})
        shown += [str(refused.value)]
    # lakelog's own log lines (the HTTP library's DEBUG lines of this process are the application's to filter, as
    # the CLI does below).
    shown += [record.getMessage() for record in caplog.records if record.name.startswith("lakelog")]
    environment = {key: value for key, value in os.environ.items() if key != "LAKELOG_ROOT"}
    by_sas = {key: value for key, value in environment.items() if key != "AZURE_STORAGE_CONNECTION_STRING"}
    by_sas.update(
        AZURE_STORAGE_ACCOUNT_NAME=azurite.account,
        AZURE_STORAGE_SAS_TOKEN=sas,
        AZURE_STORAGE_BLOB_ENDPOINT=azurite.blob_endpoint(),
    )
    for env in (environment, by_sas):
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "lakelog.cli",
                "topics",
                "describe",
                "--topic",
                "missing",
                "--root",
                azure_root,
                "--log-level",
                "DEBUG",
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )
        assert result.returncode != 0, result.stderr
        shown += [result.stdout, result.stderr]
    written = [path.read_text(errors="replace") for path in tmp_path.rglob("*") if path.is_file()]
    for text in shown + written:
        assert marker not in text and signature not in text
