"""A root as the entry points see it (the command line, the Airflow provider, the pipelines): open one, make one,
list its topics and count a topic's partitions, without reaching into the store and log layers themselves.

A root is a URI everywhere: a folder, `file:///path`, `s3://bucket/prefix`, `az://container/prefix` (or
`abfss://container@account.dfs.core.windows.net/prefix`) or `gs://bucket/prefix`; `storage_options` override the
store's environment (`AWS_*`, `AZURE_STORAGE_*`, `GOOGLE_*`: endpoint_url, region, access keys, ...).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lakelog.log import list_topics, topic_config
from lakelog.store import Location, check_root, initialise_root, open_root
from lakelog.store.io.s3_settings import STORAGE_KEYS, storage_key


def make_root(root: Any, storage_options: Mapping[str, Any] | None = None) -> tuple[Location, str]:
    """Make `root` a lakelog root, as `lakelog init` does (idempotent): the root and its cluster id."""
    location = check_root(root, storage_options)
    cluster_id = initialise_root(location)
    location.io.make_dirs((location / "topics").uri)
    return location, cluster_id


def topic_names(root: str | Location) -> list[str]:
    """The names of the root's topics, sorted."""
    return list_topics(root)


def partition_count(root: str | Location, topic: str) -> int:
    """How many partitions `topic` has; UnknownTopicOrPartition if it does not exist."""
    return topic_config(root, topic).num_partitions


def split_storage_options(storage_options: Mapping[str, Any]) -> tuple[dict[str, str], dict[str, str]]:
    """Storage options split in two: the environment variables lakelog's file IO reads (by variable name), and the
    settings no variable carries (timeouts, retries; by key). InvalidConfig for an unknown key."""
    variables: dict[str, str] = {}
    options: dict[str, str] = {}
    for raw_key, value in storage_options.items():
        key = storage_key(raw_key)
        variable = STORAGE_KEYS[key]
        if variable is not None:
            variables[variable] = str(value)
        else:
            options[key] = str(value)
    return variables, options


__all__ = ["Location", "check_root", "make_root", "open_root", "partition_count", "split_storage_options", "topic_names"]
