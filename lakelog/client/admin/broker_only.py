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
    def __init__(self, user: str) -> None:
        self.user = user


class UserScramCredentialUpsertion(UserScramCredentialAlteration):
    def __init__(self, user: str, scram_credential_info: ScramCredentialInfo, password: bytes, salt: bytes | None = None) -> None:
        super().__init__(user)
        self.scram_credential_info = scram_credential_info
        self.password = password
        self.salt = salt


class UserScramCredentialDeletion(UserScramCredentialAlteration):
    def __init__(self, user: str, mechanism: ScramMechanism) -> None:
        super().__init__(user)
        self.mechanism = mechanism


class ElectionType(enum.Enum):
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
