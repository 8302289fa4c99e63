"""The coordinator leader's table, leadership and ISR handlers: one ``{event type: handler}`` dict.

Each handler runs on the CoordinatorEventLoop task (the single writer of ``ClusterView``) and follows one
pattern: decide with the pure functions of ``election.py``/``assignment.py``, write ZooKeeper in fenced
transactions (``[check(epoch node, version), ...]``; each leader_isr set also checks that node's own
version), update the in-memory view only after the write succeeded, then queue the requests the change
implies on the ``TabletChannel`` (never awaited: a paused tablet server cannot stall the loop).

    LoadTables          reload every table, assignment and leader_isr from ZooKeeper (each leadership)
    CreateTable         validate (properties, schema) -> assign -> one transaction (id counter, assignment,
                        leader_isr per bucket, table node with its schema last) -> UpdateMetadata to all,
                        NotifyLeaderAndIsr to the replicas
    DropTable           delete the table node, then its assignment subtree -> StopReplica(delete)
    ListTables / GetMetadata / AllocateWriterId
    AdjustIsr           validate (leader epoch, bucket epoch, eligibility) -> conditional write -> answer
    ControlledShutdown  move leadership off the server, take it out of ISRs -> remaining leaders
    ReplicasFailed / ReplicasCorrupt / ReplicasRecovered   a server's ReportReplicaFaults (or a storage
                        error answering NotifyLeaderAndIsr): failed replicas count as dead for their bucket,
                        corrupt ones leave the ISR and leadership, recovered ones are told their role again
    membership          ``on_servers_changed(joined, died)``, called by MetadataHandlers on the loop:
                        dead: new leaders from live ISRs, dead replicas leave ISRs; joined: elect
                        leaderless/new buckets, tell the server its role

Design and invariants: ``docs/control-plane.md``. Who may call: the event loop (handlers) only.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, Protocol

from fluss_py import config as cfg
from fluss_py.common.schema_rules import check_new_table, keep_changelog
from fluss_py.coordinator import election
from fluss_py.coordinator.assignment import assign_replicas
from fluss_py.coordinator.channel import MetadataDelta, MetadataViews, RequestBatch, TabletChannel, update_request
from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.events import (
    AdjustIsr,
    AllocateWriterId,
    ControlledShutdown,
    CreateTable,
    DeadLeaveIsrs,
    DropDatabase,
    DropTable,
    Event,
    GetMetadata,
    ListTables,
    LoadTables,
    ReplicasCorrupt,
    ReplicasFailed,
    ReplicasRecovered,
)
from fluss_py.coordinator.group_coordinator import GroupLimits, bucket_layout
from fluss_py.coordinator.groups import GroupOffsets
from fluss_py.coordinator.handlers import MetadataStore
from fluss_py.coordinator.membership import MembershipHandlers
from fluss_py.coordinator.replica_events import ReplicaEventHandlers
from fluss_py.coordinator.state import BucketState, ReplicaState
from fluss_py.coordinator.tables import ClusterView, TableRegistration, validate_properties
from fluss_py.coordinator.view_store import (
    MAX_OPS_PER_TRANSACTION,
    ViewStore,
    assignment_subtree,
    create_table_ops,
    delete_ops,
)
from fluss_py.coordinator.writer_ids import WriterIdAllocator
from fluss_py.errors import (
    DatabaseNotExistError,
    InvalidRequestError,
    TableAlreadyExistError,
    TableNotExistError,
)
from fluss_py.partitioning import check_partition, spec_of
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.types import LeaderAndIsr, ServerNode, TableBucket, TablePath, split_partition
from fluss_py.zk.paths import TableIdCounterZNode, TableZNode
from fluss_py.zk.values import BadVersionError, CreateOp, NodeExistsError, NoNodeError, Op, SetOp

# not __name__: the runbook shows its lines by this name, docs/coordinator-ha.md (the membership lines)
log = logging.getLogger("fluss_py.coordinator.CoordinatorEventProcessor")

MAX_BUCKETS = cfg.MAX_BUCKETS


Handler = Callable[[Any], Awaitable[Any]]


class ProcessorListener(Protocol):
    """Told about changes after they were written (on the loop task); e.g. the rebalance executor."""

    async def on_started(self) -> None: ...  # first reconciliation of a leadership done

    async def on_isr_changed(self, buckets: list[TableBucket]) -> None: ...  # accepted AdjustIsr

    async def on_servers_changed(self, joined: set[int], died: list[int]) -> None: ...


def options_from_config(config: Any) -> dict[str, Any]:
    """TableProcessor keyword arguments from a coordinator Config."""
    return {
        "default_buckets": int(config[cfg.DEFAULT_BUCKET_NUMBER]),
        "default_replication_factor": int(config[cfg.DEFAULT_REPLICATION_FACTOR]),
        "group_limits": GroupLimits.from_config(config),
        "unclean_election": bool(config[cfg.UNCLEAN_LEADER_ELECTION]),
    }


class TableProcessor(MembershipHandlers, ReplicaEventHandlers):
    """Tables, bucket leadership and ISRs for one leadership. Owns the ClusterView; runs on the loop task."""

    def __init__(
        self,
        store: MetadataStore,
        context: CoordinatorContext,
        channel: TabletChannel,
        *,
        default_buckets: int = 1,
        default_replication_factor: int = 3,
        unclean_election: bool = False,
        writer_id_block: int = 1000,
        max_ops: int = MAX_OPS_PER_TRANSACTION,
        group_limits: GroupLimits | None = None,
    ) -> None:
        self._store = store
        self._root = store.root
        self.context = context
        self.channel = channel
        self.view = ClusterView()
        self._default_buckets = default_buckets
        self._default_rf = default_replication_factor
        self._unclean = unclean_election
        self.store = ViewStore(store, self.view, context.fence, max_ops)
        self._writer_ids = WriterIdAllocator(store, context.fence, writer_id_block)
        self._loaded = False
        self._membership_seen = False
        self._started = False
        self._not_live: set[int] = set()  # restarted servers count as dead while their death is handled
        self._followups: Any = None  # the event loop (install): a death queues its second round there
        self._isr_leavers: set[int] = set()  # dead servers whose second round has not run yet (membership.py)
        self._isr_leave_todo: list[TableBucket] | None = None  # that round's buckets not yet done (in chunks)
        self._isr_leave_changes = 0  # and its changes so far
        self.metadata_version = 0  # of the last UpdateMetadata queued in this leadership (docs/control-plane.md §8)
        if channel is not None:  # None: unit tests of handlers that send nothing
            channel.full_view = self.full_view_request
        self.listeners: list[ProcessorListener] = []
        self.handlers: dict[type[Event], Handler] = {
            LoadTables: self.load_tables,
            CreateTable: self.create_table,
            DropTable: self.drop_table,
            ListTables: self.list_tables,
            GetMetadata: self.get_metadata,
            AdjustIsr: self.adjust_isr,
            ReplicasCorrupt: self.replicas_corrupt,
            ReplicasRecovered: self.replicas_recovered,
            ControlledShutdown: self.controlled_shutdown,
            AllocateWriterId: self.allocate_writer_id,
            ReplicasFailed: self.replicas_failed,
            DeadLeaveIsrs: self.dead_leave_isrs,
        }
        # Consumer-group offsets (coordinator/groups.py): fenced ZooKeeper writes, validated against the view.
        self.groups = GroupOffsets(store, lambda: context.fence, self._num_buckets, group_limits, self._bucket_layout)
        self.handlers.update(self.groups.handlers)

    def install(self, loop: Any, drop_database: Handler | None = None) -> None:
        """Register every handler on a CoordinatorEventLoop (before it starts).

        With ``drop_database`` (MetadataHandlers' handler), DropDatabase is wrapped so that a cascade
        first drops each table here (assignments, leader_isr, replicas), then deletes the database.
        """
        for event_type, handler in self.handlers.items():
            loop.register(event_type, handler)
        self._followups = loop
        self.channel.on_response = lambda server, kind, request, response: self._check_notify(
            loop, server, kind, response
        )
        if drop_database is not None:

            async def drop_database_cascading(event: DropDatabase) -> Any:
                if event.cascade and event.name in self.context.databases:
                    for path in sorted(p for p in self.view.by_path if p.database == event.name):
                        await self.drop_table(DropTable(path, ignore_if_not_exists=True))
                return await drop_database(event)

            loop.register(DropDatabase, drop_database_cascading)

    # ---------------------------------------------------------------- helpers
    @property
    def epoch(self) -> int:
        return self.context.epoch

    @property
    def started(self) -> bool:
        """The leadership's first reconciliation ran: the live servers are known, replicas can be placed."""
        return self._started

    def live(self) -> set[int]:
        return set(self.context.tablet_servers) - self._not_live

    def nodes(self) -> dict[int, ServerNode]:
        servers = self.context.tablet_servers
        return {s: ServerNode(s, r.host, r.port, r.rack) for s, r in servers.items() if s not in self._not_live}

    def replica_tokens(self) -> dict[int, str]:
        """The replica token of every live server (from its registration; docs/peer-trust.md)."""
        servers = self.context.tablet_servers
        return {s: r.replica_token for s, r in servers.items() if s not in self._not_live and r.replica_token}

    def _batch(self) -> RequestBatch:
        return RequestBatch(self.context.coordinator_id, self.epoch)

    def cluster_metadata(self, table_ids: Iterable[int] | None = None) -> common_pb2.ClusterMetadata:
        ids = sorted(self.view.tables) if table_ids is None else list(table_ids)
        return common_pb2.ClusterMetadata(
            tablet_servers=[convert.server_node_to_pb(n) for _, n in sorted(self.nodes().items())],
            coordinator=common_pb2.ServerNode(
                id=self.context.coordinator_id, host=self.context.host, port=self.context.port
            ),
            tables=[self.view.table_metadata_pb(t) for t in ids],
            coordinator_epoch=self.epoch,
        )

    def metadata_delta_pb(self, delta: MetadataDelta) -> common_pb2.ClusterMetadata:
        """The changed part of the view: live servers and this leader whole, and per table named by ``delta``
        (whole, or only its changed buckets) its info; tables gone since are left out."""
        full = self.cluster_metadata(())
        by_table: dict[int, list[TableBucket]] = {}
        for tb in delta.buckets:
            if tb.table_id not in delta.tables and tb in self.view.buckets:
                by_table.setdefault(tb.table_id, []).append(tb)
        for table_id in sorted(delta.tables | by_table.keys()):
            if table_id not in self.view.tables:
                continue
            if table_id in delta.tables:
                full.tables.append(self.view.table_metadata_pb(table_id))
            else:
                info = self.view.table_info_pb(table_id)
                buckets = [self.view.bucket_pb(tb) for tb in sorted(by_table[table_id])]
                full.tables.append(common_pb2.TableMetadata(info=info, buckets=buckets))
        return full

    def full_view_request(self) -> Any:
        """The current full view as an UpdateMetadata numbered like the last one queued (it covers it): for a
        server that answered a delta with needs_full_view (``TabletChannel.full_view``)."""
        tokens = [tablet_pb2.ReplicaToken(server_id=s, token=t) for s, t in sorted(self.replica_tokens().items())]
        return update_request(self.epoch, self.context.coordinator_id, self.metadata_version, self.cluster_metadata(),
                              tokens)  # fmt: skip

    def _send(self, batch: RequestBatch) -> None:
        if batch.empty():
            return
        views = None
        if batch.has_metadata():
            self.metadata_version += 1
            delta = batch.delta
            views = MetadataViews(
                self.metadata_version,
                self.cluster_metadata,
                self.metadata_delta_pb(delta),
                tuple(sorted(delta.removed)),
            )
        batch.send(self.channel, views, self.nodes(), self.replica_tokens())

    def _notify(
        self, batch: RequestBatch, tb: TableBucket, servers: Iterable[int] | None = None, live: set[int] | None = None
    ) -> None:
        """NotifyLeaderAndIsr of ``tb``'s current state to its live replicas (or to ``servers``); ``live``: the
        caller's ``live()`` (a handler telling thousands of buckets computes it once)."""
        bucket = self.view.buckets[tb]
        lai = bucket.leader_and_isr
        if lai is None:
            return
        if live is None:
            live = self.live()
        targets = bucket.replicas if servers is None else servers
        pb = self.view.bucket_pb(tb)
        table = self.view.table_info_pb(tb.table_id)
        named = (*bucket.replicas, *lai.isr, lai.leader)
        for server in targets:
            if server in live:
                batch.leader_and_isr(server, pb, table, tb, named)

    # public names for collaborators on the loop (the rebalance executor)
    def new_batch(self) -> RequestBatch:
        return self._batch()

    def notify(self, batch: RequestBatch, tb: TableBucket, servers: Iterable[int] | None = None) -> None:
        self._notify(batch, tb, servers)

    def send(self, batch: RequestBatch) -> None:
        self._send(batch)

    def announce_buckets(
        self, info: TableRegistration, replicas: Mapping[int, tuple[int, ...]], leaders: Mapping[int, LeaderAndIsr]
    ) -> None:
        """After the transaction that created them: put ``info`` and its new buckets (their replicas and first
        leaders, leader_isr nodes at version 0) in the view, tell their replicas and every server."""
        self.view.add_table(info, replicas)
        batch = self._batch()
        for b, lai in sorted(leaders.items()):
            tb = TableBucket(info.table_id, b)
            self.view.set_leader_and_isr(tb, lai)
            self.view.buckets[tb].zk_version = 0
            self._set_states(tb)
            self._notify(batch, tb)
        batch.metadata_delta(self.live(), tables=[info.table_id])
        self._send(batch)

    def refresh_states(self, tb: TableBucket) -> None:
        self._set_states(tb)

    def _set_states(self, tb: TableBucket, live: set[int] | None = None) -> None:
        """Derive the bucket and replica states of ``tb`` from its LeaderAndIsr and the live servers (``live``:
        the caller's ``live()``, computed once for many buckets)."""
        bucket = self.view.buckets[tb]
        if live is None:
            live = self.live()
        lai = bucket.leader_and_isr
        target = BucketState.NEW
        if lai is not None:
            target = BucketState.ONLINE if lai.leader in live else BucketState.OFFLINE
        current = self.view.bucket_states.get(tb)
        if current is BucketState.NON_EXISTENT and target is not BucketState.NEW:
            self.view.bucket_states.move(tb, BucketState.NEW)
        if current is not target:
            self.view.bucket_states.move(tb, target)
        states = self.view.replica_states
        for server in bucket.replicas:
            key = (tb, server)
            current = states.get(key)
            if current is ReplicaState.NON_EXISTENT:
                states.move(key, ReplicaState.NEW)
            offline = server not in live or server in self.view.shutting_down
            target = ReplicaState.OFFLINE if offline else ReplicaState.ONLINE
            if current is not target:  # (Online and Offline are their own legal predecessors: no move to check)
                states.move(key, target)

    # ---------------------------------------------------------------- load (every leadership)
    async def load_tables(self, _event: LoadTables | None = None) -> int:
        """Rebuild the view from ZooKeeper; start up at once if the live servers are known. Returns tables."""
        self._loaded = self._started = False
        await self.store.load()
        self._loaded = True
        log.info("Loaded %d table(s), %d bucket(s) from ZooKeeper (coordinator epoch %d)", len(self.view.tables),
                 len(self.view.buckets), self.epoch)  # fmt: skip
        if self._membership_seen:
            await self._startup()
        return len(self.view.tables)

    async def _ensure_loaded(self) -> None:
        """Load the view now if LoadTables has not succeeded yet in this leadership (e.g. a lost read)."""
        if not self._loaded:
            log.warning("Table state not loaded yet in this leadership; loading it now")
            await self.load_tables()

    # ---------------------------------------------------------------- tables
    async def create_table(self, event: CreateTable) -> int:
        """Create a table; returns its id (the existing one with ``ignore_if_exists``)."""
        await self._ensure_loaded()
        path = event.path
        path.validate()
        if path.database not in self.context.databases:
            raise DatabaseNotExistError(f"database {path.database} does not exist")
        logical_name, partition = split_partition(path.table)
        if partition is not None:  # one partition of a partitioned table (docs/partitioning.md)
            logical_id = self.view.by_path.get(TablePath(path.database, logical_name))
            logical = self.view.tables[logical_id].properties if logical_id is not None else None
            check_partition(logical, partition)
        if path in self.view.by_path:
            if event.ignore_if_exists:
                return self.view.by_path[path]
            raise TableAlreadyExistError(f"table {path} already exists")
        num_buckets = event.num_buckets or self._default_buckets
        rf = event.replication_factor or self._default_rf
        if not 1 <= num_buckets <= MAX_BUCKETS:
            raise InvalidRequestError(f"bucket count must be between 1 and {MAX_BUCKETS}, got {num_buckets}")
        if len(event.comment.encode()) > cfg.MAX_TABLE_COMMENT_BYTES:
            raise InvalidRequestError(f"table comment is longer than {cfg.MAX_TABLE_COMMENT_BYTES} bytes")
        properties = validate_properties(event.properties, rf)
        check_new_table(event.schema, properties)
        properties = keep_changelog(event.schema, properties)
        servers = self.view.placeable(self.context.tablet_servers)  # not shutting down, not tagged
        counter = TableIdCounterZNode.path(self._root)
        got = await self.store.get(counter)
        table_id = (TableIdCounterZNode.decode(got[0]) if got else 0) + 1
        # raises InvalidReplicationFactorError before anything is written
        assignment = assign_replicas(
            servers, num_buckets, rf, start_index=table_id, first_shift=table_id // max(1, len(servers))
        )
        if partition is None and spec_of(properties) is not None:
            # The logical table of a partitioned table has no buckets of its own (its data lives in its
            # partitions, each created with num_buckets): the assignment above only checked that the
            # partitions can be placed. Writes and reads name a partition (docs/partitioning.md).
            assignment = {}
        leaders: dict[int, LeaderAndIsr] = {}
        for b, replicas in assignment.items():
            lai = election.initial_leader(replicas, set(servers), self.epoch)
            assert lai is not None  # every replica was chosen among live servers
            leaders[b] = lai
        info = TableRegistration(table_id, path, num_buckets, rf, properties, event.comment, int(time.time() * 1000),
                                 event.schema)  # fmt: skip
        counter_op: Op = (
            SetOp(counter, TableIdCounterZNode.encode(table_id), got[1].version)
            if got
            else CreateOp(counter, TableIdCounterZNode.encode(table_id))
        )
        ops, table_node = create_table_ops(self._root, info, assignment, leaders)
        tables_parent = TableZNode.parent(self._root, path.database)
        if not await self.store.exists(tables_parent):
            ops.append(CreateOp(tables_parent))
        try:
            await self.store.commit([counter_op, *ops, table_node])
        except NodeExistsError as e:
            raise TableAlreadyExistError(f"table {path} already exists in ZooKeeper ({e})") from None
        self.announce_buckets(info, assignment, leaders)
        log.info(
            "Created table %s (id %d): %d bucket(s), replication factor %d, assignment %s (coordinator epoch %d)",
            path,
            table_id,
            num_buckets,
            rf,
            {b: list(r) for b, r in assignment.items()},
            self.epoch,
        )
        return table_id

    async def drop_table(self, event: DropTable) -> bool:
        """Drop a table: its node first (the table is gone), then its assignment subtree; replicas deleted.
        A partitioned table's partitions are dropped before it."""
        await self._ensure_loaded()
        table_id = self.view.by_path.get(event.path)
        if table_id is None:
            if event.ignore_if_not_exists:
                return False
            raise TableNotExistError(f"table {event.path} does not exist")
        info = self.view.tables[table_id]
        if split_partition(info.path.table)[1] is None and spec_of(info.properties) is not None:
            # a partitioned table's partitions first (docs/partitioning.md): interrupted, the drop is redone
            for part in [p for p in self.view.by_path if p.database == info.path.database]:
                if split_partition(part.table)[0] == info.path.table and part != info.path:
                    await self.drop_table(DropTable(part, ignore_if_not_exists=True))
        node = TableZNode.path(self._root, info.path.database, info.path.table)
        node_paths = [f"{node}/{c}" for c in await self.store.children(node)]  # e.g. schemas
        buckets = list(self.view.table_buckets(table_id))
        with_lai = {tb.bucket for tb, b in buckets if b.zk_version >= 0}
        subtree = assignment_subtree(self._root, table_id, [tb.bucket for tb, _ in buckets], with_lai)
        await self.store.commit(delete_ops([*node_paths, node]))
        try:
            await self.store.commit(delete_ops(subtree))
        except (NoNodeError, BadVersionError) as e:
            log.warning(
                "Dropping the assignment of %s (id %d) failed: %s; the next load deletes it", event.path, table_id, e
            )
        batch = self._batch()
        live = self.live()
        for tb, bucket in buckets:
            epoch = bucket.leader_and_isr.leader_epoch if bucket.leader_and_isr else 0
            for server in bucket.replicas:
                if server in live:
                    batch.stop_replica(server, tb, epoch, delete=True)
        self.view.remove_table(table_id)
        batch.metadata_delta(live, removed=[table_id])
        self._send(batch)
        log.info("Dropped table %s (id %d, coordinator epoch %d)", event.path, table_id, self.epoch)
        return True

    async def list_tables(self, event: ListTables) -> list[str]:
        await self._ensure_loaded()
        if event.database not in self.context.databases:
            raise DatabaseNotExistError(f"database {event.database} does not exist")
        return sorted(p.table for p in self.view.by_path if p.database == event.database)

    async def get_metadata(self, event: GetMetadata) -> common_pb2.ClusterMetadata:
        await self._ensure_loaded()
        ids = []
        for path in event.paths:
            if path not in self.view.by_path:
                raise TableNotExistError(f"table {path} does not exist")
            ids.append(self.view.by_path[path])
        return self.cluster_metadata(ids if event.paths else None)

    async def allocate_writer_id(self, _event: AllocateWriterId) -> int:
        return await self._writer_ids.allocate()

    async def _num_buckets(self, table_id: int) -> int | None:
        await self._ensure_loaded()
        info = self.view.tables.get(table_id)
        return None if info is None else info.num_buckets

    async def _bucket_layout(self, table_id: int) -> dict[int, int] | None:
        await self._ensure_loaded()
        return bucket_layout(self.view.tables, table_id)
