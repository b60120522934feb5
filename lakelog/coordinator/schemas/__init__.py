"""The schema registry kept in a root: schemas and subject configs as rows of the compacted internal log `__schemas`,
decided by pure handlers and committed by the coordinator log's strict append; the registry on the table is
`lakelog.coordinator.schemas.registry`."""
