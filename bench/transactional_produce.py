"""Transactional vs idempotent produce over 4 partitions, at 100, 10k and 100k records per transaction.

Both sides use the public Producer. The transactional side runs begin, produce,
commit (partitions added, each write verified against the coordinator, one
decision record, a marker per partition, a completion record); the idempotent
side produces the same records and flushes, so each round writes the same
batches (one per partition). Rounds alternate between the two producers so
machine load hits both alike. The ratio is transactional time / idempotent
time. Target: <= 1.2 at 100k records per transaction (the others are
informational: at 100 records per transaction the fixed cost of the protocol,
four coordinator commits and four markers, is most of the time).
"""

from __future__ import annotations

from bench import _common

PARTITIONS = 4
SIZES = (100, 10_000, 100_000)
ROUNDS = {100: 20, 10_000: 8, 100_000: 4}
ROUNDS_QUICK = {100: 5, 10_000: 3, 100_000: 2}
TARGETS = {100: None, 10_000: None, 100_000: 1.2}
VALUE = b"v" * 100


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    rounds = ROUNDS_QUICK if quick else ROUNDS
    result = _common.Result("transactional_produce")
    print(f"== transactional_produce: Producer with transactional.id vs idempotent Producer, {PARTITIONS} partitions")
    rows = []
    with _common.temp_root(root_parent, keep) as root:
        for size in SIZES:
            transactional_s, idempotent_s = _measure(root, size, rounds[size])
            records = size * rounds[size]
            rows.append(
                [
                    f"{size:,}",
                    rounds[size],
                    records / transactional_s,
                    records / idempotent_s,
                    transactional_s / rounds[size] * 1e3,
                    idempotent_s / rounds[size] * 1e3,
                ]
            )
            result_ratio = transactional_s / idempotent_s
            rows[-1].append(result_ratio)
        _common.print_table(["records/txn", "rounds", "txn rec/s", "idem rec/s", "txn ms/round", "idem ms/round", "ratio"], rows)
        for size, row in zip(SIZES, rows, strict=True):
            result.add(f"transactional_produce txn/idempotent @{size}", row[-1], TARGETS[size])
    return result


def _measure(root: str, size: int, rounds: int) -> tuple[float, float]:
    transactional_round, idempotent_round = _common.transactional_and_idempotent_rounds(
        root, size, PARTITIONS, VALUE, "", f"bench-{size}"
    )
    transactional_s = idempotent_s = 0.0
    for n in range(rounds):
        if n % 2:
            transactional_s += transactional_round()
            idempotent_s += idempotent_round()
        else:
            idempotent_s += idempotent_round()
            transactional_s += transactional_round()
    return transactional_s, idempotent_s


def main(argv: list[str] | None = None) -> None:
    _common.cli(run, __doc__, argv)


if __name__ == "__main__":
    main()
