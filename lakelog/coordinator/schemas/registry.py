"""The schema registry on the table `__schemas/0` of a root: every request decided on the replayed state.

Writes go through `CoordinatorLog.run` (the pure handler decides on the state at the log's end offset; the
append is conditional on that offset, S2.1): a lost race replays and decides again, so an id is never decided
on a stale state and no timing bound is involved (S9.5). Reads catch up with the log first (one look at the
table's next commit), so any process sees every registration committed before its call.
"""

from __future__ import annotations

from collections.abc import Callable

from lakelog.coordinator.runtime.state_log import CoordinatorLog, StateCodec
from lakelog.coordinator.schemas import handlers
from lakelog.coordinator.schemas.handlers import RegistryOutcome
from lakelog.coordinator.schemas.records import record_from_row
from lakelog.coordinator.schemas.state import RegistryState, replay, snapshot_of, state_from_snapshot
from lakelog.coordinator.schemas.types import SchemaRegistryError, registry_error
from lakelog.errors import KafkaException
from lakelog.log.topics import open_internal_partition
from lakelog.store import Location

SCHEMAS_LOG = "__schemas"
REQUEST_TIMEOUT_S = 60.0


class SchemaRegistry:
    """The registry of one root; cheap to create, safe to use from many processes at once."""

    def __init__(self, root: str | Location) -> None:
        self.root = root
        self._log: CoordinatorLog[RegistryState] | None = None

    @property
    def log(self) -> CoordinatorLog[RegistryState]:
        if self._log is None:
            try:
                partition = open_internal_partition(self.root, SCHEMAS_LOG, 0, 1, config={"cleanup.policy": "compact"})
            except KafkaException as error:
                raise registry_error(SchemaRegistryError.STORE_ERROR, f"Error while opening the schemas log: {error}") from None
            self._log = CoordinatorLog(
                partition,
                RegistryState(),
                record_from_row,
                replay,
                lambda record: record.key,
                codec=StateCodec(snapshot_of, state_from_snapshot),
            )
        return self._log

    def state(self) -> RegistryState:
        """The state with every committed record replayed."""
        try:
            return self.log.catch_up()
        except KafkaException as error:
            raise registry_error(SchemaRegistryError.STORE_ERROR, f"Error while reading the schemas log: {error}") from None

    def run(self, decide: Callable[[RegistryState], RegistryOutcome]) -> object:
        """Decide on the latest state and commit the records; the answer, or the outcome's error raised."""
        try:
            outcome = self.log.run(decide, REQUEST_TIMEOUT_S)
        except SchemaRegistryError:
            raise
        except KafkaException as error:
            code = SchemaRegistryError.TIMEOUT if error.retriable else SchemaRegistryError.STORE_ERROR
            raise registry_error(code, f"Error while writing the schemas log: {error}") from None
        if outcome.error is not None:
            raise outcome.error
        return outcome.response


__all__ = ["SCHEMAS_LOG", "SchemaRegistry", "handlers"]
