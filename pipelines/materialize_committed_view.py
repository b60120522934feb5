"""Spark job: append a topic's newly committed rows to its read_committed view `<root>/views/<topic>`, exactly once.

The refresh is lakelog.jobs.views (the plan, the strict commit with the view's
positions, the quality gate, staging and vacuum); Spark writes its rows
(pyspark_lakelog.view_files). A topic with a quality suite gates its view: a
refresh whose new rows fail an `enforce` suite commits nothing, and the job
exits non-zero with one line.

    spark-submit pipelines/materialize_committed_view.py --root R --topic T
    python -m pipelines.materialize_committed_view --root R --topic T
    materialize_committed_view(spark, root, topic)     # from Python
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from lakelog.client.retry import Backoff
from lakelog.client.roots import Location
from lakelog.errors import PolicyViolation
from lakelog.jobs.views import (
    FAULT_COMMITTED,
    FAULT_MOVED,
    FAULT_PLANNED,
    FAULT_WRITTEN,
    VALIDATION_METADATA_KEY,
    Fault,
    ViewReport,
    refresh_view,
    view_position,
)
from lakelog.pipelines._args import storage_option_pairs

# The exit code of a refresh its topic's suite refused (the CLI's code for a refused request).
EXIT_REFUSED = 2

__all__ = [
    "EXIT_REFUSED",
    "FAULT_COMMITTED",
    "FAULT_MOVED",
    "FAULT_PLANNED",
    "FAULT_WRITTEN",
    "VALIDATION_METADATA_KEY",
    "ViewReport",
    "main",
    "materialize_committed_view",
    "view_position",
]


def materialize_committed_view(
    spark: Any, root: str | Location, topic: str, *, fault: Fault | None = None, backoff: Backoff | None = None
) -> ViewReport:
    """Append `topic`'s rows committed since the last run to `<root>/views/<topic>`, written by `spark`
    (lakelog.jobs.views.refresh_view).

    Lost commit races wait on `backoff` (default: the retry policy's defaults, lakelog.jobs.views.COMMIT_TIMEOUT_S);
    KafkaTimeout once its deadline has passed, the view then holds what other runs committed.
    """
    from pyspark_lakelog.view_files import SparkViewFiles

    return refresh_view(root, topic, SparkViewFiles(spark), fault=fault, backoff=backoff)


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

    spark = SparkSession.builder.appName(f"lakelog materialize_committed_view {args.topic}").getOrCreate()
    started = time.monotonic()
    try:
        report = materialize_committed_view(spark, root, args.topic)
    except PolicyViolation as refused:
        print(f"materialize_committed_view: {refused.error.name()}: {refused}", file=sys.stderr)
        return EXIT_REFUSED
    print(json.dumps({**report.__dict__, "seconds": round(time.monotonic() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
