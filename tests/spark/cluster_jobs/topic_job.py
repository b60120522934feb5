"""A Spark application the cluster tests submit (`spark-submit --master spark://...`), as a user would: for each
case (a root), it reads a topic with `format("lakelog")` at both isolation levels, writes its read_committed rows to
another topic, and (`view`) runs the committed-view job of pipelines/ on it; each step a Spark job named by its
description (`<case> read read_committed`, `<case> write`, ...: the tests find its stages in the event log by it).
Several roots share one application, so the tests pay for one driver and its executors' start once.

    spark-submit topic_job.py SPEC.json RESULT.json
    SPEC.json: {"cases": [{"root": R, "storage": {KEY: VALUE}, "source": S, "dest": D,
                           "hold": null|"kill"|"speculate"|"driver"|"kill-read", "view": true|false}], "hold": DIR}

A root's storage settings come only from its `storage` (as `storage.<key>` options of each read and write, and the
view job's Location): the tests start this driver and the cluster without any AWS_* variable. `hold` writes through
lakelog's own writer registered as `lakelog_held`, whose partition 0 task, on its first attempt, holds after it has
staged all its rows in closed files and before its commit message reaches the driver (a flag-file handshake with the
test in DIR, never a timer; DIR/held-0-0 names the staged files): `kill` holds it until the test has killed its
executor (DIR/release), `speculate` until a speculative copy has staged the same rows and finished. `driver` holds
the driver's commit instead, after every task staged its files and before the transaction (DIR/commit-held names
them), for the test to kill the driver there. `kill-read` holds the read_committed read instead: its partition 0
task, on its first attempt, stops after it has handed Spark its first batch of rows (DIR/read-held-0-0 names its
pid) until the test has killed its executor (DIR/read-release).
Kept free of pytest and of the tests' helpers: executors import only lakelog and pyspark.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

HOLD_TIMEOUT_S = 120.0
READ_TASKS = 4
EXECUTORS = 2  # the cluster's two one-core workers


def held_source(hold: Path, mode: str):
    """lakelog's own data source under the name `lakelog_held`, whose write task for partition 0 holds on its first
    attempt after its writer has staged (and closed) its files and before its commit message goes to the driver
    (`kill`, `speculate`), or whose driver-side commit holds before its transaction (`driver`).

    Defined in a function so that cloudpickle ships the classes by value to the executors (see the module doc).
    """
    from pyspark import TaskContext

    from pyspark_lakelog.source import LakelogDataSource, ReadOptions, TopicReader, TopicWriter, WriteOptions

    class HeldReader(TopicReader):
        def read(self, partition):
            context = TaskContext.get()
            held = mode == "kill-read" and context.partitionId() == 0 and context.attemptNumber() == 0
            for number, batch in enumerate(TopicReader.read(self, partition)):
                yield batch
                if held and number == 0:
                    (hold / "read-held-0-0").write_text(json.dumps({"pid": os.getpid()}))
                    deadline = time.monotonic() + HOLD_TIMEOUT_S
                    while time.monotonic() < deadline and not (hold / "read-release").exists():
                        time.sleep(0.05)

    class HeldWriter(TopicWriter):
        def write(self, iterator):
            staged = TopicWriter.write(self, iterator)
            context = TaskContext.get()
            partition, attempt = context.partitionId(), context.attemptNumber()
            if partition == 0 and attempt == 0 and mode in ("kill", "speculate"):
                files = [[uri, records] for _, _, uri, records in staged.files]
                (hold / f"held-{partition}-{attempt}").write_text(json.dumps({"pid": os.getpid(), "files": files}))
                wanted = "release" if mode == "kill" else f"done-{partition}-"
                deadline = time.monotonic() + HOLD_TIMEOUT_S
                while time.monotonic() < deadline and not any(p.name.startswith(wanted) for p in hold.iterdir()):
                    time.sleep(0.05)
            if partition == 0 and attempt > 0:
                (hold / f"done-{partition}-{attempt}").write_text(str(os.getpid()))
            return staged

        def commit(self, messages):
            if mode == "driver":
                files = [[uri, records] for message in messages if message for _, _, uri, records in message.files]
                (hold / "commit-held").write_text(json.dumps({"pid": os.getpid(), "staging": self.staging.uri, "files": files}))
                deadline = time.monotonic() + HOLD_TIMEOUT_S
                while time.monotonic() < deadline and not (hold / "release").exists():
                    time.sleep(0.05)
                raise RuntimeError("the test was to kill this driver before its commit")
            return TopicWriter.commit(self, messages)

    class HeldLakelog(LakelogDataSource):
        @classmethod
        def name(cls) -> str:
            return "lakelog_held"

        def reader(self, schema):
            return HeldReader(ReadOptions.parse(self.options))

        def writer(self, schema, overwrite):
            assert not overwrite
            return HeldWriter(WriteOptions.parse(self.options), schema)

    return HeldLakelog


def rows_of(frame) -> list[list]:
    return sorted([row[0], row[1], bytes(row[2]).hex()] for row in frame.select("partition", "offset", "value").collect())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("spec", help="a JSON file: {cases: [...], hold: DIR or null}; see the module doc")
    parser.add_argument("result", help="where to write the JSON results, one per case")
    args = parser.parse_args()
    spec = json.loads(Path(args.spec).read_text())

    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("lakelog cluster topic job").getOrCreate()
    results = [run_case(spark, number, case, spec.get("hold")) for number, case in enumerate(spec["cases"])]
    Path(args.result).write_text(json.dumps({"application": spark.sparkContext.applicationId, "cases": results}))
    spark.stop()


def wait_for_executors(context, count: int = EXECUTORS) -> None:
    """Until `count` executors are alive in the driver: after a case killed one, the next case's stages must again
    have two to spread over (the retried task already ran on the survivor, before its replacement started)."""
    deadline = time.monotonic() + HOLD_TIMEOUT_S
    # The block managers the driver knows: its own and one per live executor (PySpark's tracker has no executor list).
    while context._jsc.sc().getExecutorMemoryStatus().size() - 1 < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"fewer than {count} executors after {HOLD_TIMEOUT_S:.0f} s")
        time.sleep(0.1)


def run_case(spark, number: int, case: dict, hold: str | None) -> dict:
    """One root: both reads, the write (held on purpose if the case says `hold`), the view job if it says `view`."""
    context = spark.sparkContext
    wait_for_executors(context)
    root, storage = case["root"], {f"storage.{key}": value for key, value in case.get("storage", {}).items()}

    if case.get("hold"):
        assert hold is not None
        spark.dataSource.register(held_source(Path(hold), case["hold"]))

    def topic(isolation_level: str, held: bool = False):
        return (
            spark.read.format("lakelog_held" if held else "lakelog")
            .options(**storage)
            .option("root", root)
            .option("topic", case["source"])
            .option("isolation.level", isolation_level)
            .option("minPartitions", str(READ_TASKS))
            .load()
        )

    result: dict[str, object] = {}
    for level in ("read_committed", "read_uncommitted"):
        context.setJobDescription(f"{number} read {level}")
        frame = topic(level, held=case.get("hold") == "kill-read" and level == "read_committed")
        result[level] = rows_of(frame)
        result[f"{level} tasks"] = frame.rdd.getNumPartitions()
        wait_for_executors(context)  # a killed executor's replacement is up before the next step
    context.setJobDescription(f"{number} write")
    frame = topic("read_committed")
    writes = "lakelog_held" if case.get("hold") in ("kill", "speculate", "driver") else "lakelog"
    (
        frame.select("key", "value")
        .write.format(writes)
        .options(**storage)
        .option("root", root)
        .option("topic", case["dest"])
        .option("transactional.id", f"cluster-job-{case['dest']}")
        .option("batch.id", "0")
        .mode("append")
        .save()
    )
    if case.get("view"):
        from lakelog.client.roots import Location
        from pipelines.materialize_committed_view import materialize_committed_view

        context.setJobDescription(f"{number} view")
        result["view"] = materialize_committed_view(spark, Location.of(root, case.get("storage")), case["source"]).version
    return result


if __name__ == "__main__":
    main()
