"""describe_configs, alter_configs and incremental_alter_configs on a root, as Kafka's admin config calls.

A TOPIC resource's config is the one stored in its partition tables (lakelog.log.topic_changes
says how a change is committed, partition 0 first). A change is validated as at topic
creation; `num.partitions` changes only through create_partitions. The BROKER resource
(name "0", or "" for the cluster default) is the root: its defaults, read only.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from lakelog import config
from lakelog.client.admin.types import NODE_ID, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType
from lakelog.errors import InvalidArgument, InvalidConfig, InvalidRequest, InvalidType
from lakelog.log import topic_config
from lakelog.log.topic_changes import alter_topic_config
from lakelog.log.topic_config import LIST_KEYS, TopicConfig
from lakelog.store import Location
from lakelog.store.io.retry import RetryPolicy

logger = logging.getLogger(__name__)


def describe(root: str | Location, resource: ConfigResource) -> dict[str, ConfigEntry]:
    """Every config entry of the resource, by name (UnknownTopicOrPartition for a missing topic)."""
    if resource.restype is ResourceType.TOPIC:
        defaults = config.defaults("topic")
        values = topic_config(root, resource.name).values
        return {name: _entry(name, value, defaults.get(name)) for name, value in sorted(values.items())}
    if resource.restype is ResourceType.BROKER:
        _check_broker(resource, "describe_configs")
        entries = {}
        for kind in ("broker", "topic"):
            for name, value in sorted(config.defaults(kind).items()):
                entries[name] = ConfigEntry(
                    name, _text(value), ConfigSource.STATIC_BROKER_CONFIG, is_read_only=True, is_default=True
                )
        return entries
    raise InvalidRequest(
        f"describe_configs: lakelog keeps configs for topics and the root (broker {NODE_ID}), not {resource.restype.name}"
    )


def alter(root: str | Location, resource: ConfigResource, *, incremental: bool, validate_only: bool, retry: RetryPolicy) -> None:
    """Apply the resource's changes: `set_config_dict` replacing the whole config (alter_configs: a key not set
    goes back to its default), or `incremental_configs` one by one (incremental_alter_configs)."""
    call = "incremental_alter_configs" if incremental else "alter_configs"
    if resource.restype is ResourceType.BROKER:
        _check_broker(resource, call)
        raise InvalidRequest(f"{call}: the root's defaults (broker {NODE_ID}) are read only; they live in its conf files")
    if resource.restype is not ResourceType.TOPIC:
        raise InvalidRequest(
            f"{call}: lakelog keeps configs for topics and the root (broker {NODE_ID}), not {resource.restype.name}"
        )
    if incremental:
        operations = _operations(resource.incremental_configs)

        def change(current: TopicConfig) -> Mapping[str, Any]:
            return _apply_incremental(current, operations)
    else:
        wanted = dict(resource.set_config_dict)

        def change(current: TopicConfig) -> Mapping[str, Any]:
            # Kafka's AlterConfigs replaces the topic's config; the partition count is no config there, so it stays.
            return {"num.partitions": current.num_partitions, **wanted}

    alter_topic_config(root, resource.name, change, validate_only=validate_only, retry=retry)


def check_incremental(resource: ConfigResource) -> None:
    """The checks confluent-kafka makes before sending incremental_alter_configs: TypeError, ValueError."""
    _operations(resource.incremental_configs)


def _operations(entries: Any) -> list[tuple[str, AlterConfigOpType, str | None]]:
    if not isinstance(entries, list):
        raise InvalidType("incremental_configs must be a list of ConfigEntry")
    if not entries:
        raise InvalidArgument("incremental_configs of a resource cannot be empty")
    operations = []
    names = set()
    for entry in entries:
        if not isinstance(entry, ConfigEntry):
            raise InvalidType("incremental_configs must be a list of ConfigEntry")
        if not isinstance(entry.name, str):
            raise InvalidType(f"a ConfigEntry's name must be a string, not {entry.name!r}")
        if not isinstance(entry.incremental_operation, AlterConfigOpType):
            raise InvalidType(f"config {entry.name}: incremental_operation must be an AlterConfigOpType")
        if entry.name in names:
            # Kafka refuses a key named twice in one request.
            raise InvalidArgument(f"config {entry.name} is altered twice in one request")
        names.add(entry.name)
        operations.append((entry.name, entry.incremental_operation, entry.value))
    return operations


def _apply_incremental(current: TopicConfig, operations: list[tuple[str, AlterConfigOpType, str | None]]) -> dict[str, Any]:
    values: dict[str, Any] = dict(current.values)
    defaults = config.defaults("topic")
    for name, operation, value in operations:
        if name not in defaults:
            raise InvalidConfig(f"unknown topic config key {name!r}", key=name)
        if operation is AlterConfigOpType.SET:
            values[name] = value
        elif operation is AlterConfigOpType.DELETE:
            values[name] = defaults[name]
        elif name not in LIST_KEYS:
            raise InvalidConfig(f"config {name} is not a list: {operation.name} applies to list keys only", key=name)
        else:
            items = [item for item in _text(values[name]).split(",") if item]
            given = [item.strip() for item in (value or "").split(",") if item.strip()]
            if operation is AlterConfigOpType.APPEND:
                items += [item for item in given if item not in items]
            else:
                items = [item for item in items if item not in given]
            values[name] = ",".join(items)
    return values


def _entry(name: str, value: Any, default: Any) -> ConfigEntry:
    is_default = default is not None and value == default
    source = ConfigSource.DEFAULT_CONFIG if is_default else ConfigSource.DYNAMIC_TOPIC_CONFIG
    return ConfigEntry(name, _text(value), source, is_read_only=name == "num.partitions", is_default=is_default)


def _check_broker(resource: ConfigResource, call: str) -> None:
    if resource.name not in (str(NODE_ID), ""):
        raise InvalidRequest(f"{call}: a root is one broker, id {NODE_ID}; there is no broker {resource.name!r}")


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)
