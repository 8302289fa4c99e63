"""The leader's record check (issue 13): what it costs per batch on the produce path.

``validate_leader_append`` is timed on 256 KiB batches (the producer's default batch size) with and without
the record-level check (``RecordBatch.ensure_valid_records``: every record's lengths and the count, compressed
records decompressed up to log.max-batch-size), for the record shapes that take different paths:

- 100 B values, all the same size: the strided check of the whole batch;
- 50..150 B and 0.5..1.5 KiB values: the walk, one ``struct`` call per record;
- the same 0.5..1.5 KiB records compressed with lz4 and zstd: decompression, then the walk.

Rows: the whole validation and the record check in it, microseconds per batch; the produce path's cost per
batch to compare them with is in docs/performance.md. Not assertions.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from fluss_py.log import LogConfig, LogTablet
from fluss_py.log.validator import validate_leader_append
from fluss_py.log.writer_state import WriterStateManager
from fluss_py.record import CompressionType, RecordBatch, RecordBatchBuilder
from fluss_py.types import TableBucket
from tests.bench.common import row

BATCH = 256 * 1024
MAX_BATCH = 8 * 1024 * 1024
TB = TableBucket(1, 0)
SECONDS = 1.5


def _batch(
    sizes: Callable[[random.Random], int], compression: CompressionType = CompressionType.NONE, keys: int = 1000
) -> bytes:
    rnd = random.Random(7)
    words = [os.urandom(6).hex().encode() for _ in range(64)]  # compressible, not trivially so
    b = RecordBatchBuilder(compression=compression, max_bytes=BATCH)
    while True:
        n = sizes(rnd)
        value = b" ".join(rnd.choice(words) for _ in range(n // 13 + 1))[:n]
        if not b.append(value, key=b"key-%03d" % rnd.randrange(keys), timestamp_ms=1_700_000_000_000):
            return b.build()


SHAPES: dict[str, Callable[[], bytes]] = {
    "100 B values and 7 B keys (uniform)": lambda: _batch(lambda r: 100),
    "50-150 B values": lambda: _batch(lambda r: r.randint(50, 150)),
    "0.5-1.5 KiB values": lambda: _batch(lambda r: r.randint(512, 1536)),
    "0.5-1.5 KiB values, lz4": lambda: _batch(lambda r: r.randint(512, 1536), CompressionType.LZ4),
    "0.5-1.5 KiB values, zstd": lambda: _batch(lambda r: r.randint(512, 1536), CompressionType.ZSTD),
}


def _best_per_call(fns: list[Callable[[], object]], rounds: int = 5) -> list[float]:
    """Seconds per call of each function: the best of ``rounds`` rounds, the functions interleaved in each
    round (the machine is shared: load comes and goes)."""
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, fn in enumerate(fns):
            n, started = 0, time.perf_counter()
            while time.perf_counter() - started < SECONDS / rounds:
                fn()
                n += 1
            best[i] = min(best[i], (time.perf_counter() - started) / n)
    return best


def run() -> list[dict]:
    writers = WriterStateManager(Path("/nonexistent"))
    rows = []
    for name, make in SHAPES.items():
        raw = make()
        batch = RecordBatch(raw)
        whole, check = _best_per_call(
            [
                lambda raw=raw: validate_leader_append(bytearray(raw), 0, 0, MAX_BATCH, writers, TB),
                lambda batch=batch: batch.ensure_valid_records(MAX_BATCH),
            ]
        )
        label = f"256 KiB batch of {batch.record_count} records, {name}"
        rows.append(row(f"leader validation, {label}", whole * 1e6, "us/batch"))
        rows.append(row("  of which the record check", check * 1e6, "us/batch"))
    rows += _append_with_and_without_the_check()
    return rows


def _append_with_and_without_the_check() -> list[dict]:
    """``LogTablet.append_as_leader`` (validation, stamping, one write to the page cache) of 256 KiB batches
    of 50..150 B records, with the record check and with it replaced by a no-op, interleaved."""
    raw = SHAPES["50-150 B values"]()
    real = RecordBatch.ensure_valid_records
    with tempfile.TemporaryDirectory(prefix="bench-validation-", dir=os.environ.get("BENCH_DIR")) as root:
        log = LogTablet.open(Path(root) / "1-0", TB, LogConfig(segment_bytes=1 << 30, max_batch_bytes=MAX_BATCH))

        def append() -> None:
            if log.size_in_bytes > 512 * 1024 * 1024:  # keep the page cache small: start again
                log.truncate_fully_and_start_at(log.log_end_offset)
            log.append_as_leader(raw, 1)

        def without() -> None:
            RecordBatch.ensure_valid_records = lambda self, max_bytes: None  # type: ignore[method-assign]
            try:
                append()
            finally:
                RecordBatch.ensure_valid_records = real  # type: ignore[method-assign]

        with_check, without_check = _best_per_call([append, without], rounds=7)
        log.close()
    mb = len(raw) / 1e6
    return [
        row("leader append, 256 KiB batches of 50-150 B records, with the record check", mb / with_check, "MB/s"),
        row("leader append, the same without it", mb / without_check, "MB/s"),
    ]
