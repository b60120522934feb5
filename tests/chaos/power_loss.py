"""A simulated power loss of a local root: what lakelog's processes never synced is lost, as POSIX allows.

Use (Linux; a test or the chaos checker):

    journal = power_loss.start(root, tmp_path / "power-loss")   # what is under `root` now counts as durable
    child = subprocess.Popen([sys.executable, ...], env=power_loss.environment(journal))
    ...                                                          # the child writes; it is acknowledged
    child.kill(); child.wait()                                   # SIGKILL: the machine stops
    report = power_loss.lose_power(journal)                      # the root as the power loss leaves it
    assert not report.touched("topics/t/0/_delta_log/00000000000000000001.json"), report

API:
- `start(root, journal_dir, *, syncs=True) -> Journal`: begins a journal in `journal_dir` (a new folder on the
  same file system as `root`, not under it). Everything under `root` at this point counts as durable
  (`os.sync()` makes it so). `syncs=False`: the journaled processes' `os.fsync`/`os.fdatasync` do nothing
  (to prove a test would see a missing sync).
- `environment(journal, base=None) -> dict`: the environment (default: this one's) for a child process whose
  writes under the root are journaled; its own children inherit it. It puts a `sitecustomize` first on
  PYTHONPATH (and tests/ after it, for `chaos`), which calls `install_from_environment()`.
- `install(journal) -> uninstall`: journals this process's own writes (the child does it at start-up).
  Only journaled processes may write under the root after `start`: any other write is taken as never synced.
- `lose_power(journal) -> Report`: after every journaled process is dead (SIGKILL them), rewrites the root to
  the worst state a power loss could leave. `Report.dropped` (names removed, a folder's with a trailing
  `/`), `.truncated` (path, size before, size after), `.restored` (names put back: a rename or removal that
  was never synced, undone), `.unrestorable` (durable names whose file is gone: deleted by code that is not
  journaled); `.touched(path)` says whether a path is in any of them; `str(report)` lists everything.

The model (the strictest POSIX reading; a real file system, ext4 say, often keeps more):
- A file's bytes are durable up to the size they had when an `fsync` or `fdatasync` of it began (both carry
  the size on Linux); a file created or truncated since has none. After the loss each durable name's file
  is cut to its inode's durable size: a name whose bytes were never synced names an empty file.
- A folder's names are those it held when an `fsync` of it began, or at `start`; a name made since (a
  link, a rename, a `mkdir`, a file created under its name) is dropped, a name removed or renamed away
  comes back with its old file (a removed or replaced file is kept aside, hard-linked in the journal, when
  a journaled process removes or replaces it). `fdatasync` of a folder promises no name: it counts for none.
- A folder that is not durable in its parent is dropped with all it holds.

What is journaled, one JSON line per event (`events.jsonl`, appended with O_APPEND by every process): a file
created or truncated (`os.open` with O_CREAT or O_TMPFILE, `open()` for writing), synced (the size when the
sync began), a folder synced (its names and inodes, read before the sync), and a file removed or replaced
(`os.unlink`, `os.remove`, `os.replace`, `os.rename`). Writes and links are not: the state each sync
captures is what counts. Events sort by CLOCK_MONOTONIC, which all processes of a machine share.
Limits: code that writes through C++ (pyarrow's file system, delta-rs) is not journaled: its files count as
never synced and what it removes cannot be put back. lakelog's local root writes only through Python.
"""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
import stat
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ENVIRONMENT = "LAKELOG_POWER_LOSS_JOURNAL"
TESTS_DIR = Path(__file__).resolve().parents[1]
_CONFIG = "config.json"
_EVENTS = "events.jsonl"
_SHADOW = "kept"
_BOOT = "boot"
_O_TMPFILE = getattr(os, "O_TMPFILE", 0)


@dataclass(frozen=True)
class Journal:
    """A power-loss journal: its folder, and the root whose writes it follows."""

    folder: Path
    root: str

    @property
    def events(self) -> Path:
        return self.folder / _EVENTS


def start(root: str | os.PathLike[str], journal_dir: str | os.PathLike[str], *, syncs: bool = True) -> Journal:
    """Begin a journal of `root` in the new folder `journal_dir`: what is under `root` now counts as durable."""
    root_path = os.path.realpath(root)
    folder = Path(journal_dir).resolve()
    if str(folder).startswith(root_path + os.sep):
        raise ValueError(f"the journal {folder} must not be under the root {root_path}")
    (folder / _SHADOW).mkdir(parents=True)
    (folder / _CONFIG).write_text(json.dumps({"root": root_path, "syncs": syncs}))
    os.sync()
    journal = Journal(folder, root_path)
    writer = _Writer(journal.events)
    for path, entries in _walk(root_path):
        writer.event("baseline-dir", dir=_key(os.lstat(path)), path=_relative(root_path, path), entries=entries)
        for name, (key, is_dir) in entries.items():
            if not is_dir:
                writer.event("baseline-file", file=key, size=os.lstat(os.path.join(path, name)).st_size)
    writer.close()
    return journal


def environment(journal: Journal, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process whose writes under the journal's root are journaled."""
    boot = journal.folder / _BOOT
    boot.mkdir(exist_ok=True)
    (boot / "sitecustomize.py").write_text("from chaos import power_loss\n\npower_loss.install_from_environment()\n")
    env = dict(os.environ if base is None else base)
    path = [str(boot), str(TESTS_DIR)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    return {**env, "PYTHONPATH": os.pathsep.join(path), ENVIRONMENT: str(journal.folder)}


def install_from_environment() -> None:
    """Install the journal named by $LAKELOG_POWER_LOSS_JOURNAL, if set (a child's sitecustomize calls this)."""
    folder = os.environ.get(ENVIRONMENT)
    if folder:
        config = json.loads(Path(folder, _CONFIG).read_text())
        install(Journal(Path(folder), config["root"]))


def install(journal: Journal) -> Callable[[], None]:
    """Journal this process's writes under the journal's root; returns the call that stops it."""
    config = json.loads((journal.folder / _CONFIG).read_text())
    hooks = _Hooks(journal, bool(config["syncs"]))
    replaced = {
        (os, "open"): hooks.os_open,
        (os, "fsync"): hooks.fsync,
        (os, "fdatasync"): hooks.fdatasync,
        (os, "replace"): hooks.replace,
        (os, "rename"): hooks.rename,
        (os, "unlink"): hooks.unlink,
        (os, "remove"): hooks.remove,
        (builtins, "open"): hooks.open,
        (io, "open"): hooks.open,
    }
    originals = {place: getattr(*place) for place in replaced}
    for (module, name), hook in replaced.items():
        setattr(module, name, hook)

    def uninstall() -> None:
        for (module, name), original in originals.items():
            setattr(module, name, original)
        hooks.writer.close()

    return uninstall


class _Real:
    """The functions the hooks replace, as they were."""

    def __init__(self) -> None:
        self.open = builtins.open
        self.os_open = os.open
        self.fsync = os.fsync
        self.fdatasync = os.fdatasync
        self.replace = os.replace
        self.rename = os.rename
        self.unlink = os.unlink
        self.remove = os.remove
        self.write = os.write
        self.link = os.link


class _Writer:
    """Appends events to the journal: one whole line per os.write on an O_APPEND descriptor."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.real = _Real()
        self._descriptor: int | None = None
        self._pid = -1

    def event(self, kind: str, at: int | None = None, **fields: object) -> None:
        if self._descriptor is None or self._pid != os.getpid():
            self._descriptor = self.real.os_open(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self._pid = os.getpid()
        line = json.dumps({"t": time.monotonic_ns() if at is None else at, "pid": self._pid, "kind": kind, **fields})
        self.real.write(self._descriptor, (line + "\n").encode())

    def close(self) -> None:
        if self._descriptor is not None and self._pid == os.getpid():
            os.close(self._descriptor)
        self._descriptor = None


class _Hooks:
    """The journaling stand-ins of os.open, open(), the syncs, and the calls that remove or replace a name."""

    def __init__(self, journal: Journal, syncs: bool) -> None:
        self.root = journal.root
        self.kept = journal.folder / _SHADOW
        self.syncs = syncs
        self.real = _Real()
        self.writer = _Writer(journal.events)

    def _under_root(self, descriptor: int) -> str | None:
        """The path of an open descriptor if it is under the root (an unnamed file's: its folder's `#N (deleted)`)."""
        try:
            path = os.readlink(f"/proc/self/fd/{descriptor}")
        except OSError:
            return None
        return path if path == self.root or path.startswith(self.root + os.sep) else None

    def _created(self, descriptor: int, fresh: bool) -> None:
        if self._under_root(descriptor) is None:
            return
        found = os.fstat(descriptor)
        if stat.S_ISREG(found.st_mode) and (fresh or found.st_size == 0):
            self.writer.event("create", file=_key(found))

    def os_open(self, path, flags, mode=0o777, *, dir_fd=None):
        descriptor = self.real.os_open(path, flags, mode, dir_fd=dir_fd)
        unnamed = bool(_O_TMPFILE) and flags & _O_TMPFILE == _O_TMPFILE
        if unnamed or flags & os.O_CREAT:
            self._created(descriptor, unnamed or bool(flags & (os.O_EXCL | os.O_TRUNC)))
        return descriptor

    def open(self, file, mode="r", *args, **kwargs):
        opened = self.real.open(file, mode, *args, **kwargs)
        if not isinstance(file, int) and any(char in mode for char in "wxa+"):
            self._created(opened.fileno(), "w" in mode or "x" in mode)
        return opened

    def fsync(self, descriptor):
        return self._sync(descriptor, self.real.fsync, names=True)

    def fdatasync(self, descriptor):
        return self._sync(descriptor, self.real.fdatasync, names=False)

    def _sync(self, descriptor, real: Callable[[int], None], names: bool) -> None:
        descriptor = descriptor if isinstance(descriptor, int) else descriptor.fileno()
        if not self.syncs:
            return None
        path = self._under_root(descriptor)
        if path is None:
            return real(descriptor)
        found = os.fstat(descriptor)
        began = time.monotonic_ns()
        if stat.S_ISDIR(found.st_mode):
            try:
                entries = _entries(path)  # read before the sync: a name made during it may not be durable
            except OSError:  # a folder removed while open: nothing of it is left to keep
                return real(descriptor)
            real(descriptor)
            if names:
                self.writer.event("dirsync", at=began, dir=_key(found), path=_relative(self.root, path), entries=entries)
            return None
        real(descriptor)
        if stat.S_ISREG(found.st_mode):
            self.writer.event("sync", at=began, file=_key(found), size=found.st_size)
        return None

    def _keep(self, path, dir_fd=None) -> None:
        """Hard-link a file about to lose a name into the journal, so a power loss can put the name back."""
        try:
            base = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else os.getcwd()
            full = os.path.join(base, os.fsdecode(path))
            if not full.startswith(self.root + os.sep):
                return
            found = os.lstat(full)
        except OSError:
            return
        if stat.S_ISREG(found.st_mode):
            target = self.kept / _key(found)
            if not target.exists():
                _preserve(full, str(target))
                self.writer.event("kept", file=_key(found), path=str(target))

    def replace(self, source, target, *, src_dir_fd=None, dst_dir_fd=None):
        self._keep(target, dst_dir_fd)
        return self.real.replace(source, target, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def rename(self, source, target, *, src_dir_fd=None, dst_dir_fd=None):
        self._keep(target, dst_dir_fd)
        return self.real.rename(source, target, src_dir_fd=src_dir_fd, dst_dir_fd=dst_dir_fd)

    def unlink(self, path, *, dir_fd=None):
        self._keep(path, dir_fd)
        return self.real.unlink(path, dir_fd=dir_fd)

    def remove(self, path, *, dir_fd=None):
        self._keep(path, dir_fd)
        return self.real.remove(path, dir_fd=dir_fd)


# -- the power loss ------------------------------------------------------------------------------------------------


@dataclass
class Report:
    """What a power loss took: names dropped, files cut short, names put back, durable names with no file left."""

    dropped: list[str] = field(default_factory=list)
    truncated: list[tuple[str, int, int]] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    unrestorable: list[str] = field(default_factory=list)
    events: int = 0

    def touched(self, path: str) -> bool:
        """Whether the power loss dropped, cut, put back or could not keep `path` (relative to the root)."""
        path = path.strip("/")
        return (
            path in self.dropped
            or path + "/" in self.dropped
            or any(cut == path for cut, _, _ in self.truncated)
            or path in self.restored
            or path in self.unrestorable
        )

    def __str__(self) -> str:
        lines = [f"power loss after {self.events} journaled events:"]
        lines += [f"  dropped {path}" for path in self.dropped]
        lines += [f"  truncated {path} {before} -> {after} bytes" for path, before, after in self.truncated]
        lines += [f"  restored {path}" for path in self.restored]
        lines += [f"  unrestorable {path}" for path in self.unrestorable]
        return "\n".join(lines if len(lines) > 1 else [*lines, "  nothing lost"])


def lose_power(journal: Journal) -> Report:
    """Rewrite the journal's root to what a power loss could leave of it (every journaled process must be dead)."""
    events = [json.loads(line) for line in journal.events.read_text().splitlines() if line.strip()]
    events.sort(key=lambda event: event["t"])
    durable_size: dict[str, int] = {}
    names: dict[str, dict[str, list]] = {}
    kept: dict[str, str] = {}
    for event in events:
        kind = event["kind"]
        if kind in ("baseline-file", "sync"):
            durable_size[event["file"]] = event["size"]
        elif kind == "create":
            durable_size[event["file"]] = 0
        elif kind in ("baseline-dir", "dirsync"):
            names[event["dir"]] = event["entries"]
        elif kind == "kept":
            kept[event["file"]] = event["path"]
    report = Report(events=len(events))
    root = journal.root
    holding = journal.folder / "holding"
    holding.mkdir(exist_ok=True)
    # Every durable file, wherever its inode is now (a later name, or kept aside), held by a link while names move.
    for path, _ in _walk(root):
        for name, (key, is_dir) in _entries(path).items():
            if not is_dir and not (holding / key).exists():
                _preserve(os.path.join(path, name), str(holding / key))
    for key, path in kept.items():
        if not (holding / key).exists() and os.path.exists(path):
            _preserve(path, str(holding / key))
    _restore(root, "", _key(os.lstat(root)), names, durable_size, holding, report, set())
    shutil.rmtree(holding)
    return report


def _restore(
    root: str,
    relative: str,
    key: str,
    names: dict[str, dict[str, list]],
    durable_size: dict[str, int],
    holding: Path,
    report: Report,
    cut: set[str],
) -> None:
    """Make the folder `relative` hold exactly its durable names (those of the folder inode `key`), recursively."""
    folder = os.path.join(root, relative)
    wanted = {name: (entry_key, is_dir) for name, (entry_key, is_dir) in names.get(key, {}).items()}
    for name, (entry_key, is_dir) in sorted(_entries(folder).items()):
        if wanted.get(name) != (entry_key, is_dir):
            shown = _join(relative, name)
            if is_dir:
                shutil.rmtree(os.path.join(folder, name))
                report.dropped.append(shown + "/")
            else:
                os.unlink(os.path.join(folder, name))
                report.dropped.append(shown)
    present = _entries(folder)
    for name, (entry_key, is_dir) in sorted(wanted.items()):
        shown = _join(relative, name)
        path = os.path.join(folder, name)
        if is_dir:
            if name not in present:
                os.mkdir(path)
                report.restored.append(shown + "/")
            _restore(root, shown, entry_key, names, durable_size, holding, report, cut)
            continue
        if name not in present:
            if not (holding / entry_key).exists():
                report.unrestorable.append(shown)
                continue
            os.link(holding / entry_key, path)
            report.restored.append(shown)
        size = durable_size.get(entry_key, 0)
        before = os.lstat(path).st_size
        if entry_key not in cut and before > size:
            os.truncate(path, size)
            cut.add(entry_key)
            report.truncated.append((shown, before, size))


def _walk(top: str) -> Iterator[tuple[str, dict[str, list]]]:
    """Each folder under `top` (itself first) with its entries, without following links."""
    entries = _entries(top)
    yield top, entries
    for name, (_, is_dir) in sorted(entries.items()):
        if is_dir:
            yield from _walk(os.path.join(top, name))


def _entries(folder: str) -> dict[str, list]:
    """A folder's names: name -> [inode key, is a folder] (from the folder's own records: no stat per name)."""
    device = os.lstat(folder).st_dev
    with os.scandir(folder) as scan:
        return {entry.name: [f"{device}-{entry.inode()}", entry.is_dir(follow_symlinks=False)] for entry in scan}


def _key(found: os.stat_result) -> str:
    return f"{found.st_dev}-{found.st_ino}"


def _relative(root: str, path: str) -> str:
    return "" if path == root else os.path.relpath(path, root)


def _join(relative: str, name: str) -> str:
    return f"{relative}/{name}" if relative else name


def _preserve(source: str, target: str) -> None:
    """Another name for `source`'s file (a hard link; a copy across file systems)."""
    try:
        os.link(source, target)
    except OSError as error:
        if error.errno != errno.EXDEV:
            raise
        shutil.copyfile(source, target)


__all__ = ["ENVIRONMENT", "Journal", "Report", "environment", "install", "install_from_environment", "lose_power", "start"]
