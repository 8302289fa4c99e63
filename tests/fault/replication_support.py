"""Shared pieces of the replication fault tests: a steady producer (one acks=all send at a time), read-only views of a
replica's files, ZooKeeper's leader_isr, raw ProduceLog calls, and checks (exactly once in order,
byte-identical replicas).

Everything here reads; only the test's own thread starts, kills, pauses or resumes processes (the harness's
PR_SET_PDEATHSIG ties them to the thread that started them). ``SteadyProducer`` runs an asyncio ``Producer``
on its own thread and loop and never touches a process.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from fluss_py.client import Consumer, OffsetSpec, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.client.producer import Producer
from fluss_py.errors import ErrorCode
from fluss_py.log.epoch_cache import LEADER_EPOCH_CHECKPOINT
from fluss_py.log.manager import bucket_dir_name
from fluss_py.record.batch import RecordBatch, RecordBatchBuilder, iter_batches
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.security.identity import PeerIdentity
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.procs import wait_until
from fluss_py.testing.zkview import ZkView
from fluss_py.types import LeaderAndIsr, TableBucket
from fluss_py.zk.paths import LeaderIsrZNode, TabletServerZNode

DATABASE = "fluss"
TABLET = "tablet-server"
SLOW_MS = 100.0  # the failover report lists every request slower than this

# Short settings for fault tests: failover within the 2 s test session, a follower leaves the ISR after 2 s.
FAULT_OVERRIDES = {
    "replica.lag.time.max.ms": "2000",
    "replica.fetch.wait.max.ms": "250",
    "replica.fetch.backoff.ms": "50",
}


# stopped followers stay in the ISR and registered for a whole test: only impostors could move the HW
PATIENT = {"zookeeper.session-timeout": "30s"}
PATIENT_TABLET = {**FAULT_OVERRIDES, "replica.lag.time.max.ms": "60000"}


def server_name(server_id: int) -> str:
    return f"{TABLET}-{server_id}"


def server_id(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def bootstrap(cluster: LocalCluster) -> str:
    """Every server's RPC address (tablet servers first): the client must cope with any of them dead."""
    names = cluster.names("tablet-server") + cluster.names("coordinator")
    return ",".join(cluster.get(n).rpc_address for n in names)


# ---------------------------------------------------------------------------------------------- tables
def create_table(
    cluster: LocalCluster, table: str, *, buckets: int = 1, rf: int = 3, properties: Mapping[str, str] | None = None
) -> int:
    """Create ``fluss.<table>`` and wait until every bucket has a leader in ZooKeeper; returns the table id."""
    cluster.wait_for_leader(15)
    with SyncAdmin(bootstrap(cluster), request_timeout=15.0, security=cluster.client_identity()) as admin:
        table_id = admin.create_table(
            f"{DATABASE}.{table}", num_buckets=buckets, replication_factor=rf, properties=dict(properties or {})
        )
    with ZkView(cluster.zookeeper_address) as zk:
        for b in range(buckets):
            cluster.wait_until(
                lambda b=b: leader_isr(zk, cluster, TableBucket(table_id, b)) is not None, 15, f"leader_isr of {b}"
            )
    return table_id


def one_bucket_on_three_servers(cluster_factory, table: str, replicas: tuple[int, ...] = (1, 2, 3)):
    """One coordinator and three tablet servers with ``FAULT_OVERRIDES``, and ``fluss.<table>`` with one bucket
    replicated on all of them: returns (cluster, the bucket, {server name: ReplicaFiles})."""
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table_id = create_table(cluster, table)
    tb = TableBucket(table_id, 0)
    return cluster, tb, {server_name(s): ReplicaFiles(cluster, server_name(s), tb) for s in replicas}


def leader_isr(zk: ZkView, cluster: LocalCluster, tb: TableBucket) -> LeaderAndIsr | None:
    data = zk.get_bytes(LeaderIsrZNode.path(cluster.zk_root, tb.table_id, tb.bucket))
    return None if data is None else LeaderIsrZNode.decode(data)


def registered(zk: ZkView, cluster: LocalCluster, sid: int) -> int | None:
    """ZooKeeper session owning the registration of tablet server ``sid`` (None when it is not registered)."""
    return zk.ephemeral_owner(TabletServerZNode.path(cluster.zk_root, sid))


def wait_for_leader_change(zk: ZkView, cluster: LocalCluster, tb: TableBucket, old: LeaderAndIsr, timeout: float):
    """Wait until ZooKeeper names a leader other than ``old.leader`` (with a higher leader epoch)."""

    def changed() -> LeaderAndIsr | None:
        now = leader_isr(zk, cluster, tb)
        return now if now and now.leader != old.leader and now.leader_epoch > old.leader_epoch else None

    return cluster.wait_until(changed, timeout, f"a new leader of {tb} (old: {old})")


def wait_for_isr(
    zk: ZkView, cluster: LocalCluster, tb: TableBucket, want: Callable[[LeaderAndIsr], bool], timeout: float, what: str
) -> LeaderAndIsr:
    def ok() -> LeaderAndIsr | None:
        now = leader_isr(zk, cluster, tb)
        return now if now is not None and want(now) else None

    return cluster.wait_until(ok, timeout, lambda: f"{what}; leader_isr now {leader_isr(zk, cluster, tb)}")  # type: ignore[return-value]


def wait_full_isr(zk: ZkView, cluster: LocalCluster, tb: TableBucket, replicas: Iterable[int], timeout: float):
    want = sorted(replicas)
    return wait_for_isr(zk, cluster, tb, lambda lai: sorted(lai.isr) == want, timeout, f"ISR {want}")


# ---------------------------------------------------------------------------------------------- replica files
@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    first_timestamp: int
    data: bytes
    values: tuple[bytes | None, ...]


class ReplicaFiles:
    """Read-only view of one replica's bucket directory (segments and leader-epoch-checkpoint).

    Reading a live server's files is safe: segments are append-only between truncations and
    ``iter_batches`` stops at a torn (half-written) tail.
    """

    def __init__(self, cluster: LocalCluster, name: str, tb: TableBucket) -> None:
        self.name = name
        self.dir = Path(cluster.get(name).data_dir) / bucket_dir_name(tb)

    def batches(self) -> list[Batch]:
        out: list[Batch] = []
        for seg in sorted(self.dir.glob("*.log")):
            try:
                buf = seg.read_bytes()
            except FileNotFoundError:  # deleted by a truncation between glob and read
                continue
            for b in iter_batches(buf):
                out.append(_batch(b))
        return out

    def log_end_offset(self) -> int:
        batches = self.batches()
        return batches[-1].last_offset + 1 if batches else 0

    def epochs(self) -> list[tuple[int, int]]:
        """``(epoch, start offset)`` lines of leader-epoch-checkpoint (Kafka's text format)."""
        path = self.dir / LEADER_EPOCH_CHECKPOINT
        try:
            lines = path.read_text().split("\n")
        except FileNotFoundError:
            return []
        count = int(lines[1])
        return [(int(e), int(o)) for e, o in (line.split() for line in lines[2 : 2 + count])]

    def values_by_offset(self) -> dict[int, bytes | None]:
        return {b.base_offset + i: v for b in self.batches() for i, v in enumerate(b.values)}


def _batch(b: RecordBatch) -> Batch:
    return Batch(
        b.base_offset,
        b.last_offset,
        b.leader_epoch,
        b.first_timestamp,
        b.tobytes(),
        tuple(r.value for r in b.records()),
    )


def divergent_offsets(a: list[Batch], b: list[Batch]) -> list[int]:
    """Base offsets present in both logs whose batches differ (any byte: offsets, epoch, records)."""
    bb = {x.base_offset: x for x in b}
    out = [x.base_offset for x in a if x.base_offset in bb and bb[x.base_offset].data != x.data]
    # a batch boundary present in only one of them inside the other's range is a divergence too
    a_bases, b_bases = {x.base_offset for x in a}, set(bb)
    end = min((a[-1].last_offset + 1) if a else 0, (b[-1].last_offset + 1) if b else 0)
    out += sorted(o for o in a_bases ^ b_bases if o < end)
    return sorted(set(out))


def identical_up_to(replicas: Mapping[str, list[Batch]], hw: int) -> bool:
    """All replicas hold exactly the same batches (bytes) below ``hw`` and each holds all of them."""
    views = [[b.data for b in batches if b.last_offset < hw] for batches in replicas.values()]
    covered = all(batches and batches[-1].last_offset + 1 >= hw for batches in replicas.values()) or hw == 0
    return covered and all(v == views[0] for v in views[1:])


def assert_never_divergent(replicas: Mapping[str, list[Batch]]) -> None:
    names = list(replicas)
    for i, x in enumerate(names):
        for y in names[i + 1 :]:
            bad = divergent_offsets(replicas[x], replicas[y])
            assert not bad, f"{x} and {y} hold different batches at offsets {bad}"


def epochs_of_batches(batches: list[Batch]) -> list[tuple[int, int]]:
    """The epoch cache the batches imply: (epoch, first offset) at every epoch change."""
    out: list[tuple[int, int]] = []
    for b in batches:
        if not out or out[-1][0] != b.leader_epoch:
            out.append((b.leader_epoch, b.base_offset))
    return out


# ---------------------------------------------------------------------------------------------- offsets and raw calls
def bucket_offsets(cluster: LocalCluster, table: str, bucket: int = 0):
    with SyncAdmin(bootstrap(cluster), request_timeout=10.0, security=cluster.client_identity()) as admin:
        return admin.list_offsets(f"{DATABASE}.{table}", [bucket], OffsetSpec.LATEST, timeout=10.0)[bucket]


@dataclass(frozen=True)
class RawResult:
    code: int
    message: str
    base_offset: int = -1
    last_offset: int = -1


def raw_produce(
    address: str | grpc.Channel, tb: TableBucket, values: list[bytes], acks: int, timeout_s: float
) -> RawResult:
    """One ProduceLog of a non-idempotent batch straight to ``address`` (or over an open channel; no retries)."""
    builder = RecordBatchBuilder()
    for v in values:
        builder.append(v)
    return raw_produce_batch(address, tb, builder.build(), acks, timeout_s)


def raw_produce_batch(
    address: str | grpc.Channel, tb: TableBucket, records: bytes, acks: int, timeout_s: float
) -> RawResult:
    """One ProduceLog carrying ``records`` as they are (e.g. a malformed batch)."""
    request = tablet_pb2.ProduceLogRequest(
        acks=acks,
        timeout_ms=int(timeout_s * 1000),
        buckets=[tablet_pb2.ProduceBucket(table_bucket=_tb_pb(tb), records=records)],
    )
    if isinstance(address, str):
        with grpc.insecure_channel(address) as channel:
            response = tablet_pb2_grpc.TabletServiceStub(channel).ProduceLog(request, timeout=timeout_s + 5.0)
    else:
        response = tablet_pb2_grpc.TabletServiceStub(address).ProduceLog(request, timeout=timeout_s + 5.0)
    if response.error.code != ErrorCode.NONE:
        return RawResult(response.error.code, response.error.message)
    b = response.buckets[0]
    return RawResult(b.error.code, b.error.message, b.base_offset, b.last_offset)


def _tb_pb(tb: TableBucket) -> common_pb2.TableBucket:
    return common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket)


tb_pb = _tb_pb


def metric_value(text: str, name: str, **labels: str) -> float:
    """The value of sample ``name{labels}`` in a /metrics text (labels in the order written); 0 when absent."""
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} ") or (not labels and line.startswith(f"{name} ")):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


# ---------------------------------------------------------------------------------------------- steady producer
STEADY = ProducerOptions(acks=-1, idempotence=True, request_timeout=10.0, delivery_timeout=60.0)


@dataclass
class Sent:
    """One send of the steady producer (times are time.monotonic(); wall_ms is the send's wall clock)."""

    seq: int
    value: bytes
    bucket: int
    start: float
    wall_ms: int
    end: float = 0.0
    offset: int | None = None
    error: str | None = None

    @property
    def latency_ms(self) -> float:
        return (self.end - self.start) * 1e3


@dataclass
class SteadyProducer:
    """The steady producer: one record every ``interval`` s, waiting for each (``send(...).get()``).

    Runs an asyncio ``Producer`` on its own thread; ``sent`` grows as records complete.
    """

    servers: str
    table: str
    options: ProducerOptions
    interval: float = 0.02
    prefix: bytes = b"m"
    bucket_of: Callable[[int], int] = lambda seq: 0
    security: PeerIdentity | None = None  # a secure cluster's client identity (LocalCluster.client_identity)
    sent: list[Sent] = field(default_factory=list)
    failure: BaseException | None = None

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="steady-producer", daemon=True)
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, timeout: float = 30.0) -> SteadyProducer:
        self._thread.start()
        if not self._started.wait(timeout):
            raise AssertionError("the steady producer did not get its first record acknowledged")
        if self.failure is not None:
            raise self.failure
        return self

    def stop(self, timeout: float = 90.0) -> list[Sent]:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"the steady producer did not stop; it is at:\n{self._where()}"
        if self.failure is not None:
            raise self.failure
        return self.sent

    @property
    def acked(self) -> list[Sent]:
        return [s for s in self.sent if s.error is None and s.end]

    def wait_acked_after(self, t: float, n: int, timeout: float) -> None:
        """Wait until ``n`` records sent after monotonic time ``t`` are acknowledged."""

        def enough() -> bool:
            if self.failure is not None:
                raise self.failure
            return sum(1 for s in self.sent if s.start >= t and s.error is None) >= n

        wait_until(
            enough, timeout, interval=0.02, message=f"{n} acknowledged records after the fault", reraise=(Exception,)
        )

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # surfaced by start/stop/wait_acked_after
            self.failure = e
            self._started.set()

    def _where(self) -> str:
        """Where a stuck producer thread is: its stack and each task's await chain (for the failure)."""
        frame = sys._current_frames().get(self._thread.ident or -1)
        lines = traceback.format_stack(frame) if frame is not None else ["(thread gone)\n"]
        loop = self._loop
        for task in asyncio.all_tasks(loop) if loop is not None and not loop.is_closed() else ():
            lines.append(f"task {task.get_name()}:\n")
            awaited: object = task.get_coro()
            while awaited is not None:
                f = getattr(awaited, "cr_frame", None) or getattr(awaited, "gi_frame", None)
                if f is not None:
                    lines.append(f"  {f.f_code.co_filename}:{f.f_lineno} {f.f_code.co_name}\n")
                awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "gi_yieldfrom", None)
        return "".join(lines) + f"last completed send: {self.sent[-1] if self.sent else None}"

    async def _run(self) -> None:
        self._loop = asyncio.get_running_loop()
        producer = Producer(self.servers, self.options, security=self.security)
        try:
            seq = 0
            while not self._stop.is_set():
                value = b"%s%07d" % (self.prefix, seq)
                s = Sent(seq, value, self.bucket_of(seq), time.monotonic(), int(time.time() * 1000))
                try:
                    md = await producer.send_and_wait(self.table, value, bucket=s.bucket)
                    s.offset = md.offset
                except Exception as e:  # a failed send is a result of the experiment, counted and reported
                    s.error = f"{type(e).__name__}: {e}"
                s.end = time.monotonic()
                self.sent.append(s)
                self._started.set()
                seq += 1
                await asyncio.sleep(self.interval)
        finally:
            await producer.close(timeout=10.0)


def consume(cluster: LocalCluster, table: str, bucket: int, end_offset: int, timeout: float = 30.0):
    """Every record of ``bucket`` from the beginning up to ``end_offset`` (exclusive), as (offset, value)."""
    out: list[tuple[int, bytes | None]] = []
    consumer = SyncConsumer(bootstrap(cluster), security=cluster.client_identity())
    try:
        consumer.assign(f"{DATABASE}.{table}", [bucket])
        consumer.seek_to_beginning()
        deadline = time.monotonic() + timeout
        while (not out or out[-1][0] + 1 < end_offset) and end_offset > 0:
            assert time.monotonic() < deadline, f"consumed only up to {out[-1][0] if out else None} of {end_offset}"
            for r in consumer.poll(0.5):
                if r.offset < end_offset:
                    out.append((r.offset, r.value))
    finally:
        consumer.close()
    return out


def assert_exactly_once_in_order(sent: list[Sent], consumed: list[tuple[int, bytes | None]], bucket: int = 0) -> None:
    """Every acknowledged record of ``bucket`` appears exactly once, in send order, at its acknowledged offset;
    offsets are contiguous from 0 and nothing else is there."""
    mine = [s for s in sent if s.bucket == bucket]
    failed = [s for s in mine if s.error is not None]
    assert not failed, f"{len(failed)} failed sends, first: {failed[0].error}"
    offsets = [o for o, _ in consumed]
    assert offsets == list(range(len(consumed))), "consumed offsets are not contiguous from 0"
    values = [v for _, v in consumed]
    expected = [s.value for s in mine]
    dupes = len(values) - len(set(values))
    assert dupes == 0, f"{dupes} duplicated records"
    missing = set(expected) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"
    assert values == expected, "records are not in send order (or foreign records are in the log)"
    wrong = [(s.value, s.offset, values.index(s.value)) for s in mine if s.offset not in (None, -1)
             and values[s.offset] != s.value]  # fmt: skip
    assert not wrong, f"acknowledged offsets do not hold the records: {wrong[:5]}"


def first_mismatch(sent: list[Sent], consumed: list[tuple[int, bytes | None]], bucket: int = 0) -> int | None:
    """The first offset at which the consumed log differs from the records sent to ``bucket`` in order
    (a failed send, a lost or misplaced record), or None."""
    expected = [s.value for s in sent if s.bucket == bucket]
    got = [v for _, v in consumed]
    for i, (a, b) in enumerate(zip(expected, got, strict=False)):
        if a != b:
            return i
    return None if len(expected) == len(got) else min(len(expected), len(got))


def explain_offset(
    files: Mapping[str, ReplicaFiles], sent: list[Sent], offset: int, radius: int = 3, bucket: int = 0
) -> str:
    """What every replica holds around ``offset`` (batches with their epochs and values, the epoch
    checkpoint) and what the producer saw for the records around it (offset, error, latency): enough for a
    failure to tell a failed send from an acknowledged record missing on some replica."""
    lo, hi = offset - radius, offset + radius
    lines = [f"around offset {offset}:"]
    for name, f in sorted(files.items()):
        lines.append(f"  {name}: leader-epoch-checkpoint {f.epochs()}")
        for b in f.batches():
            if b.last_offset >= lo and b.base_offset <= hi:
                lines.append(f"    [{b.base_offset}..{b.last_offset}] epoch {b.leader_epoch} {list(b.values)}")
    mine = [s for s in sent if s.bucket == bucket]
    for s in mine[max(0, lo) : hi + 1]:
        outcome = f"error {s.error}" if s.error else f"acknowledged at {s.offset}"
        lines.append(f"  send {s.value!r} @{s.wall_ms}: {outcome} after {s.latency_ms:.0f} ms")
    failed = [s for s in mine if s.error]
    if failed:
        lines.append(f"  {len(failed)} failed send(s) in all, first: {failed[0].value!r}: {failed[0].error}")
    return "\n".join(lines)


def slow_sends(sent: list[Sent], threshold_ms: float = SLOW_MS) -> list[Sent]:
    return [s for s in sent if s.latency_ms > threshold_ms]


def produce(
    cluster: LocalCluster,
    table: str,
    values: list[bytes],
    acks: int = -1,
    delivery_timeout: float = 30.0,
    bucket: int = 0,
):
    """Send ``values`` to ``bucket`` one at a time through the client (idempotent unless acks=0); their offsets."""
    options = ProducerOptions(acks=acks, request_timeout=min(10.0, delivery_timeout), delivery_timeout=delivery_timeout)
    producer = SyncProducer(bootstrap(cluster), options, security=cluster.client_identity())
    try:
        return [producer.send_and_wait(f"{DATABASE}.{table}", v, bucket=bucket).offset for v in values]
    finally:
        producer.close(timeout=5.0)


def wait_replicas_identical(cluster: LocalCluster, files: Mapping[str, ReplicaFiles], end: int, timeout: float):
    """Wait until every replica holds the same batches, byte for byte, below ``end``."""
    cluster.wait_until(
        lambda: identical_up_to({n: f.batches() for n, f in files.items()}, end),
        timeout,
        lambda: f"replicas identical below {end}; LEOs { {n: f.log_end_offset() for n, f in files.items()} }",
    )


def assert_every_ack_read_once(cluster: LocalCluster, table: str, sent: list[Sent], bucket: int = 0) -> None:
    """The bucket's HW is the number of records sent to it (one per send) and a consumer reads each
    acknowledged record exactly once, in order, at its acknowledged offset."""
    mine = [s for s in sent if s.bucket == bucket]
    hw = bucket_offsets(cluster, table, bucket).high_watermark
    assert hw == len(mine), f"bucket {bucket}: high watermark {hw}, {len(mine)} records sent"
    assert_exactly_once_in_order(mine, consume(cluster, table, bucket, hw), bucket=bucket)


class TailingConsumer:
    """A consumer reading one bucket from the beginning on its own thread and loop while faults happen.

    ``records`` is everything it was handed, in order: a reader only ever sees committed records (below the
    HW), so this must end up equal to the final log, with no record that later vanished, no gap, no repeat.
    """

    def __init__(self, servers: str, table: str, bucket: int = 0, security: PeerIdentity | None = None) -> None:
        self.servers, self.table, self.bucket, self.security = servers, table, bucket, security
        self.records: list[tuple[int, bytes | None]] = []
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tailing-consumer", daemon=True)

    def start(self) -> TailingConsumer:
        self._thread.start()
        return self

    def wait_for(self, end_offset: int, timeout: float) -> None:
        def reached() -> bool:
            if self.failure is not None:
                raise self.failure
            return bool(self.records) and self.records[-1][0] + 1 >= end_offset

        wait_until(
            reached,
            timeout,
            interval=0.02,
            message=f"the tailing consumer at offset {end_offset}",
            reraise=(Exception,),
        )

    def stop(self, timeout: float = 30.0) -> list[tuple[int, bytes | None]]:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the tailing consumer did not stop"
        if self.failure is not None:
            raise self.failure
        return self.records

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # surfaced by wait_for/stop
            self.failure = e

    async def _run(self) -> None:
        consumer = Consumer(self.servers, security=self.security)
        try:
            await consumer.assign(self.table, [self.bucket])
            consumer.seek_to_beginning()
            while not self._stop.is_set():
                for r in await consumer.poll(0.2):
                    self.records.append((r.offset, r.value))
        finally:
            await consumer.close()
