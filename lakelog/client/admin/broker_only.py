"""confluent-kafka's admin calls that only a broker can answer: ACLs, SCRAM credentials, leader elections.

A root has no brokers, principals or replicas: access to it is the store's (S3
policies, file permissions). The types are here so that programs written for
confluent import and build them; the calls raise `NotImplementedOnRoot`
(`_NOT_IMPLEMENTED`) with one line saying why.
"""

from __future__ import annotations

import enum
import logging
from dataclasses import dataclass
from typing import Any

from lakelog.client.admin.types import ResourcePatternType, ResourceType
from lakelog.errors import NotImplementedOnRoot

logger = logging.getLogger(__name__)


class AclOperation(enum.Enum):
    """An operation an ACL binding allows or denies (READ, WRITE, ...); for the types only, a root has no ACLs."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(enum.Enum):
    """Whether an ACL binding allows or denies its operation; for the types only, a root has no ACLs."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


@dataclass(frozen=True)
class AclBinding:
    restype: ResourceType
    name: str
    resource_pattern_type: ResourcePatternType
    principal: str
    host: str
    operation: AclOperation
    permission_type: AclPermissionType


class AclBindingFilter(AclBinding):
    """An AclBinding whose None / ANY fields match anything."""


class ScramMechanism(enum.Enum):
    """A SCRAM hash mechanism (SHA-256, SHA-512); for the types only, a root has no SCRAM credentials."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


@dataclass(frozen=True)
class ScramCredentialInfo:
    mechanism: ScramMechanism
    iterations: int


@dataclass(frozen=True)
class UserScramCredentialsDescription:
    user: str
    scram_credential_infos: list[ScramCredentialInfo]


class UserScramCredentialAlteration:
    """A change to a user's SCRAM credentials, the base of an upsertion and a deletion."""

    def __init__(self, user: str) -> None:
        self.user = user


class UserScramCredentialUpsertion(UserScramCredentialAlteration):
    """Add or replace a user's SCRAM credential for one mechanism, from a password and an optional salt."""

    def __init__(self, user: str, scram_credential_info: ScramCredentialInfo, password: bytes, salt: bytes | None = None) -> None:
        super().__init__(user)
        self.scram_credential_info = scram_credential_info
        self.password = password
        self.salt = salt


class UserScramCredentialDeletion(UserScramCredentialAlteration):
    """Remove a user's SCRAM credential for one mechanism."""

    def __init__(self, user: str, mechanism: ScramMechanism) -> None:
        super().__init__(user)
        self.mechanism = mechanism


class ElectionType(enum.Enum):
    """Which leader elect_leaders picks: PREFERRED (the first replica) or UNCLEAN (any, data loss allowed)."""

    PREFERRED = 0
    UNCLEAN = 1


_WHY = {
    "create_acls": "ACLs need a broker; a root's access is its store's (S3 policies, file permissions)",
    "describe_acls": "ACLs need a broker; a root's access is its store's (S3 policies, file permissions)",
    "delete_acls": "ACLs need a broker; a root's access is its store's (S3 policies, file permissions)",
    "describe_user_scram_credentials": "SCRAM credentials need a broker; a root authenticates through its store",
    "alter_user_scram_credentials": "SCRAM credentials need a broker; a root authenticates through its store",
    "set_sasl_credentials": "SASL credentials need a broker; a root authenticates through its store",
    "elect_leaders": "leader election needs replicas on brokers; a root's partitions have one copy, in the store",
}


class BrokerOnlyCalls:
    """The AdminClient's broker-only calls, each refused with NotImplementedOnRoot (a mixin)."""

    def create_acls(self, acls: Any, **_: Any) -> Any:
        _refuse("create_acls")

    def describe_acls(self, acl_binding_filter: Any, **_: Any) -> Any:
        _refuse("describe_acls")

    def delete_acls(self, acl_binding_filters: Any, **_: Any) -> Any:
        _refuse("delete_acls")

    def describe_user_scram_credentials(self, users: Any = None, **_: Any) -> Any:
        _refuse("describe_user_scram_credentials")

    def alter_user_scram_credentials(self, alterations: Any, **_: Any) -> Any:
        _refuse("alter_user_scram_credentials")

    def set_sasl_credentials(self, username: str, password: str) -> None:
        _refuse("set_sasl_credentials")

    def elect_leaders(self, election_type: Any, partitions: Any = None, **_: Any) -> Any:
        _refuse("elect_leaders")


def _refuse(call: str) -> None:
    raise NotImplementedOnRoot(f"{call} is not implemented by lakelog: {_WHY[call]}")


__all__ = [
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "BrokerOnlyCalls",
    "ElectionType",
    "NotImplementedOnRoot",
    "ScramCredentialInfo",
    "ScramMechanism",
    "UserScramCredentialAlteration",
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentialsDescription",
]
