"""The chain of a table's commits, read raw: one listing of `_delta_log`, every commit file's bytes, no snapshot loader.

Checks that no version is missing between the oldest kept commit (or the checkpoint the chain starts from) and
the newest; that each commit file is complete JSON (a power loss can leave an empty or cut file); that each is
lakelog's (commitInfo with engineInfo `lakelog` and the commit id key, S12.3); and, on a partition table, that
every append carries the log end offset `txn` and moves it by exactly its rows (S1.3). The snapshot is replayed
here from the newest readable checkpoint (or `0.json`) through the commits, stopping at the first version that is
missing or does not decode, so damage to the loader's way in does not stop the checks that follow.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from lakelog.errors import KafkaException
from lakelog.jobs.verify import findings as kinds
from lakelog.jobs.verify.findings import Finding, offsets
from lakelog.log.partition import LOG_END_OFFSET_APP_ID
from lakelog.log.partition_file import partition_file
from lakelog.store import Location
from lakelog.store.delta.actions import COMMIT_ID_KEY, ENGINE_INFO, TABLE_ID_KEY, MalformedCommit, decode_commit
from lakelog.store.delta.checkpoint import read_last_checkpoint, snapshot_from_checkpoint
from lakelog.store.delta.commit import DELETED_KEY
from lakelog.store.delta.data_file import data_file
from lakelog.store.delta.log import LAST_CHECKPOINT, DeltaLog, checkpoint_name, commit_name
from lakelog.store.delta.snapshot import Snapshot, SnapshotError

_COMMIT_FILE = re.compile(r"^(\d{20})\.json$")
_CHECKPOINT_FILE = re.compile(r"^(\d{20})\.checkpoint(?:\.(\d{10})\.(\d{10}))?\.parquet$")


@dataclass
class Chain:
    """What the log of one table holds, as read raw."""

    table: str
    commits: list[int] = field(default_factory=list)
    # Version -> number of parts (None: one file), for checkpoints whose every part is there.
    checkpoints: dict[int, int | None] = field(default_factory=dict)
    # The version `_last_checkpoint` names (None: absent or unreadable).
    named_checkpoint: int | None = None
    # Checkpoint versions that did not read.
    bad_checkpoints: list[int] = field(default_factory=list)
    # Where the replay started (-1: from nothing, at 0.json) and the version it reached.
    start: int | None = None
    snapshot: Snapshot | None = None
    # Every data file path any commit read or the start checkpoint names (an add or a remove).
    known_paths: set[str] = field(default_factory=set)
    # Each kept commit's actions, None for one that does not decode.
    actions: dict[int, list[dict[str, Any]] | None] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    # Not damage: a deletion mark a delete cut short left.
    notes: list[Finding] = field(default_factory=list)

    @property
    def first_version(self) -> int:
        """The oldest version kept: the oldest commit file, or the checkpoint the state starts from if older."""
        kept = [*self.commits, *([self.start] if self.start is not None and self.start >= 0 else [])]
        return min(kept, default=-1)

    @property
    def newest(self) -> int:
        return max([*self.commits, *self.checkpoints], default=-1)


def read_chain(location: Location, table: str, *, partition_table: bool) -> Chain | None:
    """The chain of the table at `location` (None: no `_delta_log` there); `partition_table`: check the LEO rules."""
    delta_log = DeltaLog(location)
    chain = Chain(table)
    try:
        names = list(delta_log.names())
    except (KafkaException, OSError) as error:
        chain.findings.append(Finding(table, "_delta_log", kinds.UNOPENABLE, f"the log cannot be listed: {error}"))
        return chain
    parts: dict[int, set[int]] = {}
    for name in names:
        if match := _COMMIT_FILE.match(name):
            chain.commits.append(int(match.group(1)))
        elif match := _CHECKPOINT_FILE.match(name):
            version = int(match.group(1))
            if match.group(2) is None:
                chain.checkpoints[version] = None
            else:
                parts.setdefault(version, set()).add(int(match.group(2)))
                if len(parts[version]) == int(match.group(3)):
                    chain.checkpoints.setdefault(version, int(match.group(3)))
    if not chain.commits and not chain.checkpoints:
        return None
    chain.commits.sort()
    if LAST_CHECKPOINT in names:
        _read_named_checkpoint(delta_log, chain)
    commits = chain.actions = {version: _read_commit(delta_log, chain, version) for version in chain.commits}
    _start(delta_log, chain, commits)
    _replay(chain, commits, partition_table)
    _holes(chain, commits)
    _name_lost_offsets(chain, commits)
    return chain


def _name_lost_offsets(chain: Chain, commits: dict[int, list[dict[str, Any]] | None]) -> None:
    """A commit that does not decode loses the offsets it held: say which, as for a hole."""
    unreadable = (kinds.EMPTY_COMMIT, kinds.TRUNCATED_COMMIT, kinds.MALFORMED_COMMIT)
    for index, finding in enumerate(chain.findings):
        if finding.kind in unreadable and not finding.lost and finding.where.startswith("version "):
            version = int(finding.where.split()[1])
            if commits.get(version) is None and not _held_by_start(chain, version):
                chain.findings[index] = dataclasses.replace(finding, lost=_lost_at(commits, version))
            elif commits.get(version) is None:
                held = f"{finding.message}; checkpoint {chain.start} still holds the state it made"
                chain.findings[index] = dataclasses.replace(finding, message=held)


def _held_by_start(chain: Chain, version: int) -> bool:
    """Is `version` summed up by the checkpoint the state starts from (its damage then costs no record)?"""
    return chain.start is not None and version <= chain.start


def _read_named_checkpoint(delta_log: DeltaLog, chain: Chain) -> None:
    try:
        named = read_last_checkpoint(delta_log.io.read(delta_log.file_uri(LAST_CHECKPOINT)))
    except (FileNotFoundError, KafkaException, OSError) as error:
        chain.findings.append(Finding(chain.table, LAST_CHECKPOINT, kinds.BAD_LAST_CHECKPOINT, f"unreadable: {error}"))
        return
    if named is None:
        chain.findings.append(Finding(chain.table, LAST_CHECKPOINT, kinds.BAD_LAST_CHECKPOINT, "it is not a checkpoint's JSON"))
        return
    chain.named_checkpoint = named[0]
    if named[0] not in chain.checkpoints:
        chain.findings.append(
            Finding(
                chain.table, LAST_CHECKPOINT, kinds.BAD_LAST_CHECKPOINT, f"it names checkpoint {named[0]}, which is not there"
            )
        )


def _read_commit(delta_log: DeltaLog, chain: Chain, version: int) -> list[dict[str, Any]] | None:
    """The commit's actions, or None (with its finding) if its file is empty, cut or not JSON."""
    where = f"version {version}"
    try:
        data = delta_log.read_commit_bytes(version)
    except (KafkaException, OSError) as error:
        chain.findings.append(
            Finding(chain.table, where, kinds.MALFORMED_COMMIT, f"{commit_name(version)} is unreadable: {error}")
        )
        return None
    if data is None:  # deleted between the listing and the read: the hole check names it
        return None
    if not data.strip():
        chain.findings.append(
            Finding(chain.table, where, kinds.EMPTY_COMMIT, f"{commit_name(version)} is empty ({len(data)} bytes)")
        )
        return None
    try:
        actions = decode_commit(data, commit_name(version))
    except MalformedCommit as error:
        kind = kinds.TRUNCATED_COMMIT if not data.endswith(b"\n") else kinds.MALFORMED_COMMIT
        chain.findings.append(Finding(chain.table, where, kind, f"{error} ({len(data)} bytes)"))
        return None
    if not data.endswith(b"\n"):
        # lakelog ends every commit with a newline: a file cut at a line's end still decodes, short of its actions.
        chain.findings.append(
            Finding(chain.table, where, kinds.TRUNCATED_COMMIT, f"{commit_name(version)} does not end its last line")
        )
    info = next((action["commitInfo"] for action in actions if "commitInfo" in action), None)
    if not isinstance(info, dict) or info.get("engineInfo") != ENGINE_INFO or not isinstance(info.get(COMMIT_ID_KEY), str):
        chain.findings.append(
            Finding(
                chain.table,
                where,
                kinds.FOREIGN_COMMIT,
                f"not lakelog's commit: no commitInfo with engineInfo {ENGINE_INFO!r} and {COMMIT_ID_KEY!r}",
            )
        )
    return actions


def _start(delta_log: DeltaLog, chain: Chain, commits: dict[int, list[dict[str, Any]] | None]) -> None:
    """Pick the replay's start: the named checkpoint, else the newest one that reads, else `0.json`."""
    order = sorted(chain.checkpoints, reverse=True)
    if chain.named_checkpoint in chain.checkpoints:
        order.remove(chain.named_checkpoint)
        order.insert(0, chain.named_checkpoint)
    for version in order:
        snapshot = _read_checkpoint(delta_log, chain, version)
        if snapshot is not None:
            chain.start, chain.snapshot = version, snapshot
            return
    if 0 in commits:
        chain.start, chain.snapshot = -1, Snapshot(-1)
        return
    oldest = min(chain.commits, default=0)
    chain.findings.append(
        Finding(
            chain.table,
            f"version {oldest}",
            kinds.NO_START,
            f"no readable checkpoint and no 0.json: the versions below {oldest} cannot be rebuilt",
        )
    )


def snapshot_at(location: Location, chain: Chain, version: int) -> Snapshot | None:
    """The state at `version` rebuilt from an older readable checkpoint (or `0.json`) and every commit up to it;
    None if a commit it needs is missing or does not decode."""
    delta_log = DeltaLog(location)
    starts = [c for c in sorted(chain.checkpoints, reverse=True) if c <= version and c not in chain.bad_checkpoints]
    for start in [*starts, -1]:
        if any(chain.actions.get(v) is None for v in range(start + 1, version + 1)):
            continue
        snapshot = (
            Snapshot(-1) if start < 0 else _read_checkpoint(delta_log, Chain(chain.table, checkpoints=chain.checkpoints), start)
        )
        if snapshot is None:
            continue
        try:
            for v in range(start + 1, version + 1):
                snapshot.apply(chain.actions[v] or [], v)
            snapshot.check(chain.table)
        except (KafkaException, SnapshotError, KeyError, TypeError):
            continue
        return snapshot
    return None


def _read_checkpoint(delta_log: DeltaLog, chain: Chain, version: int) -> Snapshot | None:
    parts = chain.checkpoints[version]
    names = [checkpoint_name(version)] if parts is None else [checkpoint_name(version, i, parts) for i in range(1, parts + 1)]
    tables = []
    for name in names:
        try:
            tables.append(pq.ParquetFile(pa.BufferReader(delta_log.io.read(delta_log.file_uri(name)))).read(use_threads=False))
        except (FileNotFoundError, KafkaException, OSError, pa.ArrowException) as error:
            chain.bad_checkpoints.append(version)
            chain.findings.append(
                Finding(chain.table, f"checkpoint {version}", kinds.BAD_CHECKPOINT, f"{name} is unreadable: {error}")
            )
            return None
    try:
        snapshot = snapshot_from_checkpoint(tables, version)
        snapshot.check(chain.table)
        chain.known_paths.update(snapshot.adds)
        chain.known_paths.update(snapshot.tombstones)
    except (SnapshotError, KeyError, TypeError, ValueError) as error:
        chain.bad_checkpoints.append(version)
        chain.findings.append(
            Finding(chain.table, f"checkpoint {version}", kinds.BAD_CHECKPOINT, f"its actions do not replay: {error}")
        )
        return None
    return snapshot


def _replay(chain: Chain, commits: dict[int, list[dict[str, Any]] | None], partition_table: bool) -> None:
    """Apply the commits after the start, up to the first that is missing or does not decode; check the LEO rules."""
    for actions in commits.values():
        for action in actions or ():
            for kind in ("add", "remove"):
                body = action.get(kind)
                if isinstance(body, dict) and isinstance(body.get("path"), str):
                    chain.known_paths.add(body["path"])
    snapshot = chain.snapshot
    if snapshot is None or chain.start is None:
        return
    leo = snapshot.app_version(LOG_END_OFFSET_APP_ID) or 0
    version = chain.start + 1
    while version in commits:
        actions = commits[version]
        if actions is None:
            if not _is_empty_finding(chain, version):
                break
            # An empty commit file applies nothing, as the loader took it: the replay goes on past it.
            snapshot.version = version
            version += 1
            continue
        if partition_table:
            leo = _check_log_end_offset(chain, version, actions, leo)
        _check_table(chain, snapshot, version, actions)
        try:
            snapshot.apply(actions, version)
        except (KafkaException, SnapshotError, KeyError, TypeError) as error:
            if not any(f.where == f"version {version}" for f in chain.findings):
                chain.findings.append(
                    Finding(chain.table, f"version {version}", kinds.MALFORMED_COMMIT, f"it does not replay: {error}")
                )
            break  # the state past a commit no lakelog writer made is not the table's
        version += 1
    if DELETED_KEY in snapshot.configuration:
        chain.notes.append(
            Finding(
                chain.table,
                f"version {snapshot.version}",
                kinds.MARKED_DELETED,
                "marked deleted by a delete cut short (the next delete of its topic finishes it)",
            )
        )
    if snapshot.version < 0:
        chain.snapshot = None


def _check_table(chain: Chain, snapshot: Snapshot, version: int, actions: list[dict[str, Any]]) -> None:
    """A commit names the table it was decided on (S9.5), and none follows the table's deletion mark."""
    where = f"version {version}"
    if DELETED_KEY in snapshot.configuration:
        chain.findings.append(
            Finding(
                chain.table,
                where,
                kinds.AFTER_DELETION,
                f"committed after the table was marked deleted at version {snapshot.version}",
            )
        )
    info: dict[str, Any] = next((a["commitInfo"] for a in actions if isinstance(a.get("commitInfo"), dict)), {})
    named = info.get(TABLE_ID_KEY)
    current = snapshot.table_id or next(
        (action["metaData"].get("id") for action in actions if isinstance(action.get("metaData"), dict)), None
    )
    if named is not None and named != current:
        chain.findings.append(
            Finding(
                chain.table,
                where,
                kinds.OTHER_TABLE_COMMIT,
                f"decided on table {named}, not this table ({current}): a deleted table's late writer?",
            )
        )


def _is_empty_finding(chain: Chain, version: int) -> bool:
    return any(f.kind == kinds.EMPTY_COMMIT and f.where == f"version {version}" for f in chain.findings)


def _check_log_end_offset(chain: Chain, version: int, actions: list[dict[str, Any]], leo: int) -> int:
    """S1.3: an append carries the new LEO, which follows the previous one by its rows; returns the LEO after it."""
    where = f"version {version}"
    adds = [action["add"] for action in actions if isinstance(action.get("add"), dict)]
    removes = [action for action in actions if "remove" in action]
    txn = next(
        (
            action["txn"]
            for action in actions
            if isinstance(action.get("txn"), dict) and action["txn"].get("appId") == LOG_END_OFFSET_APP_ID
        ),
        None,
    )
    if txn is None:
        if adds and not removes and any(add.get("dataChange") for add in adds):
            chain.findings.append(
                Finding(chain.table, where, kinds.MISSING_LEO, f"an append without the {LOG_END_OFFSET_APP_ID} txn")
            )
        return leo
    new_leo = txn.get("version")
    if not isinstance(new_leo, int):
        chain.findings.append(Finding(chain.table, where, kinds.MISSING_LEO, f"its {LOG_END_OFFSET_APP_ID} txn has no version"))
        return leo
    if new_leo < leo:
        chain.findings.append(Finding(chain.table, where, kinds.LEO_BACKWARDS, f"log end offset {new_leo} after {leo}"))
    elif adds and not removes:
        entries = [partition_file(data_file(add)) for add in adds if isinstance(add.get("path"), str)]
        rows = sum(entry.num_records for entry in entries)
        first = min((entry.min_offset for entry in entries), default=leo)
        if rows != new_leo - leo or first != leo:
            chain.findings.append(
                Finding(
                    chain.table,
                    where,
                    kinds.LEO_MISMATCH,
                    f"the append moves the log end offset {leo} -> {new_leo} but adds {rows} row(s) from offset {first}",
                    lost=(offsets(leo, first - 1),) if first > leo else (),
                )
            )
    return new_leo


def _holes(chain: Chain, commits: dict[int, list[dict[str, Any]] | None]) -> None:
    """A version missing between the oldest kept commit (or the start checkpoint) and the newest commit."""
    if not chain.commits:
        return
    low = min(chain.commits[0], (chain.start if chain.start is not None else chain.commits[0]) + 1)
    present = set(chain.commits)
    missing = [version for version in range(max(low, 0), chain.commits[-1]) if version not in present]
    for version in missing:
        held = _held_by_start(chain, version)
        lost = () if held else _lost_at(commits, version)
        after = (
            f"checkpoint {chain.start} still holds the state it made"
            if held
            else f"version {version + 1} and later are not in the table's state"
        )
        chain.findings.append(
            Finding(
                chain.table,
                f"version {version}",
                kinds.HOLE,
                f"{commit_name(version)} is missing; {after}",
                lost=lost,
            )
        )


def _lost_at(commits: dict[int, list[dict[str, Any]] | None], version: int) -> tuple[str, ...]:
    """The offsets a missing commit held: from the LEO before it to the first offset of the next append after it."""
    before = _leo_at_or_below(commits, version - 1)
    after = next((offsets_of(commits[v]) for v in sorted(commits) if v > version and offsets_of(commits[v]) is not None), None)
    if before is None or after is None or after[0] <= before:
        return ()
    return (offsets(before, after[0] - 1),)


def _leo_at_or_below(commits: dict[int, list[dict[str, Any]] | None], version: int) -> int | None:
    for v in sorted((v for v in commits if v <= version), reverse=True):
        for action in commits[v] or ():
            txn = action.get("txn")
            if isinstance(txn, dict) and txn.get("appId") == LOG_END_OFFSET_APP_ID and isinstance(txn.get("version"), int):
                return int(txn["version"])
    # No append at or below it: the table's create (0.json) starts at offset 0.
    return 0 if 0 in commits and version >= 0 else None


def offsets_of(actions: list[dict[str, Any]] | None) -> tuple[int, int] | None:
    """(first, last) offset an append commit's adds claim, or None if it adds nothing with offsets."""
    entries = [
        partition_file(data_file(a["add"]))
        for a in actions or ()
        if isinstance(a.get("add"), dict) and isinstance(a["add"].get("path"), str)
    ]
    entries = [entry for entry in entries if entry.num_records > 0]
    if not entries or any("remove" in a for a in actions or ()):
        return None
    return min(entry.min_offset for entry in entries), max(entry.max_offset for entry in entries)


__all__ = ["Chain", "offsets_of", "read_chain", "snapshot_at"]
