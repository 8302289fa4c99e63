"""Network faults on test hosts (every process in its own namespace; the workload on the client host).

Each test shows that its fault really happened (from the servers' own logs and files), then checks the
workload's history against the final log with the verify checker: nothing acknowledged is lost, duplicated,
moved or reordered, no consumer read a record that did not stay, replicas agree below the high watermark.
"""

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.exceptions import NoNodeError

from fluss_py.testing import nemesis
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.netns import NetemUnsupported
from fluss_py.testing.procs import ProcessHandle
from fluss_py.types import TableBucket
from fluss_py.verify.checker import check
from fluss_py.verify.client import WorkloadClient
from fluss_py.verify.runner import replica_logs
from fluss_py.zk.codecs import TabletServerRegistration
from fluss_py.zk.paths import LeaderIsrZNode, TableAssignmentZNode, TabletServerZNode
from tests.fault.replication_support import (
    FAULT_OVERRIDES,
    ReplicaFiles,
    leader_isr,
    server_name,
    wait_for_isr,
    wait_for_leader_change,
    wait_full_isr,
)

pytestmark = [pytest.mark.fault, pytest.mark.timeout(360)]

PROOF_OF_DEATH = "proof of death"


@pytest.fixture
def workloads() -> Iterator[list[WorkloadClient]]:
    """Workload processes of the test, SIGKILLed by PID afterwards, pass or fail (before the cluster closes)."""
    made: list[WorkloadClient] = []
    yield made
    for client in made:
        client.kill()


def start(cluster_factory, workloads, tmp_path: Path, *, coordinators: int = 1, buckets: int = 1):
    cluster = cluster_factory(coordinators, 3, netns=True, zookeepers=3, tablet_overrides=FAULT_OVERRIDES)
    client = WorkloadClient(cluster, tmp_path / "workload", timeout=120)
    workloads.append(client)
    client.create(buckets=buckets, rf=3)
    with cluster.zk_view() as zk:
        (table_id,) = [int(t) for t in zk.children(TableAssignmentZNode.parent(cluster.zk_root))]
    client.start(producers=1, rate=25, buckets=buckets)
    cluster.wait_until(lambda: len(client.acked()) >= 20, 60, "the workload's first acknowledgements")
    return cluster, client, TableBucket(table_id, 0)


def wait_acked_more(cluster: LocalCluster, client: WorkloadClient, n: int, timeout: float, what: str) -> None:
    base = len(client.acked())
    cluster.wait_until(lambda: len(client.acked()) >= base + n, timeout, what)


def finish(cluster: LocalCluster, client: WorkloadClient) -> None:
    """Stop the workload (every send answered), read the final log and the replicas, check the history."""
    client.stop()
    final = client.final()
    replicas = replica_logs(cluster, final["table_id"], final["hw"])
    report = check(client.events(), final["log"], replicas, final["hw"])
    assert report.ok, report.examples
    assert report.acked > 0 and report.unanswered == 0


def epochs(cluster: LocalCluster, name: str, tb: TableBucket) -> dict[int, int]:
    """offset -> leader epoch of the batch holding it, from ``name``'s own files."""
    return {
        b.base_offset + i: b.leader_epoch
        for b in ReplicaFiles(cluster, name, tb).batches()
        for i in range(len(b.values))
    }


def test_leader_cut_off_from_zookeeper_coordinator_and_followers_while_its_client_reaches_it(
    cluster_factory, workloads, tmp_path
):
    cluster, client, tb = start(cluster_factory, workloads, tmp_path)
    with cluster.zk_view() as zk:
        old = leader_isr(zk, cluster, tb)
        victim = server_name(old.leader)
        nemesis.cut_off(cluster, victim)
        new = wait_for_leader_change(zk, cluster, tb, old, 30)  # after the session timeout, on the majority side

        # the cut-off leader accepted the producer's writes alone: records of its old epoch in its own files
        # at offsets where the new leader holds nothing or a batch of its new epoch
        def alone() -> list[int]:
            mine, theirs = epochs(cluster, victim, tb), epochs(cluster, server_name(new.leader), tb)
            return [o for o, e in mine.items() if e == old.leader_epoch and theirs.get(o) != e]

        appended_alone = cluster.wait_until(alone, 30, f"{victim} to append records it cannot replicate")
        wait_acked_more(cluster, client, 20, 60, "acknowledgements from the new leader")
        assert PROOF_OF_DEATH not in "".join(cluster.log_text(n) for n in cluster.names("coordinator"))
        nemesis.heal(cluster)
        wait_full_isr(zk, cluster, tb, [1, 2, 3], 60)
        cluster.wait_until(
            lambda: all(epochs(cluster, victim, tb).get(o) != old.leader_epoch for o in appended_alone),
            30,
            f"{victim} to truncate what it appended alone (offsets {appended_alone})",
        )
    cluster.wait_for_log(victim, "(?i)truncat", 10)
    finish(cluster, client)


def test_follower_cut_off_leaves_the_isr_by_lag_and_rejoins_after_healing(cluster_factory, workloads, tmp_path):
    cluster, client, tb = start(cluster_factory, workloads, tmp_path)
    with cluster.zk_view() as zk:
        lai = leader_isr(zk, cluster, tb)
        follower = next(r for r in lai.isr if r != lai.leader)
        nemesis.cut_off(cluster, server_name(follower))
        shrunk = wait_for_isr(zk, cluster, tb, lambda x: follower not in x.isr, 30, f"{follower} out of the ISR")
        assert shrunk.leader == lai.leader  # the leader stayed; only the lagging follower left
        wait_acked_more(cluster, client, 20, 30, "writes going on without the follower")
        nemesis.heal(cluster)
        back = wait_full_isr(zk, cluster, tb, [1, 2, 3], 60)
        assert back.leader == lai.leader
    finish(cluster, client)


def test_coordinator_leader_cut_off_from_zookeeper_steps_down_and_another_takes_over(
    cluster_factory, workloads, tmp_path
):
    cluster, client, _ = start(cluster_factory, workloads, tmp_path, coordinators=2)
    old = cluster.wait_for_leader(15)
    old_epoch = cluster.health(old)["coordinator_epoch"]
    nemesis.partition(cluster, old, ["zookeeper"])
    new = cluster.wait_for_leader(30, exclude=[old])
    cluster.wait_until(lambda: (cluster.health(old) or {}).get("state") != "Leader", 30, f"{old} to step down")
    new_epoch = cluster.health(new)["coordinator_epoch"]
    assert new_epoch > old_epoch
    # it stepped down on its own (no ZooKeeper answer needed), and every tablet server now fences the old epoch
    cluster.wait_for_log(old, "Lost coordinator leadership", 5)
    for ts in cluster.names("tablet-server"):
        cluster.wait_for_log(ts, rf"Coordinator epoch {old_epoch} -> {new_epoch}", 30)
    nemesis.heal(cluster)
    cluster.wait_until(lambda: cluster.ready(old), 60, f"{old} back as a standby")
    assert cluster.coordinator_leader() == new
    wait_acked_more(cluster, client, 20, 60, "writes under the new coordinator")
    finish(cluster, client)


def test_kill_9_of_the_zookeeper_leader_under_load(cluster_factory, workloads, tmp_path):
    cluster, client, _ = start(cluster_factory, workloads, tmp_path)
    zk_leader = nemesis.zookeeper_leader(cluster)
    assert zk_leader is not None
    cluster.kill(zk_leader)
    cluster.wait_until(
        lambda: (n := nemesis.zookeeper_leader(cluster)) is not None and n != zk_leader, 30, "a new ZooKeeper leader"
    )
    wait_acked_more(cluster, client, 40, 60, "writes going on after the ZooKeeper leader died")
    cluster.start_process(zk_leader, wait=True)
    finish(cluster, client)


@pytest.mark.slow
def test_zookeeper_quorum_lost_for_30s_under_load(cluster_factory, workloads, tmp_path):
    """2 of 3 ZooKeeper members down for 30 s: the data path goes on (no ISR change needs ZooKeeper while
    every replica keeps up), no second coordinator leader appears, and everything recovers after."""
    cluster, client, _ = start(cluster_factory, workloads, tmp_path, coordinators=2)
    leader = cluster.wait_for_leader(15)
    killed = nemesis.lose_zookeeper_quorum(cluster)
    assert len(killed) == 2
    survivor = next(n for n in cluster.names("zookeeper") if n not in killed)
    cluster.wait_until(  # the survivor notices within syncLimit ticks
        lambda: "not currently serving" in cluster.zk_four_letter("srvr", name=survivor), 20, f"{survivor} alone"
    )
    before = len(client.acked())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # 30 s of outage, checked every second: never two leaders
        leaders = [n for n, h in cluster.coordinator_healths().items() if h and h.get("state") == "Leader"]
        assert len(leaders) <= 1, leaders
        time.sleep(1.0)
    acked_during = len(client.acked()) - before
    for name in killed:
        cluster.start_process(name)
    cluster.wait_ready(killed, timeout=60)
    assert cluster.wait_for_leader(60) in (leader, *cluster.names("coordinator"))
    wait_acked_more(cluster, client, 20, 60, "writes after the quorum is back")
    print(f"acknowledged during the 30 s without a ZooKeeper quorum: {acked_during}")
    finish(cluster, client)


@pytest.mark.slow
def test_latency_jitter_and_loss_on_a_leaders_link(cluster_factory, workloads, tmp_path):
    """30 s of 100 ms ± 50 ms and 20 % loss on the leader's link: nothing lost; ISR changes counted."""
    cluster, client, tb = start(cluster_factory, workloads, tmp_path)
    with cluster.zk_view() as zk:
        lai = leader_isr(zk, cluster, tb)
        path = LeaderIsrZNode.path(cluster.zk_root, tb.table_id, tb.bucket)
        version = zk.client.exists(path).version
        leader = server_name(lai.leader)
        try:
            nemesis.netem(cluster, leader, delay_ms=100, jitter_ms=50, loss_pct=20)
        except NetemUnsupported as e:
            pytest.skip(str(e))
        t_from = time.monotonic() - client.t0
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            time.sleep(1.0)  # the fault's duration, not synchronisation
        t_to = time.monotonic() - client.t0
        if leader in cluster.net.delayers:  # the NFQUEUE fallback (no sch_netem): its process held the link
            pid, ticks = cluster.net.delayers[leader]
            assert ProcessHandle.attach(pid, ticks).alive()
        nemesis.heal(cluster)
        wait_full_isr(zk, cluster, tb, [1, 2, 3], 60)
        isr_changes = zk.client.exists(path).version - version
    finish(cluster, client)
    sent = {(e["p"], e["s"]): e["t"] for e in client.events() if e["k"] == "send"}
    during = [e["t"] - sent[(e["p"], e["s"])] for e in client.acked() if t_from <= sent[(e["p"], e["s"])] <= t_to]
    assert during, "no send was acknowledged while the leader's link was slow and lossy"
    during.sort()
    print(
        f"30 s of 100 ms +- 50 ms, 20 % loss on the leader's link: {len(during)} sends acknowledged, latency "
        f"p50 {during[len(during) // 2] * 1000:.0f} ms, max {during[-1] * 1000:.0f} ms; ISR changes: {isr_changes}"
    )


def test_a_zookeeper_member_freezing_while_a_tablet_server_starts_does_not_kill_it(cluster_factory):
    """Found by make chaos: a request pending on a member that stops answering fails with ConnectionLoss while
    kazoo moves the session to another member; the starting server must retry, not exit.

    Made deterministic with a stand-in registration of the server's id (another session, an address that does not
    answer): the starting server then polls ZooKeeper while it waits for that session, and the member it is
    connected to is SIGSTOPped under those polls."""
    cluster = cluster_factory(1, 1, netns=True, zookeepers=3)
    ts = "tablet-server-1"
    cluster.stop_process(ts)
    path = TabletServerZNode.path(cluster.zk_root, 1)
    with cluster.zk_view() as zk:
        cluster.wait_until(lambda: not zk.exists(path), 15, f"{ts}'s registration gone after SIGTERM")
        stand_in = TabletServerRegistration("198.18.0.250", 9123, 9124, incarnation="stand-in")
        zk.client.create(path, TabletServerZNode.encode(stand_in), ephemeral=True)
        cluster.start_process(ts)
        cluster.wait_for_log(ts, "still registered by session", 20)
        address = cluster.get(ts).rpc_address.rsplit(":", 1)[0]
        member = cluster.wait_until(
            lambda: next(
                (n for n in cluster.names("zookeeper") if f"/{address}:" in cluster.zk_four_letter("cons", name=n)),
                None,
            ),
            10,
            f"the ZooKeeper member {ts} is connected to",
        )
        cluster.pause(member)
        try:
            cluster.wait_until(
                lambda: "retrying once the session is reconnected" in cluster.log_text(ts) or not cluster.alive(ts),
                20,
                f"{ts}'s pending request to fail",
            )
            assert cluster.alive(ts), f"{ts} exited:\n" + "\n".join(cluster.log_text(ts).splitlines()[-5:])
            # Not through `zk`: its session may sit on the frozen member too, and with its 10 s timeout kazoo
            # moves it only after ~6.7 s, past the server's wait for the stand-in (2 x 2 s + 1 s, restarted
            # by the retry) -- the server then exits SERVER_ID_CONFLICT. A session on the other members is
            # answered once they have a quorum leader; kazoo's retry rides over a ConnectionLoss while they
            # elect one (the frozen member may have been the leader).
            others = [n for n in cluster.names("zookeeper") if n != member]
            with cluster.zk_view(members=others) as live, contextlib.suppress(NoNodeError):
                live.client.retry(live.client.delete, path)  # NoNode: a retried delete whose first attempt went through
        finally:
            cluster.resume(member)
        cluster.wait_ready([ts], timeout=30)
