"""`fluss-py cluster ...` end to end (real ZooKeeper, stand-in servers via $FLUSS_PY_SERVER_LAUNCHER):
up writes cluster.json and leaves detached processes, status/kill/start/stop act on them, down ends them."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.testing.cluster import LAUNCHER_ENV, LocalCluster
from fluss_py.testing.procs import ProcessHandle
from fluss_py.testing.zookeeper import ZooKeeperProcess, zookeeper_installed

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not zookeeper_installed(), reason="ZooKeeper is not installed (make install)"),
]

STANDIN = shlex.join([sys.executable, str(Path(__file__).with_name("standin_server.py"))])


def _cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, **{LAUNCHER_ENV: STANDIN})
    argv = [sys.executable, "-m", "fluss_py.cli.main", "cluster", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env, check=check)


def test_cluster_cli_up_status_kill_start_stop_down(tmp_path):
    d = str(tmp_path / "c")
    try:
        up = _cli("up", "--dir", d, "--coordinators", "2", "--tablet-servers", "1", "-D", "log.level=DEBUG")
        assert "coordinator-1" in up.stdout and "zkCli.sh" in up.stdout and "/metrics" in up.stdout
        rows = {r["name"]: r for r in json.loads(_cli("status", "--dir", d, "--json").stdout)}
        assert set(rows) == {"zookeeper", "coordinator-1", "coordinator-2", "tablet-server-1"}
        assert all(r["alive"] and r["ready"] for r in rows.values())
        assert rows["coordinator-1"]["leader"] and not rows["coordinator-2"]["leader"]
        assert "-Dlog.level=DEBUG" in "".join(
            json.loads((tmp_path / "c" / "cluster.json").read_text())["processes"][1]["argv"]
        )
        again = _cli("up", "--dir", d)
        assert "already running" in again.stdout

        _cli("kill", "tablet-server-1", "--dir", d)
        LocalCluster.open(d).wait_until(lambda: not LocalCluster.open(d).alive("tablet-server-1"), 5)
        _cli("start", "tablet-server-1", "--dir", d)
        _cli("kill", "coordinator-2", "--signal", "STOP", "--dir", d)
        rows = {r["name"]: r for r in json.loads(_cli("status", "--dir", d, "--json").stdout)}
        assert rows["tablet-server-1"]["ready"] and rows["coordinator-2"]["paused"]
        _cli("kill", "coordinator-2", "--signal", "CONT", "--dir", d)
        assert "stopped" in _cli("stop", "coordinator-2", "--dir", d).stdout
        assert _cli("kill", "nobody", "--dir", d, check=False).returncode == 2
        table = _cli("status", "--dir", d).stdout
        assert "LEADER" in table and "coordinator-2" in table
        pids = [r["pid"] for r in json.loads(_cli("status", "--dir", d, "--json").stdout) if r["pid"]]
        down = _cli("down", "--dir", d)
        assert "zookeeper: stopped" in down.stdout
        assert not any(ProcessHandle.attach(p, None).alive() for p in pids)
        assert "nothing to stop" in _cli("down", "--dir", str(tmp_path / "none")).stdout
    finally:
        if LocalCluster.exists(d):
            LocalCluster.open(d).close(grace=1)


def test_cluster_up_with_an_external_zookeeper_leaves_it_alone(tmp_path):
    d = str(tmp_path / "c")
    with ZooKeeperProcess(tmp_path / "zk") as zk:
        try:
            _cli("up", "--dir", d, "--zookeeper", zk.address, "--coordinators", "1", "--tablet-servers", "1")
            data = json.loads((tmp_path / "c" / "cluster.json").read_text())
            assert data["zookeeper"] == zk.address
            assert [p["role"] for p in data["processes"]] == ["coordinator", "tablet-server"]
            assert "zookeeper" not in _cli("down", "--dir", d).stdout
            assert zk.is_ready()
        finally:
            LocalCluster.open(d).close(grace=1)


def test_cluster_up_that_cannot_become_ready_fails_and_leaves_nothing_running(tmp_path):
    d = str(tmp_path / "c")
    env = dict(os.environ, **{LAUNCHER_ENV: shlex.join([sys.executable, "-c", "import sys; sys.exit(3)"])})
    argv = [sys.executable, "-m", "fluss_py.cli.main", "cluster", "up", "--dir", d, "--tablet-servers", "0"]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)
    assert r.returncode == 1 and "did not start" in r.stderr
    assert not any(LocalCluster.open(d).alive(n) for n in LocalCluster.open(d).names())
