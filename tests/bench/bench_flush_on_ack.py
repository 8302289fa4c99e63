"""``log.flush.on-ack`` against the default, in the same run on the same local cluster (docs/performance.md
"fsync on ack"; docs/replication.md "Durable acknowledgement").

ZooKeeper, 1 coordinator and 3 tablet-server processes (deploy/conf settings, data on this machine's disk),
two tables per workload that differ only in the property, written alternately (ROUNDS times each, the mean
reported) so that both see the same machine load:

- pipelined acks=all RF3 throughput of 1 KiB records into 3 buckets (client defaults, as bench_cluster (a));
  target: with fsync on ack >= 40 % of the default;
- one-at-a-time acks=all latency (send_and_wait of 100 B, 1 bucket), p50 / p99.
"""

from __future__ import annotations

import statistics

from fluss_py.client import Admin
from tests.bench.bench_cluster import _latency, _ready, _throughput, on_fresh_cluster
from tests.bench.common import p50_p99_ms, row

MODES = {"default": {}, "log.flush.on-ack": {"log.flush.on-ack": "true"}}
SIZE, COUNT, ROUNDS = 1024, 20_000, 2
LATENCY_N = 300
TARGET_RATIO = 0.4


def _table(kind: str, mode: str) -> str:
    return f"fluss.bench_{kind}_{'on_ack' if MODES[mode] else 'default'}"


async def _measure(bootstrap: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {m: {} for m in MODES}
    async with Admin(bootstrap) as admin:
        for mode, props in MODES.items():
            for kind, buckets in (("throughput", 3), ("latency", 1)):
                table = _table(kind, mode)
                await admin.create_table(table, num_buckets=buckets, replication_factor=3, properties=props)
                await _ready(admin, table)
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    for _ in range(ROUNDS):
        for mode in MODES:
            records_per_s, _ = await _throughput(bootstrap, _table("throughput", mode), SIZE, COUNT)
            samples[mode].append(records_per_s)
    for mode in MODES:
        out[mode]["tp"] = statistics.mean(samples[mode])
        out[mode]["p50"], out[mode]["p99"] = p50_p99_ms(await _latency(bootstrap, LATENCY_N, _table("latency", mode)))
    return out


def run() -> list[dict]:
    m = on_fresh_cluster("bench-flush-on-ack-", _measure)
    base, durable = m["default"], m["log.flush.on-ack"]
    ratio = durable["tp"] / base["tp"]
    rows = []
    for mode, f in m.items():
        rows.append(row(f"pipelined acks=all RF3 1 KiB, {mode}", f["tp"], "records/s"))
        rows.append(row(f"pipelined acks=all RF3 1 KiB, {mode}", f["tp"] * SIZE / 1e6, "MB/s"))
    rows.append(row("fsync on ack / default, pipelined 1 KiB", ratio * 100, "%", ">= 40", ratio >= TARGET_RATIO))
    for mode, f in m.items():
        rows.append(row(f"one-at-a-time acks=all p50, {mode}", f["p50"], "ms"))
        rows.append(row(f"one-at-a-time acks=all p99, {mode}", f["p99"], "ms"))
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
