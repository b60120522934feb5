"""confluent_kafka.admin's AdminClient on a root: the client, and one private module per resource kind.

`client` holds the AdminClient's calls; `types` the shapes its results take; `configs`, `offsets`,
`groups` and `transactions` the work on each kind of resource; `broker_only` the calls that need a
broker (ACLs, SCRAM, leader election) and raise `_NOT_IMPLEMENTED`. Users import these names from
`lakelog.admin`.
"""

from lakelog.client.admin.client import AdminClient

__all__ = ["AdminClient"]
