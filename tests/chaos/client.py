"""The clients of a chaos run: lakelog's own Consumer and Producer, each recording what it did in a
history (tests/chaos/history.py) as it returns.

- `RecordingConsumer` records each poll (with the isolation level it claims), each end of a
  partition it reports (`eof`), and each change of position it makes on purpose (assign, seek,
  rebalance callbacks) as an `assign`.
- `RecordingProducer` records each acknowledged send, and each transaction's begin, commit and abort.
- Both record a failed delivery report or an error message a poll returns as an `error` op, and
  `record_error` records one a call raised.
- `python -m chaos.client --history-dir D <worker arguments>` runs one worker of
  `pipelines.consume_transform_produce` with these clients in place of its own, so the job under
  test is the real one; `ChaosSupervisor` starts its slots that way.

A planted bug (tests/chaos/workload.py) misuses these clients; nothing here is broken on purpose.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from chaos.history import FAIL, INFO, INVOKE, OK, HistoryWriter, key_of, text
from lakelog import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from pipelines.consume_transform_produce import Job, Supervisor, worker_command

TESTS_DIR = Path(__file__).resolve().parents[1]
# A partition's table in an error's text: `<root>/topics/<topic>/<partition>`.
_PARTITION_TABLE = re.compile(r"/topics/([^/\s]+)/(\d+)(?![\w.-])")


def record_error(history: HistoryWriter, key: str | None, doing: str, error: BaseException | KafkaError) -> None:
    """Write an `error` op: the Kafka error's name and code, or a foreign exception's class name. Its key is the
    partition whose table the message names (a call about one partition can fail on another's), else `key`."""
    kafka_error = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(kafka_error, KafkaError):
        name, code, message = kafka_error.name(), kafka_error.code(), kafka_error.str()
    else:
        name, code, message = type(error).__name__, None, str(error)
    named = _PARTITION_TABLE.search(message)
    value = {"key": key_of(named.group(1), int(named.group(2))) if named else key, "call_key": key, "doing": doing}
    history(FAIL, "error", {**value, "name": name, "code": code, "message": message[:500]})


class RecordingConsumer(Consumer):
    """A Consumer that records its polls and deliberate position changes in `history`.

    `claims` is the isolation level written into the history (default: the configured one); a
    planted bug claims one level and reads at another. `count_offsets` records offsets counted from
    the first one read per partition instead of the messages' own (another planted bug).
    """

    def __init__(
        self, conf: dict[str, Any], history: HistoryWriter, claims: str | None = None, count_offsets: bool = False
    ) -> None:
        super().__init__(conf)
        self.history = history
        self.claims = claims or self.config["isolation.level"]
        self._counted: dict[str, int] | None = {} if count_offsets else None

    def consume(self, num_messages: int = 1, timeout: float = -1):
        messages = super().consume(num_messages, timeout)
        reads: dict[str, list[list]] = defaultdict(list)
        for message in messages:
            if message.error() is not None and message.error().code() == KafkaError._PARTITION_EOF:
                self.history(OK, "eof", {key_of(message.topic(), message.partition()): message.offset()}, isolation=self.claims)
            elif message.error() is not None:
                record_error(self.history, key_of(message.topic(), message.partition()), "poll", message.error())
            if message.error() is None:
                key = key_of(message.topic(), message.partition())
                offset = message.offset()
                if self._counted is not None:
                    offset = self._counted.setdefault(key, offset)
                    self._counted[key] = offset + 1
                reads[key].append([offset, text(message.value())])
        if reads:
            self.history(OK, "poll", dict(reads), isolation=self.claims)
        return messages

    def assign(self, partitions: list[TopicPartition]) -> None:
        super().assign(partitions)
        self._moved(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        super().incremental_assign(partitions)
        self._moved(partitions)

    def seek(self, partition: TopicPartition) -> None:
        super().seek(partition)
        self._moved([partition])

    def subscribe(self, topics, on_assign=None, on_revoke=None, on_lost=None) -> None:
        def recorded(callback):
            def call(consumer, partitions):
                self._moved(partitions)
                if callback is not None:
                    callback(consumer, partitions)

            return call

        # on_lost stays unset when the caller left it so: the consumer then calls on_revoke.
        super().subscribe(topics, recorded(on_assign), recorded(on_revoke), None if on_lost is None else recorded(on_lost))

    def _moved(self, partitions: list[TopicPartition]) -> None:
        keys = [key_of(p.topic, p.partition) for p in partitions]
        if keys:
            self.history(OK, "assign", keys)


class RecordingProducer(Producer):
    """A Producer that records acknowledged sends (one `send` per flush or transaction end) and its
    transactions' begin (`txn`), commit (with the group offsets sent to it) and abort."""

    def __init__(self, conf: dict[str, Any], history: HistoryWriter) -> None:
        super().__init__(conf)
        self.history = history
        self.transactional_id = conf.get("transactional.id")
        self.txn: int | None = None
        self._transactions_begun = 0
        self._delivered: list[list] = []
        self._offsets: dict[str, int] = {}

    def produce(self, topic, value=None, key=None, partition=-1, on_delivery=None, *args, **kwargs):
        def delivered(error, message):
            if error is None:
                self._delivered.append([key_of(message.topic(), message.partition()), message.offset(), text(message.value())])
            else:
                record_error(self.history, key_of(message.topic(), message.partition()), "send", error)
            if on_delivery is not None:
                on_delivery(error, message)

        return super().produce(topic, value, key, partition, delivered, *args, **kwargs)

    def poll(self, timeout: float | None = None) -> int:
        served = super().poll(timeout)
        self.record_sends()
        return served

    def flush(self, timeout: float | None = None) -> int:
        left = super().flush(timeout)
        self.record_sends()
        return left

    def record_sends(self) -> None:
        if self._delivered:
            self.history(OK, "send", self._delivered, **self._transaction())
            self._delivered = []

    def begin_transaction(self) -> None:
        super().begin_transaction()
        self._offsets = {}
        self.txn = self._transactions_begun
        self._transactions_begun += 1
        self.history(INVOKE, "txn", **self._transaction())

    def send_offsets_to_transaction(self, positions, group_metadata, timeout: float | None = None) -> None:
        super().send_offsets_to_transaction(positions, group_metadata, timeout)
        self._offsets.update({key_of(p.topic, p.partition): p.offset for p in positions})

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._end("commit", super().commit_transaction, timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._end("abort", super().abort_transaction, timeout)

    def _end(self, f: str, end, timeout: float | None) -> None:
        self.history(INVOKE, f, **self._transaction())
        try:
            end(timeout)
        except KafkaException as error:
            self.record_sends()
            # A refused end (not retriable, not abortable: fenced, say) changed nothing; any other may have.
            refused = error.args[0].fatal() and not error.args[0].retriable()
            self.history(FAIL if refused and f == "abort" else INFO, f, **self._transaction())
            raise
        self.record_sends()
        # A commit's value: the group offsets it committed with its messages (S7.1), if any.
        self.history(OK, f, (self._offsets or None) if f == "commit" else None, **self._transaction())

    def _transaction(self) -> dict[str, Any]:
        return {"txn": self.txn, "transactional_id": self.transactional_id}


# -- the consume-transform-produce job's workers, recorded ----------------------------------------


def worker_main(argv: list[str]) -> int:
    """Run `pipelines.consume_transform_produce` with recording clients; argv: --history-dir D, then
    the worker's own arguments (--worker SLOT ...)."""
    from pipelines import consume_transform_produce as job_module

    history_dir = argv[argv.index("--history-dir") + 1]
    rest = [a for i, a in enumerate(argv) if a != "--history-dir" and (i == 0 or argv[i - 1] != "--history-dir")]
    slot = rest[rest.index("--worker") + 1]
    history = HistoryWriter(history_dir, f"worker-{slot}-{os.getpid()}")
    job_module.Consumer = lambda conf: RecordingConsumer(conf, history)
    job_module.Producer = lambda conf: RecordingProducer(conf, history)
    return job_module.main(rest)


def worker_environment() -> dict[str, str]:
    """The environment of a worker process: this one's, with tests/ importable (for `chaos`)."""
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": str(TESTS_DIR) if not path else f"{TESTS_DIR}{os.pathsep}{path}"}


def start_recorded_worker(command: list[str], history_dir: str) -> subprocess.Popen:
    """Start a worker from the pipeline's own command line (`worker_command`), recorded in `history_dir`."""
    arguments = command[command.index("pipelines.consume_transform_produce") + 1 :]
    return subprocess.Popen(
        [sys.executable, "-m", "chaos.client", "--history-dir", history_dir, *arguments],
        stdout=subprocess.DEVNULL,
        env=worker_environment(),
    )


class ChaosSupervisor(Supervisor):
    """The job's supervisor, starting each slot as a recorded worker."""

    def __init__(self, job: Job, workers: int, history_dir: str) -> None:
        super().__init__(job, workers)
        self.history_dir = history_dir

    def start(self, slot: int) -> None:
        self.processes[slot] = start_recorded_worker(worker_command(self.job, slot), self.history_dir)


if __name__ == "__main__":
    sys.exit(worker_main(sys.argv[1:]))
