"""Upkeep of tables: merging small files, cleaning the log, vacuum, and deleting a table.

Built on `lakelog.store.delta`: each step that changes a table is one of its strict commits.
"""
