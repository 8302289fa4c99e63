"""TLS + authentication + ACLs against plaintext, same run, same machine (issue 12's targets).

Two local clusters (1 coordinator, 3 tablet servers each) run side by side: plaintext, and secure (TLS with
client certificates on every hop, the admin's password checked per request, its ACLs consulted per request:
it is not a super user). The measurements alternate between them so that the load of a shared machine falls
on both alike: pipelined acks=all produce of 1 KiB records into a 3-bucket RF 3 table (ROUNDS rounds each,
alternating; the best round of each counts), and one-at-a-time acks=all latency of 100 B records (1 bucket,
RF 3; one send on each cluster in turn), p50 / p99, and the CPU time the three tablet servers spent per
one-at-a-time send (``/proc/<pid>/stat``; the shared machine's load disturbs it less than the wall clock).
The rows' "peer" column is the plaintext figure.

Targets: secure throughput >= 70 % of plaintext; secure p50 <= plaintext p50 + 0.3 ms.

Before/after in one run: with ``FLUSS_BENCH_TLS_BASE=OTHER_TREE`` (a checkout of another commit, e.g.
``git worktree add /tmp/base main``) a third cluster, secure, runs OTHER_TREE's servers
(``PYTHONPATH=OTHER_TREE``, as ``latency_ab``) and takes its turn in every measurement; its rows are named
"(base)".
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from contextlib import AsyncExitStack, ExitStack
from pathlib import Path
from typing import NamedTuple

import uvloop

from fluss_py.client import Admin, Producer, ProducerOptions
from fluss_py.security.identity import PeerIdentity
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from tests.bench.bench_cluster import SETTINGS, _ready, _throughput
from tests.bench.common import p50_p99_ms, row, servers_from
from tests.bench.scale import cpu_seconds

THROUGHPUT_TABLE = "fluss.bench_tls_1k"
LATENCY_TABLE = "fluss.bench_tls_latency"
COUNT, SIZE, ROUNDS, LATENCY_N = 10_000, 1024, 3, 1000
BASE_ENV = "FLUSS_BENCH_TLS_BASE"


async def _setup(bootstrap: str, security: PeerIdentity) -> None:
    async with Admin(bootstrap, security=security) as admin:
        await admin.create_table(THROUGHPUT_TABLE, num_buckets=3, replication_factor=3)
        await admin.create_table(LATENCY_TABLE, num_buckets=1, replication_factor=3)
        await _ready(admin, THROUGHPUT_TABLE)
        await _ready(admin, LATENCY_TABLE)


class Target(NamedTuple):
    bootstrap: str
    security: PeerIdentity
    tablet_pids: list[int]

    def cpu(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.tablet_pids)


async def _measure(targets: dict[str, Target]) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {k: {"tp": 0.0} for k in targets}
    for t in targets.values():
        await _setup(t.bootstrap, t.security)
    for _ in range(ROUNDS):
        for kind, t in targets.items():
            tp, _mb = await _throughput(t.bootstrap, THROUGHPUT_TABLE, SIZE, COUNT, t.security)
            out[kind]["tp"] = max(out[kind]["tp"], tp)
    samples: dict[str, list[float]] = {k: [] for k in targets}
    async with AsyncExitStack() as stack:
        producers = {
            kind: await stack.enter_async_context(Producer(t.bootstrap, ProducerOptions(acks=-1), security=t.security))
            for kind, t in targets.items()
        }
        for p in producers.values():
            for _ in range(20):
                await p.send_and_wait(LATENCY_TABLE, b"warm-up")
        cpu_before = {kind: t.cpu() for kind, t in targets.items()}
        for i in range(LATENCY_N):
            for kind, p in producers.items():
                t = time.perf_counter()
                await p.send_and_wait(LATENCY_TABLE, b"%0100d" % i)
                samples[kind].append(time.perf_counter() - t)
        for kind, target in targets.items():
            out[kind]["cpu_us"] = (target.cpu() - cpu_before[kind]) / LATENCY_N * 1e6
    for kind in targets:
        out[kind]["p50"], out[kind]["p99"] = p50_p99_ms(samples[kind])
    return out


def _start(stack: ExitStack, kind: str, pythonpath: str | None) -> Target:
    d = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"bench-tls-{kind}-"))
    with servers_from(pythonpath):
        cluster = LocalCluster(Path(d), 1, 3, overrides=SETTINGS, die_with_parent=True, secure=kind != "plain")
        stack.callback(cluster.close)
        cluster.start(timeout=60)
        cluster.wait_for_leader(30)
    names = cluster.names(TABLET_SERVER)
    bootstrap = ",".join(cluster.get(n).rpc_address for n in names)
    return Target(bootstrap, cluster.client_identity(), [cluster.pid(n) or 0 for n in names])


def _measure_all(base: str | None) -> dict[str, dict[str, float]]:
    with ExitStack() as stack:
        targets = {kind: _start(stack, kind, None) for kind in ("plain", "secure")}
        if base:
            targets["base"] = _start(stack, "base", str(Path(base).resolve()))
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(_measure(targets))


def run() -> list[dict]:
    base = os.environ.get(BASE_ENV)
    results = _measure_all(base)
    plain, secure = results["plain"], results["secure"]
    ratio = secure["tp"] / plain["tp"]
    rows = [
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
        row("plaintext tablet-server CPU per send", plain["cpu_us"], "us"),
        row("TLS+auth+ACLs tablet-server CPU per send", secure["cpu_us"], "us", "", True, plain["cpu_us"]),
    ]
    if base:
        old = results["base"]
        rows += [
            row("TLS+auth+ACLs (base) pipelined acks=all RF3 1 KiB", old["tp"], "records/s", "", True, plain["tp"]),
            row("TLS+auth+ACLs (base) one-at-a-time acks=all p50", old["p50"], "ms", "", True, plain["p50"]),
            row("TLS+auth+ACLs (base) one-at-a-time acks=all p99", old["p99"], "ms", "", True, plain["p99"]),
            row("TLS+auth+ACLs (base) tablet-server CPU per send", old["cpu_us"], "us", "", True, plain["cpu_us"]),
        ]
    return rows
