"""Delta table access: the only package that calls deltalake."""

from lakelog.store.table import REOPEN_EVERY_COMMITS, FileEntry, PinnedSnapshot, Table, TableNotFoundError, check_root

__all__ = ["FileEntry", "PinnedSnapshot", "Table", "TableNotFoundError", "check_root", "REOPEN_EVERY_COMMITS"]
