"""LakelogCommittedSensor: wait until a topic's committed data reaches given offsets (S5.1).

    load = LakelogLoadOperator(task_id="load", topic="orders", source=...)
    LakelogCommittedSensor(task_id="committed", topic="orders", offsets=load.output["offsets"])

With `offsets` (`{partition: offset}`, or the load XCom's `{partition: [first, last]}`,
which waits for `last + 1`) it waits until each partition's LSO reaches its
offset: every record below it is committed or aborted for good. Without, it
waits until no open transaction holds any partition back (LSO == high
watermark everywhere), e.g. until the sweep aborted a dead producer's
transaction (S4.7). The conditions live in `lakelog.jobs.committed_wait`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from airflow.sdk import BaseSensorOperator, PokeReturnValue
from airflow.sdk.exceptions import AirflowFailException

from lakelog.airflow.hooks.lakelog import DEFAULT_CONN_ID, LakelogHook
from lakelog.airflow.operators._errors import task_errors
from lakelog.airflow.triggers.committed import LakelogCommittedTrigger
from lakelog.errors import KafkaException
from lakelog.jobs.committed_wait import CommittedCheck, CommittedWait

logger = logging.getLogger(__name__)


class LakelogCommittedSensor(BaseSensorOperator):
    """Wait until `topic`'s LSO reaches `offsets`, or with no offsets until no open transaction holds it back.

    :param topic: the topic (templated; it must exist).
    :param offsets: `{partition: offset}` or `{partition: [first, last]}` (templated; an XComArg such as
        `load.output["offsets"]` or the load's whole XCom works too); None waits on every partition's HW.
    :param lakelog_conn_id: the `lakelog` connection naming the root.
    :param deferrable: wait in the triggerer (default), freeing the worker slot; False pokes
        (BaseSensorOperator's `poke` or `reschedule` mode).
    :param poke_interval: seconds between checks (default 5).

    Returns (XCom) `{"topic", "last_stable_offsets": {partition: lso}}`. Each check logs which
    partitions still hold back and from which offset the open transactions holding them began.
    `timeout` is BaseSensorOperator's (AirflowSensorTimeout when it runs out).
    """

    template_fields: Sequence[str] = ("topic", "offsets")
    ui_color = "#d8f0e0"

    def __init__(
        self,
        *,
        topic: str,
        offsets: Any = None,
        lakelog_conn_id: str = DEFAULT_CONN_ID,
        deferrable: bool = True,
        poke_interval: timedelta | float = 5.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(poke_interval=poke_interval, **kwargs)
        self.topic = topic
        self.offsets = offsets
        self.lakelog_conn_id = lakelog_conn_id
        self.deferrable = deferrable
        self._wait: CommittedWait | None = None

    def _what(self) -> str:
        return f"wait for committed offsets of {self.topic}"

    def _watch(self) -> CommittedWait:
        """The wait, built once per try: the connection resolved and the offsets checked (bad input fails here)."""
        if self._wait is None:
            with task_errors(self._what()):
                connection = LakelogHook(self.lakelog_conn_id).connection
                self._wait = CommittedWait(connection.root, self.topic, self.offsets, connection.storage_options)
        return self._wait

    def _check(self) -> CommittedCheck | None:
        """One check; None after a retriable error (logged), which the next check may not meet."""
        wait = self._watch()
        try:
            check = wait.check()
        except KafkaException as error:
            line = f"{self._what()}: {error.error.name()}: {error}"
            if not error.error.retriable():
                raise AirflowFailException(line) from None
            self.log.warning("%s; checking again in %s s", line, self.poke_interval)
            return None
        self.log.info("%s", check.describe())
        return check

    def execute(self, context: Any) -> Any:
        if not self.deferrable:
            return super().execute(context)
        # One check in the worker first: a missing topic fails here, and a topic already there does not defer.
        check = self._check()
        if check is not None and check.done:
            return check.as_dict()
        wait = self._watch()
        self.defer(
            trigger=_trigger(self, wait),
            method_name="execute_complete",
            timeout=timedelta(seconds=self.timeout),
        )

    def execute_complete(self, context: Any, event: dict[str, Any] | None = None) -> dict[str, Any]:
        if not event or event.get("status") != "success":
            message = (event or {}).get("message") or f"{self._what()}: the trigger ended without an event"
            raise AirflowFailException(message)
        result = {"topic": event["topic"], "last_stable_offsets": event["last_stable_offsets"]}
        self.log.info("topic %s reached the offsets waited for: LSO %s", result["topic"], result["last_stable_offsets"])
        return result

    def poke(self, context: Any) -> bool | PokeReturnValue:
        check = self._check()
        if check is None or not check.done:
            return False
        return PokeReturnValue(is_done=True, xcom_value=check.as_dict())


def _trigger(sensor: LakelogCommittedSensor, wait: CommittedWait) -> LakelogCommittedTrigger:
    return LakelogCommittedTrigger(
        topic=wait.topic,
        root=str(wait.root),
        storage_options=wait.storage_options,
        offsets=wait.targets,
        poke_interval=sensor.poke_interval,
    )


__all__ = ["LakelogCommittedSensor"]
