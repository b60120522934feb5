"""Exactly once out of the log and into a database: a sink whose rows and positions commit in one database
transaction (PostgreSQL, DuckDB), fenced by an epoch kept in the same database (docs/sinks.md)."""
