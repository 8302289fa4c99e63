"""Test hosts: every process in its own network namespace, a ZooKeeper ensemble, partitions that drop silently,
and nothing of a run (namespace, veth, rule) left afterwards, pass or fail."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.testing import nemesis
from fluss_py.testing.cluster import CLIENT, LocalCluster
from fluss_py.testing.netns import STATE_DIR, HostNetwork, namespaces_of, stale_prefixes
from fluss_py.testing.procs import ProcessHandle
from fluss_py.zk.paths import TabletServerZNode

pytestmark = pytest.mark.integration


def test_every_process_has_its_own_address_and_the_ensemble_has_a_quorum(cluster_factory):
    cluster = cluster_factory(1, 1, netns=True, zookeepers=3)
    prefix = cluster.net.prefix
    addresses = {n: cluster.get(n).rpc_address.rsplit(":", 1)[0] for n in cluster.names()}
    assert len(set(addresses.values())) == len(addresses) == 5
    assert all(a.startswith("198.18.") for a in addresses.values())
    assert cluster.zookeeper_address.count(",") == 2
    modes = sorted(
        cluster.zk_four_letter("srvr", name=n).split("Mode: ")[1].split()[0] for n in cluster.names("zookeeper")
    )
    assert modes == ["follower", "follower", "leader"]
    assert set(namespaces_of(prefix)) == {f"{prefix}-{h}" for h in [*addresses, CLIENT, "hub"]}
    cluster.close()
    assert namespaces_of(prefix) == []


def test_a_failing_test_leaves_no_namespace_behind(netns_hosts, tmp_path: Path):
    cluster = LocalCluster(tmp_path / "c", 0, 0, netns=True, die_with_parent=True)
    prefix = cluster.net.prefix
    with pytest.raises(RuntimeError, match="the test failed"), cluster:
        assert namespaces_of(prefix)
        raise RuntimeError("the test failed")
    assert namespaces_of(prefix) == []
    assert not cluster.alive("zookeeper")


def test_a_partition_from_zookeeper_expires_the_session_silently_and_heals(cluster_factory):
    cluster = cluster_factory(1, 2, netns=True, zookeepers=3)
    victim = "tablet-server-2"
    with cluster.zk_view() as zk:
        path = TabletServerZNode.path(cluster.zk_root, 2)
        before = zk.ephemeral_owner(path)
        assert before is not None
        nemesis.partition(cluster, victim, ["zookeeper"])
        assert "drop" in cluster.net.rules(victim)
        cluster.wait_until(lambda: zk.ephemeral_owner(path) is None, 30, f"{victim}'s registration to expire")
        # a silent drop: the server keeps running and sees its own connection suspended, not refused
        assert cluster.alive(victim)
        cluster.wait_for_log(victim, "ZooKeeper connection suspended", 5)
        nemesis.heal(cluster)
        owner = cluster.wait_until(lambda: zk.ephemeral_owner(path), 40, f"{victim} to register again")
        assert owner != before
        cluster.wait_for_log(victim, "registering tablet server 2 again", 5)


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "fluss_py.cli.main", "cluster", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=check)


def test_cli_up_netns_partition_netem_heal_down(netns_hosts, tmp_path: Path):
    d = str(tmp_path / "c")
    prefix = None
    try:
        up = _cli("up", "--dir", d, "--netns", "--zookeeper", "3", "--coordinators", "1", "--tablet-servers", "1")
        assert "198.18." in up.stdout and "zookeeper-3" in up.stdout, up.stdout
        prefix = json.loads((tmp_path / "c" / "cluster.json").read_text())["netns"]["prefix"]
        out = _cli("partition", "tablet-server-1", "--from", "zookeeper,coordinator-1", "--dir", d).stdout
        assert "zookeeper-1, zookeeper-2, zookeeper-3, coordinator-1" in out
        cluster = LocalCluster.open(d)
        cluster.detach()
        assert cluster.net.rules("tablet-server-1").count("198.18.") == 4
        assert "loss 10%" in _cli("netem", "tablet-server-1", "--loss", "10%", "--dir", d).stdout
        assert _cli("netem", "tablet-server-1", "--loss", "110%", "--dir", d, check=False).returncode == 2
        assert _cli("partition", "nobody", "--from", "zookeeper", "--dir", d, check=False).returncode == 2
        _cli("heal", "--dir", d)
        assert "198.18." not in cluster.net.rules("tablet-server-1")
        assert json.loads((tmp_path / "c" / "cluster.json").read_text())["netns"]["loss"] == {}
        down = _cli("down", "--dir", d).stdout
        assert "removed" in down
        assert namespaces_of(prefix) == []
    finally:
        if prefix is not None and namespaces_of(prefix):
            _cli("down", "--dir", d, check=False)
            for ns in namespaces_of(prefix):
                subprocess.run(["ip", "netns", "del", ns], check=False)


def test_a_crashed_runs_leftovers_are_found_by_prefix_and_removed(netns_hosts, tmp_path: Path):
    net = HostNetwork.create()
    try:
        net.add_host("a")
        net.netem("a", delay_ms=10)  # a delayer process too, when the kernel lacks sch_netem
        state = STATE_DIR / f"{net.prefix}.json"
        data = json.loads(state.read_text())
        dead = subprocess.Popen(["true"])
        dead.wait()
        state.write_text(json.dumps({**data, "pid": dead.pid, "start_ticks": 1}))  # its owner is gone
        assert net.prefix in stale_prefixes()
        out = _cli("netns-clean").stdout
        assert net.prefix in out
        assert namespaces_of(net.prefix) == [] and not state.exists()
        for pid, ticks in data["delayers"].values():
            assert not ProcessHandle.attach(pid, ticks).alive()
    finally:
        net.teardown()
