"""A/B of the latency path in one run: ``python -m tests.bench.latency_ab OTHER_TREE [ROUNDS [tp]]``.

Starts two LocalClusters side by side — servers from this tree and servers from OTHER_TREE (a checkout of
another commit, e.g. ``git worktree add /tmp/base main``; its servers run with ``PYTHONPATH=OTHER_TREE``) —
and alternates blocks between them from one client process (this tree's client): 100 one-at-a-time acks=all
sends of 100 B, then produce->consume at 200 records/s for 1 s. Reports p50/p99 of each and the CPU time the
three tablet servers spent per record (``/proc/<pid>/stat``), which the shared machine's load disturbs
less than the wall clock. With ``tp``, each round also measures pipelined acks=all throughput of 100 B and
1 KiB records into a 3-bucket table (30 000 and 10 000 records; ``FLUSS_AB_TP_BUCKETS`` changes the count).
``FLUSS_AB_OTHER_GRPC_EXPERIMENTS=VALUE`` starts the other cluster's processes with ``GRPC_EXPERIMENTS=VALUE``
(with OTHER_TREE = this tree and an empty VALUE: the classic I/O engine against gRPC's default one).
docs/performance.md "Where the latency goes" has the figures.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import uvloop

from fluss_py.client import Admin
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from tests.bench.bench_cluster import E2E_TABLE, LATENCY_TABLE, SETTINGS, _e2e, _latency, _ready, _throughput
from tests.bench.common import p50_p99_ms, servers_from
from tests.bench.scale import cpu_seconds

TP_TABLE = "fluss.ab_throughput"
TP_BUCKETS = int(os.environ.get("FLUSS_AB_TP_BUCKETS", "3"))
OTHER_GRPC_EXPERIMENTS = os.environ.get("FLUSS_AB_OTHER_GRPC_EXPERIMENTS")


def _start(root: Path, tree: str | None, env: dict[str, str] | None = None) -> tuple[LocalCluster, str, list[int]]:
    with servers_from(tree, env):
        cluster = LocalCluster(root, coordinators=1, tablet_servers=3, overrides=SETTINGS, die_with_parent=True)
        cluster.start(timeout=90)
        cluster.wait_for_leader(30)
    names = cluster.names(TABLET_SERVER)
    return cluster, ",".join(cluster.get(n).rpc_address for n in names), [cluster.get(n).pid for n in names]


async def _prepare(bootstrap: str) -> None:
    async with Admin(bootstrap) as admin:
        for table in (LATENCY_TABLE, E2E_TABLE):
            await admin.create_table(table, num_buckets=1, replication_factor=3)
            await _ready(admin, table)
        await admin.create_table(TP_TABLE, num_buckets=TP_BUCKETS, replication_factor=3)
        await _ready(admin, TP_TABLE)


async def _rounds(setups: dict[str, tuple[str, list[int]]], rounds: int, tp: bool) -> dict[str, dict[str, list[float]]]:
    keys = ("one", "e2e", "cpu_one", "cpu_e2e", "tp100", "mb1024", "cpu_tp100", "cpu_mb1024")
    out: dict[str, dict[str, list[float]]] = {name: {k: [] for k in keys} for name in setups}
    for bootstrap, _ in setups.values():
        await _prepare(bootstrap)
    for i in range(rounds):
        order = list(setups.items())
        for name, (bootstrap, pids) in order if i % 2 == 0 else order[::-1]:  # each goes first every other round
            c0 = sum(cpu_seconds(p) for p in pids)
            samples = await _latency(bootstrap, 100)
            c1 = sum(cpu_seconds(p) for p in pids)
            got = await _e2e(bootstrap, 200.0, 1.0)
            c2 = sum(cpu_seconds(p) for p in pids)
            out[name]["one"] += samples
            out[name]["e2e"] += got
            out[name]["cpu_one"].append((c1 - c0) / 101 * 1e3)  # ms per send (+ the warm-up)
            out[name]["cpu_e2e"].append((c2 - c1) / 201 * 1e3)
            if tp:
                out[name]["tp100"].append((await _throughput(bootstrap, TP_TABLE, 100, 30_000))[0])
                c3 = sum(cpu_seconds(p) for p in pids)
                out[name]["mb1024"].append((await _throughput(bootstrap, TP_TABLE, 1024, 10_000))[1])
                c4 = sum(cpu_seconds(p) for p in pids)
                out[name]["cpu_tp100"].append((c3 - c2) / 30_001 * 1e6)  # us per record
                out[name]["cpu_mb1024"].append((c4 - c3) / (10_001 * 1024 / 1e6))  # s per MB
    return out


def main() -> None:
    other = sys.argv[1]
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    tp = len(sys.argv) > 3 and sys.argv[3] == "tp"
    print("load average before", os.getloadavg())
    with tempfile.TemporaryDirectory(prefix="latency-ab-") as d:
        clusters = []
        try:
            a = _start(Path(d) / "this", None)
            clusters.append(a[0])
            other_env = None if OTHER_GRPC_EXPERIMENTS is None else {"GRPC_EXPERIMENTS": OTHER_GRPC_EXPERIMENTS}
            b = _start(Path(d) / "other", other, other_env)
            clusters.append(b[0])
            label = other if other_env is None else f"{other}, GRPC_EXPERIMENTS={OTHER_GRPC_EXPERIMENTS!r}"
            setups = {"this tree": (a[1], a[2]), f"other ({label})": (b[1], b[2])}
            with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
                out = runner.run(_rounds(setups, rounds, tp))
        finally:
            for c in clusters:
                c.close()
    for name, r in out.items():
        p50, p99 = p50_p99_ms(r["one"])
        e50, e99 = p50_p99_ms(r["e2e"])
        cpu1 = sorted(r["cpu_one"])[len(r["cpu_one"]) // 2]
        cpu2 = sorted(r["cpu_e2e"])[len(r["cpu_e2e"]) // 2]
        print(
            f"{name:<40} one-at-a-time p50 {p50:.3f} p99 {p99:.3f} ms, servers' CPU {cpu1:.3f} ms/send | "
            f"produce->consume p50 {e50:.3f} p99 {e99:.3f} ms, servers' CPU {cpu2:.3f} ms/record"
        )
        if tp:
            med = {k: sorted(r[k])[len(r[k]) // 2] for k in ("tp100", "mb1024", "cpu_tp100", "cpu_mb1024")}
            print(
                f"{'':<40} pipelined 100 B median {med['tp100']:.0f} records/s, servers' CPU {med['cpu_tp100']:.1f} "
                f"us/record; 1 KiB median {med['mb1024']:.1f} MB/s, servers' CPU {med['cpu_mb1024'] * 1e3:.1f} ms/MB"
            )
            print(f"{'':<40} (every round: {[round(x) for x in r['tp100']]}, {[round(x, 1) for x in r['mb1024']]})")
    print("load average after", os.getloadavg())


if __name__ == "__main__":
    main()
