"""bench.delta_read on the S3 emulator: Spark reads the partitions through S3A (Delta's reader), target <= 1.3.

The store is moto's S3 server on loopback (tests/s3emulator.py), started here, with its AWS_* settings in the
environment before Spark's JVM starts: the Python data source's workers are the JVM's children and reach the store
through that environment. So where this process already has a JVM (another Spark benchmark ran before), the
benchmark runs in a process of its own and reports its ratios here. The same four reads as bench.delta_read; every
ratio is against the baseline on the same emulator, so the emulator's own speed cancels out.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

from bench import _common
from bench.delta_read import measure
from lakelog.store import initialise_root

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
from s3emulator import S3Emulator  # noqa: E402 - the emulator is test tooling, shared with the benchmark

BUCKET = "lakelog-bench"
TARGET = 1.3
RATIOS_PREFIX = "delta_read_s3 ratios: "


def run(quick: bool = False, root_parent: str | None = None, keep: bool = False) -> _common.Result:
    from pyspark import SparkContext

    if SparkContext._gateway is not None:
        return _in_a_process_of_its_own(quick)
    result = _common.Result("delta_read_s3")
    with S3Emulator() as emulator, emulator.exported():
        emulator.create_bucket(BUCKET)
        root = f"s3://{BUCKET}/bench-{uuid.uuid4().hex[:8]}"
        initialise_root(root)
        measure(result, root, quick, "delta_read_s3", TARGET)
    return result


def _in_a_process_of_its_own(quick: bool) -> _common.Result:
    command = [sys.executable, "-m", "bench.delta_read_s3", "--print-ratios", *(["--quick"] if quick else [])]
    child = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=True)
    result = _common.Result("delta_read_s3")
    for line in child.stdout.splitlines():
        if line.startswith(RATIOS_PREFIX):
            for name, value, target in json.loads(line[len(RATIOS_PREFIX) :]):
                result.add(name, value, target)
        else:
            print(line)
    return result


if __name__ == "__main__":
    parser = _common.parser(__doc__.splitlines()[0])
    parser.add_argument("--print-ratios", action="store_true", help="end with the ratios as one JSON line")
    options = parser.parse_args()
    measured = run(options.quick, options.root, options.keep)
    if options.print_ratios:
        print(RATIOS_PREFIX + json.dumps([[ratio.name, ratio.value, ratio.target] for ratio in measured.ratios]))
