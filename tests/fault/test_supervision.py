"""Supervised servers (``cluster up --supervise``; fluss_py/testing/supervisor.py) with real processes.

- A supervised tablet server that leads a bucket, killed with SIGKILL by ``fluss-py cluster kill``, comes back
  as a new process that registers again in ZooKeeper (a new session owns its ephemeral node) and rejoins
  every ISR; ``fluss-py cluster status --json`` shows restart count 1 and the SIGKILL; every record written
  before and after is read back once, in order; ``fluss-py cluster down`` then leaves no process behind
  (supervisors and servers, checked by PID).
- A tablet server whose configuration is bad exits 2 once and is not restarted; the status says why.
- A tablet server that cannot start (its RPC port is taken: exit 1 each time) is restarted with the backoff
  until the crash-loop limit, then given up (one log line); once the port is free, ``start`` runs it again.

Every process is killed by PID after each test, pass or fail (the fixture closes the cluster: supervisors
first; and they die with the test's thread).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from fluss_py.testing.cluster import ClusterError, LocalCluster
from fluss_py.testing.procs import ProcessHandle
from fluss_py.testing.supervision import RestartPolicy
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    FAULT_OVERRIDES,
    bucket_offsets,
    consume,
    create_table,
    leader_isr,
    produce,
    registered,
    server_name,
    wait_full_isr,
)

pytestmark = pytest.mark.fault

POLICY = RestartPolicy(initial_delay=0.2, max_delay=1.0, max_restarts=3, window=120.0)
BUCKETS = 3


def _cli(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "fluss_py.cli.main", "cluster", *args, "--dir", str(cluster.directory)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{' '.join(args)}: ({done.returncode}) {done.stderr[-3000:]}"
    return done


def _status(cluster: LocalCluster) -> dict[str, dict]:
    return {row["name"]: row for row in json.loads(_cli(cluster, "status", "--json").stdout)}


def _state(cluster: LocalCluster, name: str) -> str | None:
    s = cluster.supervision(name)
    return s["state"] if s else None


def test_a_killed_supervised_tablet_server_comes_back_and_rejoins_every_isr(cluster_factory):
    cluster = cluster_factory(1, 3, tablet_overrides=FAULT_OVERRIDES, supervise=POLICY)
    table_id = create_table(cluster, "supervised", buckets=BUCKETS)
    buckets = [TableBucket(table_id, b) for b in range(BUCKETS)]
    before = [b"before-%03d" % i for i in range(50)]
    assert produce(cluster, "supervised", before) == list(range(50))
    with ZkView(cluster.zookeeper_address) as zk:
        for tb in buckets:
            wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        sid = leader_isr(zk, cluster, buckets[0]).leader
        victim = server_name(sid)
        old_pid, old_session = cluster.pid(victim), registered(zk, cluster, sid)
        assert old_pid is not None and old_session is not None

        out = _cli(cluster, "kill", victim).stdout
        assert f"sent SIGKILL to pid {old_pid}; its supervisor restarts it" in out
        cluster.wait_until(lambda: cluster.ready(victim) and cluster.pid(victim) != old_pid, 60, f"{victim} back")
        new_pid = cluster.pid(victim)
        assert new_pid is not None and new_pid != old_pid and ProcessHandle.attach(new_pid, None).alive()
        assert not ProcessHandle.attach(old_pid, None).alive()
        cluster.wait_until(lambda: registered(zk, cluster, sid) not in (None, old_session), 30, "a new registration")
        for tb in buckets:
            wait_full_isr(zk, cluster, tb, (1, 2, 3), 60)

    row = _status(cluster)[victim]
    assert row["pid"] == new_pid and row["alive"] and row["ready"]
    sup = row["supervisor"]
    assert (sup["state"], sup["restarts"], sup["last_exit"]) == ("running", 1, "killed by signal 9 (SIGKILL)")
    assert sup["supervisor_alive"] and sup["supervisor_pid"] == cluster.get(victim).supervisor_pid
    others = [n for n in cluster.names() if n != victim]
    assert all(_status(cluster)[n]["supervisor"]["restarts"] == 0 for n in others)
    table = _cli(cluster, "status").stdout
    assert "restarts" in table and "killed by signal 9 (SIGKILL)" in table

    after = [b"after-%03d" % i for i in range(50)]
    assert produce(cluster, "supervised", after) == list(range(50, 100))
    hw = bucket_offsets(cluster, "supervised", 0).high_watermark
    assert hw == 100
    assert [v for _, v in consume(cluster, "supervised", 0, hw)] == before + after

    pids = [p for n in cluster.names() for p in (cluster.pid(n), cluster.get(n).supervisor_pid) if p is not None]
    assert len(pids) == 8  # 4 servers and their 4 supervisors
    down = _cli(cluster, "down").stdout
    assert all(f"{n}: stopped" in down for n in cluster.names()), down
    cluster.wait_until(lambda: not any(ProcessHandle.attach(p, None).alive() for p in pids), 10, "every PID gone")
    assert {_state(cluster, n) for n in cluster.names()} == {"stopped"}


def test_a_tablet_server_that_exits_2_is_not_restarted_and_status_says_why(cluster_factory):
    cluster = cluster_factory(0, 1, tablet_overrides={"replica.lag.time.max.ms": "-5"}, supervise=POLICY, start=False)
    name = server_name(1)
    with pytest.raises(ClusterError, match="bad-config"):
        cluster.start_process(name, wait=True, timeout=60)
    s = cluster.supervision(name)
    assert (s["state"], s["restarts"], s["last_exit"], s["supervisor_alive"]) == (
        "bad-config", 0, "exited with code 2", False,
    )  # fmt: skip
    assert "configuration error" in s["reason"] and "not restarted" in s["reason"]
    stdout = Path(cluster.get(name).stdout_file).read_text()
    assert stdout.count("configuration error") == 1 and "replica.lag.time.max.ms" in stdout
    row = _status(cluster)[name]
    assert row["supervisor"]["state"] == "bad-config" and "code 2 (configuration error" in row["supervisor"]["reason"]
    assert f"{name}: bad-config: " in _cli(cluster, "status").stdout


def test_a_crash_loop_is_given_up_at_the_limit_and_start_runs_it_again(cluster_factory):
    cluster = cluster_factory(0, 1, tablet_overrides=FAULT_OVERRIDES, supervise=POLICY, start=False)
    name = server_name(1)
    rec = cluster.get(name)
    with socket.socket() as taken:  # its RPC port: every start fails to bind it and exits 1
        taken.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        taken.bind(("127.0.0.1", rec.rpc_port))
        taken.listen()
        cluster.start_process(name)
        # the supervisor writes its state, then exits: wait for both (it may still be exiting when the state is read)
        cluster.wait_until(
            lambda: _state(cluster, name) == "given-up" and not cluster.supervision(name)["supervisor_alive"],
            120,
            f"{name} given up and its supervisor gone",
        )
    s = cluster.supervision(name)
    assert (s["restarts"], s["last_exit"], s["supervisor_alive"]) == (3, "exited with code 1", False)
    assert "crash loop (3 restarts within 120 s)" in s["reason"]
    log = (cluster.directory / name / "supervisor.log").read_text()
    assert log.count("given-up") == 1 and log.count("given up") == 1, log
    assert [line for line in log.splitlines() if "restarting in" in line][-1].endswith(
        "restarting in 0.8 s (restart 3 of at most 3 within 120 s)"
    ), log
    starts = Path(rec.log_file).read_text().count("fluss-py tablet-server starting")
    assert starts == 4, f"{starts} starts: the first and 3 restarts"
    assert Path(rec.stdout_file).read_text().count("cannot bind RPC port") == 4
    assert _status(cluster)[name]["supervisor"]["state"] == "given-up"

    cluster.start_process(name, wait=True, timeout=60)  # the port is free now: a new supervisor, count from 0
    s = cluster.supervision(name)
    assert (s["state"], s["restarts"], s["supervisor_alive"]) == ("running", 0, True)
