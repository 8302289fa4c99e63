"""Who bounds pipelined throughput: the CPU of every thread of the client and of the leader, per round.

``python -m tests.bench.pipelined_threads [SIZE [COUNT [ROUNDS]]]`` (default 100 B, 100 000 records, 3 rounds):
a fresh LocalCluster (1 coordinator, 3 tablet servers), a 1-bucket RF 3 table, one ``Producer`` (acks=all,
uvloop) that sends COUNT records per round without waiting and then flushes. Printed per round: records/s and
MB/s, each thread's share of the round's wall clock (threads above 2 %; ``/proc/PID/task/TID/stat``) in this
process and in the leader, and how many produce requests the leader answered (its
``fluss_tablet_request_latency_seconds_count{request="produce"}``), i.e. how many records one request carried.

The engine of gRPC follows ``GRPC_EXPERIMENTS`` as everywhere (``GRPC_EXPERIMENTS= python -m ...`` for gRPC's
default engine, docs/operations.md §7.10). For a thread's instructions or a profile during a round, run
``perf stat --per-thread -p PID`` or ``perf record -g -p PID`` next to it. docs/performance.md "gRPC's I/O
engine" has the figures. Not a ``make bench`` module: it explains the ``bench produce`` row, it is not one.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import uvloop
from prometheus_client.parser import text_string_to_metric_families

from fluss_py.client import Admin, Producer, ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.health import fetch_text
from tests.bench.bench_cluster import SETTINGS, _ready
from tests.bench.scale import cpu_seconds

TABLE = "fluss.pipelined_threads"
SHOWN = 0.02


def thread_cpu(pid: int) -> dict[tuple[str, str], float]:
    """(tid, thread name) -> utime + stime in seconds for every thread of ``pid``."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[(tid, Path(f"/proc/{pid}/task/{tid}/comm").read_text().strip())] = cpu_seconds(pid, int(tid))
        except OSError:
            continue  # the thread ended
    return out


def busy(before: dict[tuple[str, str], float], after: dict[tuple[str, str], float], seconds: float) -> str:
    shares = [(name, (cpu - before.get((tid, name), 0.0)) / seconds) for (tid, name), cpu in after.items()]
    return " ".join(f"{name} {share:.0%}" for name, share in sorted(shares, key=lambda x: -x[1]) if share > SHOWN)


def produce_requests(http_url: str) -> float:
    text = fetch_text(http_url + "/metrics", timeout=5.0)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "fluss_tablet_request_latency_seconds_count" and s.labels.get("request") == "produce":
                return s.value
    return 0.0


async def rounds(cluster: LocalCluster, size: int, count: int, n: int) -> None:
    names = cluster.names(TABLET_SERVER)
    bootstrap = ",".join(cluster.get(name).rpc_address for name in names)
    async with Admin(bootstrap) as admin:
        await admin.create_table(TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, TABLE)
        _, buckets = await admin.get_table_placement(TABLE)
    leader = cluster.get(f"{TABLET_SERVER}-{buckets[0].leader}")
    value = b"x" * size
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        await producer.send_and_wait(TABLE, value)  # metadata and writer id
        for i in range(n):
            client0, leader0, requests0 = (
                thread_cpu(os.getpid()),
                thread_cpu(leader.pid),
                produce_requests(leader.http_url),
            )
            t = time.perf_counter()
            futures = [await producer.send(TABLE, value) for _ in range(count)]
            await producer.flush()
            seconds = time.perf_counter() - t
            client1, leader1 = thread_cpu(os.getpid()), thread_cpu(leader.pid)
            requests = produce_requests(leader.http_url) - requests0
            for f in futures:
                f.result()  # every record acknowledged
            print(
                f"round {i}: {count / seconds:,.0f} records/s, {count * size / seconds / 1e6:.1f} MB/s | "
                f"client: {busy(client0, client1, seconds)} | leader: {busy(leader0, leader1, seconds)} | "
                f"{requests:.0f} produce requests, {count / max(requests, 1):,.0f} records each"
            )


def main() -> None:
    size = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    print(f"GRPC_EXPERIMENTS={os.environ.get('GRPC_EXPERIMENTS')!r}, load average {os.getloadavg()}")
    with tempfile.TemporaryDirectory(prefix="pipelined-threads-") as d:
        cluster = LocalCluster(Path(d), coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        try:
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                runner.run(rounds(cluster, size, count, n))
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
