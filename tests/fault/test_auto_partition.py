"""Auto-partitioned tables across coordinator failovers (docs/partitioning.md), real processes.

A day-partitioned table (2 slots ahead, 1 kept) is created with the CLI and its coordinator leader is
killed at once: the next leader creates today's and tomorrow's partitions. Partitions made by hand in an
expired slot and in the kept one, then another kill -9 of the leader: the next one drops the expired
partition only. A partition is a table: produce and consume on it. Dropping the table drops its partitions.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from fluss_py.client import SyncAdmin
from fluss_py.coordinator.auto_partition import TimeUnit, partition_name, shift, slot_start, wanted
from fluss_py.errors import InvalidRequestError
from fluss_py.testing.faults import kill9
from tests.fault.replication_support import bootstrap, consume, produce

pytestmark = [pytest.mark.fault, pytest.mark.usefixtures("servers_built")]

TABLE = "events"


def _cli(cluster, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", "table", *args, "--dir", str(cluster.directory)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def _partitions(admin: SyncAdmin) -> set[str]:
    return {t.split("$", 1)[1] for t in admin.list_tables("fluss") if t.startswith(f"{TABLE}$")}


def test_partitions_are_created_ahead_and_expired_across_coordinator_failovers(cluster_factory):
    cluster = cluster_factory(3, 1, coordinator_overrides={"coordinator.auto-partition.check-interval": "1s"})
    first = cluster.wait_for_leader(15)
    spec = ["--partitioned-by", "dt", "--auto-partition", "day", "--num-precreate", "2", "--retention", "1"]
    created = _cli(cluster, "create", f"fluss.{TABLE}", "--buckets", "1", "--replication-factor", "1", *spec)
    assert created.returncode == 0, created.stderr
    kill9(cluster, first)  # perhaps before its first check: the next leader must do it
    second = cluster.wait_for_leader(30, exclude=[first])
    with SyncAdmin(bootstrap(cluster), request_timeout=15.0) as admin:

        def ahead() -> bool:  # (re-computed: the test may straddle midnight)
            return set(wanted(datetime.now(UTC), TimeUnit.DAY, 2)) <= _partitions(admin)

        cluster.wait_until(ahead, 30, "today's and tomorrow's partitions")
        today = slot_start(datetime.now(UTC), TimeUnit.DAY)
        kept = partition_name(shift(today, TimeUnit.DAY, -1), TimeUnit.DAY)  # inside retention (1 slot)
        for by_hand in ("20200101", kept):
            admin.create_table(f"fluss.{TABLE}${by_hand}", num_buckets=1, replication_factor=1, ignore_if_exists=True)
        with pytest.raises(InvalidRequestError):
            admin.create_table(f"fluss.{TABLE}$not-a-slot", num_buckets=1, replication_factor=1)
        kill9(cluster, second)
        cluster.wait_for_leader(30, exclude=[first, second])
        cluster.wait_until(lambda: "20200101" not in _partitions(admin), 30, "the expired partition dropped")
        assert {kept, *wanted(today, TimeUnit.DAY, 2)} <= _partitions(admin)  # nothing inside retention dropped

        current = f"{TABLE}${partition_name(datetime.now(UTC), TimeUnit.DAY)}"
        assert produce(cluster, current, [b"a", b"b"], delivery_timeout=30.0) == [0, 1]
        assert [v for _, v in consume(cluster, current, 0, 2)] == [b"a", b"b"]
        listed = _cli(cluster, "list-partitions", f"fluss.{TABLE}")
        assert f"fluss.{current}" in listed.stdout, listed.stdout + listed.stderr

        admin.drop_table(f"fluss.{TABLE}")
        cluster.wait_until(lambda: not _partitions(admin), 30, "the dropped table's partitions dropped too")
