"""`fluss-py cluster up --supervise` end to end (real ZooKeeper, stand-in servers via $FLUSS_PY_SERVER_LAUNCHER):
the supervisors outlive `up`; `kill` is a crash they restart and `status` counts; `stop`/`down` are stops on
purpose that nothing restarts, and `down` leaves no process (by PID); a server that exits 2 is not
restarted and one that always crashes is given up at the limit, both said by `up` and `status`; bad flags
are usage errors. tests/fault/test_supervision.py does the same with real servers."""

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.testing.cluster import LAUNCHER_ENV, LocalCluster
from fluss_py.testing.procs import ProcessHandle, wait_until
from fluss_py.testing.zookeeper import zookeeper_installed

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(not zookeeper_installed(), reason="ZooKeeper is not installed (make install)"),
]

STANDIN = shlex.join([sys.executable, str(Path(__file__).with_name("standin_server.py"))])
FAST = ["--supervise", "--restart-initial-delay", "0.1", "--restart-max-delay", "0.4", "--restart-limit", "3"]


def _cli(*args: str, launcher: str = STANDIN, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, **{LAUNCHER_ENV: launcher})
    argv = [sys.executable, "-m", "fluss_py.cli.main", "cluster", *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)
    assert not check or done.returncode == 0, f"{args}: ({done.returncode}) {done.stderr}"
    return done


def _rows(d: str) -> dict[str, dict]:
    return {r["name"]: r for r in json.loads(_cli("status", "--dir", d, "--json").stdout)}


def _gone(pids: list[int]) -> bool:
    return not any(ProcessHandle.attach(p, None).alive() for p in pids)


def test_supervised_cluster_restarts_a_killed_server_and_stops_on_purpose(tmp_path):
    d = str(tmp_path / "c")
    try:
        up = _cli("up", "--dir", d, "--coordinators", "1", "--tablet-servers", "2", *FAST)
        assert "Supervised: each server restarts when it crashes (backoff 0.1 s doubling to 0.4 s" in up.stdout
        data = json.loads((tmp_path / "c" / "cluster.json").read_text())
        assert data["supervise"] == {"initial_delay": 0.1, "max_delay": 0.4, "max_restarts": 3, "window": 60.0}
        rows = _rows(d)  # `up` has exited: the supervisors outlive it
        assert rows["zookeeper"]["supervisor"] is None
        servers = ["coordinator-1", "tablet-server-1", "tablet-server-2"]
        for n in servers:
            s = rows[n]["supervisor"]
            assert rows[n]["ready"] and (s["state"], s["restarts"], s["supervisor_alive"]) == ("running", 0, True)
        old = rows["tablet-server-1"]["pid"]

        killed = _cli("kill", "tablet-server-1", "--dir", d).stdout
        assert f"sent SIGKILL to pid {old}; its supervisor restarts it" in killed
        wait_until(lambda: (r := _rows(d)["tablet-server-1"])["ready"] and r["pid"] != old, 30)
        row = _rows(d)["tablet-server-1"]
        assert (row["supervisor"]["restarts"], row["supervisor"]["last_exit"]) == (1, "killed by signal 9 (SIGKILL)")
        assert not ProcessHandle.attach(old, None).alive()

        assert "tablet-server-1: stopped" in _cli("stop", "tablet-server-1", "--dir", d).stdout
        row = _rows(d)["tablet-server-1"]
        assert not row["alive"] and row["pid"] is None
        assert (row["supervisor"]["state"], row["supervisor"]["supervisor_alive"]) == ("stopped", False)
        assert "already supervised" in _cli("start", "tablet-server-2", "--dir", d, check=False).stderr
        started = _cli("start", "tablet-server-1", "--dir", d).stdout
        assert "under a supervisor" in started
        row = _rows(d)["tablet-server-1"]
        assert row["ready"] and (row["supervisor"]["state"], row["supervisor"]["restarts"]) == ("running", 0)

        _cli("kill", "coordinator-1", "--signal", "STOP", "--dir", d)  # a paused server still stops on purpose
        rows = _rows(d)
        assert rows["coordinator-1"]["paused"]
        pids = [p for r in rows.values() for p in (r["pid"], (r["supervisor"] or {}).get("supervisor_pid")) if p]
        assert len(pids) == 7
        down = _cli("down", "--dir", d).stdout
        assert all(f"{n}: stopped" in down for n in [*servers, "zookeeper"]), down
        wait_until(lambda: _gone(pids), 10)
        assert {r["supervisor"]["state"] for r in _rows(d).values() if r["supervisor"]} == {"stopped"}
    finally:
        if LocalCluster.exists(d):
            LocalCluster.open(d).close(grace=1)


@pytest.mark.parametrize(
    "code, state, why",
    [
        (2, "bad-config", "exited with code 2 (configuration error: see its stdout.log): not restarted"),
        (3, "given-up", "exited with code 3: crash loop (3 restarts within 60 s): given up, not restarting"),
    ],
)
def test_up_fails_on_a_bad_config_at_once_and_on_a_crash_loop_at_the_limit(tmp_path, code, state, why):
    d = str(tmp_path / "c")
    exits = shlex.join([sys.executable, "-c", f"import sys; print('stand-in exits {code}'); sys.exit({code})"])
    try:
        up = _cli("up", "--dir", d, "--coordinators", "0", "--tablet-servers", "1", *FAST, launcher=exits, check=False)
        assert up.returncode == 1 and "did not start" in up.stderr and f"tablet-server-1: {state}" in up.stderr
        s = _rows(d)["tablet-server-1"]["supervisor"]
        assert (s["state"], s["supervisor_alive"], s["last_exit"]) == (state, False, f"exited with code {code}")
        assert why in s["reason"]
        assert f"tablet-server-1: {state}: " in _cli("status", "--dir", d).stdout
        runs = (tmp_path / "c" / "tablet-server-1" / "stdout.log").read_text().count(f"stand-in exits {code}")
        assert (s["restarts"], runs) == ((0, 1) if code == 2 else (3, 4))
        supervisor_log = (tmp_path / "c" / "tablet-server-1" / "supervisor.log").read_text()
        assert supervisor_log.count(f": {state}: ") == 1, supervisor_log
    finally:
        if LocalCluster.exists(d):
            LocalCluster.open(d).close(grace=1)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--restart-limit", "3"], "need --supervise"),
        (["--supervise", "--restart-initial-delay", "5", "--restart-max-delay", "1"], "is below initial_delay"),
    ],
)
def test_bad_restart_flags_are_usage_errors_and_start_nothing(tmp_path, flags, message):
    d = tmp_path / "c"
    done = _cli("up", "--dir", str(d), *flags, check=False)
    assert done.returncode == 2 and message in done.stderr
    assert not d.exists()
    bad = _cli("up", "--dir", str(d), "--supervise", "--restart-limit", "0", check=False)
    assert bad.returncode == 2 and "--restart-limit: 0 is out of range" in bad.stderr
