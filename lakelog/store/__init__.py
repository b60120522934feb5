"""Storage: Delta tables, whose log lakelog reads and writes itself (no delta-rs), and file IO by URI scheme."""

from lakelog.store.cluster import ensure_initialised, initialise_root, open_root
from lakelog.store.deletion import delete_table
from lakelog.store.fileio import FileIO, FileStatus
from lakelog.store.location import Location, load_file_io
from lakelog.store.pinned import PinnedSnapshot
from lakelog.store.root import check_root
from lakelog.store.table import FileEntry, Table, TableNotFoundError

__all__ = [
    "FileEntry",
    "FileIO",
    "FileStatus",
    "Location",
    "PinnedSnapshot",
    "Table",
    "delete_table",
    "TableNotFoundError",
    "check_root",
    "ensure_initialised",
    "initialise_root",
    "load_file_io",
    "open_root",
]
