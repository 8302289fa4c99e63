"""Produce through a real local cluster (ZooKeeper, 1 coordinator, 3 tablet servers, deploy/conf settings):
what bench_cluster.py does not measure.

- pipelined acks=all produce into ONE bucket with replication factor 3 (one leader, two followers: the
  per-bucket replication pipeline), 100 B and 1 KiB records, client defaults;
- seed 001's failover: an idempotent acks=all producer sending one record every 20 ms and waiting for each,
  kill -9 of the bucket leader, twice (the killed server restarts and rejoins the ISR in between); the longest
  send (the stall), the time from the kill to the first acknowledgement, and failed sends (target 0).

One-at-a-time latency p50/p99 and 3-bucket throughput are bench_cluster.py's.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py.client import Admin, ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import kill9
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.bench.bench_cluster import SETTINGS, _ready, _throughput
from tests.fault.replication_support import (
    SteadyProducer,
    bootstrap,
    create_table,
    leader_isr,
    server_name,
    wait_for_leader_change,
    wait_full_isr,
)

FAILOVER_TABLE = "bench_failover"
SINGLE_BUCKET_TABLE = "fluss.bench_one_bucket_{size}"


async def _single_bucket(servers: str) -> list[dict]:
    rows = []
    async with Admin(servers) as admin:
        for size, count in ((100, 100_000), (1024, 30_000)):
            table = SINGLE_BUCKET_TABLE.format(size=size)
            await admin.create_table(table, num_buckets=1, replication_factor=3)
            await _ready(admin, table)
            recs, mb = await _throughput(servers, table, size, count)
            name = f"1 bucket RF3 acks=all {size} B pipelined"
            rows.append(dict(name=name, value=recs, unit="records/s", target="", ok=True))
            rows.append(dict(name=name, value=mb, unit="MB/s", target="", ok=True))
    return rows


def _failover(cluster: LocalCluster) -> list[dict]:
    """Seed 001, two trials; runs on this thread (processes are killed and restarted from here)."""
    table_id = create_table(cluster, FAILOVER_TABLE)
    tb = TableBucket(table_id, 0)
    options = ProducerOptions(acks=-1, idempotence=True, request_timeout=30.0, delivery_timeout=120.0)
    stalls, first_acks = [], []
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        producer = SteadyProducer(bootstrap(cluster), f"fluss.{FAILOVER_TABLE}", options).start()
        try:
            producer.wait_acked_after(time.monotonic(), 50, 30)
            for trial in range(2):
                before = leader_isr(zk, cluster, tb)
                killed = server_name(before.leader)
                t_kill = kill9(cluster, killed)
                wait_for_leader_change(zk, cluster, tb, before, 60)
                producer.wait_acked_after(t_kill, 50, 120)
                window = [s for s in producer.sent if s.end > t_kill]
                stalls.append(max(s.latency_ms for s in window))
                first_acks.append(min(s.end for s in window if s.error is None) - t_kill)
                if trial == 0:
                    cluster.start_process(killed, wait=True, timeout=60)
                    wait_full_isr(zk, cluster, tb, (1, 2, 3), 60)
        finally:
            sent = producer.stop()
    failed = sum(1 for s in sent if s.error)
    rows = []
    for i, (stall, first) in enumerate(zip(stalls, first_acks, strict=True), 1):
        kill = f"seed 001 kill -9 leader #{i}"
        rows.append(dict(name=f"{kill}: longest send", value=stall, unit="ms", target="", ok=True))
        rows.append(dict(name=f"{kill}: kill -> first ack", value=first * 1e3, unit="ms", target="", ok=True))
    rows.append(dict(name="seed 001 failed sends", value=failed, unit="sends", target="0", ok=failed == 0))
    rows.append(dict(name="seed 001 sends", value=len(sent), unit="sends", target="", ok=True))
    return rows


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-produce-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            servers = ",".join(cluster.get(n).rpc_address for n in cluster.names("tablet-server"))
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                rows = runner.run(_single_bucket(servers))
            return rows + _failover(cluster)
        finally:
            cluster.close()


if __name__ == "__main__":
    for row in run():
        print(row)
