"""`transactions abort` as a compare-and-set (KIP-664, S4.8, S8.3), on real tables.

The admin observes a hanging transaction (producer id, epoch, first offset) and
aborts exactly that one: the marker is decided on a partition snapshot that still
shows it open and committed as that snapshot's next version. The interleavings are
explicit steps, never timing: between the observation and the abort, or inside the
abort between its decision and its commit (a fault hook), where the abort loses its
commit race and must check the latest snapshot again.
"""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import AdminClient, NewTopic, Producer
from lakelog.client.admin import transactions as admin
from lakelog.errors import InvalidRequest, InvalidTxnState, OffsetMismatch
from lakelog.log import BatchHeader, ControlType, open_partition, payload_table
from lakelog.log.verification import _UNVERIFIED

pytestmark = pytest.mark.roots("local")

TOPIC = "events"


@pytest.fixture
def lake(root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(TOPIC, num_partitions=2)])
    return root


def zombie_write(root: str, partition: int, producer_id: int, producer_epoch: int, value: bytes = b"zombie") -> None:
    """A write below the coordinator (S4.4 explicitly bypassed): the way a hanging transaction is made on purpose."""
    open_partition(root, TOPIC, partition).append(
        payload_table([value]), BatchHeader(producer_id, producer_epoch, 0, is_transactional=True), transaction=_UNVERIFIED
    )


def committed_values(root: str, partition: int) -> list[bytes]:
    return open_partition(root, TOPIC, partition).fetch(0, isolation_level="read_committed").rows.column("value").to_pylist()


@pytest.fixture
def hanging(lake):
    """A live producer of transactional.id "app" at epoch 1, and a hanging transaction its own producer id left
    at epoch 0 in partition 1 (a zombie of the first instance), as the admin observes it."""
    Producer({"lakelog.root": lake, "transactional.id": "app"}).init_transactions()
    live = Producer({"lakelog.root": lake, "transactional.id": "app"})
    live.init_transactions()
    zombie_write(lake, 1, live._producer_id, live._producer_epoch - 1)
    observed = admin.find_hanging_transaction(lake, TOPIC, 1, live._producer_id)
    assert (observed.producer_epoch, observed.start_offset) == (live._producer_epoch - 1, 0)
    return live, observed


def start_live_transaction(live: Producer) -> None:
    live.begin_transaction()
    for partition in range(2):
        live.produce(TOPIC, value=f"live-{partition}", partition=partition)
    live.flush()


def interleave(when: str, step):
    """Run `step` now ("before" the abort), or ("mid") at the abort's fault point, after its decision and
    before its commit. Returns the abort's fault hook and a list that receives `step`'s answer."""
    done: list = []
    if when == "before":
        done.append(step())
        return None, done

    def hook(point, details):
        assert point == admin.FAULT_BEFORE_ABORT_MARKER
        if not done:
            done.append(step())

    return hook, done


def joined_at_a_new_epoch(lake, live, observed):
    # The producer's next transaction writes to the partition while the old one is open: it joins it there.
    start_live_transaction(live)
    return live._producer_epoch, 0


def closed_and_reopened(lake, live, observed):
    # Another admin aborts it first; then the producer's next transaction opens a new one after that marker.
    assert admin.abort_transaction(lake, observed) == 1
    start_live_transaction(live)
    return live._producer_epoch, 2


@pytest.mark.parametrize("when", ["before", "mid"])
@pytest.mark.parametrize("interleaving", [joined_at_a_new_epoch, closed_and_reopened])
def test_S4_8_abort_of_an_observed_transaction_is_refused_once_its_producer_id_moved_on(lake, hanging, interleaving, when):
    """S4.8, S8.3: after the admin observed the hanging transaction, the same producer id starts a live transaction
    in the partition (before the abort, or inside it, so that the abort loses its commit race). The abort is
    refused, writes nothing, and the live transaction commits everywhere."""
    live, observed = hanging
    fingerprints = []
    hook, done = interleave(when, lambda: (interleaving(lake, live, observed), fingerprints.append(table_fingerprint(lake))))
    with pytest.raises(InvalidTxnState, match="no longer the one open") as refused:
        admin.abort_transaction(lake, observed, fault=hook)
    [((now_epoch, now_start), _)] = done
    assert table_fingerprint(lake) == fingerprints[0]
    error = refused.value
    assert (error.producer_id, error.producer_epoch, error.start_offset) == (
        observed.producer_id,
        observed.producer_epoch,
        observed.start_offset,
    )
    assert (error.current_producer_epoch, error.current_start_offset) == (now_epoch, now_start)
    live.commit_transaction()
    for partition in range(2):
        assert f"live-{partition}".encode() in committed_values(lake, partition)


def test_S8_3_abort_of_a_transaction_closed_meanwhile_is_refused(lake, hanging):
    _, observed = hanging
    assert admin.abort_transaction(lake, observed) == 1
    before = table_fingerprint(lake)
    with pytest.raises(InvalidTxnState, match="it is closed") as refused:
        admin.abort_transaction(lake, observed)
    assert (refused.value.current_producer_epoch, refused.value.current_start_offset) == (-1, -1)
    assert table_fingerprint(lake) == before


@pytest.mark.parametrize("when", ["before", "mid"])
def test_S4_8_abort_holds_when_only_other_producers_wrote_meanwhile(lake, hanging, when):
    """The compare-and-set is on the observed transaction, not on the whole partition: another producer's write
    is no reason to refuse (mid: the abort loses its race to it, checks the latest snapshot, and lands after it)."""
    _, observed = hanging
    other = Producer({"lakelog.root": lake})

    def write_other():
        other.produce(TOPIC, value="other", partition=1)
        other.flush()

    hook, done = interleave(when, write_other)
    assert admin.abort_transaction(lake, observed, fault=hook) == 2
    assert len(done) == 1
    log = open_partition(lake, TOPIC, 1)
    assert log.open_transactions() == {}
    assert committed_values(lake, 1) == [b"other"]
    marker = log.fetch(2).rows.to_pylist()[0]
    assert (marker["control"], marker["producer_id"], marker["producer_epoch"]) == (
        "ABORT",
        observed.producer_id,
        observed.producer_epoch + 1,
    )


def test_S8_1_find_hanging_transaction_by_any_of_its_fields(lake, hanging):
    _, observed = hanging
    assert admin.find_hanging_transaction(lake, TOPIC, 1, start_offset=0) == observed
    assert admin.find_hanging_transaction(lake, TOPIC, 1, observed.producer_id, producer_epoch=0, start_offset=0) == observed
    before = table_fingerprint(lake)
    for wrong in ({"producer_epoch": 5}, {"start_offset": 3}):
        with pytest.raises(InvalidTxnState, match="no hanging transaction"):
            admin.find_hanging_transaction(lake, TOPIC, 1, observed.producer_id, **wrong)
    with pytest.raises(InvalidRequest):
        admin.find_hanging_transaction(lake, TOPIC, 1, producer_epoch=0)
    assert table_fingerprint(lake) == before


def test_S8_3_marker_with_an_expected_offset_is_refused_when_the_log_moved(lake, hanging):
    """The partition side of the compare-and-set: a marker decided at a log end offset lands only there."""
    _, observed = hanging
    log = open_partition(lake, TOPIC, 1)
    before = table_fingerprint(lake)
    with pytest.raises(OffsetMismatch):
        log.append_marker(observed.producer_id, observed.producer_epoch + 1, ControlType.ABORT, expected_offset=0)
    assert table_fingerprint(lake) == before
    marker = log.append_marker(observed.producer_id, observed.producer_epoch + 1, ControlType.ABORT, expected_offset=1)
    assert (marker.base_offset, marker.duplicate) == (1, False)
