"""Delta table access: the only package that calls deltalake."""

from lakelog.store.table import REOPEN_EVERY_COMMITS, FileEntry, Table, TableNotFoundError, check_root

__all__ = ["FileEntry", "Table", "TableNotFoundError", "check_root", "REOPEN_EVERY_COMMITS"]
