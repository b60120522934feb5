"""Secrets stay out of error texts, reprs and log lines (finding 9: a secret of the wrong type was echoed in the
InvalidConfig text, and `repr()` of a client's config held the secret in clear)."""

from __future__ import annotations

import logging

import pytest

from lakelog import config
from lakelog.config.secrets import REDACTED, RedactingFilter, is_secret, redact
from lakelog.errors import InvalidConfig

SECRET = "sekrit-0123456789abcdef"


@pytest.mark.parametrize(
    "key, value",
    [
        ("lakelog.storage.secret_access_key", [SECRET]),
        ("lakelog.storage.session_token", {"token": SECRET}),
        ("lakelog.storage.access_key_id", (SECRET,)),
        ("sasl.password", [SECRET]),
        ("ssl.key.password", {SECRET: 1}),
    ],
)
def test_a_secret_of_the_wrong_type_is_refused_without_its_value(tmp_path, key, value):
    """Finding 9: the InvalidConfig text names the key, never the value."""
    with pytest.raises(InvalidConfig) as refused:
        config.load("producer", {"lakelog.root": str(tmp_path), key: value})
    assert key in str(refused.value) and SECRET not in str(refused.value)
    assert refused.value.key == key


def test_a_wrong_value_of_a_key_that_is_no_secret_is_still_shown(tmp_path):
    with pytest.raises(InvalidConfig, match=r"\['fast'\]"):
        config.load("producer", {"lakelog.root": str(tmp_path), "client.id": ["fast"]})


def test_the_repr_of_a_config_holds_no_secret_in_clear(tmp_path):
    """Finding 9: `repr()` of a client's config shows secret keys with their values redacted, the rest as they are."""
    loaded = config.load(
        "producer",
        {
            "lakelog.root": str(tmp_path),
            "lakelog.storage.secret_access_key": SECRET,
            "lakelog.storage.session_token": SECRET + "-token",
            "client.id": "shown-client",
        },
    )
    assert loaded["lakelog.storage.secret_access_key"] == SECRET  # the value itself is kept for the store
    for text in (repr(loaded), str(loaded)):
        assert SECRET not in text and REDACTED in text and "shown-client" in text


def test_secret_keys_are_told_apart():
    for key in ("lakelog.storage.secret_access_key", "sasl.password", "ssl.key.pem", "session_token"):
        assert is_secret(key), key
    for key in ("client.id", "lakelog.root", "linger.ms", "lakelog.storage.endpoint_url", "key.serializer"):
        assert not is_secret(key), key


def test_request_logs_lose_tokens_signatures_and_credentials():
    """botocore's DEBUG lines, as they print each request (finding 9)."""
    lines = [
        "Sending http request: <AWSPreparedRequest headers={'X-Amz-Security-Token': b'" + SECRET + "', "
        "'Authorization': b'AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20260101/us-east-1/s3/aws4_request, "
        "SignedHeaders=host, Signature=" + "ab" * 32 + "'}>",
        "CanonicalRequest:\nPUT\n/lake\n\nhost:127.0.0.1\nx-amz-security-token:" + SECRET + "\n",
        "Signature:\n" + "cd" * 32,
        "https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIDEXAMPLE%2F2026&X-Amz-Signature=" + "ef" * 32 + "&x=1",
    ]
    for line in lines:
        shown = redact(line)
        for secret in (SECRET, "AKIDEXAMPLE", "ab" * 32, "cd" * 32, "ef" * 32):
            assert secret not in shown, shown
        assert REDACTED in shown
    assert redact("a line naming no secret") == "a line naming no secret"
    assert redact(f"value {SECRET}!", [SECRET]) == f"value {REDACTED}!"


def test_the_filter_redacts_a_record_s_arguments_and_traceback():
    record = logging.LogRecord("botocore.auth", logging.DEBUG, __file__, 1, "token %s", (SECRET,), None)
    try:
        raise ValueError(SECRET)
    except ValueError as error:
        record.exc_info = (type(error), error, error.__traceback__)
    assert RedactingFilter([SECRET]).filter(record)
    assert logging.Formatter().format(record).count(SECRET) == 0
