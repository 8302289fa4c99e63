"""The 2000-bucket scenario (issue 7 item 4), shared by ``bench_scale.py`` (figures) and
``tests/fault/test_scale.py`` (behaviour): one table of ``buckets`` buckets, replication factor 3, on 3 tablet
servers of a fresh ``LocalCluster`` (1 coordinator).

Steps, each timed:
1. create the table and wait until every bucket has a leader and a full ISR (coordinator metadata) and every
   replica exists on its server (/health leaders + followers);
2. idle: CPU of each process from ``/proc/<pid>/stat`` (utime + stime) over ``idle_seconds``, and its RSS;
3. controlled shutdown (SIGTERM) of the server leading the most buckets (~1/3): time until the process has
   exited, and whether every bucket then has a live leader; the server is restarted and rejoins every ISR;
4. kill -9 of the server leading ~1/3 of the buckets, restart, then kill -9 of the one leading ~2/3: time from
   the SIGKILL until every bucket names a live leader.

The caller's hooks run after step 1 and after step 4 (the slow test starts a steady acks=all producer on a few
buckets there, and checks that no acknowledged record was lost). Only this thread starts, signals or kills
processes.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from signal import SIGTERM

from fluss_py.client.metadata import BucketLocation
from fluss_py.client.sync import SyncAdmin
from fluss_py.config import MAX_BUCKETS
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER, ZOOKEEPER
from fluss_py.testing.procs import wait_until
from tests.bench.common import row

TABLE = "fluss.scale"  # the first table; more buckets than one table may hold go to fluss.scale_2, ...
SETTINGS = {"zookeeper.session-timeout": "6s", "log.level": "WARNING"}
CLK_TCK = os.sysconf("SC_CLK_TCK")


def tables(buckets: int) -> list[tuple[str, int]]:
    """(table name, bucket count) for ``buckets`` in all: as few tables as MAX_BUCKETS allows, equal in size
    (a table is capped at MAX_BUCKETS buckets)."""
    count = -(-buckets // MAX_BUCKETS)
    sizes = [buckets // count + (1 if i < buckets % count else 0) for i in range(count)]
    return [(TABLE if i == 0 else f"{TABLE}_{i + 1}", n) for i, n in enumerate(sizes)]


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """utime + stime of ``pid`` in seconds (``/proc/<pid>/stat`` fields 14 and 15), or of its thread ``tid``
    (``/proc/<pid>/task/<tid>/stat``)."""
    with open(f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def idle_cpu(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Percent of one core used by each process over ``seconds``."""
    t0, before = time.monotonic(), {n: cpu_seconds(p) for n, p in pids.items()}
    time.sleep(seconds)  # the measurement window itself, not a synchronisation
    dt = time.monotonic() - t0
    return {n: (cpu_seconds(p) - before[n]) / dt * 100 for n, p in pids.items()}


@dataclass
class ScaleResult:
    buckets: int
    create_s: float = 0.0
    idle_cpu_pct: dict[str, float] = field(default_factory=dict)
    rss_mb: dict[str, float] = field(default_factory=dict)
    shutdown_server: str = ""
    shutdown_leaders: int = 0
    shutdown_s: float = 0.0
    shutdown_all_led: bool = False
    rejoin_s: float = 0.0
    kills: list[tuple[int, float]] = field(default_factory=list)  # (leaders of the killed server, seconds)

    def rows(self) -> list[dict]:
        """Figures with the targets of issue 20 (20,000 buckets, 3 servers, RF 3)."""
        n = self.buckets
        out = [row(f"(e) {n} buckets RF3: create until every replica exists", self.create_s, "s", "<= 20",
                   self.create_s <= 20.0)]  # fmt: skip
        for name, pct in self.idle_cpu_pct.items():
            server = name.startswith(TABLET_SERVER)
            target = "<= 3" if server else ""
            out.append(row(f"(e) {n} buckets idle CPU {name}", pct, "% core", target, pct <= 3.0 or not server))
        for name, mb in self.rss_mb.items():
            server = name.startswith(TABLET_SERVER)
            out.append(
                row(f"(e) {n} buckets RSS {name}", mb, "MB", "<= 300" if server else "", mb <= 300 or not server)
            )
        ok = self.shutdown_s <= 3.0 and self.shutdown_all_led
        what = f"(e) SIGTERM of a server leading {self.shutdown_leaders}: until exit, leaders moved"
        out.append(row(what, self.shutdown_s, "s", "<= 3", ok))
        what = f"(e) {n} buckets: restart of that server until every ISR is full"
        out.append(row(what, self.rejoin_s, "s", "<= 15", self.rejoin_s <= 15.0))
        for leaders, seconds in self.kills:
            what = f"(e) kill -9 of a server leading {leaders}: until every bucket has a live leader"
            out.append(row(what, seconds, "s", "<= 2", seconds <= 2.0))
        return out


class Placement:
    """Reads every bucket's leader and ISR from the coordinator (one GetMetadata per poll) on a private loop."""

    def __init__(self, bootstrap: str, names: list[str] | None = None) -> None:
        self.admin = SyncAdmin(bootstrap, request_timeout=10.0)
        self.names = names or [TABLE]

    def close(self) -> None:
        self.admin.close()

    def buckets(self) -> list[BucketLocation]:
        # one GetMetadata for every table: five in a row would each queue behind the coordinator's events
        return [b for _, buckets in self.admin.get_table_placements(self.names).values() for b in buckets]

    def leaders(self) -> Counter[int]:
        return Counter(b.leader for b in self.buckets())

    def wait(self, ok: Callable[[list[BucketLocation]], bool], timeout: float, what: str, poll: float = 0.02) -> float:
        """Seconds until ``ok(buckets)``; polls at ``poll`` intervals up to ``timeout``."""
        t0 = time.monotonic()

        def check() -> bool:
            try:
                return ok(self.buckets())
            except Exception:  # the coordinator may be busy or a server dead: the next poll retries
                return False

        wait_until(check, timeout, interval=poll, message=what)
        return time.monotonic() - t0


def all_led(live: set[int]) -> Callable[[list[BucketLocation]], bool]:
    return lambda bs: all(b.leader in live for b in bs)


def full_isr(bs: list[BucketLocation]) -> bool:
    return all(b.leader >= 0 and len(b.isr) == len(b.replicas) for b in bs)


def start_cluster(directory: Path, overrides: dict[str, str] | None = None) -> LocalCluster:
    cluster = LocalCluster(
        directory, coordinators=1, tablet_servers=3, overrides={**SETTINGS, **(overrides or {})}, die_with_parent=True
    )
    cluster.start(timeout=60)
    cluster.wait_for_leader(30)
    return cluster


def tablet_bootstrap(cluster: LocalCluster, exclude: tuple[str, ...] = ()) -> str:
    names = [n for n in cluster.names(TABLET_SERVER) if n not in exclude] + cluster.names(COORDINATOR)
    return ",".join(cluster.get(n).rpc_address for n in names)


def create(cluster: LocalCluster, buckets: int, timeout: float = 300.0) -> float:
    """Seconds from the first CreateTable until every bucket of every table has a full ISR and every replica
    exists on its server; the tables (``tables(buckets)``) are created one after the other."""
    t0 = time.monotonic()
    with SyncAdmin(tablet_bootstrap(cluster), request_timeout=120.0) as admin:
        for name, count in tables(buckets):
            admin.create_table(name, num_buckets=count, replication_factor=3)
    placement = Placement(tablet_bootstrap(cluster), names_of(buckets))
    try:
        placement.wait(lambda bs: len(bs) == buckets and full_isr(bs), timeout, "every bucket with a full ISR", 0.2)
    finally:
        placement.close()
    wait_until(
        lambda: hosted(cluster) >= buckets * 3, timeout, interval=0.2, message="every replica created on its server"
    )
    return time.monotonic() - t0


def names_of(buckets: int) -> list[str]:
    return [name for name, _ in tables(buckets)]


def hosted(cluster: LocalCluster) -> int:
    """Replicas the tablet servers report in /health (leaders + followers), summed."""
    total = 0
    for name in cluster.names(TABLET_SERVER):
        health = cluster.health(name) or {}
        total += int(health.get("leaders", 0)) + int(health.get("followers", 0))
    return total


def server_id(name: str) -> int:
    return int(name.rsplit("-", 1)[1])


def busiest(placement: Placement) -> tuple[str, int]:
    sid, count = placement.leaders().most_common(1)[0]
    return f"{TABLET_SERVER}-{sid}", count


def kill_until_led(cluster: LocalCluster, name: str, names: list[str]) -> float:
    """kill -9 ``name``; seconds from the SIGKILL until every bucket of the tables ``names`` names a live leader
    (coordinator metadata read through the surviving servers, polled every 20 ms)."""
    placement = Placement(tablet_bootstrap(cluster, exclude=(name,)), names)
    try:
        placement.buckets()  # connected before the kill
        live = {server_id(n) for n in cluster.names(TABLET_SERVER)} - {server_id(name)}
        t0 = time.monotonic()
        cluster.kill(name)  # SIGKILL, then reaps it
        placement.wait(all_led(live), 120, "every bucket led by a live server")
        return time.monotonic() - t0
    finally:
        placement.close()


def restart_until_full(cluster: LocalCluster, name: str, names: list[str]) -> None:
    """Start ``name`` again and wait until every bucket of the tables ``names`` has a full ISR."""
    cluster.start_process(name, wait=True, timeout=60)
    placement = Placement(tablet_bootstrap(cluster), names)
    try:
        placement.wait(full_isr, 300, "every ISR full after the restart", 0.2)
    finally:
        placement.close()


def run_scenario(
    directory: Path,
    buckets: int = 2000,
    idle_seconds: float = 10.0,
    cluster_ready: Callable[[LocalCluster], None] | None = None,
    after: Callable[[LocalCluster], None] | None = None,
) -> ScaleResult:
    """Runs steps 1-4 (see the module docstring); ``cluster_ready`` is called after step 1 (e.g. to start a
    producer), ``after`` after step 4 (e.g. to check what the producer wrote); the cluster is always closed."""
    result = ScaleResult(buckets)
    cluster = start_cluster(directory)
    try:
        result.create_s = create(cluster, buckets)
        if cluster_ready is not None:
            cluster_ready(cluster)
        time.sleep(2.0)  # let start-up work (first fetches, checkpoints) finish before measuring idle
        pids = {n: cluster.pid(n) for n in [ZOOKEEPER, *cluster.names(COORDINATOR), *cluster.names(TABLET_SERVER)]}
        pids = {n: p for n, p in pids.items() if p is not None}
        result.idle_cpu_pct = idle_cpu(pids, idle_seconds)
        result.rss_mb = {n: rss_mb(p) for n, p in pids.items()}

        names = names_of(buckets)
        placement = Placement(tablet_bootstrap(cluster), names)
        try:
            name, count = busiest(placement)
            result.shutdown_server, result.shutdown_leaders = name, count
            handle = cluster.handle(name)
            assert handle is not None
            t0 = time.monotonic()
            cluster.signal(name, SIGTERM)
            handle.wait_exit(60)
            result.shutdown_s = time.monotonic() - t0
            live = {server_id(n) for n in cluster.names(TABLET_SERVER)} - {server_id(name)}
            result.shutdown_all_led = all_led(live)(placement.buckets())
            t0 = time.monotonic()
            cluster.start_process(name, wait=True, timeout=60)
            placement.wait(full_isr, 300, "every ISR full after the restart", 0.2)
            result.rejoin_s = time.monotonic() - t0

            # after the SIGTERM one server leads ~2/3 and one ~1/3: kill the ~1/3 first (the target's case),
            # then, once it is back in every ISR, the ~2/3 one
            leaders = placement.leaders()
            order = sorted((sid for sid in leaders if sid >= 0), key=lambda sid: abs(leaders[sid] - buckets / 3))
            kills = [(f"{TABLET_SERVER}-{sid}", leaders[sid]) for sid in order[:2]]
        finally:
            placement.close()
        for i, (name, count) in enumerate(kills):
            seconds = kill_until_led(cluster, name, names)
            result.kills.append((count, seconds))
            if i < len(kills) - 1:
                restart_until_full(cluster, name, names)
        if after is not None:
            after(cluster)
        return result
    finally:
        cluster.close()
