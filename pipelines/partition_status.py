"""Spark job: HW, LSO, open transactions and aborted ranges of every partition of a topic, into `<root>/status/<topic>`.

The job is lakelog.jobs.status (incremental: a partition whose table has not
moved is not read; one strict commit replaces the table); here each partition's
status is computed in one Spark task.

    spark-submit pipelines/partition_status.py --root R --topic T
    python -m pipelines.partition_status --root R --topic T
    partition_status(spark, root, topic)       # from Python
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from lakelog.client.retry import Backoff
from lakelog.client.roots import Location
from lakelog.jobs.status import StatusReport, StatusRow, StatusTask, refresh_status
from lakelog.pipelines._args import storage_option_pairs

__all__ = ["StatusReport", "main", "partition_status"]


def partition_status(spark: Any, root: str | Location, topic: str, *, backoff: Backoff | None = None) -> StatusReport:
    """Bring `<root>/status/<topic>` up to date with every partition of `topic`, one Spark task per partition
    (lakelog.jobs.status.refresh_status).

    Lost commit races wait on `backoff` (default: the retry policy's defaults, lakelog.jobs.status.COMMIT_TIMEOUT_S);
    KafkaTimeout once its deadline has passed.
    """

    def on_spark(status_of: Callable[[StatusTask], StatusRow | None], tasks: list[StatusTask]) -> list[StatusRow | None]:
        return spark.sparkContext.parallelize(tasks, max(1, len(tasks))).map(status_of).collect()

    return refresh_status(root, topic, on_spark, backoff=backoff)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument(
        "--storage-option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage setting of the root (lakelog.storage.<key>), over the AWS_* environment; repeatable",
    )
    args = parser.parse_args(argv)
    root = Location.of(args.root, storage_option_pairs(parser, args.storage_option))
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName(f"lakelog partition_status {args.topic}").getOrCreate()
    started = time.monotonic()
    report = partition_status(spark, root, args.topic)
    print(json.dumps({**report.__dict__, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
