"""Altering a table on the coordinator leader: growing its bucket count (``fluss-py table alter T --buckets N``)
and adding a column to its schema (``fluss-py table alter T --add-column 'c STRING'``).

    AlterTable(path, N) ──▶ event loop ──▶ plan_growth (pure): replicas and first leaders of buckets old..N-1
                                       ──▶ one fenced transaction: table node (num_buckets N), assignment
                                           node (every bucket), buckets/<b> + leader_isr of each new bucket
                                       ──▶ view, then NotifyLeaderAndIsr of the new buckets + UpdateMetadata

Invariants (docs/operations.md "Adding buckets"):

- **grow only**: N must not be smaller than the current count (and at most ``MAX_BUCKETS``); the same
  count changes nothing and succeeds (so a retried alter whose first answer was lost succeeds); the
  existing buckets, their replicas, leaders and data are untouched: nothing written is moved or lost;
- **all or nothing**: the table node, the assignment and the new buckets' nodes change in ONE transaction
  fenced by the coordinator epoch (so one alter adds at most ``max_added(max_ops)`` buckets: 255 with the
  default 512 operations per transaction; run it again for more); a leader that dies before it commits
  changed nothing, one that dies after leaves a complete table (a new leader loads it and tells the servers);
- the logical table of a partitioned table has no buckets: only its count changes, which the partitions
  created afterwards get (the existing partitions keep theirs);
- a primary-key table never grows: a key's bucket is CRC-32C(bucket key) mod the bucket count, so a new
  count would move keys away from the bucket holding their rows (docs/primary-key-tables.md §3.2).

    AddColumn(path, c) ──▶ event loop ──▶ plan_add_column (pure): the schema with ``c`` as schema id + 1
                       ──▶ one fenced set of the table node (conditional on its version)
                       ──▶ view, then UpdateMetadata: the tablet servers and clients learn the new version

Adding a column (docs/primary-key-tables.md §2): only a nullable column with a new name, at the end, to a
table that has a schema; nothing is rewritten (a row names its schema id and decodes under a later version
with the new columns null). A column that already exists exactly so changes nothing and succeeds (a retried
alter whose first answer was lost); anything else is refused with nothing written.

Who may call: the CoordinatorEventLoop task (``install`` registers ``alter`` and ``add_column``); unit tests with
fakes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Set
from dataclasses import dataclass
from typing import Any

from fluss_py.common.schema_rules import check_schema_size
from fluss_py.config import MAX_BUCKETS
from fluss_py.coordinator import election
from fluss_py.coordinator.assignment import assign_replicas
from fluss_py.coordinator.events import AddColumn, AlterTableBuckets
from fluss_py.coordinator.tables import TableRegistration
from fluss_py.errors import (
    CoordinatorNotAvailableError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    TableNotExistError,
)
from fluss_py.partitioning import routing_unit
from fluss_py.schema.schema import Column
from fluss_py.types import LeaderAndIsr, TablePath
from fluss_py.zk.paths import LeaderIsrZNode, TableAssignmentZNode, TableZNode
from fluss_py.zk.values import CreateOp, Op, SetOp

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Growth:
    """What growing a table writes: its new registration, and the new buckets' replicas and first leaders."""

    info: TableRegistration
    replicas: dict[int, tuple[int, ...]]
    leaders: dict[int, LeaderAndIsr]


def max_added(max_ops: int) -> int:
    """Buckets one alter may add: the table and assignment nodes plus two nodes per bucket in one transaction."""
    return (max_ops - 2) // 2


def plan_growth(
    info: TableRegistration,
    num_buckets: int,
    servers: Mapping[int, str],
    live: Set[int],
    coordinator_epoch: int,
    max_ops: int = 512,
) -> Growth:
    """The growth of ``info`` to ``num_buckets`` (pure). ``servers``: the tablet servers new replicas may go
    to (id -> rack). The same count plans nothing. Raises INVALID_REQUEST (smaller, beyond MAX_BUCKETS, more
    than one transaction holds) or INVALID_REPLICATION_FACTOR (fewer servers than replicas), writing nothing."""
    old = info.num_buckets
    if info.schema is not None and info.schema.is_primary_key_table and num_buckets != old:
        raise InvalidRequestError(
            f"{info.path} is a primary-key table: a key's bucket is its bucket key's hash mod the bucket count, so "
            f"its {old} buckets cannot grow (the keys would move away from their rows)"
        )
    if not old <= num_buckets <= MAX_BUCKETS:
        raise InvalidRequestError(
            f"{info.path} has {old} buckets: the new count must not be smaller (buckets are never removed) and "
            f"at most {MAX_BUCKETS}, got {num_buckets}"
        )
    partitioned = routing_unit(info.path.table, info.properties) is not None
    if not partitioned and num_buckets - old > max_added(max_ops):
        raise InvalidRequestError(
            f"one alter adds at most {max_added(max_ops)} buckets (one ZooKeeper transaction): grow {info.path} "
            f"to {old + max_added(max_ops)} first"
        )
    grown = dataclasses.replace(info, num_buckets=num_buckets)
    if partitioned:
        return Growth(grown, {}, {})  # the logical table of a partitioned table: its partitions have buckets
    # the layout a create of this many buckets would have; the existing buckets keep theirs
    layout = assign_replicas(
        servers, num_buckets, info.replication_factor, start_index=info.table_id,
        first_shift=info.table_id // max(1, len(servers)),
    )  # fmt: skip
    replicas = {b: layout[b] for b in range(old, num_buckets)}
    leaders = {}
    for b, r in replicas.items():
        lai = election.initial_leader(r, live, coordinator_epoch)
        if lai is None:
            raise InvalidReplicationFactorError(f"no live tablet server among the replicas {list(r)} of bucket {b}")
        leaders[b] = lai
    return Growth(grown, replicas, leaders)


def growth_ops(
    root: str,
    growth: Growth,
    assignment: Mapping[int, tuple[int, ...]],
    table_version: int,
    assignment_version: int | None,
) -> list[Op]:
    """The transaction of ``growth`` (pure): the table node and the assignment (conditional on the versions
    read; ``assignment_version`` None for a table without an assignment node's buckets to add), then each
    new bucket's nodes."""
    info = growth.info
    ops: list[Op] = [
        SetOp(TableZNode.path(root, info.path.database, info.path.table), TableZNode.encode(info.registration()),
              table_version),
    ]  # fmt: skip
    if not growth.replicas:
        return ops
    assert assignment_version is not None
    base = TableAssignmentZNode.path(root, info.table_id)
    ops.append(SetOp(base, TableAssignmentZNode.encode({**assignment, **growth.replicas}), assignment_version))
    for b in sorted(growth.replicas):
        leader_isr = LeaderIsrZNode.path(root, info.table_id, b)
        ops.append(CreateOp(leader_isr.rsplit("/", 1)[0]))
        ops.append(CreateOp(leader_isr, LeaderIsrZNode.encode(growth.leaders[b])))
    return ops


def plan_add_column(info: TableRegistration, column: Column) -> TableRegistration:
    """``info`` with ``column`` added at the end of its schema (pure); ``info`` itself when the current schema
    already has exactly this column. Raises INVALID_REQUEST (no schema, not nullable, a name taken, too many
    columns, too large for the znode), nothing written."""
    if info.schema is None:
        raise InvalidRequestError(f"{info.path} has no schema: columns are added only to a table created with one")
    if column in info.schema.current.columns:
        return info
    schema = info.schema.add_column(column)
    check_schema_size(schema)
    return dataclasses.replace(info, schema=schema)


class TableAlter:
    """Handles AlterTableBuckets and AddColumn on the event loop. Owns nothing: ``processor`` (the TableProcessor)
    owns the view, the store and the requests to the tablet servers."""

    def __init__(self, processor: Any) -> None:
        self._p = processor

    def install(self, loop: Any) -> None:
        loop.register(AlterTableBuckets, self.alter)
        loop.register(AddColumn, self.add_column)

    def _table(self, path: TablePath) -> TableRegistration:
        p = self._p
        if not p.started:  # the view is loaded and the live servers known only then
            raise CoordinatorNotAvailableError("the coordinator leader is starting; retry")
        table_id = p.view.by_path.get(path)
        if table_id is None:
            raise TableNotExistError(f"table {path} does not exist")
        return p.view.tables[table_id]

    async def _table_node(self, info: TableRegistration) -> tuple[str, int]:
        """The table node's path and version, read now (the transaction is conditional on it)."""
        path = TableZNode.path(self._p.store.root, info.path.database, info.path.table)
        node = await self._p.store.get(path)
        if node is None:
            raise TableNotExistError(f"table {info.path} has no table node")
        return path, node[1].version

    async def add_column(self, event: AddColumn) -> None:
        p, info = self._p, self._table(event.path)
        new = plan_add_column(info, event.column)
        if new is info:
            return  # already there: a retry whose first answer was lost
        path, version = await self._table_node(info)
        await p.store.commit([SetOp(path, TableZNode.encode(new.registration()), version)])
        p.announce_buckets(new, {}, {})  # the new schema in the view; UpdateMetadata to every server
        assert new.schema is not None
        log.info("Table %s (id %d): added column %s, schema id %d (coordinator epoch %d)", event.path, info.table_id,
                 event.column, new.schema.current.schema_id, p.epoch)  # fmt: skip

    async def alter(self, event: AlterTableBuckets) -> None:
        p, info = self._p, self._table(event.path)
        table_id = info.table_id
        servers = p.view.placeable(p.context.tablet_servers)  # not shutting down, not tagged
        growth = plan_growth(info, event.num_buckets, servers, p.live(), p.epoch, p.store.max_ops)
        if growth.info == info:
            return  # already this count: a retry whose first answer was lost
        root = p.store.root
        _, table_version = await self._table_node(info)
        assignment = {tb.bucket: b.replicas for tb, b in p.view.table_buckets(table_id)}
        version = None
        if growth.replicas:
            got = await p.store.get(TableAssignmentZNode.path(root, table_id))
            if got is None:
                raise TableNotExistError(f"table {event.path} has no assignment node")
            version = got[1].version
        await p.store.commit(growth_ops(root, growth, assignment, table_version, version))
        p.announce_buckets(growth.info, growth.replicas, growth.leaders)  # the new count, the new buckets
        log.info("Table %s (id %d) grew from %d to %d bucket(s); new buckets %s (coordinator epoch %d)", event.path,
                 table_id, info.num_buckets, event.num_buckets, {b: list(r) for b, r in growth.replicas.items()},
                 p.epoch)  # fmt: skip
