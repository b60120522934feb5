"""The `lakelog` connection type and its hook: a connection names a root, how to reach it, and client configs.

A connection's `extra` (JSON):

    {"root": "s3://bucket/lake",                      # required: a local path, file:///... or s3://...
     "storage_options": {"endpoint_url": "...", "region": "..."},   # lakelog.storage.<key>, see README
     "config": {"transaction.timeout.ms": 60000},      # every client's config
     "producer": {...}, "consumer": {...}, "admin": {...}}          # one kind of client's config

The connection's login and password, when set, are the store's access key id
and secret access key (so they can live in Airflow's masked password field).
From the environment:

    AIRFLOW_CONN_LAKELOG_DEFAULT='{"conn_type": "lakelog", "extra": {"root": "/data/lake"}}'
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from lakelog.client.roots import Location, open_root
from lakelog.config import STORAGE_PREFIX
from lakelog.errors import InvalidConfig, KafkaException

logger = logging.getLogger(__name__)

DEFAULT_CONN_ID = "lakelog_default"
CLIENT_KINDS = ("producer", "consumer", "admin")
_EXTRA_KEYS = {"root", "storage_options", "config", *CLIENT_KINDS}


@dataclass(frozen=True)
class LakelogConnection:
    """A resolved connection: the root, its storage options, and client configs by kind."""

    conn_id: str
    root: str
    storage_options: Mapping[str, str] = field(default_factory=dict)
    config: Mapping[str, Any] = field(default_factory=dict)
    client_configs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def client_config(self, kind: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The config dict of a `kind` client (producer, consumer, admin): root, storage options, configs, overrides."""
        if kind not in CLIENT_KINDS:
            raise InvalidConfig(f"client kind must be one of {', '.join(CLIENT_KINDS)}, not {kind!r}")
        merged: dict[str, Any] = {"lakelog.root": self.root}
        merged.update({STORAGE_PREFIX + key: value for key, value in self.storage_options.items()})
        merged.update(self.config)
        merged.update(self.client_configs.get(kind, {}))
        merged.update(overrides or {})
        return merged


def parse_connection(conn_id: str, extra: Any, login: str | None = None, password: str | None = None) -> LakelogConnection:
    """A connection's extra (a dict or its JSON text) checked and resolved; InvalidConfig names what is wrong."""
    where = f"Airflow connection {conn_id!r}"
    if isinstance(extra, str):
        try:
            extra = json.loads(extra) if extra.strip() else {}
        except json.JSONDecodeError as error:
            raise InvalidConfig(f"{where}: extra is not JSON ({error.msg})") from None
    if not isinstance(extra, Mapping):
        raise InvalidConfig(f"{where}: extra must be a JSON object with a root, not {type(extra).__name__}")
    unknown = sorted(set(extra) - _EXTRA_KEYS)
    if unknown:
        raise InvalidConfig(f"{where}: unknown extra keys {unknown}; known: {sorted(_EXTRA_KEYS)}")
    root = extra.get("root")
    if not isinstance(root, str) or not root.strip():
        raise InvalidConfig(f"{where}: extra has no root; set extra.root to a folder or a URI (s3://, az://, gs://)")
    sections: dict[str, dict[str, Any]] = {}
    for name in ("storage_options", "config", *CLIENT_KINDS):
        section = extra.get(name) or {}
        if not isinstance(section, Mapping):
            raise InvalidConfig(f"{where}: extra.{name} must be a JSON object, not {type(section).__name__}")
        sections[name] = dict(section)
    storage = {str(key): str(value) for key, value in sections["storage_options"].items()}
    if login:
        storage.setdefault("access_key_id", login)
    if password:
        storage.setdefault("secret_access_key", password)
    return LakelogConnection(conn_id, root.strip(), storage, sections["config"], {kind: sections[kind] for kind in CLIENT_KINDS})


class LakelogHook(BaseHook):
    """Turns a `lakelog` connection into a root (a checked Location), storage options and client configs."""

    conn_name_attr = "lakelog_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = "lakelog"
    hook_name = "lakelog"

    def __init__(self, lakelog_conn_id: str = DEFAULT_CONN_ID, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.lakelog_conn_id = lakelog_conn_id

    @classmethod
    def get_ui_field_behaviour(cls) -> dict[str, Any]:
        return {
            "hidden_fields": ["host", "schema", "port"],
            "relabeling": {"login": "Access key id (optional)", "password": "Secret access key (optional)"},
            "placeholders": {
                "extra": json.dumps({"root": "s3://bucket/lake", "storage_options": {"region": "eu-west-1"}}),
            },
        }

    @cached_property
    def connection(self) -> LakelogConnection:
        """The resolved connection; InvalidConfig if it is not defined or is malformed."""
        try:
            conn = self.get_connection(self.lakelog_conn_id)
        except AirflowNotFoundException:
            raise InvalidConfig(
                f"Airflow connection {self.lakelog_conn_id!r} is not defined: create it with type lakelog and "
                f'extra {{"root": ...}}, or set AIRFLOW_CONN_{self.lakelog_conn_id.upper()}'
            ) from None
        if conn.conn_type not in (None, "", self.conn_type):
            raise InvalidConfig(f"Airflow connection {self.lakelog_conn_id!r} is of type {conn.conn_type!r}, not lakelog")
        return parse_connection(self.lakelog_conn_id, conn.extra_dejson, conn.login, conn.password)

    def get_conn(self) -> LakelogConnection:
        return self.connection

    @property
    def root(self) -> str:
        return self.connection.root

    @property
    def storage_options(self) -> dict[str, str]:
        return dict(self.connection.storage_options)

    def location(self) -> Location:
        """The root, checked (on S3: that conditional puts hold; an initialised root: UnresolvedRoot if not), once per process."""
        return open_root(self.connection.root, self.connection.storage_options)

    def client_config(self, kind: str, overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return self.connection.client_config(kind, overrides)

    def test_connection(self) -> tuple[bool, str]:
        try:
            location = self.location()
        except KafkaException as error:
            return False, str(error)
        return True, f"lakelog root {location} is reachable"


__all__ = ["DEFAULT_CONN_ID", "LakelogConnection", "LakelogHook", "parse_connection"]
