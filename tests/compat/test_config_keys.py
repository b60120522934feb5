"""librdkafka's config keys as confluent-kafka takes them (issue 14, gaps 1 and 6, and `Client(**conf)` of gap 2).

One table (lakelog/config/librdkafka.py) classifies every key of librdkafka's CONFIGURATION.md: a key lakelog
models, an alias of one, a key ignored on a lakehouse log (accepted, checked as librdkafka checks it, listed
once per client in a DEBUG line with its reason) or one refused with a reason. A key neither library knows is
refused naming it, with confluent's shape: a KafkaException whose error is _INVALID_ARG. Keyword arguments
merge over the conf dict (`Producer(**conf)`, `Producer(conf, logger=...)`) as in confluent's
common_conf_setup.
"""

from __future__ import annotations

import logging

import pytest
from helpers import folder_listing

from lakelog import AdminClient, Consumer, KafkaError, NewTopic, Producer, config
from lakelog.config import librdkafka as config_keys
from lakelog.errors import InvalidConfig, KafkaException

pytestmark = pytest.mark.roots("local")

CLIENTS = {"producer": Producer, "consumer": Consumer, "admin": AdminClient}
IGNORED_LINE = "ignoring librdkafka keys with no meaning on a lakehouse log"
# A value for each kind of key (librdkafka's types); an ignored key takes the first its check accepts.
CANDIDATES = (1000, 10, 1, 0, "true", "false", "x", "any", "none", "plaintext", "broker", "fifo", "use_all_dns_ips",
              "client_credentials", "rs256", "oidc", "classic", "generic", "gzip", "", print)  # fmt: skip


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def ignored_lines(self) -> list[str]:
        return [r.getMessage() for r in self.records if IGNORED_LINE in r.getMessage()]


@pytest.fixture
def app_logger():
    logger = logging.getLogger("app.config-keys-test")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    handler = Collect()
    logger.addHandler(handler)
    yield logger, handler
    logger.removeHandler(handler)


def entries(*, ignored: bool = False, alias: bool = False, refused: bool = False) -> list[str]:
    keys = []
    for key, entry in config_keys.KEYS.items():
        if entry.alias is not None:
            keys += [key] if alias else []
        elif entry.modelled:
            continue
        elif entry.parse is config_keys.dedicated:
            keys += [key] if refused else []
        else:
            keys += [key] if ignored else []
    return keys


def accepted_value(kind: str, key: str):
    """A value the key's librdkafka check accepts and lakelog honours."""
    for value in CANDIDATES:
        try:
            config.load(kind, {key: value})
            return value
        except KafkaException:
            continue
    raise AssertionError(f"no candidate value accepted for {key}")


def invalid_arg(raised: pytest.ExceptionInfo, key: str) -> None:
    """confluent's shape of a refused config: a KafkaException carrying _INVALID_ARG, naming the key."""
    assert isinstance(raised.value, KafkaException)
    assert raised.value.args[0].code() == KafkaError._INVALID_ARG
    assert raised.value.key == key
    assert key in str(raised.value)


# -- the table -------------------------------------------------------------------------------------------


def test_the_table_agrees_with_the_schema():
    """Modelled keys and alias targets are lakelog client keys; a client key librdkafka knows is marked modelled."""
    client_keys = {key for kind in config.CLIENT_KINDS for key in config.SCHEMA[kind]}
    for key, entry in config_keys.KEYS.items():
        if entry.alias is not None:
            assert entry.alias in client_keys and config_keys.KEYS[entry.alias].modelled, key
        elif entry.modelled:
            assert key in client_keys, key
        else:
            assert entry.reason, key
        assert entry.role in config_keys.ROLES, key
    for key in client_keys:
        if key in config_keys.KEYS:
            assert config_keys.KEYS[key].modelled and config_keys.KEYS[key].alias is None, key
    # v2.15's CONFIGURATION.md names 193 keys; error_cb is taken by the clients (split_callbacks), and the table
    # adds confluent-kafka's logger and oauth_cb.
    assert len(config_keys.KEYS) == 194 and "error_cb" not in config_keys.KEYS


@pytest.mark.parametrize("kind", config.CLIENT_KINDS)
def test_every_ignored_key_is_accepted_and_listed_with_its_reason(kind, app_logger):
    logger, collected = app_logger
    keys = entries(ignored=True)
    conf = {key: accepted_value(kind, key) for key in keys}
    loaded = config.load(kind, {**conf, "logger": logger})
    assert not set(keys) & set(loaded)  # nothing of it is kept
    (line,) = collected.ignored_lines()
    for key in keys:
        assert f"{key}" in line and config_keys.KEYS[key].reason in line, key


def test_an_ignored_key_is_checked_as_librdkafka_checks_it():
    for key, value in [("socket.timeout.ms", 9), ("socket.timeout.ms", "ten"), ("security.protocol", "tls"),
                       ("debug", "broker,nonsense"), ("api.version.request", "maybe"), ("log_level", 8),
                       ("throttle_cb", "not callable")]:  # fmt: skip
        with pytest.raises(KafkaException) as raised:
            config.load("producer", {key: value})
        invalid_arg(raised, key)
    assert "10..300000" in str(pytest.raises(InvalidConfig, config.load, "consumer", {"socket.timeout.ms": 5}).value)
    # librdkafka's own spellings of a boolean and a base-0 integer; None resets a key in confluent.
    config.load("producer", {"socket.keepalive.enable": "T", "socket.send.buffer.bytes": "0x10", "ssl.ca.location": None})


# -- ignored keys: the clients work, and say once what they ignore ---------------------------------------


TRANSPORT = {
    "bootstrap.servers": "localhost:9092",
    "socket.timeout.ms": 10,
    "debug": "broker,topic,msg",
    "security.protocol": "SASL_SSL",
    "sasl.mechanisms": "PLAIN",
    "client.rack": "rack-1",
    "api.version.request": True,
    "enable.ssl.certificate.verification": "false",
    "reconnect.backoff.max.ms": 500,
}


def test_ignored_keys_are_logged_once_per_client_at_debug_and_the_clients_work(root, app_logger):
    logger, collected = app_logger
    admin = AdminClient({"lakelog.root": root, **TRANSPORT, "logger": logger})
    admin.create_topics([NewTopic("orders", num_partitions=1)])["orders"].result()
    producer = Producer(
        {"lakelog.root": root, **TRANSPORT, "queue.buffering.max.messages": 10, "queue.buffering.max.kbytes": 1024},
        logger=logger,
    )
    for n in range(3):
        producer.produce("orders", value=f"v{n}")
    assert producer.flush(10) == 0
    consumer = Consumer(
        {"lakelog.root": root, "group.id": "g", "auto.offset.reset": "earliest", **TRANSPORT, "logger": logger,
         "partition.assignment.strategy": "cooperative-sticky", "group.protocol": "consumer", "queued.min.messages": 10}
    )  # fmt: skip
    consumer.subscribe(["orders"])
    values = []
    for _ in range(100):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            values.append(message.value())
        if len(values) == 3:
            break
    consumer.close()
    assert values == [b"v0", b"v1", b"v2"]
    lines = collected.ignored_lines()
    assert len(lines) == 3, lines  # one per client
    assert all(r.levelno == logging.DEBUG for r in collected.records if IGNORED_LINE in r.getMessage())
    for line, kind in zip(lines, ("admin", "producer", "consumer"), strict=True):
        assert line.startswith(f"{kind} config: ")
        for key in TRANSPORT:
            assert key in line, (key, line)
    assert "queue.buffering.max.messages, queue.buffering.max.kbytes: lakelog's producer queue" in lines[1]
    assert "partition.assignment.strategy" not in lines[2]  # modelled: it selects the classic protocol's assignor
    # And nothing is logged about it at INFO or above.
    assert not [r for r in collected.records if r.levelno >= logging.INFO and "librdkafka" in r.getMessage()]


def test_without_a_logger_the_line_goes_to_lakelogs_config_logger(root, caplog):
    caplog.set_level(logging.DEBUG, logger="lakelog.config")
    Producer({"lakelog.root": root, "socket.timeout.ms": 10})
    lines = [r for r in caplog.records if r.name == "lakelog.config.loader" and IGNORED_LINE in r.getMessage()]
    assert len(lines) == 1 and "socket.timeout.ms" in lines[0].getMessage()
    caplog.clear()
    Producer({"lakelog.root": root})
    assert not [r for r in caplog.records if IGNORED_LINE in r.getMessage()]  # nothing ignored, no line


def test_a_key_of_the_other_client_is_ignored_as_librdkafka_ignores_it(root):
    """librdkafka accepts a consumer property on a producer (it warns); lakelog checks it, then ignores it."""
    assert "group.id" not in Producer({"lakelog.root": root, "group.id": "g", "enable.auto.commit": False}).config
    consumer = Consumer({"lakelog.root": root, "acks": "all", "linger.ms": 10, "delivery.timeout.ms": 1000})
    assert "acks" not in consumer.config and "message.timeout.ms" not in consumer.config
    with pytest.raises(KafkaException) as raised:
        Producer({"lakelog.root": root, "isolation.level": "read_everything"})
    invalid_arg(raised, "isolation.level")


def test_group_protocol_takes_consumer_and_classic_as_librdkafka_does(root):
    for protocol in ("consumer", "classic", "CONSUMER"):
        Consumer({"lakelog.root": root, "group.id": "g", "group.protocol": protocol})
    assert config_keys.KEYS["group.protocol"].modelled and config_keys.KEYS["partition.assignment.strategy"].modelled
    with pytest.raises(KafkaException) as raised:
        Consumer({"lakelog.root": root, "group.id": "g", "group.protocol": "share"})
    invalid_arg(raised, "group.protocol")


# -- aliases ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "alias, key, given, stored",
    [
        ("delivery.timeout.ms", "message.timeout.ms", "1500", 1500),
        ("compression.codec", "compression.type", "gzip", "gzip"),
        ("queue.buffering.max.ms", "linger.ms", 7, 7),
        ("message.send.max.retries", "retries", 3, 3),
        ("request.required.acks", "acks", "all", -1),
        ("fetch.message.max.bytes", "max.partition.fetch.bytes", 2048, 2048),
    ],
)
def test_an_alias_sets_its_lakelog_key(alias, key, given, stored):
    kind = "consumer" if key == "max.partition.fetch.bytes" else "producer"
    assert config_keys.KEYS[alias].alias == key
    loaded = config.load(kind, {alias: given})
    assert loaded[key] == stored and alias not in loaded


def test_linger_takes_librdkafkas_float_milliseconds():
    assert config.load("producer", {"linger.ms": 0.5})["linger.ms"] == 0.5
    assert config.load("producer", {"queue.buffering.max.ms": "2.5"})["linger.ms"] == 2.5
    assert config.load("producer", {"linger.ms": "7"})["linger.ms"] == 7
    for bad in ("fast", float("inf"), -0.5):
        with pytest.raises(KafkaException) as raised:
            config.load("producer", {"linger.ms": bad})
        invalid_arg(raised, "linger.ms")


def test_every_alias_maps_and_a_bad_value_names_the_alias(root):
    assert set(config_keys.aliases()) == set(entries(alias=True))
    assert Producer({"lakelog.root": root, "queue.buffering.max.ms": 11}).config["linger.ms"] == 11
    with pytest.raises(KafkaException) as raised:
        Producer({"lakelog.root": root, "delivery.timeout.ms": -5})
    invalid_arg(raised, "delivery.timeout.ms")
    with pytest.raises(KafkaException) as raised:
        Producer({"lakelog.root": root, "compression.codec": "brotli"})
    invalid_arg(raised, "compression.codec")


# -- unknown and refused keys ------------------------------------------------------------------------------


@pytest.mark.parametrize("client", CLIENTS.values())
@pytest.mark.parametrize("key", ["no.such.key", "max.block.ms", "socket.timeout"])
def test_a_key_neither_library_knows_is_refused_naming_it_and_touches_nothing(tmp_path, client, key):
    """librdkafka: 'No such configuration property'; confluent raises it as KafkaException(_INVALID_ARG)."""
    root = tmp_path / "root"
    with pytest.raises(KafkaException) as raised:
        client({"lakelog.root": str(root), "group.id": "g", key: "1"})
    invalid_arg(raised, key)
    assert f'No such configuration property: "{key}"' in str(raised.value)
    assert not root.exists() and folder_listing(tmp_path) == []  # S8.3: refused before any table is touched


@pytest.mark.parametrize(
    "key, refused_value, accepted_value",
    [
        ("queuing.strategy", "lifo", "fifo"),
        ("delivery.report.only.error", True, False),
        ("enable.gapless.guarantee", "true", "false"),
        ("offset.store.method", "file", "broker"),
        ("topic.blacklist", "^secret.*", ""),
    ],
)
def test_a_value_lakelog_cannot_honour_is_refused_with_the_reason(key, refused_value, accepted_value):
    with pytest.raises(KafkaException) as raised:
        config.load("producer", {key: refused_value})
    invalid_arg(raised, key)
    assert config_keys.KEYS[key].refusal in str(raised.value)
    config.load("producer", {key: accepted_value})


@pytest.mark.parametrize("key", entries(refused=True))
def test_a_c_api_key_is_refused_as_librdkafka_refuses_it(key):
    with pytest.raises(KafkaException) as raised:
        config.load("producer", {key: "x"})
    invalid_arg(raised, key)
    assert "dedicated" in str(raised.value)


def test_transactional_and_idempotence_rules_are_librdkafkas():
    with pytest.raises(KafkaException) as raised:
        config.load("producer", {"transactional.id": "t", "enable.idempotence": False})
    invalid_arg(raised, "enable.idempotence")
    for conf in ({"transactional.id": "t", "acks": 1}, {"enable.idempotence": True, "acks": "0"}):
        with pytest.raises(KafkaException) as raised:
            config.load("producer", conf)
        invalid_arg(raised, "acks")
        assert "`acks` must be set to `all`" in str(raised.value)
    assert config.load("producer", {"transactional.id": "t", "acks": "all"})["acks"] == -1
    assert config.load("producer", {"acks": 1})["acks"] == 1  # idempotence not asked for: allowed


# -- acks ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "given, stored", [(-1, -1), (0, 0), (1, 1), ("all", -1), ("ALL", -1), ("-1", -1), ("0", 0), ("1", 1), (1000, 1000)]
)
def test_acks_takes_librdkafkas_forms(given, stored):
    assert config.load("producer", {"acks": given})["acks"] == stored


def test_a_refused_value_reads_as_librdkafkas_message():
    """Handlers and tests ported from confluent match librdkafka's text (test_Producer.py's partitioner test)."""
    with pytest.raises(KafkaException, match='Invalid value "murmur" for configuration property "partitioner"'):
        config.load("producer", {"partitioner": "murmur"})
    with pytest.raises(KafkaException, match='"linger.ms" value 900001 is outside allowed range 0..900000'):
        config.load("producer", {"linger.ms": 900_001})


@pytest.mark.parametrize("given", [-2, 1001, "two", True, 1.5, None])
def test_acks_out_of_librdkafkas_range_is_refused(given):
    with pytest.raises(KafkaException) as raised:
        config.load("producer", {"acks": given})
    invalid_arg(raised, "acks")


@pytest.mark.parametrize("acks", [0, "1"])
def test_a_producer_with_acks_below_all_still_delivers_every_message_committed(root, acks):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("t", num_partitions=1)])["t"].result()
    reports = []
    producer = Producer({"lakelog.root": root, "acks": acks, "on_delivery": lambda e, m: reports.append((e, m))})
    producer.produce("t", value=b"x")
    assert producer.flush(10) == 0
    ((error, message),) = reports
    assert error is None and message.offset() == 0


# -- Client(**conf), logger= -------------------------------------------------------------------------------


def test_clients_take_their_config_as_keyword_arguments(root):
    producer = Producer(**{"lakelog.root": root, "linger.ms": 9, "socket.timeout.ms": 100})
    assert producer.config["linger.ms"] == 9
    admin = AdminClient(**{"lakelog.root": root})
    admin.create_topics([NewTopic("kw", num_partitions=1)])["kw"].result()
    producer.produce("kw", value=b"v")
    assert producer.flush(10) == 0
    consumer = Consumer(**{"lakelog.root": root, "group.id": "g", "auto.offset.reset": "earliest"})
    assert consumer.config["group.id"] == "g"
    consumer.close()


def test_keyword_arguments_win_over_the_dict_as_in_confluent(root):
    conf = {"lakelog.root": root, "linger.ms": 5, "client.id": "dict"}
    producer = Producer(conf, **{"linger.ms": 8})
    assert producer.config["linger.ms"] == 8 and producer.config["client.id"] == "dict"
    assert conf == {"lakelog.root": root, "linger.ms": 5, "client.id": "dict"}  # the caller's dict is not changed
    on_delivery = lambda error, message: None  # noqa: E731
    assert Producer(conf, on_delivery=on_delivery)._default_on_delivery is on_delivery


def test_default_topic_config_is_merged_as_in_confluent(root):
    producer = Producer({"lakelog.root": root, "default.topic.config": {"acks": "all", "message.timeout.ms": 1234}})
    assert producer.config["message.timeout.ms"] == 1234 and producer.config["acks"] == -1
    with pytest.raises(KafkaException) as raised:
        Producer({"lakelog.root": root, "default.topic.config": "acks=all"})
    invalid_arg(raised, "default.topic.config")


@pytest.mark.parametrize("kind", config.CLIENT_KINDS)
def test_every_client_takes_logger_as_a_keyword_argument(root, kind, app_logger):
    logger, collected = app_logger
    conf = {"lakelog.root": root, "group.id": "g", "debug": "all"}
    client = CLIENTS[kind](conf, logger=logger)
    assert client._logger is logger
    (line,) = collected.ignored_lines()
    assert line.startswith(f"{kind} config: ") and "debug" in line
    assert CLIENTS[kind](conf, logger=None)._logger is not logger  # confluent: None is no logger
    assert len(collected.ignored_lines()) == 1
    with pytest.raises(KafkaException) as raised:
        CLIENTS[kind](conf, logger="app")
    invalid_arg(raised, "logger")


def test_a_callback_that_is_not_callable_is_refused_naming_it(root):
    for client, key in ((Producer, "on_delivery"), (Consumer, "on_commit")):
        with pytest.raises(KafkaException) as raised:
            client({"lakelog.root": root, key: "print"})
        invalid_arg(raised, key)
    with pytest.raises(KafkaException) as raised:
        Consumer({"lakelog.root": root, "on_delivery": print})  # a producer's callback: confluent refuses it too
    invalid_arg(raised, "on_delivery")


def test_wrong_types_are_type_errors_where_confluent_raises_them(root):
    """confluent's common_conf_setup: TypeError for a non-dict config, a non-str key, a non-callable error_cb,
    stats_cb or oauth_cb; ValueError for a non-callable throttle_cb. Each is a KafkaException too."""
    for client in CLIENTS.values():
        with pytest.raises(TypeError, match="expected configuration dict"):  # confluent's test_basic_api
            client()
    for make in (lambda: Producer([("lakelog.root", root)]), lambda: AdminClient({"lakelog.root": root, 5: "x"})):
        with pytest.raises(TypeError) as raised:
            make()
        assert isinstance(raised.value, KafkaException)
    for key in ("error_cb", "stats_cb", "oauth_cb"):
        with pytest.raises(TypeError, match=key):
            Producer({"lakelog.root": root, key: "print"})
    with pytest.raises(ValueError, match="throttle_cb"):
        Consumer({"lakelog.root": root, "throttle_cb": 5})
    Producer({"lakelog.root": root, "error_cb": print, "stats_cb": print, "throttle_cb": print, "oauth_cb": print})


def test_auto_create_topics_keys_have_librdkafkas_and_kafkas_defaults():
    assert config.load("producer")["allow.auto.create.topics"] is True
    assert config.load("consumer")["allow.auto.create.topics"] is False
    assert config.load("broker")["auto.create.topics.enable"] is True
    assert config.load("consumer", {"allow.auto.create.topics": "true"})["allow.auto.create.topics"] is True
    with pytest.raises(KafkaException) as raised:
        config.load("consumer", {"allow.auto.create.topics": "sometimes"})
    invalid_arg(raised, "allow.auto.create.topics")
    with pytest.raises(InvalidConfig):
        config.load("broker", {"auto.create.topics.enable": "yes"})
    # An admin ignores it, as librdkafka's admin client has no use for it.
    assert "allow.auto.create.topics" not in config.load("admin", {"allow.auto.create.topics": True})
