"""A rebalance executor on the coordinator harness (in-memory ZooKeeper, fake gateway), shared by the
rebalance tests; ``grown`` (conftest.py) is its usual start: 3 servers, 30 buckets, then 2 more join."""

from collections import Counter

from fluss_py.coordinator.events import AdjustIsr, CreateTable
from fluss_py.coordinator.rebalance.executor import RebalanceExecutor
from fluss_py.coordinator.rebalance.planner import PlanOptions
from fluss_py.coordinator.rebalance.progress import MoveStatus
from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, coordinator_pb2
from fluss_py.types import TablePath
from fluss_py.zk.paths import LeaderIsrZNode, RebalanceZNode, TableAssignmentZNode

from ..harness import ROOT, Harness, fresh_zk

T = TablePath("fluss", "events")


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Rig(Harness):
    def __init__(self, zk, servers, fence, clock=None, **kw) -> None:
        super().__init__(zk, servers, fence)
        self.clock = clock or Clock()
        kw.setdefault("options", PlanOptions(0.1, 0.2, 5))
        self.ex = RebalanceExecutor(self.proc, clock=self.clock, **kw)
        self.ex.install(_Loop())

    async def join(self, *sids: int) -> None:
        await self.revive(*sids)

    def node(self) -> dict:
        return RebalanceZNode.decode(self.zk.data(RebalanceZNode.path(ROOT)))

    def zk_assignment(self, table_id: int) -> dict[int, tuple[int, ...]]:
        return TableAssignmentZNode.decode(self.zk.data(TableAssignmentZNode.path(ROOT, table_id)))

    async def catch_up(self, only: set[int] | None = None) -> int:
        """Each target of an in-flight move reaches the HW: its leader proposes the ISR with it."""
        pr = self.ex.progress
        sent = 0
        for i, m in list(pr.open_moves()) if pr else []:
            if pr.moves[i] is not MoveStatus.ADDING or (only is not None and m.to_server not in only):
                continue
            tb = m.bucket
            lai = self.proc.view.buckets[tb].leader_and_isr
            if m.to_server in lai.isr:
                continue
            resp = await self.proc.adjust_isr(adjust(lai.leader, tb, lai.leader_epoch, lai.bucket_epoch,
                                                     [*lai.isr, m.to_server]))  # fmt: skip
            assert resp.buckets[0].error.code == ErrorCode.NONE, resp
            sent += 1
            check_invariants(self)
        await self.drain()
        return sent

    async def run_to_end(self, limit: int = 200) -> None:
        for _ in range(limit):
            if not self.ex.running:
                return
            check_caps(self)
            if await self.catch_up() == 0:
                await self.ex.tick()
        raise AssertionError("rebalance did not finish")


class _Loop:
    def register(self, *_a) -> None:
        pass

    def put(self, _e) -> None:
        pass


def adjust(server, tb, leader_epoch, bucket_epoch, isr):
    return AdjustIsr(coordinator_pb2.AdjustIsrRequest(server_id=server, buckets=[coordinator_pb2.AdjustIsrBucket(
        table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket), leader_epoch=leader_epoch,
        bucket_epoch=bucket_epoch, new_isr=isr)]))  # fmt: skip


def check_invariants(rig: Rig, rf: int = 3) -> None:
    for tb, b in rig.proc.view.buckets.items():
        assert len(b.replicas) >= rf, (tb, b.replicas)
        lai = b.leader_and_isr
        assert lai.leader in b.replicas and set(lai.isr) <= set(b.replicas)
        stored = LeaderIsrZNode.decode(rig.zk.data(LeaderIsrZNode.path(ROOT, tb.table_id, tb.bucket)))
        assert stored == lai
        assert rig.zk_assignment(tb.table_id)[tb.bucket] == b.replicas


def check_caps(rig: Rig) -> None:
    pr = rig.ex.progress
    if pr is None:
        return
    touched = Counter()
    for i, m in pr.open_moves():
        if pr.moves[i] is MoveStatus.ADDING:
            touched[m.from_server] += 1
            touched[m.to_server] += 1
    assert not touched or max(touched.values()) <= rig.ex.options.max_concurrent


async def make(servers=(1, 2, 3), buckets=30, **kw) -> tuple[Rig, int]:
    zk, fence = fresh_zk()
    rig = Rig(zk, {s: "" for s in servers}, fence, **kw)
    await rig.start()
    table_id = await rig.proc.create_table(CreateTable(T, num_buckets=buckets, replication_factor=3))
    await rig.drain()
    return rig, table_id
