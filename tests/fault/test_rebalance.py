"""Issue 6 acceptance on real processes: tablet servers added under load are filled by a rebalance that
starts by itself; a target killed mid-batch rolls the batch back; a coordinator leader killed
mid-rebalance is succeeded by one that resumes or rolls back. Throughout: acks=all writes never fail, every
acknowledged record is read back exactly once, no bucket ever has fewer than RF replicas.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from fluss_py.client import ProducerOptions, SyncProducer
from fluss_py.common.cross_site import REQUEST_HEADER
from fluss_py.testing.cluster import COORDINATOR, LocalCluster
from fluss_py.testing.health import fetch_text
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import TableAssignmentZNode

from .replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    SteadyProducer,
    assert_exactly_once_in_order,
    bootstrap,
    consume,
    create_table,
    leader_isr,
    server_name,
)

pytestmark = pytest.mark.fault

BUCKETS = 30
RF = 3
NO_AUTO_REBALANCE = {"coordinator.rebalance.auto": "false"}


def make_cluster(cluster_factory, coordinators: int, **coordinator_overrides) -> LocalCluster:
    overrides = {k.replace("_", "."): str(v) for k, v in coordinator_overrides.items()}
    cluster = cluster_factory(coordinators=coordinators, tablet_servers=3, coordinator_overrides=overrides,
                              tablet_overrides=FAULT_OVERRIDES)  # fmt: skip
    for name in cluster.names(COORDINATOR):  # the servers were started with them
        assert all(f"{k}={v}" in cluster.get(name).argv for k, v in overrides.items()), cluster.get(name).argv
    return cluster


OWN = {REQUEST_HEADER: "1"}


def http(cluster: LocalCluster, method: str, query: str = "") -> dict:
    leader = cluster.wait_for_leader(15)
    # the header every fluss_py client sends: a state change without it is refused as cross-site
    req = urllib.request.Request(f"{cluster.get(leader).http_url}/rebalance{query}", method=method, headers=OWN)
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return {"http_status": e.code, **json.loads(e.read())}


def cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    """``fluss-py admin rebalance ...`` against the cluster's directory (it finds the leader itself)."""
    return subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", "admin", "rebalance", "--dir", str(cluster.directory), *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def assignment(zk: ZkView, cluster: LocalCluster, table_id: int) -> dict[int, tuple[int, ...]]:
    data = zk.get_bytes(TableAssignmentZNode.path(cluster.zk_root, table_id))
    assert data is not None
    return TableAssignmentZNode.decode(data)


def spread(a: dict[int, tuple[int, ...]], servers: list[int]) -> float:
    c = Counter(s for r in a.values() for s in r)
    values = [c[s] for s in servers]
    return statistics.pstdev(values) / statistics.mean(values)


class ReplicaWatch:
    """Samples the assignment: the fewest replicas any bucket had (must stay >= RF)."""

    def __init__(self, zk: ZkView, cluster: LocalCluster, table_id: int) -> None:
        self.zk, self.cluster, self.table_id = zk, cluster, table_id
        self.fewest = RF

    def sample(self) -> dict[int, tuple[int, ...]]:
        a = assignment(self.zk, self.cluster, self.table_id)
        self.fewest = min(self.fewest, *(len(r) for r in a.values()))
        return a


def start_producer(cluster: LocalCluster, table: str) -> SteadyProducer:
    options = ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)
    return SteadyProducer(bootstrap(cluster), f"{DATABASE}.{table}", options, interval=0.005,
                          bucket_of=lambda seq: seq % BUCKETS).start()  # fmt: skip


def check_data(cluster: LocalCluster, table: str, sent) -> None:
    for b in range(BUCKETS):
        mine = [s for s in sent if s.bucket == b]
        end = max((s.offset for s in mine if s.offset is not None), default=-1) + 1
        assert_exactly_once_in_order(mine, consume(cluster, table, b, end), bucket=b)


def wait_full(cluster: LocalCluster, zk: ZkView, table_id: int, timeout: float = 30.0) -> None:
    def full() -> bool:
        a = assignment(zk, cluster, table_id)
        for b, replicas in a.items():
            lai = leader_isr(zk, cluster, TableBucket(table_id, b))
            if len(replicas) != RF or lai is None or sorted(lai.isr) != sorted(replicas):
                return False
        return True

    cluster.wait_until(full, timeout, "every bucket back to RF replicas, all in the ISR")


def test_two_new_servers_are_filled_by_an_automatic_rebalance_under_load(cluster_factory):
    cluster = make_cluster(cluster_factory, 1)
    table_id = create_table(cluster, "rebalance", buckets=BUCKETS, rf=RF)
    producer = start_producer(cluster, "rebalance")
    with ZkView(cluster.zookeeper_address) as zk:
        watch = ReplicaWatch(zk, cluster, table_id)
        producer.wait_acked_after(time.monotonic(), 200, 30)
        for _ in range(2):
            cluster.add_tablet_server()
        cluster.wait_ready(timeout=30)
        cluster.wait_until(lambda: http(cluster, "GET").get("status") == "REBALANCING", 30, "a rebalance started")
        last: dict = {}

        def done() -> bool:
            watch.sample()
            last.update(http(cluster, "GET"))
            return last.get("status") not in ("REBALANCING", None)

        cluster.wait_until(done, 120, lambda: f"rebalance finished; now {last}")
        assert last["status"] == "COMPLETED", last
        assert "new-server" in last["reason"]
        assert last["bytes_total"] > 0, last  # planned with the sizes the leaders report on their heartbeats
        producer.wait_acked_after(time.monotonic(), 100, 30)
        sent = producer.stop()
        final = watch.sample()
        assert spread(final, [1, 2, 3, 4, 5]) <= 0.1, final
        assert watch.fewest >= RF
        metrics = fetch_text(f"{cluster.get(cluster.wait_for_leader(5)).http_url}/metrics")
        peak = next(float(line.split()[-1]) for line in metrics.splitlines()
                    if line.startswith("fluss_rebalance_server_migrations_peak"))  # fmt: skip
        assert 0 < peak <= 5  # tablet-server.rebalance.max-concurrent-migrations
        assert 'fluss_rebalance_state{state="completed"} 1.0' in metrics
        wait_full(cluster, zk, table_id)
    assert not [s for s in sent if s.error], [s.error for s in sent if s.error][:3]
    check_data(cluster, "rebalance", sent)


def test_kill9_of_a_target_mid_batch_rolls_the_batch_back(cluster_factory):
    cluster = make_cluster(cluster_factory, 1, coordinator_rebalance_auto="false")
    table_id = create_table(cluster, "rollback", buckets=BUCKETS, rf=RF)
    producer = start_producer(cluster, "rollback")
    with ZkView(cluster.zookeeper_address) as zk:
        watch = ReplicaWatch(zk, cluster, table_id)
        producer.wait_acked_after(time.monotonic(), 100, 30)
        target = cluster.add_tablet_server()
        cluster.wait_ready(timeout=30)
        dry = cli(cluster, "--dry-run")
        assert dry.returncode == 0 and "PLANNED" in dry.stdout and "replica move(s)" in dry.stdout, dry
        cluster.pause(target)  # it cannot catch up: its moves stay in flight
        started = http(cluster, "POST")
        assert started["status"] == "REBALANCING", started
        assert started["moves_in_flight"] > 0
        watch.sample()
        cluster.kill(target)
        last: dict = {}

        def ended() -> bool:
            watch.sample()
            last.update(http(cluster, "GET"))
            return last.get("status") == "FAILED"

        cluster.wait_until(ended, 30, lambda: f"the batch rolled back; now {last}")
        assert "died" in last["message"] and last["moves_rolled_back"] > 0, last
        final = watch.sample()
        assert all(4 not in r for r in final.values()), final
        assert watch.fewest >= RF
        wait_full(cluster, zk, table_id)
        producer.wait_acked_after(time.monotonic(), 50, 30)
        sent = producer.stop()
    assert not [s for s in sent if s.error], [s.error for s in sent if s.error][:3]
    check_data(cluster, "rollback", sent)
    assert server_name(4) == target


def test_kill9_of_the_coordinator_leader_mid_rebalance_resumes_or_rolls_back(cluster_factory):
    cluster = make_cluster(cluster_factory, 3, coordinator_rebalance_auto="false")
    table_id = create_table(cluster, "failover", buckets=BUCKETS, rf=RF)
    producer = start_producer(cluster, "failover")
    with ZkView(cluster.zookeeper_address) as zk:
        watch = ReplicaWatch(zk, cluster, table_id)
        producer.wait_acked_after(time.monotonic(), 100, 30)
        for _ in range(2):
            cluster.add_tablet_server()
        cluster.wait_ready(timeout=30)
        old = cluster.wait_for_leader(15)
        started = http(cluster, "POST")
        assert started["status"] == "REBALANCING", started
        cluster.kill(old)
        last: dict = {}

        def ended() -> bool:
            watch.sample()
            try:
                last.update(http(cluster, "GET"))
            except OSError:
                return False
            return last.get("status") in ("COMPLETED", "FAILED")

        cluster.wait_until(ended, 120, lambda: f"the new leader finished the rebalance; now {last}")
        assert watch.fewest >= RF
        final = watch.sample()
        assert all(len(r) == RF for r in final.values())
        if last["status"] == "COMPLETED":
            assert spread(final, [1, 2, 3, 4, 5]) <= 0.1
        wait_full(cluster, zk, table_id)
        producer.wait_acked_after(time.monotonic(), 50, 30)
        sent = producer.stop()
    assert not [s for s in sent if s.error], [s.error for s in sent if s.error][:3]
    check_data(cluster, "failover", sent)


THROTTLE = 1024 * 1024  # bytes/s per leader server
FETCH_MAX = 256 * 1024  # replica.fetch.max.bytes: bounds the burst and one read's overshoot (a batch)
BURST = min(THROTTLE, FETCH_MAX)  # as ReplicaManager sizes it


def test_the_throttle_holds_while_a_new_server_is_filled(cluster_factory):
    """docs/rebalance.md §6: each leader serves a follower being added at most rate * t + burst + one batch.
    Measured on the new server's disk every ~0.1 s, per leader (the leaders of the moved buckets do not
    change before their copy is done), over every window between two samples."""
    overrides = {**FAULT_OVERRIDES, "tablet-server.rebalance.throttle-bytes-per-second": str(THROTTLE),
                 "replica.fetch.max.bytes": str(FETCH_MAX)}  # fmt: skip
    cluster = cluster_factory(coordinators=1, tablet_servers=3, coordinator_overrides=NO_AUTO_REBALANCE,
                              tablet_overrides=overrides)  # fmt: skip
    buckets = 6
    table_id = create_table(cluster, "throttle", buckets=buckets, rf=RF)
    record = b"t" * (16 * 1024)
    options = ProducerOptions(acks=-1, batch_size=64 * 1024)
    with SyncProducer(bootstrap(cluster), options) as producer:  # ~2.6 MB per bucket
        futures = [producer.send(f"{DATABASE}.throttle", record, bucket=i % buckets) for i in range(buckets * 160)]
        producer.flush()
        for f in futures:
            f.result(timeout=30)
    target = cluster.add_tablet_server()
    cluster.wait_ready(timeout=30)
    with ZkView(cluster.zookeeper_address) as zk:
        leaders = {b: leader_isr(zk, cluster, TableBucket(table_id, b)).leader for b in range(buckets)}
    data_dir = Path(cluster.get(target).data_dir)

    def on_target() -> dict[int, int]:  # leader -> bytes copied onto the target for buckets it leads
        out: Counter[int] = Counter()
        for b, leader in leaders.items():
            out[leader] += sum(f.stat().st_size for f in (data_dir / f"{table_id}-{b}").glob("*.log"))
        return dict(out)

    t0 = time.monotonic()
    started = http(cluster, "POST")
    assert started["status"] == "REBALANCING" and started["replica_moves"] > 0, started
    samples: list[tuple[float, dict[int, int]]] = []
    last: dict = {}

    def done() -> bool:
        samples.append((time.monotonic() - t0, on_target()))
        last.update(http(cluster, "GET"))
        return last.get("status") != "REBALANCING"

    cluster.wait_until(done, 120, lambda: f"rebalance finished; now {last}")
    assert last["status"] == "COMPLETED", last
    # token bucket: over any window at most rate * window + burst + one batch (a read's overshoot)
    for i, (ti, before) in enumerate(samples):
        for tj, after in samples[i + 1 :]:
            for leader, copied in after.items():
                moved = copied - before.get(leader, 0)
                bound = 1.25 * THROTTLE * (tj - ti) + BURST + FETCH_MAX
                assert moved <= bound, f"leader {leader} served {moved} bytes in {ti:.2f}..{tj:.2f}s (> {bound:.0f})"
    total = sum(samples[-1][1].values())
    assert total > 4 * THROTTLE, samples[-1]  # enough to tell a throttled copy from an unthrottled one
    served = {}  # and the leaders' own count (fluss_rebalance_throttled_bytes_total) agrees
    for sid in set(leaders.values()):
        metrics = fetch_text(f"{cluster.get(server_name(sid)).http_url}/metrics")
        served[sid] = next(float(line.split()[-1]) for line in metrics.splitlines()
                           if line.startswith("fluss_rebalance_throttled_bytes_total "))  # fmt: skip
        assert served[sid] >= samples[-1][1].get(sid, 0), (served, samples[-1])
        assert served[sid] <= 1.25 * THROTTLE * samples[-1][0] + BURST + FETCH_MAX, (served, samples[-1])


def test_a_restarted_follower_catches_up_unthrottled(cluster_factory):
    """docs/rebalance.md §6: only replicas a rebalance move is adding are throttled. A follower killed and
    restarted with a backlog catches up at full speed: with a 64 KiB/s budget the ~3 MB it missed would take
    over 20 s throttled; it rejoins every ISR in well under that, and no leader counts a throttled byte."""
    throttle = 64 * 1024
    overrides = {**FAULT_OVERRIDES, "tablet-server.rebalance.throttle-bytes-per-second": str(throttle)}
    cluster = cluster_factory(coordinators=1, tablet_servers=3, coordinator_overrides=NO_AUTO_REBALANCE,
                              tablet_overrides=overrides)  # fmt: skip
    buckets = 3
    table_id = create_table(cluster, "restart", buckets=buckets, rf=RF)
    victim = server_name(3)
    cluster.kill(victim)
    record = b"r" * (16 * 1024)
    options = ProducerOptions(acks=-1, batch_size=64 * 1024, delivery_timeout=60.0)
    with ZkView(cluster.zookeeper_address) as zk:
        tbs = [TableBucket(table_id, b) for b in range(buckets)]
        cluster.wait_until(lambda: all(3 not in leader_isr(zk, cluster, tb).isr for tb in tbs), 30, "3 out of the ISR")
        with SyncProducer(bootstrap(cluster), options) as producer:  # ~1 MB per bucket while 3 is down
            futures = [producer.send(f"{DATABASE}.restart", record, bucket=i % buckets) for i in range(buckets * 64)]
            producer.flush()
            for f in futures:
                f.result(timeout=60)
        t0 = time.monotonic()
        cluster.start_process(victim)
        cluster.wait_until(lambda: all(3 in leader_isr(zk, cluster, tb).isr for tb in tbs), 60, "3 back in every ISR")
        took = time.monotonic() - t0
    missed = buckets * 64 * len(record)
    assert took < 0.5 * missed / (2 * throttle), f"rejoined after {took:.1f}s: throttled?"
    for sid in (1, 2, 3):
        metrics = fetch_text(f"{cluster.get(server_name(sid)).http_url}/metrics")
        served = next(float(line.split()[-1]) for line in metrics.splitlines()
                      if line.startswith("fluss_rebalance_throttled_bytes_total "))  # fmt: skip
        assert served == 0, (sid, served)
