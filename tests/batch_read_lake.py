"""A small root for the batch-read option tests: topics "orders" (2 partitions, timestamped), "order-returns" and
"payments" (1 partition each)."""

from __future__ import annotations

from lakelog.log import create_topic, open_partition, payload_table

# Per partition of topic "orders": values and their timestamps (ms).
ORDERS = {0: [(b"a0", 1000), (b"a1", 2000), (b"a2", 3000)], 1: [(b"b0", 1500), (b"b1", 2500)]}


def make_lake(root: str) -> str:
    create_topic(root, "orders", 2)
    create_topic(root, "order-returns", 1)
    create_topic(root, "payments", 1)
    for partition, rows in ORDERS.items():
        values, stamps = zip(*rows, strict=True)
        open_partition(root, "orders", partition).append(payload_table(list(values), timestamps_ms=list(stamps)))
    open_partition(root, "order-returns", 0).append(payload_table([b"r0"]))
    open_partition(root, "payments", 0).append(payload_table([b"p0"]))
    return root
