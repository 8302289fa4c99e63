"""LocalCluster mechanics against stand-in server processes (real ZooKeeper, fake servers):
cluster.json, readiness, per-process kill/stop/start/pause, re-attach by PID, cleanup of every PID."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.testing.cluster import ClusterError, LocalCluster
from fluss_py.testing.procs import ProcessHandle, proc_start_ticks, wait_until
from fluss_py.testing.zookeeper import zookeeper_installed

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not zookeeper_installed(), reason="ZooKeeper is not installed (make install)"),
]

STANDIN = [sys.executable, str(Path(__file__).with_name("standin_server.py"))]


def test_cluster_json_lists_every_process_and_ports_never_clash(tmp_path):
    with LocalCluster(tmp_path, coordinators=2, tablet_servers=2, launcher=STANDIN) as cluster:
        data = json.loads((tmp_path / "cluster.json").read_text())
        names = [p["name"] for p in data["processes"]]
        assert names == ["zookeeper", "coordinator-1", "coordinator-2", "tablet-server-1", "tablet-server-2"]
        ports = [
            int(a.rsplit(":", 1)[1]) for p in data["processes"] for a in (p["rpc_address"], p["http_address"]) if a
        ]
        assert len(ports) == len(set(ports)) == 9
        for p in data["processes"]:
            assert p["pid"] and proc_start_ticks(p["pid"]) == p["start_ticks"]
            assert p["log_file"] and p["data_dir"]
        assert data["zookeeper"] == f"127.0.0.1:{ports[0]}"
        assert cluster.coordinator_leader() == "coordinator-1"
        rows = {r["name"]: r for r in cluster.status_rows()}
        assert rows["coordinator-1"]["leader"] and rows["coordinator-2"]["state"] == "Standby"
        assert all(r["alive"] and r["ready"] for r in rows.values())
        pids = [cluster.pid(n) for n in cluster.names()]
    assert all(proc_start_ticks(pid) is None for pid in pids), "context manager left a process running"


def test_kill_stop_start_and_pause_one_process(tmp_path):
    with LocalCluster(tmp_path, coordinators=1, tablet_servers=2, launcher=STANDIN) as cluster:
        cluster.kill("tablet-server-1")
        assert not cluster.alive("tablet-server-1") and cluster.alive("tablet-server-2")
        cluster.start_process("tablet-server-1", wait=True, timeout=10)
        assert cluster.ready("tablet-server-1")
        assert cluster.stop_process("tablet-server-2", timeout=5) == "stopped"
        assert cluster.handle("tablet-server-2").returncode == 0
        cluster.pause("coordinator-1")
        assert cluster.paused("coordinator-1") and not cluster.ready("coordinator-1")
        assert cluster.coordinator_leader() is None
        cluster.resume("coordinator-1")
        cluster.wait_until(cluster.coordinator_leader, 5)
        with pytest.raises(ClusterError, match="already running"):
            cluster.start_process("coordinator-1")


def test_reattach_through_cluster_json_and_down(tmp_path):
    cluster = LocalCluster(tmp_path, coordinators=1, tablet_servers=1, launcher=STANDIN).start()
    try:
        other = LocalCluster.open(tmp_path)
        assert other.coordinator_leader() == "coordinator-1"
        assert [r["alive"] for r in other.status_rows()] == [True, True, True]
        result = other.down(timeout=5)
        assert set(result.values()) == {"stopped"}
        cluster.wait_until(lambda: not any(cluster.alive(n) for n in cluster.names()), 5)
    finally:
        cluster.close()


def test_a_server_that_exits_fails_start_with_its_log(tmp_path):
    crash = [sys.executable, "-c", "import sys; print('boom: bad config'); sys.exit(2)"]
    cluster = LocalCluster(tmp_path, coordinators=1, tablet_servers=0, launcher=crash)
    with pytest.raises(ClusterError, match="boom: bad config"):
        cluster.start(timeout=10)
    assert not any(cluster.alive(n) for n in cluster.names())


def test_a_failing_test_body_still_stops_every_process(tmp_path):
    pids = []
    with pytest.raises(RuntimeError, match="test failed"):  # noqa: SIM117
        with LocalCluster(tmp_path, coordinators=1, tablet_servers=1, launcher=STANDIN) as cluster:
            pids = [cluster.pid(n) for n in cluster.names()]
            raise RuntimeError("test failed")
    assert len(pids) == 3 and all(proc_start_ticks(p) is None for p in pids)


_ORPHAN_SCRIPT = """
import sys, time
from fluss_py.testing.cluster import LocalCluster
c = LocalCluster(sys.argv[1], 1, 1, launcher=sys.argv[2:], die_with_parent=True).start(timeout=20)
print(" ".join(str(c.pid(n)) for n in c.names()), flush=True)
time.sleep(120)
"""


def test_processes_die_with_a_sigkilled_test_run(tmp_path):
    runner = subprocess.Popen(
        [sys.executable, "-c", _ORPHAN_SCRIPT, str(tmp_path / "c"), *STANDIN], stdout=subprocess.PIPE, text=True
    )
    try:
        pids = [int(p) for p in runner.stdout.readline().split()]
        assert len(pids) == 3  # zookeeper, coordinator, tablet server
        runner.kill()
        runner.wait(10)
        wait_until(lambda: not any(ProcessHandle.attach(p, None).alive() for p in pids), 10)
    finally:
        runner.kill()
        runner.wait(10)


def test_a_new_cluster_in_a_used_directory_starts_on_its_own_ports(tmp_path):
    with LocalCluster(tmp_path, coordinators=1, tablet_servers=0, launcher=STANDIN) as first:
        old_zk = first.zookeeper_address
    with LocalCluster(tmp_path, coordinators=1, tablet_servers=0, launcher=STANDIN) as second:
        assert second.zookeeper_address != old_zk
        assert second.ready("zookeeper")
        assert f"clientPort={second.get('zookeeper').rpc_port}" in (tmp_path / "zookeeper" / "zoo.cfg").read_text()
