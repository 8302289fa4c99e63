"""Consumer groups (docs/consumer-groups.md): how fast a dead member's buckets move, and grouped throughput.

Rows:
- kill -9 of one of 10 member processes (``fluss-py consume --group``, session ``GROUP_BENCH_SESSION_S``,
  default 3 s) on a 100-bucket table -> the coordinator shows the 9 others owning all 100 buckets, group
  STABLE (polled every 20 ms with DescribeGroup); mean and max over ``GROUP_BENCH_KILLS`` kills (default 3);
- grouped consumption with 1, 2 and 4 member processes: ``GROUP_BENCH_RECORDS`` records (default 120 000,
  100 bytes, 12 buckets, produced first) read, printed (to a log file) and committed by a fresh group:
  the records committed from the moment every member owns buckets until every bucket's committed offset
  is at its high watermark, divided by that time (the processes' start is not counted).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from fluss_py.client import ProducerOptions, SyncAdmin, SyncProducer
from fluss_py.errors import GroupNotExistError
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.procs import wait_until
from tests.bench.bench_cluster import SETTINGS
from tests.bench.common import row
from tests.fault.group_support import Members
from tests.fault.replication_support import bootstrap, create_table

SESSION_S = float(os.environ.get("GROUP_BENCH_SESSION_S", "3"))
KILLS = int(os.environ.get("GROUP_BENCH_KILLS", "3"))
RECORDS = int(os.environ.get("GROUP_BENCH_RECORDS", "120000"))


def _stable(admin: SyncAdmin, group: str, members: int, buckets: int) -> bool:
    view = admin.describe_group_members(group)
    owned = sorted(tb.bucket for m in view.members for tb in m.assigned)
    return view.state == "STABLE" and len(view.members) == members and owned == list(range(buckets))


def _joined(admin: SyncAdmin, group: str, members: int) -> bool:
    try:
        view = admin.describe_group_members(group)
    except GroupNotExistError:
        return False
    return len(view.members) == members and all(m.assigned for m in view.members)


def _committed(admin: SyncAdmin, group: str) -> int:
    """Records committed so far (the sum of committed offsets; every bucket starts at 0)."""
    try:
        return sum(r.committed for r in admin.describe_group(group))
    except GroupNotExistError:
        return 0


def _reassignment(cluster: LocalCluster, admin: SyncAdmin, work: Path) -> list[dict]:
    create_table(cluster, "bench_groups_kill", buckets=100, rf=1)
    group = Members(work, cluster.directory, "fluss.bench_groups_kill", "bench-kill")
    try:
        live = [group.start(f"m{i}", session_timeout=SESSION_S) for i in range(10)]
        wait_until(lambda: _stable(admin, "bench-kill", 10, 100), 120, interval=0.1, message="10 members stable")
        times = []
        for k in range(KILLS):
            victim = live.pop()
            t0 = time.monotonic()
            victim.handle.kill()
            wait_until(lambda: _stable(admin, "bench-kill", len(live), 100), 60, interval=0.02, message="reassigned")
            times.append(time.monotonic() - t0)
            if k + 1 < KILLS:  # back to 10 members before the next kill
                live.append(group.start(f"r{k}", session_timeout=SESSION_S))
                wait_until(lambda: _stable(admin, "bench-kill", len(live), 100), 120, interval=0.1, message="rejoin")
    finally:
        group.close()
    target = f"< {SESSION_S + 1:g} (session + 1 s)"
    name = f"member kill -9 -> full reassignment (10 members, 100 buckets, session {SESSION_S:g} s)"
    return [
        row(
            f"{name}, mean of {len(times)}",
            sum(times) / len(times),
            "s",
            target,
            sum(times) / len(times) < SESSION_S + 1,
        ),
        row(f"{name}, max", max(times), "s", target, max(times) < SESSION_S + 1),
    ]


def _throughput(cluster: LocalCluster, admin: SyncAdmin, work: Path) -> list[dict]:
    table = "fluss.bench_groups_tput"
    create_table(cluster, "bench_groups_tput", buckets=12, rf=1)
    value = b"x" * 100
    with SyncProducer(bootstrap(cluster), ProducerOptions(acks=-1)) as producer:
        futures = [producer.send(table, value, bucket=i % 12) for i in range(RECORDS)]
        producer.flush()
        for f in futures:
            f.result(timeout=120)
    rows = []
    for n in (1, 2, 4):
        name = f"bench-tput-{n}"
        group = Members(work, cluster.directory, table, name)
        try:
            for i in range(n):
                group.start(f"{name}-{i}", session_timeout=10.0)
            wait_until(lambda name=name, n=n: _joined(admin, name, n), 120, interval=0.02, message=f"{name} joined")
            t0 = time.monotonic()
            start = _committed(admin, name)

            def done(name: str = name) -> bool:
                committed = admin.describe_group(name)
                return len(committed) == 12 and all(r.committed == r.high_watermark for r in committed)

            wait_until(done, 600, interval=0.05, message=f"{name} read everything")
            elapsed = time.monotonic() - t0
        finally:
            group.close()
        rows.append(row(f"grouped consumption, {n} member(s), 100 B records, 12 buckets (from all joined)",
                        (RECORDS - start) / elapsed, "records/s"))  # fmt: skip
    return rows


def run() -> list[dict]:
    with tempfile.TemporaryDirectory(prefix="bench-groups-") as d:
        cluster = LocalCluster(Path(d) / "cluster", coordinators=1, tablet_servers=1, overrides=SETTINGS,
                               die_with_parent=True)  # fmt: skip
        try:
            cluster.start(timeout=60)
            with SyncAdmin(bootstrap(cluster), request_timeout=30.0) as admin:
                return _reassignment(cluster, admin, Path(d)) + _throughput(cluster, admin, Path(d))
        finally:
            cluster.close(grace=3.0)
