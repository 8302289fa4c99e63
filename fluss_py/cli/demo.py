"""``fluss-py demo failover``: what a writing client sees when the leader of its bucket is killed with -9.

    fluss-py demo failover [--table T] [--kills N] [--plot FILE.png] [--dir DIR] [--warmup S] [--settle S]

Against a running local cluster (its cluster.json gives the PIDs): creates T (default
``fluss.failover_demo``, 1 bucket, RF 3) if missing, then writes bucket 0 synchronously with acks=all and
idempotence, one record every 20 ms, and measures each send. After ``--warmup`` seconds it kills the
tablet server leading bucket 0 with SIGKILL; once a new leader took writes and ``--settle`` seconds
passed, it reports (as Kafka failover write-ups do): the slow requests with their latency, success and
failure counts, leader and ISR before/after, the new leader's ``leader-epoch-checkpoint`` lines and which
record the new epoch starts at. With ``--kills N`` the killed server is restarted, the demo waits until
it is back in the ISR and kills the current leader again. At the end the killed server is restarted
(unless ``--no-restart``), every record written in this run is read back, and the demo checks that every
acknowledged record is there exactly once, at the offset its send reported. Exit 0 only with 0 failures,
0 lost, 0 duplicated.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from fluss_py.cli.args import finite, int_in
from fluss_py.cli.common import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    CliError,
    Context,
    add_connection_args,
    client_command,
    ids,
    table_path,
)
from fluss_py.client import Admin, Consumer, ConsumerOptions, Producer, ProducerOptions
from fluss_py.errors import FlussError
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from fluss_py.log.manager import bucket_dir_name
from fluss_py.testing.cluster import LocalCluster
from fluss_py.types import NO_LEADER, TableBucket, TablePath

INTERVAL = 0.020  # one record every 20 ms
DEADLINE = 90.0  # for each wait of the demo (new leader, rejoin, read-back)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("demo", help="demonstrations against a running local cluster")
    sub = parser.add_subparsers(dest="demo_command", metavar="DEMO", required=True)
    p = add_connection_args(
        sub.add_parser("failover", help="kill -9 the leader of bucket 0 while writing; report and verify")
    )
    p.add_argument("--table", default="fluss.failover_demo", help="table to write (default: %(default)s)")
    p.add_argument("--kills", type=int_in(1, 100), default=1,
                   help="leaders to kill, one after another (default: 1)")  # fmt: skip
    p.add_argument("--plot", type=Path, metavar="FILE.png", help="draw latency over time with the kills marked")
    p.add_argument(
        "--warmup",
        type=finite(0.0, 3600.0, lo_open=False),
        default=2.0,
        help="seconds of writing before each kill (default: 2)",
    )
    p.add_argument(
        "--settle",
        type=finite(0.0, 3600.0, lo_open=False),
        default=2.0,
        help="seconds of writing after a failover (default: 2)",
    )
    p.add_argument(
        "--slow-ms",
        type=finite(0.0, 3_600_000.0, lo_open=False),
        default=100.0,
        help="a request slower than this is listed (ms)",
    )
    p.add_argument("--no-restart", action="store_true", help="leave the last killed server down")
    p.set_defaults(func=client_command(cmd_failover))


@dataclass
class Sample:
    seq: int
    sent_at: float  # seconds since the demo started
    latency: float  # seconds
    offset: int = -1
    error: str = ""


@dataclass
class Kill:
    server: str
    at: float
    leader_before: int
    isr_before: tuple[int, ...]
    leader_after: int = NO_LEADER
    isr_after: tuple[int, ...] = ()
    checkpoint: list[str] = field(default_factory=list)


class Writer:
    """The writing loop: send one record to bucket 0, wait for its answer, sleep 20 ms; remember each."""

    def __init__(self, producer: Producer, path: TablePath, run_id: str, start: float) -> None:
        self.producer, self.path, self.run_id, self.start = producer, path, run_id, start
        self.samples: list[Sample] = []
        self.stop = asyncio.Event()

    def value(self, seq: int) -> bytes:
        return f"{self.run_id}-m{seq}".encode()

    async def run(self) -> None:
        seq = 0
        while not self.stop.is_set():
            t0 = time.monotonic()
            sample = Sample(seq, t0 - self.start, 0.0)
            try:
                md = await self.producer.send_and_wait(self.path, self.value(seq), bucket=0)
                sample.offset = md.offset
            except FlussError as e:
                sample.error = str(e)
            sample.latency = time.monotonic() - t0
            self.samples.append(sample)
            seq += 1
            await asyncio.sleep(INTERVAL)

    def acked_since(self, t: float) -> bool:
        return any(s.sent_at >= t and not s.error for s in self.samples)


async def _wait(what: str, cond: Callable[[], Awaitable[bool]], timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while not await cond():
        if time.monotonic() >= deadline:
            raise CliError(f"demo: gave up waiting for {what} after {timeout:g} s")
        await asyncio.sleep(0.1)


async def _placement(admin: Admin, path: TablePath) -> tuple[int, tuple[int, ...], tuple[int, ...], int]:
    """(leader, isr, replicas, table_id) of bucket 0, from the coordinator leader."""
    info, buckets = await admin.get_table_placement(path)
    b0 = next(b for b in buckets if b.table_bucket.bucket == 0)
    return b0.leader, tuple(sorted(b0.isr)), tuple(b0.replicas), info.table_id


async def cmd_failover(args: argparse.Namespace, ctx: Context) -> int:
    if args.kills < 1:
        raise CliError("--kills must be >= 1", EXIT_USAGE)
    if args.plot is not None:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise CliError("--plot needs matplotlib: pip install 'fluss_py[demo]'", EXIT_USAGE) from None
    if not LocalCluster.exists(args.dir):
        raise CliError(f"demo failover needs a local cluster in {args.dir} (`fluss-py cluster up`)", EXIT_USAGE)
    path = table_path(args.table)
    cluster = LocalCluster.open(args.dir)
    try:
        return await _failover(args, ctx, cluster, path)
    finally:
        cluster.detach()  # never stop the cluster's processes on exit


async def _failover(args: argparse.Namespace, ctx: Context, cluster: LocalCluster, path: TablePath) -> int:
    loop = asyncio.get_running_loop()
    admin = await ctx.admin()
    await admin.create_table(path, num_buckets=1, replication_factor=3, ignore_if_exists=True)

    async def fully_replicated() -> bool:
        leader, isr, replicas, _ = await _placement(admin, path)
        return leader != NO_LEADER and set(isr) == set(replicas)

    await _wait("bucket 0 to be fully replicated", fully_replicated)
    _, _, _, table_id = await _placement(admin, path)
    start_offset = (await admin.list_offsets(path, [0]))[0].high_watermark
    producer = Producer(ctx.bootstrap, ProducerOptions(acks=-1), security=ctx.security)
    ctx.own(producer.close)
    start = time.monotonic()
    writer = Writer(producer, path, f"r{int(time.time())}", start)
    task = loop.create_task(writer.run())
    kills: list[Kill] = []
    killed: str | None = None
    print(f"writing {path} bucket 0 (acks=all, idempotent), one record every 20 ms, from offset {start_offset}")
    try:
        for n in range(args.kills):
            await asyncio.sleep(args.warmup)
            leader, isr, _, _ = await _placement(admin, path)
            killed = f"tablet-server-{leader}"
            kill = Kill(killed, time.monotonic() - start, leader, isr)
            if not cluster.signal(killed, signal.SIGKILL):
                raise CliError(f"demo: {killed} (leader of bucket 0) is not running as a process of {args.dir}")
            print(f"kill {n + 1}: SIGKILL {killed} (leader of bucket 0) at +{kill.at:.2f} s", flush=True)

            async def moved(old: int = leader, since: float = kill.at) -> bool:
                return (await _placement(admin, path))[0] not in (old, NO_LEADER) and writer.acked_since(since)

            await _wait("a new leader taking writes", moved)
            await asyncio.sleep(args.settle)
            kill.leader_after, kill.isr_after, _, _ = await _placement(admin, path)
            data_dir = Path(cluster.get(f"tablet-server-{kill.leader_after}").data_dir)
            checkpoint = data_dir / bucket_dir_name(TableBucket(table_id, 0)) / LEADER_EPOCH_CHECKPOINT
            kill.checkpoint = checkpoint.read_text().split("\n") if checkpoint.exists() else ["(missing)"]
            kill.checkpoint = [line for line in kill.checkpoint if line]
            kills.append(kill)
            if n + 1 < args.kills or not args.no_restart:
                await loop.run_in_executor(None, lambda name=killed: cluster.start_process(name, wait=True))
                print(f"restarted {killed}; waiting until it is back in the ISR", flush=True)
                await _wait(f"{killed} to rejoin the ISR", fully_replicated)
                killed = None
    finally:
        writer.stop.set()
        await task
        await producer.close()
    return await _report(args, ctx, writer, kills, TableBucket(table_id, 0), start_offset)


async def _read_back(ctx: Context, tb: TableBucket, start_offset: int, end_offset: int) -> list[tuple[int, bytes]]:
    consumer = Consumer(ctx.bootstrap, ConsumerOptions(auto_offset_reset="none"), security=ctx.security)
    ctx.own(consumer.close)
    await consumer.assign([tb])
    consumer.seek(tb, start_offset)
    out: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + DEADLINE
    while await consumer.position(tb) < end_offset:
        if time.monotonic() >= deadline:
            raise CliError(f"demo: read back stopped at offset {await consumer.position(tb)} < HW {end_offset}")
        out += [(r.offset, r.value or b"") for r in await consumer.poll(1.0)]
    return out


async def _report(
    args: argparse.Namespace, ctx: Context, writer: Writer, kills: list[Kill], tb: TableBucket, start_offset: int
) -> int:
    samples = writer.samples
    slow_s = args.slow_ms / 1000.0
    bounds = [k.at for k in kills] + [float("inf")]
    for i, k in enumerate(kills):
        window = [s for s in samples if s.sent_at + s.latency >= k.at and s.sent_at < bounds[i + 1]]
        print(f"\nkill {i + 1}: {k.server} at +{k.at:.2f} s")
        for s in window:
            if s.latency >= slow_s:
                where = f"record m{s.seq}, offset {s.offset}"
                print(f"  slow request @+{s.sent_at:.3f} s ({where}) took {s.latency * 1000:.0f} ms")
        ok = sum(1 for s in window if not s.error)
        worst = max((s.latency for s in window), default=0.0)
        print(f"  success {ok} failure {len(window) - ok} max latency {worst * 1000:.0f} ms")
        print(f"  Leader: {k.leader_before} -> {k.leader_after}, ISR: {ids(k.isr_before)} -> {ids(k.isr_after)}")
        print(
            f"  leader-epoch-checkpoint on tablet-server-{k.leader_after}: "
            + " / ".join(f'"{x}"' for x in k.checkpoint)
        )
        epoch_start = _last_epoch_start(k.checkpoint)
        first = next((s for s in samples if s.offset == epoch_start), None)
        if first is not None:
            print(f"  the new epoch starts at offset {epoch_start}: record m{first.seq}, sent at +{first.sent_at:.3f} s"
                  f" and answered after {first.latency * 1000:.0f} ms")  # fmt: skip
    acked = {writer.value(s.seq): s.offset for s in samples if not s.error}
    failed = [s for s in samples if s.error]
    admin = await ctx.admin()
    end = (await admin.list_offsets(TablePath.parse(args.table), [0]))[0].high_watermark
    read = [(o, v) for o, v in await _read_back(ctx, tb, start_offset, end) if v.startswith(writer.run_id.encode())]
    seen = Counter(v for _, v in read)
    at = {v: o for o, v in read}
    lost = [v for v in acked if v not in seen]
    duplicated = [v for v, c in seen.items() if c > 1]
    misplaced = [v for v, o in acked.items() if o >= 0 and v in at and at[v] != o]
    print(f"\ntotal: sent {len(samples)}, success {len(acked)}, failure {len(failed)}, "
          f"max latency {max((s.latency for s in samples), default=0) * 1000:.0f} ms")  # fmt: skip
    print(f"read back offsets {start_offset}..{end - 1}: {len(read)} records of this run; acknowledged "
          f"{len(acked)}: lost {len(lost)}, duplicated {len(duplicated)}, elsewhere {len(misplaced)}")  # fmt: skip
    for s in failed[:5]:
        print(f"  failed: record m{s.seq} @+{s.sent_at:.3f} s: {s.error}")
    if args.plot is not None:
        _plot(args.plot, samples, kills)
        print(f"plot written to {args.plot}")
    return EXIT_OK if not (failed or lost or duplicated or misplaced) else EXIT_FAILED


def _last_epoch_start(lines: list[str]) -> int | None:
    """The start offset of the last entry of a leader-epoch-checkpoint (version, count, "epoch offset"...)."""
    entries = [line.split() for line in lines[2:]]
    return int(entries[-1][1]) if entries and len(entries[-1]) == 2 else None


def _plot(path: Path, samples: list[Sample], kills: list[Kill]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(10, 4.5))
    ok = [s for s in samples if not s.error]
    bad = [s for s in samples if s.error]
    ax.scatter([s.sent_at for s in ok], [s.latency * 1000 for s in ok], s=6, label="acknowledged")
    if bad:
        ax.scatter([s.sent_at for s in bad], [s.latency * 1000 for s in bad], s=12, c="red", label="failed")
    for k in kills:
        ax.axvline(k.at, color="red", linestyle="--", linewidth=1)
        ax.annotate(f"kill -9 {k.server}", (k.at, 1), textcoords="offset points", xytext=(4, 4), color="red")
    ax.set_yscale("log")
    ax.set_xlabel("seconds since start (send time)")
    ax.set_ylabel("produce latency, acks=all (ms)")
    ax.set_title("fluss_py failover: latency of each synchronous send (one every 20 ms)")
    ax.legend(loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
