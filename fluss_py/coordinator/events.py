"""Every event of the coordinator leader's single-writer loop: the coordinator's vocabulary, in one place.

RPC handlers and ZooKeeper watches never touch ``CoordinatorContext``: they build one of these and put it
on the ``CoordinatorEventLoop``. Events that need an answer carry a ``Future`` (set on the loop's task);
fire-and-forget events (watch notifications, periodic ticks) carry none.

A new event goes here, in the section of the room whose handler applies it; that room registers the
handler in its ``handlers`` dict (``{event type: coroutine}``), which ``TableProcessor`` merges into the one
table the loop dispatches on (docs/control-plane.md, "Where an event and its handler go").

Who may call: anyone on the process's asyncio loop may create events; only the event loop completes them.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from fluss_py.coordinator.group_members import JOIN_EPOCH
from fluss_py.rpc.pb import coordinator_pb2
from fluss_py.schema.schema import Column, TableSchema
from fluss_py.types import TableBucket, TablePath


@dataclass(eq=False)
class Event:
    """Base: ``future`` is None for notifications, else completed with the handler's result or error."""

    future: asyncio.Future | None = field(default=None, kw_only=True, repr=False)


# ---- databases and tablet-server membership: handlers.MetadataHandlers


@dataclass(eq=False)
class CreateDatabase(Event):
    name: str
    ignore_if_exists: bool = False


@dataclass(eq=False)
class DropDatabase(Event):
    name: str
    ignore_if_not_exists: bool = False
    cascade: bool = False


@dataclass(eq=False)
class ListDatabases(Event):
    pass


@dataclass(eq=False)
class TabletServersChanged(Event):
    """The children of ``tabletservers/ids`` changed (None: the parent node is absent)."""

    children: list[str] | None


@dataclass(eq=False)
class LoadContext(Event):
    """First event of every leadership: read databases from ZooKeeper into the context."""


@dataclass(eq=False)
class TabletServerDeathProven(Event):
    """The liveness monitor proved this registration's process dead (docs/failure-detection.md).

    Applied only while ``registration`` is still the server's current one: idempotent with the session
    expiry that follows and with a re-registration (a restart) that overtook it.
    """

    server_id: int
    registration: Any
    reason: str = ""


@dataclass(eq=False)
class TabletServerAliveAgain(Event):
    """A registration proven dead answered the liveness stream again: the proof was wrong (a forged refusal).

    Applied only while that registration is still the one in ZooKeeper and still counted as proven dead.
    """

    server_id: int
    registration: Any


# ---- tables, leadership and ISR: processor.TableProcessor


@dataclass(eq=False)
class LoadTables(Event):
    """Rebuild the ClusterView from ZooKeeper (queued right after LoadContext on every leadership)."""


@dataclass(eq=False)
class CreateTable(Event):
    path: TablePath
    num_buckets: int = 0  # 0: default.bucket.number
    replication_factor: int = 0  # 0: default.replication.factor
    properties: dict[str, str] = field(default_factory=dict)
    comment: str = ""
    ignore_if_exists: bool = False
    schema: TableSchema | None = None  # None: a log table without a schema


@dataclass(eq=False)
class DropTable(Event):
    path: TablePath
    ignore_if_not_exists: bool = False


@dataclass(eq=False)
class AlterTableBuckets(Event):
    """Grow a table to ``num_buckets`` buckets (handler: table_alter.TableAlter)."""

    path: TablePath
    num_buckets: int


@dataclass(eq=False)
class AddColumn(Event):
    """Add a nullable column at the end of a table's schema (handler: table_alter.TableAlter)."""

    path: TablePath
    column: Column


@dataclass(eq=False)
class ListTables(Event):
    database: str


@dataclass(eq=False)
class GetMetadata(Event):
    """ClusterMetadata for clients: live servers, this leader, and the given tables (empty: all)."""

    paths: list[TablePath] = field(default_factory=list)


@dataclass(eq=False)
class AdjustIsr(Event):
    request: coordinator_pb2.AdjustIsrRequest


@dataclass(eq=False)
class ControlledShutdown(Event):
    server_id: int


@dataclass(eq=False)
class AllocateWriterId(Event):
    pass


@dataclass(eq=False)
class DeadLeaveIsrs(Event):
    """The second round of a death (queued by its first, membership.py): the dead servers leave the ISRs of the
    buckets they followed."""

    servers: list[int]


@dataclass(eq=False)
class ReplicasFailed(Event):
    """A tablet server answered NotifyLeaderAndIsr with a storage failure for these buckets."""

    server_id: int
    buckets: list[TableBucket]


@dataclass(eq=False)
class ReplicasCorrupt(Event):
    """A tablet server found corrupt segments in these replicas (it repairs them as a follower)."""

    server_id: int
    buckets: list[TableBucket]


@dataclass(eq=False)
class ReplicasRecovered(Event):
    """A tablet server's data directory is back: these replicas may serve again (as followers first)."""

    server_id: int
    buckets: list[TableBucket]


# ---- consumer-group offsets: groups.GroupOffsets


@dataclass(eq=False)
class CommitOffsets(Event):
    group: str
    offsets: dict[TableBucket, int] = field(default_factory=dict)
    member_id: str = ""  # "": offset-only use (refused while the group has live members)
    member_epoch: int = 0


@dataclass(eq=False)
class FetchOffsets(Event):
    group: str
    table_id: int = 0  # 0: every table


@dataclass(eq=False)
class ListGroups(Event):
    pass


# ---- consumer-group membership: group_coordinator.GroupCoordinator


@dataclass(eq=False)
class ConsumerHeartbeat(Event):
    group: str
    member_id: str = ""
    member_epoch: int = JOIN_EPOCH
    instance_id: str = ""
    session_timeout_ms: int = 0
    subscribed: frozenset[int] = frozenset()
    owned: frozenset[TableBucket] = frozenset()
    client_host: str = ""


@dataclass(eq=False)
class DescribeGroup(Event):
    group: str


@dataclass(eq=False)
class DeleteGroup(Event):
    group: str


@dataclass(eq=False)
class GroupSummaries(Event):
    groups: list[str] = field(default_factory=list)


# ---- rebalance: rebalance.executor.RebalanceExecutor


@dataclass(eq=False)
class StartRebalance(Event):
    """Plan (and unless ``dry_run``, start) a rebalance. Answers the plan/progress view (a dict)."""

    dry_run: bool = False
    reason: str = "operator request"


@dataclass(eq=False)
class CancelRebalance(Event):
    """Roll back the current batch's open moves; status CANCELED. Answers the progress view."""


@dataclass(eq=False)
class GetRebalance(Event):
    """The progress view of the current (or last) rebalance."""


@dataclass(eq=False)
class RebalanceTick(Event):
    """Periodic: move timeouts, health re-checks between batches, automatic triggers."""


# ---- dynamic configuration: dynamic_config.DynamicConfigManager


@dataclass(eq=False)
class AlterConfig(Event):
    entity_type: str
    name: str = ""
    set: dict[str, str] = field(default_factory=dict)
    delete: list[str] = field(default_factory=list)


@dataclass(eq=False)
class DescribeConfig(Event):
    entity_type: str
    name: str = ""


@dataclass(eq=False)
class LoadClusterConfig(Event):
    """First thing of a leadership (after the context): read and apply the cluster entity."""


# ---- periodic checks: leader_balance.LeaderBalancer, partition_manager.AutoPartitionManager


@dataclass(eq=False)
class PreferredLeaderCheck(Event):
    """Periodic (every ``leader.imbalance.check-interval``): move leaderships back to preferred replicas."""


@dataclass(eq=False)
class AutoPartitionCheck(Event):
    """Periodic: bring every auto-partitioned table's partitions in line with the clock."""


# ---- server tags: tag_room.ServerTagRoom (docs/rebalance.md §12)


@dataclass(eq=False)
class SetServerTag(Event):
    """Set a tablet server's tag (``permanent-offline``, ``temporary-offline``; ``none`` removes it). Answers the
    server's tag view (a dict); refused (TABLET_SERVER_NOT_EXIST, INVALID_SERVER_TAG) with nothing written."""

    server_id: int
    tag: str


@dataclass(eq=False)
class DescribeServerTags(Event):
    """Every known server (registered, holding replicas or tagged) with its tag, and the last replacement."""


@dataclass(eq=False)
class ServerTagCheck(Event):
    """Periodic (every second): tag servers dead for ``tablet-server.replace-dead-after``, move leaderships off
    tagged servers, start the replacement of permanent-offline servers' replicas."""
