"""The benchmark workloads against NATS JetStream (a 3-node R3 file stream "F", docs/performance.md):
the same shapes as the fluss_py workloads so the suite can print the ratio.

- ``throughput``: ``js.publish_async`` with at most 1000 pending, ``count`` records of ``size`` bytes;
- ``latency``: ``await js.publish`` one at a time;
- ``e2e_latency``: one record every 1/rate s, a push subscription receives it; per record, receive - send;
- ``failover_trial``: §6 (c) on a fresh cluster: one 100 B publish every 20 ms with ``Nats-Msg-Id``, each
  attempt with a 1 s timeout, retried after 50 ms for up to 30 s; the stream leader's server gets kill -9 at
  2 s; the trial ends 3 s after the first ack following the kill (bounded at 30 s; §6 ran 25 s, a shorter tail
  only trims sends after the stall); then every message is read back with ``js.get_msg``.

All coroutines run on the caller's loop; ``failover_trial`` is synchronous (it owns the processes).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from pathlib import Path

import nats
from nats.js.api import DeliverPolicy, StorageType, StreamConfig

from tests.bench.common import paced
from tests.bench.peers.nats import NatsCluster

STREAM = "F"


async def _silent(_e: Exception) -> None:  # nats-py prints reconnect tracebacks by default
    return None


async def connect(urls: list[str]):
    nc = await nats.connect(servers=urls, error_cb=_silent, max_reconnect_attempts=-1, reconnect_time_wait=0.05)
    js = nc.jetstream(publish_async_max_pending=1000)
    return nc, js


async def add_stream(js, name: str = STREAM, subject: str = "f.>") -> None:
    config = StreamConfig(name=name, subjects=[subject], storage=StorageType.FILE, num_replicas=3, duplicate_window=120)
    await js.add_stream(config)


async def throughput(urls: list[str], size: int, count: int) -> tuple[float, float]:
    """(records/s, MB/s) of ``count`` pipelined publishes to a fresh stream."""
    nc, js = await connect(urls)
    try:
        stream = f"T{size}"
        await add_stream(js, stream, f"t{size}.>")
        payload = b"x" * size
        await js.publish(f"t{size}.x", payload, timeout=5)
        t = time.perf_counter()
        futures = [await js.publish_async(f"t{size}.x", payload) for _ in range(count)]
        await asyncio.gather(*futures)
        elapsed = time.perf_counter() - t
    finally:
        await nc.close()
    return count / elapsed, count * size / elapsed / 1e6


async def latency(urls: list[str], n: int) -> list[float]:
    nc, js = await connect(urls)
    try:
        await add_stream(js, "L", "l.>")
        await js.publish("l.x", b"warm-up", timeout=5)
        out = []
        for i in range(n):
            value = b"%0100d" % i
            t = time.perf_counter()
            await js.publish("l.x", value, timeout=5)
            out.append(time.perf_counter() - t)
    finally:
        await nc.close()
    return out


async def e2e_latency(urls: list[str], rate: float, seconds: float) -> list[float]:
    """Produce -> consume latency of records sent at ``rate`` per second for ``seconds``."""
    nc, js = await connect(urls)
    sent: dict[int, float] = {}
    got: list[float] = []
    try:
        await add_stream(js, "E", "e.>")

        async def on_msg(msg) -> None:
            i = int(msg.data[:10])
            if i in sent:
                got.append(time.perf_counter() - sent[i])
            await msg.ack()

        sub = await js.subscribe("e.x", cb=on_msg, deliver_policy=DeliverPolicy.NEW)
        n = int(rate * seconds)
        async for i in paced(rate, n):
            sent[i] = time.perf_counter()
            await js.publish("e.x", b"%010d" % i + b"x" * 90, timeout=5)
        deadline = time.monotonic() + 5
        while len(got) < n and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        await sub.unsubscribe()
    finally:
        await nc.close()
    return got


@dataclass
class FailoverTrial:
    stall_s: float
    failed_attempts: int
    acked: int
    missing: int
    duplicates: int


async def _failover(cluster: NatsCluster, kill_at: float = 2.0, tail: float = 3.0, bound: float = 30.0):
    nc, js = await connect(cluster.urls)
    try:
        await add_stream(js)
        leader = (await js.stream_info(STREAM)).cluster.leader
        acked: set[int] = set()
        stalls: list[float] = []
        failed = 0
        t0 = time.monotonic()
        t_kill: float | None = None
        first_ack_after: float | None = None
        i = 0
        while True:
            now = time.monotonic()
            if t_kill is None and now - t0 >= kill_at:
                t_kill = cluster.kill(leader)
            if (first_ack_after is not None and now - first_ack_after >= tail) or now - t0 > bound:
                break
            first = time.monotonic()
            while True:
                try:
                    await js.publish("f.x", b"%08d" % i + b"x" * 92, timeout=1.0, headers={"Nats-Msg-Id": f"m{i}"})
                    break
                except Exception:
                    failed += 1
                    if time.monotonic() - first > 30:
                        raise
                    await asyncio.sleep(0.05)
            end = time.monotonic()
            acked.add(i)
            stalls.append(end - first)
            if t_kill is not None and first_ack_after is None and end > t_kill:
                first_ack_after = end
            i += 1
            await asyncio.sleep(0.02)
        last = (await js.stream_info(STREAM)).state.last_seq
        seen: list[int] = []
        for seq in range(1, last + 1):
            msg = await js.get_msg(STREAM, seq)
            seen.append(int(msg.data[:8]))
    finally:
        await nc.close()
    return FailoverTrial(
        stall_s=max(stalls),
        failed_attempts=failed,
        acked=len(acked),
        missing=len(acked - set(seen)),
        duplicates=len(seen) - len(set(seen)),
    )


def failover_trial(directory: Path) -> FailoverTrial:
    """One §6 (c) trial on a fresh 3-node cluster in ``directory`` (stopped afterwards)."""
    with NatsCluster(directory) as cluster, asyncio.Runner() as runner:
        return runner.run(_failover(cluster))
