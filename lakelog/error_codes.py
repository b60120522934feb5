"""librdkafka's error codes, as confluent-kafka-python's `KafkaError` carries them.

The names, values and descriptions of librdkafka's `rd_kafka_resp_err_t` (rdkafka.h; the
descriptions are what `rd_kafka_err2str` returns, rdkafka.c): the negative codes are the
client's own (`_MSG_TIMED_OUT`, `_PARTITION_EOF`, ...), the others Kafka's protocol codes.
A handler written for confluent-kafka names these, so all 188 are here, used by lakelog or not.

The error classes that carry them are in lakelog.errors.
"""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


class ErrorCodes:
    """Every error code of confluent_kafka.KafkaError, by name (librdkafka's enum less its RD_KAFKA_RESP_ERR_ prefix)."""

    _BAD_MSG = -199
    _BAD_COMPRESSION = -198
    _DESTROY = -197
    _FAIL = -196
    _TRANSPORT = -195
    _CRIT_SYS_RESOURCE = -194
    _RESOLVE = -193
    _MSG_TIMED_OUT = -192
    _PARTITION_EOF = -191
    _UNKNOWN_PARTITION = -190
    _FS = -189
    _UNKNOWN_TOPIC = -188
    _ALL_BROKERS_DOWN = -187
    _INVALID_ARG = -186
    _TIMED_OUT = -185
    _QUEUE_FULL = -184
    _ISR_INSUFF = -183
    _NODE_UPDATE = -182
    _SSL = -181
    _WAIT_COORD = -180
    _UNKNOWN_GROUP = -179
    _IN_PROGRESS = -178
    _PREV_IN_PROGRESS = -177
    _EXISTING_SUBSCRIPTION = -176
    _ASSIGN_PARTITIONS = -175
    _REVOKE_PARTITIONS = -174
    _CONFLICT = -173
    _STATE = -172
    _UNKNOWN_PROTOCOL = -171
    _NOT_IMPLEMENTED = -170
    _AUTHENTICATION = -169
    _NO_OFFSET = -168
    _OUTDATED = -167
    _TIMED_OUT_QUEUE = -166
    _UNSUPPORTED_FEATURE = -165
    _WAIT_CACHE = -164
    _INTR = -163
    _KEY_SERIALIZATION = -162
    _VALUE_SERIALIZATION = -161
    _KEY_DESERIALIZATION = -160
    _VALUE_DESERIALIZATION = -159
    _PARTIAL = -158
    _READ_ONLY = -157
    _NOENT = -156
    _UNDERFLOW = -155
    _INVALID_TYPE = -154
    _RETRY = -153
    _PURGE_QUEUE = -152
    _PURGE_INFLIGHT = -151
    _FATAL = -150
    _INCONSISTENT = -149
    _GAPLESS_GUARANTEE = -148
    _MAX_POLL_EXCEEDED = -147
    _UNKNOWN_BROKER = -146
    _NOT_CONFIGURED = -145
    _FENCED = -144
    _APPLICATION = -143
    _ASSIGNMENT_LOST = -142
    _NOOP = -141
    _AUTO_OFFSET_RESET = -140
    _LOG_TRUNCATION = -139
    _INVALID_DIFFERENT_RECORD = -138
    _DESTROY_BROKER = -137
    UNKNOWN = -1
    NO_ERROR = 0
    OFFSET_OUT_OF_RANGE = 1
    INVALID_MSG = 2
    UNKNOWN_TOPIC_OR_PART = 3
    INVALID_MSG_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_FOR_PARTITION = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MSG_SIZE_TOO_LARGE = 10
    STALE_CTRL_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    UNKNOWN_TOPIC_ID = 100
    INCONSISTENT_TOPIC_ID = 103
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129
    STREAMS_INVALID_TOPOLOGY = 130
    STREAMS_INVALID_TOPOLOGY_EPOCH = 131
    STREAMS_TOPOLOGY_FENCED = 132
    SHARE_SESSION_LIMIT_REACHED = 133


# rd_kafka_err2str(code): the text a KafkaError made without a reason carries.
DESCRIPTIONS: dict[int, str] = {
    ErrorCodes._BAD_MSG: "Local: Bad message format",
    ErrorCodes._BAD_COMPRESSION: "Local: Invalid compressed data",
    ErrorCodes._DESTROY: "Local: Broker handle destroyed for termination",
    ErrorCodes._FAIL: "Local: Communication failure with broker",
    ErrorCodes._TRANSPORT: "Local: Broker transport failure",
    ErrorCodes._CRIT_SYS_RESOURCE: "Local: Critical system resource failure",
    ErrorCodes._RESOLVE: "Local: Host resolution failure",
    ErrorCodes._MSG_TIMED_OUT: "Local: Message timed out",
    ErrorCodes._PARTITION_EOF: "Broker: No more messages",
    ErrorCodes._UNKNOWN_PARTITION: "Local: Unknown partition",
    ErrorCodes._FS: "Local: File or filesystem error",
    ErrorCodes._UNKNOWN_TOPIC: "Local: Unknown topic",
    ErrorCodes._ALL_BROKERS_DOWN: "Local: All broker connections are down",
    ErrorCodes._INVALID_ARG: "Local: Invalid argument or configuration",
    ErrorCodes._TIMED_OUT: "Local: Timed out",
    ErrorCodes._QUEUE_FULL: "Local: Queue full",
    ErrorCodes._ISR_INSUFF: "Local: ISR count insufficient",
    ErrorCodes._NODE_UPDATE: "Local: Broker node update",
    ErrorCodes._SSL: "Local: SSL error",
    ErrorCodes._WAIT_COORD: "Local: Waiting for coordinator",
    ErrorCodes._UNKNOWN_GROUP: "Local: Unknown group",
    ErrorCodes._IN_PROGRESS: "Local: Operation in progress",
    ErrorCodes._PREV_IN_PROGRESS: "Local: Previous operation in progress",
    ErrorCodes._EXISTING_SUBSCRIPTION: "Local: Existing subscription",
    ErrorCodes._ASSIGN_PARTITIONS: "Local: Assign partitions",
    ErrorCodes._REVOKE_PARTITIONS: "Local: Revoke partitions",
    ErrorCodes._CONFLICT: "Local: Conflicting use",
    ErrorCodes._STATE: "Local: Erroneous state",
    ErrorCodes._UNKNOWN_PROTOCOL: "Local: Unknown protocol",
    ErrorCodes._NOT_IMPLEMENTED: "Local: Not implemented",
    ErrorCodes._AUTHENTICATION: "Local: Authentication failure",
    ErrorCodes._NO_OFFSET: "Local: No offset stored",
    ErrorCodes._OUTDATED: "Local: Outdated",
    ErrorCodes._TIMED_OUT_QUEUE: "Local: Timed out in queue",
    ErrorCodes._UNSUPPORTED_FEATURE: "Local: Required feature not supported by broker",
    ErrorCodes._WAIT_CACHE: "Local: Awaiting cache update",
    ErrorCodes._INTR: "Local: Operation interrupted",
    ErrorCodes._KEY_SERIALIZATION: "Local: Key serialization error",
    ErrorCodes._VALUE_SERIALIZATION: "Local: Value serialization error",
    ErrorCodes._KEY_DESERIALIZATION: "Local: Key deserialization error",
    ErrorCodes._VALUE_DESERIALIZATION: "Local: Value deserialization error",
    ErrorCodes._PARTIAL: "Local: Partial response",
    ErrorCodes._READ_ONLY: "Local: Read-only object",
    ErrorCodes._NOENT: "Local: No such entry",
    ErrorCodes._UNDERFLOW: "Local: Read underflow",
    ErrorCodes._INVALID_TYPE: "Local: Invalid type",
    ErrorCodes._RETRY: "Local: Retry operation",
    ErrorCodes._PURGE_QUEUE: "Local: Purged in queue",
    ErrorCodes._PURGE_INFLIGHT: "Local: Purged in flight",
    ErrorCodes._FATAL: "Local: Fatal error",
    ErrorCodes._INCONSISTENT: "Local: Inconsistent state",
    ErrorCodes._GAPLESS_GUARANTEE: "Local: Gap-less ordering would not be guaranteed if proceeding",
    ErrorCodes._MAX_POLL_EXCEEDED: "Local: Maximum application poll interval (max.poll.interval.ms) exceeded",
    ErrorCodes._UNKNOWN_BROKER: "Local: Unknown broker",
    ErrorCodes._NOT_CONFIGURED: "Local: Functionality not configured",
    ErrorCodes._FENCED: "Local: This instance has been fenced by a newer instance",
    ErrorCodes._APPLICATION: "Local: Application generated error",
    ErrorCodes._ASSIGNMENT_LOST: "Local: Group partition assignment lost",
    ErrorCodes._NOOP: "Local: No operation performed",
    ErrorCodes._AUTO_OFFSET_RESET: "Local: No offset to automatically reset to",
    ErrorCodes._LOG_TRUNCATION: "Local: Partition log truncation detected",
    ErrorCodes._INVALID_DIFFERENT_RECORD: "Local: an invalid record in the same batch caused the failure of this message too",
    ErrorCodes._DESTROY_BROKER: "Local: Broker handle destroyed without termination",
    ErrorCodes.UNKNOWN: "Unknown broker error",
    ErrorCodes.NO_ERROR: "Success",
    ErrorCodes.OFFSET_OUT_OF_RANGE: "Broker: Offset out of range",
    ErrorCodes.INVALID_MSG: "Broker: Invalid message",
    ErrorCodes.UNKNOWN_TOPIC_OR_PART: "Broker: Unknown topic or partition",
    ErrorCodes.INVALID_MSG_SIZE: "Broker: Invalid message size",
    ErrorCodes.LEADER_NOT_AVAILABLE: "Broker: Leader not available",
    ErrorCodes.NOT_LEADER_FOR_PARTITION: "Broker: Not leader for partition",
    ErrorCodes.REQUEST_TIMED_OUT: "Broker: Request timed out",
    ErrorCodes.BROKER_NOT_AVAILABLE: "Broker: Broker not available",
    ErrorCodes.REPLICA_NOT_AVAILABLE: "Broker: Replica not available",
    ErrorCodes.MSG_SIZE_TOO_LARGE: "Broker: Message size too large",
    ErrorCodes.STALE_CTRL_EPOCH: "Broker: StaleControllerEpochCode",
    ErrorCodes.OFFSET_METADATA_TOO_LARGE: "Broker: Offset metadata string too large",
    ErrorCodes.NETWORK_EXCEPTION: "Broker: Broker disconnected before response received",
    ErrorCodes.COORDINATOR_LOAD_IN_PROGRESS: "Broker: Coordinator load in progress",
    ErrorCodes.COORDINATOR_NOT_AVAILABLE: "Broker: Coordinator not available",
    ErrorCodes.NOT_COORDINATOR: "Broker: Not coordinator",
    ErrorCodes.TOPIC_EXCEPTION: "Broker: Invalid topic",
    ErrorCodes.RECORD_LIST_TOO_LARGE: "Broker: Message batch larger than configured server segment size",
    ErrorCodes.NOT_ENOUGH_REPLICAS: "Broker: Not enough in-sync replicas",
    ErrorCodes.NOT_ENOUGH_REPLICAS_AFTER_APPEND: "Broker: Message(s) written to insufficient number of in-sync replicas",
    ErrorCodes.INVALID_REQUIRED_ACKS: "Broker: Invalid required acks value",
    ErrorCodes.ILLEGAL_GENERATION: "Broker: Specified group generation id is not valid",
    ErrorCodes.INCONSISTENT_GROUP_PROTOCOL: "Broker: Inconsistent group protocol",
    ErrorCodes.INVALID_GROUP_ID: "Broker: Invalid group.id",
    ErrorCodes.UNKNOWN_MEMBER_ID: "Broker: Unknown member",
    ErrorCodes.INVALID_SESSION_TIMEOUT: "Broker: Invalid session timeout",
    ErrorCodes.REBALANCE_IN_PROGRESS: "Broker: Group rebalance in progress",
    ErrorCodes.INVALID_COMMIT_OFFSET_SIZE: "Broker: Commit offset data size is not valid",
    ErrorCodes.TOPIC_AUTHORIZATION_FAILED: "Broker: Topic authorization failed",
    ErrorCodes.GROUP_AUTHORIZATION_FAILED: "Broker: Group authorization failed",
    ErrorCodes.CLUSTER_AUTHORIZATION_FAILED: "Broker: Cluster authorization failed",
    ErrorCodes.INVALID_TIMESTAMP: "Broker: Invalid timestamp",
    ErrorCodes.UNSUPPORTED_SASL_MECHANISM: "Broker: Unsupported SASL mechanism",
    ErrorCodes.ILLEGAL_SASL_STATE: "Broker: Request not valid in current SASL state",
    ErrorCodes.UNSUPPORTED_VERSION: "Broker: API version not supported",
    ErrorCodes.TOPIC_ALREADY_EXISTS: "Broker: Topic already exists",
    ErrorCodes.INVALID_PARTITIONS: "Broker: Invalid number of partitions",
    ErrorCodes.INVALID_REPLICATION_FACTOR: "Broker: Invalid replication factor",
    ErrorCodes.INVALID_REPLICA_ASSIGNMENT: "Broker: Invalid replica assignment",
    ErrorCodes.INVALID_CONFIG: "Broker: Configuration is invalid",
    ErrorCodes.NOT_CONTROLLER: "Broker: Not controller for cluster",
    ErrorCodes.INVALID_REQUEST: "Broker: Invalid request",
    ErrorCodes.UNSUPPORTED_FOR_MESSAGE_FORMAT: "Broker: Message format on broker does not support request",
    ErrorCodes.POLICY_VIOLATION: "Broker: Policy violation",
    ErrorCodes.OUT_OF_ORDER_SEQUENCE_NUMBER: "Broker: Broker received an out of order sequence number",
    ErrorCodes.DUPLICATE_SEQUENCE_NUMBER: "Broker: Broker received a duplicate sequence number",
    ErrorCodes.INVALID_PRODUCER_EPOCH: "Broker: Producer attempted an operation with an old epoch",
    ErrorCodes.INVALID_TXN_STATE: "Broker: Producer attempted a transactional operation in an invalid state",
    ErrorCodes.INVALID_PRODUCER_ID_MAPPING: "Broker: Producer attempted to use a producer id which is not currently assigned to its transactional id",
    ErrorCodes.INVALID_TRANSACTION_TIMEOUT: "Broker: Transaction timeout is larger than the maximum value allowed by the broker's max.transaction.timeout.ms",
    ErrorCodes.CONCURRENT_TRANSACTIONS: "Broker: Producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing",
    ErrorCodes.TRANSACTION_COORDINATOR_FENCED: "Broker: Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer",
    ErrorCodes.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "Broker: Transactional Id authorization failed",
    ErrorCodes.SECURITY_DISABLED: "Broker: Security features are disabled",
    ErrorCodes.OPERATION_NOT_ATTEMPTED: "Broker: Operation not attempted",
    ErrorCodes.KAFKA_STORAGE_ERROR: "Broker: Disk error when trying to access log file on disk",
    ErrorCodes.LOG_DIR_NOT_FOUND: "Broker: The user-specified log directory is not found in the broker config",
    ErrorCodes.SASL_AUTHENTICATION_FAILED: "Broker: SASL Authentication failed",
    ErrorCodes.UNKNOWN_PRODUCER_ID: "Broker: Unknown Producer Id",
    ErrorCodes.REASSIGNMENT_IN_PROGRESS: "Broker: Partition reassignment is in progress",
    ErrorCodes.DELEGATION_TOKEN_AUTH_DISABLED: "Broker: Delegation Token feature is not enabled",
    ErrorCodes.DELEGATION_TOKEN_NOT_FOUND: "Broker: Delegation Token is not found on server",
    ErrorCodes.DELEGATION_TOKEN_OWNER_MISMATCH: "Broker: Specified Principal is not valid Owner/Renewer",
    ErrorCodes.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: "Broker: Delegation Token requests are not allowed on this connection",
    ErrorCodes.DELEGATION_TOKEN_AUTHORIZATION_FAILED: "Broker: Delegation Token authorization failed",
    ErrorCodes.DELEGATION_TOKEN_EXPIRED: "Broker: Delegation Token is expired",
    ErrorCodes.INVALID_PRINCIPAL_TYPE: "Broker: Supplied principalType is not supported",
    ErrorCodes.NON_EMPTY_GROUP: "Broker: The group is not empty",
    ErrorCodes.GROUP_ID_NOT_FOUND: "Broker: The group id does not exist",
    ErrorCodes.FETCH_SESSION_ID_NOT_FOUND: "Broker: The fetch session ID was not found",
    ErrorCodes.INVALID_FETCH_SESSION_EPOCH: "Broker: The fetch session epoch is invalid",
    ErrorCodes.LISTENER_NOT_FOUND: "Broker: No matching listener",
    ErrorCodes.TOPIC_DELETION_DISABLED: "Broker: Topic deletion is disabled",
    ErrorCodes.FENCED_LEADER_EPOCH: "Broker: Leader epoch is older than broker epoch",
    ErrorCodes.UNKNOWN_LEADER_EPOCH: "Broker: Leader epoch is newer than broker epoch",
    ErrorCodes.UNSUPPORTED_COMPRESSION_TYPE: "Broker: Unsupported compression type",
    ErrorCodes.STALE_BROKER_EPOCH: "Broker: Broker epoch has changed",
    ErrorCodes.OFFSET_NOT_AVAILABLE: "Broker: Leader high watermark is not caught up",
    ErrorCodes.MEMBER_ID_REQUIRED: "Broker: Group member needs a valid member ID",
    ErrorCodes.PREFERRED_LEADER_NOT_AVAILABLE: "Broker: Preferred leader was not available",
    ErrorCodes.GROUP_MAX_SIZE_REACHED: "Broker: Consumer group has reached maximum size",
    ErrorCodes.FENCED_INSTANCE_ID: "Broker: Static consumer fenced by other consumer with same group.instance.id",
    ErrorCodes.ELIGIBLE_LEADERS_NOT_AVAILABLE: "Broker: Eligible partition leaders are not available",
    ErrorCodes.ELECTION_NOT_NEEDED: "Broker: Leader election not needed for topic partition",
    ErrorCodes.NO_REASSIGNMENT_IN_PROGRESS: "Broker: No partition reassignment is in progress",
    ErrorCodes.GROUP_SUBSCRIBED_TO_TOPIC: "Broker: Deleting offsets of a topic while the consumer group is subscribed to it",
    ErrorCodes.INVALID_RECORD: "Broker: Broker failed to validate record",
    ErrorCodes.UNSTABLE_OFFSET_COMMIT: "Broker: There are unstable offsets that need to be cleared",
    ErrorCodes.THROTTLING_QUOTA_EXCEEDED: "Broker: Throttling quota has been exceeded",
    ErrorCodes.PRODUCER_FENCED: "Broker: There is a newer producer with the same transactionalId which fences the current one",
    ErrorCodes.RESOURCE_NOT_FOUND: "Broker: Request illegally referred to resource that does not exist",
    ErrorCodes.DUPLICATE_RESOURCE: "Broker: Request illegally referred to the same resource twice",
    ErrorCodes.UNACCEPTABLE_CREDENTIAL: "Broker: Requested credential would not meet criteria for acceptability",
    ErrorCodes.INCONSISTENT_VOTER_SET: "Broker: Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters",
    ErrorCodes.INVALID_UPDATE_VERSION: "Broker: Invalid update version",
    ErrorCodes.FEATURE_UPDATE_FAILED: "Broker: Unable to update finalized features due to server error",
    ErrorCodes.PRINCIPAL_DESERIALIZATION_FAILURE: "Broker: Request principal deserialization failed during forwarding",
    ErrorCodes.UNKNOWN_TOPIC_ID: "Broker: Unknown topic id",
    ErrorCodes.INCONSISTENT_TOPIC_ID: "Broker: The log's topic ID did not match the topic ID in the request",
    ErrorCodes.FENCED_MEMBER_EPOCH: "Broker: The member epoch is fenced by the group coordinator",
    ErrorCodes.UNRELEASED_INSTANCE_ID: "Broker: The instance ID is still used by another member in the consumer group",
    ErrorCodes.UNSUPPORTED_ASSIGNOR: "Broker: The assignor or its version range is not supported by the consumer group",
    ErrorCodes.STALE_MEMBER_EPOCH: "Broker: The member epoch is stale",
    ErrorCodes.MISMATCHED_ENDPOINT_TYPE: "Broker: The request was sent to an endpoint of the wrong type",
    ErrorCodes.UNSUPPORTED_ENDPOINT_TYPE: "Broker: This endpoint type is not supported yet",
    ErrorCodes.UNKNOWN_CONTROLLER_ID: "Broker: This controller ID is not known",
    ErrorCodes.UNKNOWN_SUBSCRIPTION_ID: "Broker: Client sent a push telemetry request with an invalid or outdated subscription ID",
    ErrorCodes.TELEMETRY_TOO_LARGE: "Broker: Client sent a push telemetry request larger than the maximum size the broker will accept",
    ErrorCodes.INVALID_REGISTRATION: "Broker: The controller has considered the broker registration to be invalid",
    ErrorCodes.TRANSACTION_ABORTABLE: "Broker: The server encountered an error with the transaction",
    ErrorCodes.INVALID_RECORD_STATE: "Broker: The record state is invalid",
    ErrorCodes.SHARE_SESSION_NOT_FOUND: "Broker: The share session was not found",
    ErrorCodes.INVALID_SHARE_SESSION_EPOCH: "Broker: The share session epoch is invalid",
    ErrorCodes.FENCED_STATE_EPOCH: "Broker: The share-group state epoch did not match",
    ErrorCodes.INVALID_VOTER_KEY: "Broker: The voter key doesn't match the receiving replica's key",
    ErrorCodes.DUPLICATE_VOTER: "Broker: The voter is already part of the set of voters",
    ErrorCodes.VOTER_NOT_FOUND: "Broker: The voter is not part of the set of voters",
    ErrorCodes.INVALID_REGULAR_EXPRESSION: "Broker: The regular expression is not valid",
    ErrorCodes.REBOOTSTRAP_REQUIRED: "Broker: Client metadata is stale, client should rebootstrap to obtain new metadata",
    ErrorCodes.STREAMS_INVALID_TOPOLOGY: "Broker: The supplied topology is invalid",
    ErrorCodes.STREAMS_INVALID_TOPOLOGY_EPOCH: "Broker: The supplied topology epoch is invalid",
    ErrorCodes.STREAMS_TOPOLOGY_FENCED: "Broker: The supplied topology epoch is outdated",
    ErrorCodes.SHARE_SESSION_LIMIT_REACHED: "Broker: The limit of share sessions has been reached",
}

# rd_kafka_err2name(code), for every code above.
NAMES: dict[int, str] = {value: name for name, value in vars(ErrorCodes).items() if isinstance(value, int)}
