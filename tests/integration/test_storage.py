"""Roots on object stores (S12.1-S12.3): bad roots refused with one clear line, storage faults survived.

Every test talks to a real S3 emulator (moto's server on loopback, tests/s3emulator.py): the session's,
or one of its own where the test pauses the server, checks credentials, or puts a proxy in front of it.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from helpers import folder_listing
from s3emulator import S3Emulator
from s3proxy import NoConditionalPutProxy
from s3proxy_process import ProxyProcess

from lakelog import AdminClient, Consumer, KafkaException, NewTopic, Producer, TopicPartition
from lakelog.errors import InvalidConfig, KafkaStorageError, SaslAuthenticationFailed
from lakelog.log import create_topic, open_partition, payload_table
from lakelog.log.partition_file import partition_files
from lakelog.store import Location, check_root

REPO = Path(__file__).resolve().parents[2]
BUCKET = "lakelog-storage"


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    environment = {key: value for key, value in os.environ.items() if key != "LAKELOG_ROOT"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "lakelog.cli", *args],
        capture_output=True,
        text=True,
        env=environment,
        cwd=cwd or REPO,
        timeout=120,
    )


def refused(result: subprocess.CompletedProcess, code: int, name: str, mentions: str) -> None:
    """One line on stderr naming the Kafka error code, the right exit code, no traceback."""
    lines = result.stderr.splitlines()
    assert result.returncode == code, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"lakelog: {name}: "), lines[0]
    assert mentions in lines[0], lines[0]
    assert result.stdout == ""


def closed_port() -> int:
    """A loopback port nobody listens on (bound a moment ago, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def every_object(emulator: S3Emulator) -> list[tuple[str, str]]:
    """(bucket, key) of every object in the emulator."""
    client = emulator.client()
    found = []
    for bucket in client.list_buckets()["Buckets"]:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            found += [(bucket["Name"], item["Key"]) for item in page.get("Contents", [])]
    return sorted(found)


# -- bad roots: one line, the right exit code, nothing created ------------------------------------------------


def test_S12_1_a_root_with_an_unknown_scheme_is_refused_and_creates_nothing(tmp_path):
    with pytest.raises(InvalidConfig, match="unknown scheme 'hdfs'"):
        Producer({"lakelog.root": "hdfs://bucket/lake"})
    result = cli("topics", "create", "--topic", "t", "--root", "hdfs://bucket/lake", cwd=tmp_path)
    refused(result, 2, "INVALID_CONFIG", "hdfs://bucket/lake")
    assert folder_listing(tmp_path) == []


def test_S12_1_a_bucket_that_does_not_exist_is_refused_and_creates_nothing(s3):
    before = every_object(s3)
    with pytest.raises(InvalidConfig, match="bucket no-such-bucket does not exist"):
        AdminClient({"lakelog.root": "s3://no-such-bucket/lake"})
    result = cli("topics", "create", "--topic", "t", "--root", "s3://no-such-bucket/lake")
    refused(result, 2, "INVALID_CONFIG", "no-such-bucket")
    assert every_object(s3) == before
    assert "no-such-bucket" not in [bucket["Name"] for bucket in s3.client().list_buckets()["Buckets"]]


def test_S12_1_an_endpoint_that_refuses_connections_is_a_retriable_storage_error(s3):
    closed = f"http://127.0.0.1:{closed_port()}"
    with pytest.raises(KafkaStorageError, match="Connection refused") as caught:
        check_root("s3://lakelog-tests/lake", {"endpoint_url": closed})
    assert caught.value.retriable
    started = time.monotonic()
    result = cli("topics", "list", "--root", "s3://lakelog-tests/lake", "--storage-option", f"endpoint_url={closed}")
    refused(result, 1, "KAFKA_STORAGE_ERROR", closed)
    assert time.monotonic() - started < 60


def test_S12_1_storage_options_are_checked_on_load():
    with pytest.raises(InvalidConfig, match="unknown storage option 'colour'") as caught:
        Producer({"lakelog.root": "s3://lakelog-tests/lake", "lakelog.storage.colour": "red"})
    assert caught.value.key == "lakelog.storage.colour"
    with pytest.raises(InvalidConfig, match="allow_http"):
        Location.of("s3://lakelog-tests/lake", {"endpoint_url": "http://127.0.0.1:1", "allow_http": "false"})
    result = cli("topics", "list", "--root", "s3://lakelog-tests/lake", "--storage-option", "timeout=soon")
    refused(result, 2, "INVALID_CONFIG", "timeout")


@pytest.fixture(scope="module")
def authenticated():
    with S3Emulator(authenticated=True) as emulator:
        emulator.create_bucket(BUCKET)
        yield emulator


def test_S12_1_wrong_credentials_are_refused_and_create_nothing(authenticated):
    wrong = {**authenticated.env(), "AWS_ACCESS_KEY_ID": "AKIAWRONGWRONGWRONG", "AWS_SECRET_ACCESS_KEY": "wrong"}
    before = every_object(authenticated)
    result = cli("topics", "create", "--topic", "t", "--root", f"s3://{BUCKET}/lake", env=wrong)
    refused(result, 2, "SASL_AUTHENTICATION_FAILED", "refused the credentials")
    options = {"access_key_id": wrong["AWS_ACCESS_KEY_ID"], "secret_access_key": "wrong", **_endpoint(authenticated)}
    with pytest.raises(SaslAuthenticationFailed):
        check_root(f"s3://{BUCKET}/lake-api", options)
    assert every_object(authenticated) == before
    # The right keys, given as explicit options that override the environment (which has none here).
    right = {
        "access_key_id": authenticated.credentials.access_key_id,
        "secret_access_key": authenticated.credentials.secret_access_key,
        **_endpoint(authenticated),
    }
    storage = {f"lakelog.storage.{key}": value for key, value in right.items()}
    AdminClient({"lakelog.root": f"s3://{BUCKET}/lake-api", **storage}).create_topics([NewTopic("t", 1)])["t"].result()
    producer = Producer({"lakelog.root": f"s3://{BUCKET}/lake-api", **storage})
    producer.produce("t", value=b"with explicit keys", partition=0)
    producer.flush()
    assert open_partition(check_root(f"s3://{BUCKET}/lake-api", right), "t", 0).log_end_offset() == 1


def test_S12_1_a_head_or_get_answered_plainly_is_one_request_and_a_refusal_is_the_clients_error(authenticated, s3):
    """A HEAD or GET the store answers 200 or 404 is one request (the commit's S9.5 HEAD, the probe for the next
    version); any other answer goes through the botocore client, whose error is the one raised."""
    keys = {"access_key_id": authenticated.credentials.access_key_id, "secret_access_key": "wrong"}
    with ProxyProcess(s3.endpoint_url, strip=False) as proxy:
        root = f"s3://lakelog-tests/plain-{uuid.uuid4().hex[:8]}"
        io = check_root(root, {"endpoint_url": proxy.endpoint_url}).io
        io.write(f"{root}/present.json", b"{}")
        before = len(proxy.requests)
        assert io.file_exists(f"{root}/present.json") is True
        assert io.file_exists(f"{root}/absent.json") is False
        assert io.read(f"{root}/present.json") == b"{}"
        with pytest.raises(FileNotFoundError):
            io.read(f"{root}/absent.json")
        made = proxy.requests[before:]
        assert [(request.method, request.status) for request in made] == [
            ("HEAD", 200),
            ("HEAD", 404),
            ("GET", 200),
            ("GET", 404),
        ]
    refused_io = Location.of(f"s3://{BUCKET}/lake-plain", {**keys, **_endpoint(authenticated)}).io
    with pytest.raises(KafkaStorageError, match="SignatureDoesNotMatch|403"):
        refused_io.file_exists(f"s3://{BUCKET}/lake-plain/x.json")
    with pytest.raises(KafkaStorageError, match="SignatureDoesNotMatch|403"):
        refused_io.read(f"s3://{BUCKET}/lake-plain/x.json")


def _endpoint(emulator: S3Emulator) -> dict[str, str]:
    return {"endpoint_url": emulator.endpoint_url, "allow_http": "true", "region": "us-east-1"}


def test_S12_2_a_store_that_ignores_conditional_puts_is_refused_when_opened(s3):
    with NoConditionalPutProxy(s3.endpoint_url) as proxy:
        options = {"endpoint_url": proxy.endpoint_url}
        before = every_object(s3)
        with pytest.raises(InvalidConfig, match="conditional put"):
            check_root("s3://lakelog-tests/unsafe", options)
        result = cli(
            "topics",
            "create",
            "--topic",
            "t",
            "--root",
            "s3://lakelog-tests/unsafe",
            "--storage-option",
            f"endpoint_url={proxy.endpoint_url}",
        )
        refused(result, 2, "INVALID_CONFIG", "If-None-Match")
        assert every_object(s3) == before
    # The same store without the proxy is accepted: the refusal was the store's behaviour, not the root.
    assert check_root("s3://lakelog-tests/unsafe").uri == "s3://lakelog-tests/unsafe"


def test_S12_2_copy_and_delete_commits_are_refused():
    with pytest.raises(InvalidConfig, match="s3_allow_unsafe_rename"):
        check_root("s3://lakelog-tests/lake", {"AWS_S3_ALLOW_UNSAFE_RENAME": "true"})


def test_no_raw_engine_error_reaches_the_api_when_a_data_file_is_unreadable(s3_root):
    create_topic(s3_root, "t", 1)
    log = open_partition(s3_root, "t", 0)
    log.append(payload_table([b"a", b"b"]))
    entry = partition_files(log.table)[0]
    log.table.io.write(log.table.file_path(entry), b"not parquet")
    with Consumer({"lakelog.root": s3_root, "auto.offset.reset": "earliest"}) as consumer:
        consumer.assign([TopicPartition("t", 0, 0)])
        with pytest.raises(KafkaException) as caught:
            consumer.consume(10, timeout=1)
    assert caught.value.error.name() == "CORRUPT_MESSAGE"
    assert log.table.uri in str(caught.value)


# -- faults: the store goes away in the middle of a stream of appends ---------------------------------------


@pytest.fixture
def pausable():
    with S3Emulator() as emulator:
        emulator.create_bucket(BUCKET)
        yield emulator


@pytest.mark.slow
def test_S3_2_the_store_paused_mid_stream_loses_and_doubles_nothing(pausable):
    """The emulator stops (SIGSTOP) in the middle of a stream of appends and starts again: the producer's
    retries carry on, and every batch is in the partition exactly once, in order (S3.2, S12.3)."""
    root = f"s3://{BUCKET}/paused-{uuid.uuid4().hex[:8]}"
    storage = {
        **{f"lakelog.storage.{key}": value for key, value in pausable.storage_options().items()},
        # No retries inside the engines: a request that meets the pause fails after 2 s, and the producer retries.
        "lakelog.storage.timeout": "2s",
        "lakelog.storage.connect_timeout": "1s",
        "lakelog.storage.max_retries": "0",
    }
    AdminClient({"lakelog.root": root, **storage}).create_topics([NewTopic("stream", 1)])["stream"].result()
    producer = Producer({"lakelog.root": root, **storage, "linger.ms": 0, "retry.backoff.ms": 250})
    batches = 30
    delivered: list[int] = []
    errors: list[str] = []

    def report(error, message) -> None:
        if error is None:
            delivered.append(int(message.value()))
        else:
            errors.append(error.str())

    pausing_at = batches // 3
    about_to_pause = threading.Event()

    def stream() -> None:
        for number in range(batches):
            producer.produce("stream", value=str(number).encode(), partition=0, on_delivery=report)
            if number == pausing_at:
                about_to_pause.set()
            producer.flush()

    retries: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: retries.append(record.getMessage()) if "retrying" in record.getMessage() else None
    producer_log = logging.getLogger("lakelog.client.producer")
    producer_log.addHandler(handler)
    writer = threading.Thread(target=stream)
    writer.start()
    try:
        assert about_to_pause.wait(120)
        # The batch is queued and its flush is starting: its requests meet a store that does not answer.
        with pausable.paused_for():
            time.sleep(6)
        writer.join(timeout=180)
    finally:
        producer_log.removeHandler(handler)
    assert not writer.is_alive()
    assert errors == []
    assert delivered == list(range(batches))
    assert retries, "the pause did not fail a single append: the test proved nothing"
    location = check_root(root, {key.removeprefix("lakelog.storage."): value for key, value in storage.items()})
    log = open_partition(location, "stream", 0)
    rows = log.fetch(0, max_records=10_000).rows
    assert [int(value) for value in rows.column("value").to_pylist()] == list(range(batches))
    assert rows.column("offset").to_pylist() == list(range(batches))


# -- S12.3: a commit whose outcome is unknown is resolved by reading the log --------------------------------------

COMMIT_FILE = r"/_delta_log/\d{20}\.json$"


@pytest.fixture
def through_proxy(s3):
    """A root reached through a transparent proxy in front of the session's emulator, and the proxy."""
    with ProxyProcess(s3.endpoint_url, strip=False) as proxy:
        yield f"s3://lakelog-tests/proxied-{uuid.uuid4().hex[:8]}", proxy


@pytest.mark.parametrize("max_retries", ["0", "3"], ids=["no-store-retries", "store-retries"])
def test_S12_3_a_commit_whose_answer_was_lost_is_found_in_the_log_and_reported_committed(through_proxy, max_retries):
    """The commit PUT reaches the store, its answer never comes back. Without store retries delta-rs reports a
    connection error; with them its retried PUT meets its own commit and gets 412, which delta-rs reports as a
    lost race. Either way the writer reads version v+1, finds its own commit id, and reports success: it
    neither deletes its data file (which the committed version references) nor appends the batch twice."""
    root, proxy = through_proxy
    location = check_root(root, {"endpoint_url": proxy.endpoint_url, "max_retries": max_retries})
    create_topic(location, "t", 1)
    log = open_partition(location, "t", 0)
    log.append(payload_table([b"before"]))
    proxy.lose_responses(COMMIT_FILE, times=1)
    result = log.append(payload_table([b"lost answer"]))
    assert [request.response_lost for request in proxy.requests].count(True) == 1
    assert (result.base_offset, result.duplicate) == (1, False)
    fresh = open_partition(location, "t", 0)
    assert fresh.fetch(0).rows.column("value").to_pylist() == [b"before", b"lost answer"]
    assert fresh.log_end_offset() == 2


def test_S12_3_a_commit_still_in_flight_is_neither_failed_nor_retried_blindly(through_proxy):
    """The commit PUT is held by the store past the client's timeout and lands later: the append cannot tell,
    says so (KafkaStorageError, retriable), keeps its data file, and the producer's retry with the same
    sequence finds the batch once it landed, or commits it itself and the late PUT loses (S3.2)."""
    root, proxy = through_proxy
    options = {"endpoint_url": proxy.endpoint_url, "timeout": "1s", "max_retries": "0"}
    location = check_root(root, options)
    create_topic(location, "t", 1)
    storage = {f"lakelog.storage.{key}": value for key, value in options.items()}
    producer = Producer({"lakelog.root": root, **storage, "linger.ms": 0, "retry.backoff.ms": 500})
    producer.produce("t", value=b"first", partition=0)
    producer.flush()
    retries: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: retries.append(record.getMessage())
    logging.getLogger("lakelog.client.producer").addHandler(handler)
    try:
        # The commit PUT is held until the retry's own commit PUT arrives (or 8 s pass), then both go in order.
        gate = proxy.gate(COMMIT_FILE, parties=2, timeout=8.0)
        delivered = []
        producer.produce(
            "t", value=b"held", partition=0, on_delivery=lambda error, message: delivered.append((error, message.offset()))
        )
        producer.flush()
    finally:
        logging.getLogger("lakelog.client.producer").removeHandler(handler)
    assert delivered == [(None, 1)]
    assert any("outcome is unknown" in message for message in retries), retries
    # The held original landed; a retry's PUT of the same version, if it came, was refused (412).
    assert gate.statuses[0] == 200 and set(gate.statuses[1:]) <= {412}, gate.statuses
    fresh = open_partition(location, "t", 0)
    assert fresh.fetch(0).rows.column("value").to_pylist() == [b"first", b"held"]
    assert fresh.log_end_offset() == 2


# -- the CLI on an S3 root, a load from a source on S3 included -------------------------------------------------


def test_S12_1_the_cli_works_on_an_s3_root_and_loads_a_source_from_s3(s3_root):
    import pyarrow as pa

    def ok(*args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "lakelog.cli", *args, "--root", s3_root],
            input=stdin,
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=300,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    ok("init")
    ok("topics", "create", "--topic", "orders", "--partitions", "2")
    assert ok("topics", "list").split() == ["orders"]
    ok("produce", "--topic", "orders", "--partition", "1", stdin='{"key": "c1", "value": "hello"}\n"plain"\n')
    source = Location.of(f"{s3_root}-sources/orders.parquet")
    source.io.write_parquet(pa.table({"order_id": list(range(25)), "amount": [n * 10 for n in range(25)]}), source.uri)
    loaded = ok("load", "--topic", "orders", source.uri, "--partition", "0", "--batch-records", "10", "--no-progress")
    assert '"total_rows": 25' in loaded and '"appended_by_this_run": 25' in loaded
    again = ok("load", "--topic", "orders", source.uri, "--partition", "0", "--batch-records", "10", "--no-progress")
    assert '"appended_by_this_run": 0' in again  # S2.4: the same source again appends nothing
    consumed = ok("consume", "--topic", "orders").splitlines()
    assert len(consumed) == 27 and sum('"value": "hello"' in line for line in consumed) == 1
    assert "3" in ok("sql", 'SELECT count(*) FROM orders WHERE partition = 0 AND "offset" < 3', "--format", "csv")
    assert ok("transactions", "list").splitlines()[0].startswith("TransactionalId")
    assert '"aborted_timed_out": []' in ok("coordinator", "sweep")


def test_S12_1_a_deleted_tree_leaves_no_object_behind(s3, s3_root):
    """pyarrow keeps an emptied prefix as a folder marker (`<prefix>/`); a deleted tree (a Spark write's staging
    folder) must leave nothing that lists as a folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = Location.of(s3_root)
    staging = root / "_spark_staging" / "write"
    with pq.ParquetWriter(
        root.io.path((staging / "a.parquet").uri), pa.schema([("a", pa.int64())]), filesystem=root.io.filesystem
    ) as writer:
        writer.write_table(pa.table({"a": [1]}))
    root.io.delete_tree(staging.uri)
    bucket = root.bucket
    assert s3.client().list_objects_v2(Bucket=bucket).get("Contents", []) == []
