"""Rebalance (issue 6): time to spread a table of ``REBALANCE_BENCH_BYTES`` (default 1 GiB of records, RF 3)
from 3 tablet servers onto 5 after adding 2, and a steady acks=all producer's latency (one record every
10 ms, waiting for each) before the rebalance versus during it.

Environment: ``REBALANCE_BENCH_BYTES``, ``REBALANCE_BENCH_MAX_CONCURRENT`` (default 5),
``REBALANCE_BENCH_THROTTLE`` (tablet-server.rebalance.throttle-bytes-per-second per leader server; default
the option's default, 10 MiB/s; 0 = unthrottled).
Rows: rebalance time, replica moves, bytes copied (segment bytes on the new servers when it ended, what
actually moved; the plan's own estimate uses the sizes reported on the liveness heartbeats), copy rate,
producer p50/p99 before and during, failed sends.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
import urllib.request
from pathlib import Path

import uvloop

from fluss_py import config as cfg
from fluss_py.client import ProducerOptions
from fluss_py.client.producer import Producer
from fluss_py.common.cross_site import REQUEST_HEADER
from fluss_py.testing.cluster import LocalCluster
from tests.bench.bench_cluster import SETTINGS
from tests.bench.common import p50_p99_ms, row
from tests.fault.replication_support import SteadyProducer, bootstrap, create_table

TABLE = "bench_rebalance"
BUCKETS = 30
RECORD = 16 * 1024
WINDOW_S = 10.0


async def _load(servers: str, table: str, count: int, buckets: int = BUCKETS) -> float:
    """``count`` records of RECORD bytes, acks=all, spread evenly over ``buckets``; returns MB/s."""
    value = b"x" * RECORD
    async with Producer(servers, ProducerOptions(acks=-1)) as producer:
        t = time.perf_counter()
        futures = [await producer.send(table, value, bucket=i % buckets) for i in range(count)]
        await producer.flush()
        elapsed = time.perf_counter() - t
        for f in futures:
            f.result()
    return count * RECORD / elapsed / 1e6


def _http(cluster: LocalCluster, method: str) -> dict:
    leader = cluster.wait_for_leader(15)
    req = urllib.request.Request(
        f"{cluster.get(leader).http_url}/rebalance", method=method, headers={REQUEST_HEADER: "1"}
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def run() -> list[dict]:
    total = int(os.environ.get("REBALANCE_BENCH_BYTES", str(1024**3)))
    cap = os.environ.get("REBALANCE_BENCH_MAX_CONCURRENT", "5")  # tablet-server.rebalance.max-concurrent-migrations
    throttle = int(os.environ.get("REBALANCE_BENCH_THROTTLE", str(cfg.REBALANCE_THROTTLE.default)))
    coordinator = {"coordinator.rebalance.auto": "false", "tablet-server.rebalance.max-concurrent-migrations": cap}
    tablet = {"tablet-server.rebalance.throttle-bytes-per-second": str(throttle)}
    with tempfile.TemporaryDirectory(prefix="bench-rebalance-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True,
                               coordinator_overrides=coordinator, tablet_overrides=tablet)  # fmt: skip
        try:
            cluster.start(timeout=60)
            create_table(cluster, TABLE, buckets=BUCKETS, rf=3)
            servers = bootstrap(cluster)
            count = total // RECORD
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                load_mb_s = runner.run(_load(servers, f"fluss.{TABLE}", count))
            options = ProducerOptions(acks=-1, request_timeout=30.0, delivery_timeout=120.0)
            producer = SteadyProducer(servers, f"fluss.{TABLE}", options, interval=0.01,
                                      bucket_of=lambda seq: seq % BUCKETS).start()  # fmt: skip
            try:
                t0 = time.monotonic()
                time.sleep(WINDOW_S)
                new = [cluster.add_tablet_server() for _ in range(2)]
                cluster.wait_ready(timeout=60)
                started = time.monotonic()
                answer = _http(cluster, "POST")
                while answer.get("status") == "REBALANCING":
                    time.sleep(0.2)
                    answer = _http(cluster, "GET")
                ended = time.monotonic()
                on_new = sum(f.stat().st_size for n in new for f in Path(cluster.get(n).data_dir).rglob("*.log"))
            finally:
                sent = producer.stop()
        finally:
            cluster.close()
    before = [s.latency_ms / 1e3 for s in sent if t0 <= s.start < started and s.error is None]
    during = [s.latency_ms / 1e3 for s in sent if started <= s.start < ended and s.error is None]
    moves = answer.get("moves_done", 0)
    replica_moves = answer.get("replica_moves", 0)
    copied_bytes = on_new  # segment bytes on the two new servers when the rebalance ended
    seconds = ended - started
    b50, b99 = p50_p99_ms(before) if before else (0.0, 0.0)
    d50, d99 = p50_p99_ms(during) if during else (0.0, 0.0)
    limit = f"throttle {throttle / 1024**2:g} MiB/s" if throttle else "no throttle"
    what = f"rebalance {total / 1024**3:.2f} GiB RF3, 3 -> 5 servers, cap {cap}, {limit}"
    failed = sum(1 for s in sent if s.error)
    return [
        row(
            f"{what}: status",
            1.0 if answer.get("status") == "COMPLETED" else 0.0,
            "completed",
            "1",
            answer.get("status") == "COMPLETED",
        ),
        row(f"{what}: time", seconds, "s"),
        row(f"{what}: replica moves", replica_moves, "moves"),
        row(f"{what}: moves incl. leadership", moves, "moves"),
        row(f"{what}: bytes copied", copied_bytes / 1e6, "MB"),
        row(f"{what}: copy rate", copied_bytes / 1e6 / seconds if seconds else 0.0, "MB/s"),
        row(f"{what}: load rate (acks=all, 16 KiB records)", load_mb_s, "MB/s"),
        row(f"{what}: producer p50 before", b50, "ms"),
        row(f"{what}: producer p99 before", b99, "ms"),
        row(f"{what}: producer p50 during", d50, "ms"),
        row(f"{what}: producer p99 during", d99, "ms", "<= 5x before", d99 <= 5 * max(b99, 1.0)),
        row(f"{what}: failed sends", failed, "sends", "0", failed == 0),
    ]


if __name__ == "__main__":
    for r in run():
        print(r)
