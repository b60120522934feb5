"""The one config loader: Kafka-named keys, typed and validated, defaults from `lakelog/conf/`.

`load("producer", {...})` returns a frozen `Config` holding every key of that kind
(defaults from `lakelog/conf/producer.properties`, package data, overlaid by the caller's values). An
unknown key, a value of the wrong type or out of range raises `InvalidConfig`
naming the key, before anything touches a table.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

from lakelog.config import librdkafka
from lakelog.config.keys import CLIENT_KINDS, CONF_DIR_ENV, KINDS
from lakelog.config.schema import SCHEMA
from lakelog.config.secrets import is_secret, redact_value, shown
from lakelog.errors import InvalidConfig, InvalidType, KafkaError

logger = logging.getLogger(__name__)


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

    def __repr__(self) -> str:
        return f"Config(kind={self.kind!r}, values={shown(self.values)!r})"  # no secret in clear


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
    """Rules between keys: the backoff's max is at least its base (lakelog.store.io.retry).

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
        from lakelog.store.io.retry import check_backoff_bounds

        if "retry.backoff.max.ms" not in given:
            values["retry.backoff.max.ms"] = max(values["retry.backoff.max.ms"], values["retry.backoff.ms"])
        check_backoff_bounds(values["retry.backoff.ms"], values["retry.backoff.max.ms"])


def _validate(kind: str, raw: Mapping[str, Any], *, source: str, ignored: dict[str, str] | None = None) -> dict[str, Any]:
    """Coerce each key; a client kind also takes librdkafka's keys (lakelog.config.librdkafka): an alias is
    stored under its lakelog key, an ignored key is checked and goes into `ignored` with its reason."""
    values: dict[str, Any] = {}
    for key, value in raw.items():
        try:
            _validate_key(kind, key, value, values, source, ignored)
        except InvalidConfig as error:
            if not is_secret(key) or value is None:
                raise
            # A secret given with the wrong type or form: the error names its key, never its value.
            text = redact_value(error.error.str(), value)
            raise InvalidConfig(KafkaError(error.error.code(), text), **error.details) from None
    return values


def _validate_key(kind: str, key: Any, value: Any, values: dict[str, Any], source: str, ignored: dict[str, str] | None) -> None:
    """Coerce one key into `values` (or record it in `ignored`); InvalidConfig if it is unknown or its value wrong."""
    schema = SCHEMA[kind]
    if isinstance(key, str) and key.startswith(STORAGE_PREFIX) and "lakelog.root" in schema:
        values[STORAGE_PREFIX + _storage_key(key[len(STORAGE_PREFIX) :])] = _storage_value(key, value)
        return
    if not isinstance(key, str):
        raise InvalidType(f"expected configuration property name as type unicode string, not {key!r}", key=None)
    entry = librdkafka.KEYS.get(key) if kind in CLIENT_KINDS else None
    name = entry.alias if entry is not None and entry.alias is not None else key
    if name in schema:
        if name == "logger" and value is None:
            return  # confluent-kafka: logger=None is no logger
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


def _elsewhere(kind: str, key: str, name: str, value: Any) -> str:
    """A key lakelog models for another client kind: checked as there, then ignored (librdkafka ignores a
    consumer property given to a producer, with a warning)."""
    kinds = [other for other in CLIENT_KINDS if name in SCHEMA[other]]
    if value is not None:
        SCHEMA[kinds[0]][name].coerce(key, value)
    return f"a {' and '.join(kinds)} key: a {kind} does not use it"


# Connection settings of the root's store, `lakelog.storage.<key>` (keys: lakelog.store.io.fileio.S3_KEYS).
STORAGE_PREFIX = "lakelog.storage."


def storage_options(config: Mapping[str, Any]) -> dict[str, str]:
    """The `lakelog.storage.*` settings of a client config, by their storage option names."""
    return {key[len(STORAGE_PREFIX) :]: value for key, value in config.items() if key.startswith(STORAGE_PREFIX)}


def _storage_key(name: str) -> str:
    from lakelog.store.io.fileio import storage_key

    return storage_key(name)


def _storage_value(key: str, value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (str, int, float)):
        return str(value)
    raise InvalidConfig(f"config {key} takes a string, not {value!r}", key=key)
