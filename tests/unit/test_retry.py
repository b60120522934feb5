"""The one retry policy (lakelog/store/retry.py): exponential backoff with full jitter, KIP-580's keys.

Every wait is uniform in [0, min(retry.backoff.max.ms, retry.backoff.ms * 2^n)]; a loop's deadline cuts
its last wait and ends its retries. A fake clock and a recording sleep stand in for time, so nothing
here sleeps. The last tests run the log's append loop against lost races: the wait changes when it
retries, and it still decides on the latest snapshot (ARCHITECTURE.md, the one rule; S2.2, S3.2).
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog import config
from lakelog.errors import CommitConflict, InvalidConfig, KafkaTimeout, OffsetMismatch
from lakelog.log import BatchHeader, create_topic, open_partition, payload_table
from lakelog.store import table as table_module
from lakelog.store.retry import DEFAULT_POLICY, RetryPolicy

MAX_MS = 300_000


class FakeTime:
    """A clock that only moves when something sleeps on it."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


@st.composite
def policies(draw) -> RetryPolicy:
    base = draw(st.integers(min_value=0, max_value=MAX_MS))
    return RetryPolicy(base, draw(st.integers(min_value=base, max_value=MAX_MS)))


# -- the delays ---------------------------------------------------------------------------------------------


@given(policies(), st.integers(min_value=0, max_value=200), st.integers())
def test_every_delay_is_within_zero_and_the_cap(policy, retry, seed):
    delay_ms = policy.delay_s(retry, random.Random(seed)) * 1000
    assert 0 <= delay_ms <= policy.cap_ms(retry) + 1e-9


@given(policies(), st.integers(min_value=0, max_value=200))
def test_the_cap_doubles_from_the_base_up_to_the_max(policy, retry):
    assert policy.cap_ms(retry) == min(policy.backoff_max_ms, policy.backoff_ms * 2**retry)
    assert policy.cap_ms(retry) <= policy.cap_ms(retry + 1) <= policy.backoff_max_ms
    assert policy.cap_ms(retry + 1) == min(policy.backoff_max_ms, 2 * policy.cap_ms(retry))


def test_kafka_defaults_cap_at_one_second_after_four_doublings():
    assert [DEFAULT_POLICY.cap_ms(n) for n in range(6)] == [100, 200, 400, 800, 1000, 1000]


def test_the_jitter_is_full_it_spreads_over_the_whole_window():
    """Full jitter, not Kafka's +-20%: waits come from the whole of [0, cap], small ones included."""
    source = random.Random(7)
    delays = [DEFAULT_POLICY.delay_s(3, source) * 1000 for _ in range(2000)]
    assert min(delays) < 0.05 * 800 and max(delays) > 0.95 * 800
    assert 0.45 * 800 < sum(delays) / len(delays) < 0.55 * 800


@given(policies(), st.integers(), st.integers(min_value=1, max_value=40))
def test_a_seeded_source_makes_the_same_waits(policy, seed, retries):
    runs = []
    for _ in range(2):
        fake = FakeTime()
        backoff = policy.start(None, clock=fake.clock, sleep=fake.sleep, source=random.Random(seed))
        for _ in range(retries):
            assert backoff.wait()
        runs.append(fake.sleeps)
    assert runs[0] == runs[1]
    assert backoff.retries == retries


@given(policies(), st.integers(), st.integers(min_value=1, max_value=40))
def test_each_wait_is_within_the_cap_of_its_retry(policy, seed, retries):
    fake = FakeTime()
    backoff = policy.start(None, clock=fake.clock, sleep=fake.sleep, source=random.Random(seed))
    for _ in range(retries):
        backoff.wait()
    caps = [policy.cap_ms(n) / 1000 for n in range(retries)]
    assert len(fake.sleeps) <= retries  # a wait of 0 does not sleep at all
    assert all(0 <= slept <= cap + 1e-12 for slept, cap in zip(_with_zeros(fake.sleeps, retries), caps))


def _with_zeros(sleeps: list[float], retries: int) -> list[float]:
    """Sleeps only happen for positive waits; with a base of 0 every wait is 0 and none happens."""
    return sleeps + [0.0] * (retries - len(sleeps))


# -- the deadline -------------------------------------------------------------------------------------------


@given(policies(), st.floats(min_value=0, max_value=30, allow_nan=False), st.integers())
def test_a_loop_never_waits_past_its_deadline(policy, timeout_s, seed):
    fake = FakeTime()
    backoff = policy.start(timeout_s, clock=fake.clock, sleep=fake.sleep, source=random.Random(seed))
    started = fake.now
    for _ in range(2000):  # tiny waits take long to reach a deadline; the bound holds for every one meanwhile
        if not backoff.wait():
            break
        assert fake.now <= started + timeout_s
    assert sum(fake.sleeps) <= timeout_s + 1e-9
    if backoff.expired():
        slept = len(fake.sleeps)
        assert not backoff.wait()  # once past, it stays past, and nothing more is slept
        assert len(fake.sleeps) == slept and backoff.remaining_s() == 0


def test_a_loop_without_a_deadline_never_expires():
    fake = FakeTime()
    backoff = DEFAULT_POLICY.start(None, clock=fake.clock, sleep=fake.sleep, source=random.Random(1))
    for _ in range(100):
        assert backoff.wait()
    assert not backoff.expired() and backoff.remaining_s() is None
    assert max(fake.sleeps) <= 1.0


def test_the_last_wait_is_cut_at_the_deadline():
    fake = FakeTime()
    always_long = random.Random()
    always_long.uniform = lambda low, high: high  # type: ignore[method-assign]
    backoff = RetryPolicy(400, 400).start(1.0, clock=fake.clock, sleep=fake.sleep, source=always_long)
    while backoff.wait():
        pass
    assert fake.sleeps == pytest.approx([0.4, 0.4, 0.2])


# -- configuration ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_clients_default_to_kafkas_backoff_which_is_the_package_default(kind):
    loaded = config.load(kind, {"lakelog.root": "lake"})
    assert (loaded["retry.backoff.ms"], loaded["retry.backoff.max.ms"]) == (100, 1000)
    assert RetryPolicy.from_config(loaded) == DEFAULT_POLICY


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_a_max_given_below_the_base_is_refused_naming_the_max(kind):
    with pytest.raises(InvalidConfig) as raised:
        config.load(kind, {"retry.backoff.ms": 2000, "retry.backoff.max.ms": 1000})
    assert raised.value.key == "retry.backoff.max.ms"
    assert "retry.backoff.max.ms" in str(raised.value)
    with pytest.raises(InvalidConfig):
        config.load(kind, {"retry.backoff.max.ms": 50})  # below the default base, 100
    loaded = config.load(kind, {"retry.backoff.ms": 2000, "retry.backoff.max.ms": 2000})
    assert RetryPolicy.from_config(loaded) == RetryPolicy(2000, 2000)


@pytest.mark.parametrize("kind", ["producer", "consumer", "admin"])
def test_a_base_given_alone_above_the_default_max_is_a_constant_backoff(kind):
    loaded = config.load(kind, {"retry.backoff.ms": 2000})
    assert RetryPolicy.from_config(loaded) == RetryPolicy(2000, 2000)
    assert config.load(kind, {"retry.backoff.ms": 500})["retry.backoff.max.ms"] == 1000


def test_a_conf_dir_with_a_max_below_its_base_is_refused(tmp_path, monkeypatch):
    (tmp_path / "producer.properties").write_text("retry.backoff.ms=500\nretry.backoff.max.ms=100\n")
    monkeypatch.setenv(config.CONF_DIR_ENV, str(tmp_path))
    with pytest.raises(InvalidConfig) as raised:
        config.load("producer")
    assert raised.value.key == "retry.backoff.max.ms"


@pytest.mark.parametrize("backoff_ms, backoff_max_ms", [(-1, 10), (10, 5), (True, 10), (10, 2.5)])
def test_a_policy_refuses_bad_bounds(backoff_ms, backoff_max_ms):
    with pytest.raises(InvalidConfig):
        RetryPolicy(backoff_ms, backoff_max_ms)


def test_a_config_without_the_max_takes_kafkas_default():
    assert RetryPolicy.from_config({"retry.backoff.ms": 50}) == RetryPolicy(50, 1000)


# -- lost races in the append loop --------------------------------------------------------------------------


class LosingRaces:
    """Table.append that, the first `times` times, lets another writer take the version first."""

    def __init__(self, monkeypatch, other, times: int) -> None:
        self.other = other
        self.times = times
        self.lost = 0
        original = table_module.Table.append

        def append(table, data: pa.Table, **kwargs):
            if table is not other.table and self.lost < self.times:
                self.lost += 1
                other.append(payload_table([f"other-{self.lost}".encode()]))
                raise CommitConflict("taken", decided_on=table.version, current_version=other.version)
            return original(table, data, **kwargs)

        monkeypatch.setattr(table_module.Table, "append", append)


def test_a_lost_race_waits_then_decides_again_on_the_latest_snapshot(root, monkeypatch):
    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    races = LosingRaces(monkeypatch, other, times=3)
    fake = FakeTime()
    backoff = DEFAULT_POLICY.start(60, clock=fake.clock, sleep=fake.sleep, source=random.Random(3))
    result = log.append(payload_table([b"mine"]), BatchHeader(7, 0, 0), backoff=backoff)
    assert races.lost == 3 and backoff.retries == 3
    assert all(0 <= slept <= DEFAULT_POLICY.cap_ms(n) / 1000 for n, slept in enumerate(fake.sleeps))
    # Decided again after each loss: it lands after the other writer's rows, not where it first meant to.
    assert result.base_offset == 3
    values = open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist()
    assert values == [b"other-1", b"other-2", b"other-3", b"mine"]


def test_a_conditional_append_that_lost_its_race_is_refused_after_one_wait(root, monkeypatch):
    """The wait does not change the decision: at the reloaded LEO the expected offset is stale (S2.1)."""
    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    LosingRaces(monkeypatch, other, times=1)
    fake = FakeTime()
    backoff = DEFAULT_POLICY.start(60, clock=fake.clock, sleep=fake.sleep, source=random.Random(3))
    with pytest.raises(OffsetMismatch):
        log.append(payload_table([b"mine"]), BatchHeader(expected_offset=0), backoff=backoff)
    assert backoff.retries == 1
    assert open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist() == [b"other-1"]


def test_lost_races_past_the_deadline_time_out_having_slept_no_longer(root, monkeypatch):
    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    LosingRaces(monkeypatch, other, times=10**6)
    fake = FakeTime()
    backoff = RetryPolicy(100, 1000).start(2.5, clock=fake.clock, sleep=fake.sleep, source=random.Random(5))
    with pytest.raises(KafkaTimeout):
        log.append(payload_table([b"mine"]), BatchHeader(), backoff=backoff)
    assert sum(fake.sleeps) <= 2.5 + 1e-9
    assert b"mine" not in open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist()
