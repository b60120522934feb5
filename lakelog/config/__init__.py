"""The one config loader: Kafka-named keys, typed and validated on load, defaults shipped in the package.

`load(kind, conf)` gives a frozen `Config` of one kind (producer, consumer, admin, topic, broker): the defaults
of `lakelog/conf/<kind>.properties` overlaid by the caller's values. The keys and their parsers are in `keys`,
the table of every key per kind in `schema`, librdkafka's keys and what lakelog does with each in `librdkafka`.
"""

from lakelog.config.keys import CLIENT_KINDS, CONF_DIR_ENV, KINDS, MAX_NAME_LENGTH, NAME_PATTERN, Key, validate_name
from lakelog.config.loader import (
    STORAGE_PREFIX,
    Config,
    conf_dir,
    defaults,
    load,
    read_properties,
    storage_options,
)
from lakelog.config.schema import SCHEMA

__all__ = [
    "CLIENT_KINDS",
    "CONF_DIR_ENV",
    "KINDS",
    "MAX_NAME_LENGTH",
    "NAME_PATTERN",
    "SCHEMA",
    "STORAGE_PREFIX",
    "Config",
    "Key",
    "conf_dir",
    "defaults",
    "load",
    "read_properties",
    "storage_options",
    "validate_name",
]
