"""Value types of the AdminClient's calls, shaped like confluent_kafka.admin's (names, fields, enum values).

A root is one "cluster" of one "node" (id 0): the nodes, leaders and replicas these
types carry all name that node, as a single-broker cluster would.
"""

from __future__ import annotations

import base64
import enum
import functools
import logging
import uuid
from dataclasses import dataclass
from typing import Any

from lakelog.client.types import NODE_ID, BrokerMetadata

logger = logging.getLogger(__name__)


class ResourceType(enum.Enum):
    """confluent-kafka's ResourceType (librdkafka's values)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ResourceType):
            return NotImplemented
        return self.value < other.value


class ResourcePatternType(enum.Enum):
    """How an ACL binding's resource name matches resources: LITERAL, PREFIXED, or MATCH/ANY in a filter."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class ConfigSource(enum.Enum):
    """Where a described config value comes from (librdkafka's values)."""

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


class AlterConfigOpType(enum.Enum):
    """An incremental_alter_configs operation: SET, DELETE (back to the default), APPEND/SUBTRACT (list keys)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigEntry:
    """One config property: described by describe_configs, or an operation of incremental_alter_configs."""

    def __init__(
        self,
        name: str,
        value: str | None,
        source: ConfigSource = ConfigSource.UNKNOWN_CONFIG,
        is_read_only: bool = False,
        is_default: bool = False,
        is_sensitive: bool = False,
        is_synonym: bool = False,
        synonyms: dict[str, ConfigEntry] | None = None,
        incremental_operation: AlterConfigOpType | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.is_read_only = bool(is_read_only)
        self.is_default = bool(is_default)
        self.is_sensitive = bool(is_sensitive)
        self.is_synonym = bool(is_synonym)
        self.synonyms = dict(synonyms or {})
        self.incremental_operation = incremental_operation

    def __repr__(self) -> str:
        return f'ConfigEntry({self.name}="{self.value}")'

    def __str__(self) -> str:
        return f'{self.name}="{self.value}"'


@functools.total_ordering
class ConfigResource:
    """A resource with a config (a topic, or the root as broker 0) and the changes asked for it."""

    Type = ResourceType

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str,
        set_config: dict[str, str] | None = None,
        described_configs: dict[str, ConfigEntry] | None = None,
        error: Any = None,
        incremental_configs: list[ConfigEntry] | None = None,
    ) -> None:
        if name is None:
            raise ValueError("Expected resource name to be a string")
        if isinstance(restype, str):
            try:
                restype = ResourceType[restype.upper()]
            except KeyError:
                raise ValueError(f'Unknown resource type "{restype}": should be a ConfigResource.Type') from None
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        self.restype = restype
        self.restype_int = int(restype.value)
        self.name = name
        self.set_config_dict = dict(set_config or {})
        self.incremental_configs = list(incremental_configs or [])
        self.configs = described_configs
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ConfigResource({self.restype},{self.name},{self.error!r})"
        return f"ConfigResource({self.restype},{self.name})"

    def __hash__(self) -> int:
        return hash((self.restype, self.name))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return (self.restype.value, self.name) < (other.restype.value, other.name)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return self.restype == other.restype and self.name == other.name

    def __len__(self) -> int:
        return len(self.set_config_dict)

    def set_config(self, name: str, value: str, overwrite: bool = True) -> None:
        """Set a value for alter_configs (which reverts every key not set to its default)."""
        if not overwrite and name in self.set_config_dict:
            return
        self.set_config_dict[name] = value

    def add_incremental_config(self, config_entry: ConfigEntry) -> None:
        """Add an operation (its `incremental_operation`) for incremental_alter_configs."""
        self.incremental_configs.append(config_entry)


@dataclass
class NewPartitions:
    """A topic's new total partition count, as confluent-kafka's (replicas are the store's business)."""

    topic: str
    new_total_count: int
    replica_assignment: list | None = None


@dataclass(frozen=True)
class Node:
    """A node of the cluster; a root is one, id 0, at host `lakelog.root`."""

    id: int
    host: str
    port: int = -1
    rack: str | None = None

    @property
    def id_string(self) -> str:
        """The node id as a string."""
        return str(self.id)

    def __str__(self) -> str:
        return f"({self.id}) {self.host}:{self.port} "


@dataclass(frozen=True)
class GroupMember:
    """A member in list_groups (the classic API's shape); a root keeps no client id, host or protocol bytes."""

    id: str
    client_id: str = ""
    client_host: str = ""
    metadata: bytes = b""
    assignment: bytes = b""


@dataclass(frozen=True)
class GroupMetadata:
    """A group in list_groups (confluent-kafka's deprecated classic listing)."""

    id: str
    broker: BrokerMetadata
    state: str
    protocol_type: str = "consumer"
    protocol: str = ""
    members: list[GroupMember] | None = None
    error: Any = None

    def __str__(self) -> str:
        return str(self.id)


@dataclass(frozen=True)
class Uuid:
    """A topic id as confluent-kafka's Uuid: two 64-bit halves, printed in Kafka's base64 form."""

    most_significant_bits: int
    least_significant_bits: int

    @classmethod
    def of(cls, text: str) -> Uuid:
        """The Uuid of a UUID given in its canonical text form."""
        value = uuid.UUID(text).int
        return cls(_signed(value >> 64), _signed(value & ((1 << 64) - 1)))

    def get_most_significant_bits(self) -> int:
        """The upper 64 bits, as a signed integer."""
        return self.most_significant_bits

    def get_least_significant_bits(self) -> int:
        """The lower 64 bits, as a signed integer."""
        return self.least_significant_bits

    def __str__(self) -> str:
        raw = ((self.most_significant_bits & (2**64 - 1)) << 64 | (self.least_significant_bits & (2**64 - 1))).to_bytes(16, "big")
        return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


@dataclass(frozen=True)
class TopicPartitionInfo:
    """confluent-kafka's partition of a TopicDescription; lakelog's PartitionDescription has these fields and more."""

    id: int
    leader: Node
    replicas: list[Node]
    isr: list[Node]


@dataclass(frozen=True)
class TopicCollection:
    """Topics named for describe_topics, as confluent-kafka's TopicCollection."""

    topic_names: list[str]


@dataclass(frozen=True)
class DescribeClusterResult:
    """What describe_cluster returns: the root as a cluster of one node."""

    controller: Node
    nodes: list[Node]
    cluster_id: str | None = None
    authorized_operations: list | None = None


@dataclass(frozen=True)
class DeletedRecords:
    """What `delete_records` did to one partition: its log start offset afterwards, as confluent-kafka's."""

    low_watermark: int


class IsolationLevel(enum.Enum):
    """Which records a read sees: READ_UNCOMMITTED all, READ_COMMITTED none of an open or aborted transaction."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, IsolationLevel):
            return NotImplemented
        return self.value < other.value


class ConsumerGroupType(enum.IntEnum):
    """A group's protocol; every lakelog group runs KIP-848's, CONSUMER (an IntEnum: JSON output shows its value)."""

    UNKNOWN = 0
    CONSUMER = 1
    CLASSIC = 2

    __str__ = enum.Enum.__str__

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConsumerGroupType):
            return NotImplemented
        return self.value < other.value


class OffsetSpec:
    """What list_offsets asks of a partition: `earliest()`, `latest()`, `max_timestamp()`, `for_timestamp(ms)`."""

    EARLIEST = -2
    LATEST = -1
    MAX_TIMESTAMP = -3

    def __init__(self, value: int) -> None:
        self._value = value

    @classmethod
    def earliest(cls) -> OffsetSpec:
        """Ask for a partition's earliest offset (its log start)."""
        return _EARLIEST

    @classmethod
    def latest(cls) -> OffsetSpec:
        """Ask for a partition's latest offset (its high watermark, or last stable offset under READ_COMMITTED)."""
        return _LATEST

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        """Ask for the offset of the record with a partition's largest timestamp."""
        return _MAX_TIMESTAMP

    @classmethod
    def for_timestamp(cls, timestamp: int) -> OffsetSpec:
        """Ask for the earliest offset whose timestamp is at or after `timestamp` (ms)."""
        return TimestampSpec(timestamp)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, OffsetSpec):
            return NotImplemented
        return self._value < other._value

    def __repr__(self) -> str:
        names = {self.EARLIEST: "earliest", self.LATEST: "latest", self.MAX_TIMESTAMP: "max_timestamp"}
        return f"OffsetSpec.{names.get(self._value, 'for_timestamp')}()"


class TimestampSpec(OffsetSpec):
    """The earliest offset whose timestamp is at or after `timestamp` (ms)."""

    def __init__(self, timestamp: int) -> None:
        super().__init__(timestamp)
        self.timestamp = timestamp

    def __repr__(self) -> str:
        return f"OffsetSpec.for_timestamp({self.timestamp})"


_EARLIEST = OffsetSpec(OffsetSpec.EARLIEST)
_LATEST = OffsetSpec(OffsetSpec.LATEST)
_MAX_TIMESTAMP = OffsetSpec(OffsetSpec.MAX_TIMESTAMP)


@dataclass(frozen=True)
class ListOffsetsResultInfo:
    """One partition's answer to list_offsets; `timestamp` is -1 for earliest and latest, as in Kafka."""

    offset: int
    timestamp: int
    leader_epoch: int | None = None


class MemberAssignment(list):
    """A member's partitions: a list of TopicPartition that also answers confluent-kafka's `.topic_partitions`."""

    def __init__(self, topic_partitions: list | None = None) -> None:
        super().__init__(topic_partitions or [])

    @property
    def topic_partitions(self) -> list:
        """The member's assigned partitions, as a list of TopicPartition."""
        return list(self)


__all__ = [
    "AlterConfigOpType",
    "BrokerMetadata",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConsumerGroupType",
    "DeletedRecords",
    "DescribeClusterResult",
    "GroupMember",
    "GroupMetadata",
    "IsolationLevel",
    "ListOffsetsResultInfo",
    "MemberAssignment",
    "NewPartitions",
    "Node",
    "NODE_ID",
    "OffsetSpec",
    "ResourcePatternType",
    "ResourceType",
    "TimestampSpec",
    "TopicCollection",
    "TopicPartitionInfo",
    "Uuid",
]
