"""Put-if-absent of a whole file on a local disk: the file appears under its name complete, or not at all.

Linux: the bytes go to an unnamed file in the target's folder (`O_TMPFILE`), then `linkat` gives it the
target's name, which fails if the name exists. One create, one write, one link: no temporary name to
remove, and a writer that dies midway leaves nothing behind. Elsewhere, or on a file system without
`O_TMPFILE` (or without /proc to link the unnamed file from): a named temporary file, hard-linked to the
target (the link fails if it exists), then removed.
"""

from __future__ import annotations

import errno
import logging
import os
import uuid

logger = logging.getLogger(__name__)

_O_TMPFILE = getattr(os, "O_TMPFILE", 0)
# What open(O_TMPFILE) or the link from /proc answer where unnamed files cannot be made or linked.
_UNSUPPORTED = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOENT, errno.EXDEV, errno.EPERM, errno.EACCES}
# Folders whose file system refused an unnamed file: the named temporary file is used there from then on.
_named_only: set[str] = set()


def put_if_absent(uri: str, data: bytes) -> bool:
    """Create the file `uri` holding `data` if no file has that name; False if one has. Raises OSError."""
    folder = os.path.dirname(uri)
    if _O_TMPFILE and folder not in _named_only:
        try:
            descriptor = os.open(folder, _O_TMPFILE | os.O_WRONLY, 0o666)
        except FileNotFoundError:
            os.makedirs(folder, exist_ok=True)
            descriptor = os.open(folder, _O_TMPFILE | os.O_WRONLY, 0o666)
        except OSError as error:
            if error.errno not in _UNSUPPORTED:
                raise
            _refused(folder, error)
            return _put_named(uri, data)
        try:
            _write_all(descriptor, data)
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
        finally:
            os.close(descriptor)
    return _put_named(uri, data)


def _refused(folder: str, error: OSError) -> None:
    _named_only.add(folder)
    logger.debug("%s: no unnamed files here (%s); commits go through a named temporary file", folder, error)


def _put_named(uri: str, data: bytes) -> bool:
    """A named temporary file, hard-linked to `uri` (the link fails if `uri` exists, no partial file is seen)."""
    folder, name = os.path.split(uri)
    temporary = os.path.join(folder, f".{name}.tmp-{uuid.uuid4().hex}")
    try:
        out = open(temporary, "wb")  # noqa: SIM115 - closed below
    except FileNotFoundError:
        os.makedirs(folder, exist_ok=True)
        out = open(temporary, "wb")  # noqa: SIM115
    try:
        with out:
            out.write(data)
        os.link(temporary, uri)
        return True
    except FileExistsError:
        return False
    finally:
        os.remove(temporary)


def _write_all(descriptor: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


__all__ = ["put_if_absent"]
