"""A cluster of ReplicaManagers over real logs and in-memory endpoints (tests and tests/bench)."""

from __future__ import annotations

from pathlib import Path

from fluss_py import config as cfg
from fluss_py.log.dirs import LogDirs
from fluss_py.log.manager import LogManager
from fluss_py.replica.fetcher.state import FetchSettings
from fluss_py.replica.manager import ReplicaManager, ReplicaSettings
from fluss_py.replica.messages import LeaderAndIsrItem
from fluss_py.schema.schema import TableSchema
from fluss_py.types import LeaderAndIsr, ServerNode, TableBucket
from tests.unit.replica.fakes import Cluster, FakeClock

TB = TableBucket(7, 0)
LAG_S = 10.0
SETTINGS = ReplicaSettings(
    min_insync_replicas=2,
    lag_time_s=LAG_S,
    checkpoint_interval_s=3600.0,
    isr_retry_backoff_s=0.01,
    fetch=FetchSettings(wait_max_s=0.05, min_bytes=1, max_bytes=1 << 20, backoff_s=0.01),
)


def node(server_id: int) -> ServerNode:
    return ServerNode(server_id, "127.0.0.1", 9000 + server_id)


class ReplicaCluster(Cluster):
    """Servers 1..n, each a ReplicaManager over a real LogManager in ``root/server-<i>``; one shared FakeClock
    and FakeCoordinator. ``kill`` stops a server cleanly (logs flushed and closed); ``start_server`` reloads
    its logs from disk."""

    def __init__(self, n: int, clock: FakeClock, root: Path, settings: ReplicaSettings = SETTINGS) -> None:
        super().__init__()
        self.clock = clock
        self.root = root
        self.settings = settings
        self.coordinator_epoch = 1
        self.config = cfg.Config(cfg.TABLET)
        self.log_managers: dict[int, LogManager] = {}
        self.schemas: dict[int, TableSchema] = {}  # table id -> schema (a primary-key table: KVs beside the logs)
        for i in range(1, n + 1):
            self.start_server(i)

    def start_server(self, i: int) -> ReplicaManager:
        lm = LogManager(self.root / f"server-{i}", self.config)
        lm.load_logs()
        self.log_managers[i] = lm
        m = ReplicaManager(
            i,
            lm,
            self.config,
            self.coordinator,
            self.endpoint_factory,
            self.clock,
            settings=self.settings,
        )
        m.start()
        self.managers[i] = m
        self.down.discard(i)
        return m

    async def restart_on_dirs(self, i: int, paths: list[Path], config: cfg.Config) -> tuple[ReplicaManager, LogDirs]:
        """Stop server ``i`` and start it again over ``LogDirs(paths)`` (data directories that can fail)."""
        await self.kill(i)
        dirs = LogDirs(paths, config)
        dirs.load_logs()
        m = ReplicaManager(i, dirs, config, self.coordinator, self.endpoint_factory, self.clock, settings=self.settings)
        m.start()
        self.managers[i] = m
        self.down.discard(i)
        return m, dirs

    async def kill(self, i: int) -> None:
        """The server stops answering and its manager stops (its in-memory log survives, like a disk)."""
        self.down.add(i)
        await self.managers.pop(i).shutdown()
        self.log_managers[i].shutdown()

    async def notify(self, tb: TableBucket, replicas: tuple[int, ...], props: dict | None = None) -> dict:
        lai = self.coordinator.state[tb]
        out = {}
        for i in replicas:
            if i in self.managers:
                out[i] = await self.managers[i].become_leader_or_follower(
                    self.coordinator_epoch,
                    [LeaderAndIsrItem(tb, lai, replicas, props or {}, (), self.schemas.get(tb.table_id), 1)],
                    [node(r) for r in replicas],
                )
        return out

    async def create(self, tb: TableBucket, replicas: tuple[int, ...], props: dict | None = None) -> LeaderAndIsr:
        live = tuple(r for r in replicas if r in self.managers)
        self.coordinator.state[tb] = LeaderAndIsr(live[0], 0, live, self.coordinator_epoch, 0)
        await self.notify(tb, replicas, props)
        return self.coordinator.state[tb]

    async def elect(self, tb: TableBucket, replicas: tuple[int, ...], leader: int, isr: tuple[int, ...]) -> None:
        self.coordinator.state[tb] = self.coordinator.state[tb].with_leader(leader, isr, self.coordinator_epoch)
        await self.notify(tb, replicas)

    async def close(self) -> None:
        for i in list(self.managers):
            await self.kill(i)
