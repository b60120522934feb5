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


def test_stats_cb_gets_librdkafkas_statistics_json_every_interval(root, topic):
    import json

    from helpers import FakeClock

    from lakelog import TopicPartition

    events = topic(name="events", partitions=2)
    clock = FakeClock()
    produced: list[dict] = []
    producer = Producer(
        {"lakelog.root": root, "statistics.interval.ms": 1000, "stats_cb": lambda s: produced.append(json.loads(s))},
        clock=clock,
    )
    for n in range(3):
        producer.produce(events, value=f"v{n}", partition=0)
    producer.flush()
    assert produced == []  # no interval has passed yet
    clock.advance(1000)
    producer.poll(0)
    [stats] = produced
    assert stats["type"] == "producer" and stats["client_id"] == "lakelog" and stats["brokers"] == {}
    assert stats["txmsgs"] == 3 and stats["topics"][events]["partitions"]["0"]["txmsgs"] == 3
    assert stats["eos"]["txn_state"] == "Init"

    consumed: list[dict] = []
    consumer = Consumer(
        {
            "lakelog.root": root,
            "statistics.interval.ms": 1000,
            "stats_cb": lambda s: consumed.append(json.loads(s)),
        },
        clock=clock,
    )
    consumer.assign([TopicPartition(events, 0, 1), TopicPartition(events, 1, 0)])
    assert len([m for m in consumer.consume(10, 1.0) if m.error() is None]) == 2
    clock.advance(1000)
    consumer.consume(1, 0)
    [stats] = consumed
    partition = stats["topics"][events]["partitions"]["0"]
    assert stats["type"] == "consumer" and stats["rxmsgs"] == 2
    assert partition["lo_offset"] == 0 and partition["hi_offset"] == 3 and partition["ls_offset"] == 3
    assert partition["next_offset"] == 3 and partition["consumer_lag"] == 0 and partition["rxmsgs"] == 2
    assert stats["topics"][events]["partitions"]["1"]["consumer_lag"] == 0
    consumer.close()
    with pytest.raises(TypeError):
        Producer({"lakelog.root": root, "stats_cb": "not callable"})
