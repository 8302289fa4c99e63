"""Issue 2 acceptance on real processes: election of three coordinators (checked on ZooKeeper itself with
`wchc`), tablet-server membership after kill -9, the runbook's commands, and start order that does not
matter (tablet servers before coordinators, everything before ZooKeeper)."""

import re
import shutil
import subprocess
import time

import grpc
import pytest

from fluss_py.rpc.pb import common_pb2, tablet_pb2_grpc
from fluss_py.testing.fixtures import SESSION_TIMEOUT_S
from fluss_py.testing.health import fetch_text
from fluss_py.testing.zkview import ZkView, parse_wchc
from fluss_py.testing.zookeeper import ZKCLI

pytestmark = pytest.mark.integration


def _election_watches(cluster, zk: ZkView) -> tuple[list[str], dict[str, int | None], dict[int, set[str]]]:
    election = f"{cluster.zk_root}/coordinator/election"
    candidates = [f"{election}/{c}" for c in zk.children(election)]
    owners = {c: zk.ephemeral_owner(c) for c in candidates}
    watches = {
        s: {p for p in paths if p.startswith(election)}
        for s, paths in parse_wchc(cluster.zk_four_letter("wchc")).items()
    }
    return candidates, owners, watches


def test_three_coordinators_started_together_elect_one_leader_and_chain_their_watches(cluster_factory):
    cluster = cluster_factory(coordinators=3, tablet_servers=0)
    leader = cluster.wait_for_leader(15)
    leader_id = cluster.get(leader).id
    root = cluster.zk_root

    def settled():
        h = cluster.coordinator_healths()
        states = sorted(x["state"] for x in h.values() if x)
        return states == ["Leader", "Standby", "Standby"] and all(x["leader_id"] == leader_id for x in h.values())

    cluster.wait_until(settled, 10, message="one Leader, two Standby naming it")
    epoch = cluster.health(leader)["coordinator_epoch"]
    with ZkView(cluster.zookeeper_address) as zk:
        node = zk.get_json(f"{root}/coordinator/leader")
        assert node["server_id"] == leader_id
        assert node["epoch"] == epoch == zk.get_int(f"{root}/coordinator/epoch") >= 1
        assert len(zk.children(f"{root}/coordinator/servers")) == 3
        leader_session = zk.ephemeral_owner(f"{root}/coordinator/leader")

        def chained():
            candidates, owners, watches = _election_watches(cluster, zk)
            if len(candidates) != 3 or owners[candidates[0]] != leader_session:
                return False
            # a standby watches only its predecessor; the leader watches only its own candidate node (deleted
            # under it by a standby that proved it dead, it steps down: docs/coordinator-ha.md "Fast failover")
            for k, cand in enumerate(candidates):
                expected = {candidates[k - 1]} if k else {cand}
                if watches.get(owners[cand], set()) != expected:
                    return False
            watchers = {c: {s for s, p in watches.items() if c in p} for c in candidates}
            return all(
                watchers[c] == ({owners[candidates[k + 1]]} if k < 2 else set()) | ({owners[c]} if k == 0 else set())
                for k, c in enumerate(candidates)
            )

        cluster.wait_until(
            chained,
            10,
            message=lambda: f"each candidate watching only its predecessor: {_election_watches(cluster, zk)}",
        )


def test_runbook_zkcli_get_leader_and_metrics(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=1, own_zookeeper=True)
    leader = cluster.wait_for_leader(15)
    assert cluster.zk_root == "/fluss"
    out = subprocess.run(
        [str(ZKCLI), "-server", cluster.zookeeper_address, "get", "/fluss/coordinator/leader"],
        capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    json_line = next(line for line in out.stdout.splitlines() if line.startswith("{"))
    assert f'"server_id":{cluster.get(leader).id}' in json_line.replace(" ", "")
    url = f"{cluster.get(leader).http_url}/metrics"
    if shutil.which("curl"):
        body = subprocess.run(["curl", "-sf", url], capture_output=True, text=True, timeout=10, check=True).stdout
    else:
        body = fetch_text(url)
    assert "fluss_coordinator" in body, body[:2000]


def test_tablet_server_kill9_leaves_then_registers_again_with_the_same_id(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=2)
    leader = cluster.wait_for_leader(15)
    ids = f"{cluster.zk_root}/tabletservers/ids"
    with ZkView(cluster.zookeeper_address) as zk:
        assert zk.children(ids) == ["1", "2"]
        node = zk.get_json(f"{ids}/1")
        assert node["port"] == cluster.get("tablet-server-1").rpc_port
        cluster.kill("tablet-server-1")
        t0 = time.monotonic()
        cluster.wait_until(lambda: zk.children(ids) == ["2"], SESSION_TIMEOUT_S + 3, message="ids/1 to disappear")
        assert time.monotonic() - t0 <= SESSION_TIMEOUT_S + 3
        cluster.wait_for_log(
            leader, r"(?i)tablet.?server.{0,40}\b1\b.{0,80}(dead|died|lost|gone|remov|expir|unregist|offline)", 10
        )
        cluster.start_process("tablet-server-1", wait=True, timeout=20)
        cluster.wait_until(lambda: zk.children(ids) == ["1", "2"], 10, message="ids/1 to come back")
        assert cluster.health("tablet-server-1")["registered"] is True


def _tablet_metadata(cluster, name: str) -> common_pb2.ClusterMetadata | None:
    with grpc.insecure_channel(cluster.get(name).rpc_address) as ch:
        resp = tablet_pb2_grpc.TabletServiceStub(ch).GetMetadata(common_pb2.MetadataRequest(), timeout=2)
    return resp.metadata if resp.error.code == 0 else None


def test_tablet_servers_started_before_any_coordinator_converge(cluster_factory):
    cluster = cluster_factory(coordinators=0, tablet_servers=2)
    assert all(cluster.ready(n) for n in cluster.names("tablet-server"))
    first = cluster.add_coordinator()
    cluster.add_coordinator()
    leader = cluster.wait_for_leader(15)
    assert leader == first or cluster.get(leader).role == "coordinator"
    epoch = cluster.health(leader)["coordinator_epoch"]

    def tablet_servers_know_the_leader():
        for n in cluster.names("tablet-server"):
            md = _tablet_metadata(cluster, n)
            if md is None or md.coordinator.id != cluster.get(leader).id or md.coordinator_epoch != epoch:
                return False
            if sorted(s.id for s in md.tablet_servers) != [1, 2]:
                return False
        return True

    cluster.wait_until(
        tablet_servers_know_the_leader, 15,
        message=lambda: f"tablet servers learning leader {leader} epoch {epoch}: "
        f"{[_tablet_metadata(cluster, n) for n in cluster.names('tablet-server')]}",
    )  # fmt: skip


def test_servers_started_before_zookeeper_converge_once_it_appears(cluster_factory):
    cluster = cluster_factory(coordinators=2, tablet_servers=2, own_zookeeper=True, start=False)
    servers = [n for n in cluster.names() if n != "zookeeper"]
    for n in servers:
        cluster.start_process(n)
    # They must keep retrying (not exit, not become ready) while ZooKeeper is absent.
    cluster.wait_until(
        lambda: all(re.search(r"(?i)not reachable|connection refused|retrying", cluster.log_text(n)) for n in servers),
        15, message="servers logging that they wait for ZooKeeper",
    )  # fmt: skip
    assert all(cluster.alive(n) and not cluster.ready(n) for n in servers)
    cluster.start_process("zookeeper", wait=True)
    cluster.wait_ready(timeout=30)
    cluster.wait_for_leader(15)
