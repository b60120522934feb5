"""The S3 test tools in tests/s3emulator.py do what the S3 tests rely on (one moto server per module, on loopback)."""

from __future__ import annotations

import os
import threading
import time
import uuid

import boto3
import pyarrow as pa
import pyarrow.fs as pafs
import pytest
from botocore.exceptions import ClientError
from deltalake import CommitProperties, DeltaTable, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError
from s3emulator import Credentials, S3Emulator
from s3proxy import NoConditionalPutProxy

BUCKET = "lake"
SCHEMA = pa.schema([("x", pa.int64())])
STRICT = CommitProperties(max_commit_retries=0)


@pytest.fixture(scope="module")
def s3():
    with S3Emulator() as emulator:
        emulator.create_bucket(BUCKET)
        yield emulator


@pytest.fixture(scope="module")
def s3_auth():
    with S3Emulator(authenticated=True) as emulator:
        emulator.create_bucket(BUCKET)
        yield emulator


@pytest.fixture
def uri() -> str:
    return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}"


def rows(value: int) -> pa.Table:
    return pa.table({"x": [value]})


def table_at_v1(uri: str, options: dict[str, str]) -> tuple[DeltaTable, DeltaTable]:
    """A table at version 1 and two handles on it."""
    DeltaTable.create(uri, SCHEMA, storage_options=options)
    write_deltalake(uri, rows(0), mode="append", storage_options=options)
    return DeltaTable(uri, storage_options=options), DeltaTable(uri, storage_options=options)


def strict_race(a: DeltaTable, b: DeltaTable) -> dict[str, BaseException | None]:
    """a and b commit version 2 at the same time (threads), no retries; what each one got."""
    outcome: dict[str, BaseException | None] = {}

    def commit(name: str, handle: DeltaTable, value: int) -> None:
        try:
            write_deltalake(handle, rows(value), mode="append", commit_properties=STRICT)
            outcome[name] = None
        except BaseException as e:  # noqa: BLE001 - recorded and asserted on
            outcome[name] = e

    threads = [threading.Thread(target=commit, args=("a", a, 1)), threading.Thread(target=commit, args=("b", b, 2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return outcome


def test_env_reaches_delta_rs_and_pyarrow(s3, uri, monkeypatch):
    """The AWS_* variables of env() alone connect delta-rs and pyarrow's FileSystem.from_uri."""
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    write_deltalake(uri, rows(7))
    assert DeltaTable(uri).to_pyarrow_table()["x"].to_pylist() == [7]
    fs, path = pafs.FileSystem.from_uri(uri)
    assert fs.get_file_info(f"{path}/_delta_log/00000000000000000000.json").type == pafs.FileType.File
    # Not so pyarrow.fs.S3FileSystem() without arguments: it ignores AWS_ENDPOINT_URL (it went to
    # lake.s3.us-east-1.amazonaws.com); pass endpoint_override as s3.filesystem() does.


def test_emulator_honours_if_none_match(s3, uri):
    """moto refuses a second `If-None-Match: *` PUT with 412; a delta-rs strict commit that loses that PUT fails."""
    client = s3.client()
    key = uri.removeprefix(f"s3://{BUCKET}/") + "/once"
    client.put_object(Bucket=BUCKET, Key=key, Body=b"1", IfNoneMatch="*")
    with pytest.raises(ClientError) as refused:
        client.put_object(Bucket=BUCKET, Key=key, Body=b"2", IfNoneMatch="*")
    assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412
    assert client.get_object(Bucket=BUCKET, Key=key)["Body"].read() == b"1"

    # Both writers listed the log at v1 before either PUT v2 (the gate holds the PUTs until both are there).
    with NoConditionalPutProxy(s3.endpoint_url, strip=False) as transparent:
        options = s3.storage_options(aws_endpoint_url=transparent.endpoint_url)
        a, b = table_at_v1(uri, options)
        gate = transparent.gate(r"/_delta_log/0+2\.json$")
        outcome = strict_race(a, b)
    assert gate.statuses == [200, 412] and not gate.timed_out
    errors = [e for e in outcome.values() if e is not None]
    assert len(errors) == 1 and isinstance(errors[0], CommitFailedError), outcome
    assert str(errors[0]) == "Failed to commit transaction: 0"
    final = DeltaTable(uri, storage_options=s3.storage_options())
    assert final.version() == 2
    assert sorted(final.to_pyarrow_table()["x"].to_pylist()) == [0, 1 if outcome["a"] is None else 2]


def test_sequential_race_is_refused_before_any_put(s3, uri):
    """A sequential race never tests conditional writes: delta-rs lists the log first and refuses without a PUT,
    even through the proxy that strips If-None-Match."""
    with NoConditionalPutProxy(s3.endpoint_url) as proxy:
        a, b = table_at_v1(uri, s3.storage_options(aws_endpoint_url=proxy.endpoint_url))
        write_deltalake(a, rows(1), mode="append", commit_properties=STRICT)
        with pytest.raises(CommitFailedError, match="Failed to commit transaction: 0"):
            write_deltalake(b, rows(2), mode="append", commit_properties=STRICT)
        commit_puts = [r for r in proxy.requests if r.method == "PUT" and r.path.endswith("2.json")]
    assert len(commit_puts) == 1


def test_race_through_the_stripping_proxy_is_not_refused(s3, uri):
    """Through the proxy the store ignores If-None-Match: both strict commits of v2 'succeed', one is lost."""
    with NoConditionalPutProxy(s3.endpoint_url) as proxy:
        options = s3.storage_options(aws_endpoint_url=proxy.endpoint_url)
        a, b = table_at_v1(uri, options)
        gate = proxy.gate(r"/_delta_log/0+2\.json$")
        outcome = strict_race(a, b)
        stripped = [r for r in proxy.requests if r.method == "PUT" and r.path.endswith("00000000000000000002.json")]
    assert outcome == {"a": None, "b": None}
    assert gate.statuses == [200, 200] and not gate.timed_out
    assert [r.stripped for r in stripped] == [{"if-none-match": "*"}] * 2
    final = DeltaTable(uri, storage_options=s3.storage_options())
    assert final.version() == 2
    assert len(final.to_pyarrow_table()) == 2  # v0 empty, v1 one row, v2 one of the two writers' rows


def test_pause_keeps_data_and_serves_requests_sent_meanwhile(s3, uri):
    """SIGSTOP/SIGCONT: requests sent during the pause hang, then are served; nothing stored is lost."""
    options = s3.storage_options()
    DeltaTable.create(uri, SCHEMA, storage_options=options)
    write_deltalake(uri, rows(1), mode="append", storage_options=options)
    fs = s3.filesystem()
    path = uri.removeprefix("s3://") + "/_delta_log/00000000000000000001.json"
    done: dict[str, object] = {}

    def append() -> None:
        write_deltalake(uri, rows(2), mode="append", storage_options=options)
        done["append"] = time.monotonic()

    def read() -> None:
        with fs.open_input_stream(path) as f:
            done["read"] = f.read()

    with s3.paused_for():
        threads = [threading.Thread(target=append), threading.Thread(target=read)]
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        assert done == {} and all(thread.is_alive() for thread in threads)
    for thread in threads:
        thread.join(30)
    assert set(done) == {"append", "read"} and b'"add"' in done["read"]
    final = DeltaTable(uri, storage_options=options)
    assert final.version() == 2 and sorted(final.to_pyarrow_table()["x"].to_pylist()) == [1, 2]


def test_stop_while_paused_leaves_no_process_and_restart_is_empty():
    emulator = S3Emulator()
    try:
        emulator.start()
        port, pid = emulator.port, emulator.process.pid
        emulator.create_bucket("gone")
        emulator.pause()
        emulator.stop()
        assert not os.path.exists(f"/proc/{pid}")
        emulator.start()  # same endpoint, empty store
        assert emulator.port == port and emulator.client().list_buckets()["Buckets"] == []
    finally:
        emulator.close()
    assert emulator.process is None


def test_error_texts_for_a_missing_bucket_and_a_stopped_store(s3):
    options = s3.storage_options()
    with pytest.raises(OSError, match=r"(?s)404 Not Found.*<Code>NoSuchBucket</Code>"):
        DeltaTable.create("s3://no-such-bucket/t", SCHEMA, storage_options=options)
    fs = s3.filesystem()
    assert fs.get_file_info("no-such-bucket/x").type == pafs.FileType.NotFound  # a HEAD: no error at all
    with pytest.raises(OSError, match="AWS Error NO_SUCH_BUCKET during ListObjectsV2 operation"):
        fs.get_file_info(pafs.FileSelector("no-such-bucket/t", recursive=True))

    with S3Emulator() as doomed:
        endpoint = doomed.endpoint_url
        doomed.create_bucket(BUCKET)
        options = doomed.storage_options(max_retries="0")
        write_deltalake("s3://lake/t", rows(1), storage_options=options)
        handle = DeltaTable("s3://lake/t", storage_options=options)
    with pytest.raises(OSError, match=r"(?s)tcp connect error.*Connection refused \(os error 111\)"):
        DeltaTable("s3://lake/t", storage_options=options)
    # An append on an open handle: not an OSError, a misleading DeltaError (and a Rust panic on stderr:
    # "panicked at .../object_store-0.13.2/src/buffered.rs:369:41: Already shut down").
    with pytest.raises(DeltaError, match=r"Failed to parse parquet: External: Generic S3 error: Error performing PUT"):
        write_deltalake(handle, rows(2), mode="append")
    fs = s3.filesystem(endpoint_url=endpoint, retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=1))
    with pytest.raises(OSError, match="AWS Error NETWORK_CONNECTION during HeadObject operation: curlCode: 7"):
        fs.get_file_info("lake/t")


def test_wrong_keys_are_refused_in_authenticated_mode(s3_auth, uri):
    good = s3_auth.storage_options()
    DeltaTable.create(uri, SCHEMA, storage_options=good)
    write_deltalake(uri, rows(1), mode="append", storage_options=good)
    path = uri.removeprefix("s3://")
    assert s3_auth.filesystem().get_file_info(f"{path}/_delta_log").type == pafs.FileType.Directory

    unknown = Credentials("testing", "testing")  # moto's usual dummy keys: no such IAM key
    wrong_secret = Credentials(s3_auth.credentials.access_key_id, "wrong")
    for credentials, code, pyarrow_code in [
        (unknown, "InvalidAccessKeyId", "INVALID_ACCESS_KEY_ID"),
        (wrong_secret, "SignatureDoesNotMatch", "SIGNATURE_DOES_NOT_MATCH"),
    ]:
        bad = s3_auth.storage_options(
            aws_access_key_id=credentials.access_key_id, aws_secret_access_key=credentials.secret_access_key
        )
        with pytest.raises(OSError, match=rf"(?s)403 Forbidden.*<Code>{code}</Code>"):
            DeltaTable(uri, storage_options=bad)
        with pytest.raises(OSError, match=rf"(?s)403 Forbidden.*<Code>{code}</Code>"):
            DeltaTable.create(f"{uri}-other", SCHEMA, storage_options=bad)
        fs = s3_auth.filesystem(credentials)
        with pytest.raises(OSError, match="AWS Error ACCESS_DENIED during HeadObject operation: No response body"):
            fs.get_file_info(f"{path}/_delta_log/00000000000000000000.json")
        with pytest.raises(OSError, match=f"AWS Error {pyarrow_code} during ListObjectsV2 operation"):
            fs.get_file_info(pafs.FileSelector(path, recursive=True))
        with pytest.raises(ClientError, match=code):
            s3_auth.client(credentials=credentials).list_objects_v2(Bucket=BUCKET)


def test_stripping_proxy_in_authenticated_mode_needs_the_keys_to_resign(s3_auth, uri):
    """delta-rs signs If-None-Match: removing it breaks the signature unless the proxy re-signs."""
    with NoConditionalPutProxy(s3_auth.endpoint_url) as proxy:
        with pytest.raises(OSError, match=r"(?s)403 Forbidden.*<Code>SignatureDoesNotMatch</Code>"):
            DeltaTable.create(uri, SCHEMA, storage_options=s3_auth.storage_options(aws_endpoint_url=proxy.endpoint_url))
    with NoConditionalPutProxy(s3_auth.endpoint_url, credentials=s3_auth.credentials) as proxy:
        options = s3_auth.storage_options(aws_endpoint_url=proxy.endpoint_url)
        a, b = table_at_v1(uri, options)
        gate = proxy.gate(r"/_delta_log/0+2\.json$")
        assert strict_race(a, b) == {"a": None, "b": None}
        assert gate.statuses == [200, 200]
        fs = s3_auth.filesystem(endpoint_url=proxy.endpoint_url)  # pyarrow's aws-chunked uploads pass too
        with fs.open_output_stream(f"{uri.removeprefix('s3://')}/blob") as f:
            f.write(b"x" * 100_000)
        with fs.open_input_stream(f"{uri.removeprefix('s3://')}/blob") as f:
            assert f.read() == b"x" * 100_000


def test_boto3_on_env_only(s3, monkeypatch):
    for name, value in s3.env().items():
        monkeypatch.setenv(name, value)
    assert BUCKET in [b["Name"] for b in boto3.client("s3").list_buckets()["Buckets"]]
