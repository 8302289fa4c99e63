"""A client's view of bucket leaders converges after two tablet servers die at once (docs/client.md "Bucket
leader and epoch").

kill -9 of two tablet servers together, one leading bucket 0 and the other one of its followers, so the
coordinator may move the bucket twice within milliseconds (to the second victim, then, once its death is
proven too, to a live server) while the survivors still hold the older view and name dead servers as leader.
Both are restarted. Under an acks=all producer writing to every bucket and a consumer tailing every bucket
from the beginning, the consumer must reach every bucket's high watermark (taken once both restarted servers
are back) within ``CATCH_UP_S`` of the last restart; the time it took is printed. Everything it was handed
is the start of the final log (no gap, no repeat). Then a follower, asked for a newer epoch than its own, must
say it is behind rather than name a leader (the server's half of the rule). Once in the default suite,
``SLOW_ROUNDS`` times on one cluster in the opt-in slow suite (``--run-slow``).
"""

from __future__ import annotations

import asyncio
import threading
import time

import grpc
import pytest

from fluss_py.client import Consumer, OffsetSpec, ProducerOptions, SyncAdmin
from fluss_py.errors import ErrorCode
from fluss_py.rpc.pb import common_pb2, tablet_pb2, tablet_pb2_grpc
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import kill9
from fluss_py.testing.procs import wait_until
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    SteadyProducer,
    bootstrap,
    consume,
    create_table,
    server_name,
)

pytestmark = pytest.mark.fault

BUCKETS = 8
CATCH_UP_S = 15.0  # a deadline for the wait, not a performance bound: the measured time is printed
SLOW_ROUNDS = 20


class TailingAll:
    """A consumer reading every bucket from the beginning on its own thread and loop; ``records[b]`` is what it
    was handed of bucket ``b``, in order."""

    def __init__(self, servers: str, table: str) -> None:
        self.servers, self.table = servers, table
        self.records: dict[int, list[tuple[int, bytes | None]]] = {b: [] for b in range(BUCKETS)}
        self.failure: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="tailing-all", daemon=True)

    def next_offset(self, bucket: int) -> int:
        got = self.records[bucket]
        return got[-1][0] + 1 if got else 0

    def start(self) -> TailingAll:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        assert not self._thread.is_alive(), "the tailing consumer did not stop"
        if self.failure is not None:
            raise self.failure

    def _main(self) -> None:
        try:
            asyncio.run(self._run())
        except BaseException as e:  # surfaced by stop() and the waits
            self.failure = e

    async def _run(self) -> None:
        consumer = Consumer(self.servers)
        try:
            await consumer.assign(self.table)
            consumer.seek_to_beginning()
            while not self._stop.is_set():
                for r in await consumer.poll(0.2):
                    self.records[r.bucket.bucket].append((r.offset, r.value))
        finally:
            await consumer.close()


def _placement(admin: SyncAdmin, table: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    _, buckets = admin.get_table_placement(table)
    return {b.table_bucket.bucket: (b.leader, tuple(b.isr)) for b in buckets}


def _double_kill_round(cluster: LocalCluster, admin: SyncAdmin, table: str, tail: TailingAll, round_: int) -> float:
    """Kill the leader of one bucket and one of its followers at once, restart both once the coordinator has
    moved every leadership off them; returns the seconds from the last restart until the consumer reached
    every bucket's high watermark."""
    bucket = round_ % BUCKETS
    cluster.wait_until(
        lambda: all(len(isr) == 3 for _, isr in _placement(admin, table).values()), 60, "every ISR full again"
    )
    leader, isr = _placement(admin, table)[bucket]
    follower = next(r for r in isr if r != leader)
    victims = [server_name(leader), server_name(follower)]
    for name in victims:
        kill9(cluster, name)
    cluster.wait_until(
        lambda: all(lead not in (leader, follower, -1) for lead, _ in _placement(admin, table).values()),
        30,
        f"every bucket led by a live server after killing {victims}",
    )
    for name in victims:
        cluster.start_process(name, wait=True, timeout=60)
    restarted = time.monotonic()
    hws = {b: o.high_watermark for b, o in admin.list_offsets(table, spec=OffsetSpec.HIGH_WATERMARK).items()}

    def caught_up() -> bool:
        if tail.failure is not None:
            raise tail.failure
        return all(tail.next_offset(b) >= hw for b, hw in hws.items())

    wait_until(
        caught_up,
        CATCH_UP_S,
        interval=0.02,
        message=lambda: f"round {round_}: consumer at { {b: tail.next_offset(b) for b in hws} }, HWs {hws}",
        reraise=(Exception,),
    )
    return time.monotonic() - restarted


def _fetch_error(cluster: LocalCluster, server: int, tb_pb: common_pb2.TableBucket, epoch: int):
    request = tablet_pb2.FetchLogRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        buckets=[
            tablet_pb2.FetchBucket(
                table_bucket=tb_pb, fetch_offset=0, max_bytes=1 << 20, current_leader_epoch=epoch, last_fetched_epoch=-1
            )
        ],
    )
    with grpc.insecure_channel(cluster.get(server_name(server)).rpc_address) as channel:
        return tablet_pb2_grpc.TabletServiceStub(channel).FetchLog(request, timeout=10).buckets[0].error


def _assert_servers_behind_say_so(cluster: LocalCluster, admin: SyncAdmin, table: str) -> None:
    """A follower asked for a newer epoch than its own answers UNKNOWN_LEADER_EPOCH and names nobody; asked at
    its own epoch, it names the leader (docs/replication.md "Epochs and fencing")."""

    def placement_with_a_follower_in_isr():
        _, buckets = admin.get_table_placement(table)
        return buckets[0] if len(buckets[0].isr) > 1 else None

    # the restarted victims may still be catching up: wait until bucket 0 has a follower in its ISR again
    loc = cluster.wait_until(placement_with_a_follower_in_isr, 60, "a follower back in bucket 0's ISR")
    follower = next(r for r in loc.isr if r != loc.leader)
    tb_pb = common_pb2.TableBucket(table_id=loc.table_bucket.table_id, bucket=loc.table_bucket.bucket)
    behind = _fetch_error(cluster, follower, tb_pb, loc.leader_epoch + 1)
    assert (behind.code, behind.leader_id, behind.leader_address) == (ErrorCode.UNKNOWN_LEADER_EPOCH, -1, ""), behind
    same = _fetch_error(cluster, follower, tb_pb, loc.leader_epoch)
    assert (same.code, same.leader_id) == (ErrorCode.NOT_LEADER_OR_FOLLOWER, loc.leader), same


def _run(cluster_factory, rounds: int) -> None:
    cluster = cluster_factory(coordinators=1, tablet_servers=4, tablet_overrides=FAULT_OVERRIDES)
    table_name = "double_kill"
    table = f"{DATABASE}.{table_name}"
    create_table(cluster, table_name, buckets=BUCKETS, rf=3)
    options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=120.0)
    tail = TailingAll(bootstrap(cluster), table).start()
    producer = SteadyProducer(bootstrap(cluster), table, options, interval=0.005, bucket_of=lambda s: s % BUCKETS)
    producer.start()
    times: list[float] = []
    try:
        with SyncAdmin(bootstrap(cluster), request_timeout=10.0) as admin:
            for round_ in range(rounds):
                times.append(_double_kill_round(cluster, admin, table, tail, round_))
            _assert_servers_behind_say_so(cluster, admin, table)
    finally:
        sent = producer.stop()
        tail.stop()
    print(f"\ncatch-up after the last restart, {rounds} round(s): " + ", ".join(f"{t:.2f}s" for t in times))
    failed = [s for s in sent if s.error is not None]
    assert not failed, f"{len(failed)} failed sends, first: {failed[0].error}"
    for b in range(BUCKETS):  # what the tailing consumer was handed is the start of the final log
        handed = tail.records[b]
        assert [o for o, _ in handed] == list(range(len(handed))), f"bucket {b}: a gap or a repeat"
        assert consume(cluster, table_name, b, len(handed)) == handed, f"bucket {b}: handed records not in the log"


@pytest.mark.timeout(400)
def test_consumer_catches_up_after_two_tablet_servers_die_at_once(cluster_factory) -> None:
    _run(cluster_factory, 1)


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_consumer_catches_up_after_two_tablet_servers_die_at_once_repeatedly(cluster_factory) -> None:
    _run(cluster_factory, SLOW_ROUNDS)
