"""Producer ids are allocated only when the outcome needs one (S4.1, S8.3), on real tables.

The transaction coordinator's handlers answer "needs a new producer id" instead of
taking one up front; the coordinator allocates it once that answer holds on the
latest `__transaction_state`, so a refusal, or a decision on a stale state that a
lost race corrects, leaves `__producer_ids` as it was.
"""

from __future__ import annotations

import itertools

import pytest
from helpers import Crash, crash_at, table_fingerprint

from lakelog import AdminClient, NewTopic, Producer
from lakelog.coordinator import TransactionMetadata, partition_for_transactional_id
from lakelog.coordinator.transaction.coordinator import FAULT_BEFORE_MARKER, TRANSACTION_STATE_LOG, TransactionCoordinator
from lakelog.errors import ProducerFenced
from lakelog.log import BatchHeader
from lakelog.log.partition import wall_clock_ms
from lakelog.log.producer_ids import NEXT_ID_APP_ID, PRODUCER_IDS_DIR
from lakelog.log.records import MAX_EPOCH
from lakelog.store import Location, Table

pytestmark = pytest.mark.roots("local")

TOPIC = "orders"
TIMEOUT_MS = 60_000


@pytest.fixture
def lake(root):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic(TOPIC, num_partitions=2)])
    return root


def internal(root: str, name: str) -> str:
    return (Location.of(root) / name).uri


def allocation_tables(root: str):
    """`__producer_ids` and `__transaction_state`, byte for byte (S8.3)."""
    return table_fingerprint(internal(root, PRODUCER_IDS_DIR)), table_fingerprint(internal(root, TRANSACTION_STATE_LOG))


def next_producer_id(root: str) -> int:
    """The counter of `__producer_ids`: how many ids were ever handed out."""
    location = Location.of(root) / PRODUCER_IDS_DIR
    if not table_fingerprint(location.uri):
        return 0
    return Table.open(location).app_version(NEXT_ID_APP_ID) or 0


def test_S8_3_init_decided_on_a_stale_state_allocates_no_producer_id(lake):
    """A coordinator whose state is behind first sees the id as unknown; the id is known on the latest state,
    so the init bumps its epoch and no producer id is taken (today's code took one on the stale decision)."""
    stale = TransactionCoordinator(lake)
    assert stale.describe("app") is None
    first = TransactionCoordinator(lake).init_producer_id("app", TIMEOUT_MS)
    ids_before = table_fingerprint(internal(lake, PRODUCER_IDS_DIR))
    again = stale.init_producer_id("app", TIMEOUT_MS)
    assert (again.producer_id, again.producer_epoch) == (first.producer_id, first.producer_epoch + 1)
    assert table_fingerprint(internal(lake, PRODUCER_IDS_DIR)) == ids_before


def test_S8_3_init_that_fails_finishing_the_last_transaction_leaves_the_allocation_tables_unchanged(lake):
    """S4.2: an init over a decided transaction finishes it first; when that fails (here: a marker write),
    the init has changed nothing, and took no producer id although its stale state showed the id unknown."""
    stale = TransactionCoordinator(lake, fault=crash_at(FAULT_BEFORE_MARKER))
    assert stale.describe("app") is None
    p = Producer({"lakelog.root": lake, "transactional.id": "app"})
    p.init_transactions()
    p.begin_transaction()
    p.produce(TOPIC, value="decided", partition=0)
    p._coordinator = TransactionCoordinator(lake, fault=crash_at(FAULT_BEFORE_MARKER))
    with pytest.raises(Crash):
        p.commit_transaction()  # PrepareCommit recorded, no marker written
    before = table_fingerprint(lake)
    with pytest.raises(Crash):
        stale.init_producer_id("app", TIMEOUT_MS)
    assert table_fingerprint(lake) == before


def test_S8_3_refused_end_at_the_last_epoch_allocates_no_producer_id(lake):
    """An end at the exhausted epoch moves the id to a new producer id (S4.6); a fenced producer's end there
    is refused and leaves __producer_ids and __transaction_state byte-identical; the holder's end takes one id."""
    coordinator = TransactionCoordinator(lake)
    first = coordinator.init_producer_id("tired", TIMEOUT_MS)
    state_log = coordinator._log_of("tired")
    worn = TransactionMetadata(**{**state_log.state["tired"].__dict__, "producer_epoch": MAX_EPOCH - 1})
    state_log.log.append(state_log._encode([worn]), BatchHeader(expected_offset=state_log.catch_up() and state_log.position))
    coordinator.add_partitions("tired", first.producer_id, MAX_EPOCH - 1, [(TOPIC, 0)])
    before, ids_before = allocation_tables(lake), next_producer_id(lake)
    with pytest.raises(ProducerFenced):
        TransactionCoordinator(lake).end_transaction("tired", first.producer_id, MAX_EPOCH - 2, True)
    assert allocation_tables(lake) == before
    result = coordinator.end_transaction("tired", first.producer_id, MAX_EPOCH - 1, True)
    assert (result.producer_id, result.producer_epoch) == (ids_before, 0)
    assert next_producer_id(lake) == ids_before + 1


def test_S8_3_a_race_lost_after_the_allocation_reuses_the_id(lake):
    """Between this init's allocation and its commit another id of the same __transaction_state partition
    commits: the init decides again with the id it holds, so one id per request, never one per attempt."""
    partitions = TransactionCoordinator(lake).num_partitions
    home = partition_for_transactional_id("app", partitions)
    neighbour = next(
        name for name in (f"other-{n}" for n in itertools.count()) if partition_for_transactional_id(name, partitions) == home
    )
    other = TransactionCoordinator(lake)
    ids_before = next_producer_id(lake)
    interfered = []

    def clock() -> int:
        # An explicit step, not timing: the first read of the clock after this init allocated its id.
        if not interfered and next_producer_id(lake) > ids_before:
            interfered.append(other.init_producer_id(neighbour, TIMEOUT_MS))
        return wall_clock_ms()

    result = TransactionCoordinator(lake, clock=clock).init_producer_id("app", TIMEOUT_MS)
    [neighbour_result] = interfered
    assert (result.producer_id, result.producer_epoch) == (ids_before, 0)
    assert neighbour_result.producer_id == ids_before + 1
    assert next_producer_id(lake) == ids_before + 2
    state_log = other._log_of("app")
    state_log.catch_up()
    assert state_log.state["app"].producer_id == ids_before
