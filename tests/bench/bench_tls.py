"""TLS + authentication + ACLs against plaintext, same run, same machine (issue 12's targets).

Two local clusters (1 coordinator, 3 tablet servers each) run side by side: plaintext, and secure (TLS with
client certificates on every hop, the admin's password checked per request, its ACLs consulted per request:
it is not a super user). The measurements alternate between them so that the load of a shared machine falls
on both alike: pipelined acks=all produce of 1 KiB records into a 3-bucket RF 3 table (ROUNDS rounds each,
alternating; the best round of each counts), and one-at-a-time acks=all latency of 100 B records (1 bucket,
RF 3; one send on each cluster in turn), p50 / p99. The rows' "peer" column is the plaintext figure.

Targets: secure throughput >= 70 % of plaintext; secure p50 <= plaintext p50 + 0.3 ms.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path

import uvloop

from fluss_py.client import Admin, Producer, ProducerOptions
from fluss_py.security.identity import PeerIdentity
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from tests.bench.bench_cluster import SETTINGS, _ready, _throughput
from tests.bench.common import p50_p99_ms, row

THROUGHPUT_TABLE = "fluss.bench_tls_1k"
LATENCY_TABLE = "fluss.bench_tls_latency"
COUNT, SIZE, ROUNDS, LATENCY_N = 10_000, 1024, 3, 400
KINDS = ("plain", "secure")


async def _setup(bootstrap: str, security: PeerIdentity) -> None:
    async with Admin(bootstrap, security=security) as admin:
        await admin.create_table(THROUGHPUT_TABLE, num_buckets=3, replication_factor=3)
        await admin.create_table(LATENCY_TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, THROUGHPUT_TABLE)
        await _ready(admin, LATENCY_TABLE)


async def _measure(targets: dict[str, tuple[str, PeerIdentity]]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {k: {"tp": 0.0} for k in targets}
    for bootstrap, security in targets.values():
        await _setup(bootstrap, security)
    for _ in range(ROUNDS):
        for kind, (bootstrap, security) in targets.items():
            tp, _mb = await _throughput(bootstrap, THROUGHPUT_TABLE, SIZE, COUNT, security)
            out[kind]["tp"] = max(out[kind]["tp"], tp)
    samples: dict[str, list[float]] = {k: [] for k in targets}
    async with AsyncExitStack() as stack:
        producers = {
            kind: await stack.enter_async_context(Producer(b, ProducerOptions(acks=-1), security=s))
            for kind, (b, s) in targets.items()
        }
        for p in producers.values():
            await p.send_and_wait(LATENCY_TABLE, b"warm-up")
        for i in range(LATENCY_N):
            for kind, p in producers.items():
                t = time.perf_counter()
                await p.send_and_wait(LATENCY_TABLE, b"%0100d" % i)
                samples[kind].append(time.perf_counter() - t)
    for kind in targets:
        out[kind]["p50"], out[kind]["p99"] = p50_p99_ms(samples[kind])
    return out


def _measure_both() -> dict[str, dict[str, float]]:
    with ExitStack() as stack:
        targets: dict[str, tuple[str, PeerIdentity]] = {}
        for kind in KINDS:
            d = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-tls-{kind}-"))
            cluster = LocalCluster(Path(d), 1, 3, overrides=SETTINGS, die_with_parent=True, secure=kind == "secure")
            stack.callback(cluster.close)
            cluster.start(timeout=60)
            cluster.wait_for_leader(30)
            bootstrap = ",".join(cluster.get(n).rpc_address for n in cluster.names(TABLET_SERVER))
            targets[kind] = (bootstrap, cluster.client_identity())
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(_measure(targets))


def run() -> list[dict]:
    results = _measure_both()
    plain, secure = results["plain"], results["secure"]
    ratio = secure["tp"] / plain["tp"]
    return [
        row("plaintext pipelined acks=all RF3 1 KiB", plain["tp"], "records/s"),
        row(
            "TLS+auth+ACLs pipelined acks=all RF3 1 KiB",
            secure["tp"],
            "records/s",
            ">= 70 % of plaintext",
            ratio >= 0.7,
            plain["tp"],
        ),
        row("plaintext one-at-a-time acks=all p50", plain["p50"], "ms"),
        row(
            "TLS+auth+ACLs one-at-a-time acks=all p50",
            secure["p50"],
            "ms",
            "<= plaintext + 0.3",
            secure["p50"] <= plain["p50"] + 0.3,
            plain["p50"],
        ),
        row("plaintext one-at-a-time acks=all p99", plain["p99"], "ms"),
        row("TLS+auth+ACLs one-at-a-time acks=all p99", secure["p99"], "ms", "", True, plain["p99"]),
    ]
