"""bench.delta_read on the S3 emulator: Spark reads the partitions through S3A (Delta's reader), target <= 1.3.

The store is moto's S3 server on loopback (tests/s3emulator.py), started here, with its AWS_* settings in the
environment before the Spark session starts (lakelog's S3 settings, so S3A's too). The same four reads as
bench.delta_read; every ratio is against the baseline on the same emulator, so its own speed cancels out.
"""

from __future__ import annotations

import os
import sys
import uuid

from bench import _common
from bench.delta_read import measure
from lakelog.store import initialise_root

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from s3emulator import S3Emulator  # noqa: E402 - the emulator is test tooling, shared with the benchmark

BUCKET = "lakelog-bench"
TARGET = 1.3


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    result = _common.Result("delta_read_s3")
    with S3Emulator() as emulator, emulator.exported():
        emulator.create_bucket(BUCKET)
        root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
        initialise_root(root)
        measure(result, root, quick, "delta_read_s3", TARGET)
    return result


if __name__ == "__main__":
    _common.cli(run, __doc__)
