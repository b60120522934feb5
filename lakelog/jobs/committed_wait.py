"""Waiting for committed data: has a topic's LSO reached given offsets (S5.1)?

A partition's LSO is the first offset of its earliest open transaction, else its
high watermark, and never moves backwards; so once `LSO >= o`, every record
below `o` is decided (committed or aborted) for good, and a `read_committed`
reader up to `o` sees its final content. Two kinds of wait:

- **offsets** `{partition: offset}`: until each listed partition's LSO reaches
  its offset. A value `[first, last]` (the form of LakelogLoadOperator's XCom
  `offsets`) means `last + 1`: the loaded rows are decided;
- **no offsets**: until no open transaction holds any partition back, that is
  `LSO == high watermark` on every partition at the check. On a topic whose
  transactions never pause this may not happen: then give offsets.

`CommittedWait` keeps the partitions open between checks, so a poll reads only
what was appended since the last one. It writes nothing.
"""

from __future__ import annotations

import ast
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidRequest, UnknownTopicOrPartition
from lakelog.log import open_partition
from lakelog.log.partition import PartitionLog
from lakelog.store import Location, open_root

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartitionWait:
    """One partition at a check: where its LSO is, and the offset it must reach (its HW when no offsets were given)."""

    partition: int
    last_stable_offset: int
    high_watermark: int
    target: int
    open_transactions: Mapping[int, int]  # producer id -> first offset

    @property
    def reached(self) -> bool:
        return self.last_stable_offset >= self.target

    def describe(self) -> str:
        holders = ", ".join(
            f"producer {producer_id} from offset {first}"
            for producer_id, first in sorted(self.open_transactions.items(), key=lambda item: item[1])
        )
        count = len(self.open_transactions)
        held = f"held back by the open transaction{'s' if count > 1 else ''} of {holders}" if count else "no open transaction"
        return (
            f"partition {self.partition} at LSO {self.last_stable_offset} ({held}), "
            f"waiting for {self.target} (HW {self.high_watermark})"
        )


@dataclass(frozen=True)
class CommittedCheck:
    """The result of one check of a topic."""

    topic: str
    partitions: tuple[PartitionWait, ...]

    @property
    def done(self) -> bool:
        return all(wait.reached for wait in self.partitions)

    @property
    def held_back(self) -> list[PartitionWait]:
        return [wait for wait in self.partitions if not wait.reached]

    @property
    def last_stable_offsets(self) -> dict[int, int]:
        return {wait.partition: wait.last_stable_offset for wait in self.partitions}

    def describe(self) -> str:
        """One log line: the LSOs when done, else which partitions hold back and by which open transactions."""
        if self.done:
            reached = ", ".join(f"{p}: {lso}" for p, lso in sorted(self.last_stable_offsets.items()))
            return f"topic {self.topic} is stable up to the offsets waited for: LSO {{{reached}}}"
        held = self.held_back
        return f"topic {self.topic}: {len(held)} of {len(self.partitions)} partition(s) hold back: " + "; ".join(
            wait.describe() for wait in held
        )

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe (partitions as text keys, as JSON makes them anyway): `{"topic", "last_stable_offsets"}`."""
        return {
            "topic": self.topic,
            "last_stable_offsets": {str(p): lso for p, lso in sorted(self.last_stable_offsets.items())},
        }


def parse_offsets(topic: str, offsets: Any) -> dict[int, int] | None:
    """Target offsets by partition from what a user or a template gives; None means "every partition's HW".

    Takes `{partition: offset}`, `{partition: [first, last]}` (waits for `last + 1`), a load
    XCom `{"topic", "offsets": {...}}`, or any of these as JSON or Python-literal text
    (a rendered template). Partition keys may be text. InvalidRequest says what is wrong.
    """
    if offsets is None:
        return None
    if isinstance(offsets, str):
        text = offsets.strip()
        if text in ("", "None", "null"):
            return None
        try:
            offsets = json.loads(text)
        except json.JSONDecodeError:
            try:
                offsets = ast.literal_eval(text)
            except (ValueError, SyntaxError):
                raise InvalidRequest(f"offsets for {topic} are neither JSON nor a Python literal: {text[:200]!r}") from None
    if not isinstance(offsets, Mapping):
        raise InvalidRequest(f"offsets for {topic} must map partitions to offsets, not {type(offsets).__name__}")
    if isinstance(offsets.get("offsets"), Mapping):
        named = offsets.get("topic")
        if named is not None and named != topic:
            raise InvalidRequest(f"offsets given are of topic {named}, not of {topic}")
        offsets = offsets["offsets"]
    targets: dict[int, int] = {}
    for key, value in offsets.items():
        try:
            partition = int(key)
        except (TypeError, ValueError):
            raise UnknownTopicOrPartition(f"offsets for {topic}: {key!r} is not a partition number", topic=topic) from None
        if isinstance(value, (list, tuple)) and len(value) == 2:
            value = _offset(topic, partition, value[1]) + 1
        targets[partition] = _offset(topic, partition, value)
    return targets


def _offset(topic: str, partition: int, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise InvalidRequest(f"offset for {topic}-{partition} must be an integer or [first, last], not {value!r}")
    try:
        offset = int(value)
    except ValueError:
        raise InvalidRequest(f"offset for {topic}-{partition} must be an integer, not {value!r}") from None
    if offset < 0:
        raise InvalidRequest(f"offset for {topic}-{partition} must not be negative, not {offset}")
    return offset


class CommittedWait:
    """Checks, poll after poll, whether `topic`'s LSO reached `offsets` (see the module docstring).

    The first check opens the partitions (UnknownTopicOrPartition for a missing
    topic or partition); later checks refresh them.
    """

    def __init__(
        self, root: str | Location, topic: str, offsets: Any = None, storage_options: Mapping[str, Any] | None = None
    ) -> None:
        self.root = root
        self.topic = topic
        self.targets = parse_offsets(topic, offsets)
        self.storage_options = dict(storage_options or {})
        self._logs: dict[int, PartitionLog] | None = None

    def _open(self) -> dict[int, PartitionLog]:
        location = open_root(self.root, self.storage_options)
        # Partition 0 tells a missing topic and carries the partition count; open_partition refuses any other.
        first = open_partition(location, self.topic, 0)
        partitions = sorted(self.targets) if self.targets is not None else range(first.config.num_partitions)
        return {p: first if p == 0 else open_partition(location, self.topic, p) for p in partitions}

    def check(self) -> CommittedCheck:
        if self._logs is None:
            self._logs = self._open()
        else:
            for log in self._logs.values():
                log.refresh()
        waits = []
        for partition, log in self._logs.items():
            last_stable_offset = log.last_stable_offset()
            high_watermark = log.high_watermark()
            target = high_watermark if self.targets is None else self.targets[partition]
            holders = log.open_transactions() if last_stable_offset < target else {}
            waits.append(PartitionWait(partition, last_stable_offset, high_watermark, target, dict(holders)))
        return CommittedCheck(self.topic, tuple(waits))


__all__ = ["CommittedCheck", "CommittedWait", "PartitionWait", "parse_offsets"]
