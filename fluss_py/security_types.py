"""The value types of security that ZooKeeper stores and the servers decide on: ACLs and SCRAM credentials.

They sit below ``zk/`` (whose ``paths.py`` encodes them in ``security/acls/...`` and ``security/users/...``)
and below ``security/`` (which decides with them: ``security/acl.py`` the authorization decision,
``security/scram.py`` deriving and checking keys), so neither package imports the other for them.

An ``Acl`` is (principal, resource type, pattern LITERAL|PREFIXED, name, operation, ALLOW|DENY); what it
covers and how ACLs combine is told in ``security/acl.py``. A ``ScramCredential`` is one user's salted keys
(SCRAM-SHA-256, RFC 5802/7677; how they are made: ``security/scram.py``). Pure; no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ResourceType(StrEnum):
    CLUSTER = "cluster"
    DATABASE = "database"
    TABLE = "table"
    GROUP = "group"


class Operation(StrEnum):
    READ = "READ"
    WRITE = "WRITE"
    CREATE = "CREATE"
    DROP = "DROP"
    ALTER = "ALTER"
    DESCRIBE = "DESCRIBE"
    DESCRIBE_CONFIGS = "DESCRIBE_CONFIGS"  # on the cluster: every server's /metrics and /health details


class Permission(StrEnum):
    ALLOW = "ALLOW"
    DENY = "DENY"


class PatternType(StrEnum):
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


CLUSTER_NAME = "cluster"
WILDCARD = "*"


@dataclass(frozen=True, slots=True)
class Resource:
    """A thing an operation acts on: ``Resource(TABLE, "db.t")``, ``Resource(CLUSTER, "cluster")``."""

    type: ResourceType
    name: str

    def __str__(self) -> str:
        return f"{self.type.value} {self.name}"


CLUSTER = Resource(ResourceType.CLUSTER, CLUSTER_NAME)


def table(database: str, name: str) -> Resource:
    return Resource(ResourceType.TABLE, f"{database}.{name}")


@dataclass(frozen=True, slots=True)
class Acl:
    """One access rule (``security/acl.py`` tells how rules combine)."""

    principal: str
    resource_type: ResourceType
    pattern: PatternType
    name: str
    operation: Operation
    permission: Permission

    def covers(self, resource: Resource) -> bool:
        if self.resource_type is not resource.type:
            return False
        if self.pattern is PatternType.PREFIXED:
            return resource.name.startswith(self.name)
        return self.name in (WILDCARD, resource.name)

    def __str__(self) -> str:
        pattern = "prefix " if self.pattern is PatternType.PREFIXED else ""
        return (
            f"{self.permission.value} {self.principal} {self.operation.value} "
            f"on {self.resource_type.value} {pattern}{self.name}"
        )


MECHANISM = "SCRAM-SHA-256"
MIN_ITERATIONS = 4096  # the RFC 7677 minimum
MAX_ITERATIONS = 1_000_000  # ~1 s of PBKDF2: a stored count above it would stall every login with it
MIN_SALT_BYTES = 16
KEY_BYTES = 32  # SHA-256


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """One user's stored keys: (salt, iterations, StoredKey, ServerKey); never the password."""

    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes


def checked(credential: ScramCredential) -> ScramCredential:
    """``credential`` when its parameters are sound (read from ZooKeeper: input like any other); ValueError
    naming what is not: too few or too many iterations, a short salt, keys of the wrong size."""
    if not MIN_ITERATIONS <= credential.iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations {credential.iterations} outside [{MIN_ITERATIONS}, {MAX_ITERATIONS}]")
    if len(credential.salt) < MIN_SALT_BYTES:
        raise ValueError(f"salt of {len(credential.salt)} bytes (at least {MIN_SALT_BYTES})")
    if len(credential.stored_key) != KEY_BYTES or len(credential.server_key) != KEY_BYTES:
        raise ValueError(f"keys must be {KEY_BYTES} bytes")
    return credential
