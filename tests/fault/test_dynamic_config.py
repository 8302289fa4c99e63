"""Dynamic configuration on real processes (docs/dynamic-config.md): ``fluss-py config alter`` changes what
running tablet servers do, without a restart, and refuses invalid values before storing anything.

The observable: min ISR. Both followers of a bucket are killed (its ISR shrinks to the leader); an acks=all
send then fails with the static ``tablet-server.min.insync.replicas: 2``, succeeds once the cluster entity
says 1, fails again when the table entity says 2 (the table layer wins), and succeeds when that entry is
deleted.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import kill9
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from fluss_py.zk.paths import DynamicConfigZNode
from tests.fault.replication_support import create_table, leader_isr, produce, server_name, wait_for_isr, wait_full_isr

pytestmark = pytest.mark.fault

TABLE = "dynamic"


def config(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", "config", *args, "--dir", str(cluster.directory)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _acked(cluster: LocalCluster) -> bool:
    try:
        produce(cluster, TABLE, [b"probe"], delivery_timeout=2.0)
        return True
    except Exception:  # NOT_ENOUGH_REPLICAS until the delivery timeout: the setting in force refuses it
        return False


def test_invalid_values_are_refused_before_anything_is_stored(cluster_factory):
    cluster = cluster_factory(1, 1)
    cluster.wait_for_leader(15)
    path = DynamicConfigZNode.path(cluster.zk_root, DynamicConfigZNode.CLUSTER)
    for bad in (
        ["--set", "replica.lag.time.max.ms=soon"],  # not a duration
        ["--set", "tablet-server.min.insync.replicas=0"],  # out of range
        ["--set", "tablet-server.rebalance.batch.ratio=1.5"],  # out of range
        ["--set", "replica.lag.time.max.ms=200ms"],  # below the default replica.fetch.wait.max.ms (500 ms)
        ["--set", "data.dir=/tmp/x"],  # not dynamic
        ["--set", "no.such.key=1"],
    ):
        done = config(cluster, "alter", "--entity", "cluster", *bad)
        assert done.returncode == 1, (bad, done.stdout, done.stderr)
        assert "INVALID_CONFIG" in done.stderr, done.stderr
    with ZkView(cluster.zookeeper_address) as zk:
        assert not zk.exists(path)
    ok = config(cluster, "alter", "--entity", "cluster", "--set", "tablet-server.rebalance.batch.ratio=0.5")
    assert ok.returncode == 0, ok.stderr
    described = json.loads(config(cluster, "describe", "--entity", "cluster", "--json").stdout)
    assert described["dynamic"] == {"tablet-server.rebalance.batch.ratio": "0.5"}


def test_a_live_alter_changes_what_running_tablet_servers_enforce(cluster_factory):
    cluster = cluster_factory(1, 3, tablet_overrides={"tablet-server.min.insync.replicas": "2"})
    table_id = create_table(cluster, TABLE, buckets=1, rf=3)
    tb = TableBucket(table_id, 0)
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        leader = leader_isr(zk, cluster, tb).leader
        for follower in (s for s in (1, 2, 3) if s != leader):
            kill9(cluster, server_name(follower))
        wait_for_isr(zk, cluster, tb, lambda lai: lai.isr == (leader,), 15, "the ISR shrunk to the leader")
    assert not _acked(cluster)  # static min ISR 2

    def alter(*args: str) -> None:
        done = config(cluster, "alter", *args)
        assert done.returncode == 0, done.stderr

    alter("--entity", "cluster", "--set", "tablet-server.min.insync.replicas=1")
    cluster.wait_until(lambda: _acked(cluster), 20, "an acks=all send accepted with the cluster's min ISR 1")
    alter("--entity", "table", "--name", f"fluss.{TABLE}", "--set", "min.insync.replicas=2")
    cluster.wait_until(lambda: not _acked(cluster), 20, "refused again: the table's min ISR 2 wins")
    alter("--entity", "table", "--name", f"fluss.{TABLE}", "--delete", "min.insync.replicas")
    cluster.wait_until(lambda: _acked(cluster), 20, "accepted again once the table entry is deleted")
    assert "Dynamic configuration applied" in cluster.log_text(server_name(leader))
