"""The one answer of a coordinator's pure handler: records to append in one commit, then a response or an error."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from lakelog.errors import KafkaException

Rec = TypeVar("Rec")
R = TypeVar("R")


@dataclass(frozen=True)
class Outcome(Generic[Rec, R]):
    """Records to append (in order, in one commit), then the response or the error to return."""

    records: tuple[Rec, ...] = ()
    response: R | None = None
    error: KafkaException | None = None
    # Nothing decided yet: the request goes through only with a newly allocated producer id, which the caller
    # allocates once this answer holds on the latest state, then asks again with it (S8.3: no id for a refusal).
    needs_producer_id: bool = False

    def __post_init__(self) -> None:
        if self.response is not None and self.error is not None:
            raise ValueError("an outcome has a response or an error, not both")
        if self.needs_producer_id and (self.records or self.response is not None or self.error is not None):
            raise ValueError("an outcome that needs a producer id decides nothing else")

    @property
    def ok(self) -> bool:
        return self.error is None
