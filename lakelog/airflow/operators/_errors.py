"""How lakelog's errors end an Airflow task: bad input fails at once, a retriable error is retried."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

from airflow.sdk.exceptions import AirflowException, AirflowFailException

from lakelog.errors import KafkaException, PolicyViolation

logger = logging.getLogger(__name__)


@contextlib.contextmanager
def task_errors(what: str) -> Iterator[None]:
    """Raise AirflowFailException (no retry) for errors a retry cannot mend, AirflowException for the rest.

    A quality suite's refusal (PolicyViolation, abortable for a producer) fails at once: a retry would judge
    the same rows again. The message is the error's own one line, prefixed by `what`; no engine
    traceback reaches the log.
    """
    try:
        yield
    except KafkaException as error:
        line = f"{what}: {error.error.name()}: {error}"
        if not isinstance(error, PolicyViolation) and (error.error.retriable() or error.error.txn_requires_abort()):
            raise AirflowException(line) from None
        raise AirflowFailException(line) from None
