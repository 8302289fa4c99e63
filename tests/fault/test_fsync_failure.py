"""A failed fsync, and bytes below the recovery point that never reached the disk (issue 36 finding 6,
"fsyncgate"; docs/storage.md §6, §9, §10), on real processes.

One tablet server (the victim) keeps its data dir on the power-cut filesystem (``testing/powercut_fs.py``:
a page cache in memory, a disk that holds only what was fsynced, fsyncs that fail or lie as armed); the
other two and ZooKeeper stay on the real disk. Records are 8 KB, so every batch covers a whole 4 KiB page:
a page a faulty fsync left unwritten holds only bytes of the batches it was to write.

- a segment fsync fails with ENOSPC: the victim's data dir goes offline and stays offline while the process
  lives (it used to come back after the recovery check, reloaded from the same files, whose unwritten pages
  were still readable and passed the CRC check), its leaderships move, every acknowledged record is read
  back; after a restart it rejoins, and a power cut then finds nothing below its recovery point damaged:
  the restart wrote the bytes above the recovery point again, so its next flush wrote the pages the failed
  fsync had left clean;
- a segment fsync of a follower reports success and writes nothing (a lying disk): its recovery point moves
  over those batches, and after a power cut they are zeros inside the segment holding the recovery point.
  The unclean start finds them (it used to check only whole segments below the recovery point), the replica
  reports itself corrupt, repairs from the leader and ends with the leader's bytes, back in the ISR.

Reproduce: ``.venv/bin/python -m pytest tests/fault/test_fsync_failure.py -s``.
"""

from __future__ import annotations

import re
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest

from fluss_py.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpoint
from fluss_py.log.manager import bucket_dir_name
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.faults import kill9
from fluss_py.testing.powercut import PowerCutFs
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    FAULT_OVERRIDES,
    ReplicaFiles,
    consume,
    create_table,
    leader_isr,
    metric_value,
    produce,
    registered,
    server_name,
    wait_full_isr,
    wait_replicas_identical,
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


def _files(cluster: LocalCluster, tb: TableBucket) -> dict[str, ReplicaFiles]:
    return {server_name(s): ReplicaFiles(cluster, server_name(s), tb) for s in SERVERS}


def _follower_bucket(zk: ZkView, cluster: LocalCluster, tbs: list[TableBucket]) -> TableBucket:
    """A bucket the victim follows (its log only ever grows by what the leader has: nothing is cut at a restart)."""
    return next(tb for tb in tbs if leader_isr(zk, cluster, tb).leader != VICTIM)


def _flushed(cluster: LocalCluster, name: str, tb: TableBucket, end: int) -> Callable[[], bool]:
    return lambda: _recovery_point(cluster, name, tb) >= end


def _restart(cluster: LocalCluster, name: str, fs: PowerCutFs | None = None) -> None:
    """kill -9 ``name`` (and cut the power of its machine when ``fs`` is given), then start it again."""
    kill9(cluster, name)
    if fs is not None:
        files, dropped = fs.power_cut()
        print(f"power cut: {dropped} unsynced bytes dropped in {files} files")
    cluster.start_process(name, wait=True, timeout=60)


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

        # "restart the server after fixing the disk": it loads the same files (the failed fsync's pages are
        # still readable), rejoins, and its flushes make them durable (the bytes above its recovery point
        # were written again at the start)
        _restart(cluster, name)
        for tb in tbs:
            wait_full_isr(zk, cluster, tb, SERVERS, 60)
            wait_replicas_identical(cluster, _files(cluster, tb), len(sent[tb]), 30)
            cluster.wait_until(_flushed(cluster, name, tb, len(sent[tb])), 15, f"{name} flushed {tb}")
        _restart(cluster, name, powercut_fs)
        for tb in tbs:
            wait_full_isr(zk, cluster, tb, SERVERS, 60)
            wait_replicas_identical(cluster, _files(cluster, tb), len(sent[tb]), 30)
    text = Path(cluster.get(name).log_file).read_text()
    assert "corrupt batch" not in text, "a byte below the recovery point never reached the disk"
    assert metric_value(_metrics(cluster, name), "fluss_log_corrupt_segments_total") == 0
    for tb in tbs:
        assert [v for _, v in consume(cluster, "fsync", tb.bucket, len(sent[tb]))] == sent[tb]


def test_bytes_the_disk_lost_below_the_recovery_point_are_found_at_an_unclean_start_and_repaired(
    powercut_fs: PowerCutFs, cluster_factory: Callable[..., LocalCluster]
) -> None:
    cluster = _cluster(powercut_fs, cluster_factory)
    name = server_name(VICTIM)
    table_id = create_table(cluster, "lost", buckets=BUCKETS)
    with ZkView(cluster.zookeeper_address) as zk:
        tb = _follower_bucket(zk, cluster, [TableBucket(table_id, b) for b in range(BUCKETS)])
        leader = server_name(leader_isr(zk, cluster, tb).leader)
        files = _files(cluster, tb)
        sent: list[bytes] = []
        for tag, n in (("a", 5), ("b", 4), ("c", 5)):
            if tag == "b":  # its next fsync of the segment reports success and writes nothing
                powercut_fs.lose_fsync(f"{name}/{bucket_dir_name(tb)}/*.log")
            values = _values(tag, n)
            assert produce(cluster, "lost", values, bucket=tb.bucket) == list(range(len(sent), len(sent) + n))
            sent += values
            cluster.wait_until(_flushed(cluster, name, tb, len(sent)), 15, f"{name}'s recovery point at {len(sent)}")
        assert powercut_fs.pending() == 0
        lost_from = 5  # the first batch of "b": below the recovery point, never written

        kill9(cluster, name)
        assert _recovery_point(cluster, name, tb) == len(sent)
        powercut_fs.power_cut()
        mine = files[name].batches()
        assert len(mine) == lost_from, f"the damage is not on disk: {len(mine)} readable batches"
        cluster.start_process(name, wait=True, timeout=60)

        wait_replicas_identical(cluster, files, len(sent), 60)
        wait_full_isr(zk, cluster, tb, SERVERS, 60)
        assert server_name(leader_isr(zk, cluster, tb).leader) == leader
    text = Path(cluster.get(name).log_file).read_text()
    segment = re.escape(str(files[name].dir / f"{0:020d}.log"))
    found = re.findall(rf"{segment}: corrupt batch at offset (\d+) \(position \d+\).*below the recovery point", text)
    assert found == [str(lost_from)], text[-3000:]
    assert re.search(rf"corrupt log truncated at offset {lost_from} .*fetching it again from leader", text)
    metrics = _metrics(cluster, name)
    assert metric_value(metrics, "fluss_log_corrupt_segments_total") == 1
    assert metric_value(metrics, "fluss_log_corruption_repairs_total") == 1
    assert [v for _, v in consume(cluster, "lost", tb.bucket, len(sent))] == sent
