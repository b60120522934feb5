"""A Consumer's part of librdkafka's statistics (lakelog.client.statistics): per assigned partition its offsets,
lag and the messages poll returned, and the group member's state."""

from __future__ import annotations

from typing import Any

from lakelog.client.consumer.fetcher import fetched_key
from lakelog.client.consumer.state import ConsumerState
from lakelog.client.statistics import OFFSET_INVALID, partition_stats, topics_stats
from lakelog.client.types import Message
from lakelog.typedef import TopicPartitionKey


def count_received(received: dict[TopicPartitionKey, list[int]], messages: list[Message]) -> None:
    """Add the records poll returned to each partition's (messages, bytes)."""
    for message in messages:
        if message.error() is None:
            counts = received.setdefault(fetched_key(message), [0, 0])
            counts[0] += 1
            counts[1] += len(message.value() or b"") + len(message.key() or b"")


def consumer_stats(state: ConsumerState, received: dict[TopicPartitionKey, list[int]]) -> dict[str, Any]:
    """The consumer's fields: each assigned partition's offsets (lo, hi, last stable), position, stored and
    committed offsets, lag (to the end it reads to) and messages received; `cgrp` when subscribed."""
    partitions: dict[TopicPartitionKey, dict[str, Any]] = {}
    read_committed = state.config["isolation.level"] == "read_committed"
    for tp, assigned in state.assigned.items():
        log = assigned.log
        low, high, stable = log.log_start_offset(), log.high_watermark(), log.last_stable_offset()
        end = stable if read_committed else high
        position = assigned.position if assigned.position is not None else OFFSET_INVALID
        stored = state.stored.get(tp, (OFFSET_INVALID, None))[0]
        committed = state.last_committed.get(tp, OFFSET_INVALID)
        count, size = received.get(tp, [0, 0])
        partitions[tp] = partition_stats(
            tp[1],
            fetchq_cnt=len(assigned.buffer),
            fetch_state="stopped" if assigned.paused else "active",
            next_offset=position,
            app_offset=position,
            stored_offset=stored,
            committed_offset=committed,
            lo_offset=low,
            hi_offset=high,
            ls_offset=stable,
            consumer_lag=max(0, end - position) if position >= 0 else -1,
            consumer_lag_stored=max(0, end - stored) if stored >= 0 else -1,
            rxmsgs=count,
            rxbytes=size,
            msgs=count,
        )
    fields: dict[str, Any] = {
        "topics": topics_stats(partitions),
        "rxmsgs": sum(counts[0] for counts in received.values()),
        "rxmsg_bytes": sum(counts[1] for counts in received.values()),
        "metadata_cache_cnt": len({topic for topic, _ in partitions}),
    }
    membership = state.membership
    if membership is not None:
        fields["cgrp"] = {
            "state": "up" if membership.member_id else "wait-coord",
            "stateage": 0,
            "join_state": "steady" if membership.member_id else "init",
            "rebalance_age": 0,
            "rebalance_cnt": membership.member_epoch,
            "rebalance_reason": "",
            "assignment_size": len(state.assigned),
        }
    return fields


__all__ = ["consumer_stats", "count_received"]
