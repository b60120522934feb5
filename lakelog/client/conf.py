"""A client's conf as confluent-kafka takes it: callables (callbacks, a logger) apart from config keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakelog.errors import InvalidConfig, InvalidType, KafkaError


def split_callbacks(
    conf: Mapping[str, Any] | None, allowed: tuple[str, ...], overrides: Mapping[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Separate callable settings (confluent-kafka accepts them in the conf dict) from config keys.

    As confluent-kafka does: the constructor's keyword arguments (`overrides`: `Producer(**conf)`,
    `Producer(conf, logger=...)`) are merged over `conf`, and a `default.topic.config` dict over both.
    """
    if conf is None and not overrides:
        raise InvalidType("expected configuration dict")  # confluent-kafka's TypeError
    if conf is not None and not isinstance(conf, Mapping):
        raise InvalidType(f"expected configuration dict, not {type(conf).__name__}")  # confluent: TypeError
    values = {**(conf or {}), **(overrides or {})}
    topic_conf = values.pop("default.topic.config", None)
    if topic_conf is not None:
        if not isinstance(topic_conf, Mapping):
            raise invalid_arg(f"default.topic.config must be a dict, not {topic_conf!r}", key="default.topic.config")
        values.update(topic_conf)
    callbacks = {key: values.pop(key) for key in allowed if key in values}
    for key, value in callbacks.items():
        if value is not None and not callable(value):
            # confluent: a TypeError for error_cb, KafkaException(_INVALID_ARG) for on_delivery and on_commit.
            error = InvalidType if key in ("error_cb", "stats_cb") else invalid_arg
            raise error(f"{key} requires a callable object, not {value!r}", key=key)
    servers = values.get("bootstrap.servers")
    if "lakelog.root" not in values:
        if servers is None:
            raise invalid_arg("config lakelog.root is required: it names the root folder of the topics", key="lakelog.root")
        if not is_root(servers):
            raise invalid_arg(
                f"bootstrap.servers={servers!r} is a broker address: lakelog needs a root (a path, file:// or s3:// URI) "
                "in lakelog.root or bootstrap.servers",
                key="bootstrap.servers",
            )
        values["lakelog.root"] = values.pop("bootstrap.servers")
    return values, callbacks


# A root named in bootstrap.servers: a URI (s3://, file://, ...) or a path, never a host:port list.
_ROOT_PREFIXES = ("/", "./", "../", "~")


def is_root(servers: Any) -> bool:
    """Whether a `bootstrap.servers` value names a root (`s3://bucket/lake`, `file:///data`, `/data/lake`)."""
    if not isinstance(servers, str):
        return False
    text = servers.strip()
    return "://" in text or text.startswith(_ROOT_PREFIXES)


def invalid_arg(message: str, *, key: str | None) -> InvalidConfig:
    """A client config refused as librdkafka refuses one: _INVALID_ARG (lakelog.config.load does the same)."""
    return InvalidConfig(KafkaError(KafkaError._INVALID_ARG, message), key=key)


__all__ = ["invalid_arg", "is_root", "split_callbacks"]
