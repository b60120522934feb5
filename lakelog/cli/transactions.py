"""`lakelog transactions`: list, describe, find hanging and abort transactions (like kafka-transactions.sh).

Registered on the `lakelog` command line by lakelog.cli.main; bad input raises BadInput (exit 2).
"""

from __future__ import annotations

import argparse
from typing import Any

from lakelog.cli.common import BadInput
from lakelog.cli.common import print_rows as _print_rows
from lakelog.errors import TransactionalIdNotFound

# How a decided transaction reads to a user: its outcome is final from PrepareCommit/PrepareAbort on; the
# Complete* row only rides on the producer's next transaction, its next init, or the sweep (S4.5).
OUTCOMES = {
    "PrepareCommit": "PrepareCommit (committed; completion pending)",
    "PrepareAbort": "PrepareAbort (aborted; completion pending)",
}
STATES_HELP = (
    "TransactionState is the coordinator's: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, "
    "CompleteAbort, PrepareEpochFence, Dead. A transaction whose commit (or abort) is decided shows "
    "'PrepareCommit (committed; completion pending)' (or 'PrepareAbort (aborted; completion pending)'): "
    "its outcome is final (its markers are written, or whoever completes it writes them); the CompleteCommit row is written by the producer's next "
    "transaction or init_transactions(), or by `lakelog coordinator sweep`, so it stays so after close()."
)


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `transactions` and its actions to the command line's subparsers."""
    transactions = commands.add_parser(
        "transactions", help="list, describe and abort transactions (like kafka-transactions.sh)"
    ).add_subparsers(metavar="ACTION", parser_class=parser_class)
    listing = transactions.add_parser(
        "list", parents=[common], help="every transactional id and its state", description=STATES_HELP
    )
    listing.set_defaults(handler=_transactions_list)
    describe = transactions.add_parser(
        "describe", parents=[common], help="the coordinator's state of one id", description=STATES_HELP
    )
    describe.add_argument("--transactional-id", required=True)
    describe.set_defaults(handler=_transactions_describe)
    producers = transactions.add_parser("describe-producers", parents=[common], help="producer state of a partition")
    producers.add_argument("--topic", required=True)
    producers.add_argument("--partition", type=int, required=True)
    producers.set_defaults(handler=_transactions_describe_producers)
    hanging = transactions.add_parser("find-hanging", parents=[common], help="transactions holding a partition's LSO")
    hanging.add_argument("--topic")
    hanging.set_defaults(handler=_transactions_find_hanging)
    abort = transactions.add_parser(
        "abort",
        parents=[common],
        help="abort a hanging transaction with a marker, only if it is still the one find-hanging showed (KIP-664)",
    )
    abort.add_argument("--topic", required=True)
    abort.add_argument("--partition", type=int, required=True)
    abort.add_argument("--producer-id", type=int, help="as find-hanging printed it (this or --start-offset)")
    abort.add_argument("--producer-epoch", type=int, help="as find-hanging printed it")
    abort.add_argument("--start-offset", type=int, help="as find-hanging printed it (this or --producer-id)")
    abort.set_defaults(handler=_transactions_abort)


def shown_state(state: Any) -> str:
    """A coordinator state as `transactions list` and `describe` show it (a decided one with its outcome)."""
    name = str(getattr(state, "value", state))
    return OUTCOMES.get(name, name)


def _transactions_list(args: argparse.Namespace) -> int:
    from lakelog.client.admin import transactions as transaction_admin

    rows = [(t.transactional_id, t.producer_id, shown_state(t.state)) for t in transaction_admin.list_transactions(args.root)]
    _print_rows(("TransactionalId", "ProducerId", "TransactionState"), rows)
    return 0


def _transactions_describe(args: argparse.Namespace) -> int:
    from lakelog.client.admin import transactions as transaction_admin

    found = transaction_admin.describe_transaction(args.root, args.transactional_id)
    if found is None:
        raise TransactionalIdNotFound(
            f"transactional id {args.transactional_id!r} is unknown under {args.root} (never initialised, or expired)"
        )
    partitions = ",".join(f"{topic}-{partition}" for topic, partition in found.topic_partitions)
    _print_rows(
        (
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "TransactionStartTimeMs",
            "LastUpdateTimeMs",
            "TopicPartitions",
        ),
        [
            (
                found.transactional_id,
                found.producer_id,
                found.producer_epoch,
                shown_state(found.state),
                found.transaction_timeout_ms,
                found.transaction_start_time_ms,
                found.last_update_time_ms,
                partitions,
            )
        ],
    )
    return 0


def _transactions_describe_producers(args: argparse.Namespace) -> int:
    from lakelog.client.admin import transactions as transaction_admin

    states = transaction_admin.describe_producers(args.root, args.topic, args.partition)
    _print_rows(
        ("ProducerId", "ProducerEpoch", "LastSequence", "LastTimestamp", "CurrentTransactionStartOffset"),
        [
            (s.producer_id, s.producer_epoch, s.last_sequence, s.last_timestamp_ms, s.current_transaction_start_offset)
            for s in states
        ],
    )
    return 0


def _transactions_find_hanging(args: argparse.Namespace) -> int:
    from lakelog.client.admin import transactions as transaction_admin

    found = transaction_admin.find_hanging_transactions(args.root, args.topic)
    _print_rows(
        ("Topic", "Partition", "ProducerId", "ProducerEpoch", "StartOffset", "LastStableOffset", "NeedsAdminAbort", "Reason"),
        [
            (
                h.topic,
                h.partition,
                h.producer_id,
                h.producer_epoch,
                h.start_offset,
                h.last_stable_offset,
                str(h.needs_admin_abort).lower(),
                h.reason,
            )
            for h in found
        ],
    )
    return 0


def _transactions_abort(args: argparse.Namespace) -> int:
    from lakelog.client.admin import transactions as transaction_admin

    if args.producer_id is None and args.start_offset is None:
        raise BadInput("lakelog transactions abort: --producer-id or --start-offset is required")
    hanging = transaction_admin.find_hanging_transaction(
        args.root,
        args.topic,
        args.partition,
        args.producer_id,
        producer_epoch=args.producer_epoch,
        start_offset=args.start_offset,
    )
    offset = transaction_admin.abort_transaction(args.root, hanging)
    print(
        f"aborted the transaction of producer id {hanging.producer_id} (epoch {hanging.producer_epoch}, "
        f"start offset {hanging.start_offset}) in {hanging.topic}-{hanging.partition}: "
        f"ABORT marker at offset {offset}, epoch {hanging.producer_epoch + 1}"
    )
    return 0
