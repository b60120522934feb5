"""`SchemaRegistryClient` with confluent-kafka's API, over the registry kept in a root (no server).

`SchemaRegistryClient({"url": "lakelog:<root>"})` (or `{"lakelog.root": <root>}`) reads and writes the root's
`__schemas` log (lakelog.coordinator.schemas.registry); confluent's serializers (`AvroSerializer`,
`JSONSerializer`, `ProtobufSerializer`) take it as they take confluent's client. Answers and errors have
confluent's shapes (`RegisteredSchema`, `SchemaRegistryError` with its codes). Every call reads the log's
latest state, so there is no cache to clear; `clear_caches` and `clear_latest_caches` do nothing.
"""

from __future__ import annotations

from typing import Any

from lakelog.coordinator.schemas.handlers import (
    check,
    delete_subject,
    delete_version,
    level_of,
    register,
    set_compatibility,
)
from lakelog.coordinator.schemas.registry import SchemaRegistry
from lakelog.coordinator.schemas.state import RegistryState
from lakelog.coordinator.schemas.types import (
    SCHEMA_TYPES,
    RegisteredSchema,
    Schema,
    SchemaRegistryError,
    as_schema,
    registry_error,
    schema_guid,
)

URL_SCHEME = "lakelog:"
ROOT_KEY = "lakelog.root"
# confluent's client keys that mean nothing without a server: accepted and ignored.
IGNORED_KEYS = {
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.disable.endpoint.verification",
    "basic.auth.credentials.source",
    "basic.auth.user.info",
    "bearer.auth.credentials.source",
    "bearer.auth.token",
    "bearer.auth.logical.cluster",
    "bearer.auth.identity.pool.id",
    "cache.capacity",
    "cache.latest.ttl.sec",
    "max.retries",
    "retries.wait.ms",
    "retries.max.wait.ms",
    "timeout",
    "proxy",
}


def registry_root(conf: dict[str, Any]) -> str:
    """The root a client's conf names: `lakelog.root`, else a `url` of `lakelog:<root>`; ValueError otherwise."""
    if not isinstance(conf, dict):
        raise TypeError(f"conf must be a dict, not {type(conf).__name__}")
    unknown = sorted(set(conf) - IGNORED_KEYS - {"url", ROOT_KEY})
    if unknown:
        raise ValueError(f"Unrecognized properties: {', '.join(unknown)}")
    root = conf.get(ROOT_KEY)
    url = conf.get("url")
    if root is None and isinstance(url, str) and url.startswith(URL_SCHEME):
        root = url[len(URL_SCHEME) :]
    if not isinstance(root, str) or not root:
        raise ValueError(
            f"lakelog's schema registry lives in a root: set url to 'lakelog:<root>' or lakelog.root, not url={url!r}"
        )
    return root


class SchemaRegistryClient:
    """confluent-kafka's SchemaRegistryClient on a root's `__schemas` log."""

    def __init__(self, conf: dict[str, Any]) -> None:
        self._conf = dict(conf)
        self._registry = SchemaRegistry(registry_root(conf))

    @staticmethod
    def new_client(conf: dict[str, Any]) -> SchemaRegistryClient:
        """A client of `conf`, as confluent's factory makes one (its `mock://` urls have no meaning on a root)."""
        return SchemaRegistryClient(conf)

    def __enter__(self) -> SchemaRegistryClient:
        return self

    def __exit__(self, *args: Any) -> None:
        return None

    def config(self) -> dict[str, Any]:
        return self._conf

    # -- writes -------------------------------------------------------------------------

    def register_schema(self, subject_name: str, schema: Any, normalize_schemas: bool = False) -> int:
        """Register `schema` under `subject_name`; its id (the same id for the same schema, in any process)."""
        return self.register_schema_full_response(subject_name, schema, normalize_schemas).schema_id

    def register_schema_full_response(self, subject_name: str, schema: Any, normalize_schemas: bool = False) -> RegisteredSchema:
        wanted = as_schema(schema)
        answer = self._registry.run(lambda state: register(state, subject_name, wanted))
        assert isinstance(answer, RegisteredSchema)
        return answer

    def delete_subject(self, subject_name: str, permanent: bool = False) -> list[int]:
        """Delete a subject's versions (soft, or for good once soft-deleted); the versions deleted."""
        answer = self._registry.run(lambda state: delete_subject(state, subject_name, permanent))
        assert isinstance(answer, list)
        return answer

    def delete_version(self, subject_name: str, version: int, permanent: bool = False) -> int:
        answer = self._registry.run(lambda state: delete_version(state, subject_name, version, permanent))
        assert isinstance(answer, int)
        return answer

    def set_compatibility(self, subject_name: str | None = None, level: str | None = None) -> str:
        """Set the compatibility level of a subject, or the global one; the level set."""
        if level is None:
            raise ValueError("level must be set")
        answer = self._registry.run(lambda state: set_compatibility(state, subject_name, level))
        assert isinstance(answer, str)
        return answer

    # -- reads --------------------------------------------------------------------------

    def get_compatibility(self, subject_name: str | None = None) -> str:
        """A subject's own level (40408 if it has none), or the global level when no subject is given."""
        state = self._registry.state()
        if subject_name is not None and subject_name not in state.compatibility:
            raise registry_error(
                SchemaRegistryError.SUBJECT_LEVEL_COMPATIBILITY_NOT_CONFIGURED,
                f"Subject {subject_name!r} does not have subject-level compatibility configured",
            )
        return level_of(state, subject_name).value

    def test_compatibility(self, subject_name: str, schema: Any, version: int | str = "latest") -> bool:
        """Whether `schema` keeps the subject's level against `version` (the latest by default)."""
        state = self._registry.state()
        registered = self._version(state, subject_name, version)
        return not check(state, subject_name, as_schema(schema), [registered.schema])

    def test_compatibility_all_versions(self, subject_name: str, schema: Any) -> bool:
        state = self._registry.state()
        if not state.live_versions(subject_name):
            raise registry_error(SchemaRegistryError.SUBJECT_NOT_FOUND, f"Subject {subject_name!r} not found")
        return not check(state, subject_name, as_schema(schema))

    def get_schema(
        self, schema_id: int, subject_name: str | None = None, fmt: str | None = None, reference_format: str | None = None
    ) -> Schema:
        """The schema of an id; 40403 if no schema has it."""
        schema = self._registry.state().schemas.get(schema_id)
        if schema is None:
            raise registry_error(SchemaRegistryError.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return schema

    def get_schema_by_guid(self, guid: str, fmt: str | None = None) -> Schema:
        for schema in self._registry.state().schemas.values():
            if schema_guid(schema) == guid:
                return schema
        raise registry_error(SchemaRegistryError.SCHEMA_NOT_FOUND, f"Schema {guid} not found")

    def get_schema_types(self) -> list[str]:
        return list(SCHEMA_TYPES)

    def get_subjects_by_schema_id(self, schema_id: int, *args: Any, **kwargs: Any) -> list[str]:
        state = self._registry.state()
        if schema_id not in state.schemas:
            raise registry_error(SchemaRegistryError.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return sorted(
            subject
            for subject in state.subjects
            if any(entry.schema_id == schema_id for entry in state.live_versions(subject).values())
        )

    def lookup_schema(
        self, subject_name: str, schema: Any, normalize_schemas: bool = False, deleted: bool = False, fmt: str | None = None
    ) -> RegisteredSchema:
        """The version of `subject_name` that is `schema`; 40401 for no such subject, 40403 for no such version."""
        state = self._registry.state()
        versions = state.subjects.get(subject_name, {})
        if not versions or (not deleted and not state.live_versions(subject_name)):
            raise registry_error(SchemaRegistryError.SUBJECT_NOT_FOUND, f"Subject {subject_name!r} not found")
        schema_id = state.id_of(as_schema(schema))
        for version, entry in sorted(versions.items()):
            if entry.schema_id == schema_id and (deleted or not entry.deleted):
                return self._registered(state, subject_name, version)
        raise registry_error(SchemaRegistryError.SCHEMA_NOT_FOUND, "Schema not found")

    def get_subjects(self, subject_prefix: str | None = None, deleted: bool = False, *args: Any, **kwargs: Any) -> list[str]:
        state = self._registry.state()
        return sorted(
            subject
            for subject in state.subjects
            if (deleted or state.live_versions(subject)) and subject.startswith(subject_prefix or "")
        )

    def get_latest_version(self, subject_name: str, fmt: str | None = None) -> RegisteredSchema:
        return self._version(self._registry.state(), subject_name, "latest")

    def get_version(
        self, subject_name: str, version: int | str = "latest", deleted: bool = False, fmt: str | None = None
    ) -> RegisteredSchema:
        return self._version(self._registry.state(), subject_name, version, deleted)

    def get_versions(self, subject_name: str, *args: Any, **kwargs: Any) -> list[int]:
        state = self._registry.state()
        live = list(state.live_versions(subject_name))
        if not live:
            raise registry_error(SchemaRegistryError.SUBJECT_NOT_FOUND, f"Subject {subject_name!r} not found")
        return live

    def get_schema_versions(self, schema_id: int, *args: Any, **kwargs: Any) -> list[tuple[str, int]]:
        """The (subject, version) pairs that hold an id."""
        state = self._registry.state()
        if schema_id not in state.schemas:
            raise registry_error(SchemaRegistryError.SCHEMA_NOT_FOUND, f"Schema {schema_id} not found")
        return [
            (subject, version)
            for subject in sorted(state.subjects)
            for version, entry in state.live_versions(subject).items()
            if entry.schema_id == schema_id
        ]

    def get_associations_by_resource_name(
        self, resource_name: str, resource_namespace: str, *args: Any, **kwargs: Any
    ) -> list[Any]:
        """None: a root keeps no subject associations, so confluent's serializers fall back to their name strategy."""
        return []

    def get_latest_with_metadata(
        self, subject_name: str, metadata: dict[str, str], *args: Any, **kwargs: Any
    ) -> RegisteredSchema:
        """40403 always: a root's schemas carry no metadata."""
        self._version(self._registry.state(), subject_name, "latest")
        raise registry_error(SchemaRegistryError.SCHEMA_NOT_FOUND, f"No version of {subject_name!r} has metadata {metadata}")

    def clear_caches(self) -> None:
        return None

    def clear_latest_caches(self) -> None:
        return None

    def _version(self, state: RegistryState, subject: str, version: int | str, deleted: bool = False) -> RegisteredSchema:
        versions = state.subjects.get(subject, {})
        live = state.live_versions(subject)
        if not versions or (not live and not deleted):
            raise registry_error(SchemaRegistryError.SUBJECT_NOT_FOUND, f"Subject {subject!r} not found")
        if version in ("latest", -1):
            if not live:
                raise registry_error(SchemaRegistryError.VERSION_NOT_FOUND, f"Subject {subject!r} has no live version")
            return self._registered(state, subject, max(live))
        if isinstance(version, bool) or not isinstance(version, int) or version < 1:
            raise registry_error(SchemaRegistryError.INVALID_VERSION, f"The specified version {version!r} is not valid")
        entry = versions.get(version)
        if entry is None or (entry.deleted and not deleted):
            raise registry_error(SchemaRegistryError.VERSION_NOT_FOUND, f"Version {version} not found")
        return self._registered(state, subject, version)

    @staticmethod
    def _registered(state: RegistryState, subject: str, version: int) -> RegisteredSchema:
        schema_id = state.subjects[subject][version].schema_id
        schema = state.schemas[schema_id]
        return RegisteredSchema(schema_id, schema, subject, version, schema_guid(schema))
