"""confluent-kafka's `logger` config (issue 12, item 7): a client's own log lines go to the logger it is given.

Checked on a consumer (assignment, offset reset) and an admin (delete-records); without the key they go to
lakelog's module loggers.
"""

from __future__ import annotations

import logging

import pytest

from lakelog import AdminClient, Consumer, KafkaException, NewTopic, Producer, TopicPartition

pytestmark = pytest.mark.roots("local")


class Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def app_logger():
    logger = logging.getLogger("app.lakelog-client-test")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Collect()
    logger.addHandler(handler)
    yield logger, handler
    logger.removeHandler(handler)


def test_a_consumer_and_an_admin_log_to_the_logger_they_are_given(root, app_logger, caplog):
    logger, collected = app_logger
    admin = AdminClient({"lakelog.root": root, "logger": logger})
    admin.create_topics([NewTopic("orders", num_partitions=1)])["orders"].result()
    producer = Producer({"lakelog.root": root})
    for n in range(3):
        producer.produce("orders", value=f"v{n}", partition=0)
    producer.flush()
    caplog.set_level(logging.INFO, logger="lakelog")
    consumer = Consumer({"lakelog.root": root, "group.id": "g", "auto.offset.reset": "earliest", "logger": logger})
    consumer.subscribe(["orders"])
    for _ in range(50):
        if consumer.poll(0.2) is not None:
            break
    consumer.close()
    assert any("assigned [orders-0]" in line for line in collected.lines), collected.lines
    assert any("auto.offset.reset=earliest: reading from offset 0" in line for line in collected.lines), collected.lines
    admin.delete_records([TopicPartition("orders", 0, 2)])[TopicPartition("orders", 0, 2)].result()
    assert any("records before offset 2 deleted" in line for line in collected.lines), collected.lines
    # Given a logger, the client's own lines do not also go to lakelog's loggers.
    own = ("assigned [orders-0]", "auto.offset.reset=earliest", "records before offset 2 deleted")
    assert not [r for r in caplog.records if r.name.startswith("lakelog.client") and any(o in r.getMessage() for o in own)]


def test_without_a_logger_the_lines_go_to_lakelogs_module_loggers(root, caplog):
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("orders", num_partitions=1)])["orders"].result()
    caplog.set_level(logging.INFO, logger="lakelog")
    consumer = Consumer({"lakelog.root": root, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    for _ in range(20):
        consumer.poll(0.1)
        if any("assigned [orders-0]" in r.getMessage() for r in caplog.records):
            break
    consumer.close()
    assert any(r.name == "lakelog.client.consumer" and "assigned [orders-0]" in r.getMessage() for r in caplog.records)


def test_a_transactional_producer_logs_its_init_and_its_fence_to_the_logger_it_is_given(root, app_logger):
    logger, collected = app_logger
    AdminClient({"lakelog.root": root}).create_topics([NewTopic("orders", num_partitions=1)])["orders"].result()
    zombie = Producer({"lakelog.root": root, "transactional.id": "etl", "logger": logger})
    zombie.init_transactions()
    assert any("transactional.id 'etl': initialised at producer id" in line for line in collected.lines), collected.lines
    zombie.begin_transaction()
    zombie.produce("orders", value="zombie", partition=0)
    zombie.flush()
    Producer({"lakelog.root": root, "transactional.id": "etl"}).init_transactions()  # fences the zombie (S4.1)
    with pytest.raises(KafkaException):
        zombie.commit_transaction()
    assert any("unusable from now on: PRODUCER_FENCED" in line for line in collected.lines), collected.lines
