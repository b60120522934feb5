"""Durable bytes and names on a local disk: what a power loss cannot take back once these calls return.

After a power loss a file system keeps what was synced (POSIX): a file's bytes once `fsync` or
`fdatasync` of the file returned, and a name in a folder (a link, a rename, a new folder) once `fsync`
of that folder returned; until then a new name may vanish, or name an empty or short file (ext4, XFS
and btrfs commit both with their next journal transaction, seconds later). So a file lakelog says is
there is synced twice: its bytes before its name is made, so that a name never outlives its bytes, and
its folder after. A folder made on the way has its own name synced in its parent before anything is
put in it, so that no file is named in a folder that may vanish.

S3 needs none of this: a PUT is durable when answered.
"""

from __future__ import annotations

import os
import sys

# A folder opened only to be synced: read-only, and refused if the path is not a folder.
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)


def sync_data(descriptor: int) -> None:
    """Make the bytes written through `descriptor` durable, with the size and blocks that read them back.

    `fdatasync`: Linux flushes the data and the metadata needed to retrieve it (the size a write
    extended, the block allocation), skipping only timestamps, as POSIX's "synchronized I/O data
    integrity completion" requires; for a file written once and never changed that is all `fsync`
    would give. macOS's `fsync` leaves the bytes in the drive's cache: `F_FULLFSYNC` flushes them.
    """
    if sys.platform == "darwin":
        import fcntl

        fcntl.fcntl(descriptor, fcntl.F_FULLFSYNC)
    elif hasattr(os, "fdatasync"):
        os.fdatasync(descriptor)
    else:
        os.fsync(descriptor)


def sync_folder_descriptor(descriptor: int) -> None:
    """Make the names in the open folder `descriptor` durable (`fsync`: `fdatasync` of a folder promises no entry)."""
    if sys.platform == "darwin":
        import fcntl

        fcntl.fcntl(descriptor, fcntl.F_FULLFSYNC)
    else:
        os.fsync(descriptor)


def sync_folder(folder: str) -> None:
    """Make the names in `folder` durable: the files linked, renamed or created in it, and its subfolders."""
    if os.name == "nt":  # NTFS journals a name with the call that makes it; a folder cannot be opened to sync
        return
    descriptor = os.open(folder, _FOLDER_FLAGS)
    try:
        sync_folder_descriptor(descriptor)
    finally:
        os.close(descriptor)


def open_folder(folder: str) -> int:
    """A descriptor of `folder` (to create files in with `dir_fd` and to sync); FileNotFoundError if absent."""
    return os.open(folder, _FOLDER_FLAGS)


def make_dirs(folder: str) -> None:
    """Create `folder` and its missing parents; when this returns, each one's name is durable in its parent.

    The first folder found in place is synced in its parent too: another writer may have made it just
    now and not synced it yet (the walk saw it after this writer's own open found `folder` missing), and
    what this writer puts in it must not rest on that writer living long enough to sync. Only creation
    paths call this (a new table, a new sidecar folder), never an append.
    """
    missing: list[str] = []
    present = folder
    while not os.path.isdir(present):
        missing.append(present)
        parent = os.path.dirname(present) or "."
        if parent == present:
            break
        present = parent
    os.makedirs(folder, exist_ok=True)
    # From the top: the first folder present's parent, then each folder that holds a name made here (the last
    # one made holds none yet: its own names are its caller's to sync).
    holders = [os.path.dirname(present) or "."]
    if missing:
        holders += [present, *reversed(missing[1:])]
    for holder in dict.fromkeys(holders):
        sync_folder(holder)


__all__ = ["make_dirs", "open_folder", "sync_data", "sync_folder", "sync_folder_descriptor"]
