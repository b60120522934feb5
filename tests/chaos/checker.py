"""Judge a history (tests/chaos/history.py): pure functions, history -> {anomaly class: [examples]}.

The classes are those of Jepsen's Kafka workload (`jepsen/tests/kafka.clj`), defined here over
lakelog's guarantees. Terms used below:

- A *write* is an acknowledged send: key k, offset o, value v. Its *outcome* is that of its
  transaction: committed when a commit of it completed ok, aborted when an abort completed ok (and
  no commit did), unknown otherwise (the process died, or its end failed and nothing ended it). A
  send outside a transaction is committed when acknowledged.
- A *read* is one (k, o, v) of a poll that completed ok.
- The *offset log* of k: every (o, v) that any write acknowledged or any read returned, aborted
  rows included (an aborted row still holds its offset: S1.1, offsets are never renumbered).
- The *visible order* of k: the offsets of committed writes and of read_committed reads (but of
  values whose write aborted: those are aborted reads), ranked
  densely from 0: the *index* of each offset there. Aborted rows
  and control markers take offsets but no index, so a read_committed reader steps index by index.
  The index of a read or write is that of its offset.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from chaos.history import INVOKE, OK, Op

COMMITTED, ABORTED, UNKNOWN = "committed", "aborted", "unknown"
READ_COMMITTED = "read_committed"

ANOMALIES = (
    "lost-write",
    "duplicate",
    "aborted-read",
    "precommitted-read",
    "nonmonotonic-poll",
    "nonmonotonic-send",
    "poll-skip",
    "inconsistent-offsets",
)


@dataclass(frozen=True)
class Write:
    process: str
    key: str
    offset: int
    value: str
    txn: int | None
    outcome: str
    commit_invoked: int | None  # when its transaction's first commit was asked for (None: never)


@dataclass(frozen=True)
class Read:
    process: str
    key: str
    offset: int
    value: str
    isolation: str | None
    txn: int | None
    time: int


@dataclass
class Analysis:
    """What the checks share: writes, reads, offset logs and visible orders per key."""

    history: list[Op]
    writes: list[Write] = field(default_factory=list)
    reads: list[Read] = field(default_factory=list)
    # (key, value) -> its writes; a value may be sent again (a retried transaction re-sends its output).
    writes_of: dict[tuple[str, str], list[Write]] = field(default_factory=lambda: defaultdict(list))
    offset_log: dict[str, dict[int, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    visible: dict[str, dict[int, set[str]]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(set)))
    rank_of: dict[str, dict[int, int]] = field(default_factory=dict)
    by_index: dict[str, list[set[str]]] = field(default_factory=dict)
    # Reads whose offset is no offset (damage read as data): they take no place in any order.
    offsetless: list[Read] = field(default_factory=list)


def transaction_outcomes(history: Iterable[Op]) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], int]]:
    """(process, txn) -> outcome, and -> when its first commit was invoked."""
    ended: dict[tuple[str, int], set[str]] = defaultdict(set)
    commit_invoked: dict[tuple[str, int], int] = {}
    for op in history:
        if op.txn is None:
            continue
        transaction = (op.process, op.txn)
        ended.setdefault(transaction, set())
        if op.f == "commit" and op.type == INVOKE:
            commit_invoked.setdefault(transaction, op.time)
        elif op.f in ("commit", "abort") and op.type == OK:
            ended[transaction].add(op.f)
    outcomes = {
        transaction: COMMITTED if "commit" in ends else ABORTED if "abort" in ends else UNKNOWN
        for transaction, ends in ended.items()
    }
    return outcomes, commit_invoked


def analyse(history: list[Op]) -> Analysis:
    analysis = Analysis(history)
    outcomes, commit_invoked = transaction_outcomes(history)
    for op in history:
        if op.f == "send" and op.type == OK:
            for key, offset, value in op.value:
                transaction = (op.process, op.txn)
                outcome = COMMITTED if op.txn is None else outcomes.get(transaction, UNKNOWN)
                write = Write(op.process, key, offset, value, op.txn, outcome, commit_invoked.get(transaction))
                analysis.writes.append(write)
                analysis.writes_of[(key, value)].append(write)
                analysis.offset_log[key][offset].add(value)
                if outcome == COMMITTED:
                    analysis.visible[key][offset].add(value)
    for op in history:
        if op.f == "poll" and op.type == OK:
            for key, pairs in op.value.items():
                for offset, value in pairs:
                    if not isinstance(offset, int):
                        analysis.offsetless.append(Read(op.process, key, offset, value, op.isolation, op.txn, op.time))
                        continue
                    analysis.reads.append(Read(op.process, key, offset, value, op.isolation, op.txn, op.time))
                    analysis.offset_log[key][offset].add(value)
                    writer = writer_of(analysis, key, offset, value)
                    if op.isolation == READ_COMMITTED and (writer is None or writer.outcome != ABORTED):
                        analysis.visible[key][offset].add(value)
    for key, log in analysis.visible.items():
        offsets = sorted(log)
        analysis.rank_of[key] = {offset: index for index, offset in enumerate(offsets)}
        analysis.by_index[key] = [log[offset] for offset in offsets]
    return analysis


def writer_of(analysis: Analysis, key: str, offset: int, value: str) -> Write | None:
    """The write a read of (key, offset, value) returned: the one acknowledged at that offset, else
    the only write of that value (None when there is none, or several elsewhere)."""
    writes = analysis.writes_of.get((key, value), [])
    at_offset = [write for write in writes if write.offset == offset]
    if at_offset:
        return at_offset[0]
    return writes[0] if len(writes) == 1 else None


def inconsistent_offsets(analysis: Analysis) -> list[dict]:
    """An offset of a key that holds more than one value: two acknowledgements or reads disagree on
    what is at (k, o) (Jepsen: the version orders' errors); and a read of a value at no offset at all."""
    return [
        {"key": key, "offset": offset, "values": sorted(values, key=repr)}  # a damaged value may be None
        for key, log in analysis.offset_log.items()
        for offset, values in sorted(log.items())
        if len(values) > 1
    ] + [{"key": read.key, "offset": read.offset, "values": [read.value], "reader": read.process} for read in analysis.offsetless]


def duplicates(analysis: Analysis) -> list[dict]:
    """A value at more than one offset of a key's visible order: one send, visible twice."""
    offsets: dict[tuple[str, str], list[int]] = defaultdict(list)
    for key, log in analysis.visible.items():
        for offset, values in log.items():
            for value in values:
                offsets[(key, value)].append(offset)
    return [{"key": key, "value": value, "offsets": sorted(found)} for (key, value), found in offsets.items() if len(found) > 1]


def lost_writes(analysis: Analysis) -> list[dict]:
    """A committed write that no read_committed read returned although one returned a value after
    it: with `bound` the highest index a read_committed read of k reached, a committed write of k at
    an index <= bound that no read_committed poll of any process returned (Jepsen: lost-write-cases;
    read_uncommitted reads see rows, not what committed, so they neither raise the bound nor clear a write).
    And a committed write an end of partition passed over (`ended_before`)."""
    read_values: dict[str, set[str]] = defaultdict(set)
    bound: dict[str, int] = {}
    for read in analysis.reads:
        if read.isolation != READ_COMMITTED:
            continue
        read_values[read.key].add(read.value)
        index = analysis.rank_of.get(read.key, {}).get(read.offset)
        if index is not None:
            bound[read.key] = max(bound.get(read.key, -1), index)
    lost = []
    for write in analysis.writes:
        index = analysis.rank_of.get(write.key, {}).get(write.offset)
        if write.outcome != COMMITTED or index is None or write.key not in bound:
            continue
        if index <= bound[write.key] and write.value not in read_values[write.key]:
            lost.append(
                {
                    "key": write.key,
                    "offset": write.offset,
                    "value": write.value,
                    "index": index,
                    "max_read_index": bound[write.key],
                    "writer": write.process,
                }
            )
    return lost + ended_before(analysis)


def ended_before(analysis: Analysis) -> list[dict]:
    """A committed write at or past where a consumer then found the end of its partition: the `eof` came
    after the write was acknowledged, at a position <= its offset, so the log ends before an acknowledged
    record (a read that stops short is no poll skip; Jepsen's unseen, at a final read). Only ends that
    every earlier write of the key had settled before count: an open transaction holds the LSO back."""
    ended_at: dict[tuple[str, int], int] = {}
    for op in analysis.history:
        if op.f in ("commit", "abort") and op.type == OK and op.txn is not None:
            ended_at.setdefault((op.process, op.txn), op.time)
    # key -> its writes in the order they were acknowledged, with when, and the running highest committed offset.
    acknowledged: dict[str, list[tuple[int, Write]]] = defaultdict(list)
    for op in analysis.history:
        if op.f == "send" and op.type == OK:
            for key, offset, value in op.value:
                write = next(w for w in analysis.writes_of[(key, value)] if w.offset == offset and w.process == op.process)
                acknowledged[key].append((op.time, write))
    highest: dict[str, list[int]] = {}
    for key, writes in acknowledged.items():
        running, top = [], -1
        for _, write in writes:
            top = max(top, write.offset) if write.outcome == COMMITTED else top
            running.append(top)
        highest[key] = running
    lost: list[dict] = []
    for op in analysis.history:
        if op.f != "eof" or op.type != OK:
            continue
        for key, end in op.value.items():
            count = bisect.bisect_left([time for time, _ in acknowledged.get(key, [])], op.time)
            if count == 0 or highest[key][count - 1] < end:
                continue  # every committed write acknowledged before this end lies before it
            before = [write for _, write in acknowledged[key][:count]]
            if any(w.txn is not None and ended_at.get((w.process, w.txn), op.time) >= op.time for w in before):
                continue
            lost.extend(
                {"key": key, "offset": w.offset, "value": w.value, "end": end, "reader": op.process, "writer": w.process}
                for w in before
                if w.outcome == COMMITTED and w.offset >= end
            )
    return lost


def aborted_reads(analysis: Analysis) -> list[dict]:
    """G1a: a read_committed poll returned a value whose transaction aborted (S5.2)."""
    found = []
    for read in analysis.reads:
        write = writer_of(analysis, read.key, read.offset, read.value)
        if read.isolation == READ_COMMITTED and write is not None and write.outcome == ABORTED:
            found.append(
                {
                    "key": read.key,
                    "offset": read.offset,
                    "value": read.value,
                    "reader": read.process,
                    "writer": write.process,
                    "txn": write.txn,
                }
            )
    return found


def precommitted_reads(analysis: Analysis) -> list[dict]:
    """A read_committed poll returned a transactional value before that transaction could have
    committed: the poll is the writer's own transaction (Jepsen's case), or it completed before the
    writer asked to commit (or the writer never did). An aborted writer's value is an aborted read."""
    found = []
    for read in analysis.reads:
        write = writer_of(analysis, read.key, read.offset, read.value)
        if read.isolation != READ_COMMITTED or write is None or write.txn is None or write.outcome == ABORTED:
            continue
        own = read.process == write.process and read.txn == write.txn
        early = write.commit_invoked is None or read.time < write.commit_invoked
        if own or early:
            found.append(
                {
                    "key": read.key,
                    "offset": read.offset,
                    "value": read.value,
                    "reader": read.process,
                    "writer": write.process,
                    "txn": write.txn,
                    "own": own,
                }
            )
    return found


def poll_order(analysis: Analysis) -> tuple[list[dict], list[dict]]:
    """(nonmonotonic polls, poll skips). Each process's successive reads of a key, within a poll and
    across its polls, must step exactly one index of the visible order: a step < 1 is a nonmonotonic
    poll (read again or backwards), a step > 1 a poll skip (a visible value passed over). An `assign`
    of the key starts its sequence again; reads with no index (aborted rows) are not steps."""
    nonmonotonic, skips = [], []
    last: dict[str, dict[str, tuple[int, str]]] = defaultdict(dict)
    for op in analysis.history:
        if op.type != OK:
            continue
        if op.f == "assign":
            for key in op.value:
                last[op.process].pop(key, None)
        elif op.f == "poll":
            for key, pairs in op.value.items():
                for offset, value in pairs:
                    index = analysis.rank_of.get(key, {}).get(offset)
                    if index is None:
                        continue
                    before = last[op.process].get(key)
                    if before is not None:
                        step = index - before[0]
                        example = {"process": op.process, "key": key, "values": [before[1], value], "step": step}
                        if step < 1:
                            nonmonotonic.append(example)
                        elif step > 1:
                            skipped = [sorted(v) for v in analysis.by_index[key][before[0] + 1 : index]]
                            skips.append({**example, "skipped": skipped[:5]})
                    last[op.process][key] = (index, value)
    return nonmonotonic, skips


def nonmonotonic_sends(analysis: Analysis) -> list[dict]:
    """A process's successive acknowledged sends to a key that do not go forward: the later send's
    offset is at or below the earlier one's (one producer's appends to a partition are in order)."""
    found = []
    last: dict[tuple[str, str], tuple[int, str]] = {}
    for op in analysis.history:
        if op.f != "send" or op.type != OK:
            continue
        for key, offset, value in op.value:
            before = last.get((op.process, key))
            if before is not None and offset <= before[0]:
                found.append({"process": op.process, "key": key, "offsets": [before[0], offset], "values": [before[1], value]})
            last[(op.process, key)] = (offset, value)
    return found


def check(history: list[Op]) -> dict[str, list[dict]]:
    """Every anomaly class (ANOMALIES) -> its examples; empty lists for a clean history."""
    analysis = analyse(history)
    nonmonotonic, skips = poll_order(analysis)
    return {
        "lost-write": lost_writes(analysis),
        "duplicate": duplicates(analysis),
        "aborted-read": aborted_reads(analysis),
        "precommitted-read": precommitted_reads(analysis),
        "nonmonotonic-poll": nonmonotonic,
        "nonmonotonic-send": nonmonotonic_sends(analysis),
        "poll-skip": skips,
        "inconsistent-offsets": inconsistent_offsets(analysis),
    }


# -- storage faults: what became of each -----------------------------------------------------------

CORRUPT = "CORRUPT_MESSAGE"
# survived: no client met an error on its partition after it, and no anomaly is on it; refused: a client met
# CorruptRecord there, and no anomaly; harmed: an anomaly on its partition (damage taken for truth); wrong-error: a
# client failed there with another error (a retriable one retried forever, a raw one) and nothing refused it.
FAULT_OUTCOMES = ("survived", "refused", "harmed", "wrong-error")


def fault_outcomes(history: list[Op], result: dict[str, list[dict]]) -> list[dict]:
    """Each injected fault (a `fault` op) with its outcome (FAULT_OUTCOMES), judged by the errors recorded on
    its key after it and the anomalies of `result` (check's) on that key."""
    harmed = {example["key"] for examples in result.values() for example in examples if "key" in example}
    faults = [op for op in history if op.f == "fault"]
    errors = [op for op in history if op.f == "error"]
    judged = []
    for fault in faults:
        key = fault.value["key"]  # None: the whole root (a power loss), every key's errors and anomalies count
        names = {error.value["name"] for error in errors if key in (None, error.value.get("key")) and error.time >= fault.time}
        if key in harmed or (key is None and harmed):
            outcome = "harmed"
        elif CORRUPT in names:
            outcome = "refused"
        elif names:
            outcome = "wrong-error"
        else:
            outcome = "survived"
        judged.append({**fault.value, "outcome": outcome, "errors": sorted(names)})
    return judged


def fault_tally(outcomes: Iterable[dict]) -> dict[str, dict[str, int]]:
    """Fault kind -> {outcome: count} (every outcome named, zeros too)."""
    tally: dict[str, dict[str, int]] = {}
    for fault in outcomes:
        row = tally.setdefault(fault["kind"], dict.fromkeys(FAULT_OUTCOMES, 0))
        row[fault["outcome"]] += 1
    return tally


def fault_table(tally: dict[str, dict[str, int]]) -> str:
    """Faults injected per kind and what became of them, one row each, and a total row."""
    width = max([len("fault"), len("total"), *map(len, tally)])
    columns = ("injected", *FAULT_OUTCOMES)
    rows = [f"{'fault':<{width}}  " + "  ".join(columns)]
    totals = dict.fromkeys(FAULT_OUTCOMES, 0)
    for kind in sorted(tally):
        counts = tally[kind]
        for outcome in FAULT_OUTCOMES:
            totals[outcome] += counts.get(outcome, 0)
        rows.append(_fault_row(kind, counts, width, columns))
    rows.append(_fault_row("total", totals, width, columns))
    return "\n".join(rows)


def _fault_row(name: str, counts: dict[str, int], width: int, columns: tuple[str, ...]) -> str:
    cells = [sum(counts.values()), *(counts.get(outcome, 0) for outcome in FAULT_OUTCOMES)]
    return f"{name:<{width}}  " + "  ".join(f"{cell:>{len(column)}}" for cell, column in zip(cells, columns, strict=True))


def found(result: dict[str, list[dict]]) -> dict[str, int]:
    """The classes with at least one example, and how many."""
    return {name: len(examples) for name, examples in result.items() if examples}


def table(counts: dict[str, int]) -> str:
    """Anomaly counts per class, one row each."""
    width = max(len(name) for name in ANOMALIES)
    return "\n".join([f"{'anomaly':<{width}}  count"] + [f"{name:<{width}}  {counts.get(name, 0):>5}" for name in ANOMALIES])
