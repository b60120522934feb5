"""The one config loader: Kafka-named keys, typed and validated, defaults from `lakelog/conf/`.

`load("producer", {...})` returns a frozen `Config` holding every key of that kind
(defaults from `lakelog/conf/producer.properties`, package data, overlaid by the caller's values). An
unknown key, a value of the wrong type or out of range raises `InvalidConfig`
naming the key, before anything touches a table.
"""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from lakelog import config_keys
from lakelog.errors import InvalidConfig, InvalidType, KafkaError

logger = logging.getLogger(__name__)

CONF_DIR_ENV = "LAKELOG_CONF_DIR"
KINDS = ("producer", "consumer", "admin", "topic", "broker")
# The kinds a confluent-kafka program configures with librdkafka's keys (lakelog.config_keys).
CLIENT_KINDS = ("producer", "consumer", "admin")
NAME_PATTERN = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_NAME_LENGTH = 249


@dataclass(frozen=True)
class Key:
    """One config key: how to parse it and what range is legal."""

    parse: Callable[[str, Any], Any]
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] | None = None

    def coerce(self, name: str, raw: Any) -> Any:
        value = self.parse(name, raw)
        # librdkafka's wording, so a handler ported from confluent-kafka matches it.
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            low, high = ("" if bound is None else f"{bound:.0f}" for bound in (self.low, self.high))
            raise InvalidConfig(f'Configuration property "{name}" value {value} is outside allowed range {low}..{high}', key=name)
        if self.choices is not None and value not in self.choices:
            raise InvalidConfig(
                f'Invalid value "{raw}" for configuration property "{name}": one of {", ".join(self.choices)}', key=name
            )
        return value


def _int(name: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise InvalidConfig(f"config {name} takes an integer, not {raw!r}", key=name)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
        return int(raw)
    raise InvalidConfig(f"config {name} takes an integer, not {raw!r}", key=name)


def _milliseconds(name: str, raw: Any) -> int | float:
    """librdkafka's float milliseconds (`linger.ms`): an int stays an int, a fraction is kept."""
    if isinstance(raw, float) and math.isfinite(raw):
        return raw
    if isinstance(raw, str) and not re.fullmatch(r"-?\d+", raw.strip()):
        try:
            value = float(raw)
        except ValueError:
            value = math.nan
        if math.isfinite(value):
            return value
    return _int(name, raw)


def _bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise InvalidConfig(f"config {name} takes true or false, not {raw!r}", key=name)


def _str(name: str, raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    raise InvalidConfig(f"config {name} takes a string, not {raw!r}", key=name)


def _optional_name(name: str, raw: Any) -> str | None:
    """An id that, like a topic name, is 1-249 of [a-zA-Z0-9._-]; empty means unset."""
    value = _str(name, raw)
    if value == "":
        return None
    validate_name(value, what=name)
    return value


def _root(name: str, raw: Any) -> Any:
    from lakelog.store.fileio import Location

    if isinstance(raw, Location):
        return raw
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    value = _str(name, raw)
    if not value:
        raise InvalidConfig(f"config {name} must name a root folder", key=name)
    return value


CLEANUP_POLICIES = ("delete", "compact")


def _cleanup_policy(name: str, raw: Any) -> str:
    """Kafka's `cleanup.policy`: a list of delete and compact, kept as given (comma-joined, spaces dropped), as Kafka
    keeps it; an empty list is a policy too (neither: records stay until deleted by hand)."""
    policies = [part.strip() for part in _str(name, raw).split(",") if part.strip()]
    if any(policy not in CLEANUP_POLICIES for policy in policies):
        raise InvalidConfig(f"config {name}={raw!r} must list delete, compact, both or neither", key=name)
    return ",".join(policies)


def validate_name(value: Any, *, what: str = "topic") -> str:
    """Check a topic name or id: 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'."""
    from lakelog.errors import InvalidTopic

    error = InvalidTopic if what == "topic" else InvalidConfig
    if not isinstance(value, str):
        raise error(f"{what} must be a string, not {type(value).__name__}", key=what)
    if value in ("", ".", ".."):
        raise error(f"{what} {value!r} is not a legal name", key=what)
    if len(value) > MAX_NAME_LENGTH:
        raise error(f"{what} is {len(value)} characters long; the limit is {MAX_NAME_LENGTH}", key=what)
    if not NAME_PATTERN.fullmatch(value):
        raise error(f"{what} {value!r} may hold only ASCII letters, digits, '.', '_' and '-'", key=what)
    return value


def _acks(name: str, raw: Any) -> int:
    """librdkafka's `acks`: all, or -1 (all), 0, 1 ... 1000 broker acks, as an int or a string; kept as an int.

    Every lakelog write is a Delta commit, as durable as acks=all: a smaller value is honoured by doing more."""
    if isinstance(raw, str) and raw.strip().lower() == "all":
        return -1
    return _int(name, raw)


def _logger(name: str, raw: Any) -> logging.Logger | logging.LoggerAdapter:
    """confluent-kafka's `logger`: the client's log lines go to this logger instead of lakelog's module loggers."""
    if isinstance(raw, (logging.Logger, logging.LoggerAdapter)):
        return raw
    raise InvalidConfig(f"config {name} takes a logging.Logger, not {raw!r}", key=name)


INT = Key(_int)
NON_NEGATIVE = Key(_int, low=0)
POSITIVE = Key(_int, low=1)
BOOL = Key(_bool)
STRING = Key(_str)
OPTIONAL_ID = Key(_optional_name)
ROOT = Key(_root)
LOGGER = Key(_logger)
# Keys that have no default in lakelog/conf/ (a properties file cannot hold their values).
NO_DEFAULT = frozenset({"logger"})
COMPRESSION = Key(_str, choices=("none", "snappy", "gzip", "lz4", "zstd"))
# retry.backoff.ms and retry.backoff.max.ms (KIP-580); together also checked by `_check_together`.
BACKOFF = Key(_int, low=1, high=300_000)

SCHEMA: dict[str, dict[str, Key]] = {
    "producer": {
        "lakelog.root": ROOT,
        "logger": LOGGER,
        "client.id": STRING,
        "enable.idempotence": BOOL,
        "acks": Key(_acks, low=-1, high=1000),
        "linger.ms": Key(_milliseconds, low=0, high=900_000),
        "batch.size": Key(_int, low=1, high=2_147_483_647),
        "batch.num.messages": Key(_int, low=1, high=100_000_000),
        "message.max.bytes": Key(_int, low=1000, high=1_000_000_000),
        "partitioner": Key(
            _str, choices=("consistent_random", "consistent", "random", "murmur2", "murmur2_random", "fnv1a", "fnv1a_random")
        ),
        "compression.type": COMPRESSION,
        "retries": NON_NEGATIVE,
        "retry.backoff.ms": BACKOFF,
        "retry.backoff.max.ms": BACKOFF,
        "message.timeout.ms": NON_NEGATIVE,
        "transactional.id": OPTIONAL_ID,
        "transaction.timeout.ms": Key(_int, low=1000, high=2_147_483_647),
        # librdkafka's: a produce to a missing topic may create it (with the root's auto.create.topics.enable).
        "allow.auto.create.topics": BOOL,
    },
    "consumer": {
        "lakelog.root": ROOT,
        "logger": LOGGER,
        "client.id": STRING,
        "group.id": OPTIONAL_ID,
        "group.instance.id": OPTIONAL_ID,
        "isolation.level": Key(_str, choices=("read_committed", "read_uncommitted")),
        "enable.partition.eof": BOOL,
        "auto.offset.reset": Key(_str, choices=("earliest", "smallest", "beginning", "latest", "largest", "end", "error")),
        "enable.auto.commit": BOOL,
        "enable.auto.offset.store": BOOL,
        "auto.commit.interval.ms": NON_NEGATIVE,
        "max.poll.records": POSITIVE,
        "fetch.max.bytes": POSITIVE,
        "max.partition.fetch.bytes": POSITIVE,
        "fetch.wait.max.ms": NON_NEGATIVE,
        "session.timeout.ms": Key(_int, low=1, high=3_600_000),
        "heartbeat.interval.ms": Key(_int, low=1, high=3_600_000),
        "max.poll.interval.ms": Key(_int, low=1, high=86_400_000),
        "topic.metadata.refresh.interval.ms": Key(_int, low=10, high=3_600_000),
        "group.remote.assignor": Key(_str, choices=("", "uniform", "range")),
        # librdkafka's: subscribing to a missing topic may create it (with the root's auto.create.topics.enable).
        "allow.auto.create.topics": BOOL,
        "retry.backoff.ms": BACKOFF,
        "retry.backoff.max.ms": BACKOFF,
    },
    "admin": {
        "lakelog.root": ROOT,
        "logger": LOGGER,
        "client.id": STRING,
        "request.timeout.ms": NON_NEGATIVE,
        "retry.backoff.ms": BACKOFF,
        "retry.backoff.max.ms": BACKOFF,
    },
    "topic": {
        "num.partitions": Key(_int, low=1, high=100_000),
        "check.expected.offsets": BOOL,
        "compression.type": COMPRESSION,
        "max.message.bytes": POSITIVE,
        "producer.id.expiration.ms": Key(_int, low=1),
        "checkpoint.interval.commits": Key(_int, low=1, high=1_000_000),
        "segment.files": Key(_int, low=2),
        "delete.retention.ms": NON_NEGATIVE,
        # Kafka's retention (S9.1): -1 is no limit.
        "retention.ms": Key(_int, low=-1),
        "retention.bytes": Key(_int, low=-1),
        "cleanup.policy": Key(_cleanup_policy),
        "file.delete.delay.ms": NON_NEGATIVE,
        "delta.log.retention.ms": NON_NEGATIVE,
    },
    "broker": {
        "transaction.max.timeout.ms": POSITIVE,
        "transaction.state.log.num.partitions": Key(_int, low=1, high=10_000),
        "offsets.topic.num.partitions": Key(_int, low=1, high=10_000),
        "transactional.id.expiration.ms": POSITIVE,
        "group.consumer.partition.revocation.epochs.enable": BOOL,
        # Kafka's broker key: whether a client's allow.auto.create.topics may create a missing topic.
        "auto.create.topics.enable": BOOL,
    },
}


@dataclass(frozen=True)
class Config(Mapping[str, Any]):
    """A validated, complete, read-only set of config values of one kind."""

    kind: str
    values: Mapping[str, Any]  # type: ignore[assignment]  # the raw mapping, read across the code; shadows Mapping.values()

    def __getitem__(self, key: str) -> Any:
        return self.values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def __len__(self) -> int:
        return len(self.values)


def conf_dir() -> Path | Traversable:
    """Where the default `.properties` files live: $LAKELOG_CONF_DIR or the package's `lakelog/conf/`
    (a Path when lakelog is installed as files, as pip and the editable install do)."""
    configured = os.environ.get(CONF_DIR_ENV)
    return Path(configured) if configured else resources.files("lakelog") / "conf"


def read_properties(path: Path | Traversable) -> dict[str, str]:
    """Parse a Java-style `.properties` file: `key=value` lines, `#` comments."""
    values: dict[str, str] = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        line = line.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, separator, value = line.partition("=")
        if not separator:
            raise InvalidConfig(f"{path.name}:{number}: expected key=value, got {line!r}", key=None)
        values[key.strip()] = value.strip()
    return values


# Keyed by folder too: a process that points $LAKELOG_CONF_DIR elsewhere gets that folder's defaults.
# The folder as text: a Traversable from a zip has no value equality, so it would never hit.
_defaults_cache: dict[tuple[str, str], dict[str, Any]] = {}


def defaults(kind: str) -> dict[str, Any]:
    """The validated defaults of one kind, from `<conf_dir()>/<kind>.properties`."""
    folder = conf_dir()
    key = (str(folder), kind)
    if key not in _defaults_cache:
        path = folder / f"{kind}.properties"
        _defaults_cache[key] = _validate(kind, read_properties(path), source=str(path))
        _check_together(_defaults_cache[key], _defaults_cache[key])
    return dict(_defaults_cache[key])


def load(kind: str, conf: Mapping[str, Any] | None = None) -> Config:
    """Defaults of `kind` overlaid by `conf`, every key validated; raises InvalidConfig."""
    if kind not in SCHEMA:
        raise InvalidConfig(f"unknown config kind {kind!r}; expected one of {', '.join(KINDS)}", key=None)
    if conf is not None and not isinstance(conf, Mapping):
        raise InvalidConfig(f"{kind} config must be a dict, not {type(conf).__name__}", key=None)
    values = defaults(kind)
    ignored: dict[str, str] = {}
    try:
        given = _validate(kind, dict(conf or {}), source=f"{kind} config", ignored=ignored)
        values.update(given)
        _check_together(values, given)
    except InvalidConfig as error:
        if kind not in CLIENT_KINDS or error.error.code() == KafkaError._INVALID_ARG:
            raise
        # librdkafka refuses a client's config with _INVALID_ARG (confluent-kafka raises it as KafkaException).
        raise InvalidConfig(KafkaError(KafkaError._INVALID_ARG, error.error.str()), **error.details) from None
    if ignored:
        _log_ignored(kind, ignored, values.get("logger") or logger)
    return Config(kind, values)


def _log_ignored(kind: str, ignored: Mapping[str, str], to: logging.Logger | logging.LoggerAdapter) -> None:
    """One DEBUG line listing the librdkafka keys a client ignores, grouped by the reason."""
    by_reason: dict[str, list[str]] = {}
    for key, reason in ignored.items():
        by_reason.setdefault(reason, []).append(key)
    listed = "; ".join(f"{', '.join(keys)}: {reason}" for reason, keys in by_reason.items())
    to.debug("%s config: ignoring librdkafka keys with no meaning on a lakehouse log: %s", kind, listed)


def _check_together(values: dict[str, Any], given: Mapping[str, Any]) -> None:
    """Rules between keys: the backoff's max is at least its base (lakelog.store.retry).

    A max that was not given follows a larger base given alone, so `retry.backoff.ms=2000`
    by itself waits up to 2 s every time (Kafka would warn and wait its default max, 1 s);
    a max given below the base is refused.
    """
    if values.get("transactional.id") and values.get("enable.idempotence") is False:
        raise InvalidConfig("`transactional.id` requires `enable.idempotence=true`", key="enable.idempotence")
    if given.get("acks", -1) != -1 and (given.get("enable.idempotence") is True or values.get("transactional.id")):
        # librdkafka's rule, for an idempotence the program asked for (a transactional producer is idempotent).
        raise InvalidConfig("`acks` must be set to `all` when `enable.idempotence` is true", key="acks")
    if "retry.backoff.ms" in values and "retry.backoff.max.ms" in values:
        from lakelog.store.retry import check_backoff_bounds

        if "retry.backoff.max.ms" not in given:
            values["retry.backoff.max.ms"] = max(values["retry.backoff.max.ms"], values["retry.backoff.ms"])
        check_backoff_bounds(values["retry.backoff.ms"], values["retry.backoff.max.ms"])


def _validate(kind: str, raw: Mapping[str, Any], *, source: str, ignored: dict[str, str] | None = None) -> dict[str, Any]:
    """Coerce each key; a client kind also takes librdkafka's keys (lakelog.config_keys): an alias is
    stored under its lakelog key, an ignored key is checked and goes into `ignored` with its reason."""
    schema = SCHEMA[kind]
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if isinstance(key, str) and key.startswith(STORAGE_PREFIX) and "lakelog.root" in schema:
            values[STORAGE_PREFIX + _storage_key(key[len(STORAGE_PREFIX) :])] = _storage_value(key, value)
            continue
        if not isinstance(key, str):
            raise InvalidType(f"expected configuration property name as type unicode string, not {key!r}", key=None)
        entry = config_keys.KEYS.get(key) if kind in CLIENT_KINDS else None
        name = entry.alias if entry is not None and entry.alias is not None else key
        if name in schema:
            if name == "logger" and value is None:
                continue  # confluent-kafka: logger=None is no logger
            values[name] = schema[name].coerce(key, value)
        elif entry is None:
            raise InvalidConfig(
                f'No such configuration property: "{key}" (neither a lakelog {kind} key nor a librdkafka one; {source})',
                key=key,
            )
        else:
            reason = _elsewhere(kind, key, name, value) if entry.modelled or entry.alias else entry.check(key, value)
            if ignored is not None:
                ignored[key] = reason
    return values


def _elsewhere(kind: str, key: str, name: str, value: Any) -> str:
    """A key lakelog models for another client kind: checked as there, then ignored (librdkafka ignores a
    consumer property given to a producer, with a warning)."""
    kinds = [other for other in CLIENT_KINDS if name in SCHEMA[other]]
    if value is not None:
        SCHEMA[kinds[0]][name].coerce(key, value)
    return f"a {' and '.join(kinds)} key: a {kind} does not use it"


# Connection settings of the root's store, `lakelog.storage.<key>` (keys: lakelog.store.fileio.S3_KEYS).
STORAGE_PREFIX = "lakelog.storage."


def storage_options(config: Mapping[str, Any]) -> dict[str, str]:
    """The `lakelog.storage.*` settings of a client config, by their storage option names."""
    return {key[len(STORAGE_PREFIX) :]: value for key, value in config.items() if key.startswith(STORAGE_PREFIX)}


def _storage_key(name: str) -> str:
    from lakelog.store.fileio import storage_key

    return storage_key(name)


def _storage_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float)):
        return str(value)
    raise InvalidConfig(f"config {key} takes a string, not {value!r}", key=key)
