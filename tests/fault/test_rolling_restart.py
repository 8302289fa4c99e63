"""Rolling restart with SIGTERM on real processes (issue 7 item 3, docs/operations.md, docs/tablet-server.md).

3 coordinators, 3 tablet servers, a table with RF 3, several buckets, min.insync.replicas 2; a steady
one-at-a-time acks=all idempotent producer (``replication_support.SteadyProducer``) and a tailing consumer
per bucket run throughout. Seed §7.3 order: every tablet server one at a time — SIGTERM, wait until it
exited (its controlled shutdown moved its leaders away first), start it again, wait until every bucket's ISR
is full — then the coordinators, standbys first and the leader last. Checked: 0 failed sends; every
acknowledged record consumed exactly once, in order, per bucket; each stopped tablet server led no bucket
when its ZooKeeper session ended (below). A second test: a SIGTERM'd server leading buckets exits within a
bound, and each of its buckets got a leader from its ISR with leader epoch + 1 before it exited.

"Led no bucket when its session ended" is read from ZooKeeper's own order: the session's end deletes
``tabletservers/ids/<id>``, which sets the parent's ``pzxid``; the leader_isr version in force then is the
last one with ``mzxid`` below it (the current node, or the last version this test saw while polling during
the shutdown when the node changed again afterwards). That alone does not prove a *controlled* shutdown (the
coordinator's proof of death also moves leaders before the session ends: the port closes first), so the
server's log must also show its controlled shutdown completed before it stopped; with the controlled
shutdown disabled, the rolling test fails there (and its producer stalls ~1.1 s per step).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from signal import SIGTERM

import pytest

from fluss_py.client import ProducerOptions
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER
from fluss_py.testing.zkview import ZkView
from fluss_py.types import LeaderAndIsr, TableBucket
from fluss_py.zk.paths import LeaderIsrZNode, TabletServerZNode
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    SLOW_MS,
    Sent,
    SteadyProducer,
    TailingConsumer,
    assert_every_ack_read_once,
    assert_exactly_once_in_order,
    bootstrap,
    bucket_offsets,
    create_table,
    leader_isr,
    server_name,
    slow_sends,
)

pytestmark = pytest.mark.fault

BUCKETS = 4
MIN_ISR = 2
EXIT_BOUND_S = 10.0  # generous: the controlled shutdown gives up after 5 s, stopping takes < 2 s
PRODUCER = ProducerOptions(acks=-1, idempotence=True, request_timeout=10.0, delivery_timeout=60.0)


# ---------------------------------------------------------------------------------------------- ZooKeeper reads
Version = tuple[int, LeaderAndIsr]  # (mzxid, leader_isr)


def _leader_isr_versions(zk: ZkView, cluster: LocalCluster, table_id: int) -> dict[int, Version]:
    out: dict[int, Version] = {}
    for b in range(BUCKETS):
        data, stat = zk.client.get(LeaderIsrZNode.path(cluster.zk_root, table_id, b))
        out[b] = (stat.mzxid, LeaderIsrZNode.decode(data))
    return out


def _full_isr(zk: ZkView, cluster: LocalCluster, table_id: int) -> bool:
    return all(
        (lai := leader_isr(zk, cluster, TableBucket(table_id, b))) is not None and len(lai.isr) == 3 and lai.leader >= 0
        for b in range(BUCKETS)
    )


@dataclass
class Shutdown:
    """What one SIGTERM of a tablet server did, read from ZooKeeper and the process table."""

    sid: int
    before: dict[int, LeaderAndIsr]  # leader_isr per bucket at SIGTERM
    at_session_end: dict[int, LeaderAndIsr]  # the version in force when the registration vanished
    exit_s: float  # SIGTERM -> process gone

    @property
    def led(self) -> list[int]:
        return [b for b, lai in self.before.items() if lai.leader == self.sid]

    def moved(self) -> dict[int, tuple[int, int]]:
        """bucket -> (new leader, new leader epoch) for every bucket it led."""
        return {b: (self.at_session_end[b].leader, self.at_session_end[b].leader_epoch) for b in self.led}


def sigterm_and_watch(cluster: LocalCluster, zk: ZkView, table_id: int, sid: int) -> Shutdown:
    """SIGTERM tablet server ``sid``, poll leader_isr until it exited, and return the leader_isr versions in
    force when its ZooKeeper session ended (see the module docstring)."""
    name = server_name(sid)
    reg = TabletServerZNode.path(cluster.zk_root, sid)
    assert zk.exists(reg), f"{name} is not registered"
    before = {b: lai for b, (_, lai) in _leader_isr_versions(zk, cluster, table_id).items()}
    seen: dict[int, dict[int, LeaderAndIsr]] = {b: {} for b in range(BUCKETS)}
    t0 = time.monotonic()
    assert cluster.signal(name, SIGTERM), f"{name} is not running"
    while cluster.alive(name):
        assert time.monotonic() - t0 < EXIT_BOUND_S, f"{name} still runs {EXIT_BOUND_S:g}s after SIGTERM"
        for b, (mzxid, lai) in _leader_isr_versions(zk, cluster, table_id).items():
            seen[b][mzxid] = lai
        time.sleep(0.01)
    exit_s = time.monotonic() - t0
    assert cluster.handle(name).returncode == 0, f"{name} exited with {cluster.handle(name).returncode}"
    assert not zk.exists(reg), f"{name} exited but its registration is still there"
    session_end = zk.client.exists(TabletServerZNode.parent(cluster.zk_root)).pzxid
    at_end: dict[int, LeaderAndIsr] = {}
    for b, (mzxid, lai) in _leader_isr_versions(zk, cluster, table_id).items():
        seen[b][mzxid] = lai
        earlier = [z for z in seen[b] if z < session_end]
        assert earlier, f"bucket {b}: no leader_isr version from before {name}'s session ended was seen"
        at_end[b] = seen[b][max(earlier)]
    return Shutdown(sid, before, at_end, exit_s)


def assert_handed_over(shutdown: Shutdown) -> None:
    """It led nothing when its session ended; each bucket it led has a leader from its ISR, epoch + 1."""
    still = [b for b, lai in shutdown.at_session_end.items() if lai.leader == shutdown.sid]
    assert not still, f"tablet server {shutdown.sid} still led buckets {still} when its session ended"
    for b in shutdown.led:
        old, new = shutdown.before[b], shutdown.at_session_end[b]
        assert new.leader in old.isr and new.leader != shutdown.sid, f"bucket {b}: {new} does not lead from {old}"
        assert new.leader_epoch == old.leader_epoch + 1, f"bucket {b}: leader epoch {old} -> {new}"
        assert shutdown.sid not in new.isr, f"bucket {b}: the stopping server is still in the ISR: {new}"


def assert_controlled_shutdown_completed(cluster: LocalCluster, sid: int) -> None:
    """The server's log since its last SIGTERM says its controlled shutdown completed (before it stopped).

    ZooKeeper alone cannot tell a controlled shutdown from a death here: without one, the coordinator's proof of
    death (the server's port closes before its session does) also moves the leaders before the session ends.
    """
    text = cluster.log_text(server_name(sid))
    last = text[text.rindex("Stop requested") :]
    done = last.find(f"Controlled shutdown of tablet server {sid} complete")
    assert 0 <= done < last.index(f"Tablet server {sid} stopped"), f"no completed controlled shutdown: {last[:600]}"


def longest_stall_ms(sent: list[Sent], start: float, end: float) -> float:
    """Longest single send (one at a time: a stall is a slow send) begun or still running in [start, end]."""
    return max((s.latency_ms for s in sent if s.end >= start and s.start <= end), default=0.0)


# ---------------------------------------------------------------------------------------------- tests
def test_rolling_restart_in_seed_order_causes_no_producer_error(cluster_factory):
    cluster = cluster_factory(coordinators=3, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table = "rolling"
    table_id = create_table(cluster, table, buckets=BUCKETS, rf=3, properties={"min.insync.replicas": str(MIN_ISR)})
    servers = bootstrap(cluster)
    report: list[str] = []
    with ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: _full_isr(zk, cluster, table_id), 20, "every ISR full after the create")
        consumers = [TailingConsumer(servers, f"{DATABASE}.{table}", b).start() for b in range(BUCKETS)]
        producer = SteadyProducer(
            servers, f"{DATABASE}.{table}", PRODUCER, interval=0.015, bucket_of=lambda seq: seq % BUCKETS
        ).start()
        try:
            producer.wait_acked_after(time.monotonic(), 20, 15)

            # 1. tablet servers, one at a time: SIGTERM, exited, started again, every ISR full again
            for name in cluster.names(TABLET_SERVER):
                sid = cluster.get(name).id
                t0 = time.monotonic()
                shutdown = sigterm_and_watch(cluster, zk, table_id, sid)
                assert_handed_over(shutdown)
                assert_controlled_shutdown_completed(cluster, sid)
                t_exit = time.monotonic()
                cluster.start_process(name)
                cluster.wait_ready([name], timeout=30)
                cluster.wait_until(lambda: _full_isr(zk, cluster, table_id), 30, f"every ISR full after {name}")
                producer.wait_acked_after(time.monotonic(), 10, 15)
                t1 = time.monotonic()
                report.append(
                    f"{name}: led {shutdown.led} -> moved {shutdown.moved()}, exited {shutdown.exit_s:.2f}s "
                    f"after SIGTERM, ISR full again {t1 - t0:.2f}s after; longest producer stall "
                    f"{longest_stall_ms(producer.sent, t0, t_exit):.0f} ms while stopping, "
                    f"{longest_stall_ms(producer.sent, t_exit, t1):.0f} ms while rejoining"
                )

            # 2. coordinators: standbys first, the leader last
            leader = cluster.wait_for_leader(15)
            for name in [n for n in cluster.names(COORDINATOR) if n != leader] + [leader]:
                t0 = time.monotonic()
                assert cluster.stop_process(name, timeout=EXIT_BOUND_S) == "stopped", f"{name} ignored SIGTERM"
                if name == leader:
                    new_leader = cluster.wait_for_leader(15, exclude=[leader])
                cluster.start_process(name)
                cluster.wait_ready([name], timeout=30)
                producer.wait_acked_after(time.monotonic(), 10, 15)
                t1 = time.monotonic()
                what = f"leader -> {new_leader}" if name == leader else "standby"
                report.append(
                    f"{name} ({what}): restarted in {t1 - t0:.2f}s, "
                    f"longest producer stall {longest_stall_ms(producer.sent, t0, t1):.0f} ms"
                )
            cluster.wait_for_leader(15)
            producer.wait_acked_after(time.monotonic(), 20, 15)
        finally:
            sent = producer.stop()
        print("\nrolling restart (runbook order), steady acks=all producer:")
        for line in report:
            print("  " + line)
        failed = [s for s in sent if s.error is not None]
        slow = slow_sends(sent)
        print(f"  {len(sent)} sends, {len(failed)} failed, longest send {max(s.latency_ms for s in sent):.0f} ms, "
              f"{len(slow)} slower than {SLOW_MS:g} ms {[(s.seq, round(s.latency_ms)) for s in slow]}")  # fmt: skip
        assert not failed, f"{len(failed)} failed sends, first: {failed[0].error}"

        for b in range(BUCKETS):
            mine = [s for s in sent if s.bucket == b]
            hw = bucket_offsets(cluster, table, b).high_watermark
            assert hw == len(mine), f"bucket {b}: high watermark {hw}, {len(mine)} records sent"
            consumers[b].wait_for(hw, 30)
        for b, consumer in enumerate(consumers):
            assert_exactly_once_in_order(sent, consumer.stop(), bucket=b)


def test_sigterm_of_a_leader_moves_its_leaders_then_exits_in_bounded_time(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table = "sigterm"
    table_id = create_table(cluster, table, buckets=BUCKETS, rf=3, properties={"min.insync.replicas": str(MIN_ISR)})
    with ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: _full_isr(zk, cluster, table_id), 20, "every ISR full after the create")
        leaders = [leader_isr(zk, cluster, TableBucket(table_id, b)).leader for b in range(BUCKETS)]
        victim = max(set(leaders), key=leaders.count)  # leads at least one bucket
        shutdown = sigterm_and_watch(cluster, zk, table_id, victim)
    print(f"\nSIGTERM of tablet server {victim}: led {shutdown.led}, moved (leader, epoch) {shutdown.moved()}, "
          f"exited after {shutdown.exit_s:.2f}s")  # fmt: skip
    assert shutdown.led, "the victim led no bucket"
    assert shutdown.exit_s < EXIT_BOUND_S
    assert_handed_over(shutdown)
    assert_controlled_shutdown_completed(cluster, victim)


def test_sigterm_of_a_server_leading_nothing_does_not_stall_acks_all(cluster_factory):
    """A server that leads nothing still asks for a controlled shutdown: it leaves the ISRs before it stops
    fetching (it used to skip it and stay in the ISR until its death was noticed: a ~0.5 s acks=all stall).
    The acks=all producer writing to the bucket it follows sees no error while it stops and rejoins."""
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES)
    table = "follower_stop"
    table_id = create_table(cluster, table, buckets=1, rf=3, properties={"min.insync.replicas": str(MIN_ISR)})
    tb = TableBucket(table_id, 0)
    with ZkView(cluster.zookeeper_address) as zk:
        cluster.wait_until(lambda: len(leader_isr(zk, cluster, tb).isr) == 3, 20, "a full ISR after the create")
        leader = leader_isr(zk, cluster, tb).leader
        follower = next(cluster.get(n).id for n in cluster.names(TABLET_SERVER) if cluster.get(n).id != leader)
        producer = SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", PRODUCER, interval=0.015).start()
        try:
            producer.wait_acked_after(time.monotonic(), 20, 15)
            t0 = time.monotonic()
            assert cluster.stop_process(server_name(follower), timeout=EXIT_BOUND_S) == "stopped"
            exit_s = time.monotonic() - t0
            cluster.wait_until(lambda: follower not in leader_isr(zk, cluster, tb).isr, 10, "the ISR without it")
            producer.wait_acked_after(time.monotonic(), 10, 15)
            t1 = time.monotonic()
            cluster.start_process(server_name(follower))
            cluster.wait_until(lambda: len(leader_isr(zk, cluster, tb).isr) == 3, 30, "the ISR full again")
            producer.wait_acked_after(time.monotonic(), 10, 15)
            t2 = time.monotonic()
        finally:
            sent = producer.stop()
        assert leader_isr(zk, cluster, tb).leader == leader, "the leader changed"
    assert_controlled_shutdown_completed(cluster, follower)
    print(f"\nSIGTERM of follower {follower} (leads nothing): exited after {exit_s:.2f}s; longest producer stall "
          f"{longest_stall_ms(sent, t0, t1):.0f} ms while it stopped, {longest_stall_ms(sent, t1, t2):.0f} ms "
          f"while it rejoined; {len(sent)} sends")  # fmt: skip
    assert_every_ack_read_once(cluster, table, sent)
