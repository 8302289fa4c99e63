"""Leader balance and election policy on real processes (docs/control-plane.md "Leader balance",
"Unclean leader election").

- preferred-leader election after a restart: kill -9 of the leader of some buckets, restart it; once it is
  back in their ISRs the coordinator gives each bucket back to its preferred (first assigned) replica;
- unclean election: with ``unclean.leader.election.enable`` on a table, the ISR shrunk to the leader, the
  leader killed and only out-of-sync replicas back, one of them leads and the records it lacked — exactly
  those acknowledged while it was out of the ISR — are gone for good, even after the old leader returns.
"""

from __future__ import annotations

import pytest

from fluss_py.testing.faults import kill9
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    ReplicaFiles,
    consume,
    create_table,
    leader_isr,
    produce,
    server_name,
    wait_for_isr,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

TABLET = {"replica.lag.time.max.ms": "2s"}
BALANCE = {"leader.imbalance.check-interval": "1s"}


def test_leadership_returns_to_the_preferred_replica_after_a_restart(cluster_factory):
    cluster = cluster_factory(1, 3, coordinator_overrides=BALANCE, tablet_overrides=TABLET)
    table_id = create_table(cluster, "preferred", buckets=3, rf=3)
    buckets = [TableBucket(table_id, b) for b in range(3)]
    with ZkView(cluster.zookeeper_address) as zk:
        for tb in buckets:
            wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        # a new bucket's first leader is its first assigned (preferred) replica
        preferred = {tb: leader_isr(zk, cluster, tb).leader for tb in buckets}
        victim = preferred[buckets[0]]
        its = [tb for tb in buckets if preferred[tb] == victim]
        before = {tb: leader_isr(zk, cluster, tb).leader_epoch for tb in its}
        kill9(cluster, server_name(victim))
        for tb in its:
            wait_for_isr(zk, cluster, tb, lambda lai: lai.leader not in (victim, -1), 15, "a failover")
        cluster.start_process(server_name(victim), wait=True, timeout=30)
        for tb in its:
            # back in the ISR first (only an ISR member may be elected), then leading again
            lai = wait_for_isr(zk, cluster, tb, lambda lai: lai.leader == victim, 30, f"{victim} leading {tb} again")
            assert lai.leader_epoch == before[tb] + 2  # the failover, then the preferred election
            assert victim in lai.isr
        assert all(leader_isr(zk, cluster, tb).leader == preferred[tb] for tb in buckets)
    cluster.wait_for_log(cluster.coordinator_leader(), r"Preferred leader election: bucket", 5)


def test_unclean_election_loses_exactly_what_the_new_leader_lacked(cluster_factory):
    cluster = cluster_factory(1, 3, tablet_overrides=TABLET)
    table = "unclean"
    props = {"unclean.leader.election.enable": "true", "min.insync.replicas": "1"}
    table_id = create_table(cluster, table, buckets=1, rf=3, properties=props)
    tb = TableBucket(table_id, 0)
    with ZkView(cluster.zookeeper_address) as zk:
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        old_leader = leader_isr(zk, cluster, tb).leader
        followers = [s for s in (1, 2, 3) if s != old_leader]
        in_sync = [b"in-sync-%d" % i for i in range(10)]
        assert produce(cluster, table, in_sync) == list(range(10))
        for f in followers:
            kill9(cluster, server_name(f))
        wait_for_isr(zk, cluster, tb, lambda lai: lai.isr == (old_leader,), 15, "the ISR shrunk to the leader")
        alone = [b"leader-only-%d" % i for i in range(5)]
        assert produce(cluster, table, alone) == list(range(10, 15))  # acknowledged (min ISR 1)
        kill9(cluster, server_name(old_leader))
        for f in followers:
            cluster.start_process(server_name(f), wait=True, timeout=30)
        lai = wait_for_isr(zk, cluster, tb, lambda lai: lai.leader in followers, 20, "an unclean election")
        assert old_leader not in lai.isr  # elected alone from outside the ISR; the other follower may rejoin
        after = [b"after-%d" % i for i in range(5)]
        assert produce(cluster, table, after) == list(range(10, 15))  # the lost offsets are written again
        cluster.start_process(server_name(old_leader), wait=True, timeout=30)
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)  # the old leader truncated and caught up
        files = ReplicaFiles(cluster, server_name(old_leader), tb)
        cluster.wait_until(
            lambda: list(files.values_by_offset().values()) == in_sync + after, 15,
            message="the old leader's own log: its leader-only records replaced",
        )  # fmt: skip
    assert [v for _, v in consume(cluster, table, 0, 15)] == in_sync + after
