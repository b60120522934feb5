"""An append-only history of what clients did, one JSON line per operation, merged after a run.

Each process writes its own file (`<dir>/<process>.jsonl`) and flushes every line as it is
written, so a SIGKILLed process leaves every operation it completed; a line cut short by the kill is
dropped when the files are read back. Operations are Jepsen's: `type` is invoke / ok / fail / info,
`f` says what was done:

- `poll`: a consume call that returned; value `{key: [[offset, value], ...]}`, `isolation` the level
  the reader claims (read_committed / read_uncommitted).
- `send`: messages the log acknowledged; value `[[key, offset, value], ...]`, in the order produced.
  Inside a transaction (`txn` set) an acknowledged send is appended but not yet committed.
- `txn` (invoke): a transaction begins; `commit` / `abort` (invoke, then ok, fail or info): it ends.
  A commit's ok value: the consumer offsets sent to the transaction, `{key: offset}` (or None).
- `assign`: the consumer's position of some keys moved on purpose (rebalance, assign, seek);
  value: the keys. Poll-order checks start again for those keys.
- `eof`: a consumer reported the end of a partition (enable.partition.eof); value `{key: offset}`,
  the position it reached, `isolation` as for `poll`.
- `error` (fail): a client call or a delivery report failed; value `{key, call_key, doing, name,
  code, message}`, `name` the Kafka error name (CORRUPT_MESSAGE for CorruptRecord) or, for an
  exception that is not Kafka's, its class name; `call_key` the partition the call was about (None
  when it was about no one partition), `key` the partition the error names, else `call_key`.
- `fault` (info, process `nemesis`): store damage injected (tests/chaos/nemesis.py); value `{kind,
  key, file, detail}`.

A key is `topic/partition`; values are unique strings, which is what lets a checker tell who wrote
what. `txn` numbers a process's transactions (with `transactional_id`), None outside one. `time` is
`time.monotonic_ns()` when the line was written (one clock for every process on a Linux host).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

INVOKE, OK, FAIL, INFO = "invoke", "ok", "fail", "info"


@dataclass(frozen=True)
class Op:
    """One line of a history."""

    process: str
    type: str
    f: str
    value: Any = None
    time: int = 0
    index: int = 0
    txn: int | None = None
    transactional_id: str | None = None
    isolation: str | None = None


def key_of(topic: str, partition: int) -> str:
    return f"{topic}/{partition}"


def text(value: bytes | str | None) -> str | None:
    """A message value as history text (values here are ASCII)."""
    return value.decode("utf-8", "backslashreplace") if isinstance(value, bytes) else value


class HistoryWriter:
    """Appends one process's operations to `<directory>/<process>.jsonl`, a flushed line each."""

    def __init__(self, directory: str | os.PathLike, process: str) -> None:
        self.process = process
        self._file = open(Path(directory) / f"{process.replace('/', '_')}.jsonl", "a", encoding="utf-8")
        self._index = 0

    def __call__(self, type_: str, f: str, value: Any = None, **fields: Any) -> Op:
        op = Op(self.process, type_, f, value, time.monotonic_ns(), self._index, **fields)
        self._index += 1
        self._file.write(json.dumps(asdict(op), separators=(",", ":")) + "\n")
        self._file.flush()
        return op

    def close(self) -> None:
        self._file.close()


def read_history(directory: str | os.PathLike) -> list[Op]:
    """Every process's operations, merged in time order (a process's own in the order it wrote them)."""
    ops = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                ops.append(Op(**json.loads(line)))
            except (json.JSONDecodeError, TypeError):
                continue  # the last line of a killed process, cut short
    return merged(ops)


def merged(ops: Iterable[Op]) -> list[Op]:
    return sorted(ops, key=lambda op: (op.time, op.process, op.index))
