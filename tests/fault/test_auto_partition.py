"""Auto-partitioned tables across coordinator failovers (docs/partitioning.md), real processes.

A day-partitioned table (2 slots ahead, 1 kept) is created with the CLI and its coordinator leader is
killed at once: the next leader creates today's and tomorrow's partitions. Partitions made by hand in an
expired slot and in the kept one, then another kill -9 of the leader: the next one drops the expired
partition only. A partition is a table: produce and consume on it. Dropping the table drops its partitions.

A second test: the logical table of a partitioned table has no buckets of its own (reading it is
refused with PARTITIONED_TABLE), the leader exports the creation-lag gauges (0: on schedule), and
producers writing to it (the client and `fluss-py produce`) have each record's timestamp pick its
partition; a record of an expired or not yet created slot fails PARTITION_NOT_EXIST.
"""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime

import pytest

from fluss_py.client import ProducerOptions, SyncAdmin, SyncProducer
from fluss_py.errors import InvalidRequestError, PartitionNotExistError
from fluss_py.partitioning import TimeUnit, partition_name, shift, slot_start, wanted
from fluss_py.testing.faults import kill9
from fluss_py.testing.health import fetch_text
from tests.fault.replication_support import bootstrap, consume, metric_value, produce

pytestmark = pytest.mark.fault

TABLE = "events"


def _cli(cluster, *args: str, command: str = "table", stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "fluss_py.cli.main", command, *args, "--dir", str(cluster.directory)],
        capture_output=True, text=True, timeout=60, input=stdin,
    )  # fmt: skip


def _partitions(admin: SyncAdmin) -> set[str]:
    return {t.split("$", 1)[1] for t in admin.list_tables("fluss") if t.startswith(f"{TABLE}$")}


def _partitioned_table(cluster_factory, coordinators: int, buckets: int):
    """A cluster (one tablet server, a 1 s check) with fluss.events made by the CLI: by day, 2 slots ahead, 1
    kept, replication factor 1. Returns the cluster and the coordinator leader's name. The tablet server takes
    records up to 2 days ahead of its clock (tomorrow's slot; the default bound is one hour)."""
    cluster = cluster_factory(
        coordinators,
        1,
        coordinator_overrides={"coordinator.auto-partition.check-interval": "1s"},
        tablet_overrides={"log.message.timestamp.after.max.ms": "2d"},
    )
    leader = cluster.wait_for_leader(15)
    spec = ["--partitioned-by", "dt", "--auto-partition", "day", "--num-precreate", "2", "--retention", "1"]
    created = _cli(cluster, "create", f"fluss.{TABLE}", "--buckets", str(buckets), "--replication-factor", "1", *spec)
    assert created.returncode == 0, created.stderr
    return cluster, leader


def test_partitions_are_created_ahead_and_expired_across_coordinator_failovers(cluster_factory):
    cluster, first = _partitioned_table(cluster_factory, coordinators=3, buckets=1)
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


def _ms(ts: datetime) -> int:
    return int(ts.timestamp() * 1000)


def test_the_logical_table_has_no_buckets_and_producers_route_records_by_timestamp(cluster_factory):
    cluster, leader = _partitioned_table(cluster_factory, coordinators=1, buckets=2)
    with SyncAdmin(bootstrap(cluster), request_timeout=15.0) as admin:
        cluster.wait_until(
            lambda: set(wanted(datetime.now(UTC), TimeUnit.DAY, 2)) <= _partitions(admin), 30, "partitions ahead"
        )
        tables = {t.info.path.table: t for t in admin.describe_cluster().tables}
        logical = tables[TABLE]
        assert logical.info.descriptor.num_buckets == 2 and not logical.buckets  # described, no buckets
        assert all(len(tables[f"{TABLE}${p}"].buckets) == 2 for p in _partitions(admin))
        metrics = fetch_text(cluster.get(leader).http_url + "/metrics", timeout=5.0)
        for gauge in ("partition_creation_lag_seconds", "partition_last_creation_late_seconds"):
            assert f"fluss_coordinator_{gauge} " in metrics  # on schedule: today's partition exists
        assert metric_value(metrics, "fluss_coordinator_partition_creation_lag_seconds") == 0.0

        described = _cli(cluster, "describe", f"fluss.{TABLE}")
        listed = _cli(cluster, "list-partitions", f"fluss.{TABLE}")
        assert described.returncode == 0 and TABLE in described.stdout, described.stdout + described.stderr
        assert all(f"{TABLE}${p}" in listed.stdout for p in _partitions(admin)), listed.stdout + listed.stderr
        read = _cli(cluster, f"fluss.{TABLE}", "--from-beginning", "--max-records", "1", command="consume")
        assert read.returncode != 0 and "PARTITIONED_TABLE" in read.stderr, read.stdout + read.stderr

        today = slot_start(datetime.now(UTC), TimeUnit.DAY)
        tomorrow, expired = shift(today, TimeUnit.DAY, 1), shift(today, TimeUnit.DAY, -5)
        producer = SyncProducer(bootstrap(cluster), ProducerOptions(request_timeout=10.0, delivery_timeout=30.0))
        try:
            a = producer.send_and_wait(f"fluss.{TABLE}", b"today", bucket=0, timestamp_ms=_ms(today) + 1)
            b = producer.send_and_wait(f"fluss.{TABLE}", b"tomorrow", bucket=0, timestamp_ms=_ms(tomorrow))
            for missing in (expired, shift(today, TimeUnit.DAY, 2)):  # expired; not created yet
                with pytest.raises(PartitionNotExistError):
                    producer.send_and_wait(f"fluss.{TABLE}", b"lost", bucket=0, timestamp_ms=_ms(missing))
        finally:
            producer.close(timeout=5.0)
        ids = {t.info.path.table: t.info.table_id for t in admin.describe_cluster().tables}
        day = partition_name(today, TimeUnit.DAY)
        assert a.bucket.table_id == ids[f"{TABLE}${day}"]
        assert b.bucket.table_id == ids[f"{TABLE}${partition_name(tomorrow, TimeUnit.DAY)}"]

    # the CLI routes by the records' timestamp (now): into the current slot's partition
    before = datetime.now(UTC)
    wrote = _cli(cluster, f"fluss.{TABLE}", command="produce", stdin="cli-1\ncli-2\n")
    assert wrote.returncode == 0, wrote.stderr
    current = f"{TABLE}${partition_name(before, TimeUnit.DAY)}"
    if partition_name(datetime.now(UTC), TimeUnit.DAY) == partition_name(before, TimeUnit.DAY):  # not at midnight
        found = [v for b in (0, 1) for _, v in consume(cluster, current, b, _end(cluster, current, b))]
        assert sorted(found) == [b"cli-1", b"cli-2", b"today"]


def _end(cluster, table: str, bucket: int) -> int:
    with SyncAdmin(bootstrap(cluster), request_timeout=15.0) as admin:
        return admin.list_offsets(f"fluss.{table}", [bucket])[bucket].high_watermark
