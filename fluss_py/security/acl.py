"""ACLs and the authorization decision (pure).

An ``Acl`` (the value type, with ``Resource`` and the enums, is in ``fluss_py/security_types.py``) is
(principal, resource type, pattern LITERAL|PREFIXED, name, operation, ALLOW|DENY). Resources
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

from fluss_py.security_types import CLUSTER, WILDCARD, Acl, Operation, Permission, Resource, ResourceType
from fluss_py.types import split_partition

# an ALLOW of any of these implies the key (Kafka's rule); DESCRIBE_CONFIGS implies nothing, so a metrics
# scraper's grant shows no table through GetMetadata
IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset({Operation.READ, Operation.WRITE, Operation.CREATE, Operation.DROP, Operation.ALTER}),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.ALTER}),
}


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
