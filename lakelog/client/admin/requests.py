"""What every AdminClient call shares: its futures, the check of its options and arguments, and its open-client guard."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from lakelog.client.admin import transactions as transaction_admin
from lakelog.client.admin.groups import ConsumerGroupTopicPartitions
from lakelog.client.admin.types import ConfigResource
from lakelog.client.types import TopicPartition
from lakelog.errors import InvalidArgument, InvalidProducerIdMapping, InvalidType, KafkaException
from lakelog.store import Location

# confluent-kafka's message for a call on a client its `with` block (or close) has destroyed.
CLOSED = "AdminClient has been closed"
HANDLE_CLOSED = "Handle has been closed"


def resolved(result: Any = None, error: BaseException | None = None) -> Future:
    future: Future = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)
    return future


# The keyword options each call takes besides its named parameters, as confluent-kafka's (a root waits for
# nothing, so the timeouts are checked and then have nothing to bound); any other keyword is a TypeError.
_TIMEOUTS = frozenset({"request_timeout", "operation_timeout"})
_OPTIONS: dict[str, frozenset[str]] = {
    "create_topics": _TIMEOUTS,
    "delete_topics": _TIMEOUTS,
    "create_partitions": _TIMEOUTS,
    "describe_configs": frozenset({"request_timeout", "broker"}),
    "alter_configs": frozenset({"request_timeout", "broker"}),
    "incremental_alter_configs": frozenset({"request_timeout", "broker"}),
    "describe_topics": frozenset({"request_timeout", "include_authorized_operations"}),
    "describe_cluster": frozenset({"request_timeout", "include_authorized_operations"}),
    "describe_consumer_groups": frozenset({"request_timeout", "include_authorized_operations"}),
    "delete_records": _TIMEOUTS,
}
_OPTION_TYPES: dict[str, tuple[type, ...]] = {
    "request_timeout": (int, float),
    "operation_timeout": (int, float),
    "include_authorized_operations": (bool,),
    "validate_only": (bool,),
    "require_stable": (bool,),
    "broker": (int,),
}


# The calls that need no lakelog root: create_topics makes one (the explicit admin path), poll contacts nothing.
_ROOTLESS = frozenset({"create_topics", "poll"})


def while_open(method: Callable) -> Callable:
    """A public call: RuntimeError once the client is closed, TypeError for an option confluent-kafka would refuse,
    UnresolvedRoot on a root never initialised (a typo), before anything is read or written."""
    # confluent-kafka's metadata calls are its handle's, and say so when the client is closed.
    message = HANDLE_CLOSED if method.__name__ in ("list_topics", "list_groups") else CLOSED
    named = set(inspect.signature(method).parameters)
    allowed = _OPTIONS.get(method.__name__, frozenset({"request_timeout"}))

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        if self._closed:
            raise RuntimeError(message)
        for key, value in kwargs.items():
            if key not in named and key not in allowed:
                raise InvalidType(f"{method.__name__}() got an unexpected keyword argument {key!r}")
            types = _OPTION_TYPES.get(key)
            if types is not None and (not isinstance(value, types) or (isinstance(value, bool) and bool not in types)):
                raise InvalidType(f"{method.__name__}(): {key} must be {' or '.join(t.__name__ for t in types)}, not {value!r}")
            if key in _TIMEOUTS and value < 0:
                raise InvalidArgument(f"{method.__name__}(): {key} must not be negative, not {value!r}")
        if method.__name__ not in _ROOTLESS:
            self._root  # noqa: B018 - the check: UnresolvedRoot unless the root is initialised
        return method(self, *args, **kwargs)

    return call


def kept_values(values: Any, kind: type, name: str) -> set:
    """A set of enum values to keep (empty: keep all); a list is taken too, as lakelog took it before."""
    if values is None:
        return set()
    if not isinstance(values, (set, frozenset, list, tuple)):
        raise InvalidType(f"'{name}' must be a set")
    if not all(isinstance(value, kind) for value in values):
        raise InvalidType(f"All elements of {name} must be of type {kind.__name__}")
    return set(values)


def check_resources(resources: Any, call: str) -> None:
    if not isinstance(resources, list):
        raise InvalidType(f"{call} takes a list of ConfigResource, not {type(resources).__name__}")
    if not resources or not all(isinstance(r, ConfigResource) for r in resources):
        raise InvalidArgument(f"Expected a non-empty list of {ConfigResource!r}")
    if len(set(resources)) != len(resources):
        raise InvalidArgument(f"{call}: a resource is named twice")


def check_group_requests(requests: Any, call: str, offsets: bool) -> None:
    if not isinstance(requests, (list, tuple)) or not all(isinstance(r, ConsumerGroupTopicPartitions) for r in requests):
        raise InvalidType(f"{call} takes a list of ConsumerGroupTopicPartitions")
    if not requests:
        raise InvalidArgument(f"{call}: the request names no group")
    for request in requests:
        partitions = request.topic_partitions
        if partitions is None and not offsets:
            continue
        if not isinstance(partitions, (list, tuple)) or not all(isinstance(p, TopicPartition) for p in partitions):
            raise InvalidType(f"{call}: topic_partitions of group {request.group_id!r} must be a list of TopicPartition")


def future_of(function: Any, *args: Any) -> Future:
    try:
        return resolved(function(*args))
    except KafkaException as error:
        return resolved(error=error)


def describe_transaction(root: str | Location, transactional_id: str) -> transaction_admin.TransactionDescription:
    found = transaction_admin.describe_transaction(root, transactional_id)
    if found is None:
        raise InvalidProducerIdMapping(f"transactional id {transactional_id!r} is unknown (never initialised, or expired)")
    return found
