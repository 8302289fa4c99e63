"""Every gRPC method mapped to what it needs (docs/security.md has this table for readers).

``required(method, request, table_name)`` answers one of::

    PUBLIC                      any authenticated principal (bootstrap information, writer ids)
    INTERNAL                    only the cluster's own servers (replication and control RPCs)
    [(operation, resource)...]  each pair must be allowed by the authorizer

``table_name(table_id)`` names a table by id ("db.t"; a partition "db.t$p"), None when this server does not
know the id (a tablet server then refuses the request as UNKNOWN_TABLE_OR_BUCKET, retriable: metadata may
be on its way). A tablet server names ids from its metadata cache, the coordinator from its leader's view.
A method missing from the table is refused: a new RPC cannot slip through unmapped.
Pure; no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from fluss_py.errors import UnknownTableOrBucketError
from fluss_py.security_types import CLUSTER, Operation, Resource, ResourceType

PUBLIC = "public"
INTERNAL = "internal"

Need = str | list[tuple[Operation, Resource]]
TableName = Callable[[int], str | None]

_T = "/fluss.v1.TabletService/"
_C = "/fluss.v1.CoordinatorService/"


def _tables(op: Operation, table_ids: Iterable[int], table_name: TableName) -> list[tuple[Operation, Resource]]:
    out: list[tuple[Operation, Resource]] = []
    for table_id in sorted(set(table_ids)):
        name = table_name(table_id)
        if name is None:
            raise UnknownTableOrBucketError(f"table id {table_id} is not known to this server")
        out.append((op, Resource(ResourceType.TABLE, name)))
    return out


def _path(p: Any) -> Resource:
    return Resource(ResourceType.TABLE, f"{p.database}.{p.table}")


def _fetch(r: Any, names: TableName) -> Need:
    if r.replica_id >= 0:
        return INTERNAL  # a follower's fetch: only a server of this cluster may replicate
    return _tables(Operation.READ, (b.table_bucket.table_id for b in r.buckets), names)


def _metadata(r: Any, names: TableName) -> Need:
    if not r.tables:
        return PUBLIC  # every table: the answer is filtered to those the principal may DESCRIBE (FILTERED)
    return [(Operation.DESCRIBE, _path(p)) for p in r.tables]


def _heartbeat(r: Any, names: TableName) -> Need:
    """READ on the group, DESCRIBE on each subscribed table the coordinator leader knows. An id its view
    does not hold names no table (a dropped one, or a guess): nothing to DESCRIBE, and nothing of it is
    given away (a join to it is refused as TABLE_NOT_EXIST, later heartbeats get no bucket of it). A
    standby knows no table and answers NOT_COORDINATOR_LEADER, naming the leader the client then asks."""
    known = [t for t in r.subscribed_table_ids if names(t) is not None]
    return [(Operation.READ, Resource(ResourceType.GROUP, r.group)), *_tables(Operation.DESCRIBE, known, names)]


def _group(op: Operation) -> Callable[[Any, TableName], Need]:
    return lambda r, names: [(op, Resource(ResourceType.GROUP, r.group))]


RULES: dict[str, Callable[[Any, TableName], Need]] = {
    # tablet servers: data path
    _T + "ProduceLog": lambda r, names: _tables(Operation.WRITE, (b.table_bucket.table_id for b in r.buckets), names),
    _T + "FetchLog": _fetch,
    _T + "ListOffsets": lambda r, names: _tables(
        Operation.DESCRIBE, (b.table_bucket.table_id for b in r.buckets), names
    ),
    _T + "GetMetadata": _metadata,
    # primary-key tables: reads of committed rows need READ, as a fetch of the changelog does
    _T + "Lookup": _fetch,
    _T + "PrefixLookup": _fetch,
    _T + "ScanKv": lambda r, names: _tables(Operation.READ, (r.table_bucket.table_id,), names),
    # tablet servers: replication and coordinator control
    _T + "FetchLogStream": lambda r, names: INTERNAL,  # followers only; checked at open (no request yet)
    _T + "ProduceLogStream": lambda r, names: PUBLIC,  # any principal may open; each message: MESSAGE_RULES
    _T + "ConsumerFetchStream": lambda r, names: PUBLIC,  # any principal may open; each message: MESSAGE_RULES
    _T + "OffsetsForLeaderEpoch": lambda r, names: INTERNAL,
    _T + "NotifyLeaderAndIsr": lambda r, names: INTERNAL,
    _T + "StopReplica": lambda r, names: INTERNAL,
    _T + "UpdateMetadata": lambda r, names: INTERNAL,
    _T + "WatchLiveness": lambda r, names: INTERNAL,
    # coordinators
    _C + "GetCoordinatorInfo": lambda r, names: PUBLIC,
    _C + "GetMetadata": _metadata,
    _C + "CreateDatabase": lambda r, names: [(Operation.CREATE, Resource(ResourceType.DATABASE, r.name))],
    _C + "DropDatabase": lambda r, names: [(Operation.DROP, Resource(ResourceType.DATABASE, r.name))],
    _C + "ListDatabases": lambda r, names: [(Operation.DESCRIBE, CLUSTER)],
    _C + "CreateTable": lambda r, names: [(Operation.CREATE, _path(r.path))],
    _C + "DropTable": lambda r, names: [(Operation.DROP, _path(r.path))],
    _C + "AlterTable": lambda r, names: [(Operation.ALTER, _path(r.path))],
    _C + "ListTables": lambda r, names: [(Operation.DESCRIBE, Resource(ResourceType.DATABASE, r.database))],
    _C + "AdjustIsr": lambda r, names: INTERNAL,
    _C + "ControlledShutdown": lambda r, names: INTERNAL,
    _C + "ReportReplicaFaults": lambda r, names: INTERNAL,
    _C + "AllocateWriterId": lambda r, names: PUBLIC,  # an id grants nothing: each ProduceLog needs WRITE
    _C + "CommitOffsets": _group(Operation.READ),
    _C + "FetchOffsets": _group(Operation.DESCRIBE),
    _C + "ListGroups": lambda r, names: [(Operation.DESCRIBE, CLUSTER)],
    _C + "ConsumerHeartbeat": _heartbeat,  # the only coordinator RPC authorized by table id
    _C + "DescribeGroup": _group(Operation.DESCRIBE),
    _C + "DeleteGroup": _group(Operation.DROP),
    # server tags (docs/rebalance.md §12): a tag moves replicas and leaderships, as a rebalance does
    _C + "AlterServerTag": lambda r, names: [(Operation.ALTER, CLUSTER)],
    _C + "DescribeServerTags": lambda r, names: [(Operation.DESCRIBE, CLUSTER)],
}

# streams of requests whose every message is checked as the unary method named (docs/client.md "Produce on a
# stream"): the stream's own rule above is checked at open, then each message against this one
MESSAGE_RULES: dict[str, str] = {
    _T + "ProduceLogStream": _T + "ProduceLog",
    _T + "ConsumerFetchStream": _T + "FetchLog",
}

# methods whose answers are cut down to what the principal may DESCRIBE (tables in a MetadataResponse)
FILTERED = frozenset({_T + "GetMetadata", _C + "GetMetadata"})


def filter_metadata(response: Any, may_describe: Callable[[Resource], bool]) -> None:
    """Remove the tables of a MetadataResponse the principal may not DESCRIBE (in place)."""
    tables = response.metadata.tables
    keep = [t for t in tables if may_describe(_path(t.info.path))]
    if len(keep) != len(tables):
        del tables[:]
        tables.extend(keep)


# HTTP method routes (security/http_access.py): None is open to anyone past the TLS handshake (probes)
HTTP_RULES: dict[str, tuple[Operation, Resource] | None] = {
    "GET /health": None,  # per-table details only with DESCRIBE_CONFIGS on the cluster
    "GET /metrics": (Operation.DESCRIBE_CONFIGS, CLUSTER),  # metrics name tables: Kafka's DescribeConfigs
    "POST /rebalance": (Operation.ALTER, CLUSTER),
    "DELETE /rebalance": (Operation.ALTER, CLUSTER),
    "GET /rebalance": (Operation.DESCRIBE, CLUSTER),
    # dynamic configuration (docs/dynamic-config.md): cluster-wide settings, whatever the entity
    "POST /config": (Operation.ALTER, CLUSTER),
    "GET /config": (Operation.DESCRIBE, CLUSTER),
}


def required(method: str, request: Any, table_name: TableName) -> Need | None:
    """What ``method`` needs for ``request``; None for a method that is not mapped (refuse it)."""
    rule = RULES.get(method)
    return None if rule is None else rule(request, table_name)
