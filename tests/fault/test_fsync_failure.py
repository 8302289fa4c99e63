"""A failed fsync (issue 36 finding 6, "fsyncgate"; docs/storage.md §10), on real processes.

One tablet server (the victim) keeps its data dir on the power-cut filesystem (``testing/powercut_fs.py``:
a page cache in memory, a disk that holds only what was fsynced, fsyncs that fail or lie as armed); the
other two and ZooKeeper stay on the real disk. Records are 8 KB, so every batch covers a whole 4 KiB page:
a page a faulty fsync left unwritten holds only bytes of the batches it was to write.

A segment fsync fails with ENOSPC: the victim's data dir goes offline and stays offline while the process
lives (it used to come back after the recovery check, reloaded from the same files, whose unwritten pages
were still readable and passed the CRC check), its leaderships move, every acknowledged record is read back.

Reproduce: ``.venv/bin/python -m pytest tests/fault/test_fsync_failure.py -s``.
"""

from __future__ import annotations

import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from fluss_py.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpoint
from fluss_py.log.manager import bucket_dir_name
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.powercut import PowerCutFs
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    FAULT_OVERRIDES,
    consume,
    create_table,
    leader_isr,
    metric_value,
    produce,
    registered,
    server_name,
)

pytestmark = pytest.mark.fault

OVERRIDES = {
    **FAULT_OVERRIDES,
    "log.flush.interval": "200ms",
    "log.dir.recovery-check-interval": "500ms",  # a full dir would be back within a second
    "log.dir.min-free": "1MB",
}
VICTIM = 3
SERVERS = (1, 2, 3)
BUCKETS = 3


def _values(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i:04d}-".encode() + b"v" * 8000 for i in range(n)]


def _cluster(fs: PowerCutFs, cluster_factory: Callable[..., LocalCluster]) -> LocalCluster:
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=OVERRIDES, start=False)
    name = server_name(VICTIM)
    fs.hold(cluster.get(name).data_dir, name)
    cluster.start(timeout=60)
    return cluster


def _metrics(cluster: LocalCluster, name: str) -> str:
    with urllib.request.urlopen(f"http://{cluster.get(name).http_address}/metrics", timeout=5) as r:
        return r.read().decode()


def _recovery_point(cluster: LocalCluster, name: str, tb: TableBucket) -> int:
    return OffsetCheckpoint(Path(cluster.get(name).data_dir) / RECOVERY_POINT_CHECKPOINT).read().get(tb, 0)


def _follower_bucket(zk: ZkView, cluster: LocalCluster, tbs: list[TableBucket]) -> TableBucket:
    """A bucket the victim follows (its log only ever grows by what the leader has: nothing is cut at a restart)."""
    return next(tb for tb in tbs if leader_isr(zk, cluster, tb).leader != VICTIM)


def _flushed(cluster: LocalCluster, name: str, tb: TableBucket, end: int) -> Callable[[], bool]:
    return lambda: _recovery_point(cluster, name, tb) >= end


def test_a_failed_fsync_takes_the_dir_offline_until_the_process_restarts(
    powercut_fs: PowerCutFs, cluster_factory: Callable[..., LocalCluster]
) -> None:
    cluster = _cluster(powercut_fs, cluster_factory)
    name = server_name(VICTIM)
    data_dir = Path(cluster.get(name).data_dir)
    table_id = create_table(cluster, "fsync", buckets=BUCKETS)
    tbs = [TableBucket(table_id, b) for b in range(BUCKETS)]
    sent: dict[TableBucket, list[bytes]] = {tb: [] for tb in tbs}

    def send(tag: str, n: int) -> None:
        for tb in tbs:
            values = _values(f"{tag}{tb.bucket}", n)
            assert produce(cluster, "fsync", values, bucket=tb.bucket)  # acks=all; retried through leader changes
            sent[tb] += values

    with ZkView(cluster.zookeeper_address) as zk:
        send("a", 3)
        led = [tb for tb in tbs if leader_isr(zk, cluster, tb).leader == VICTIM]
        assert led, "the victim leads nothing: the scenario would prove nothing"
        target = _follower_bucket(zk, cluster, tbs)
        cluster.wait_until(_flushed(cluster, name, target, len(sent[target])), 15, "the victim's first flush")
        powercut_fs.fail_fsync("ENOSPC", f"{name}/{bucket_dir_name(target)}/*.log")
        send("b", 6)  # the victim's next flush of that segment fails
        cluster.wait_until(lambda: powercut_fs.pending() == 0, 30, "the victim's failed fsync")

        def moved() -> bool:
            now = [leader_isr(zk, cluster, tb) for tb in tbs]
            return all(lai.leader != VICTIM and VICTIM not in lai.isr for lai in now)

        cluster.wait_until(
            moved, 30, lambda: f"leaderships away from the victim: {[leader_isr(zk, cluster, tb) for tb in tbs]}"
        )
        # the disk has room and takes writes (a full dir came back on that before): it stays offline
        for _ in range(12):  # 3 s: six recovery checks
            health = cluster.health(name)
            assert health["log_dirs"][str(data_dir)].startswith("offline:"), f"back after a failed fsync: {health}"
            assert health["status"] == "degraded" and sorted(health["offline_replicas"]) == sorted(map(str, tbs))
            assert not any(VICTIM in leader_isr(zk, cluster, tb).isr for tb in tbs)
            time.sleep(0.25)
        assert health["log_dirs"][str(data_dir)].startswith("offline: fsync failed: No space left on device (ENOSPC)")
        assert cluster.alive(name) and registered(zk, cluster, VICTIM) is not None
        text = Path(cluster.get(name).log_file).read_text()
        assert text.count(f"data directory {data_dir} failed (ENOSPC: fsync failed: No space left on device)") == 1
        assert "stays offline until the process restarts" in text and "back online" not in text
        assert metric_value(_metrics(cluster, name), "fluss_log_dir_online", dir=str(data_dir)) == 0
        send("c", 3)
        for tb in tbs:
            assert [v for _, v in consume(cluster, "fsync", tb.bucket, len(sent[tb]))] == sent[tb]
