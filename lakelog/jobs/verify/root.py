"""Verify a whole root: every partition of every topic (or of one) and every internal log, then the cross-checks.

Each table's chain is read raw (chain.py) and its files checked against the state the chain gives (files.py);
then the transactions open in the partitions are judged against the transaction coordinator's state and the
groups' committed offsets against the partitions' ranges (transactions.py). The loader's own open
(`Table.open`) is tried too: a table it refuses is a finding, and the checks go on from the raw chain.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from lakelog.errors import KafkaException, UnknownTopicOrPartition
from lakelog.jobs.verify import findings as kinds
from lakelog.jobs.verify.chain import Chain, read_chain
from lakelog.jobs.verify.files import check_files
from lakelog.jobs.verify.findings import Finding, PartitionSummary, offsets
from lakelog.jobs.verify.repair import repair_checkpoints
from lakelog.jobs.verify.transactions import PartitionState, check_group_offsets, check_transactions
from lakelog.log.partition import wall_clock_ms
from lakelog.log.producer_ids import PRODUCER_IDS_DIR
from lakelog.log.topics import TOPICS_DIR, internal_log_path, topic_path
from lakelog.store import Location, Table, TableNotFoundError, open_root
from lakelog.store.delta.actions import MalformedCommit
from lakelog.store.delta.snapshot import SnapshotError
from lakelog.typedef import TopicPartitionKey

# The internal logs whose partitions are partition tables, as lakelog.log.topics lays them out.
INTERNAL_LOGS = ("__transaction_state", "__consumer_offsets", "__quality_results", "__sink_batches", "__schemas", "__sweeps")


@dataclass
class VerifyReport:
    """What verify found: one summary per partition table, the findings (damage) and the notes (not damage)."""

    partitions: list[PartitionSummary] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    notes: list[Finding] = field(default_factory=list)
    repairs: list[Finding] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.findings


def verify_root(
    root: str | Location, topic: str | None = None, *, deep: bool = False, repair: bool = False, now_ms: int | None = None
) -> VerifyReport:
    """Check the root (or one topic's partitions, and the internal logs); with `repair`, repair what can be repaired
    (repair.py) and check again. `now_ms` (default: the wall clock) judges the transaction timeouts."""
    location = open_root(root)
    if topic is not None and not Table.exists(topic_path(location, topic) / "0"):
        raise UnknownTopicOrPartition(f"topic {topic} does not exist under {location.uri}", topic=topic)
    now = wall_clock_ms() if now_ms is None else now_ms
    report, chains = _verify(location, topic, deep, now)
    if not repair:
        return report
    repairs = [
        done
        for table, (table_location, chain) in sorted(chains.items())
        for done in repair_checkpoints(table_location, chain, now)
    ]
    report, _ = _verify(location, topic, deep, now)
    report.repairs = repairs
    return report


def _verify(
    location: Location, topic: str | None, deep: bool, now_ms: int
) -> tuple[VerifyReport, dict[str, tuple[Location, Chain]]]:
    report = VerifyReport()
    states: dict[TopicPartitionKey, PartitionState] = {}
    chains: dict[str, tuple[Location, Chain]] = {}
    for key, name, table_location in _partition_tables(location, topic):
        summary, chain, state = _verify_table(table_location, name, deep)
        if chain is None:
            continue
        chains[name] = (table_location, chain)
        report.partitions.append(summary)
        if state is not None:
            states[key] = state
    producer_ids = location / PRODUCER_IDS_DIR
    chain = read_chain(producer_ids, PRODUCER_IDS_DIR, partition_table=False)
    if chain is not None:
        chains[PRODUCER_IDS_DIR] = (producer_ids, chain)
        report.findings.extend(chain.findings)
    for summary in report.partitions:
        report.findings.extend(summary.findings)
        report.notes.extend(summary.notes)
    for check in (check_transactions(location, states, now_ms), check_group_offsets(location, states)):
        found, notes = check
        report.findings.extend(found)
        report.notes.extend(notes)
        for finding in found:
            for summary in report.partitions:
                if summary.table == finding.table:
                    summary.findings.append(finding)
    return report, chains


def _partition_tables(location: Location, topic: str | None) -> list[tuple[TopicPartitionKey, str, Location]]:
    """(topic or log, partition), the name the report gives it, and the folder of each partition table to check."""
    found: list[tuple[TopicPartitionKey, str, Location]] = []
    topics = location / TOPICS_DIR
    for folder in topics.children():
        if topic is not None and folder.name != topic:
            continue
        found.extend(_numbered(folder, folder.name, f"{TOPICS_DIR}/{folder.name}"))
    for log_name in INTERNAL_LOGS:
        folder = internal_log_path(location, log_name)
        found.extend(_numbered(folder, log_name, folder.uri[len(location.uri.rstrip("/")) + 1 :]))
    return found


def _numbered(folder: Location, name: str, shown: str) -> list[tuple[TopicPartitionKey, str, Location]]:
    partitions = sorted(int(child.name) for child in folder.children() if child.name.isdigit())
    return [((name, partition), f"{shown}/{partition}", folder / str(partition)) for partition in partitions]


def _verify_table(location: Location, name: str, deep: bool) -> tuple[PartitionSummary, Chain | None, PartitionState | None]:
    summary = PartitionSummary(name)
    chain = read_chain(location, name, partition_table=True)
    if chain is None:
        return summary, None, None
    summary.findings.extend(chain.findings)
    summary.notes.extend(chain.notes)
    summary.first_version, summary.last_version = chain.first_version, chain.newest
    try:
        Table.open(location)
    except (KafkaException, SnapshotError, MalformedCommit, TableNotFoundError, KeyError, TypeError, ValueError) as error:
        summary.findings.append(Finding(name, "-", kinds.UNOPENABLE, f"the log does not open: {error}"))
    if chain.snapshot is None:
        return summary, chain, None
    files = check_files(location, name, chain.snapshot, chain.known_paths, deep=deep)
    summary.findings = _lost_by_orphans(summary.findings, files.orphans)
    summary.findings.extend(files.findings)
    summary.notes.extend(files.notes)
    summary.files = len(chain.snapshot.adds)
    summary.log_start_offset, summary.log_end_offset = files.log_start_offset, files.log_end_offset
    summary.last_stable_offset = files.last_stable_offset
    state = PartitionState(name, files.log_start_offset, files.log_end_offset, files.last_stable_offset, files.open_transactions)
    return summary, chain, state


# The commits whose damage loses the records they held.
_LOSING = (kinds.EMPTY_COMMIT, kinds.TRUNCATED_COMMIT, kinds.MALFORMED_COMMIT, kinds.HOLE)


def _lost_by_orphans(found: list[Finding], orphans: dict[str, tuple[int, int] | None]) -> list[Finding]:
    """A lost commit whose offsets no later commit tells: the data file written for it (named after its version,
    as Table.append names them), left in no commit, does."""
    named = []
    for finding in found:
        if finding.kind in _LOSING and not finding.lost and "still holds" not in finding.message:
            prefix = f"part-{int(finding.where.split()[1]):020d}-"
            spans = sorted(bounds for name, bounds in orphans.items() if name.startswith(prefix) and bounds is not None)
            if spans:
                finding = dataclasses.replace(finding, lost=tuple(offsets(*span) for span in spans))
        named.append(finding)
    return named


__all__ = ["INTERNAL_LOGS", "VerifyReport", "verify_root"]
