"""ACLs and the authorization decision (pure).

An ``Acl`` is (principal, resource type, pattern LITERAL|PREFIXED, name, operation, ALLOW|DENY). Resources
nest: a partition ``db.t$p`` lies in its table ``db.t``, a table in its database ``db``, and everything in
the cluster; an ACL on an enclosing resource covers what it holds (ALLOW READ on database ``db`` allows
reading every table of it, DENY READ on ``db.t`` refuses reading every partition of it; groups lie in the
cluster only). A PREFIXED name is matched against each of them (``db.t$2026`` covers that year's
partitions only). Principal ``*`` and the literal name ``*`` match all.

``decide(acls, principal, operation, resource)``::

    any matching DENY for the operation           -> denied   (DENY wins)
    any matching ALLOW for the operation          -> allowed
    DESCRIBE, with a matching ALLOW of READ, WRITE, CREATE, DROP or ALTER          -> allowed
    DESCRIBE_CONFIGS, with a matching ALLOW of ALTER                              -> allowed
    otherwise                                     -> denied   (nothing allows it)
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from fluss_py.types import split_partition


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


# an ALLOW of any of these implies the key (Kafka's rule); DESCRIBE_CONFIGS implies nothing, so a metrics
# scraper's grant shows no table through GetMetadata
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DROP, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER}),
}


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
    """One access rule; see the module docstring."""

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


def enclosing(resource: Resource) -> list[Resource]:
    """The resource and every resource holding it (partition -> its table -> its database -> the cluster).

    A partition is stored as its own table ``db.t$p`` (docs/partitioning.md) but is part of table ``db.t``:
    an ACL on ``db.t`` covers every partition of it, as Apache Fluss authorizes partitions against their
    table. An ACL naming ``db.t$p`` itself covers that partition only."""
    out = [resource]
    if resource.type is ResourceType.TABLE and "." in resource.name:
        database, name = resource.name.split(".", 1)
        logical, partition = split_partition(name)
        if partition is not None:
            out.append(Resource(ResourceType.TABLE, f"{database}.{logical}"))
        out.append(Resource(ResourceType.DATABASE, database))
    if resource.type is not ResourceType.CLUSTER:
        out.append(CLUSTER)
    return out


def decide(acls: Iterable[Acl], principal: str, operation: Operation, resource: Resource) -> bool:
    """True when an ACL allows ``principal`` to do ``operation`` on ``resource`` and none denies it."""
    scopes = enclosing(resource)
    allowed = False
    for acl in acls:
        if acl.principal not in (principal, WILDCARD) or not any(acl.covers(r) for r in scopes):
            continue
        if acl.operation is operation:
            if acl.permission is Permission.DENY:
                return False
            allowed = True
        elif acl.permission is Permission.ALLOW and acl.operation in IMPLIED_BY.get(operation, ()):
            allowed = True
    return allowed
