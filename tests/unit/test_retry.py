"""The one retry policy (lakelog/store/io/retry.py): exponential backoff with full jitter, KIP-580's keys.

Every wait is uniform in [0, min(retry.backoff.max.ms, retry.backoff.ms * 2^n)]; a loop's deadline cuts
its last wait and ends its retries. A lost commit race retries at once the first time in a loop, and waits
so from its second on. A fake clock and a recording sleep stand in for time, so nothing
here sleeps. The last tests run the loops against lost races (the log's append, a coordinator's log,
init_producer_id, producer-id allocation, the producer's send): the wait changes when a loop retries,
never what it decides, which is always on the latest snapshot (ARCHITECTURE.md, the one rule; S1.1,
S2.1, S2.2, S3.1, S4.2, S8.3, S9.5); each request waits on one backoff, and giving up is KafkaTimeout.
"""

from __future__ import annotations

import json
import logging
import random

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lakelog import KafkaError, Producer, config
from lakelog.coordinator import TxnState
from lakelog.coordinator import transaction as txn
from lakelog.coordinator.transaction.coordinator import FAULT_AFTER_DECISION, TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.errors import CommitConflict, ConcurrentTransactions, InvalidConfig, KafkaTimeout, OffsetMismatch
from lakelog.log import BatchHeader, allocate_producer_id, create_topic, open_partition, payload_table
from lakelog.log.topics import open_internal_partition
from lakelog.store.delta import table as table_module
from lakelog.store.io.retry import DEFAULT_POLICY, Backoff, RetryPolicy

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


class OnFakeTime:
    """A retry policy whose backoffs run on a fake clock; keeps every backoff it starts (one per request)."""

    def __init__(self, policy: RetryPolicy = DEFAULT_POLICY, seed: int = 3) -> None:
        self.policy = policy
        self.time = FakeTime()
        self.started: list[Backoff] = []
        self._source = random.Random(seed)

    def start(self, timeout_s: float | None) -> Backoff:
        backoff = self.policy.start(timeout_s, clock=self.time.clock, sleep=self.time.sleep, source=self._source)
        self.started.append(backoff)
        return backoff

    def with_deadline(self) -> list[Backoff]:
        """The backoffs of requests (producer-id allocation runs without a deadline, on one of its own)."""
        return [backoff for backoff in self.started if backoff.deadline is not None]


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
    assert all(0 <= slept <= cap + 1e-12 for slept, cap in zip(_with_zeros(fake.sleeps, retries), caps, strict=False))


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


def test_the_first_lost_race_retries_at_once_and_the_waits_then_double_from_the_base():
    """Losing v+1 means another writer committed it: a handle behind by its commits loses once, so the first
    retry waits for nothing; from the second loss on, the n-th wait is within cap(n) as in any loop."""
    fake = FakeTime()
    always_long = random.Random()
    always_long.uniform = lambda low, high: high  # type: ignore[method-assign]
    backoff = RetryPolicy(100, 1000).start(60, clock=fake.clock, sleep=fake.sleep, source=always_long)
    assert backoff.lost_race() and fake.sleeps == [] and backoff.retries == 1
    for _ in range(5):
        assert backoff.lost_race()
    assert fake.sleeps == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0]) and backoff.retries == 6


def test_a_lost_race_past_the_deadline_is_not_retried_even_the_first():
    fake = FakeTime()
    backoff = DEFAULT_POLICY.start(1.0, clock=fake.clock, sleep=fake.sleep, source=random.Random(2))
    fake.now += 1.0
    assert not backoff.lost_race() and backoff.retries == 0 and fake.sleeps == []


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
    """Table.append to `other`'s table that, the first `times` times, lets `other` take the version first."""

    def __init__(self, monkeypatch, other, times: int) -> None:
        self.other = other
        self.times = times
        self.lost = 0
        original = table_module.Table.append

        def append(table, data: pa.Table, **kwargs):
            if table is not other.table and table.uri == other.table.uri and self.lost < self.times:
                self.lost += 1
                other.append(payload_table([f"other-{self.lost}".encode()]))
                raise CommitConflict("taken", decided_on=table.version, current_version=other.version)
            return original(table, data, **kwargs)

        monkeypatch.setattr(table_module.Table, "append", append)


def test_S1_1_S9_5_a_lost_race_decides_again_on_the_latest_snapshot_at_once_then_after_waits(root, monkeypatch, caplog):
    """S9.5: a writer that lost commits only what it decided on the snapshot it reloaded after the loss (at
    once the first time, after a wait from the second on); its offsets follow the rows it lost to (S1.1)."""
    caplog.set_level(logging.DEBUG, logger="lakelog.log.partition")
    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    races = LosingRaces(monkeypatch, other, times=3)
    fake = FakeTime()
    backoff = DEFAULT_POLICY.start(60, clock=fake.clock, sleep=fake.sleep, source=random.Random(3))
    result = log.append(payload_table([b"mine"]), BatchHeader(7, 0, 0), backoff=backoff)
    assert races.lost == 3 and backoff.retries == 3 and len(fake.sleeps) == 2
    assert all(0 <= slept <= DEFAULT_POLICY.cap_ms(n) / 1000 for n, slept in enumerate(fake.sleeps))
    # Decided again after each loss: it lands after the other writer's rows, not where it first meant to.
    assert result.base_offset == 3
    values = open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist()
    assert values == [b"other-1", b"other-2", b"other-3", b"mine"]
    lost = [record for record in caplog.records if "lost its commit race" in record.getMessage()]
    assert len(lost) == 3 and all(record.levelno == logging.DEBUG for record in lost)


def test_S2_1_S2_2_a_conditional_append_that_lost_its_race_is_refused_on_the_reloaded_snapshot(root, monkeypatch):
    """Deciding again does not change the decision: at the reloaded LEO the expected offset is stale (S2.1),
    so of two writers at one expected offset exactly one lands (S2.2)."""
    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    LosingRaces(monkeypatch, other, times=1)
    fake = FakeTime()
    backoff = DEFAULT_POLICY.start(60, clock=fake.clock, sleep=fake.sleep, source=random.Random(3))
    with pytest.raises(OffsetMismatch):
        log.append(payload_table([b"mine"]), BatchHeader(expected_offset=0), backoff=backoff)
    assert backoff.retries == 1 and fake.sleeps == []
    assert open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist() == [b"other-1"]


def test_S9_5_a_handle_that_lost_a_race_reloads_before_deciding_and_one_that_did_not_never_does(root, monkeypatch):
    """After a lost race, another writer shares the partition: the next appends reload first (one read of v+1)
    and land without losing to what it committed meanwhile. A handle that never lost decides on the snapshot in
    hand (within its age) with no read at all. Either way the put-if-absent decides (the one rule)."""
    from lakelog.store.upkeep import maintenance

    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    reloads: list[str] = []
    original_refresh = table_module.Table.refresh

    def refresh(table):
        if table is log.table:
            reloads.append(table.uri)
        return original_refresh(table)

    monkeypatch.setattr(table_module.Table, "refresh", refresh)
    for value in (b"alone-1", b"alone-2", b"alone-3"):
        log.append(payload_table([value]))
    reloads.clear()
    log.append(payload_table([b"alone-4"]))
    assert reloads == [], "a handle that never lost a race reloaded before deciding"
    LosingRaces(monkeypatch, other, times=1)
    log.append(payload_table([b"mine-1"]))  # loses once to other-1, then lands
    for n in range(3):
        other.append(payload_table([f"theirs-{n}".encode()]))  # the handle in hand is now behind
        fake = FakeTime()
        backoff = DEFAULT_POLICY.start(60, clock=fake.clock, sleep=fake.sleep, source=random.Random(1))
        log.append(payload_table([f"mine-{n + 2}".encode()]), backoff=backoff)
        assert backoff.retries == 0, "the append lost a race it could have seen coming"
    # Each reload that found the other writer's commits counts the probes again; one that found none counts down.
    assert maintenance._shared[log.table] == maintenance.PROBES_AFTER_LOSS
    log.append(payload_table([b"mine-5"]))
    assert maintenance._shared[log.table] == maintenance.PROBES_AFTER_LOSS - 1
    values = open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist()
    assert values[4:] == [
        b"other-1",
        b"mine-1",
        b"theirs-0",
        b"mine-2",
        b"theirs-1",
        b"mine-3",
        b"theirs-2",
        b"mine-4",
        b"mine-5",
    ]


def test_S8_3_lost_races_past_the_deadline_time_out_having_slept_no_longer(root, monkeypatch, caplog):
    """Giving up is KafkaTimeout (_TIMED_OUT) in one sentence and one WARNING line; the batch is not written (S8.3)."""
    create_topic(root, "t", 1)
    log, other = open_partition(root, "t", 0), open_partition(root, "t", 0)
    LosingRaces(monkeypatch, other, times=10**6)
    fake = FakeTime()
    backoff = RetryPolicy(100, 1000).start(2.5, clock=fake.clock, sleep=fake.sleep, source=random.Random(5))
    with pytest.raises(KafkaTimeout) as raised:
        log.append(payload_table([b"mine"]), BatchHeader(), backoff=backoff)
    assert sum(fake.sleeps) <= 2.5 + 1e-9
    assert b"mine" not in open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist()
    assert raised.value.error.code() == KafkaError._TIMED_OUT and "\n" not in str(raised.value)
    assert [r.levelno for r in caplog.records if "giving up" in r.getMessage()] == [logging.WARNING]


# -- lost races in the coordinators and in producer-id allocation --------------------------------------------


def _same_partition_id(coordinator: TransactionCoordinator, transactional_id: str) -> str:
    """Another transactional id whose records go to the same __transaction_state partition."""
    wanted = txn.partition_for_transactional_id(transactional_id, coordinator.num_partitions)
    return next(
        candidate
        for candidate in (f"other-{n}" for n in range(10_000))
        if txn.partition_for_transactional_id(candidate, coordinator.num_partitions) == wanted
    )


def _lose_first_append(monkeypatch, where: str, winner) -> list[str]:
    """Table.append (or Table.rewrite, which commits the producer-id counter) under `where`: the first call
    runs `winner()` (whose own commits go through) and then loses its race to what the winner committed."""
    lost: list[str] = []
    for name in ("append", "rewrite"):
        original = getattr(table_module.Table, name)

        def commit(table, *args, _original=original, **kwargs):
            if where in table.uri and not lost:
                lost.append(table.uri)
                winner()
                raise CommitConflict("taken", decided_on=table.version, current_version=table.version + 1)
            return _original(table, *args, **kwargs)

        monkeypatch.setattr(table_module.Table, name, commit)
    return lost


def test_S2_1_a_coordinator_that_lost_its_race_replays_and_decides_again_at_once(root, monkeypatch):
    """The coordinator's conditional append (S2.1) lost to another process's record for another id of the
    same partition: it replays that record and decides again, at once (its first loss), on its request's backoff."""
    retry = OnFakeTime()
    coordinator, other = TransactionCoordinator(root, retry=retry), TransactionCoordinator(root)
    rival = _same_partition_id(coordinator, "app")
    lost = _lose_first_append(monkeypatch, f"/{TRANSACTION_STATE_LOG}/", lambda: other.init_producer_id(rival, 60_000))
    mine = coordinator.init_producer_id("app", 60_000)
    assert len(lost) == 1
    [backoff] = retry.with_deadline()
    assert backoff.retries == 1 and retry.time.sleeps == []
    theirs = TransactionCoordinator(root).describe(rival)
    assert mine.producer_id != theirs.producer_id and mine.producer_epoch == 0
    partition = txn.partition_for_transactional_id("app", coordinator.num_partitions)
    log = open_internal_partition(root, TRANSACTION_STATE_LOG, partition, coordinator.num_partitions)
    keys = [json.loads(value)["transactional_id"] for value in log.fetch(0).rows.column("value").to_pylist()]
    assert keys == [rival, "app"]


def test_S3_1_a_producer_id_allocation_that_lost_its_race_waits_and_takes_the_next_id(root, monkeypatch):
    retry = OnFakeTime()
    taken: list[int] = []
    lost = _lose_first_append(monkeypatch, "/__producer_ids", lambda: taken.append(allocate_producer_id(root)))
    mine = allocate_producer_id(root, retry=retry)
    assert len(lost) == 1 and taken == [0] and mine == 1
    [backoff] = retry.started
    assert backoff.retries == 1 and all(slept <= DEFAULT_POLICY.cap_ms(0) / 1000 for slept in retry.time.sleeps)


class Crash(Exception):
    """Stands for a process dying at a fault point."""


def _crash_after_decision(name, details) -> None:
    if name == FAULT_AFTER_DECISION:
        raise Crash(name)


@pytest.mark.parametrize("left", ["ongoing", "decided"])
def test_S4_2_init_finishes_the_transaction_it_meets_and_asks_again_without_waiting(root, left):
    """Nothing raced: init finishes what the last instance left (aborts an ongoing transaction, rolls a decided
    one forward) and asks again at once; a wait would only delay it."""
    create_topic(root, "t", 1)
    first = TransactionCoordinator(root, fault=_crash_after_decision)
    started = first.init_producer_id("app", 60_000)
    first.add_partitions("app", started.producer_id, started.producer_epoch, [("t", 0)])
    if left == "decided":
        with pytest.raises(Crash):
            first.end_transaction("app", started.producer_id, started.producer_epoch, commit=True)
    retry = OnFakeTime()
    coordinator = TransactionCoordinator(root, retry=retry)
    assert coordinator.describe("app").state is (TxnState.ONGOING if left == "ongoing" else TxnState.PREPARE_COMMIT)
    again = coordinator.init_producer_id("app", 60_000)
    assert again.producer_id == started.producer_id and again.producer_epoch > started.producer_epoch
    assert coordinator.describe("app").state is TxnState.EMPTY
    control = open_partition(root, "t", 0).fetch(0).rows.column("control").to_pylist()
    assert control == (["ABORT"] if left == "ongoing" else ["COMMIT"])
    assert retry.time.sleeps == [] and [backoff.retries for backoff in retry.with_deadline()] == [0]


def test_S4_2_init_that_keeps_meeting_an_unfinished_transaction_waits_then_times_out(root, monkeypatch, caplog):
    """ConcurrentTransactions again after init finished the transaction itself means another process moved
    the id on: from then on init waits on its one backoff, and gives up at its deadline with KafkaTimeout."""
    refusals = []

    def still_concurrent(*_args, **_kwargs):
        refusals.append(1)
        return txn.Outcome(error=ConcurrentTransactions("another process is completing the transaction; retry"))

    monkeypatch.setattr(txn, "init_producer_id", still_concurrent)
    retry = OnFakeTime(RetryPolicy(100, 400))
    with pytest.raises(KafkaTimeout) as raised:
        TransactionCoordinator(root, retry=retry).init_producer_id("app", 60_000, timeout_s=3.0)
    [backoff] = retry.with_deadline()
    assert sum(retry.time.sleeps) <= 3.0 + 1e-9 and backoff.expired()
    # The first refusal is asked again at once, each later one after a wait, but the last: past the deadline.
    assert len(refusals) == 1 + backoff.retries + 1
    assert all(slept <= RetryPolicy(100, 400).cap_ms(n) / 1000 for n, slept in enumerate(retry.time.sleeps))
    assert "\n" not in str(raised.value)
    assert [r.levelno for r in caplog.records if "giving up" in r.getMessage()] == [logging.WARNING]


def test_a_send_that_keeps_losing_races_is_reported_timed_out_with_one_line(root, monkeypatch, caplog):
    """The producer's send waits on one backoff for lost races and failures alike (retry.backoff.ms /
    retry.backoff.max.ms), and past message.timeout.ms reports _TIMED_OUT and logs that it gives up."""
    create_topic(root, "t", 1)
    LosingRaces(monkeypatch, open_partition(root, "t", 0), times=10**6)
    reports = []
    producer = Producer(
        {
            "lakelog.root": root,
            "linger.ms": 0,
            "message.timeout.ms": 300,
            "retry.backoff.ms": 1,
            "retry.backoff.max.ms": 20,
        }
    )
    producer.produce("t", b"mine", partition=0, on_delivery=lambda error, message: reports.append(error))
    producer.flush()
    assert [error.code() for error in reports] == [KafkaError._TIMED_OUT]
    assert b"mine" not in open_partition(root, "t", 0).fetch(0).rows.column("value").to_pylist()
    assert len([r for r in caplog.records if r.levelno == logging.WARNING and "giving up" in r.getMessage()]) >= 1
