"""Disk faults on real processes and real filesystems (docs/storage.md §10, docs/operations.md "Disk faults").

- a full disk (a small tmpfs filled until the kernel says ENOSPC) under one of a server's two data dirs: that
  dir's replicas go offline there and their leadership moves at once (ZooKeeper's leader_isr), the other
  dir's replicas keep being served (and led), the periodic flush/checkpoint loop keeps running, /health and
  /metrics name the dir and "No space left on device", no acknowledged record is lost; the server restarts
  on the still-full disk, and once space is freed its replicas rejoin the ISR with the leader's bytes;
- an I/O error (ext4 shut down with EXT4_IOC_SHUTDOWN: every later I/O fails with EIO) under a server's only
  data dir: every leadership moves away, the server stays up and says why;
- a second process started on a data dir in use refuses to start.
"""

from __future__ import annotations

import re
import urllib.request
from pathlib import Path

import pytest

from fluss_py.client import ProducerOptions, SyncProducer
from fluss_py.log.checkpoint import RECOVERY_POINT_CHECKPOINT
from fluss_py.log.manager import bucket_dir_name
from fluss_py.testing import disks
from fluss_py.testing.faults import kill9
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    DATABASE,
    FAULT_OVERRIDES,
    bootstrap,
    consume,
    create_table,
    leader_isr,
    registered,
    server_name,
)

pytestmark = [
    pytest.mark.fault,
    pytest.mark.skipif(not disks.mounts_available(), reason="needs root to mount tmpfs / loop filesystems"),
]

OVERRIDES = {
    **FAULT_OVERRIDES,
    "log.flush.interval": "200ms",
    "log.dir.recovery-check-interval": "500ms",
    "log.dir.min-free": "1MB",
}
VICTIM = 1


def _metrics(cluster, name: str) -> str:
    with urllib.request.urlopen(f"http://{cluster.get(name).http_address}/metrics", timeout=5) as r:
        return r.read().decode()


def _send_all(cluster, table: str, buckets: int, n: int, tag: str) -> dict[int, list[bytes]]:
    """``n`` records per bucket with acks=all (the client retries through a leader change); all must succeed."""
    sent: dict[int, list[bytes]] = {b: [] for b in range(buckets)}
    producer = SyncProducer(bootstrap(cluster), ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0))
    try:
        for i in range(n):
            for b in range(buckets):
                value = f"{tag}-{b}-{i:05d}-".encode() + b"x" * 2000
                producer.send_and_wait(f"{DATABASE}.{table}", value, bucket=b)
                sent[b].append(value)
    finally:
        producer.close(timeout=5.0)
    return sent


def _assert_all_there(cluster, table: str, sent: dict[int, list[bytes]]) -> None:
    for b, values in sent.items():
        got = [v for _, v in consume(cluster, table, b, len(values), timeout=30)]
        assert got[: len(values)] == values, f"bucket {b}: acknowledged records missing or out of order"


def _lais(zk, cluster, tbs) -> dict[str, object]:
    return {str(tb): leader_isr(zk, cluster, tb) for tb in tbs}


def _dir_of(data_dirs: list[Path], tb: TableBucket) -> Path | None:
    found = [d for d in data_dirs if (d / bucket_dir_name(tb)).is_dir()]
    return found[0] if found else None


def test_full_disk_moves_its_leaderships_keeps_the_other_dir_and_recovers(cluster_factory, tmp_path):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=OVERRIDES, start=False)
    name = server_name(VICTIM)
    home = Path(cluster.get(name).data_dir)
    full_dir, other_dir = home.parent / "data-small", home.parent / "data-big"
    rec = cluster.get(name)
    rec.argv += ["-D", f"data.dirs={full_dir},{other_dir}"]
    with disks.tmpfs(full_dir, "24m"):
        cluster.start(timeout=60)
        buckets = 6
        table_id = create_table(cluster, "disk", buckets=buckets)
        tbs = [TableBucket(table_id, b) for b in range(buckets)]
        with ZkView(cluster.zookeeper_address) as zk:
            before = {tb: leader_isr(zk, cluster, tb) for tb in tbs}
            sent = _send_all(cluster, "disk", buckets, 1, "0")  # a log's directory comes with its first write
            cluster.wait_until(lambda: all(_dir_of([full_dir, other_dir], tb) for tb in tbs), 15, "bucket dirs")
            where = {tb: _dir_of([full_dir, other_dir], tb) for tb in tbs}
            led_full = [tb for tb in tbs if before[tb].leader == VICTIM and where[tb] == full_dir]
            led_other = [tb for tb in tbs if before[tb].leader == VICTIM and where[tb] == other_dir]
            # the scenario needs a leadership on each dir (placement: fewest logs first, buckets in order)
            assert led_full and led_other, f"placement {where}, leaders { {tb: before[tb].leader for tb in tbs} }"
            on_full = [tb for tb in tbs if where[tb] == full_dir]

            filled = disks.fill(full_dir)
            assert filled > 0
            for b, values in _send_all(cluster, "disk", buckets, 40, "a").items():
                sent[b] += values

            # the full dir's replicas left the ISR, their leadership moved; the other dir's stayed
            def moved() -> bool:
                now = {tb: leader_isr(zk, cluster, tb) for tb in tbs}
                return all(VICTIM not in now[tb].isr and now[tb].leader != VICTIM for tb in on_full) and all(
                    now[tb].leader == VICTIM for tb in led_other
                )

            cluster.wait_until(moved, 30, lambda: f"leader_isr now {_lais(zk, cluster, tbs)}")
            assert cluster.alive(name)
            health = cluster.health(name)
            assert health["state"] == "Running" and health["replica_manager"] == "ok", health
            assert health["status"] == "degraded" and len(health["problems"]) == 1, health
            assert health["log_dirs"][str(other_dir)] == "online"
            assert health["log_dirs"][str(full_dir)].startswith("offline: No space left on device (ENOSPC)"), health
            assert sorted(health["offline_replicas"]) == sorted(str(tb) for tb in on_full)
            text = _metrics(cluster, name)
            assert f'fluss_log_dir_online{{dir="{full_dir}"}} 0.0' in text
            assert f'fluss_log_dir_online{{dir="{other_dir}"}} 1.0' in text
            log_text = Path(rec.log_file).read_text()
            assert re.search(rf"data directory {full_dir} failed \(ENOSPC: No space left on device\)", log_text)
            assert "short write" not in log_text

            # the flush/checkpoint loop survived the ENOSPC: the other dir's recovery points keep moving
            cp = other_dir / RECOVERY_POINT_CHECKPOINT
            first = cp.read_text()
            more = _send_all(cluster, "disk", buckets, 5, "b")
            cluster.wait_until(lambda: cp.read_text() != first, 10, "a newer recovery-point checkpoint")
            for b in more:
                sent[b] += more[b]
            _assert_all_there(cluster, "disk", sent)

            # restart on the still-full disk: it comes up (registered, Running), then rejoins once space is freed
            kill9(cluster, name)
            cluster.start_process(name, wait=True, timeout=60)
            assert registered(zk, cluster, VICTIM) is not None
            health = cluster.health(name)
            assert health["state"] == "Running" and health["log_dirs"][str(other_dir)] == "online", health
            cluster.wait_until(  # the other dir's replicas serve again (back in their ISRs)
                lambda: all(VICTIM in leader_isr(zk, cluster, tb).isr for tb in tbs if tb not in on_full),
                30,
                lambda: f"{name} back in the ISRs of {other_dir}'s buckets; {_lais(zk, cluster, tbs)}",
            )
            # the full dir's buckets were not recreated, empty, in the other dir (that copy would shadow theirs)
            assert not [tb for tb in on_full if (other_dir / bucket_dir_name(tb)).exists()]
            assert all(VICTIM not in leader_isr(zk, cluster, tb).isr for tb in on_full)
            disks.free(full_dir)
            cluster.wait_until(
                lambda: all(VICTIM in leader_isr(zk, cluster, tb).isr for tb in tbs),
                60,
                lambda: f"{name} back in every ISR; leader_isr {_lais(zk, cluster, tbs)}",
            )
            health = cluster.health(name)
            assert health["log_dirs"][str(full_dir)] == "online" and health["status"] == "ok", health
            for tb in on_full:  # its copy holds every record, byte for byte as the leader's
                leader = server_name(leader_isr(zk, cluster, tb).leader)
                mine = sorted((full_dir / bucket_dir_name(tb)).glob("*.log"))
                theirs = sorted((Path(cluster.get(leader).data_dir) / bucket_dir_name(tb)).glob("*.log"))
                cluster.wait_until(
                    lambda m=mine, t=theirs: b"".join(p.read_bytes() for p in m) == b"".join(p.read_bytes() for p in t),
                    30,
                    f"{tb} on {name} identical to {leader}",
                )
        cluster.kill_all()


def test_io_error_takes_the_dir_offline_and_moves_every_leadership(cluster_factory, tmp_path):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=OVERRIDES, start=False)
    name = server_name(VICTIM)
    data_dir = Path(cluster.get(name).data_dir)
    with disks.ext4_image(data_dir, 64):
        cluster.start(timeout=60)
        table_id = create_table(cluster, "eio", buckets=3)
        tbs = [TableBucket(table_id, b) for b in range(3)]
        sent = _send_all(cluster, "eio", 3, 10, "a")
        with ZkView(cluster.zookeeper_address) as zk:
            led = [tb for tb in tbs if leader_isr(zk, cluster, tb).leader == VICTIM]
            assert led, "the victim leads nothing: the scenario would prove nothing"
            disks.shut_down(data_dir)
            more = _send_all(cluster, "eio", 3, 10, "b")  # its appends (and flushes) now fail with EIO
            cluster.wait_until(
                lambda: all(
                    leader_isr(zk, cluster, tb).leader != VICTIM and VICTIM not in leader_isr(zk, cluster, tb).isr
                    for tb in tbs
                ),
                30,
                lambda: f"leader_isr {_lais(zk, cluster, tbs)}",
            )
            assert cluster.alive(name) and registered(zk, cluster, VICTIM) is not None
        health = cluster.health(name)
        # the first EIO may come from a write or from a flush's fsync (docs/storage.md §10): either says EIO
        assert re.match(r"offline: (fsync failed: )?Input/output error \(EIO\)", health["log_dirs"][str(data_dir)]), (
            health
        )
        assert Path(cluster.get(name).log_file).read_text().count(f"data directory {data_dir} failed (EIO") == 1
        for b in more:
            sent[b] += more[b]
        _assert_all_there(cluster, "eio", sent)
        cluster.kill_all()


def test_a_second_process_cannot_open_a_data_dir_in_use(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=1, tablet_overrides=OVERRIDES)
    data_dir = Path(cluster.get(server_name(1)).data_dir)
    intruder = cluster.add_tablet_server(2, start=False)
    cluster.get(intruder).argv += ["-D", f"data.dir={data_dir}"]
    handle = cluster.start_process(intruder)
    assert handle.wait_exit(30), "a second server on the same data dir kept running"
    assert handle.returncode == 1
    text = Path(cluster.get(intruder).stdout_file).read_text() + Path(cluster.get(intruder).log_file).read_text()
    assert f"data directory {data_dir} is locked by another process (pid {cluster.pid(server_name(1))})" in text
    with ZkView(cluster.zookeeper_address) as zk:
        assert registered(zk, cluster, 2) is None
    assert cluster.health(server_name(1))["state"] == "Running"
