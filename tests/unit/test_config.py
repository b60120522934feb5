"""The one config loader (lakelog/config.py) and the lakelog/conf/ defaults it reads."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import lakelog
from lakelog import config
from lakelog.errors import InvalidConfig, InvalidTopic

NAME_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
# Keys typed as a root folder have no default on purpose: every client must name its root.
NO_DEFAULT = {"lakelog.root", "logger"}


def refused(kind: str, key: str, value) -> InvalidConfig:
    with pytest.raises(InvalidConfig) as raised:
        config.load(kind, {key: value})
    assert raised.value.key == key
    assert key in str(raised.value)
    return raised.value


# -- conf/ defaults --


def test_the_defaults_are_the_top_level_conf_folder():
    """The repository keeps one copy of the defaults, in conf/; the package reads that copy (lakelog/conf links to it)."""
    repository = Path(lakelog.__file__).resolve().parent.parent
    top_level = sorted(path.name for path in (repository / "conf").glob("*.properties"))
    assert top_level == sorted(f"{kind}.properties" for kind in config.KINDS)
    for kind in config.KINDS:
        read = Path(str(config.conf_dir() / f"{kind}.properties")).resolve()
        assert read == (repository / "conf" / f"{kind}.properties").resolve()


@pytest.mark.parametrize("kind", config.KINDS)
def test_defaults_load_and_validate(kind):
    loaded = config.load(kind)
    assert loaded.kind == kind
    raw = config.read_properties(config.conf_dir() / f"{kind}.properties")
    assert set(loaded) == set(raw)
    for key, value in loaded.items():
        assert value == config.SCHEMA[kind][key].coerce(key, raw[key])


@pytest.mark.parametrize("kind", config.KINDS)
def test_every_schema_key_has_a_default_and_every_default_a_schema_key(kind):
    raw = config.read_properties(config.conf_dir() / f"{kind}.properties")
    assert set(raw) == set(config.SCHEMA[kind]) - NO_DEFAULT


def test_kinds_match_schema():
    assert set(config.KINDS) == set(config.SCHEMA)


def test_known_default_values():
    assert config.load("producer")["enable.idempotence"] is True
    assert config.load("producer")["transactional.id"] is None
    assert config.load("producer")["transaction.timeout.ms"] == 60_000
    assert config.load("consumer")["isolation.level"] == "read_committed"
    assert config.load("topic")["check.expected.offsets"] is False
    assert config.load("topic")["producer.id.expiration.ms"] == 86_400_000
    assert config.load("broker")["transaction.max.timeout.ms"] == 900_000


def test_overrides_are_coerced_and_config_is_read_only():
    loaded = config.load("producer", {"linger.ms": "7", "enable.idempotence": "FALSE", "lakelog.root": "/tmp/x"})
    assert loaded["linger.ms"] == 7
    assert loaded["enable.idempotence"] is False
    assert loaded["lakelog.root"] == "/tmp/x"
    with pytest.raises(TypeError):
        loaded["linger.ms"] = 8  # type: ignore[index]
    assert config.load("producer")["linger.ms"] == 5


# -- refusals name the key --


@pytest.mark.parametrize("kind", config.KINDS)
def test_unknown_key_refused_naming_it(kind):
    refused(kind, "no.such.key", "1")


def test_unknown_kind_and_non_mapping_refused():
    with pytest.raises(InvalidConfig):
        config.load("nonsense")
    with pytest.raises(InvalidConfig):
        config.load("producer", [("linger.ms", 1)])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "kind, key, value",
    [
        ("producer", "linger.ms", "abc"),
        ("producer", "linger.ms", "1e3x"),
        ("producer", "linger.ms", "nan"),
        ("producer", "linger.ms", True),
        ("producer", "linger.ms", None),
        ("producer", "enable.idempotence", "yes"),
        ("producer", "enable.idempotence", 1),
        ("producer", "client.id", 5),
        ("producer", "lakelog.root", 5),
        ("producer", "lakelog.root", ""),
        ("producer", "acks", "1001"),
        ("producer", "acks", "none"),
        ("producer", "compression.type", "brotli"),
        ("consumer", "isolation.level", "READ_COMMITTED"),
        ("consumer", "max.poll.records", 0),
        ("topic", "check.expected.offsets", "1"),
        ("topic", "num.partitions", 0),
        ("topic", "num.partitions", 100_001),
        ("topic", "checkpoint.interval.commits", 0),
        ("topic", "producer.id.expiration.ms", 0),
        ("topic", "segment.files", 1),
        ("topic", "delete.retention.ms", -1),
        ("broker", "transaction.max.timeout.ms", 0),
        ("producer", "transaction.timeout.ms", 999),
    ],
)
def test_wrong_type_or_out_of_range_refused(kind, key, value):
    refused(kind, key, value)


@pytest.mark.parametrize(
    "key, low, high",
    [("linger.ms", 0, 900_000), ("retry.backoff.ms", 1, 300_000), ("message.max.bytes", 1000, 1_000_000_000)],
)
def test_range_bounds_are_inclusive(key, low, high):
    assert config.load("producer", {key: low})[key] == low
    assert config.load("producer", {key: str(high)})[key] == high
    refused("producer", key, low - 1)
    refused("producer", key, high + 1)


@given(value=st.integers(min_value=-(2**40), max_value=2**40))
def test_int_range_property(value):
    key = "linger.ms"
    if 0 <= value <= 900_000:
        assert config.load("producer", {key: value})[key] == value
    else:
        refused("producer", key, value)


def test_bad_properties_line_refused(tmp_path):
    path = tmp_path / "x.properties"
    path.write_text("# comment\n! also comment\n\na = 1\nno separator here\n")
    with pytest.raises(InvalidConfig) as raised:
        config.read_properties(path)
    assert "x.properties:5" in str(raised.value)


def test_properties_parse_trims_and_keeps_empty_values(tmp_path):
    path = tmp_path / "x.properties"
    path.write_text("a = 1\nb=\nc=x=y\n")
    assert config.read_properties(path) == {"a": "1", "b": "", "c": "x=y"}


def test_bad_default_file_refused_naming_key(tmp_path, monkeypatch):
    (tmp_path / "topic.properties").write_text("num.partitions=zero\n")
    monkeypatch.setenv(config.CONF_DIR_ENV, str(tmp_path))
    monkeypatch.setattr(config.loader, "_defaults_cache", {})
    with pytest.raises(InvalidConfig) as raised:
        config.load("topic")
    assert raised.value.key == "num.partitions"


def test_defaults_are_package_data_and_the_conf_dir_variable_overrides_them(tmp_path, monkeypatch):
    monkeypatch.delenv(config.CONF_DIR_ENV, raising=False)
    packaged = config.conf_dir()
    assert str(packaged) == str(Path(lakelog.__file__).parent / "conf")
    packaged_partitions = config.load("topic")["num.partitions"]
    shutil.copytree(packaged, tmp_path / "conf")
    with open(tmp_path / "conf" / "topic.properties", "a") as properties:
        properties.write(f"num.partitions={packaged_partitions + 6}\n")
    monkeypatch.setenv(config.CONF_DIR_ENV, str(tmp_path / "conf"))
    assert config.load("topic")["num.partitions"] == packaged_partitions + 6
    assert config.load("topic", {"num.partitions": 2})["num.partitions"] == 2  # the caller's value still wins
    monkeypatch.delenv(config.CONF_DIR_ENV)
    assert config.load("topic")["num.partitions"] == packaged_partitions  # cached by folder: no stale defaults


# -- topic names and ids --


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "a/b", "../escape", "a b", " a", "a\tb", "tópico", "a\\b", "a:b"])
def test_illegal_topic_name_refused(name):
    with pytest.raises(InvalidTopic):
        config.validate_name(name)


@pytest.mark.parametrize("name", ["topic\n", "a" * 248 + "\n"])
def test_topic_name_with_trailing_newline_refused(name):
    with pytest.raises(InvalidTopic):
        config.validate_name(name)


@pytest.mark.parametrize("name", [None, 5, b"topic"])
def test_non_string_topic_name_refused(name):
    with pytest.raises(InvalidTopic):
        config.validate_name(name)


def test_249_legal_characters_accepted():
    name = (NAME_ALPHABET * 4)[:249]
    assert len(name) == 249
    assert config.validate_name(name) == name


@given(name=st.text(alphabet=NAME_ALPHABET, min_size=1, max_size=249).filter(lambda n: n not in (".", "..")))
def test_any_legal_name_accepted(name):
    assert config.validate_name(name) == name
    assert config.load("producer", {"transactional.id": name})["transactional.id"] == name


@given(name=st.text(st.characters(), min_size=1, max_size=20).filter(lambda n: any(c not in NAME_ALPHABET for c in n)))
def test_any_name_with_an_illegal_character_refused(name):
    with pytest.raises(InvalidTopic):
        config.validate_name(name)


@pytest.mark.parametrize("key", ["transactional.id"])
@pytest.mark.parametrize("name", [".", "..", "a" * 250, "a/b", "../x", "a b"])
def test_illegal_transactional_id_refused_naming_key(key, name):
    error = refused("producer", key, name)
    assert not isinstance(error, InvalidTopic)


@pytest.mark.parametrize("kind, key", [("consumer", "group.id"), ("consumer", "group.instance.id")])
def test_illegal_group_ids_refused_naming_key(kind, key):
    refused(kind, key, "a/b")
    refused(kind, key, "a" * 250)


def test_empty_id_means_unset_but_empty_name_is_refused():
    """In conf, `transactional.id=` is the documented "no transactions"; as a name, '' is illegal."""
    assert config.load("producer", {"transactional.id": ""})["transactional.id"] is None
    with pytest.raises(InvalidConfig) as raised:
        config.validate_name("", what="transactional.id")
    assert raised.value.key == "transactional.id"


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_logger_takes_a_logging_logger_as_confluent_kafka_does(kind):
    logger = logging.getLogger("app.lakelog")
    assert config.load(kind, {"logger": logger})["logger"] is logger
    adapter = logging.LoggerAdapter(logger, {"task": "t1"})
    assert config.load(kind, {"logger": adapter})["logger"] is adapter
    assert "logger" not in config.load(kind)
    assert "logging.Logger" in str(refused(kind, "logger", "app.lakelog"))
