"""Storage benchmarks (targets from issue 3, on the 2-core machine; not assertions).

- append of 64 KiB batches as leader (validate CRC + header, stamp offsets/epoch, one os.write) >= 400 MB/s
- read whole batches from page cache via LogTablet.read (1 MiB per call) >= 1 GB/s
- building batches of 100-byte records on one core >= 300k records/s
- reopening a 1 GiB log after a clean shutdown <= 0.5 s
- reopening a 1 GiB log after kill -9 with a 128 MiB unflushed tail <= 3 s
  (the kill is a real SIGKILL of a child process that wrote the tail; the page cache survives, as with kill -9)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fluss_py.log import LogConfig, LogTablet
from fluss_py.record import RecordBatchBuilder
from fluss_py.types import TableBucket

MiB = 1024 * 1024
GiB = 1024 * MiB
TB = TableBucket(1, 0)
CONFIG = LogConfig(segment_bytes=GiB, index_interval_bytes=4096, max_batch_bytes=8 * MiB)


def _batch_64k() -> bytes:
    b = RecordBatchBuilder(max_bytes=64 * 1024)
    value = os.urandom(1000)
    while b.append(value, timestamp_ms=1_700_000_000_000):
        pass
    return b.build()


def bench_build() -> dict:
    value = b"x" * 100
    n = 0
    started = time.perf_counter()
    while time.perf_counter() - started < 2.0:
        b = RecordBatchBuilder(max_bytes=1 * MiB)
        while b.append(value):
            n += 1
        b.build()
    rate = n / (time.perf_counter() - started)
    return dict(name="build batches of 100 B records", value=rate, unit="records/s", target=">= 300000", ok=rate >= 3e5)


def bench_append(d: Path, total: int) -> tuple[dict, LogTablet]:
    raw = _batch_64k()
    t = LogTablet.open(d, TB, CONFIG)
    n = total // len(raw)
    started = time.perf_counter()
    for _ in range(n):
        t.append_as_leader(raw, 1)
    elapsed = time.perf_counter() - started
    rate = n * len(raw) / elapsed / 1e6
    return dict(name="append 64 KiB batches (leader)", value=rate, unit="MB/s", target=">= 400", ok=rate >= 400), t


def bench_read(t: LogTablet) -> dict:
    offset, nbytes = t.log_start_offset, 0
    started = time.perf_counter()
    while offset < t.log_end_offset:
        info = t.read(offset, 1 * MiB, t.log_end_offset)
        nbytes += len(info.records)
        # next offset from the last batch header: one int parse per call, no per-record work
        last = _last_next_offset(info.records)
        offset = last
    rate = nbytes / (time.perf_counter() - started) / 1e9
    return dict(name="read from page cache (1 MiB fetches)", value=rate, unit="GB/s", target=">= 1", ok=rate >= 1)


def _last_next_offset(data: bytes) -> int:
    pos, nxt = 0, 0
    while pos < len(data):
        base = int.from_bytes(data[pos : pos + 8], "big")
        length = int.from_bytes(data[pos + 8 : pos + 12], "big")
        delta = int.from_bytes(data[pos + 23 : pos + 27], "big")
        nxt = base + delta + 1
        pos += length + 12
    return nxt


def bench_clean_reopen(d: Path) -> dict:
    best = None
    for _ in range(3):
        started = time.perf_counter()
        t = LogTablet.open(d, TB, CONFIG, clean_shutdown=True)
        elapsed = time.perf_counter() - started
        t.close()
        best = elapsed if best is None else min(best, elapsed)
    size = sum(p.stat().st_size for p in d.glob("*.log")) / GiB
    return dict(
        name=f"reopen {size:.2f} GiB after clean shutdown", value=best, unit="s", target="<= 0.5", ok=best <= 0.5
    )


_CHILD = r"""
import sys, os
from pathlib import Path
from fluss_py.log import LogConfig, LogTablet
from fluss_py.record import RecordBatchBuilder
from fluss_py.types import TableBucket
d, rp, tail = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t = LogTablet.open(d, TableBucket(1, 0), LogConfig(segment_bytes=1 << 30), clean_shutdown=True)
b = RecordBatchBuilder(max_bytes=65536)
v = os.urandom(1000)
while b.append(v, timestamp_ms=1_700_000_000_000):
    pass
raw = b.build()
written = 0
while written < tail:
    t.append_as_leader(raw, 2)
    written += len(raw)
print("done", t.log_end_offset, flush=True)
sys.stdin.read()  # wait to be killed
"""


def bench_unclean_reopen(d: Path, t: LogTablet, tail: int) -> dict:
    """Flush the log, then a child appends ``tail`` bytes without flushing and is SIGKILLed."""
    t.flush()
    rp = t.recovery_point
    t.close()
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(d), str(rp), str(tail)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        line = proc.stdout.readline()
        assert line.startswith(b"done"), line
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
    leo = int(line.split()[1])
    started = time.perf_counter()
    t2 = LogTablet.open(d, TB, CONFIG, recovery_point=rp, clean_shutdown=False)
    elapsed = time.perf_counter() - started
    assert t2.log_end_offset == leo, (t2.log_end_offset, leo)
    size = t2.size_in_bytes / GiB
    t2.close()
    return dict(
        name=f"reopen {size:.2f} GiB after kill -9 ({tail // MiB} MiB unflushed)",
        value=elapsed,
        unit="s",
        target="<= 3",
        ok=elapsed <= 3,
    )


def run() -> list[dict]:
    root = Path(tempfile.mkdtemp(prefix="bench-log-", dir=os.environ.get("BENCH_DIR")))
    try:
        results = [bench_build()]
        d = root / "1-0"
        tail = 128 * MiB
        append, t = bench_append(d, GiB - tail)
        results.append(append)
        results.append(bench_read(t))
        results.append(bench_unclean_reopen(d, t, tail))
        results.append(bench_clean_reopen(d))
        return results
    finally:
        shutil.rmtree(root, ignore_errors=True)
