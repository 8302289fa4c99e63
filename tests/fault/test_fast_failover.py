"""Proof-of-death failure detection on real processes (docs/failure-detection.md).

A ZooKeeper of its own allows 30 s sessions (``maxSessionTimeout=30000``). With
``zookeeper.session-timeout: 30s``:
- kill -9 of a tablet server leading buckets: every leader_isr node it led names a new leader within a
  few seconds (printed), not after 30 s; an acks=all producer sending through the kill has no failed
  send (its longest stall is printed) and every acknowledged record is read back exactly once;
- the killed server restarted with the same id while its old session still lives: it registers at once
  (its stale node taken over), the coordinator treats it as died-and-joined and it rejoins every ISR;
- kill -9 and restart *at once* (the coordinator may never see the port refuse): same outcome;
- a tablet server killed while no coordinator leads: the next leader proves the death on its first probe.
With a 4 s session: SIGSTOP of a leader gives no proof — nothing changes for ~3 s, failover after expiry.
"""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from fluss_py.client import ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.faults import kill9, paused
from fluss_py.testing.fixtures import TEST_OVERRIDES
from fluss_py.testing.zkview import ZkView
from fluss_py.testing.zookeeper import ZooKeeperProcess
from fluss_py.zk.paths import LeaderIsrZNode, TabletServerZNode

pytestmark = pytest.mark.fault

TABLE = "fluss.fast_failover"
BUCKETS = 3
LONG_SESSION_S = 30.0
SHORT_SESSION_S = 4.0
TABLET_OVERRIDES = {"replica.lag.time.max.ms": "3s"}


@pytest.fixture
def make_cluster(long_session_zookeeper: ZooKeeperProcess, tmp_path: Path, zk_root: str) -> Iterator:
    made: list[LocalCluster] = []

    def make(session_s: float) -> LocalCluster:
        cluster = LocalCluster(
            tmp_path / f"cluster-{len(made) + 1}",
            1,
            3,
            zookeeper=long_session_zookeeper.address,
            zk_root=zk_root,
            overrides={**TEST_OVERRIDES, "zookeeper.session-timeout": f"{session_s:g}s"},
            tablet_overrides=TABLET_OVERRIDES,
            die_with_parent=True,
        )
        made.append(cluster)
        cluster.start(timeout=60)
        cluster.wait_for_leader(15)
        return cluster

    try:
        yield make
    finally:
        for cluster in made:
            cluster.close(grace=3.0)


def _bootstrap(cluster: LocalCluster) -> str:
    return ",".join(cluster.get(n).rpc_address for n in cluster.names(TABLET_SERVER))


def _placement(admin: SyncAdmin) -> dict[int, tuple[int, tuple[int, ...], tuple[int, ...]]]:
    _, buckets = admin.get_table_placement(TABLE)
    return {b.table_bucket.bucket: (b.leader, tuple(b.replicas), tuple(sorted(b.isr))) for b in buckets}


def _fully_replicated(admin: SyncAdmin) -> bool:
    placement = _placement(admin)
    return len(placement) == BUCKETS and all(
        leader >= 0 and len(isr) == 3 and set(isr) == set(replicas) for leader, replicas, isr in placement.values()
    )


def _leaders_in_zk(zk: ZkView, root: str, table_id: int) -> dict[int, int]:
    return {b: (zk.get_json(LeaderIsrZNode.path(root, table_id, b)) or {}).get("leader", -1) for b in range(BUCKETS)}


def _replicated_table_and_victim(
    cluster: LocalCluster, admin: SyncAdmin, zk: ZkView, root: str
) -> tuple[int, dict[int, int], int, list[int]]:
    """Create the table, wait until fully replicated; (table id, bucket -> leader, the leader of bucket 0, the
    buckets it leads)."""
    table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)
    cluster.wait_until(lambda: _fully_replicated(admin), 20, "every bucket has a leader and an ISR of 3")
    leaders = _leaders_in_zk(zk, root, table_id)
    victim_id = leaders[0]
    return table_id, leaders, victim_id, [b for b, leader in leaders.items() if leader == victim_id]


def _produce(producer: SyncProducer, start: int, count: int) -> list[tuple[int, int, bytes]]:
    futures: list[tuple[bytes, concurrent.futures.Future]] = []
    for i in range(start, start + count):
        value = f"value-{i:05d}".encode()
        futures.append((value, producer.send(TABLE, value, key=f"key-{i}".encode())))
    producer.flush()
    return [(f.result(timeout=60).bucket.bucket, f.result().offset, v) for v, f in futures]


def _read_back_exactly_once(bootstrap: str, sent: list[tuple[int, int, bytes]]) -> None:
    want = sorted(sent)
    got: list = []
    deadline = time.monotonic() + 30
    with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
        consumer.assign(TABLE)
        while len(got) < len(want) and time.monotonic() < deadline:
            got.extend(consumer.poll(0.5))
    assert sorted((r.bucket.bucket, r.offset, r.value) for r in got) == want


class _SteadyProducer:
    """One acks=all send at a time from a thread of its own, each waited for; records ack times and errors."""

    def __init__(self, bootstrap: str, first: int) -> None:
        options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
        self._producer = SyncProducer(bootstrap, options)
        self._next = first
        self._stop = threading.Event()
        self.acked: list[tuple[float, int, int, bytes]] = []  # (monotonic ack time, bucket, offset, value)
        self.errors: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, name="steady-producer", daemon=True)

    def __enter__(self) -> _SteadyProducer:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            i, self._next = self._next, self._next + 1
            value = f"value-{i:05d}".encode()
            try:
                md = self._producer.send(TABLE, value, key=f"key-{i}".encode()).result(timeout=60)
            except Exception as e:  # a failed send is a test failure, reported by the test
                self.errors.append(e)
                continue
            self.acked.append((time.monotonic(), md.bucket.bucket, md.offset, value))

    def longest_gap_after(self, t: float) -> float:
        times = [t] + [a for a, *_ in self.acked if a >= t]
        return max((b - a for a, b in itertools.pairwise(times)), default=0.0)

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=70)
        self._producer.close()


def _incarnation(zk: ZkView, root: str, server_id: int) -> str | None:
    data = zk.get_bytes(TabletServerZNode.path(root, server_id))
    return TabletServerZNode.decode(data).incarnation if data else None


def test_kill9_with_a_30s_session_fails_over_fast_and_restarts_rejoin(make_cluster):
    cluster = make_cluster(LONG_SESSION_S)
    root, bootstrap = cluster.zk_root, _bootstrap(cluster)
    coordinator = cluster.names("coordinator")[0]
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin, ZkView(cluster.zookeeper_address) as zk:
        table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)
        cluster.wait_until(lambda: _fully_replicated(admin), 20, "every bucket has a leader and an ISR of 3")
        options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
        with SyncProducer(bootstrap, options) as producer:
            sent = _produce(producer, 0, 300)

            # 1. kill -9 of a leader: the coordinator has proof at once, the session lives on for 30 s
            leaders = _leaders_in_zk(zk, root, table_id)
            victim_id = leaders[0]
            led = [b for b, leader in leaders.items() if leader == victim_id]
            victim = f"{TABLET_SERVER}-{victim_id}"
            with _SteadyProducer(bootstrap, 100_000) as steady:
                cluster.wait_until(lambda: len(steady.acked) >= 20, 10, "the steady producer is running")
                t_kill = kill9(cluster, victim)
                cluster.wait_until(
                    lambda: all(_leaders_in_zk(zk, root, table_id)[b] not in (victim_id, -1) for b in led),
                    10,
                    f"a new leader for buckets {led} of the killed tablet server {victim_id}",
                )
                failover_s = time.monotonic() - t_kill
                acked_at_failover = len(steady.acked)
                cluster.wait_until(lambda: len(steady.acked) >= acked_at_failover + 20, 30, "acks after the failover")
            print(f"\nkill -9 of tablet server {victim_id} (session {LONG_SESSION_S:g}s): "
                  f"{len(led)} bucket(s) have a new leader in ZooKeeper after {failover_s:.2f}s; "
                  f"steady acks=all producer: longest stall {steady.longest_gap_after(t_kill):.2f}s, "
                  f"{len(steady.acked)} acked, {len(steady.errors)} failed")  # fmt: skip
            assert steady.errors == [], f"failed sends: {steady.errors[:3]}"
            sent += [(b, o, v) for _, b, o, v in steady.acked]
            assert zk.exists(TabletServerZNode.path(root, victim_id)), "the dead server's session has not expired"
            isrs = [zk.get_json(LeaderIsrZNode.path(root, table_id, b))["isr"] for b in range(BUCKETS)]
            assert all(victim_id not in isr for isr in isrs), f"the dead server left every ISR: {isrs}"
            assert "proof of death" in cluster.log_text(coordinator)
            sent += _produce(producer, 300, 200)  # acks=all with the ISR of two

            # 2. restart with the same id while the old session still holds ids/<id>
            old = _incarnation(zk, root, victim_id)
            t_start = time.monotonic()
            cluster.start_process(victim)
            cluster.wait_until(
                lambda: _incarnation(zk, root, victim_id) not in (None, old), 10, "re-registered with a new incarnation"
            )
            print(f"restart of tablet server {victim_id}: registered after {time.monotonic() - t_start:.2f}s")
            cluster.wait_until(lambda: _fully_replicated(admin), 30, f"tablet server {victim_id} rejoined every ISR")
            print(f"restart of tablet server {victim_id}: back in every ISR after {time.monotonic() - t_start:.2f}s")

            # 3. kill -9 and restart at once (the port may be bound again before anyone probes it)
            leaders = _leaders_in_zk(zk, root, table_id)
            second_id = next(s for s in leaders.values() if s != victim_id)
            second = f"{TABLET_SERVER}-{second_id}"
            old = _incarnation(zk, root, second_id)
            t_kill = kill9(cluster, second)
            cluster.start_process(second)
            cluster.wait_until(
                lambda: _incarnation(zk, root, second_id) not in (None, old), 10, "re-registered with a new incarnation"
            )
            print(f"kill -9 + immediate restart of tablet server {second_id}: "
                  f"registered after {time.monotonic() - t_kill:.2f}s")  # fmt: skip
            cluster.wait_until(lambda: _fully_replicated(admin), 30, f"tablet server {second_id} rejoined every ISR")
            print(f"kill -9 + immediate restart of tablet server {second_id}: "
                  f"back in every ISR after {time.monotonic() - t_kill:.2f}s")  # fmt: skip
            sent += _produce(producer, 500, 200)
        _read_back_exactly_once(bootstrap, sent)


def test_sigstop_gives_no_proof_and_waits_for_session_expiry(make_cluster):
    cluster = make_cluster(SHORT_SESSION_S)
    root, bootstrap = cluster.zk_root, _bootstrap(cluster)
    coordinator = cluster.names("coordinator")[0]
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin, ZkView(cluster.zookeeper_address) as zk:
        table_id, leaders, victim_id, led = _replicated_table_and_victim(cluster, admin, zk, root)
        victim = f"{TABLET_SERVER}-{victim_id}"
        with paused(cluster, victim) as t_stop:
            quiet_until = t_stop + SHORT_SESSION_S - 1.0
            while time.monotonic() < quiet_until:  # no proof: nothing may change before the session expires
                assert _leaders_in_zk(zk, root, table_id) == leaders, "a paused server was failed over early"
                time.sleep(0.2)
            cluster.wait_until(
                lambda: all(_leaders_in_zk(zk, root, table_id)[b] not in (victim_id, -1) for b in led),
                SHORT_SESSION_S + 8,
                "failover after the paused server's session expired",
            )
            failover_s = time.monotonic() - t_stop
            print(f"\nSIGSTOP of tablet server {victim_id} (session {SHORT_SESSION_S:g}s): "
                  f"new leader(s) after {failover_s:.2f}s")  # fmt: skip
            assert failover_s >= SHORT_SESSION_S - 1.0
            assert not zk.exists(TabletServerZNode.path(root, victim_id)), "failed over by session expiry"
            assert "died: proof of death" not in cluster.log_text(coordinator)  # ("no proof of death" may be)
        # SIGCONT: the server finds its session expired, registers again and rejoins as a follower
        cluster.wait_until(lambda: _fully_replicated(admin), 30, f"tablet server {victim_id} rejoined every ISR")


def test_a_new_coordinator_leader_proves_a_death_that_happened_while_none_was_leading(make_cluster):
    cluster = make_cluster(LONG_SESSION_S)
    root, bootstrap = cluster.zk_root, _bootstrap(cluster)
    coordinator = cluster.names("coordinator")[0]
    with SyncAdmin(bootstrap, request_timeout=10.0) as admin, ZkView(cluster.zookeeper_address) as zk:
        table_id, _, victim_id, led = _replicated_table_and_victim(cluster, admin, zk, root)
        assert cluster.stop_process(coordinator, timeout=10) == "stopped"  # closes its session: no leader now
        kill9(cluster, f"{TABLET_SERVER}-{victim_id}")
        t_start = time.monotonic()
        cluster.start_process(coordinator)
        cluster.wait_until(
            lambda: all(_leaders_in_zk(zk, root, table_id)[b] not in (victim_id, -1) for b in led),
            15,
            f"the restarted coordinator fails over buckets {led} of the dead tablet server {victim_id}",
        )
        took = time.monotonic() - t_start
        print(f"\ncoordinator restarted after tablet server {victim_id} died: new leader(s) {took:.2f}s "
              f"after the coordinator's start (session {LONG_SESSION_S:g}s)")  # fmt: skip
        assert zk.exists(TabletServerZNode.path(root, victim_id)), "the dead server's session has not expired"
