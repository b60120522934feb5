"""The registering side of the schema registry's process test: imports only what a registering process needs."""

from __future__ import annotations

from typing import Any


def register_schemas(root: str, subject: str, schemas: list[str], start: Any, reports: Any) -> None:
    """Register each Avro schema under `subject`, once `start` is set; report {schema: id}."""
    from lakelog.schema_registry import Schema, SchemaRegistryClient

    client = SchemaRegistryClient({"url": f"lakelog:{root}"})
    start.wait(120)
    try:
        reports.put(("registered", {text: client.register_schema(subject, Schema(text)) for text in schemas}))
    except Exception as error:  # reported to the test, which fails on it
        reports.put(("error", repr(error)))
