"""Config keys: how each is parsed and what range is legal, and the names lakelog accepts for topics and ids."""

from __future__ import annotations

import logging
import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidConfig

CONF_DIR_ENV = "LAKELOG_CONF_DIR"
KINDS = ("producer", "consumer", "admin", "topic", "broker")
# The kinds a confluent-kafka program configures with librdkafka's keys (lakelog.config.librdkafka).
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


def parse_int(name: str, raw: Any) -> int:
    if isinstance(raw, bool):
        raise InvalidConfig(f"config {name} takes an integer, not {raw!r}", key=name)
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and re.fullmatch(r"-?\d+", raw.strip()):
        return int(raw)
    raise InvalidConfig(f"config {name} takes an integer, not {raw!r}", key=name)


def parse_milliseconds(name: str, raw: Any) -> int | float:
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
    return parse_int(name, raw)


def parse_bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise InvalidConfig(f"config {name} takes true or false, not {raw!r}", key=name)


def parse_str(name: str, raw: Any) -> str:
    if isinstance(raw, str):
        return raw
    raise InvalidConfig(f"config {name} takes a string, not {raw!r}", key=name)


def parse_enum(name: str, raw: Any) -> str:
    """An enumerated value, case-insensitive as librdkafka takes it."""
    return parse_str(name, raw).strip().lower()


def parse_optional_name(name: str, raw: Any) -> str | None:
    """An id that, like a topic name, is 1-249 of [a-zA-Z0-9._-]; empty means unset."""
    value = parse_str(name, raw)
    if value == "":
        return None
    validate_name(value, what=name)
    return value


def parse_root(name: str, raw: Any) -> Any:
    from lakelog.store.io.location import Location

    if isinstance(raw, Location):
        return raw
    if isinstance(raw, os.PathLike):
        raw = os.fspath(raw)
    value = parse_str(name, raw)
    if not value:
        raise InvalidConfig(f"config {name} must name a root folder", key=name)
    return value


# librdkafka's classic assignors: range and roundrobin are eager, cooperative-sticky is cooperative.
EAGER_ASSIGNORS = ("range", "roundrobin")
COOPERATIVE_ASSIGNORS = ("cooperative-sticky",)


def parse_assignment_strategy(name: str, raw: Any) -> str:
    """librdkafka's `partition.assignment.strategy`: a list of classic assignors in preference order, all of one
    rebalance protocol (eager or cooperative), kept comma-joined; empty is the default (range,roundrobin)."""
    names = [part.strip().lower() for part in parse_str(name, raw).split(",") if part.strip()]
    for assignor in names:
        if assignor not in EAGER_ASSIGNORS + COOPERATIVE_ASSIGNORS:
            raise InvalidConfig(
                f'Unsupported partition.assignment.strategy "{assignor}": one of range, roundrobin, cooperative-sticky',
                key=name,
            )
    if any(a in COOPERATIVE_ASSIGNORS for a in names) and any(a in EAGER_ASSIGNORS for a in names):
        raise InvalidConfig(
            f"All partition.assignment.strategy ({','.join(names)}) assignors must have the same protocol type, "
            "online migration between assignors with different protocol types is not supported",
            key=name,
        )
    return ",".join(names)


CLEANUP_POLICIES = ("delete", "compact")


def parse_cleanup_policy(name: str, raw: Any) -> str:
    """Kafka's `cleanup.policy`: a list of delete and compact, kept as given (comma-joined, spaces dropped), as Kafka
    keeps it; an empty list is a policy too (neither: records stay until deleted by hand)."""
    policies = [part.strip() for part in parse_str(name, raw).split(",") if part.strip()]
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


def parse_acks(name: str, raw: Any) -> int:
    """librdkafka's `acks`: all, or -1 (all), 0, 1 ... 1000 broker acks, as an int or a string; kept as an int.

    Every lakelog write is a Delta commit, as durable as acks=all: a smaller value is honoured by doing more."""
    if isinstance(raw, str) and raw.strip().lower() == "all":
        return -1
    return parse_int(name, raw)


def parse_logger(name: str, raw: Any) -> logging.Logger | logging.LoggerAdapter:
    """confluent-kafka's `logger`: the client's log lines go to this logger instead of lakelog's module loggers."""
    if isinstance(raw, (logging.Logger, logging.LoggerAdapter)):
        return raw
    raise InvalidConfig(f"config {name} takes a logging.Logger, not {raw!r}", key=name)


INT = Key(parse_int)
NON_NEGATIVE = Key(parse_int, low=0)
POSITIVE = Key(parse_int, low=1)
BOOL = Key(parse_bool)
STRING = Key(parse_str)
OPTIONAL_ID = Key(parse_optional_name)
ROOT = Key(parse_root)
LOGGER = Key(parse_logger)
# Keys that have no default in lakelog/conf/ (a properties file cannot hold their values).
NO_DEFAULT = frozenset({"logger"})
COMPRESSION = Key(parse_str, choices=("none", "snappy", "gzip", "lz4", "zstd"))
# retry.backoff.ms and retry.backoff.max.ms (KIP-580); together also checked by `_check_together`.
BACKOFF = Key(parse_int, low=1, high=300_000)
