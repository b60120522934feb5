"""The store check when an S3 root is opened (S12.2), against the S3 emulator: keys that may not write, and the
process's memory of verdicts, which must never carry a check over to a store or a root it does not cover.

Stores that ignore conditional puts are the emulator behind tests/s3proxy.py's NoConditionalPutProxy; keys that
may not write are an IAM user of an authenticated emulator whose policy allows reads only (moto evaluates the
policy and answers a PUT with 403 AccessDenied).
"""

from __future__ import annotations

import json
import logging
import uuid

import pytest
from s3emulator import Credentials, S3Emulator
from s3proxy import NoConditionalPutProxy

from lakelog.errors import InvalidConfig
from lakelog.log import create_topic, list_topics
from lakelog.store import check_root

BUCKET = "lakelog-store-check"


def every_object(emulator: S3Emulator) -> list[tuple[str, str]]:
    """(bucket, key) of every object in the emulator (listed with its own, allow-all keys)."""
    client = emulator.client()
    found = []
    for bucket in client.list_buckets()["Buckets"]:
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket["Name"]):
            found += [(bucket["Name"], item["Key"]) for item in page.get("Contents", [])]
    return sorted(found)


@pytest.fixture(scope="module")
def authenticated():
    """An authenticated emulator with a bucket holding one topic under `lake`, and a reader: keys that may read
    the whole bucket and write only under `writable/`."""
    with S3Emulator(authenticated=True) as emulator:
        emulator.create_bucket(BUCKET)
        create_topic(check_root(f"s3://{BUCKET}/lake", options(emulator, emulator.credentials)), "orders", 1)
        iam = emulator.client("iam")
        iam.create_user(UserName="reader")
        policy = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"], "Resource": "*"},
                {
                    "Effect": "Allow",
                    "Action": ["s3:PutObject", "s3:DeleteObject"],
                    "Resource": f"arn:aws:s3:::{BUCKET}/writable/*",
                },
            ],
        }
        iam.put_user_policy(UserName="reader", PolicyName="reads-and-one-prefix", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        yield emulator, Credentials(key["AccessKeyId"], key["SecretAccessKey"])


def options(emulator: S3Emulator, credentials: Credentials, endpoint_url: str | None = None) -> dict[str, str]:
    return {
        "endpoint_url": endpoint_url or emulator.endpoint_url,
        "allow_http": "true",
        "region": credentials.region,
        "access_key_id": credentials.access_key_id,
        "secret_access_key": credentials.secret_access_key,
    }


def test_S12_2_keys_that_may_not_write_open_the_root_unchecked_with_a_warning(authenticated, caplog):
    """A reader (a Spark job, lakelog sql) needs no commit: its root opens, with a WARNING that the store's
    conditional puts were not checked, and nothing is written."""
    emulator, reader = authenticated
    before = every_object(emulator)
    caplog.set_level(logging.INFO, logger="lakelog.store.io.root")
    location = check_root(f"s3://{BUCKET}/lake", options(emulator, reader))
    [warning] = [record for record in caplog.records if record.levelno >= logging.WARNING]
    assert warning.levelno == logging.WARNING
    assert f"s3://{BUCKET}/lake" in warning.getMessage() and "not checked" in warning.getMessage()
    assert "honours conditional puts" not in caplog.text  # an unchecked store is not reported as checked
    assert list_topics(location) == ["orders"]  # the reader reads
    assert every_object(emulator) == before


def test_S12_2_a_root_opened_unchecked_does_not_spare_another_root_of_the_bucket_its_check(authenticated):
    """Write permission is granted per prefix: that the reader's keys may not write under `lake` says nothing
    about `writable`, where they may, and whose commits go to a store that ignores conditional puts here."""
    emulator, reader = authenticated
    with NoConditionalPutProxy(emulator.endpoint_url, credentials=reader) as proxy:
        settings = options(emulator, reader, proxy.endpoint_url)
        check_root(f"s3://{BUCKET}/lake", settings)  # 403 AccessDenied: opened unchecked
        with pytest.raises(InvalidConfig, match="conditional put"):
            check_root(f"s3://{BUCKET}/writable/lake", settings)
        # The verdict on `lake` stands (no probe, so no refusal), and it is not a pass for the bucket.
        check_root(f"s3://{BUCKET}/lake", settings)
        with pytest.raises(InvalidConfig, match="conditional put"):
            check_root(f"s3://{BUCKET}/writable/other", settings)


def test_S12_2_a_verdict_holds_for_its_endpoint_only(s3):
    """One URI reached through two endpoints: refused through the store that ignores conditional puts, accepted
    on the store itself, and refused again through the first: neither answer is taken for the other endpoint."""
    uri = f"s3://{s3.create_bucket(f'c{uuid.uuid4().hex[:16]}').removeprefix('s3://')}/lake"
    direct = options(s3, s3.credentials)
    with NoConditionalPutProxy(s3.endpoint_url) as proxy:
        through_proxy = {**direct, "endpoint_url": proxy.endpoint_url}
        with pytest.raises(InvalidConfig, match="conditional put"):
            check_root(uri, through_proxy)
        assert check_root(uri, direct).uri == uri
        with pytest.raises(InvalidConfig, match="conditional put"):
            check_root(uri, through_proxy)
        assert sum(1 for request in proxy.requests if request.method == "PUT") == 4  # two probes, each of two PUTs


def test_S12_2_the_aws_endpoint_variable_is_the_store_checked(s3, monkeypatch):
    """delta-rs commits to the store named by AWS_ENDPOINT (object_store's alias of AWS_ENDPOINT_URL): the probe
    goes there too, and a store there that ignores conditional puts is refused."""
    with NoConditionalPutProxy(s3.endpoint_url) as proxy:
        monkeypatch.delenv("AWS_ENDPOINT_URL")
        monkeypatch.setenv("AWS_ENDPOINT", proxy.endpoint_url)
        with pytest.raises(InvalidConfig, match="conditional put"):
            check_root(f"s3://lakelog-tests/aws-endpoint-{uuid.uuid4().hex[:8]}")
        assert any(request.stripped for request in proxy.requests)
