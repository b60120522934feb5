"""`lakelog init` (make a root) and `lakelog topics`: create, list, describe topics and delete their records."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import Any

from lakelog.cli.common import BadInput, add_progress_flag, add_topic_argument, progress, wants_progress


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `init` and `topics` with its actions to the command line's subparsers."""
    init = commands.add_parser(
        "init", parents=[common], help="make a lakelog root (its identity, __cluster_metadata); idempotent"
    )
    init.set_defaults(handler=_init, makes_root=True)

    topics = commands.add_parser("topics", help="create, list and describe topics").add_subparsers(
        metavar="ACTION", parser_class=parser_class
    )
    create = topics.add_parser("create", parents=[common], help="create a topic")
    add_topic_argument(create)
    create.add_argument("--partitions", type=int, default=None)
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE", help="topic config, repeatable")
    create.set_defaults(handler=_topics_create, makes_root=True)
    listing = topics.add_parser("list", parents=[common], help="list topics")
    listing.set_defaults(handler=_topics_list)
    describe = topics.add_parser("describe", parents=[common], help="partitions, offsets and config of a topic")
    add_topic_argument(describe)
    describe.add_argument("--json", action="store_true")
    describe.set_defaults(handler=_topics_describe)
    delete_records = topics.add_parser(
        "delete-records", parents=[common], help="move partitions' log start offset: delete every record before an offset"
    )
    add_topic_argument(delete_records)
    delete_records.add_argument("--offset", type=int, required=True, help="delete the records before it; -1: the high watermark")
    delete_records.add_argument(
        "--partition", type=int, action="append", default=None, help="a partition, repeatable (default: every partition)"
    )
    add_progress_flag(delete_records)
    delete_records.set_defaults(handler=_topics_delete_records)


def _init(args: argparse.Namespace) -> int:
    from lakelog.client.roots import Location, make_root

    root: Location
    root, cluster_id = make_root(args.root)
    print(f"root {root} is ready (cluster id {cluster_id})")
    return 0


def _topics_create(args: argparse.Namespace) -> int:
    from lakelog.client import AdminClient, NewTopic
    from lakelog.client.roots import partition_count

    config: dict[str, Any] = {}
    for item in args.config:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise BadInput(f"lakelog topics create: --config takes KEY=VALUE, not {item!r}")
        config[key] = value
    topic = NewTopic(args.topic, num_partitions=-1 if args.partitions is None else args.partitions, config=config)
    AdminClient({"lakelog.root": args.root}).create_topics([topic])[args.topic].result()
    print(f"created topic {args.topic} with {partition_count(args.root, args.topic)} partition(s)")
    return 0


def _topics_list(args: argparse.Namespace) -> int:
    from lakelog.client.roots import topic_names

    for name in topic_names(args.root):
        print(name)
    return 0


def _topics_describe(args: argparse.Namespace) -> int:
    from lakelog.client import AdminClient

    description = AdminClient({"lakelog.root": args.root}).describe_topics([args.topic])[args.topic].result()
    if args.json:
        print(json.dumps(dataclasses.asdict(description)))
        return 0
    print(f"Topic: {description.name}\tPartitionCount: {len(description.partitions)}")
    print("Config: " + ", ".join(f"{k}={v}" for k, v in sorted(description.config.items())))
    print(
        f"{'Partition':>9} {'LogStartOffset':>14} {'HighWatermark':>13} {'LastStableOffset':>16} "
        f"{'LogEndOffset':>12} {'Files':>6} {'Version':>8}"
    )
    for p in description.partitions:
        print(
            f"{p.id:>9} {p.log_start_offset:>14} {p.high_watermark:>13} {p.last_stable_offset:>16} "
            f"{p.log_end_offset:>12} {p.files:>6} {p.table_version:>8}"
        )
    return 0


def _topics_delete_records(args: argparse.Namespace) -> int:
    """One line per partition: its log start offset afterwards (S9.1); the first refusal ends the command."""
    from lakelog.client import AdminClient, TopicPartition
    from lakelog.client.roots import partition_count

    partitions = args.partition if args.partition is not None else range(partition_count(args.root, args.topic))
    requests = [TopicPartition(args.topic, partition, args.offset) for partition in partitions]
    admin = AdminClient({"lakelog.root": args.root})
    for request in progress(requests, wants_progress(args), len(requests), f"delete-records {args.topic}", "partition"):
        deleted = admin.delete_records([request])[request].result()
        print(json.dumps({"topic": request.topic, "partition": request.partition, "low_watermark": deleted.low_watermark}))
    return 0
