"""How opening an S3 root decides whether its store can be trusted without a probe (S12.2, lakelog.store.io.root).

The conditional-put probe signs its requests, so without static keys there is nothing to probe with: the
decision is made on the settings alone. These tests run with no network at all (every connection attempt
fails the test), so what they show is the decision, not what a store answered.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid

import pytest

from lakelog.errors import InvalidConfig
from lakelog.store import Location, check_root
from lakelog.store.io.fileio import s3_settings
from lakelog.store.io.root import TRUSTED, verify_conditional_put


class NetworkUsed(AssertionError):
    pass


@pytest.fixture
def no_network(monkeypatch):
    """No AWS_* settings from the environment, and any attempt to reach a host fails the test."""
    for variable in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(variable)

    def refuse(*args, **kwargs):
        raise NetworkUsed(f"the decision reached for the network: {args!r}")

    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket.socket, "connect", refuse)


def fresh_root() -> str:
    """A root in a bucket no other test opened: the process's cache of verdicts has nothing for it."""
    return f"s3://b{uuid.uuid4().hex[:16]}/lake"


def test_S12_2_without_keys_or_endpoint_the_root_is_trusted_as_aws_s3_without_a_probe(no_network, caplog):
    caplog.set_level(logging.INFO, logger="lakelog.store.io.root")
    root = fresh_root()
    assert verify_conditional_put(Location.of(root)) == TRUSTED
    assert check_root(root).uri == root
    assert "no static keys" in caplog.text and "trusting AWS S3" in caplog.text


@pytest.mark.parametrize(
    ("environment", "options"),
    [
        ({}, {"endpoint_url": "https://minio.example:9000"}),
        ({"AWS_ENDPOINT_URL": "https://minio.example:9000"}, {}),
        # delta-rs commits to AWS_ENDPOINT too (object_store's alias): lakelog must not take that store for AWS S3.
        ({"AWS_ENDPOINT": "https://minio.example:9000"}, {}),
    ],
    ids=["option", "AWS_ENDPOINT_URL", "AWS_ENDPOINT"],
)
def test_S12_2_an_endpoint_other_than_aws_without_keys_is_refused(no_network, monkeypatch, environment, options):
    for variable, value in environment.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidConfig, match="cannot check that https://minio.example:9000 honours conditional puts") as refused:
        check_root(fresh_root(), options)
    assert refused.value.key == "lakelog.storage.access_key_id"


def test_an_explicit_endpoint_wins_over_the_aws_endpoint_alias(no_network):
    settings = s3_settings({"endpoint_url": "https://chosen.example"}, {"AWS_ENDPOINT": "https://other.example"})
    assert settings["endpoint_url"] == "https://chosen.example"
    assert s3_settings(None, {"AWS_ENDPOINT": "https://other.example"})["endpoint_url"] == "https://other.example"
