"""Primary-key tables on a real local cluster (ZooKeeper, 1 coordinator, 3 tablet servers), next to the log
table's figure of the same workload in the same run (issue 34's benchmark rows):

- pipelined upsert throughput into ONE bucket with RF 3, 100 B rows (``id BIGINT, payload STRING``), acks=all,
  and the same rows produced as plain records into a 1-bucket log table (the ``peer`` column);
- follower apply cost: CPU time (``/proc/<pid>/stat`` utime+stime) the two followers spent per row during the
  upserts, minus what they spent per record during the log table's run (fetching and appending the same
  bytes): the cost of keeping a hot-standby KV;
- lookup latency p50/p99 one key at a time (1000 lookups of random keys) and batched (``lookup_many`` of 100
  keys, 200 batches; per batch), from the leader's KV, and the CPU time the two followers spent meanwhile per
  lookup call (each call waits for the followers' confirmation that the leader still leads: one more fetch
  round trip each, docs/primary-key-tables.md §1 invariant 5);
- changelog read throughput: a consumer reading the table's changelog from the start (rows/s), next to reading
  the log table;
- the KV leader failover: a 1-bucket table holding ``FLUSS_BENCH_KV_MB`` (1024 by default: 1 GiB) of 1 KiB
  rows; kill -9 of its leader while one client looks a key up and another upserts, one at a time each: the
  time from the SIGKILL to the first lookup and to the first acknowledged upsert served by the new leader
  (goal <= 1 s; Fluss restores a snapshot: minutes).
"""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py.client import (
    Admin,
    Consumer,
    ConsumerOptions,
    Lookuper,
    LookupOptions,
    Producer,
    ProducerOptions,
    Upserter,
)
from fluss_py.schema.schema import parse_schema
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import kill9
from tests.bench.bench_cluster import SETTINGS, _ready
from tests.bench.common import p50_p99_ms, row

SCHEMA = parse_schema("id BIGINT, payload STRING", primary_key="id")
PAYLOAD = "x" * 85  # a 100 B row: schema id 2 + bitmap 1 + id 8 + length 4 + 85
ROWS = 100_000
BIG_PAYLOAD = "y" * 1000
FAILOVER_MB = int(os.environ.get("FLUSS_BENCH_KV_MB", "1024"))


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _leader_and_followers(admin: Admin, table: str) -> tuple[int, list[int]]:
    _, buckets = await admin.get_table_placement(table)
    return buckets[0].leader, [r for r in buckets[0].replicas if r != buckets[0].leader]


async def _upserts(servers: str, table: str, n: int, payload: str) -> float:
    async with Upserter(servers, table, ProducerOptions(acks=-1)) as up:
        await up.upsert_and_wait({"id": -1, "payload": payload})  # metadata and writer id
        t = time.perf_counter()
        futures = [await up.upsert({"id": i, "payload": payload}) for i in range(n)]
        await up.flush()
        elapsed = time.perf_counter() - t
        for f in futures:
            f.result()
    return n / elapsed


async def _produce(servers: str, table: str, n: int) -> float:
    value = b"x" * 100
    async with Producer(servers, ProducerOptions(acks=-1)) as producer:
        await producer.send_and_wait(table, value)
        t = time.perf_counter()
        futures = [await producer.send(table, value, key=b"%d" % i) for i in range(n)]
        await producer.flush()
        elapsed = time.perf_counter() - t
        for f in futures:
            f.result()
    return n / elapsed


async def _read_all(servers: str, table: str, n: int) -> float:
    async with Consumer(servers, ConsumerOptions(auto_offset_reset="earliest")) as consumer:
        await consumer.assign(table)
        got = 0
        t = time.perf_counter()
        while got < n:
            got += len(await consumer.poll(timeout=1.0))
        return got / (time.perf_counter() - t)


async def _lookups(servers: str, table: str, n_keys: int) -> dict[str, float]:
    rng = random.Random(1)
    async with Lookuper(servers) as lk:
        await lk.lookup(table, 0)
        single = []
        for _ in range(1000):
            t = time.perf_counter()
            assert await lk.lookup(table, rng.randrange(n_keys)) is not None
            single.append(time.perf_counter() - t)
        batched = []
        t_all = time.perf_counter()
        for _ in range(200):
            keys = [rng.randrange(n_keys) for _ in range(100)]
            t = time.perf_counter()
            rows = await lk.lookup_many(table, keys)
            batched.append(time.perf_counter() - t)
            assert all(r is not None for r in rows)
        keys_per_s = 200 * 100 / (time.perf_counter() - t_all)
    p50, p99 = p50_p99_ms(single)
    b50, b99 = p50_p99_ms(batched)
    return dict(p50=p50, p99=p99, b50=b50, b99=b99, keys_per_s=keys_per_s, requests=len(single) + len(batched))


async def _steady(cluster: LocalCluster, servers: str, table: str, rows: int) -> list[dict]:
    async with Admin(servers) as admin:
        await admin.create_table(table, num_buckets=1, replication_factor=3, schema=SCHEMA)
        await admin.create_table(table + "_log", num_buckets=1, replication_factor=3)
        await _ready(admin, table)
        await _ready(admin, table + "_log")
        _, kv_followers = await _leader_and_followers(admin, table)
        _, log_followers = await _leader_and_followers(admin, table + "_log")

    def followers_cpu(ids: list[int]) -> float:
        return sum(_cpu_s(cluster.pid(f"tablet-server-{i}")) for i in ids)  # type: ignore[arg-type]

    before = followers_cpu(log_followers)
    log_rate = await _produce(servers, table + "_log", rows)
    await asyncio.sleep(2.0)  # the followers fetch the tail (and, for the KV, apply it) after the last ack
    log_cpu = followers_cpu(log_followers) - before
    before = followers_cpu(kv_followers)
    kv_rate = await _upserts(servers, table, rows, PAYLOAD)
    await asyncio.sleep(2.0)
    kv_cpu = followers_cpu(kv_followers) - before
    before = followers_cpu(kv_followers)
    look = await _lookups(servers, table, rows)
    look_cpu = followers_cpu(kv_followers) - before
    kv_read = await _read_all(servers, table, rows + 1)
    log_read = await _read_all(servers, table + "_log", rows + 1)
    apply_us = (kv_cpu - log_cpu) / (2 * rows) * 1e6
    return [
        row("upsert 1 bucket RF3 acks=all 100 B pipelined (peer: log table)", kv_rate, "rows/s", peer=log_rate),
        row("follower CPU per row, KV table", kv_cpu / (2 * rows) * 1e6, "us", peer=log_cpu / (2 * rows) * 1e6),
        row("follower apply cost (KV - log, per row per follower)", apply_us, "us"),
        row("lookup one at a time p50", look["p50"], "ms"),
        row("lookup one at a time p99", look["p99"], "ms"),
        row("lookup batched 100 keys p50 (per batch)", look["b50"], "ms"),
        row("lookup batched 100 keys p99 (per batch)", look["b99"], "ms"),
        row("lookup batched throughput", look["keys_per_s"], "keys/s"),
        row("follower CPU during the lookups, per request (both followers)", look_cpu / look["requests"] * 1e6, "us"),
        row("changelog read from the start (peer: log table)", kv_read, "rows/s", peer=log_read),
    ]


async def _fill(servers: str, table: str, mb: int) -> int:
    async with Admin(servers) as admin:
        await admin.create_table(table, num_buckets=1, replication_factor=3, schema=SCHEMA)
        await _ready(admin, table)
    n = mb * 1024 * 1024 // 1024
    async with Upserter(servers, table, ProducerOptions(acks=-1)) as up:
        pending = []
        for i in range(n):
            pending.append(await up.upsert({"id": i, "payload": BIG_PAYLOAD}))
            if len(pending) >= 20_000:
                await asyncio.gather(*pending)
                pending.clear()
        await up.flush()
        await asyncio.gather(*pending)
    return n


async def _failover(cluster: LocalCluster, servers: str, table: str, n: int) -> dict[str, float]:
    """kill -9 of the bucket's leader while one client looks up and one upserts, one call at a time each: from the
    SIGKILL to the end of the first call of each kind that began once the old leader was gone (so the new leader
    answered it)."""
    async with Admin(servers) as admin:
        leader, _ = await _leader_and_followers(admin, table)
    async with (
        Lookuper(servers, LookupOptions(request_timeout=60.0)) as lk,
        Upserter(servers, table, ProducerOptions(acks=-1)) as up,
    ):
        await lk.lookup(table, 0)
        await up.upsert_and_wait({"id": 0, "payload": "before"})
        gone = asyncio.Event()
        t_kill = 0.0
        done: dict[str, float] = {}

        async def repeat(kind: str, call) -> None:  # type: ignore[no-untyped-def]
            i = 0
            while kind not in done:
                began_after = gone.is_set()
                await call(i)
                if began_after:
                    done[kind] = time.monotonic() - t_kill
                i += 1

        tasks = [
            asyncio.create_task(repeat("lookup", lambda i: lk.lookup(table, i % n))),
            asyncio.create_task(repeat("upsert", lambda i: up.upsert_and_wait({"id": i % n, "payload": "after"}))),
        ]
        await asyncio.sleep(1.0)
        t_kill = time.monotonic()
        await asyncio.to_thread(kill9, cluster, f"tablet-server-{leader}")  # returns once the process is gone
        gone.set()
        await asyncio.wait_for(asyncio.gather(*tasks), 120)
    return done


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-kv-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            servers = ",".join(cluster.get(n).rpc_address for n in cluster.names("tablet-server"))
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                rows = runner.run(_steady(cluster, servers, "fluss.bench_kv", ROWS))
                filled = runner.run(_fill(servers, "fluss.bench_kv_big", FAILOVER_MB))
                failover = runner.run(_failover(cluster, servers, "fluss.bench_kv_big", filled))
        finally:
            cluster.close()
    what = f"KV leader failover, {FAILOVER_MB} MiB of KV (1 KiB rows): kill -9 ->"
    lookup, upsert = failover["lookup"], failover["upsert"]
    return [
        *rows,
        row(f"{what} first lookup by the new leader", lookup * 1e3, "ms", "<= 1000", lookup <= 1.0),
        row(f"{what} first upsert acknowledged by the new leader", upsert * 1e3, "ms", "<= 1000", upsert <= 1.0),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
