"""The main job, end to end on a root (a local folder by default, or s3://bucket/prefix): exactly once through crashes, retries and zombies.

Stage 1, bulk load (S2.4):
1. generate a data set of orders (Parquet);
2. create topic `orders` with check.expected.offsets=true (KIP-27);
3. start `lakelog load` in a child process and SIGKILL it halfway through;
4. run the same load again: it resumes from the table alone;
5. consume the topic and prove every source row is there exactly once, in order.

Stage 2, transactions (S4, S5; pipelines/demo_transactions.py): two producers
share a transactional.id and one becomes a zombie, transactions commit and
abort, a producer dies mid-transaction and the coordinator sweep aborts it, and
a read_committed consume shows exactly the committed rows.

Stage 3, consumer groups (S6, S7; pipelines/demo_groups.py): the exactly-once
consume-transform-produce job (pipelines/consume_transform_produce.py) runs 3
worker processes in one group; one is SIGKILLed and restarted, one is paused
past its session and comes back a zombie whose offsets are refused; the output
holds every input record exactly once.

Stage 4, Spark and SQL (pipelines/demo_spark.py): the read_committed view job
is SIGKILLed between writing and committing and run again, a new transaction
is appended incrementally, the partition status is written, and the real
spark-sql shell and DuckDB query the view and agree.

Stage 5, Structured Streaming (pipelines/demo_stream.py): the streaming job from
topic to topic is SIGKILLed mid-batch and restarted from its checkpoint; the
output holds each committed input record once.

Run: `./dev demo` (or `python -m pipelines.demo --root demo-root --rows 200000`).
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa

from lakelog import AdminClient, Consumer, NewTopic, TopicPartition
from lakelog.client.roots import Location, check_root, make_root
from lakelog.jobs.load import load

from . import demo_groups, demo_spark, demo_stream, demo_transactions

TOPIC = "orders"


def generate(path: Location, rows: int, seed: int = 7) -> None:
    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "order_id": pa.array(np.arange(rows, dtype="int64")),
            "customer": pa.array([f"c{n}" for n in rng.integers(0, 5000, rows)]),
            "amount_cents": pa.array(rng.integers(100, 100_000, rows)),
        }
    )
    path.io.write_parquet(table, path.uri)


def kill_loader_halfway(root: Location, source: Location, rows: int, batch_records: int) -> int:
    """Start the loader as a child process and SIGKILL it once about half the rows are in."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lakelog.cli",
            "load",
            TOPIC,
            str(source),
            "--root",
            str(root),
            "--batch-records",
            str(batch_records),
            "--no-progress",
        ],
        stdout=subprocess.DEVNULL,
    )
    partition = TopicPartition(TOPIC, 0)
    with Consumer({"lakelog.root": root, "isolation.level": "read_uncommitted"}) as watcher:
        while child.poll() is None:
            if watcher.get_watermark_offsets(partition)[1] >= rows // 2:
                child.send_signal(signal.SIGKILL)
                child.wait()
                break
            time.sleep(0.05)
        return watcher.get_watermark_offsets(partition)[1]


def verify(root: Location, rows: int) -> None:
    """Every order_id 0..rows-1 exactly once and in offset order."""
    seen = []
    with Consumer({"lakelog.root": root, "enable.partition.eof": True, "max.poll.records": 10_000}) as consumer:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        while True:
            batch = consumer.consume(10_000, timeout=5)
            if not batch:
                raise SystemExit("demo: consumer timed out before the end of the partition")
            done = False
            for message in batch:
                if message.error() is not None:
                    done = True
                    break
                seen.append(json.loads(message.value())["order_id"])
            if done:
                break
    if seen != list(range(rows)):
        duplicates = len(seen) - len(set(seen))
        missing = rows - len(set(seen))
        raise SystemExit(f"demo: FAILED: {len(seen)} rows read, {duplicates} duplicated, {missing} missing")
    print(f"verified: {len(seen)} rows consumed, each source row exactly once, in order")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", default="demo-root", help="root: a folder or s3://bucket/prefix (wiped first)")
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--batch-records", type=int, default=10_000)
    parser.add_argument("--clicks", type=int, default=20_000, help="records the consumer group transforms (stage 3)")
    args = parser.parse_args()
    root = check_root(args.root)
    root.io.delete_tree(root.uri)
    make_root(root)  # as `lakelog init` does: the clients take no folder or prefix that is not a root
    source = root / "orders.parquet"
    started = time.monotonic()
    generate(source, args.rows)
    print(f"generated {args.rows} orders in {source}")
    created = AdminClient({"lakelog.root": root}).create_topics([NewTopic(TOPIC, 1, config={"check.expected.offsets": "true"})])
    created[TOPIC].result()
    print(f"created topic {TOPIC} (check.expected.offsets=true)")
    killed_at = kill_loader_halfway(root, source, args.rows, args.batch_records)
    print(f"loader SIGKILLed with {killed_at} of {args.rows} rows committed")
    result = load(root, TOPIC, source, batch_records=args.batch_records)
    print(
        f"loader resumed at source row {result.resumed_from_row} and appended {result.appended_by_this_run} rows; "
        f"offsets {result.start_offset}..{result.end_offset - 1}"
    )
    verify(root, args.rows)
    print("-- stage 2: transactions")
    demo_transactions.run(root)
    print("-- stage 3: consumer groups, consume-transform-produce")
    demo_groups.run(root, args.clicks)
    print("-- stage 4: committed views refreshed by Spark, spark-sql and DuckDB over them")
    demo_spark.run(root)
    print("-- stage 5: Structured Streaming from topic to topic, killed mid-batch and restarted")
    demo_stream.run(root)
    print(f"demo finished in {time.monotonic() - started:.1f} s; root: {root}")


if __name__ == "__main__":
    main()
