"""`lakelog load`: bulk load a file into a topic exactly once.

Into one partition (`--partition`, or a topic of one partition) through lakelog.jobs.load: expected offsets,
resumable row by row. With `--key-column` and no `--partition` on a topic of several partitions, the rows are
spread by key as the Producer's partitioner spreads them, through lakelog.jobs.unit_load: one transaction
named by the load id.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from lakelog.cli.common import add_progress_flag, add_topic_argument, wants_progress


def register(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    """Add `load` to the command line's subparsers."""
    loader = commands.add_parser(
        "load", parents=[common], help="bulk load a file exactly once (into one partition, or spread by key)"
    )
    add_topic_argument(loader)
    loader.add_argument("source")
    loader.add_argument(
        "--partition",
        type=int,
        default=None,
        help="load into this partition, resumable row by row (default: 0; with --key-column on a topic of several "
        "partitions, every partition: rows spread by key as the Producer's partitioner spreads them, each partition "
        "resumable row by row; into a topic with a quality suite, in one judged transaction)",
    )
    loader.add_argument("--format", choices=("parquet", "csv", "jsonl"))
    loader.add_argument("--key-column", help="the column whose value (as text) is each record's key (default: no key)")
    loader.add_argument("--batch-records", type=int, default=10_000)
    loader.add_argument(
        "--load-id",
        help="the load's name: a run with the same name resumes it, and a finished one appends nothing again "
        "(default: a digest of the source's bytes, so an edited file is a new load of every row)",
    )
    add_progress_flag(loader)
    loader.set_defaults(handler=_load)


def _load(args: argparse.Namespace) -> int:
    from lakelog.client.roots import partition_count
    from lakelog.jobs.load import load

    if args.partition is None and args.key_column is not None and partition_count(args.root, args.topic) > 1:
        return _load_spread(args)
    result = load(
        args.root,
        args.topic,
        args.source,
        partition=0 if args.partition is None else args.partition,
        format=args.format,
        key_column=args.key_column,
        batch_records=args.batch_records,
        load_id=args.load_id,
        progress=wants_progress(args),
    )
    print(
        json.dumps(
            {
                "load_id": result.load_id,
                "start_offset": result.start_offset,
                "end_offset": result.end_offset,
                "total_rows": result.total_rows,
                "appended_by_this_run": result.appended_by_this_run,
                "resumed_from_row": result.resumed_from_row,
            }
        )
    )
    return 0


def _load_spread(args: argparse.Namespace) -> int:
    """Keyed rows over every partition, as the Producer's partitioner spreads them, each partition's share resumable
    row by row (load_keyed); into a topic with a quality suite, one judged transaction named by the load id (as a
    unit of load_unit), so a run again after a kill aborts the killed run's rows and loads the file again (S11.1)."""
    from lakelog.jobs.load import default_load_id, load_keyed
    from lakelog.jobs.unit_load import load_unit
    from lakelog.quality.gate import gated_suites

    load_id = args.load_id or default_load_id(args.source)
    if not gated_suites(args.root, [args.topic]):
        shares = load_keyed(
            args.root,
            args.topic,
            args.source,
            key_column=args.key_column,
            format=args.format,
            batch_records=args.batch_records,
            load_id=load_id,
            progress=wants_progress(args),
        )
        offsets = {str(p): [r.start_offset, r.end_offset - 1] for p, r in sorted(shares.items()) if r.total_rows}
        printed = {
            "load_id": load_id,
            "offsets": offsets,
            "total_rows": sum(r.total_rows for r in shares.values()),
            "appended_by_this_run": sum(r.appended_by_this_run for r in shares.values()),
            "resumed_from_row": sum(r.resumed_from_row for r in shares.values()),
        }
        print(json.dumps(printed))
        return 0
    result = load_unit(
        args.root,
        args.topic,
        args.source,
        load_id,
        key_column=args.key_column,
        format=args.format,
        batch_records=args.batch_records,
        progress=wants_progress(args),
    )
    offsets = {str(partition): list(span) for partition, span in sorted(result.offsets.items())}
    appended = result.rows if result.loaded else 0
    print(json.dumps({"load_id": load_id, "offsets": offsets, "total_rows": result.rows, "appended_by_this_run": appended}))
    return 0
