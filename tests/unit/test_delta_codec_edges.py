"""Edges of the commit codec and of the S3 settings that the round-trip tests do not reach (pure: no I/O)."""

from __future__ import annotations

import pytest

from lakelog.errors import InvalidConfig
from lakelog.store.delta.actions import COMMIT_ID_KEY, MalformedCommit, commit_id_of, decode_commit, remove_action
from lakelog.store.io.s3_settings import s3_settings


def test_a_commit_files_blank_lines_are_skipped_and_a_line_that_is_no_object_is_malformed():
    assert decode_commit(b'{"txn": {"appId": "a", "version": 1}}\n\n  \n') == [{"txn": {"appId": "a", "version": 1}}]
    with pytest.raises(MalformedCommit, match="line 2: not an action"):
        decode_commit(b'{"txn": {}}\n[1, 2]\n', "00.json")
    with pytest.raises(MalformedCommit, match="line 1"):
        decode_commit(b"{not json\n")


def test_the_commit_id_is_read_from_commit_info_only():
    assert commit_id_of([{"add": {"path": "p"}}, {"commitInfo": {COMMIT_ID_KEY: "c1"}}]) == "c1"
    assert commit_id_of([{"add": {"path": "p"}}, {"remove": {"path": "q"}}]) is None  # delta-rs's or no commitInfo
    assert commit_id_of([{"commitInfo": {COMMIT_ID_KEY: 7}}]) is None


def test_a_remove_without_its_size_says_so():
    body = remove_action("part-1.parquet", 5, True, None)["remove"]
    assert "size" not in body and body["extendedFileMetadata"] is False
    assert remove_action("part-1.parquet", 5, False, 10)["remove"]["size"] == 10


def test_s3_settings_take_the_default_region_drop_a_none_option_and_refuse_bad_values():
    settings = s3_settings({"endpoint_url": None}, {"AWS_DEFAULT_REGION": "eu-west-1", "AWS_ENDPOINT_URL": "https://x"})
    assert settings["region"] == "eu-west-1" and "endpoint_url" not in settings
    with pytest.raises(InvalidConfig, match="max_retries takes a count"):
        s3_settings({"max_retries": "many"}, {})
    with pytest.raises(InvalidConfig, match="allow_http takes true or false"):
        s3_settings({"allow_http": "maybe"}, {})
