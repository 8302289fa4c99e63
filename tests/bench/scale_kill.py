"""Where a kill -9 at scale spends its time: the scale scenario's cluster (``tests/bench/scale.py``: 3 tablet
servers, RF 3, tables of at most 4000 buckets), its SIGTERM and restart (so that one server leads ~1/3 and one
~2/3, as in ``bench scale``), then ``FLUSS_KILLS`` (default 4) kills -9 of the server leading closest to a
third of the buckets, each restarted and back in every ISR before the next.

    .venv/bin/python -m tests.bench.scale_kill 20000

For every kill it prints the benchmark's figure (SIGKILL until one GetMetadata names a live leader for every
bucket) and a timeline from the SIGKILL: each poll of the benchmark (sent, answered, buckets without a live
leader) and the coordinator's log lines (it runs at INFO here, the tablet servers at WARNING). A figure, not
a test; the coordinator's INFO logging costs a little.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from signal import SIGTERM

from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import COORDINATOR, TABLET_SERVER, ZOOKEEPER
from tests.bench.scale import (
    SETTINGS,
    Placement,
    busiest,
    cpu_seconds,
    create,
    full_isr,
    names_of,
    restart_until_full,
    server_id,
    tablet_bootstrap,
)


def start(directory: Path) -> LocalCluster:
    cluster = LocalCluster(directory, coordinators=1, tablet_servers=3, overrides=SETTINGS,
                           coordinator_overrides={"log.level": "INFO"}, die_with_parent=True)  # fmt: skip
    cluster.start(timeout=60)
    cluster.wait_for_leader(30)
    return cluster


def log_lines(cluster: LocalCluster, since: float, until: float) -> list[tuple[float, str]]:
    """The coordinator's log lines stamped between ``since`` and ``until`` (wall clock)."""
    name = cluster.names(COORDINATOR)[0]
    path = Path(cluster.get(name).log_file)
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            stamp = datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        except ValueError:
            continue
        if since <= stamp <= until:
            out.append((stamp, line[24:].strip()))
    return out


def kill(cluster: LocalCluster, name: str, names: list[str]) -> tuple[float, list[str]]:
    placement = Placement(tablet_bootstrap(cluster, exclude=(name,)), names)
    polls: list[tuple[float, float, int]] = []
    try:
        placement.buckets()
        live = {server_id(n) for n in cluster.names(TABLET_SERVER)} - {server_id(name)}
        others = [ZOOKEEPER, *cluster.names(COORDINATOR), *(n for n in cluster.names(TABLET_SERVER) if n != name)]
        pids = {n: p for n in others if (p := cluster.pid(n)) is not None}
        cpu0 = {n: cpu_seconds(p) for n, p in pids.items()}
        wall, t0 = time.time(), time.monotonic()
        cluster.kill(name)
        while True:
            sent = time.monotonic()
            try:
                bs = placement.buckets()
            except Exception:
                bs = None
            answered = time.monotonic()
            missing = -1 if bs is None else sum(1 for b in bs if b.leader not in live)
            polls.append((sent - t0, answered - t0, missing))
            if missing == 0:
                break
            if answered - t0 > 120:
                raise TimeoutError("not every bucket led within 120 s")
            time.sleep(0.02)
        seconds = time.monotonic() - t0
        cpu = {n: cpu_seconds(p) - cpu0[n] for n, p in pids.items()}
    finally:
        placement.close()
    time.sleep(3.0)  # the second round's lines
    lines = [f"  poll sent {s:6.3f} answered {a:6.3f}: {m} bucket(s) without a live leader" for s, a, m in polls]
    lines += [f"  log {stamp - wall:6.3f} {text[:200]}" for stamp, text in log_lines(cluster, wall - 0.05, wall + 5)]
    lines.sort(key=lambda line: float(line.split()[2 if "poll" in line else 1]))
    return seconds, ["  CPU until then: " + ", ".join(f"{n} {c:.2f} s" for n, c in cpu.items()), *lines]


def main() -> None:
    buckets = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    kills = int(os.environ.get("FLUSS_KILLS", "4"))
    names = names_of(buckets)
    with tempfile.TemporaryDirectory(prefix="scale-kill-") as d:
        cluster = start(Path(d))
        try:
            print(f"create: {create(cluster, buckets):.1f} s", flush=True)
            time.sleep(2.0)  # start-up work settles
            placement = Placement(tablet_bootstrap(cluster), names)
            try:
                victim, _ = busiest(placement)
                handle = cluster.handle(victim)
                assert handle is not None
                cluster.signal(victim, SIGTERM)
                handle.wait_exit(60)
                cluster.start_process(victim, wait=True, timeout=60)
                placement.wait(full_isr, 300, "every ISR full after the restart", 0.2)
            finally:
                placement.close()
            for _ in range(kills):
                placement = Placement(tablet_bootstrap(cluster), names)
                try:
                    leaders = placement.leaders()
                finally:
                    placement.close()
                sid = min((s for s in leaders if s >= 0), key=lambda s: abs(leaders[s] - buckets / 3))
                name = f"{TABLET_SERVER}-{sid}"
                load = Path("/proc/loadavg").read_text().split()[0]
                seconds, lines = kill(cluster, name, names)
                print(f"kill -9 of {name} leading {leaders[sid]}: {seconds:.2f} s (load {load})", flush=True)
                print("\n".join(lines), flush=True)
                restart_until_full(cluster, name, names)
                time.sleep(2.0)  # the rejoin's work settles before the next kill
        finally:
            cluster.close()


if __name__ == "__main__":
    main()
