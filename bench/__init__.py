"""Benchmarks for lakelog's append path, run as `python -m bench` (all) or `python -m bench.<name>`.

Speed is judged by ratios against a baseline measured in the same process, never
by absolute timings: machines differ, ratios travel. Each benchmark prints a
small table, then `ratio ...` lines with PASS/MISS against its target. A MISS is
informational: the exit status is 0 unless a benchmark crashes.
"""

BENCHMARKS = (
    "append_floor",
    "append_throughput",
    "append_latency",
    "conditional_append",
    "read_committed",
    "fetch_memory",
    "sql_memory",
    "transactional_produce",
    "contention",
    "coordinator_recovery",
    "group_commit",
    "spark_scan",
    "delta_read",
    "delta_read_s3",
    "view_refresh",
    "spark_partitions",
    "view_materialize",
    "stream_throughput",
    "s3_emulator",
    "s3_commit",
    "round_trips",
    "scale",
    "airflow_load",
    "short_lived_producers",
    "producer_ids",
    "transaction_cost",
    "year_of_traffic",
    "internal_compaction",
    "heartbeats",
    "transaction_verification",
    "quality_gate",
    "cli_startup",
    "kafka_reference",
    "console_scale",
    "database_sink",
)
