"""What every quality gate shares: which topics are gated, the verdict on a unit's rows, dead letters.

A gate (the transactional Producer, `lakelog load`, Spark writes, view
refreshes) keeps a unit's rows in hand, `judge`s them before its commit
decision, and acts on the `Verdict` (S11.1-S11.3):

- `publish` False (an enforce failure): `record_result` outside the
  transaction, abort, raise `verdict.violation()`;
- `dead_letter` True: the rows go to `dlq_topic(topic)` instead, each with the
  header DLQ_HEADER = the validation id, in the same transaction as the result;
- otherwise the rows go to their topic; the result (`result_payload`) is
  appended to the results log inside the transaction, so it commits or aborts
  with them (S11.2).

`gated_suites` reads suites only (one small read per topic, no GX import);
`judge` imports GX on its first call in the process.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from lakelog.errors import PolicyViolation
from lakelog.quality.dead_letter import dlq_topic
from lakelog.quality.fields import FieldColumns
from lakelog.quality.results import new_validation_id
from lakelog.quality.suites import Suite, read_suite
from lakelog.quality.validate import ValidationResult
from lakelog.store import Location

logger = logging.getLogger(__name__)

ENFORCE, WARN, DEAD_LETTER = "enforce", "warn", "dead-letter"


def gated_suites(root: str | Location, topics: Iterable[str]) -> dict[str, Suite]:
    """Each gated topic's suite (ungated topics are absent): one small read per topic, no GX import."""
    suites = {}
    for topic in dict.fromkeys(topics):
        suite = read_suite(root, topic)
        if suite is not None:
            suites[topic] = suite
    return suites


@dataclass(frozen=True)
class Verdict:
    """A suite's verdict on one unit's rows of a topic, and what the gate does with them."""

    topic: str
    suite: Suite
    result: ValidationResult
    validation_id: str
    mode: str

    @property
    def publish(self) -> bool:
        """False only for an enforce failure: the unit must not commit (S11.1)."""
        return self.result.success or self.mode != ENFORCE

    @property
    def dead_letter(self) -> bool:
        """True for a dead-letter failure: the unit's rows go to `<topic>.dlq` instead (S11.3)."""
        return self.mode == DEAD_LETTER and not self.result.success

    @property
    def destination(self) -> str:
        """Where the unit's rows are published: the topic, or its dead-letter topic."""
        return dlq_topic(self.topic) if self.dead_letter else self.topic

    def violation(self) -> PolicyViolation:
        """The PolicyViolation an enforce failure raises (names the expectation; carries result, gx_result, id)."""
        return self.result.violation(self.validation_id)


def judge(suite: Suite, topic: str, rows: pa.Table, value_fields: FieldColumns | None = None) -> Verdict:
    """Validate a unit's rows of `topic` (payload or Kafka-source columns) against its suite, under a new id
    (`value_fields`: its `value.<field>` columns parsed already, as StagedRows keeps them)."""
    from lakelog.quality.validate import validate

    result = validate(suite, rows, value_fields)
    verdict = Verdict(topic, suite, result, new_validation_id(), suite.mode)
    # validate() logged the verdict's details; this line names the id its result row will carry.
    logger.info(
        "validation %s of %d rows of %s: %s (mode %s)",
        verdict.validation_id,
        result.row_count,
        topic,
        "passed" if result.success else "failed",
        suite.mode,
    )
    return verdict


__all__ = [
    "DEAD_LETTER",
    "ENFORCE",
    "WARN",
    "Verdict",
    "gated_suites",
    "judge",
]
