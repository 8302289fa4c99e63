"""``docker-compose up`` for real: deploy/docker-compose.yml on a private Docker engine (docs: deploy/README.md).

The module's cluster is built and started once (tests/fault/compose_support.py): a private dockerd in a
network namespace of its own, the images from Debian packages and host-built wheels, ``docker-compose -p
<unique> up -d``, every healthcheck healthy. It is torn down with ``down -v`` and the engine stopped by PID,
with every namespace and directory it made removed, whatever the tests did.

- ``test_compose_cluster_is_healthy_and_serves``: the nine services are healthy, one coordinator leads, and
  records written by one client container are read back by another.
- ``test_a_crashed_server_is_restarted_by_the_policy_and_rejoins``: the server process of a bucket leader's
  container is killed with SIGKILL from the host (a crash: the container exits 137; ``docker kill`` would
  count as a stop on purpose, which no policy restarts); its ``restart: on-failure:5`` starts it again (a
  new process, restart count + 1), it registers again (the coordinator's live set) and every bucket of the
  table gets back to a full ISR; every record written before and after is read back.
- ``test_a_bad_config_is_given_up_after_the_policy_limit``: a container of the server image with the
  compose file's restart policy and an out-of-range setting exits 2, is restarted 5 times with Docker's
  backoff and then stays down, ``Exited (2)``.
- ``test_killing_a_bucket_leader_container_loses_nothing``: while a client container produces with acks=all
  and the idempotent writer, ``docker kill -s KILL`` the container of a bucket leader; the bucket gets a new
  leader from the ISR, no send fails and every acknowledged record is read back exactly once.

All run in ``make test`` (``make compose-test`` runs only this file): figures in deploy/README.md.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml

from fluss_py.testing.docker_engine import DockerEngine, unavailable_reason, unique_project
from tests.fault.compose_support import SERVER_IMAGE, ComposeCluster, log

pytestmark = [pytest.mark.fault, pytest.mark.timeout(1500)]

RESTART_TIMEOUT = 180.0  # seconds for a restarted container to be healthy and its buckets back to full ISR
RATE = 100  # records per second written by the producer container
KILL_AFTER = 8.0  # seconds of writing before the kill
AFTER_FAILOVER = 10.0  # seconds of writing after the new leader shows


@pytest.fixture(scope="module")
def compose_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ComposeCluster]:
    reason = unavailable_reason()
    if reason:
        pytest.fail(f"the compose test needs a private Docker engine: {reason}")
    started = time.monotonic()
    engine = DockerEngine.start(Path(tmp_path_factory.mktemp("docker")))
    c = ComposeCluster(engine, unique_project(), {})
    try:
        log(f"engine up (netns {engine.net.prefix}); project {c.project}")
        c.build_images()
        c.up()
        c.timings["engine start to healthy"] = time.monotonic() - started
        log("timings: " + ", ".join(f"{k} {v:.1f} s" for k, v in c.timings.items()))
        yield c
    finally:
        step = time.monotonic()
        c.down()
        left = engine.stop()
        log(f"down -v and engine stop {time.monotonic() - step:.1f} s; total {time.monotonic() - started:.1f} s")
        assert left == [], f"the private engine left {left}"


def test_compose_cluster_is_healthy_and_serves(compose_cluster: ComposeCluster) -> None:
    assert set(compose_cluster.health().values()) == {"healthy"}
    states = []
    for n in (1, 2, 3):
        code = "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9124/health', timeout=5).read().decode())"
        out = compose_cluster.compose("exec", "-T", f"coordinator-{n}", "python", "-c", code).stdout
        states.append(json.loads(out))
    assert sorted(s["state"] for s in states) == ["Leader", "Standby", "Standby"], states
    assert len({s["leader_id"] for s in states}) == 1, states
    compose_cluster.client("table", "create", "smoke_events", "--buckets", "3", "--replication-factor", "3")
    lines = [f"smoke-{i}" for i in range(300)]
    compose_cluster.client("produce", "smoke_events", stdin="\n".join(lines) + "\n")
    out = compose_cluster.client(
        "consume", "smoke_events", "--from-beginning", "--max-records", "300", "--timeout", "30"
    )
    assert sorted(out.split()) == sorted(lines)


def _wait(what: str, cond: Callable[[], object], timeout: float = RESTART_TIMEOUT, interval: float = 0.5) -> None:
    """Poll ``cond`` until it is truthy (AssertionError naming ``what`` at the deadline)."""
    started = time.monotonic()
    while not cond():
        assert time.monotonic() - started < timeout, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(interval)


def _full_isr(cluster: ComposeCluster, table: str) -> bool:
    return all(sorted(b["isr"]) == [1, 2, 3] for b in cluster.describe(table)["buckets"])


def _live_tablet_servers(cluster: ComposeCluster) -> set[int]:
    return {t["id"] for t in json.loads(cluster.client("cluster", "servers", "--json"))["tablet_servers"]}


def _server_policy(cluster: ComposeCluster) -> str:
    """The restart policy the compose file gives the server services (all the same)."""
    services = yaml.safe_load(cluster.compose("config").stdout)["services"]
    policies = {str(s["restart"]) for n, s in services.items() if n.startswith(("coordinator-", "tablet-server-"))}
    assert len(policies) == 1, policies
    return policies.pop()


def test_a_crashed_server_is_restarted_by_the_policy_and_rejoins(compose_cluster: ComposeCluster) -> None:
    table = "restart_events"
    compose_cluster.client("table", "create", table, "--buckets", "3", "--replication-factor", "3")
    before = [f"before-{i}" for i in range(300)]
    compose_cluster.client("produce", table, "--acks", "all", stdin="\n".join(before) + "\n")
    _wait("a full ISR before the crash", lambda: _full_isr(compose_cluster, table))
    victim = compose_cluster.describe(table)["buckets"][0]["leader"]
    service = f"tablet-server-{victim}"
    container = compose_cluster.containers()[service]
    info = compose_cluster.inspect(container)
    assert info["HostConfig"]["RestartPolicy"] == {"Name": "on-failure", "MaximumRetryCount": 5}, info["HostConfig"]
    pid, restarts = info["State"]["Pid"], info["RestartCount"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert b"tablet-server" in argv and any(a.endswith(b"fluss-py") for a in argv), argv  # signal only ours
    log(f"{service} (pid {pid} on the host) leads bucket 0: SIGKILL from the host")
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()

    def restarted() -> bool:
        now = compose_cluster.inspect(container)
        return now["RestartCount"] == restarts + 1 and now["State"]["Running"] and now["State"]["Pid"] != pid

    since_kill = {}
    _wait(f"{service} restarted", restarted, interval=0.2)
    since_kill["running again"] = time.monotonic() - killed_at
    _wait(f"{service} registered", lambda: victim in _live_tablet_servers(compose_cluster))
    since_kill["registered"] = time.monotonic() - killed_at
    _wait("every bucket back to a full ISR", lambda: _full_isr(compose_cluster, table))
    since_kill["full ISR"] = time.monotonic() - killed_at
    _wait(f"{service} healthy", lambda: compose_cluster.health()[service] == "healthy")
    since_kill["healthy (healthcheck every 5 s)"] = time.monotonic() - killed_at
    log(f"{service} after SIGKILL: " + ", ".join(f"{k} {v:.1f} s" for k, v in since_kill.items()) + " after the kill")
    assert compose_cluster.inspect(container)["RestartCount"] == restarts + 1  # once, and it stays up
    after = [f"after-{i}" for i in range(100)]
    compose_cluster.client("produce", table, "--acks", "all", stdin="\n".join(after) + "\n")
    read = compose_cluster.client("consume", table, "--from-beginning", "--max-records", "400", "--timeout", "30")
    assert sorted(read.split()) == sorted(before + after)


def test_a_bad_config_is_given_up_after_the_policy_limit(compose_cluster: ComposeCluster) -> None:
    policy = _server_policy(compose_cluster)
    limit = int(policy.split(":")[1])
    name = f"{compose_cluster.project}-bad-config"
    run = ["run", "-d", "--name", name, "--network", "none", "--restart", policy, SERVER_IMAGE]
    container = compose_cluster.docker(*run, "tablet-server", "-D", "tablet-server.id=-1").stdout.strip()
    try:
        started = time.monotonic()

        def given_up() -> bool:
            state = compose_cluster.inspect(container)
            return state["State"]["Status"] == "exited" and state["RestartCount"] == limit

        _wait(f"{name} given up after {limit} restarts", given_up)
        log(f"bad config under {policy}: given up after {time.monotonic() - started:.1f} s")
        state = compose_cluster.inspect(container)
        assert (state["State"]["ExitCode"], state["RestartCount"]) == (2, limit)
        logs = compose_cluster.docker("logs", container)
        assert (logs.stdout + logs.stderr).count("configuration error") == limit + 1
    finally:
        compose_cluster.docker("rm", "-f", container, check=False)


class _Writer(threading.Thread):
    """Feeds ``rec-N`` lines at RATE per second to the producer container's stdin until told to stop."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        super().__init__(name="compose-writer", daemon=True)
        self.proc, self.sent, self.stop = proc, 0, threading.Event()

    def run(self) -> None:
        assert self.proc.stdin is not None
        start = time.monotonic()
        while not self.stop.is_set():
            due = int((time.monotonic() - start) * RATE)
            while self.sent < due:
                self.proc.stdin.write(f"rec-{self.sent:06d}\n")
                self.sent += 1
            self.proc.stdin.flush()
            time.sleep(0.05)


def _kill_leader_while_writing(cluster: ComposeCluster, table: str, victim: int, led: list[int]) -> dict:
    """``docker kill -s KILL`` tablet-server-<victim> KILL_AFTER s into the write; the table after failover."""
    time.sleep(KILL_AFTER)
    cluster.docker("kill", "-s", "KILL", cluster.containers()[f"tablet-server-{victim}"])
    killed_at = time.monotonic()
    while True:
        after = {b["bucket"]: b for b in cluster.describe(table)["buckets"]}
        if all(after[b]["leader"] not in (victim, -1) for b in led) or time.monotonic() - killed_at > 120:
            break
        time.sleep(1)
    log(
        f"new leaders of {led}: {[after[b]['leader'] for b in led]} {time.monotonic() - killed_at:.1f} s after the kill"
    )
    time.sleep(AFTER_FAILOVER)
    return after


def test_killing_a_bucket_leader_container_loses_nothing(compose_cluster: ComposeCluster, tmp_path: Path) -> None:
    table = "failover_events"
    compose_cluster.client("table", "create", table, "--buckets", "3", "--replication-factor", "3")
    before = {b["bucket"]: b for b in compose_cluster.describe(table)["buckets"]}
    victim = before[0]["leader"]
    led = sorted(b for b, d in before.items() if d["leader"] == victim)
    log(f"tablet-server-{victim} leads buckets {led}: killing its container while writing")
    argv = compose_cluster.client_argv("produce", table, "--acks", "all", "--print-offsets", interactive=True)
    with open(tmp_path / "acks.txt", "w+") as acks, open(tmp_path / "producer.err", "w+") as summary:  # no pipes
        proc = subprocess.Popen(argv, env=compose_cluster.engine.env(), stdin=subprocess.PIPE, stdout=acks,
                                stderr=summary, text=True)  # fmt: skip
        writer = _Writer(proc)
        writer.start()
        try:
            after = _kill_leader_while_writing(compose_cluster, table, victim, led)
        finally:
            writer.stop.set()
            writer.join(30)
            proc.communicate(timeout=300)
    out, err = (tmp_path / "acks.txt").read_text(), (tmp_path / "producer.err").read_text()
    log(f"producer: {err.strip().splitlines()[-1] if err.strip() else '(no summary)'}")
    assert proc.returncode == 0, err[-3000:]
    acked = {line.split("\t")[2] for line in out.splitlines() if line.count("\t") == 2}
    assert len(acked) == writer.sent, f"sent {writer.sent}, acknowledged {len(acked)}"
    for b in led:
        assert after[b]["leader"] not in (victim, -1), after[b]
        assert after[b]["leader_epoch"] > before[b]["leader_epoch"], (before[b], after[b])
        assert victim not in after[b]["isr"], after[b]
    read = compose_cluster.client("consume", table, "--from-beginning", "--max-records", str(writer.sent),
                                  "--timeout", "30")  # fmt: skip
    values = read.split()
    lost = acked - set(values)
    log(f"sent {writer.sent}, acknowledged {len(acked)}, read {len(values)}, lost {len(lost)}")
    assert not lost, sorted(lost)[:20]
    assert len(values) == len(set(values)), "a record was read twice (the idempotent writer must not duplicate)"
