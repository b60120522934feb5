"""Storage: Delta tables, whose log lakelog reads and writes itself (no delta-rs), and file IO by URI scheme."""

from lakelog.store.delta.cluster import ensure_initialised, initialise_root, open_root
from lakelog.store.delta.data_file import DataFile
from lakelog.store.delta.pinned import PinnedSnapshot
from lakelog.store.delta.snapshot import FileChange
from lakelog.store.delta.table import Table, TableNotFoundError
from lakelog.store.io.fileio import FileIO, FileStatus
from lakelog.store.io.location import Location, load_file_io
from lakelog.store.io.root import check_root
from lakelog.store.upkeep.deletion import delete_table
from lakelog.store.upkeep.merge import MergeOrder

__all__ = [
    "DataFile",
    "FileChange",
    "FileIO",
    "FileStatus",
    "Location",
    "MergeOrder",
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
