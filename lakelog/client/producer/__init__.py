"""The Producer, built from parts as Kafka's is: accumulator, sender, transactions, reports, topics and the quality gates."""

from lakelog.client.producer.accumulator import DeliveryCallback
from lakelog.client.producer.producer import Producer
from lakelog.client.producer.transactions import TransactionState

__all__ = ["DeliveryCallback", "Producer", "TransactionState"]
