"""Put-if-absent of a whole file on a local disk: the file appears under its name complete, or not at all.

Linux: the bytes go to an unnamed file in the target's folder (`O_TMPFILE`), then `linkat` gives it the
target's name, which fails if the name exists. One create, one write, one link: no temporary name to
remove, and a writer that dies midway leaves nothing behind. Elsewhere, or on a file system without
`O_TMPFILE` (or without /proc to link the unnamed file from): a named temporary file, hard-linked to the
target (the link fails if it exists), then removed.

Durable when it returns True (lakelog.store.io.local_sync): the bytes are synced before the link, so the name
never names a short file, and the folder after it, so the name survives a power loss.
"""

from __future__ import annotations

import errno
import logging
import os
import uuid

from lakelog.store.io import local_sync

logger = logging.getLogger(__name__)

_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
# What open(O_TMPFILE) or the link from /proc answer where unnamed files cannot be made or linked.
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EACCES}
# Folders whose file system refused an unnamed file: the named temporary file is used there from then on.
_named_only: set[str] = set()


def put_if_absent(uri: str, data: bytes) -> bool:
    """Create the file `uri` holding `data` if no file has that name; False if one has. Raises OSError."""
    folder = os.path.dirname(uri) or "."
    if _O_TMPFILE and folder not in _named_only:
        # One descriptor of the folder serves the unnamed file's create and the sync of its new name.
        try:
            directory = local_sync.open_folder(folder)
        except FileNotFoundError:
            local_sync.make_dirs(folder)
            directory = local_sync.open_folder(folder)
        try:
            created = _put_unnamed(uri, data, directory, folder)
            if created:
                local_sync.sync_folder_descriptor(directory)
            if created is not None:
                return created
        finally:
            os.close(directory)
    return _put_named(uri, data)


def _put_unnamed(uri: str, data: bytes, directory: int, folder: str) -> bool | None:
    """An unnamed file in the open folder `directory`, synced, then linked to `uri`: True, False if `uri` exists,
    None if the file system refused (`folder` is then in `_named_only`)."""
    try:
        descriptor = os.open(".", _O_TMPFILE | os.O_WRONLY, 0o666, dir_fd=directory)
    except OSError as error:
        if error.errno not in _UNSUPPORTED:
            raise
        _refused(folder, error)
        return None
    try:
        _write_all(descriptor, data)
        local_sync.sync_data(descriptor)
        # linkat(AT_SYMLINK_FOLLOW) of /proc/self/fd/N names the unnamed file; os.link makes that call only
        # when given a folder descriptor (ignored for an absolute path), else it calls link(), which does not follow.
        os.link(f"/proc/self/fd/{descriptor}", uri, src_dir_fd=descriptor, follow_symlinks=True)
        return True
    except FileExistsError:
        return False
    except OSError as error:
        if error.errno not in _UNSUPPORTED:
            raise
        _refused(folder, error)
        return None
    finally:
        os.close(descriptor)


def _refused(folder: str, error: OSError) -> None:
    _named_only.add(folder)
    logger.debug("%s: no unnamed files here (%s); commits go through a named temporary file", folder, error)


def _put_named(uri: str, data: bytes) -> bool:
    """A named temporary file, synced, hard-linked to `uri` (the link fails if `uri` exists, no partial file is
    seen) and removed; then the folder is synced, once for the new name and the removed one."""
    folder, name = os.path.split(uri)
    folder = folder or "."
    temporary = os.path.join(folder, f".{name}.tmp-{uuid.uuid4().hex}")
    try:
        out = open(temporary, "wb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        local_sync.make_dirs(folder)
        out = open(temporary, "wb")  # noqa: SIM115
    try:
        with out:
            out.write(data)
            out.flush()
            local_sync.sync_data(out.fileno())
        os.link(temporary, uri)
    except FileExistsError:
        return False
    finally:
        os.remove(temporary)
    local_sync.sync_folder(folder)
    return True


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


__all__ = ["put_if_absent"]
