"""Leader-only resources of a coordinator, created in order on winning and torn down in reverse.

    start:  rpc-channels (ChannelPool) -> channel-manager (TabletChannel, coordinator/channel.py: requests to
            tablet servers stamped with our epoch) -> background-managers (tablet-server watcher, liveness
            monitor: proof-of-death failure detection, coordinator/liveness.py)
            -> event-processor (CoordinatorEventLoop with the database, table and rebalance handlers)
            -> rebalance-manager (tick task of the RebalanceExecutor, coordinator/rebalance/executor.py)
            -> leader-balancer (tick task of preferred-leader elections, coordinator/leader_balance.py)
            -> server-tag-check (tick task of the server-tag room, coordinator/tag_room.py)
            -> auto-partition-manager (partitions ahead and expired, coordinator/partition_manager.py)
            then: load context, register <root>/coordinator/leader, create database `fluss`
    stop:   auto-partition-manager -> server-tag-check -> leader-balancer -> rebalance-manager -> event-processor
            -> background-managers -> channel-manager -> rpc-channels

Stopping makes no ZooKeeper write (a zombie leader tears down exactly like this): ephemeral nodes vanish
with the session, and a voluntary release deletes them in ``CoordinatorServer``.

Who may call: the coordinator's lifecycle task (``start``/``stop``); RPC handlers use ``event_loop``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from fluss_py import config as cfg
from fluss_py.coordinator.channel import GrpcTabletGateway, TabletChannel
from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.dynamic_config import DynamicConfigManager, apply_to_plan_options
from fluss_py.coordinator.event_loop import CoordinatorEventLoop
from fluss_py.coordinator.events import (
    CreateDatabase,
    LoadClusterConfig,
    LoadContext,
    LoadTables,
    TabletServerAliveAgain,
    TabletServerDeathProven,
    TabletServersChanged,
)
from fluss_py.coordinator.handlers import DEFAULT_DATABASE, MetadataHandlers
from fluss_py.coordinator.leader_balance import LeaderBalanceOptions, LeaderBalancer
from fluss_py.coordinator.liveness import GrpcLivenessStream, LivenessMonitor
from fluss_py.coordinator.partition_manager import AutoPartitionManager
from fluss_py.coordinator.processor import TableProcessor
from fluss_py.coordinator.rebalance.executor import RebalanceExecutor
from fluss_py.coordinator.rebalance.sizes import BucketSizes
from fluss_py.coordinator.table_alter import TableAlter
from fluss_py.coordinator.tag_room import ServerTagRoom, cluster_min_isr
from fluss_py.rpc.channels import ChannelPool
from fluss_py.rpc.peer import new_token
from fluss_py.types import CoordinatorLeaderInfo, TableBucket
from fluss_py.zk.client import ZkClient
from fluss_py.zk.paths import CoordinatorLeaderZNode, TabletServerZNode
from fluss_py.zk.values import CreateOp, NodeExistsError, SetOp

# not __name__: the runbook shows its lines by this name, docs/operations.md (the leader services lines)
log = logging.getLogger("fluss_py.coordinator.initCoordinatorLeader")

Stop = Callable[[], Awaitable[None]]


class ResourceStack:
    """Named resources started in order; ``close`` stops them in reverse order, logging each step."""

    def __init__(self) -> None:
        self._started: list[tuple[str, Stop]] = []

    async def push(self, name: str, start: Callable[[], Awaitable[None]] | None, stop: Stop) -> None:
        if start is not None:
            await start()
        self._started.append((name, stop))
        log.info("Started leader resource %d: %s", len(self._started), name)

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self._started]

    async def close(self) -> None:
        while self._started:
            name, stop = self._started.pop()
            try:
                await stop()
                log.info("Stopped leader resource: %s", name)
            except Exception:
                log.exception("Stopping leader resource %s failed", name)


class LeaderServices:
    """Everything a coordinator holds only while leader. Owned by CoordinatorServer's lifecycle task."""

    def __init__(
        self,
        zk: ZkClient,
        context: CoordinatorContext,
        http_port: int,
        guard: Callable[[], Awaitable[None]],
        on_fenced: Callable[[], None],
        table_options: dict[str, Any] | None = None,
        proof_of_death: bool = True,
        rebalance_options: dict[str, Any] | None = None,
        leader_balance: LeaderBalanceOptions | None = None,
        static_config: Any = None,
        auto_partition_interval: float = 60.0,
    ) -> None:
        self._auto_partition_interval = auto_partition_interval
        self._static_config = static_config
        self._leader_balance_options = leader_balance or LeaderBalanceOptions()
        self._rebalance_options = rebalance_options or {}
        self._zk = zk
        self._proof_of_death = proof_of_death
        self._table_options = table_options or {}
        self.context = context
        self._http_port = http_port
        self.stack = ResourceStack()
        self.event_loop = CoordinatorEventLoop(guard, on_fenced)
        self.handlers = MetadataHandlers(zk, context)
        self.handlers.install(self.event_loop)
        self.pool: ChannelPool | None = None
        self.tablet_channel: TabletChannel | None = None
        self.tables: TableProcessor | None = None
        self.liveness: LivenessMonitor | None = None
        self.rebalance: RebalanceExecutor | None = None
        self.leader_balance: LeaderBalancer | None = None
        self.dynamic_config: DynamicConfigManager | None = None
        self.auto_partition: AutoPartitionManager | None = None
        self.server_tags: ServerTagRoom | None = None
        self.bucket_sizes = BucketSizes()  # led-bucket sizes reported on liveness heartbeats
        self.disk_use: dict[int, tuple[int, list[tuple[str, int, int]]]] = {}  # per server, its last disk report
        # this term's secret: in the leader node and on every request to tablet servers (docs/peer-trust.md)
        self.token = new_token()

    async def start(self) -> None:
        """Create the leader resources in order, then register the leader node and the default database.

        Raises on any failure; the caller then calls ``stop`` (reverse teardown) and releases leadership.
        """
        log.info("Starting coordinator leader services")
        ctx = self.context
        load = LoadContext()
        load.future = asyncio.get_running_loop().create_future()
        self.event_loop.put(load)  # first in the queue: the context is loaded before any other event

        self.pool = ChannelPool()
        await self.stack.push("rpc-channels", None, self.pool.close)
        # Tables, leadership and ISR (coordinator/processor.py): its per-server channel sends UpdateMetadata
        # (the full view, tables included), NotifyLeaderAndIsr and StopReplica on membership changes.
        gateway = GrpcTabletGateway(self.pool, token=self.token)  # requests present the term's token
        tablet_channel = self.tablet_channel = TabletChannel(gateway)
        self.tables = TableProcessor(self._zk, ctx, tablet_channel, **self._table_options)
        self.tables.install(self.event_loop, drop_database=self.handlers.drop_database)
        # the planner's bucket sizes come with the liveness heartbeats (none without proof-of-death streams)
        options = {"sizes": self.bucket_sizes, **self._rebalance_options}
        self.rebalance = RebalanceExecutor(self.tables, **options)  # resumes on the first startup
        self.rebalance.install(self.event_loop)
        rebalance = self.rebalance

        def moving() -> set[TableBucket]:  # buckets of the running rebalance batch: no preferred election
            progress = rebalance.progress
            return {m.bucket for _, m in progress.open_moves()} if progress is not None and progress.running else set()

        self.leader_balance = LeaderBalancer(self.tables, self._leader_balance_options, moving)
        self.leader_balance.install(self.event_loop)
        static = self._static_config
        # server tags and the replacement of permanent-offline servers (coordinator/tag_room.py)
        replace_after = float(static[cfg.REPLACE_DEAD_AFTER]) if static is not None else 0.0
        tags = self.server_tags = ServerTagRoom(self.tables, rebalance, replace_dead_after=replace_after,
                                                sizes=self.bucket_sizes)  # fmt: skip
        tags.install(self.event_loop)

        def on_cluster_config(entries: dict[str, str]) -> None:  # on the event loop (dynamic-config.md)
            tags.default_min_isr = cluster_min_isr(entries)
            if static is not None:
                rebalance.options = apply_to_plan_options(rebalance.options, entries, static)

        self.dynamic_config = DynamicConfigManager(self._zk, ctx, self.tables.view, on_cluster_config)
        self.dynamic_config.install(self.event_loop)
        self.auto_partition = AutoPartitionManager(self.tables, self._auto_partition_interval)
        self.auto_partition.install(self.event_loop)
        TableAlter(self.tables).install(self.event_loop)  # AlterTable: grow a table (coordinator/table_alter.py)
        self.handlers.add_servers_listener(self.tables.on_servers_changed)
        self.event_loop.put(LoadTables())  # right after LoadContext, before any membership event

        await self.stack.push("channel-manager", None, tablet_channel.close)
        watcher = None
        if self._proof_of_death:
            self.liveness = LivenessMonitor(
                GrpcLivenessStream(
                    self.pool, ctx.coordinator_id, ctx.epoch, self.bucket_sizes.report, self.disk_use.__setitem__
                ),
                lambda sid, reg, why: self.event_loop.put(TabletServerDeathProven(sid, reg, why)),
                report_alive=lambda sid, reg: self.event_loop.put(TabletServerAliveAgain(sid, reg)),
            )
            self.handlers.add_liveness_listener(self.liveness.sync)

        async def start_watchers() -> None:
            nonlocal watcher
            watcher = self._zk.watch_children(
                TabletServerZNode.parent(self._zk.root),
                lambda children: self.event_loop.put(TabletServersChanged(children)),
            )

        async def stop_watchers() -> None:
            if watcher is not None:
                watcher.cancel()
            if self.liveness is not None:
                await self.liveness.close()

        name = "background-managers (tablet-server watcher" + (", liveness monitor)" if self.liveness else ")")
        await self.stack.push(name, start_watchers, stop_watchers)

        async def start_processor() -> None:
            self.event_loop.start()

        await self.stack.push("event-processor", start_processor, self.event_loop.stop)

        async def start_rebalance_ticks() -> None:
            rebalance.start(self.event_loop)

        await self.stack.push("rebalance-manager", start_rebalance_ticks, rebalance.close)
        balancer = self.leader_balance

        async def start_balance_ticks() -> None:
            balancer.start(self.event_loop)

        await self.stack.push("leader-balancer", start_balance_ticks, balancer.close)

        async def start_tag_checks() -> None:
            tags.start(self.event_loop)

        await self.stack.push("server-tag-check", start_tag_checks, tags.close)
        partitions = self.auto_partition

        async def start_partition_ticks() -> None:
            partitions.start(self.event_loop)

        await self.stack.push("auto-partition-manager", start_partition_ticks, partitions.close)
        await load.future
        await self.event_loop.submit(LoadClusterConfig())

        await self._register_leader_node()
        await self.event_loop.submit(CreateDatabase(DEFAULT_DATABASE, ignore_if_exists=True))

    async def _register_leader_node(self) -> None:
        ctx = self.context
        info = CoordinatorLeaderInfo(
            ctx.coordinator_id, ctx.epoch, ctx.host, ctx.port, self._http_port, token=self.token
        )
        path = CoordinatorLeaderZNode.path(self._zk.root)
        data = CoordinatorLeaderZNode.encode(info)
        try:
            # private: the node holds the leader's token (docs/peer-trust.md); with ZooKeeper credentials only
            # the servers may read it (docs/security.md)
            await self._zk.commit([CreateOp(path, data, ephemeral=True, private=True)], fence=ctx.fence)
        except NodeExistsError:
            got = await self._zk.get(path)
            if got is None or got[1].ephemeral_owner != self._zk.session_id:
                raise
            await self._zk.commit([SetOp(path, data, got[1].version)], fence=ctx.fence)  # ours, from before
        log.info("Registered coordinator leader node %s (server %d, epoch %d)", path, ctx.coordinator_id, ctx.epoch)

    async def stop(self) -> None:
        await self.stack.close()
