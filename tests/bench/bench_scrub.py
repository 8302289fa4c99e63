"""Scrubbing (docs/storage.md §9): how fast the CRC check reads, and what a running scrubber costs produce.

- the check alone on one thread, from the page cache (``verify_segment_file`` over 256 MiB of 64 KiB batches),
  and an unclean-start open of that log (every segment below the recovery point checked), and of a log of one
  256 MiB segment holding the recovery point at its end (checked up to it: issue 36);
- acks=all latency (1 KiB record, one request at a time, RF 3) in the replica layer of ``bench_replica``
  (three ReplicaManagers in one process), with no scrubber, with the scrubber at the default
  ``log.scrub.rate`` (8 MB/s) and with it unthrottled, each over 256 MiB of closed segments on the leader's
  server. The scrubber's worker thread competes for the GIL with the event loop: that is the cost measured.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from pathlib import Path

import uvloop

from fluss_py import config as cfg
from fluss_py.log import LogConfig, LogTablet
from fluss_py.log.scrub import verify_segment_file
from fluss_py.record import RecordBatchBuilder
from fluss_py.types import TableBucket
from tests.bench.bench_replica import R3, SETTINGS, TB
from tests.bench.common import p50_p99_ms, row
from tests.unit.replica.fakes import FakeClock, batch
from tests.unit.replica.harness import ReplicaCluster

MiB = 1024 * 1024
SCRUBBED = TableBucket(9, 0)
DEFAULT_RATE = int(cfg.LOG_SCRUB_RATE.default)


def _batch_64k() -> bytes:
    b = RecordBatchBuilder(max_bytes=64 * 1024)
    value = os.urandom(1000)
    while b.append(value, timestamp_ms=1_700_000_000_000):
        pass
    return b.build()


def _fill(c: ReplicaCluster, total: int) -> None:
    """A log on server 1 that only the scrubber reads: ``total`` bytes in 64 MiB segments."""
    t = c.log_managers[1].get_or_create(SCRUBBED, LogConfig(segment_bytes=64 * MiB, max_batch_bytes=8 * MiB))
    raw = _batch_64k()
    for _ in range(total // len(raw)):
        t.append_as_leader(raw, 1)
    t.roll()
    t.flush()


def bench_check_rate(c: ReplicaCluster) -> dict:
    t = c.log_managers[1].get(SCRUBBED)
    assert t is not None
    started, n = time.perf_counter(), 0
    for seg in t.segments[:-1]:
        assert verify_segment_file(seg.log_path, seg.base_offset, seg.size) is None
        n += seg.size
    rate = n / (time.perf_counter() - started) / 1e6
    return row("scrub: CRC check, one thread, page cache", rate, "MB/s", f">= {DEFAULT_RATE / 1e6:.0f}", rate >= 8)


def bench_unclean_open(c: ReplicaCluster) -> dict:
    """Open the scrubbed log as after a crash with everything flushed: every segment is CRC-checked."""
    t = c.log_managers[1].get(SCRUBBED)
    assert t is not None
    size, leo, path = t.size_in_bytes, t.log_end_offset, t.dir
    started = time.perf_counter()
    again = LogTablet.open(path, SCRUBBED, t.config, recovery_point=leo, clean_shutdown=False)
    elapsed = time.perf_counter() - started
    assert again.corrupt_from is None and again.verified_bytes >= size - 64 * MiB
    again.close_without_flush()
    return row(f"unclean-start open of {size / MiB:.0f} MiB (64 MiB segments, all CRC-checked)", elapsed, "s")


def bench_unclean_open_of_the_recovery_point_segment(root: Path, total: int) -> list[dict]:
    """One segment of ``total`` bytes, everything flushed, opened as after a crash: the segment holds the
    recovery point (at its end), so its bytes are checked by the walk up to it (issue 36: they used to be
    loaded from the index unchecked). Reports the open's time and the check's rate."""
    config = LogConfig(segment_bytes=1 << 30, max_batch_bytes=8 * MiB)
    path = root / "9-1"
    t = LogTablet.open(path, TableBucket(9, 1), config)
    raw = _batch_64k()
    for _ in range(total // len(raw)):
        t.append_as_leader(raw, 1)
    t.flush()
    leo, size = t.log_end_offset, t.size_in_bytes
    t.close_without_flush()
    started = time.perf_counter()
    again = LogTablet.open(path, TableBucket(9, 1), config, recovery_point=leo, clean_shutdown=False)
    elapsed = time.perf_counter() - started
    assert len(again.segments) == 1 and again.corrupt_from is None and again.verified_bytes == size
    again.close_without_flush()
    return [
        row(f"unclean-start open of one {size / MiB:.0f} MiB segment holding the recovery point", elapsed, "s"),
        row("its check below the recovery point (header + CRC-32C + continuity)", size / elapsed / 1e6, "MB/s"),
    ]


async def _latencies(c: ReplicaCluster, seconds: float) -> list[float]:
    """acks=all produces of one 1 KiB record, one at a time, for ``seconds``."""
    leader, out, i = c.managers[1], [], 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        data = batch(b"%01024d" % i)
        t = time.perf_counter()
        r = await leader.append(-1, 5.0, {TB: data})
        out.append(time.perf_counter() - t)
        assert r[TB].error is None, r[TB].error
        i += 1
    return out


async def _phase(c: ReplicaCluster, rate: int, seconds: float) -> tuple[list[float], float]:
    """Latencies while server 1 scrubs at ``rate`` bytes/s (0: unthrottled, -1: no scrubber), and the scrub
    rate achieved meanwhile (MB/s)."""
    faults, task = c.managers[1].faults, None
    if rate >= 0:
        faults.scrub_rate, faults.scrub_interval_s = rate, 0.0
        task = c.managers[1].spawn(f"bench-scrub-{rate}", faults._scrub_loop, once=True)
        await asyncio.sleep(0.2)  # the scrubber is reading
    before, started = faults.scrubbed_bytes, time.perf_counter()
    lat = await _latencies(c, seconds)
    mbs = (faults.scrubbed_bytes - before) / (time.perf_counter() - started) / 1e6
    if task is not None:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    return lat, mbs


async def _main(root: Path) -> list[dict]:
    c = ReplicaCluster(3, FakeClock(), root, SETTINGS)
    rows = []
    try:
        await c.create(TB, R3)
        _fill(c, 256 * MiB)
        rows.append(bench_check_rate(c))
        rows.append(bench_unclean_open(c))
        rows += bench_unclean_open_of_the_recovery_point_segment(root, 256 * MiB)
        await _latencies(c, 0.5)  # warm up
        # alternate the phases (this machine is shared: a burst of load then hits both, not one)
        samples: dict[int, list[float]] = {-1: [], DEFAULT_RATE: [], 0: []}
        rates: dict[int, list[float]] = {-1: [], DEFAULT_RATE: [], 0: []}
        for _ in range(2):
            for rate in (-1, DEFAULT_RATE, 0):
                lat, mbs = await _phase(c, rate, 2.0)
                samples[rate] += lat
                rates[rate].append(mbs)
        base50, base99 = p50_p99_ms(samples[-1])
        rows.append(row("acks=all 1 KiB p50, no scrubber", base50, "ms"))
        rows.append(row("acks=all 1 KiB p99, no scrubber", base99, "ms"))
        for rate, what in ((DEFAULT_RATE, "scrubbing at 8 MB/s (default)"), (0, "scrubbing unthrottled")):
            p50, p99 = p50_p99_ms(samples[rate])
            rows.append(row(f"acks=all 1 KiB p50, {what}", p50, "ms", "<= 1.2x no scrubber", p50 <= 1.2 * base50))
            rows.append(row(f"acks=all 1 KiB p99, {what}", p99, "ms"))
            rows.append(row(f"scrub rate achieved, {what}", sum(rates[rate]) / len(rates[rate]), "MB/s"))
    finally:
        await c.close()
    return rows


def run() -> list[dict]:
    with (
        tempfile.TemporaryDirectory(prefix="bench-scrub-", dir=os.environ.get("BENCH_DIR")) as d,
        asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner,
    ):
        return runner.run(_main(Path(d)))


if __name__ == "__main__":
    for r in run():
        print(r)
