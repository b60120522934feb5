"""The differences lakelog makes on purpose from confluent-kafka against Apache Kafka: the "Differences that
remain" list of docs/differences-from-kafka.md, line for line, each under the one name the differential harness uses for it
(tests/kafka/test_differences.py checks that documented list is this list, nothing more, nothing less).
"""

from __future__ import annotations

# name -> (the documented list's section, its line there)
DIFFERENCES: dict[str, tuple[str, str]] = {
    "ignored-keys": (
        "Configuration",
        "Ignored keys do nothing (no TLS, SASL, sockets, statistics or `debug` output); `stats_cb`, `throttle_cb` and `oauth_cb` are never called.",
    ),
    "other-client-keys": (
        "Configuration",
        "A key of the other client type is listed in the DEBUG line; librdkafka logs a WARNING.",
    ),
    "plugin-keys": (
        "Configuration",
        "Plugin keys (`confluent.monitoring.interceptor.*`) are refused as unknown: `plugin.library.paths` loads nothing.",
    ),
    "acks-wait": (
        "Configuration",
        "`acks=0` or `1` still waits for the Delta commit, and delivery reports carry offsets.",
    ),
    "strict-typing": (
        "Configuration",
        "Modelled keys are typed strictly: booleans are true/false or bool (not t/f/1/0), a string key refuses a non-string, None is refused for a modelled int or bool.",
    ),
    "other-client-range": (
        "Configuration",
        "A key modelled for another client is checked with lakelog's range for it.",
    ),
    "refusal-messages": (
        "Configuration",
        "Refusal messages start with librdkafka's text and add lakelog's context.",
    ),
    "consumer-without-group": (
        "Configuration",
        "A Consumer without `group.id` is accepted (assign only); confluent raises ValueError.",
    ),
    "clock-and-auto-create": (
        "Configuration",
        "The clients take lakelog's `clock=` keyword; `auto.create.topics.enable` is the package's broker default (true), not a per-root setting: turn creation off with `allow.auto.create.topics=false` on the clients.",
    ),
    "producer-poll-no-timeout": (
        "Producer",
        "`poll()` with no timeout returns at once when nothing is queued (no event can arrive); confluent blocks.",
    ),
    "producer-lock": (
        "Producer",
        "Thread-safe as confluent's, but its calls take turns (one lock per producer): a `produce()` that sends a full batch holds up other threads' calls for that Delta commit; a waiting `poll()` does not. Delivery callbacks run under the lock on the thread calling `poll()`/`flush()` and may call `produce()`.",
    ),
    "nothing-in-flight": (
        "Producer",
        "Nothing is ever in flight (a batch is written within the call that sends it): `purge(in_flight=, blocking=)` change nothing and `_PURGE_INFLIGHT` is never reported; `flush(timeout)` sends everything queued when it is called whatever the timeout (the timeout only stops it going on with what delivery callbacks produce meanwhile).",
    ),
    "gated-dead-letters": (
        "Producer",
        "A gated transaction's held dead-letter batches are not purged by `purge()`; the abort it forces reports them.",
    ),
    "missing-topic-no-wait": (
        "Producer",
        "A missing topic fails at the next `poll()`/`flush()` without librdkafka's 30 s wait for it to appear, and is looked up again on every `produce()`; an empty topic name is reported through the callback (librdkafka: `_INVALID_ARG` at produce).",
    ),
    "auto-create-in-producer": (
        "Producer",
        "Auto-creation happens in the producer process with the root's topic defaults.",
    ),
    "produce-batch-extras": (
        "Producer",
        "`produce_batch()` honours `headers` and `timestamp`; `close(timeout)` takes a timeout.",
    ),
    "partition-count-after-create-partitions": (
        "Producer",
        "After `create_partitions`, a running Producer keeps hashing keys over the count it first read; new producers use the new count.",
    ),
    "no-sticky-partitioning": (
        "Producer",
        "A keyless message goes through the partitioner per message (no sticky partitioning); there is no `partitioner_cb`.",
    ),
    "produce-argument-extras": (
        "Producer",
        "`produce()` also takes bytearray/memoryview payloads and tuple headers, refuses a bool partition, a non-str header name and a negative timestamp; it takes lakelog's `expected_offset` (KIP-27), as does `SerializingProducer.produce`.",
    ),
    "produce-limits": (
        "Producer",
        "`produce()` refuses a timestamp past 9,223,372,036,854,775 ms (the log keeps microseconds in an int64) and a str that is not UTF-8 (a lone surrogate) with `_INVALID_ARG`. A message's size is its key, value and header names and values, with no framing added (librdkafka adds its wire overhead), both against `message.max.bytes` at `produce()` and against the topic's `max.message.bytes`, which the log checks per record (Kafka's broker checks a batch): a record past the topic's limit fails alone, `MSG_SIZE_TOO_LARGE` in its delivery report, and the rest of its batch is delivered.",
    ),
    "timeout-types": (
        "Producer",
        "A timeout (`poll`, `flush`, a consumer's `poll`/`consume`) that is not a number is `_INVALID_TYPE` (a TypeError, as confluent's), NaN `_INVALID_ARG`; `None` means no limit, where confluent requires a number.",
    ),
    "classic-protocol-mode": (
        "Consumer",
        "`group.protocol` unset is `classic` only when the program sets `partition.assignment.strategy`, else `consumer` (librdkafka: `classic`); classic is a mode of the client over KIP-848's coordinator, which runs the first assignor of `partition.assignment.strategy`, and an eager rebalance starts at each member's next heartbeat, with no JoinGroup barrier.",
    ),
    "broker-timers-in-clients": (
        "Consumer",
        "The broker's timers run in the clients: a member's heartbeat removes the other members past their session or rebalance timeout, and a read_committed read held by a transaction past its `transaction.timeout.ms` aborts it (looking at most once a second); `lakelog coordinator sweep` is for what no running client sees.",
    ),
    "python-regexes": (
        "Consumer",
        "Regexes are Python's `re`, resolved in the client (classic-protocol style) at its metadata refresh, not by the coordinator as KIP-848 does.",
    ),
    "no-background-thread": (
        "Consumer",
        "No background thread: the metadata refresh and the `max.poll.interval.ms` check run inside `poll`/`consume`; a member that never polls again leaves by the session timeout, and lost partitions are reported one poll after `_MAX_POLL_EXCEEDED`.",
    ),
    "deleted-topic-revocation": (
        "Consumer",
        "A deleted subscribed topic is not revoked until the group's target is recomputed for another reason.",
    ),
    "offsets-for-times-scan": (
        "Consumer",
        "`offsets_for_times` reads timestamps file by file (no time index); it and `list_topics` ignore `timeout`; an unknown partition raises for the whole call.",
    ),
    "pause-unassigned": (
        "Consumer",
        "`pause`/`resume` never raise for unassigned partitions.",
    ),
    "manual-assign-while-subscribed": (
        "Consumer",
        "While subscribed, `incremental_assign`/`incremental_unassign` outside the rebalance callbacks raise `_STATE` (the group assigns); librdkafka applies them, so two members may then read one partition.",
    ),
    "subscribe-tuple": (
        "Consumer",
        "`subscribe` takes a tuple as well as a list and refuses an empty list.",
    ),
    "watermarks-cached": (
        "Consumer",
        "`get_watermark_offsets(cached=True)` reads the partition's table.",
    ),
    "assign-before-topic": (
        "Consumer",
        "A partition assigned before its topic exists is retried at each poll; one beyond an existing topic's count is refused at `assign`.",
    ),
    "long-poll-wait": (
        "Consumer",
        "`fetch.wait.max.ms` is the longest wait between looks at an idle partition's log (no broker can wake the consumer): a commit is seen up to that long after it lands, where Kafka's long poll answers at once; `fetch.min.bytes` is ignored.",
    ),
    "config-reaches-new-opens": (
        "AdminClient",
        "A topic config change reaches partition logs opened after it: a client holding the partition keeps its config until it opens it again.",
    ),
    "config-crash-halfway": (
        "AdminClient",
        "A crash halfway through a config change leaves partitions 1..n-1 on the old config until the topic's next change.",
    ),
    "delete-topics-open-transaction": (
        "AdminClient",
        "`delete_topics` refuses a topic with an open transaction (a transaction that added a partition but wrote nothing there is not seen); a writer holding a partition during the delete may leave files behind, which a new topic of that name reuses; committed offsets and quality suites of a deleted topic stay.",
    ),
    "one-node": (
        "AdminClient",
        "`replica_assignment` is ignored; leaders, replicas and ISRs are the root's one node; `cluster_id` is the root's URI.",
    ),
    "config-source": (
        "AdminClient",
        "`ConfigSource` is DEFAULT_CONFIG when a stored value equals today's default, else DYNAMIC_TOPIC_CONFIG; `synonyms` is empty.",
    ),
    "read-only-broker": (
        "AdminClient",
        "The BROKER resource is the root's defaults, read only; GROUP and TRANSACTIONAL_ID resources are INVALID_REQUEST.",
    ),
    "admin-poll-options": (
        "AdminClient",
        "`poll()` with a negative timeout returns at once; options (timeouts) are checked but bound nothing.",
    ),
    "group-states": (
        "AdminClient",
        "`list_groups` states are KIP-848's; `ConsumerGroupState` has no DEAD; `ConsumerGroupType` is an IntEnum.",
    ),
    "admin-several-groups": (
        "AdminClient",
        "`list_consumer_group_offsets`/`alter_consumer_group_offsets` take several groups; `list_consumer_groups(states=)` takes a list too; `create_topics`/`describe_topics` take tuples.",
    ),
    "no-acls": (
        "AdminClient",
        "`authorized_operations` is None (a root has no ACLs).",
    ),
    "registry-in-root": (
        "Schema registry",
        "`lakelog.schema_registry` keeps the registry in the root (`url` `lakelog:<root>` or `lakelog.root`): no server, no REST API, no caches (every call reads the `__schemas` log), and confluent's connection keys mean nothing.",
    ),
    "registry-no-contracts": (
        "Schema registry",
        "No data contracts: metadata, rule sets and encryption keys are not kept, `get_latest_with_metadata` is 40403, subject associations are empty (serializers fall back to their name strategy), modes, contexts and `normalize_schemas` do nothing.",
    ),
    "registry-compatibility": (
        "Schema registry",
        "JSON Schema compatibility is a sound subset of confluent's rules (keywords it does not model must be equal); Protobuf schemas are serialized `FileDescriptorProto`s, and `.proto` text is refused (42201).",
    ),
    "spark-batch-options": (
        "Spark's Kafka source",
        "A batch read's `subscribePattern` is resolved on the driver when the read is planned; `kafka.*` options, `failOnDataLoss` and `startingOffsetsByTimestampStrategy` are not taken by batch reads (a start time with no record after it is `OffsetOutOfRange`, Spark's default).",
    ),
    "corrupt-message-name": (
        "Errors and messages",
        "`KafkaError(2).name()` is `CORRUPT_MESSAGE` (Kafka's name), confluent's `INVALID_MSG`; lakelog adds `OFFSET_MISMATCH` (1000, KIP-27) and Kafka's `TRANSACTIONAL_ID_NOT_FOUND` (105, which librdkafka does not list).",
    ),
    "fenced-code": (
        "Errors and messages",
        "A fenced transactional producer raises `PRODUCER_FENCED` (fatal), the code Kafka's coordinator answers, where librdkafka raises its local `_FENCED`; a record it could not send is reported with the same error (librdkafka: `INVALID_PRODUCER_EPOCH`, not fatal).",
    ),
    "error-subclasses": (
        "Errors and messages",
        "lakelog raises a subclass per code (`ProducerFenced`, `OffsetMismatch`, ...), whose flags follow lakelog's taxonomy; `except KafkaException` catches them all. `str()` of one is its one-sentence message, and `args[0]` is always a KafkaError.",
    ),
    "error-comparison": (
        "Errors and messages",
        "Comparing a KafkaError with anything but an int or KafkaError is False (confluent: TypeError).",
    ),
    "message-fields": (
        "Errors and messages",
        "`Message` accepts None for partition and offset; its `latency()`, `leader_epoch()` and `delivery_count()` are None for lakelog's messages; `Message.__new__` without `__init__` has no fields.",
    ),
    "versions": (
        "Errors and messages",
        "`version()` is lakelog's version; `libversion()` describes lakelog, not librdkafka.",
    ),
}
