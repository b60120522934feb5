"""librdkafka's statistics (`stats_cb` every `statistics.interval.ms`), with the fields a root can fill.

The JSON is librdkafka's shape (STATISTICS.md): the client's header, `topics` -> `partitions` with offsets, lag and
message counts, `cgrp` for a group member and `eos` for a transactional producer. There are no brokers, so `brokers`
is empty and each partition's `broker` and `leader` are -1; a field lakelog has no value for keeps librdkafka's
"unknown" (-1, or OFFSET_INVALID -1001 for an offset). The callback runs on the thread calling poll()/consume()
(the producer's poll() and flush()), as confluent-kafka runs it, when an interval has passed on the client's clock.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable, Mapping
from typing import Any

from lakelog.log.partition import Clock

OFFSET_INVALID = -1001
_names = itertools.count()


def partition_stats(partition: int, **fields: Any) -> dict[str, Any]:
    """One partition's entry, librdkafka's fields with their unknown values overlaid by `fields`."""
    entry: dict[str, Any] = {
        "partition": partition,
        "broker": -1,
        "leader": -1,
        "desired": True,
        "unknown": False,
        "msgq_cnt": 0,
        "msgq_bytes": 0,
        "xmit_msgq_cnt": 0,
        "xmit_msgq_bytes": 0,
        "fetchq_cnt": 0,
        "fetchq_size": 0,
        "fetch_state": "none",
        "query_offset": OFFSET_INVALID,
        "next_offset": OFFSET_INVALID,
        "app_offset": OFFSET_INVALID,
        "stored_offset": OFFSET_INVALID,
        "committed_offset": OFFSET_INVALID,
        "eof_offset": OFFSET_INVALID,
        "lo_offset": -1,
        "hi_offset": -1,
        "ls_offset": -1,
        "consumer_lag": -1,
        "consumer_lag_stored": -1,
        "txmsgs": 0,
        "txbytes": 0,
        "rxmsgs": 0,
        "rxbytes": 0,
        "msgs": 0,
        "rx_ver_drops": 0,
        "msgs_inflight": 0,
    }
    entry.update(fields)
    return entry


def topics_stats(partitions: Mapping[tuple[str, int], dict[str, Any]]) -> dict[str, Any]:
    """`topics` of the statistics from each partition's entry."""
    topics: dict[str, Any] = {}
    for (topic, partition), entry in sorted(partitions.items()):
        topics.setdefault(topic, {"topic": topic, "age": 0, "metadata_age": 0, "partitions": {}})
        topics[topic]["partitions"][str(partition)] = entry
    return topics


class Statistics:
    """Calls `stats_cb` with the statistics JSON once per `statistics.interval.ms` of the client's clock."""

    def __init__(self, callback: Callable[[str], Any] | None, interval_ms: int, clock: Clock, kind: str, client_id: str):
        self._callback = callback if interval_ms > 0 else None
        self._interval_ms = interval_ms
        self._clock = clock
        self._kind = kind
        self._client_id = client_id
        self._name = f"{client_id}#{kind}-{next(_names) + 1}"
        self._started_us = time.monotonic_ns() // 1000
        self._next_ms = clock() + interval_ms

    def maybe_emit(self, build: Callable[[], dict[str, Any]]) -> None:
        """If an interval has passed, build the client's part of the statistics and call stats_cb with the JSON."""
        if self._callback is None or self._clock() < self._next_ms:
            return
        self._next_ms = self._clock() + self._interval_ms
        now_us = time.monotonic_ns() // 1000
        stats: dict[str, Any] = {
            "name": self._name,
            "client_id": self._client_id,
            "type": self._kind,
            "ts": now_us,
            "time": int(time.time()),
            "age": now_us - self._started_us,
            "replyq": 0,
            "msg_cnt": 0,
            "msg_size": 0,
            "msg_max": 0,
            "msg_size_max": 0,
            "simple_cnt": 0,
            "metadata_cache_cnt": 0,
            "brokers": {},
            "topics": {},
            "tx": 0,
            "tx_bytes": 0,
            "rx": 0,
            "rx_bytes": 0,
            "txmsgs": 0,
            "txmsg_bytes": 0,
            "rxmsgs": 0,
            "rxmsg_bytes": 0,
        }
        stats.update(build())
        self._callback(json.dumps(stats))


__all__ = ["Statistics", "partition_stats", "topics_stats"]
