"""Suites attached to topics (issue 13 item 1): set/show/delete through the root's file IO, on local and S3 roots;
each bad input refused with one clear error and the root byte-identical (S8.3)."""

from __future__ import annotations

import json

import pytest

from lakelog.cli import main
from lakelog.errors import CorruptRecord, InvalidConfig, InvalidRequest, UnknownTopicOrPartition
from lakelog.quality import read_suite, suite_location, write_suite
from tests.helpers import table_fingerprint
from tests.quality.conftest import ORDERS_SUITE

pytestmark = [pytest.mark.roots("local", "s3"), pytest.mark.usefixtures("gx")]


def cli(capsys, *args: str) -> tuple[int, str, str]:
    code = main([*args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_set_show_delete_round_trip(root, topic, tmp_path, capsys, orders_suite):
    name = topic()
    suite_file = tmp_path / "orders.json"
    suite_file.write_text(orders_suite)
    assert read_suite(root, name) is None  # ungated
    code, out, err = cli(capsys, "quality", "set", "--topic", name, "--suite", str(suite_file), "--mode", "warn", "--root", root)
    assert code == 0, err
    assert "mode warn" in out
    assert suite_location(root, name).exists()

    code, out, err = cli(capsys, "quality", "show", "--topic", name, "--root", root)
    assert code == 0, err
    shown = json.loads(out)
    assert shown["name"] == "orders"
    assert [item["type"] for item in shown["expectations"]] == [item["type"] for item in ORDERS_SUITE["expectations"]]
    assert shown["meta"]["lakelog"]["mode"] == "warn"
    suite = read_suite(root, name)
    assert (suite.name, suite.mode, suite.parse, len(suite.expectations)) == ("orders", "warn", None, 4)

    # Set again: replaced, and the mode falls back to the default.
    write_suite(root, name, orders_suite)
    assert read_suite(root, name).mode == "enforce"

    code, out, err = cli(capsys, "quality", "delete", "--topic", name, "--root", root)
    assert code == 0, err
    assert read_suite(root, name) is None
    code, out, err = cli(capsys, "quality", "delete", "--topic", name, "--root", root)
    assert code == 2 and "INVALID_REQUEST" in err and "no quality suite" in err


def _bad(document: dict) -> str:
    return json.dumps(document)


BAD_SUITES = {
    "not JSON": ('{"name": "orders", "expectations": [', InvalidRequest, "not JSON"),
    "no name": (_bad({"expectations": []}), InvalidRequest, 'needs a "name"'),
    "GX 0.x format": (
        _bad(
            {
                "expectation_suite_name": "orders",
                "expectations": [{"expectation_type": "expect_column_values_to_not_be_null", "kwargs": {"column": "key"}}],
            }
        ),
        InvalidRequest,
        'rename "expectation_suite_name" to "name"',
    ),
    "GX 0.x expectation": (
        _bad({"name": "s", "expectations": [{"expectation_type": "expect_column_values_to_not_be_null", "kwargs": {}}]}),
        InvalidRequest,
        "lakelog reads GX 1.x's",
    ),
    "unknown expectation": (
        _bad({"name": "s", "expectations": [{"type": "expect_the_moon", "kwargs": {}}]}),
        InvalidRequest,
        "expect_the_moon not found",
    ),
    "kwargs GX refuses": (
        _bad({"name": "s", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {}}]}),
        InvalidRequest,
        "not valid GX",
    ),
    "column that does not exist": (
        _bad(
            {"name": "s", "expectations": [{"type": "expect_column_values_to_not_be_null", "kwargs": {"column": "amount_cents"}}]}
        ),
        InvalidRequest,
        "'amount_cents', which does not exist",
    ),
    "unknown mode": (
        _bad({"name": "s", "expectations": [], "meta": {"lakelog": {"mode": "maybe"}}}),
        InvalidConfig,
        "not one of enforce, warn, dead-letter",
    ),
    "parse not module:function": (
        _bad({"name": "s", "expectations": [], "meta": {"lakelog": {"parse": "nocolon"}}}),
        InvalidConfig,
        "module:function",
    ),
}


@pytest.mark.parametrize("case", list(BAD_SUITES))
def test_bad_suite_is_refused_and_nothing_is_stored(root, topic, case, orders_suite, tmp_path, capsys):
    name = topic()
    text, error, words = BAD_SUITES[case]
    before = table_fingerprint(root)
    with pytest.raises(error, match=words):
        write_suite(root, name, text)
    assert table_fingerprint(root) == before
    suite_file = tmp_path / "bad.json"
    suite_file.write_text(text)
    code, out, err = cli(capsys, "quality", "set", "--topic", name, "--suite", str(suite_file), "--root", root)
    assert code == 2 and out == ""
    assert err.startswith(f"lakelog: {error('x').error.name()}: ") and words in err
    assert len(err.strip().splitlines()) == 1  # one line, no GX traceback
    assert table_fingerprint(root) == before
    # A replacement that is refused keeps the suite in place, byte for byte.
    write_suite(root, name, orders_suite)
    before = table_fingerprint(root)
    with pytest.raises(error):
        write_suite(root, name, text)
    assert table_fingerprint(root) == before
    assert read_suite(root, name).name == "orders"


def test_gate_on_a_topic_that_does_not_exist_is_refused(root, topic, tmp_path, capsys, orders_suite):
    topic()
    suite_file = tmp_path / "orders.json"
    suite_file.write_text(orders_suite)
    before = table_fingerprint(root)
    with pytest.raises(UnknownTopicOrPartition, match="topic nope does not exist"):
        write_suite(root, "nope", orders_suite)
    code, out, err = cli(capsys, "quality", "set", "--topic", "nope", "--suite", str(suite_file), "--root", root)
    assert code == 2 and err.startswith("lakelog: UNKNOWN_TOPIC_OR_PART: topic nope does not exist")
    assert table_fingerprint(root) == before


def test_a_suite_cut_short_or_edited_in_place_is_refused(root, topic, orders_suite):
    name = topic()
    write_suite(root, name, orders_suite)
    location = suite_location(root, name)
    whole = location.io.read(location.uri)
    location.io.write(location.uri, whole[: len(whole) // 2])
    with pytest.raises(CorruptRecord, match="incomplete"):
        read_suite(root, name)
    location.io.write(location.uri, whole.replace(b"10000000", b"20000000"))
    with pytest.raises(CorruptRecord, match="does not match its digest"):
        read_suite(root, name)
    location.io.write(location.uri, whole)
    assert read_suite(root, name).name == "orders"


def test_S11_3_a_dead_letter_suite_creates_the_dlq_topic_once(root, topic, orders_suite):
    """Setting a dead-letter suite creates `<topic>.dlq` with the topic's partitions and config, before the suite is
    stored; setting it again (or calling ensure_dlq_topic again) changes nothing."""
    from lakelog.log import list_topics, topic_config
    from lakelog.quality import dlq_topic, ensure_dlq_topic

    name = topic({"retention.ms": 3_600_000}, partitions=3)
    write_suite(root, name, orders_suite, mode="warn")
    assert dlq_topic(name) not in list_topics(root)
    write_suite(root, name, orders_suite, mode="dead-letter")
    dlq = topic_config(root, dlq_topic(name))
    assert (dlq.num_partitions, dlq.retention_ms) == (3, 3_600_000)
    before = table_fingerprint(f"{root}/topics/{dlq_topic(name)}/0")
    write_suite(root, name, orders_suite, mode="dead-letter")
    ensure_dlq_topic(root, name)
    assert table_fingerprint(f"{root}/topics/{dlq_topic(name)}/0") == before
    with pytest.raises(UnknownTopicOrPartition):
        ensure_dlq_topic(root, "missing")
