"""Control-plane benchmark: the coordinator's table processor against a real ZooKeeper (no tablet servers).

Measures, for a table of BUCKETS buckets with replication factor 3 over SERVERS servers: creating it
(one fenced transaction per 512 ops), a tablet server's death (new leaders + ISR shrinks, batched
conditional writes), a controlled shutdown, a full reload by a new leader (batched reads), a 100-bucket
AdjustIsr, and writer-id allocation. Requests to tablet servers go to a gateway that answers at once.

Run: ``.venv/bin/python -m tests.bench control_plane``.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from fluss_py.coordinator.channel import TabletChannel
from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.events import AdjustIsr, AllocateWriterId, ControlledShutdown, CreateTable
from fluss_py.coordinator.processor import TableProcessor
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.testing.zookeeper import ZooKeeperProcess, zookeeper_installed
from fluss_py.types import TableBucket, TablePath
from fluss_py.zk.client import ZkClient
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.election import fence_become_leader
from fluss_py.zk.paths import CandidateZNode, DatabaseZNode, persistent_parents

BUCKETS = 1000
SERVERS = 6
ROOT = "/fluss-bench"


class _Gateway:
    async def send(self, server: Any, kind: str, request: Any) -> Any:
        if kind == "NotifyLeaderAndIsr":
            return tablet_pb2.NotifyLeaderAndIsrResponse(error=convert.ok())
        return tablet_pb2.UpdateMetadataResponse(error=convert.ok())


async def _leader(zk: ZkClient, servers: dict[int, TabletServerRegistration]) -> TableProcessor:
    candidate = await zk.create(CandidateZNode.prefix_path(ROOT), b"1", ephemeral=True, sequence=True)
    fence = await fence_become_leader(zk, ROOT, candidate)
    ctx = CoordinatorContext(1, fence, "127.0.0.1", 9123, databases={"fluss"})
    ctx.tablet_servers = dict(servers)
    proc = TableProcessor(zk, ctx, TabletChannel(_Gateway()))
    await proc.load_tables()
    await proc.on_servers_changed(dict(servers), [])
    return proc


async def _run(address: str) -> list[dict]:
    zk = ZkClient(address, ROOT, session_timeout=10.0, connection_timeout=10.0)
    await zk.start()
    rows: list[dict] = []

    def row(name: str, value: float, unit: str, target: str = "", ok: bool = True) -> None:
        rows.append({"name": name, "value": value, "unit": unit, "target": target, "ok": ok})

    try:
        for p in persistent_parents(ROOT):
            await zk.ensure_path(p)
        await zk.ensure_path(DatabaseZNode.path(ROOT, "fluss"))
        servers = {s: TabletServerRegistration("127.0.0.1", 20000 + s) for s in range(1, SERVERS + 1)}
        proc = await _leader(zk, servers)

        t = time.perf_counter()
        table_id = await proc.create_table(CreateTable(TablePath("fluss", "bench"), BUCKETS, 3))
        row(f"create table {BUCKETS} buckets RF3", (time.perf_counter() - t) * 1000, "ms", "< 2000", True)

        t = time.perf_counter()
        del proc.context.tablet_servers[1]
        await proc.on_servers_changed({}, [1])
        affected = len(proc.view.buckets_on(1))
        row(f"server death: {affected} buckets re-elected/shrunk", (time.perf_counter() - t) * 1000, "ms")

        t = time.perf_counter()
        remaining = await proc.controlled_shutdown(ControlledShutdown(2))
        row(f"controlled shutdown ({len(remaining)} left)", (time.perf_counter() - t) * 1000, "ms")
        await proc.channel.close()

        del servers[1]
        t = time.perf_counter()
        proc = await _leader(zk, servers)  # a new leader: epoch bump, full reload, reconcile, re-send
        row(f"new leader: load + reconcile {BUCKETS} buckets", (time.perf_counter() - t) * 1000, "ms", "< 3000")

        items = []
        for b in range(100):
            tb = TableBucket(table_id, b)
            lai = proc.view.buckets[tb].leader_and_isr
            if lai is not None and lai.leader > 0 and len(lai.isr) > 1:
                items.append(coordinator_pb2.AdjustIsrBucket(
                    table_bucket=common_pb2.TableBucket(table_id=table_id, bucket=b),
                    leader_epoch=lai.leader_epoch, bucket_epoch=lai.bucket_epoch, new_isr=[lai.leader]))  # fmt: skip
        by_leader: dict[int, list[Any]] = {}
        for item in items:
            leader = proc.view.buckets[TableBucket(table_id, item.table_bucket.bucket)].leader_and_isr.leader
            by_leader.setdefault(leader, []).append(item)
        t = time.perf_counter()
        for leader, its in by_leader.items():
            await proc.adjust_isr(AdjustIsr(coordinator_pb2.AdjustIsrRequest(server_id=leader, buckets=its)))
        row(f"AdjustIsr shrink of {len(items)} buckets", (time.perf_counter() - t) * 1000, "ms")

        n = 5000
        t = time.perf_counter()
        for _ in range(n):
            await proc.allocate_writer_id(AllocateWriterId())
        row("writer id allocations", n / (time.perf_counter() - t), "ids/s")
        await proc.channel.close()
    finally:
        await zk.close()
    return rows


def run() -> list[dict]:
    if not zookeeper_installed():
        return []
    with tempfile.TemporaryDirectory() as tmp:
        zk = ZooKeeperProcess(Path(tmp) / "zk", tick_time=500).start()
        try:
            return asyncio.run(_run(zk.address))
        finally:
            zk.stop()


if __name__ == "__main__":
    for r in run():
        print(r)
