"""`Messages`: confluent-kafka's batch of messages (a read-only sequence), exported from the package as confluent_kafka
exports it. confluent-kafka 2.15 returns it from its share consumer's poll (KIP-932, which lakelog leaves out);
`Consumer.consume()` returns a list in both packages."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import overload

from lakelog.client.types import Message


class Messages:
    """A batch of messages: iteration, len(), indexing and slicing (a slice is a Messages), count(), is_empty(),
    records() (a copy of the list)."""

    def __init__(self, messages: Iterable[Message] = ()) -> None:
        self._records = list(messages)

    def records(self) -> list[Message]:
        """A copy of the batch's messages as a list."""
        return list(self._records)

    def count(self) -> int:
        """The number of messages in the batch."""
        return len(self._records)

    def is_empty(self) -> bool:
        """Whether the batch holds no message."""
        return not self._records

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[Message]:
        return iter(self._records)

    @overload
    def __getitem__(self, index: int) -> Message: ...

    @overload
    def __getitem__(self, index: slice) -> Messages: ...

    def __getitem__(self, index: int | slice) -> Message | Messages:
        if isinstance(index, slice):
            return Messages(self._records[index])
        return self._records[index]

    def __repr__(self) -> str:
        return f"Messages({self._records!r})"
