"""The names frameworks built on confluent-kafka reach for: `confluent_kafka.cimpl`, a root passed as
`bootstrap.servers`, `set_sasl_credentials` on the clients."""

from __future__ import annotations

import pytest
from helpers import table_fingerprint

from lakelog import AdminClient, Consumer, KafkaError, KafkaException, Producer, admin, cimpl
from lakelog.store import Location

pytestmark = pytest.mark.roots("local")


def test_cimpl_re_exports_the_classes_frameworks_import_from_it():
    import lakelog

    for name in ("Consumer", "Producer", "KafkaError", "KafkaException", "Message", "TopicPartition", "NewTopic"):
        assert getattr(cimpl, name) is getattr(lakelog, name)
    assert cimpl.NewPartitions is admin.NewPartitions
    assert issubclass(AdminClient, cimpl._AdminClientImpl)


def test_bootstrap_servers_naming_a_root_is_the_root(root, topic):
    events = topic(name="events")
    for servers in (root, Location.of(root).uri):
        producer = Producer({"bootstrap.servers": servers})
        producer.produce(events, value="v")
        assert producer.flush(10) == 0
    with Consumer({"bootstrap.servers": root, "auto.offset.reset": "earliest"}) as consumer:
        assert events in consumer.list_topics().topics


def test_lakelog_root_wins_over_bootstrap_servers(root, topic, tmp_path):
    events = topic(name="events")
    elsewhere = str(tmp_path / "not-a-root")
    producer = Producer({"lakelog.root": root, "bootstrap.servers": elsewhere})
    producer.produce(events, value="v")
    assert producer.flush(10) == 0
    assert table_fingerprint(elsewhere) == []  # nothing made there


@pytest.mark.parametrize("servers", ["localhost:9092", "broker-1:9092,broker-2:9092", "kafka"])
def test_a_broker_address_says_lakelog_needs_a_root(servers):
    for client in (Producer, Consumer, AdminClient):
        with pytest.raises(KafkaException) as raised:
            client({"bootstrap.servers": servers})
        error = raised.value.args[0]
        assert error.code() == KafkaError._INVALID_ARG
        assert "lakelog needs a root" in error.str() and "\n" not in error.str()


def test_set_sasl_credentials_is_accepted_by_producer_and_consumer(root):
    for client in (Producer({"lakelog.root": root}), Consumer({"lakelog.root": root})):
        client.set_sasl_credentials("user", "secret")
        with pytest.raises(TypeError):
            client.set_sasl_credentials("user", None)
