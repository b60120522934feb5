"""confluent_kafka.schema_registry.error's name: `SchemaRegistryError`."""

from lakelog.coordinator.schemas.types import SchemaRegistryError

__all__ = ["SchemaRegistryError"]
