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

import pytest

from fluss_py.client import ProducerOptions
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

pytestmark = [pytest.mark.fault, pytest.mark.usefixtures("servers_built")]

BUCKETS = 30
RF = 3


def make_cluster(cluster_factory, coordinators: int, **coordinator_overrides) -> LocalCluster:
    cluster = cluster_factory(coordinators=coordinators, tablet_servers=3, tablet_overrides=FAULT_OVERRIDES,
                              start=False)  # fmt: skip
    cluster.role_overrides[COORDINATOR].update({k.replace("_", "."): str(v) for k, v in coordinator_overrides.items()})
    cluster.start()
    return cluster


def http(cluster: LocalCluster, method: str, query: str = "") -> dict:
    leader = cluster.wait_for_leader(15)
    req = urllib.request.Request(f"{cluster.get(leader).http_url}/rebalance{query}", method=method)
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
