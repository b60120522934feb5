"""What KIP-890 verification at the partition costs a transaction's sends (S4.4).

A partition verifies the first transactional batch of (producer id, epoch) with the
transaction coordinator (a read of `__transaction_state`, no commit); later batches
of that epoch find the transaction open in the partition's own rows and ask
nothing. Measured on one partition, transaction after transaction (add the
partition, one first send, LATER_SENDS more, commit), each send timed alone, against
the same work with verification bypassed, rounds alternating so machine load hits
both sides alike. Targets: first send p50 <= 1.5x, later sends p50 <= 1.1x. The
table also shows the coordinator reads and the partition commits per send: counts
no load moves (1 and 1 for a first send, 0 and 1 for a later one); and the time of
the coordinator read itself (a refresh of the id's `__transaction_state` partition).
"""

from __future__ import annotations

import time

from bench import _common
from lakelog.coordinator.transaction.coordinator import TransactionCoordinator
from lakelog.log import BatchHeader, PartitionLog, create_topic, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED, TransactionVerification

ROUNDS = 40
ROUNDS_QUICK = 10
LATER_SENDS = 4
FIRST_TARGET = 1.5
LATER_TARGET = 1.1
VALUES = [b"v" * 100] * 10


class _Counting:
    """The coordinator's verify_partitions, counted and timed."""

    def __init__(self, coordinator: TransactionCoordinator) -> None:
        self.coordinator, self.calls, self.seconds = coordinator, 0, []

    def verify_partitions(self, *args):
        self.calls += 1
        t0 = time.perf_counter()
        try:
            return self.coordinator.verify_partitions(*args)
        finally:
            self.seconds.append(time.perf_counter() - t0)


class _Side:
    """One transactional.id writing its own topic's partition 0, verified or not."""

    def __init__(self, root: str, name: str, verified: bool) -> None:
        create_topic(root, name, 1)
        self.topic, self.transactional_id = name, name
        self.log: PartitionLog = open_partition(root, name, 0)
        # The marker goes through our handle, as a Producer lends its own: the next first send loses no race to it.
        self.coordinator = TransactionCoordinator(root, partition_logs=lambda topic, partition: self.log)
        self.counting = _Counting(self.coordinator)
        self.transaction = TransactionVerification(name, self.counting) if verified else _UNVERIFIED
        identity = self.coordinator.init_producer_id(name, 60_000)
        self.producer_id, self.producer_epoch = identity.producer_id, identity.producer_epoch
        self.first: list[float] = []
        self.later: list[float] = []
        self.calls = {"first": 0, "later": 0}
        self.commits = {"first": 0, "later": 0}

    def transaction_round(self, record: bool = True) -> None:
        self.coordinator.add_partitions(self.transactional_id, self.producer_id, self.producer_epoch, [(self.topic, 0)])
        payload = payload_table(VALUES)
        for n in range(1 + LATER_SENDS):
            kind = "first" if n == 0 else "later"
            header = BatchHeader(self.producer_id, self.producer_epoch, n * len(VALUES), is_transactional=True)
            calls, version = self.counting.calls, self.log.version
            t0 = time.perf_counter()
            self.log.append(payload, header, transaction=self.transaction)
            elapsed = time.perf_counter() - t0
            if record:
                (self.first if n == 0 else self.later).append(elapsed)
                self.calls[kind] += self.counting.calls - calls
                self.commits[kind] += self.log.version - version
        ended = self.coordinator.end_transaction(self.transactional_id, self.producer_id, self.producer_epoch, True)
        self.producer_id, self.producer_epoch = ended.producer_id, ended.producer_epoch


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    rounds = ROUNDS_QUICK if quick else ROUNDS
    with _common.session(
        "transaction_verification",
        f"a transaction's first and later sends with KIP-890 verification over the same sends without "
        f"(1 partition, 1 + {LATER_SENDS} sends per transaction)",
        root_parent,
        keep,
    ) as (result, root):
        verified, bypassed = _Side(root, "verified", True), _Side(root, "bypassed", False)
        verified.transaction_round(record=False)  # warm-up: open handles, the coordinator's logs
        bypassed.transaction_round(record=False)
        for n in range(rounds):
            for side in (verified, bypassed) if n % 2 else (bypassed, verified):
                side.transaction_round()
        rows = []
        for name, side in (("verified", verified), ("bypassed", bypassed)):
            first_n, later_n = len(side.first), len(side.later)
            rows.append(
                [
                    name,
                    rounds,
                    _common.median(side.first) * 1e3,
                    _common.median(side.later) * 1e3,
                    side.calls["first"] / first_n,
                    side.calls["later"] / later_n,
                    side.commits["first"] / first_n,
                    side.commits["later"] / later_n,
                ]
            )
        _common.print_table(
            ["sends", "txns", "first ms p50", "later ms p50", "reads/first", "reads/later", "commits/first", "commits/later"],
            rows,
        )
        reads = verified.counting.seconds
        print(
            f"the coordinator read inside a verified first send: p50 {_common.median(reads) * 1e3:.2f} ms, "
            f"p95 {_common.percentile(reads, 95) * 1e3:.2f} ms over {len(reads)} reads"
        )
        result.add(
            "transaction_verification first send verified/bypassed p50",
            _common.median(verified.first) / _common.median(bypassed.first),
            FIRST_TARGET,
        )
        result.add(
            "transaction_verification later sends verified/bypassed p50",
            _common.median(verified.later) / _common.median(bypassed.later),
            LATER_TARGET,
        )
    return result


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__ or "", argv)


if __name__ == "__main__":
    main()
