"""Which group protocol a consumer speaks (librdkafka's `group.protocol`), and which assignor it asks for.

Both protocols run over the one group coordinator and its rules (S6): `classic` is a mode of the client, not a
second coordinator. Under `classic` the coordinator computes the assignment with the first assignor of
`partition.assignment.strategy` (`range`, `roundrobin`: eager, every partition revoked and then the whole
assignment given; `cooperative-sticky`: incremental, as KIP-429), and the member id is the coordinator's, known
once joined. Under `consumer` (KIP-848) the assignor is `group.remote.assignor` (default uniform) and the client
makes its member id (KIP-1082).

The default: `group.protocol` unset is `classic` when the program names `partition.assignment.strategy` (a key only
the classic protocol reads, which frameworks set to force it) and `consumer` otherwise, lakelog's behaviour since
its first release. librdkafka's own default is classic; lakelog keeps consumer so that programs written for it
(incremental callbacks, a member id before the first poll) run as they did.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lakelog.config.keys import COOPERATIVE_ASSIGNORS

# Kafka's and librdkafka's classic default.
DEFAULT_CLASSIC_STRATEGY = "range,roundrobin"
# The coordinator's assignor for each classic strategy: cooperative-sticky is the sticky, balanced one.
COORDINATOR_ASSIGNOR = {"range": "range", "roundrobin": "roundrobin", "cooperative-sticky": "cooperative-sticky"}


@dataclass(frozen=True)
class GroupProtocol:
    """A consumer's group protocol: `classic` or `consumer`; `eager` revocation; the assignor it asks for."""

    name: str
    eager: bool
    # The coordinator's assignor this member asks for ("" under consumer: the coordinator's default).
    assignor: str

    @property
    def classic(self) -> bool:
        return self.name == "classic"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> GroupProtocol:
        strategy = config["partition.assignment.strategy"]
        name = config["group.protocol"] or ("classic" if strategy else "consumer")
        if name == "consumer":
            return cls("consumer", False, config["group.remote.assignor"])
        first = (strategy or DEFAULT_CLASSIC_STRATEGY).split(",")[0]
        return cls("classic", first not in COOPERATIVE_ASSIGNORS, COORDINATOR_ASSIGNOR[first])


__all__ = ["DEFAULT_CLASSIC_STRATEGY", "GroupProtocol"]
