"""The one table of librdkafka's config keys, each classified for lakelog.

A program ported from confluent-kafka-python passes librdkafka's keys. Every key of librdkafka's
CONFIGURATION.md (global and topic tables, v2.15) and every key confluent-kafka-python itself reads
(`throttle_cb`, `stats_cb`, `oauth_cb`, `logger`, `delivery.report.only.error`) is one of:

- modelled: lakelog has the key (its type and default live in lakelog.config.SCHEMA and lakelog/conf/);
  a client kind without it ignores it, as librdkafka ignores a consumer property given to a producer;
- an alias: librdkafka's other name for a lakelog key (`delivery.timeout.ms` is `message.timeout.ms`);
- ignored: accepted, its value checked as librdkafka checks it, then listed in one DEBUG line (with the
  reason below) because it has no meaning on a lakehouse log;
- refused: lakelog cannot honour it and accepting it silently would mislead (some only for some values).

A key in none of these is refused as librdkafka refuses it ("No such configuration property"). The
callbacks a client calls (`on_delivery`, `on_commit`, `error_cb`) and `default.topic.config` (merged into the
config) are taken out before this table is read (lakelog.client.conf.split_callbacks).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from lakelog.errors import InvalidArgument, InvalidConfig, InvalidType

logger = logging.getLogger(__name__)

# Why a key is ignored or refused: one line each, shown in the DEBUG line and in errors.
BROKERS = "lakelog has no brokers to connect to: a client reads and writes the root's tables (lakelog.root)"
SECURITY = "no broker connection to secure: access to a root is its store's (lakelog.storage.* credentials)"
METADATA = "no broker metadata to cache or refresh: each call reads the root's topic tables"
PROTOCOL = "no Kafka wire protocol to negotiate, size or check"
LOGGING = "librdkafka's own logging: lakelog logs to the logger key's logger (or its module loggers) at its level"
INTERNALS = "a librdkafka internal with no counterpart in lakelog"
STATS = "an AdminClient emits no statistics (a Producer's and a Consumer's stats_cb is called)"
THROTTLE = "no broker quotas throttle a lakelog client (throttle_cb is never called)"
OAUTH = "no broker to authenticate to (oauth_cb is never called)"
FEATURES = "librdkafka's build features: lakelog needs none of them"
PLUGINS = "librdkafka plugins (interceptors): lakelog loads none"
METRICS = "no broker to push client metrics to (KIP-714)"
RACK = "no replicas to prefer (KIP-392): every reader reads the same table"
CLASSIC = "the classic protocol's type is always consumer: lakelog's groups are consumer groups"
COORDINATOR = "the group coordinator is the root's group tables: there is no coordinator to look up"
PREFETCH = "librdkafka's prefetch queue: lakelog's consumer reads on poll, bounded by max.poll.records and fetch.max.bytes"
PRODUCER_QUEUE = (
    "lakelog's producer queue is bounded by batch.num.messages and batch.size (a full batch is sent at once), "
    "so produce() never raises BufferError"
)
IN_FLIGHT = "each batch is one Delta commit made in order: no requests are in flight"
STICKY = "lakelog's partitioner places keyless messages itself (lakelog.client.partitioner)"
COMPRESSION_LEVEL = "Parquet files are written at the codec's default level"
CRC = "records are Parquet files in Delta tables, checked by their readers: there are no wire CRCs"
OFFSET_REPORT = "deprecated in librdkafka: lakelog always reports each message's offset"
LEGACY_CONSUMER = "used by librdkafka's legacy simple consumer only: its KafkaConsumer ignores it too"
C_API = "librdkafka's C API (events, consume callbacks), which confluent-kafka does not expose"
SHARE = "KIP-932 share consumers are out of lakelog's scope"
DEDICATED = "librdkafka's C API takes it, not a config dict: confluent-kafka refuses it too"


# -- how librdkafka parses a value (confluent-kafka passes str(value) to it; None resets a key) --


def _text(key: str, raw: Any) -> str:
    if isinstance(raw, (str, int, float, bool)):
        return str(raw)
    raise InvalidConfig(f'Invalid value type for "{key}": expected a string, not {type(raw).__name__}', key=key)


def integer(low: int, high: int) -> Callable[[str, Any], Any]:
    def parse(key: str, raw: Any) -> int:
        text = _text(key, raw).strip()
        value = None
        if not isinstance(raw, bool):
            for base in (0, 10):  # strtol's base 0 (0x.., 0..), and plain decimal with leading zeros
                try:
                    value = int(text, base)
                    break
                except ValueError:
                    pass
        if value is None:
            raise InvalidConfig(f'Invalid value {raw!r} for configuration property "{key}": expected an integer', key=key)
        if not low <= value <= high:
            raise InvalidConfig(f'Configuration property "{key}" value {value} is outside allowed range {low}..{high}', key=key)
        return value

    return parse


def boolean(key: str, raw: Any) -> bool:
    text = _text(key, raw).strip().lower()
    if text in ("true", "t", "1"):
        return True
    if text in ("false", "f", "0"):
        return False
    raise InvalidConfig(f'Expected bool value for "{key}": true or false, not {raw!r}', key=key)


def choice(*choices: str) -> Callable[[str, Any], Any]:
    def parse(key: str, raw: Any) -> str:
        text = _text(key, raw).strip().lower()
        if text not in choices:
            raise InvalidConfig(f'Invalid value {raw!r} for configuration property "{key}": one of {", ".join(choices)}', key=key)
        return text

    return parse


def flags(*choices: str) -> Callable[[str, Any], Any]:
    def parse(key: str, raw: Any) -> tuple[str, ...]:
        parts = tuple(part.strip().lower() for part in _text(key, raw).split(",") if part.strip())
        for part in parts:
            if part not in choices:
                raise InvalidConfig(f'Invalid value "{part}" for configuration property "{key}"', key=key)
        return parts

    return parse


def text(key: str, raw: Any) -> str:
    return _text(key, raw)


def callback(key: str, raw: Any) -> Any:
    if not callable(raw):
        # confluent-kafka's own check: a ValueError for throttle_cb, a TypeError for stats_cb and oauth_cb.
        error = InvalidArgument if key == "throttle_cb" else InvalidType
        raise error(f"expected {key} property as a callable function, not {raw!r}", key=key)
    return raw


def dedicated(key: str, raw: Any) -> Any:
    raise InvalidConfig(f'Property "{key}" must be set through dedicated .._set_..() function: {DEDICATED}', key=key)


# -- the table --


@dataclass(frozen=True)
class Entry:
    """One librdkafka key: whose it is (C consumer, P producer, * both) and what lakelog does with it."""

    role: str
    alias: str | None = None  # the lakelog key it names
    parse: Callable[[str, Any], Any] | None = None  # set for ignored and refused keys
    reason: str | None = None  # why it is ignored (or refused)
    honoured: Collection[Any] | None = None  # ignored only for these parsed values; refused otherwise
    refusal: str | None = None  # why the other values are refused

    @property
    def modelled(self) -> bool:
        return self.parse is None

    def check(self, key: str, raw: Any) -> str:
        """Validate an ignored key's value as librdkafka does; the reason it is ignored, or InvalidConfig.

        None resets a key to its default in confluent-kafka, so it is accepted (a refused key stays refused)."""
        assert self.parse is not None and self.reason is not None
        if raw is None and self.parse is not dedicated:
            return self.reason
        value = self.parse(key, raw)
        if self.honoured is not None and value not in self.honoured:
            raise InvalidConfig(f"config {key}={raw!r} is not supported: {self.refusal}", key=key)
        return self.reason


def modelled(role: str) -> Entry:
    return Entry(role)


def alias(role: str, lakelog_key: str) -> Entry:
    return Entry(role, alias=lakelog_key)


def ignored(role: str, parse: Callable[[str, Any], Any], reason: str) -> Entry:
    return Entry(role, parse=parse, reason=reason)


def ignored_unless(role: str, parse: Callable[[str, Any], Any], reason: str, honoured: Collection[Any], refusal: str) -> Entry:
    """Ignored for the values lakelog honours anyway; refused, with `refusal`, for any other."""
    return Entry(role, parse=parse, reason=reason, honoured=honoured, refusal=refusal)


def refused(role: str, reason: str) -> Entry:
    return Entry(role, parse=dedicated, reason=reason)


DEBUG_CONTEXTS = flags(
    "generic", "broker", "topic", "metadata", "feature", "queue", "msg", "protocol", "cgrp", "security", "fetch",
    "interceptor", "plugin", "consumer", "admin", "eos", "mock", "assignor", "conf", "telemetry", "all",
)  # fmt: skip
BUILTIN_FEATURES = flags(
    "gzip", "snappy", "ssl", "sasl", "regex", "lz4", "sasl_gssapi", "sasl_plain", "sasl_scram", "plugins", "zstd",
    "sasl_oauthbearer", "http", "oidc",
)  # fmt: skip
INT32 = 2_147_483_647

KEYS: dict[str, Entry] = {
    # -- global keys, both clients --
    "builtin.features": ignored("*", BUILTIN_FEATURES, FEATURES),
    "client.id": modelled("*"),
    "metadata.broker.list": ignored("*", text, BROKERS),
    "bootstrap.servers": ignored("*", text, BROKERS),
    "message.max.bytes": modelled("*"),
    "message.copy.max.bytes": ignored("*", integer(0, 1_000_000_000), PROTOCOL),
    "receive.message.max.bytes": ignored("*", integer(1000, INT32), PROTOCOL),
    "max.in.flight.requests.per.connection": ignored("*", integer(1, 1_000_000), IN_FLIGHT),
    "max.in.flight": ignored("*", integer(1, 1_000_000), IN_FLIGHT),
    "metadata.recovery.strategy": ignored("*", choice("none", "rebootstrap"), BROKERS),
    "metadata.recovery.rebootstrap.trigger.ms": ignored("*", integer(0, INT32), BROKERS),
    "topic.metadata.refresh.interval.ms": modelled("*"),
    "metadata.max.age.ms": ignored("*", integer(1, 86_400_000), METADATA),
    "topic.metadata.refresh.fast.interval.ms": ignored("*", integer(1, 60_000), METADATA),
    "topic.metadata.refresh.fast.cnt": ignored("*", integer(0, 1000), METADATA),
    "topic.metadata.refresh.sparse": ignored("*", boolean, METADATA),
    "topic.metadata.propagation.max.ms": ignored("*", integer(0, 3_600_000), METADATA),
    "topic.blacklist": ignored_unless(
        "*", text, METADATA, {""}, "lakelog would still show the topics it names (list_topics, regex subscriptions)"
    ),
    "debug": ignored("*", DEBUG_CONTEXTS, LOGGING),
    "socket.timeout.ms": ignored("*", integer(10, 300_000), BROKERS),
    "socket.blocking.max.ms": ignored("*", integer(1, 60_000), BROKERS),
    "socket.send.buffer.bytes": ignored("*", integer(0, 100_000_000), BROKERS),
    "socket.receive.buffer.bytes": ignored("*", integer(0, 100_000_000), BROKERS),
    "socket.keepalive.enable": ignored("*", boolean, BROKERS),
    "socket.nagle.disable": ignored("*", boolean, BROKERS),
    "socket.max.fails": ignored("*", integer(0, 1_000_000), BROKERS),
    "broker.address.ttl": ignored("*", integer(0, 86_400_000), BROKERS),
    "broker.address.family": ignored("*", choice("any", "v4", "v6"), BROKERS),
    "socket.connection.setup.timeout.ms": ignored("*", integer(1000, INT32), BROKERS),
    "connections.max.idle.ms": ignored("*", integer(0, INT32), BROKERS),
    "reconnect.backoff.jitter.ms": ignored("*", integer(0, 3_600_000), BROKERS),
    "reconnect.backoff.ms": ignored("*", integer(0, 3_600_000), BROKERS),
    "reconnect.backoff.max.ms": ignored("*", integer(0, 3_600_000), BROKERS),
    "client.dns.lookup": ignored("*", choice("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"), BROKERS),
    "statistics.interval.ms": modelled("*"),
    "enabled_events": ignored("*", integer(0, INT32), C_API),
    "throttle_cb": ignored("*", callback, THROTTLE),
    "stats_cb": ignored("*", callback, STATS),  # a Producer and Consumer take it out first (split_callbacks)
    "oauth_cb": ignored("*", callback, OAUTH),
    "logger": modelled("*"),
    "log_cb": refused("*", DEDICATED),
    "log_level": ignored("*", integer(0, 7), LOGGING),
    "log.queue": ignored("*", boolean, LOGGING),
    "log.thread.name": ignored("*", boolean, LOGGING),
    "enable.random.seed": ignored("*", boolean, INTERNALS),
    "log.connection.close": ignored("*", boolean, LOGGING),
    "background_event_cb": refused("*", DEDICATED),
    "socket_cb": refused("*", DEDICATED),
    "connect_cb": refused("*", DEDICATED),
    "closesocket_cb": refused("*", DEDICATED),
    "open_cb": refused("*", DEDICATED),
    "resolve_cb": refused("*", DEDICATED),
    "opaque": refused("*", DEDICATED),
    "default_topic_conf": refused("*", DEDICATED),
    "internal.termination.signal": ignored("*", integer(0, 128), INTERNALS),
    "api.version.request": ignored("*", boolean, PROTOCOL),
    "api.version.request.timeout.ms": ignored("*", integer(1, 300_000), PROTOCOL),
    "api.version.fallback.ms": ignored("*", integer(0, 604_800_000), PROTOCOL),
    "broker.version.fallback": ignored("*", text, PROTOCOL),
    "allow.auto.create.topics": modelled("*"),
    "security.protocol": ignored("*", choice("plaintext", "ssl", "sasl_plaintext", "sasl_ssl"), SECURITY),
    "ssl.cipher.suites": ignored("*", text, SECURITY),
    "ssl.curves.list": ignored("*", text, SECURITY),
    "ssl.sigalgs.list": ignored("*", text, SECURITY),
    "ssl.key.location": ignored("*", text, SECURITY),
    "ssl.key.password": ignored("*", text, SECURITY),
    "ssl.key.pem": ignored("*", text, SECURITY),
    "ssl_key": refused("*", DEDICATED),
    "ssl.certificate.location": ignored("*", text, SECURITY),
    "ssl.certificate.pem": ignored("*", text, SECURITY),
    "ssl_certificate": refused("*", DEDICATED),
    "ssl.ca.location": ignored("*", text, SECURITY),
    "https.ca.location": ignored("*", text, SECURITY),
    "https.ca.pem": ignored("*", text, SECURITY),
    "ssl.ca.pem": ignored("*", text, SECURITY),
    "ssl_ca": refused("*", DEDICATED),
    "ssl.ca.certificate.stores": ignored("*", text, SECURITY),
    "ssl.crl.location": ignored("*", text, SECURITY),
    "ssl.keystore.location": ignored("*", text, SECURITY),
    "ssl.keystore.password": ignored("*", text, SECURITY),
    "ssl.providers": ignored("*", text, SECURITY),
    "ssl.engine.location": ignored("*", text, SECURITY),
    "ssl.engine.id": ignored("*", text, SECURITY),
    "ssl_engine_callback_data": refused("*", DEDICATED),
    "enable.ssl.certificate.verification": ignored("*", boolean, SECURITY),
    "ssl.endpoint.identification.algorithm": ignored("*", choice("none", "https"), SECURITY),
    "ssl.certificate.verify_cb": refused("*", DEDICATED),
    "sasl.mechanisms": ignored("*", text, SECURITY),
    "sasl.mechanism": ignored("*", text, SECURITY),
    "sasl.kerberos.service.name": ignored("*", text, SECURITY),
    "sasl.kerberos.principal": ignored("*", text, SECURITY),
    "sasl.kerberos.kinit.cmd": ignored("*", text, SECURITY),
    "sasl.kerberos.keytab": ignored("*", text, SECURITY),
    "sasl.kerberos.min.time.before.relogin": ignored("*", integer(0, 86_400_000), SECURITY),
    "sasl.username": ignored("*", text, SECURITY),
    "sasl.password": ignored("*", text, SECURITY),
    "sasl.oauthbearer.config": ignored("*", text, SECURITY),
    "enable.sasl.oauthbearer.unsecure.jwt": ignored("*", boolean, SECURITY),
    "oauthbearer_token_refresh_cb": refused("*", DEDICATED),
    "sasl.oauthbearer.method": ignored("*", choice("default", "oidc"), SECURITY),
    "sasl.oauthbearer.client.id": ignored("*", text, SECURITY),
    "sasl.oauthbearer.client.credentials.client.id": ignored("*", text, SECURITY),
    "sasl.oauthbearer.client.credentials.client.secret": ignored("*", text, SECURITY),
    "sasl.oauthbearer.client.secret": ignored("*", text, SECURITY),
    "sasl.oauthbearer.scope": ignored("*", text, SECURITY),
    "sasl.oauthbearer.extensions": ignored("*", text, SECURITY),
    "sasl.oauthbearer.token.endpoint.url": ignored("*", text, SECURITY),
    "sasl.oauthbearer.sub.claim.name": ignored("*", text, SECURITY),
    "sasl.oauthbearer.grant.type": ignored(
        "*", choice("client_credentials", "urn:ietf:params:oauth:grant-type:jwt-bearer"), SECURITY
    ),
    "sasl.oauthbearer.assertion.algorithm": ignored("*", choice("rs256", "es256"), SECURITY),
    "sasl.oauthbearer.assertion.private.key.file": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.private.key.passphrase": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.private.key.pem": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.file": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.claim.aud": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.claim.exp.seconds": ignored("*", integer(1, INT32), SECURITY),
    "sasl.oauthbearer.assertion.claim.iss": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.claim.jti.include": ignored("*", boolean, SECURITY),
    "sasl.oauthbearer.assertion.claim.nbf.seconds": ignored("*", integer(0, INT32), SECURITY),
    "sasl.oauthbearer.assertion.claim.sub": ignored("*", text, SECURITY),
    "sasl.oauthbearer.assertion.jwt.template.file": ignored("*", text, SECURITY),
    "sasl.oauthbearer.metadata.authentication.type": ignored("*", choice("none", "azure_imds", "aws_iam"), SECURITY),
    "plugin.library.paths": ignored("*", text, PLUGINS),
    "interceptors": refused("*", DEDICATED),
    "client.rack": ignored("*", text, RACK),
    "retry.backoff.ms": modelled("*"),
    "retry.backoff.max.ms": modelled("*"),
    "enable.metrics.push": ignored("*", boolean, METRICS),
    # -- global keys, consumer --
    "group.id": modelled("C"),
    "group.instance.id": modelled("C"),
    "partition.assignment.strategy": modelled("C"),
    "session.timeout.ms": modelled("C"),
    "heartbeat.interval.ms": modelled("C"),
    "group.protocol.type": ignored("C", text, CLASSIC),
    "group.protocol": modelled("C"),
    "group.remote.assignor": modelled("C"),
    "coordinator.query.interval.ms": ignored("C", integer(1, 3_600_000), COORDINATOR),
    "max.poll.interval.ms": modelled("C"),
    "enable.auto.commit": modelled("C"),
    "auto.commit.interval.ms": modelled("C"),
    "enable.auto.offset.store": modelled("C"),
    "queued.min.messages": ignored("C", integer(1, 10_000_000), PREFETCH),
    "queued.max.messages.kbytes": ignored("C", integer(1, 2_097_151), PREFETCH),
    "fetch.wait.max.ms": modelled("C"),
    "fetch.queue.backoff.ms": ignored("C", integer(0, 300_000), PREFETCH),
    "fetch.message.max.bytes": alias("C", "max.partition.fetch.bytes"),
    "max.partition.fetch.bytes": modelled("C"),
    "fetch.max.bytes": modelled("C"),
    "fetch.min.bytes": ignored("C", integer(0, INT32), PREFETCH),
    "fetch.error.backoff.ms": ignored("C", integer(0, 300_000), PREFETCH),
    "offset.store.method": ignored_unless(
        "C",
        choice("none", "file", "broker"),
        COORDINATOR,
        {"broker"},
        "lakelog commits offsets to the root's group tables, as to a broker; the file store and none are not modelled",
    ),  # fmt: skip
    "isolation.level": modelled("C"),
    "consume_cb": refused("C", DEDICATED),
    "rebalance_cb": refused("C", DEDICATED),
    "offset_commit_cb": refused("C", DEDICATED),
    "enable.partition.eof": modelled("C"),
    "check.crcs": ignored("C", boolean, CRC),
    "max.poll.records": modelled("C"),
    "share.acknowledgement.mode": ignored("C", text, SHARE),
    # -- global keys, producer --
    "transactional.id": modelled("P"),
    "transaction.timeout.ms": modelled("P"),
    "enable.idempotence": modelled("P"),
    "enable.gapless.guarantee": ignored_unless(
        "P",
        boolean,
        IN_FLIGHT,
        {False},
        "lakelog's producer does not stop at the first failed batch (librdkafka's _GAPLESS_GUARANTEE)",
    ),  # fmt: skip
    "queue.buffering.max.messages": ignored("P", integer(0, INT32), PRODUCER_QUEUE),
    "queue.buffering.max.kbytes": ignored("P", integer(1, INT32), PRODUCER_QUEUE),
    "queue.buffering.max.ms": alias("P", "linger.ms"),
    "linger.ms": modelled("P"),
    "message.send.max.retries": alias("P", "retries"),
    "retries": modelled("P"),
    "queue.buffering.backpressure.threshold": ignored("P", integer(1, 1_000_000), IN_FLIGHT),
    "compression.codec": alias("P", "compression.type"),
    "compression.type": modelled("P"),
    "batch.num.messages": modelled("P"),
    "batch.size": modelled("P"),
    "delivery.report.only.error": ignored_unless(
        "P",
        boolean,
        "lakelog reports every delivery, as false asks",
        {False},
        "lakelog's producer reports every delivery; reporting only the failed ones is not modelled",
    ),  # fmt: skip
    "dr_cb": refused("P", DEDICATED),
    "dr_msg_cb": refused("P", DEDICATED),
    "sticky.partitioning.linger.ms": ignored("P", integer(0, 900_000), STICKY),
    # -- topic keys (librdkafka's default topic config, set on the client) --
    "request.required.acks": alias("P", "acks"),
    "acks": modelled("P"),
    "request.timeout.ms": modelled("P"),
    "message.timeout.ms": modelled("P"),
    "delivery.timeout.ms": alias("P", "message.timeout.ms"),
    "queuing.strategy": ignored_unless(
        "P", choice("fifo", "lifo"), IN_FLIGHT, {"fifo"}, "lakelog always keeps produce order (fifo)"
    ),
    "produce.offset.report": ignored("P", boolean, OFFSET_REPORT),
    "partitioner": modelled("P"),
    "partitioner_cb": refused("P", DEDICATED),
    "msg_order_cmp": refused("P", DEDICATED),
    "compression.level": ignored("P", integer(-1, 12), COMPRESSION_LEVEL),
    "auto.commit.enable": ignored("C", boolean, LEGACY_CONSUMER),
    "auto.offset.reset": modelled("C"),
    "offset.store.path": ignored("C", text, LEGACY_CONSUMER),
    "offset.store.sync.interval.ms": ignored("C", integer(-1, 86_400_000), LEGACY_CONSUMER),
    "consume.callback.max.messages": ignored("C", integer(0, 1_000_000), C_API),
}

ROLES = {"C": "consumer", "P": "producer", "*": "client"}


def aliases() -> dict[str, str]:
    """librdkafka key -> the lakelog key it names."""
    return {key: entry.alias for key, entry in KEYS.items() if entry.alias is not None}
