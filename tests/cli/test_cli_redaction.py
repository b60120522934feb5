"""`--log-level DEBUG` prints no credential (finding 9: botocore's and urllib3's DEBUG lines showed the session token
of every request, three times per `topics list`)."""

from __future__ import annotations

from lakelog.log import create_topic
from lakelog.store import initialise_root

TOKEN = "sekrit-session-token-0123456789"


def test_a_debug_run_against_s3_prints_no_token_signature_or_secret(lakelog, s3, s3_root):
    initialise_root(s3_root)
    create_topic(s3_root, "orders", 1)
    secret = s3.env()["AWS_SECRET_ACCESS_KEY"]
    run = lakelog("topics", "list", "--root", s3_root, "--log-level", "DEBUG", env={"AWS_SESSION_TOKEN": TOKEN})
    assert run.returncode == 0, run.stderr
    assert "orders" in run.stdout
    assert "botocore" in run.stderr and "x-amz-security-token" in run.stderr.lower()  # the lines are there
    assert TOKEN not in run.stderr and secret not in run.stderr
    assert "Signature=" not in run.stderr.replace("Signature=<redacted>", "")
