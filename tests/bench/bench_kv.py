"""The KV of primary-key tables (docs/primary-key-tables.md §4): what a leader pays to turn upserts into the
changelog, and what a replica pays to apply committed changes to its RocksDB (the hot standbys' cost).

In process, no cluster: a real LogTablet and KvTablet in a temporary directory. Rows are 100 B (``id BIGINT,
name STRING, score DOUBLE, ts TIMESTAMP, payload STRING``), client batches of 1,000 rows, half of them new keys
and half updates of keys already written (so the leader reads old rows from RocksDB and its pre-write buffer).

(a) leader: ``KvTablet.append_as_leader`` (checks, old row, merge, changelog batch, append, buffer), rows per
    CPU second of the process;
(b) apply: ``KvTablet.apply_committed`` of that log in the apply task's rounds (64 KiB), CPU microseconds per
    changelog record: the process's CPU (RocksDB's own threads included) and the calling thread's alone.
Not assertions.
"""

from __future__ import annotations

import random
import tempfile
import time
from datetime import datetime
from pathlib import Path

from fluss_py.kv.store import KvResources
from fluss_py.kv.tablet import KvTable, KvTablet
from fluss_py.log import LogConfig
from fluss_py.log.tablet import LogTablet
from fluss_py.record.batch import KV_BATCH, RecordBatchBuilder
from fluss_py.replica.kv_apply import APPLY_ROUND_BYTES, APPLY_ROUND_RECORDS
from fluss_py.schema import KvOp, encode_kv_value, parse_schema
from fluss_py.types import TableBucket
from tests.bench.common import row

ROWS = 200_000
BATCH = 1_000
TB = TableBucket(1, 0)
SCHEMA = parse_schema("id BIGINT, name STRING, score DOUBLE, ts TIMESTAMP, payload STRING", "id")


def _batches(table: KvTable) -> list[bytes]:
    codec, rnd, ts = table.codec, random.Random(5), datetime(2024, 5, 1, 12, 0)
    out, written = [], 0
    for _ in range(0, ROWS, BATCH):
        builder = RecordBatchBuilder(max_bytes=1 << 24, attributes=KV_BATCH)
        for _row in range(BATCH):
            i = written if rnd.random() < 0.5 or written == 0 else rnd.randrange(written)
            written += i == written
            values = [i, f"name-{i % 100_000:05d}", rnd.random(), ts, "p" * 50]
            builder.append(encode_kv_value(KvOp.UPSERT, codec.encode_row(values)), codec.encode_key([i]), 1_000)
        out.append(builder.build())
    return out


def run() -> list[dict]:
    table = KvTable.of(SCHEMA, {}, 1)
    batches = _batches(table)
    resources = KvResources(256 * 1024 * 1024)
    with tempfile.TemporaryDirectory() as d:
        config = LogConfig(timestamp_after_max_s=0)
        leader_log = LogTablet.open(Path(d) / "leader" / "1-0", TB, config)
        leader_log.holds_changelog = True
        leader = KvTablet.open(TB, leader_log, table, resources)
        leader.become_leader(leader_log)
        started = time.process_time()
        for i, records in enumerate(batches):
            leader.append_as_leader(leader_log, records, 0)
            if i % 10 == 9:  # committed and applied now and then, as the HW moves: the buffer stays small
                leader_log.update_high_watermark(leader_log.log_end_offset)
                while leader.applied_offset < leader_log.high_watermark:
                    leader.apply_committed(leader_log, APPLY_ROUND_BYTES, APPLY_ROUND_RECORDS)
        leader_s = time.process_time() - started
        changelog_bytes = leader_log.size_in_bytes

        follower_log = LogTablet.open(Path(d) / "follower" / "1-0", TB, config)
        follower_log.holds_changelog = True
        offset = 0
        while offset < leader_log.log_end_offset:
            follower_log.append_as_follower(leader_log.read(offset, 1 << 20, leader_log.log_end_offset).records)
            offset = follower_log.log_end_offset
        follower_log.update_high_watermark(follower_log.log_end_offset)
        follower = KvTablet.open(TB, follower_log, table, resources)
        cpu, thread = time.process_time(), time.thread_time()
        rounds = 0
        while follower.applied_offset < follower_log.high_watermark:
            follower.apply_committed(follower_log, APPLY_ROUND_BYTES, APPLY_ROUND_RECORDS)
            rounds += 1
        apply_cpu, apply_thread = time.process_time() - cpu, time.thread_time() - thread
        rows_in_kv = len(follower.store.items())
        for kv, lg in ((leader, leader_log), (follower, follower_log)):
            kv.close()
            lg.close()
    per_row = 1e6 / ROWS
    return [
        row("leader: upserts -> changelog appended (100 B rows)", ROWS / leader_s, "rows/s (CPU)"),
        row("apply: CPU per changelog record (process)", apply_cpu * per_row, "us/row"),
        row("apply: CPU per changelog record (applying thread)", apply_thread * per_row, "us/row"),
        row("apply: rounds (64 KiB, 512 records at most)", rounds, "rounds"),
        row("changelog bytes per row", changelog_bytes / ROWS, "B/row"),
        row("rows in the KV", rows_in_kv, "rows"),
    ]


if __name__ == "__main__":
    for r in run():
        print(f"{r['name']}: {r['value']:,.2f} {r['unit']}")
