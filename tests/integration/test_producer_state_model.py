"""Producer state against a model (S9.4, S3.5): random appends, markers, clock moves and reopens on a real table.

The model is Kafka's ProducerStateManager reduced to a dict: producer id -> the entry its
last batch or marker left, judged expired by the same clock. The log's verdicts, through
a handle that may be cold, behind other writers, or have dropped entries at a later clock,
must be the model's.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule

from lakelog.errors import KafkaException, OutOfOrderSequence
from lakelog.log import BatchHeader, ControlType, create_topic, open_partition, payload_table
from lakelog.log.producer_state import ProducerEntry, Verdict, check_batch
from lakelog.log.records import NO_SEQUENCE, last_sequence, next_sequence
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.slow

T0 = 1_700_000_000_000
EXPIRATION = 1_000
PRODUCERS = (1, 2, 3)  # 2 writes transactionally


class ProducerStateMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.folder = tempfile.mkdtemp(prefix="lakelog-producer-model-")
        create_topic(self.folder, "t", 1, {"producer.id.expiration.ms": EXPIRATION})
        self.now = T0
        self.handles = [self._open(), self._open()]
        self.model: dict[int, ProducerEntry] = {}
        self.records: dict[tuple[int, int, int], int] = {}  # (pid, epoch, sequence) -> offset of its last copy
        self.leo = 0

    def _open(self):
        return open_partition(self.folder, "t", 0, clock=lambda: self.now)

    def teardown(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)

    @rule(
        pid=st.sampled_from(PRODUCERS),
        handle=st.sampled_from([0, 1]),
        count=st.integers(1, 3),
        base=st.sampled_from(["next", "zero", "retry", "gap"]),
        epoch_step=st.sampled_from([0, 0, 0, 1, -1]),
    )
    def append(self, pid, handle, count, base, epoch_step):
        known = self.model.get(pid)
        epoch = max(0, (known.producer_epoch if known else 0) + epoch_step)
        sequence = {
            "next": 0 if known is None or known.last_sequence == NO_SEQUENCE else next_sequence(known.last_sequence),
            "zero": 0,
            "retry": 0 if known is None or known.last_sequence == NO_SEQUENCE else max(0, known.last_sequence - count + 1),
            "gap": 5 + (0 if known is None else known.last_sequence + 1),
        }[base]
        header = BatchHeader(pid, epoch, sequence, is_transactional=pid == 2)
        try:
            expected = check_batch(known, header, count, self.now, EXPIRATION)
        except KafkaException as error:
            expected = type(error)
        log = self.handles[handle]
        log.refresh()  # decided on the latest snapshot, as the model: the handle's cache catches up from the files
        try:
            result = log.append(payload_table([b"v"] * count), header, transaction=_UNVERIFIED)
        except KafkaException as error:
            if expected is Verdict.MAYBE_DUPLICATE:
                assert type(error) is OutOfOrderSequence  # no single batch of that epoch and sequence range
            else:
                assert type(error) is expected, (error, expected)
            return
        if expected is Verdict.MAYBE_DUPLICATE:
            assert result.duplicate and self.records[(pid, epoch, sequence)] == result.base_offset
            return
        assert expected is Verdict.APPEND and not result.duplicate and result.base_offset == self.leo
        for i in range(count):
            self.records[(pid, epoch, (sequence + i) % 2**31)] = self.leo + i
        self.leo += count
        self.model[pid] = ProducerEntry(pid, epoch, last_sequence(sequence, count), self.now, self.leo - 1, pid == 2)

    @rule(handle=st.sampled_from([0, 1]), control=st.sampled_from(ControlType))
    def marker(self, handle, control):
        known = self.model.get(2)
        epoch = (known.producer_epoch if known else 0) + 1
        self.handles[handle].refresh()
        result = self.handles[handle].append_marker(2, epoch, control)
        assert not result.duplicate
        self.model[2] = ProducerEntry(2, epoch, NO_SEQUENCE, self.now, self.leo, False)
        self.leo += 1

    @rule(step=st.sampled_from([1, EXPIRATION, EXPIRATION + 1, 5 * EXPIRATION, -EXPIRATION]))
    def move_clock(self, step):
        self.now += step

    @rule(handle=st.sampled_from([0, 1]))
    def reopen(self, handle):
        self.handles[handle] = self._open()

    @rule(handle=st.sampled_from([0, 1]), pid=st.sampled_from(PRODUCERS))
    def entry_is_the_models(self, handle, pid):
        log = self.handles[handle]
        log.refresh()
        assert log.producer_entry(pid) == self.model.get(pid)


ProducerStateMachine.TestCase.settings = settings(
    max_examples=12, stateful_step_count=14, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
test_S9_4_random_producer_histories_against_a_model = ProducerStateMachine.TestCase
