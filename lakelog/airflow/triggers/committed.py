"""LakelogCommittedTrigger: polls a topic's LSO in the triggerer until it reaches the offsets waited for (S5.1).

The trigger carries the resolved root and storage options, so it needs no
connection lookup from async code. Airflow stores a trigger's kwargs encrypted
when `[core] fernet_key` is set: set it if the connection holds secrets.
lakelog's reads block, so each check runs in a thread.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from lakelog.errors import KafkaException
from lakelog.jobs.committed_wait import CommittedWait

logger = logging.getLogger(__name__)


class LakelogCommittedTrigger(BaseTrigger):
    """Fires once `topic`'s LSO reached `offsets` (or, with none, once no open transaction holds a partition back).

    Its event is `{"status": "success", "topic", "last_stable_offsets"}`, or
    `{"status": "error", "message"}` for an error a later poll cannot mend (a
    missing topic); a retriable one (the store unreachable) is logged and polled again.

    :param topic: the topic.
    :param root: the lakelog root (as the connection's extra names it).
    :param storage_options: the root's storage options.
    :param offsets: `{partition: offset}` (text keys are fine), or None.
    :param poke_interval: seconds between checks.
    """

    def __init__(
        self,
        *,
        topic: str,
        root: str,
        storage_options: Mapping[str, Any] | None = None,
        offsets: Mapping[Any, int] | None = None,
        poke_interval: float = 5.0,
    ) -> None:
        super().__init__()
        self.topic = topic
        self.root = root
        self.storage_options = dict(storage_options or {})
        self.offsets = None if offsets is None else {str(p): int(o) for p, o in offsets.items()}
        self.poke_interval = poke_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "topic": self.topic,
                "root": self.root,
                "storage_options": self.storage_options,
                "offsets": self.offsets,
                "poke_interval": self.poke_interval,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        wait = CommittedWait(self.root, self.topic, self.offsets, self.storage_options)
        while True:
            try:
                check = await asyncio.to_thread(wait.check)
            except KafkaException as error:
                line = f"wait for committed offsets of {self.topic}: {error.error.name()}: {error}"
                if not error.error.retriable():
                    self.log.error("%s; the wait ends failed", line)
                    yield TriggerEvent({"status": "error", "message": line})
                    return
                self.log.warning("%s; polling again in %s s", line, self.poke_interval)
            else:
                self.log.info("%s", check.describe())
                if check.done:
                    yield TriggerEvent({"status": "success", **check.as_dict()})
                    return
            await asyncio.sleep(self.poke_interval)


__all__ = ["LakelogCommittedTrigger"]
