"""confluent_kafka.schema_registry's names on a root: `from lakelog.schema_registry import SchemaRegistryClient`.

The registry is kept in the root (the `__schemas` log), selected by `{"url": "lakelog:<root>"}` or
`{"lakelog.root": <root>}`; confluent's own serializers run over it unchanged.
"""

from lakelog.client.schema_registry import SchemaRegistryClient
from lakelog.coordinator.schemas.types import (
    CompatibilityLevel,
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryError,
)

__all__ = ["CompatibilityLevel", "RegisteredSchema", "Schema", "SchemaReference", "SchemaRegistryClient", "SchemaRegistryError"]
