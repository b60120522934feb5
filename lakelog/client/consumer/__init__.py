"""The Consumer, by concept: the poll loop (`consumer`), the assigned partitions and their fetches (`fetcher`),
the group member (`membership`), committed and stored offsets (`offsets`) and the root's topics (`metadata`)."""

from lakelog.client.consumer.consumer import Consumer

__all__ = ["Consumer"]
