"""`lakelog consume`: a topic's messages as JSON lines (keys and values as text, or base64 if not UTF-8)."""

from __future__ import annotations

import argparse
import base64
import json
from typing import Any, cast

from lakelog.cli.common import BadInput, add_topic_argument
from lakelog.errors import KafkaError


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `consume` to the command line's subparsers."""
    consume = commands.add_parser("consume", parents=[common], help="print messages as JSON lines")
    add_topic_argument(consume)
    consume.add_argument("--partition", type=int, action="append", help="repeatable; default all")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-end", action="store_true", help="start at the high watermark (default: beginning)")
    start.add_argument("--offset", type=int, help="start offset (with one --partition)")
    consume.add_argument("--max-messages", type=int, default=None)
    consume.add_argument("--follow", action="store_true", help="keep waiting for new messages")
    consume.add_argument(
        "--isolation-level",
        default="read_committed",
        choices=("read_committed", "read_uncommitted"),
        help="read_committed (default): committed data up to the last stable offset; "
        "read_uncommitted: all data up to the high watermark",
    )
    consume.set_defaults(handler=_consume)


def _consume(args: argparse.Namespace) -> int:
    from lakelog.client import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition
    from lakelog.client.roots import partition_count

    partitions = args.partition or list(range(partition_count(args.root, args.topic)))
    if args.offset is not None and len(partitions) != 1:
        raise BadInput("lakelog consume: --offset needs exactly one --partition")
    start = args.offset if args.offset is not None else (OFFSET_END if args.from_end else OFFSET_BEGINNING)
    conf = {"lakelog.root": args.root, "enable.partition.eof": True, "isolation.level": args.isolation_level}
    printed = 0
    with Consumer(conf) as consumer:
        consumer.assign([TopicPartition(args.topic, p, start) for p in partitions])
        at_end: set[int] = set()
        while args.max_messages is None or printed < args.max_messages:
            message = consumer.poll(1.0)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(cast(int, message.partition()))  # a partition-EOF event names its partition
                    if not args.follow and at_end >= set(partitions):
                        break
                continue
            at_end.discard(message.partition())
            print(json.dumps(_message_json(message)))
            printed += 1
    return 0


def _message_json(message: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"topic": message.topic(), "partition": message.partition(), "offset": message.offset()}
    for name, raw in (("key", message.key()), ("value", message.value())):
        if raw is None:
            out[name] = None
            continue
        try:
            out[name] = raw.decode()
        except UnicodeDecodeError:
            out[name + "_base64"] = base64.b64encode(raw).decode()
    out["timestamp"] = message.timestamp()[1]
    if message.headers():
        out["headers"] = {k: (v.decode(errors="replace") if v is not None else None) for k, v in message.headers()}
    return out
