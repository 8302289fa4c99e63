"""A TableProcessor on an in-memory ZooKeeper and a recording gateway, for the coordinator's unit tests
(the processor's own and the rebalance executor's)."""

from fluss_py.coordinator.channel import TabletChannel
from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.processor import TableProcessor
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr, TableBucket
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.paths import DatabaseZNode, LeaderIsrZNode, persistent_parents
from fluss_py.zk.values import EpochFence

from .fakes import FakeGateway, FakeZk

ROOT = "/fluss"


def registration(sid: int, rack: str = "") -> TabletServerRegistration:
    return TabletServerRegistration("127.0.0.1", 9000 + sid, rack=rack)


class Harness:
    def __init__(self, zk: FakeZk, servers: dict[int, str], fence: EpochFence, **kw) -> None:
        self.zk = zk
        self.gateway = FakeGateway()
        self.channel = TabletChannel(self.gateway)
        self.ctx = CoordinatorContext(100, fence, "127.0.0.1", 9123, databases={"fluss"})
        self.ctx.tablet_servers = {s: registration(s, r) for s, r in servers.items()}
        self.proc = TableProcessor(zk, self.ctx, self.channel, **kw)

    async def start(self) -> None:
        await self.proc.load_tables()
        await self.proc.on_servers_changed(dict(self.ctx.tablet_servers), [])
        await self.drain()

    async def drain(self) -> None:
        await wait_until(lambda: all(self.channel.pending(s) == 0 for s in self.channel.servers()))

    async def kill(self, *sids: int) -> None:
        for s in sids:
            del self.ctx.tablet_servers[s]
        await self.proc.on_servers_changed({}, list(sids))
        await self.drain()

    async def revive(self, *sids: int) -> None:
        joined = {s: registration(s) for s in sids}
        self.ctx.tablet_servers.update(joined)
        await self.proc.on_servers_changed(joined, [])
        await self.drain()

    def lai(self, table_id: int, bucket: int) -> LeaderAndIsr:
        return LeaderIsrZNode.decode(self.zk.data(LeaderIsrZNode.path(ROOT, table_id, bucket)))

    def view_lai(self, table_id: int, bucket: int) -> LeaderAndIsr:
        return self.proc.view.buckets[TableBucket(table_id, bucket)].leader_and_isr


def fresh_zk() -> tuple[FakeZk, EpochFence]:
    zk = FakeZk(ROOT)
    for p in persistent_parents(ROOT):
        zk.put(p)
    zk.put(DatabaseZNode.path(ROOT, "fluss"), DatabaseZNode.encode(0))
    return zk, zk.fence(1)
