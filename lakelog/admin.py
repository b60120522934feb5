"""confluent_kafka.admin's names on a root: `from lakelog.admin import AdminClient, NewTopic, ConfigResource, ...`.

Programs ported from confluent-kafka import from here unchanged; the calls that need
a broker (ACLs, SCRAM, leader election) raise KafkaException `_NOT_IMPLEMENTED`.
"""

import logging

from lakelog.client.admin import AdminClient
from lakelog.client.admin.broker_only import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ElectionType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialDeletion,
    UserScramCredentialsDescription,
    UserScramCredentialUpsertion,
)
from lakelog.client.admin.groups import (
    ConsumerGroupDescription,
    ConsumerGroupListing,
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    ListConsumerGroupsResult,
    MemberDescription,
)
from lakelog.client.admin.types import (
    AlterConfigOpType,
    BrokerMetadata,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConsumerGroupType,
    DeletedRecords,
    DescribeClusterResult,
    GroupMember,
    GroupMetadata,
    IsolationLevel,
    ListOffsetsResultInfo,
    MemberAssignment,
    NewPartitions,
    Node,
    OffsetSpec,
    ResourcePatternType,
    ResourceType,
    TopicCollection,
    TopicPartitionInfo,
    Uuid,
)
from lakelog.client.types import (
    OFFSET_INVALID,
    ClusterMetadata,
    NewTopic,
    PartitionMetadata,
    TopicDescription,
    TopicMetadata,
    TopicPartition,
)
from lakelog.errors import KafkaError, KafkaException

logger = logging.getLogger(__name__)

# confluent_kafka.admin's module constants (librdkafka's values).
CONFIG_SOURCE_UNKNOWN_CONFIG = ConfigSource.UNKNOWN_CONFIG.value
CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG = ConfigSource.DYNAMIC_BROKER_CONFIG.value
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
CONFIG_SOURCE_STATIC_BROKER_CONFIG = ConfigSource.STATIC_BROKER_CONFIG.value
CONFIG_SOURCE_DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG.value
CONFIG_SOURCE_GROUP_CONFIG = ConfigSource.GROUP_CONFIG.value
RESOURCE_UNKNOWN = ResourceType.UNKNOWN.value
RESOURCE_ANY = ResourceType.ANY.value
RESOURCE_TOPIC = ResourceType.TOPIC.value
RESOURCE_GROUP = ResourceType.GROUP.value
RESOURCE_BROKER = ResourceType.BROKER.value
RESOURCE_TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID.value


# confluent_kafka.admin's private aliases of the top-level model names, which its own tests import.
_ConsumerGroupState = ConsumerGroupState
_ConsumerGroupTopicPartitions = ConsumerGroupTopicPartitions
_ConsumerGroupType = ConsumerGroupType
_ElectionType = ElectionType
_IsolationLevel = IsolationLevel
_TopicCollection = TopicCollection
_TopicPartition = TopicPartition

# Listed, not computed: the imports above are this module's public names (re-exports), which linters must see.
__all__ = [
    "AdminClient",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "ElectionType",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialsDescription",
    "UserScramCredentialUpsertion",
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
    "OffsetSpec",
    "ResourcePatternType",
    "ResourceType",
    "TopicCollection",
    "TopicPartitionInfo",
    "Uuid",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ListConsumerGroupsResult",
    "MemberDescription",
    "OFFSET_INVALID",
    "ClusterMetadata",
    "NewTopic",
    "PartitionMetadata",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartition",
    "KafkaError",
    "KafkaException",
    "CONFIG_SOURCE_UNKNOWN_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG",
    "CONFIG_SOURCE_STATIC_BROKER_CONFIG",
    "CONFIG_SOURCE_DEFAULT_CONFIG",
    "CONFIG_SOURCE_GROUP_CONFIG",
    "RESOURCE_UNKNOWN",
    "RESOURCE_ANY",
    "RESOURCE_TOPIC",
    "RESOURCE_GROUP",
    "RESOURCE_BROKER",
    "RESOURCE_TRANSACTIONAL_ID",
]
