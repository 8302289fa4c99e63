"""Produce through a real local cluster (ZooKeeper, 1 coordinator, 3 tablet servers, deploy/conf settings):
what bench_cluster.py does not measure.

- pipelined acks=all produce into ONE bucket with replication factor 3 (one leader, two followers: the
  per-bucket replication pipeline), 100 B and 1 KiB records, client defaults;
- (d) the steady-producer failover: an idempotent acks=all producer sending one record every 20 ms and waiting for
  each, kill -9 of the bucket leader, TRIALS times (the killed server restarts and rejoins the ISR in between);
  the longest send (the stall) per trial, median and max, failed sends, and every acknowledged record read
  back exactly once (lost, duplicated). The peer, when installed: NATS JetStream R3 as in docs/performance.md
  §6 (c), a fresh cluster per trial (tests/bench/peers/nats_load.py).

One-at-a-time latency p50/p99, 3-bucket throughput and produce->consume latency are bench_cluster.py's.
"""

from __future__ import annotations

import asyncio
import statistics
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
from tests.bench.common import row
from tests.fault.replication_support import (
    SteadyProducer,
    bootstrap,
    consume,
    create_table,
    leader_isr,
    server_name,
    wait_for_leader_change,
    wait_full_isr,
)

FAILOVER_TABLE = "bench_failover"
SINGLE_BUCKET_TABLE = "fluss.bench_one_bucket_{size}"
TRIALS = 5


async def _single_bucket(servers: str) -> list[dict]:
    rows = []
    async with Admin(servers) as admin:
        for size, count in ((100, 100_000), (1024, 30_000)):
            table = SINGLE_BUCKET_TABLE.format(size=size)
            await admin.create_table(table, num_buckets=1, replication_factor=3)
            await _ready(admin, table)
            recs, mb = await _throughput(servers, table, size, count)
            name = f"1 bucket RF3 acks=all {size} B pipelined"
            rows += [row(name, recs, "records/s"), row(name, mb, "MB/s")]
    return rows


def _failover(cluster: LocalCluster) -> dict[str, float]:
    """Steady-producer failover, TRIALS kills; runs on this thread (processes are killed and restarted from here)."""
    table_id = create_table(cluster, FAILOVER_TABLE)
    tb = TableBucket(table_id, 0)
    options = ProducerOptions(acks=-1, idempotence=True, request_timeout=30.0, delivery_timeout=120.0)
    stalls, first_acks = [], []
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        producer = SteadyProducer(bootstrap(cluster), f"fluss.{FAILOVER_TABLE}", options).start()
        try:
            producer.wait_acked_after(time.monotonic(), 50, 30)
            for trial in range(TRIALS):
                before = leader_isr(zk, cluster, tb)
                killed = server_name(before.leader)
                t_kill = kill9(cluster, killed)
                wait_for_leader_change(zk, cluster, tb, before, 60)
                producer.wait_acked_after(t_kill, 50, 120)
                window = [s for s in producer.sent if s.end > t_kill]
                stalls.append(max(s.latency_ms for s in window))
                first_acks.append(min(s.end for s in window if s.error is None) - t_kill)
                cluster.start_process(killed, wait=True, timeout=60)
                if trial < TRIALS - 1:
                    wait_full_isr(zk, cluster, tb, (1, 2, 3), 60)
        finally:
            sent = producer.stop()
    acked = [s for s in sent if s.error is None]
    end = max((s.offset for s in acked), default=-1) + 1
    values = [v for _, v in consume(cluster, FAILOVER_TABLE, 0, end)]
    acked_values = {s.value for s in acked}
    seen = [v for v in values if v in acked_values]
    return dict(
        stall_median=statistics.median(stalls),
        stall_max=max(stalls),
        first_ack_median=statistics.median(first_acks) * 1e3,
        failed=sum(1 for s in sent if s.error),
        lost=len(acked_values - set(values)),
        duplicated=len(seen) - len(set(seen)),
        sends=len(sent),
    )


def _nats_failover() -> dict[str, float] | None:
    from tests.bench.peers.nats import available
    from tests.bench.peers.nats_load import failover_trial

    if not available():
        return None
    trials = []
    with tempfile.TemporaryDirectory(prefix="bench-nats-failover-") as d:
        for i in range(TRIALS):
            trials.append(failover_trial(Path(d) / f"trial-{i}"))
    stalls = [t.stall_s * 1e3 for t in trials]
    return dict(
        stall_median=statistics.median(stalls),
        stall_max=max(stalls),
        failed=sum(t.failed_attempts for t in trials),
        lost=sum(t.missing for t in trials),
        duplicated=sum(t.duplicates for t in trials),
    )


def _failover_rows(f: dict[str, float], n: dict[str, float]) -> list[dict]:
    what = f"(d) kill -9 of the leader, {TRIALS} trials"
    med, mx = f["stall_median"], f["stall_max"]
    peer_med = n.get("stall_median")
    ok_med = med <= 1000 and (peer_med is None or med <= peer_med / 5)
    return [
        row(f"{what}: longest stall median", med, "ms", "<= 1000, <= 1/5 peer", ok_med, peer_med),
        row(f"{what}: longest stall max", mx, "ms", "", True, n.get("stall_max")),
        row(f"{what}: kill -> first ack median", f["first_ack_median"], "ms"),
        row(f"{what}: failed sends", f["failed"], "sends", "0", f["failed"] == 0, n.get("failed")),
        row(f"{what}: acked records lost", f["lost"], "records", "0", f["lost"] == 0, n.get("lost")),
        row(f"{what}: duplicated", f["duplicated"], "records", "0", f["duplicated"] == 0, n.get("duplicated")),
    ]


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-produce-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            servers = ",".join(cluster.get(n).rpc_address for n in cluster.names("tablet-server"))
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                rows = runner.run(_single_bucket(servers))
            failover = _failover(cluster)
        finally:
            cluster.close()
    return rows + _failover_rows(failover, _nats_failover() or {})


if __name__ == "__main__":
    for row in run():
        print(row)
