"""ISR changes and a zombie leader on real processes (docs/design.md invariants 3, 5, 6).

- A SIGSTOPped follower leaves the ISR in ZooKeeper after replica.lag.time.max.ms (the leader shrinks it:
  same leader epoch, its ZooKeeper session still alive) while acks=all producing goes on; after SIGCONT it
  catches up and rejoins. Nothing acknowledged is lost or duplicated.
- Two stopped followers with min.insync.replicas 2: acks=all is refused with NOT_ENOUGH_REPLICAS before
  anything is appended (raw ProduceLog and the client, which names it when its delivery timeout ends);
  acks=1 works; after SIGCONT acks=all works again.
- Zombie leader: SIGSTOP the leader past its ZooKeeper session; a new leader is elected; SIGCONT while a
  client with stale metadata writes to it: that acks=all write never succeeds, the old leader steps down,
  truncates what it appended as a zombie and follows (byte-identical replicas, exactly-once consumption).
"""

from __future__ import annotations

import re
import threading
import time

import grpc
import pytest

from fluss_py.errors import ErrorCode
from fluss_py.testing.faults import pause, resume
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    STEADY,
    ReplicaFiles,
    SteadyProducer,
    TailingConsumer,
    assert_every_ack_read_once,
    assert_never_divergent,
    bootstrap,
    bucket_offsets,
    consume,
    create_table,
    leader_isr,
    produce,
    raw_produce,
    registered,
    server_name,
    slow_sends,
    wait_for_isr,
    wait_for_leader_change,
    wait_full_isr,
    wait_replicas_identical,
)

pytestmark = pytest.mark.fault

REPLICAS = (1, 2, 3)
LAG_MS = 1500
# ISR tests: a follower must leave the ISR by lag (not by death), so sessions outlive a stop of a few seconds.
ISR_SESSION = {"zookeeper.session-timeout": "8s"}
ISR_TABLET = {**FAULT_OVERRIDES, "replica.lag.time.max.ms": str(LAG_MS)}
MIN_ISR_2 = {"min.insync.replicas": "2"}


def _slow(sent) -> list[int]:
    return [round(s.latency_ms) for s in slow_sends(sent)]


def _tail_saw_everything_once(tail: TailingConsumer, sent) -> None:
    """The consumer that read through the fault was handed every sent record once, in order, nothing else."""
    tail.wait_for(len(sent), 20)
    assert [v for _, v in tail.stop()] == [s.value for s in sent]


def _isr_cluster(cluster_factory, table: str):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, overrides=ISR_SESSION, tablet_overrides=ISR_TABLET)
    table_id = create_table(cluster, table, properties=MIN_ISR_2)
    return cluster, TableBucket(table_id, 0)


def test_a_stopped_follower_leaves_the_isr_after_the_lag_time_and_rejoins_after_sigcont(cluster_factory, capsys):
    table = "isr_lag"
    cluster, tb = _isr_cluster(cluster_factory, table)
    with ZkView(cluster.zookeeper_address) as zk:
        start = leader_isr(zk, cluster, tb)
        start = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        follower = next(s for s in REPLICAS if s != start.leader)
        session = registered(zk, cluster, follower)
        tail = TailingConsumer(bootstrap(cluster), f"{DATABASE}.{table}").start()
        producer = SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", STEADY).start()
        try:
            producer.wait_acked_after(time.monotonic(), 25, 15)
            t_stop = pause(cluster, server_name(follower))
            shrunk = wait_for_isr(zk, cluster, tb, lambda lai: follower not in lai.isr, 10, f"{follower} leaves ISR")
            t_shrunk = time.monotonic()
            # The leader removed it for lagging: no election happened and its session is alive.
            assert (shrunk.leader, shrunk.leader_epoch) == (start.leader, start.leader_epoch), shrunk
            assert sorted(shrunk.isr) == sorted(s for s in REPLICAS if s != follower)
            assert registered(zk, cluster, follower) == session, "the follower's session ended: not a lag shrink"
            producer.wait_acked_after(t_shrunk, 25, 10)  # acks=all goes on with two in-sync replicas
            resume(cluster, server_name(follower))
            t_cont = time.monotonic()
            grown = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
            t_grown = time.monotonic()
            assert grown.leader_epoch == start.leader_epoch and grown.bucket_epoch > shrunk.bucket_epoch
            producer.wait_acked_after(t_grown, 25, 10)
        finally:
            sent = producer.stop()
    with capsys.disabled():
        print(
            f"\nISR lag: follower {follower} SIGSTOP -> out of the ISR in {t_shrunk - t_stop:.2f} s "
            f"(replica.lag.time.max.ms {LAG_MS}); SIGCONT -> back in {t_grown - t_cont:.2f} s; sent {len(sent)}, "
            f"failed {sum(1 for s in sent if s.error)}, slow (> 100 ms): {_slow(sent)}"
        )
    assert_every_ack_read_once(cluster, table, sent)
    _tail_saw_everything_once(tail, sent)


def test_two_stopped_followers_below_min_isr_refuse_acks_all_before_append_and_acks1_works(cluster_factory):
    table = "min_isr"
    cluster, tb = _isr_cluster(cluster_factory, table)
    files = {server_name(s): ReplicaFiles(cluster, server_name(s), tb) for s in REPLICAS}
    with ZkView(cluster.zookeeper_address) as zk:
        start = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        prefix = [b"p%d" % i for i in range(10)]
        assert produce(cluster, table, prefix) == list(range(10))
        followers = [s for s in REPLICAS if s != start.leader]
        sessions = {s: registered(zk, cluster, s) for s in followers}
        for s in followers:
            pause(cluster, server_name(s))
        try:
            # A caught-up follower is in sync however long it is silent (Kafka's rule): give them something to miss.
            assert produce(cluster, table, [b"behind"], acks=1) == [10]
            alone = wait_for_isr(
                zk, cluster, tb, lambda lai: list(lai.isr) == [start.leader], 10, "the leader alone in the ISR"
            )
            assert alone.leader_epoch == start.leader_epoch
            assert {s: registered(zk, cluster, s) for s in followers} == sessions, "a follower's session ended"
            before = bucket_offsets(cluster, table)
            leader_address = cluster.get(server_name(start.leader)).rpc_address
            refused = raw_produce(leader_address, tb, [b"refused-raw"], acks=-1, timeout_s=5.0)
            assert refused.code == ErrorCode.NOT_ENOUGH_REPLICAS, refused
            # The client retries NOT_ENOUGH_REPLICAS (retriable) until its delivery timeout, then names it.
            with pytest.raises(Exception, match="NOT_ENOUGH_REPLICAS"):
                produce(cluster, table, [b"refused-client"], acks=-1, delivery_timeout=1.0)
            after = bucket_offsets(cluster, table)
            assert after.log_end_offset == before.log_end_offset == 11, "nothing appended"
            assert produce(cluster, table, [b"one"], acks=1) == [11]
        finally:
            for s in followers:
                if cluster.paused(server_name(s)):
                    resume(cluster, server_name(s))
        wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        assert produce(cluster, table, [b"all"]) == [12]
        wait_replicas_identical(cluster, files, 13, 10)
        for f in files.values():
            held = set(f.values_by_offset().values())
            assert not held & {b"refused-raw", b"refused-client"}, f"{f.name} appended a refused record"
    assert [v for _, v in consume(cluster, table, 0, 13)] == [*prefix, b"behind", b"one", b"all"]


def test_zombie_leader_completes_no_acks_all_write_steps_down_truncates_and_follows(cluster_factory, capsys):
    table = "zombie"
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    tb = TableBucket(create_table(cluster, table), 0)
    files = {server_name(s): ReplicaFiles(cluster, server_name(s), tb) for s in REPLICAS}
    with ZkView(cluster.zookeeper_address) as zk:
        before = wait_full_isr(zk, cluster, tb, REPLICAS, 15)
        zombie = server_name(before.leader)
        session = registered(zk, cluster, before.leader)
        tail = TailingConsumer(bootstrap(cluster), f"{DATABASE}.{table}").start()
        producer = SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", STEADY).start()
        probe: dict[str, object] = {}
        # A client with stale metadata: its connection to the old leader is open before the pause, so its
        # write waits in the paused process's socket and is served the moment it runs again, while it still
        # believes it leads (before the coordinator's news reaches it).
        stale = grpc.insecure_channel(cluster.get(zombie).rpc_address)
        grpc.channel_ready_future(stale).result(timeout=10)
        try:
            producer.wait_acked_after(time.monotonic(), 25, 15)
            log_before = len(cluster.log_text(zombie))
            t_stop = pause(cluster, zombie)
            after = wait_for_leader_change(zk, cluster, tb, before, SESSION_TIMEOUT_S + 10)
            t_elected = time.monotonic()
            assert registered(zk, cluster, before.leader) != session, "elected while the old session lived"
            producer.wait_acked_after(t_elected, 25, 20)  # producing goes on at the new leader

            def write_to_zombie() -> None:
                try:
                    probe["result"] = raw_produce(stale, tb, [b"zombie-write"], acks=-1, timeout_s=3.0)
                except Exception as e:  # an RPC failure is also "no successful write", recorded for the assert
                    probe["result"] = e

            writer = threading.Thread(target=write_to_zombie, name="zombie-writer", daemon=True)
            writer.start()
            resume(cluster, zombie)
            writer.join(15)
            assert not writer.is_alive()
            result = probe["result"]
            assert getattr(result, "code", None) != ErrorCode.NONE, f"the zombie acknowledged a write: {result}"

            # It steps down, truncates and follows: back in the ISR under the new leader.
            rejoined = wait_for_isr(
                zk, cluster, tb, lambda lai: before.leader in lai.isr and lai.leader == after.leader, 30,
                f"{zombie} following {after.leader}",
            )  # fmt: skip
            assert rejoined.leader_epoch == after.leader_epoch
            producer.wait_acked_after(time.monotonic(), 25, 15)
        finally:
            stale.close()
            if cluster.paused(zombie):
                resume(cluster, zombie)
            sent = producer.stop()
        # The zombie did append (the producer's send that reached it after the pause, the stale client's write)
        # and cut it off when it learnt of the new leader.
        cut = re.findall(r"truncating from LEO (\d+) to (\d+)", cluster.log_text(zombie)[log_before:])
        assert any(int(a) > int(b) for a, b in cut), f"the zombie appended nothing, the scenario did not happen: {cut}"
        end = bucket_offsets(cluster, table).log_end_offset
        wait_replicas_identical(cluster, files, end, 20)
        assert_never_divergent({n: f.batches() for n, f in files.items()})
        for f in files.values():
            assert b"zombie-write" not in set(f.values_by_offset().values()), f"{f.name} kept the zombie's write"
    with capsys.disabled():
        print(
            f"\nzombie leader {zombie}: SIGSTOP -> new leader {after.leader} after {t_elected - t_stop:.2f} s; "
            f"write to the zombie answered {result}; sent {len(sent)}, failed {sum(1 for s in sent if s.error)}, "
            f"max latency {max(s.latency_ms for s in sent):.0f} ms"
        )
    assert_every_ack_read_once(cluster, table, sent)
    _tail_saw_everything_once(tail, sent)
