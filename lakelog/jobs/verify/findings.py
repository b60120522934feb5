"""What `lakelog verify` reports: a finding (damage, one line each), a note (not damage), and a partition's summary."""

from __future__ import annotations

from dataclasses import dataclass, field

# The kinds of finding, as the report names them.
EMPTY_COMMIT = "empty-commit"
TRUNCATED_COMMIT = "truncated-commit"
MALFORMED_COMMIT = "malformed-commit"
FOREIGN_COMMIT = "foreign-commit"
OTHER_TABLE_COMMIT = "other-table-commit"
AFTER_DELETION = "commit-after-deletion"
MISSING_LEO = "missing-log-end-offset"
LEO_BACKWARDS = "log-end-offset-backwards"
HOLE = "hole"
NO_START = "no-start"
BAD_CHECKPOINT = "bad-checkpoint"
BAD_LAST_CHECKPOINT = "bad-last-checkpoint"
UNOPENABLE = "unopenable"
MISSING_FILE = "missing-file"
SIZE_MISMATCH = "size-mismatch"
STATISTICS_MISMATCH = "statistics-mismatch"
UNREADABLE_FILE = "unreadable-file"
CHECKSUM = "checksum"
OFFSET_GAP = "offset-gap"
OFFSET_OVERLAP = "offset-overlap"
LEO_MISMATCH = "log-end-offset-mismatch"
EPOCH_BACKWARDS = "epoch-backwards"
HANGING_TRANSACTION = "hanging-transaction"
TRANSACTION_TIMED_OUT = "transaction-timed-out"
UNRESOLVED_TRANSACTION = "unresolved-transaction"
LSO_ABOVE_HW = "lso-above-hw"
COMMITTED_OFFSET_OUT_OF_RANGE = "committed-offset-out-of-range"
UNREADABLE_COORDINATOR = "unreadable-coordinator"
CORRUPT_GROUP = "corrupt-group"
# Notes: reported, not damage (the exit code ignores them).
ORPHAN_FILE = "orphan-file"
REPAIRED = "repaired"
MARKED_DELETED = "marked-deleted"


@dataclass(frozen=True)
class Finding:
    """One thing wrong (or, as a note, worth knowing) in one table: where, what kind, and what it costs."""

    table: str
    where: str
    kind: str
    message: str
    # Offsets lost to it, as "first-last" ranges, when it costs records.
    lost: tuple[str, ...] = ()

    def line(self) -> str:
        """The finding as the report prints it."""
        lost = f" (offsets lost: {', '.join(self.lost)})" if self.lost else ""
        return f"{self.table}\t{self.where}\t{self.kind}\t{self.message}{lost}"


@dataclass
class PartitionSummary:
    """One row of the report's table: a partition table's versions, files, offsets, LSO, HW and status."""

    table: str
    first_version: int = -1
    last_version: int = -1
    files: int = 0
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    last_stable_offset: int | None = None
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)

    def row(self) -> list[str]:
        """partition, versions, files, offsets, LSO, HW, status."""
        versions = "-" if self.last_version < 0 else f"{self.first_version}-{self.last_version}"
        if self.log_end_offset is None:
            offsets = "?"
        elif self.log_end_offset == 0:
            offsets = "-"
        elif self.log_start_offset is None or self.log_start_offset >= self.log_end_offset:
            offsets = f"none below {self.log_end_offset}"
        else:
            offsets = f"{self.log_start_offset}-{self.log_end_offset - 1}"
        status = "ok" if not self.findings else f"{len(self.findings)} finding(s)"
        lso = "?" if self.last_stable_offset is None else str(self.last_stable_offset)
        hw = "?" if self.log_end_offset is None else str(self.log_end_offset)
        return [self.table, versions, str(self.files), offsets, lso, hw, status]


SUMMARY_HEADERS = ("partition", "versions", "files", "offsets", "LSO", "HW", "status")
FINDING_HEADERS = ("table", "where", "kind", "finding")


def offsets(first: int, last: int) -> str:
    """An offset range as a finding names it."""
    return str(first) if first == last else f"{first}-{last}"


__all__ = ["FINDING_HEADERS", "Finding", "PartitionSummary", "SUMMARY_HEADERS", "offsets"]
