"""Internal logs keep defaults of their own under the topic defaults, as Kafka's internal topics do.

A topic partition's defaults favour its cold open (a checkpoint every 10 commits, small files merged at 100).
A coordinator's log takes several commits per transaction and is seldom opened cold, so it keeps a checkpoint
every 50 commits and merges at 200 files: with the topic defaults a transaction's offsets cost 3.2-3.5 times a
plain offset commit in `bench/kafka_reference`, against 2.3-2.7.
"""

from __future__ import annotations

import pytest

from lakelog.config.loader import defaults
from lakelog.log import create_topic, open_partition
from lakelog.log.topics import INTERNAL_LOG_CONFIG, open_internal_partition

pytestmark = pytest.mark.roots("local")


def settings(log) -> tuple[int, int]:
    return log.config.values["checkpoint.interval.commits"], log.config.segment_files


def test_internal_logs_keep_their_own_checkpoint_interval_and_file_count_and_a_caller_s_config_wins(root):
    create_topic(root, "orders", 1)
    topic_defaults = defaults("topic")
    assert settings(open_partition(root, "orders", 0)) == (
        topic_defaults["checkpoint.interval.commits"],
        topic_defaults["segment.files"],
    )
    assert settings(open_internal_partition(root, "__transaction_state", 0, 1)) == (
        INTERNAL_LOG_CONFIG["checkpoint.interval.commits"],
        INTERNAL_LOG_CONFIG["segment.files"],
    )
    assert INTERNAL_LOG_CONFIG == {"checkpoint.interval.commits": 50, "segment.files": 200}
    assert settings(open_internal_partition(root, "__tuned", 0, 1, config={"segment.files": 7})) == (50, 7)
    # The table stores them: a later open reads what the create wrote.
    assert settings(open_internal_partition(root, "__transaction_state", 0, 1)) == (50, 200)
