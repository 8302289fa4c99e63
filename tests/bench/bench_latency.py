"""Latency under load and fan-out reads through a real local cluster (docs/performance.md; issue rows (f), (g)).

(f) one-at-a-time acks=all sends of 100 B (1-bucket RF 3 table), p50/p99, while another producer — its own
    process, so the two clients do not share an event loop — pipelines 1 KiB records paced at LOAD_MB_S into
    a 3-bucket RF 3 table; the row also names the load rate the machine actually reached.
(g) fan-out: FANOUT_MB of 1 KiB records written to a 3-bucket RF 3 table, then FANOUT_CONSUMERS consumers (one
    client process, one loop) each read all of it from the start: MB/s per consumer (median, slowest) and in
    total. ``FLUSS_BENCH_FANOUT_MB`` overrides the size (default 1 GiB, as the issue asks: the whole module
    ran in 58 s on the 2-core machine; a smaller size gives a quick run).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time

import uvloop

from fluss_py.client import Admin, Consumer, Producer, ProducerOptions
from tests.bench.bench_cluster import _latency, _ready, on_fresh_cluster
from tests.bench.common import p50_p99_ms, row

LATENCY_TABLE, LOAD_TABLE, FANOUT_TABLE = "fluss.lat_under_load", "fluss.lat_load", "fluss.fanout"
LOAD_MB_S, LOAD_SECONDS, LATENCY_N = 50.0, 12.0, 300
FANOUT_CONSUMERS = 10
FANOUT_MB = int(os.environ.get("FLUSS_BENCH_FANOUT_MB", "1024"))
RECORD = 1024


async def _load(bootstrap: str, mb_s: float, seconds: float) -> dict[str, float]:
    """Pipeline 1 KiB records at ``mb_s`` (paced every 10 ms) for ``seconds``; the rate reached."""
    value = b"x" * RECORD
    per_tick = max(1, int(mb_s * 1e6 / RECORD / 100))
    sent = 0
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        await producer.send_and_wait(LOAD_TABLE, value)
        start = time.perf_counter()
        tick = start
        while time.perf_counter() - start < seconds:
            for _ in range(per_tick):
                await producer.send(LOAD_TABLE, value)
            sent += per_tick
            tick += 0.01
            await asyncio.sleep(max(0.0, tick - time.perf_counter()))  # pacing, not synchronisation
        await producer.flush()
        elapsed = time.perf_counter() - start
    return {"mb_s": sent * RECORD / elapsed / 1e6}


async def _under_load(bootstrap: str) -> dict[str, float]:
    async with Admin(bootstrap) as admin:
        await admin.create_table(LATENCY_TABLE, num_buckets=1, replication_factor=3)
        await admin.create_table(LOAD_TABLE, num_buckets=3, replication_factor=3)
        await _ready(admin, LATENCY_TABLE)
        await _ready(admin, LOAD_TABLE)
    quiet = await _latency(bootstrap, LATENCY_N // 2, LATENCY_TABLE)
    load = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.bench.bench_latency", "load", bootstrap, str(LOAD_MB_S), str(LOAD_SECONDS),
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        await asyncio.sleep(2.0)  # the load ramps up (pacing of the measurement, not synchronisation)
        loaded = await _latency(bootstrap, LATENCY_N, LATENCY_TABLE)
        out, _ = await asyncio.wait_for(load.communicate(), LOAD_SECONDS + 60)
    finally:
        if load.returncode is None:
            load.kill()
            await load.wait()
    q50, q99 = p50_p99_ms(quiet)
    p50, p99 = p50_p99_ms(loaded)
    return {"quiet50": q50, "quiet99": q99, "p50": p50, "p99": p99, "load_mb_s": json.loads(out)["mb_s"]}


async def _fanout(bootstrap: str) -> dict[str, float]:
    async with Admin(bootstrap) as admin:
        await admin.create_table(FANOUT_TABLE, num_buckets=3, replication_factor=3)
        await _ready(admin, FANOUT_TABLE)
    n = FANOUT_MB * 1024 * 1024 // RECORD
    value = b"y" * RECORD
    async with Producer(bootstrap, ProducerOptions(acks=-1)) as producer:
        for _ in range(n):
            await producer.send(FANOUT_TABLE, value)
        await producer.flush()

    async def read_all() -> float:
        async with Consumer(bootstrap) as consumer:
            await consumer.assign(FANOUT_TABLE)
            consumer.seek_to_beginning()
            got, start = 0, time.perf_counter()
            deadline = start + 600
            while got < n and time.perf_counter() < deadline:
                got += len(await consumer.poll(timeout=0.5))
            if got < n:
                raise TimeoutError(f"a consumer read {got} of {n} records in 600 s")
            return n * RECORD / (time.perf_counter() - start) / 1e6

    start = time.perf_counter()
    rates = sorted(await asyncio.gather(*(read_all() for _ in range(FANOUT_CONSUMERS))))
    total = FANOUT_CONSUMERS * n * RECORD / (time.perf_counter() - start) / 1e6
    return {"median": rates[len(rates) // 2], "slowest": rates[0], "total": total}


async def _measure(bootstrap: str) -> dict[str, dict[str, float]]:
    return {"load": await _under_load(bootstrap), "fanout": await _fanout(bootstrap)}


def run() -> list[dict]:
    m = on_fresh_cluster("bench-latency-", _measure)
    load, fan = m["load"], m["fanout"]
    name = f"(f) one-at-a-time acks=all 100 B while another producer pipelines {LOAD_MB_S:.0f} MB/s"
    loaded = f"{name} (reached {load['load_mb_s']:.1f} MB/s)"
    fan_name = f"(g) fan-out: {FANOUT_CONSUMERS} consumers each read {FANOUT_MB} MiB from the start"
    return [
        row("(f) one-at-a-time acks=all 100 B, no load, p50", load["quiet50"], "ms"),
        row("(f) one-at-a-time acks=all 100 B, no load, p99", load["quiet99"], "ms"),
        row(f"{loaded}, p50", load["p50"], "ms"),
        row(f"{loaded}, p99", load["p99"], "ms"),
        row(f"{fan_name}: per consumer, median", fan["median"], "MB/s"),
        row(f"{fan_name}: per consumer, slowest", fan["slowest"], "MB/s"),
        row(f"{fan_name}: total", fan["total"], "MB/s"),
    ]


def _load_main(bootstrap: str, mb_s: str, seconds: str) -> None:
    """The load producer's process (started by ``_under_load``): prints its reached rate as JSON."""
    result = uvloop.run(_load(bootstrap, float(mb_s), float(seconds)))
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "load":
        _load_main(*sys.argv[2:])
    else:
        for r in run():
            print(r)
