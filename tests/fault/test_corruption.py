"""Silent media corruption on real processes (docs/storage.md §9): a byte flipped in a closed segment.

- in a follower's segment while it is down (then it restarts after a kill -9): the unclean-start check finds
  it although it lies below the recovery point, the follower truncates there and fetches the rest again, and
  ends with the leader's bytes, back in the ISR;
- in the leader's segment while it runs: the scrubber finds it, the leader gives up leadership to a healthy
  ISR member (ZooKeeper's leader_isr), repairs itself as a follower from the new leader and rejoins the ISR.

Each finding is logged once and counted in /metrics. The corruption is first shown to be on disk (the replica
differs from its peers), so a scenario that failed to set it up fails instead of passing vacuously.
"""

from __future__ import annotations

import os
import re
import urllib.request
from pathlib import Path

import pytest

from fluss_py.log.checkpoint import RECOVERY_POINT_CHECKPOINT, OffsetCheckpoint
from fluss_py.testing.faults import kill9
from fluss_py.testing.zkview import ZkView
from fluss_py.types import TableBucket
from tests.fault.replication_support import (
    FAULT_OVERRIDES,
    ReplicaFiles,
    consume,
    create_table,
    leader_isr,
    produce,
    server_id,
    server_name,
    wait_for_leader_change,
    wait_full_isr,
    wait_replicas_identical,
)

pytestmark = pytest.mark.fault

OVERRIDES = {**FAULT_OVERRIDES, "log.segment.file-size": "64KB", "log.flush.interval": "200ms"}
VALUES = [b"%05d-" % i + b"v" * 1000 for i in range(300)]  # one batch each: about 5 segments


def _setup(cluster_factory, table: str, overrides: dict[str, str]):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=overrides)
    table_id = create_table(cluster, table)
    tb = TableBucket(table_id, 0)
    offsets = produce(cluster, table, VALUES)
    assert offsets == list(range(len(VALUES)))
    files = {server_name(s): ReplicaFiles(cluster, server_name(s), tb) for s in (1, 2, 3)}
    wait_replicas_identical(cluster, files, len(VALUES), 30)
    return cluster, tb, files


def _flip_byte(segment: Path) -> int:
    """XOR one byte in the middle of ``segment`` (inside some batch's records); returns its position."""
    position = segment.stat().st_size // 2
    fd = os.open(segment, os.O_RDWR)
    try:
        byte = os.pread(fd, 1, position)
        os.pwrite(fd, bytes([byte[0] ^ 0xFF]), position)
    finally:
        os.close(fd)
    return position


def _metric(cluster, name: str, metric: str) -> float:
    with urllib.request.urlopen(f"http://{cluster.get(name).http_address}/metrics", timeout=5) as r:
        m = re.search(rf"^{metric} (\S+)$", r.read().decode(), re.M)
    assert m, f"{metric} missing in {name}'s /metrics"
    return float(m.group(1))


def _segments(files: ReplicaFiles) -> list[Path]:
    return sorted(files.dir.glob("*.log"))


def test_follower_corrupt_below_its_recovery_point_repairs_from_the_leader_after_an_unclean_start(cluster_factory):
    cluster, tb, files = _setup(cluster_factory, "rot", {**OVERRIDES, "log.scrub.rate": "0"})
    with ZkView(cluster.zookeeper_address) as zk:
        leader = leader_isr(zk, cluster, tb).leader
        follower = server_name(next(s for s in (1, 2, 3) if s != leader))
        segment = _segments(files[follower])[1]  # a closed segment
        data_dir = Path(cluster.get(follower).data_dir)
        seg_end = int(sorted(p.name for p in files[follower].dir.glob("*.log"))[2][:20])
        cluster.wait_until(  # the segment is below the recovery point: a start would trust it without a check
            lambda: OffsetCheckpoint(data_dir / RECOVERY_POINT_CHECKPOINT).read().get(tb, 0) >= seg_end,
            10,
            "the follower's recovery point past the segment",
        )
        kill9(cluster, follower)
        _flip_byte(segment)
        assert files[follower].batches() != files[server_name(leader)].batches()  # the damage is on disk
        cluster.start_process(follower, wait=True, timeout=60)

        wait_replicas_identical(cluster, files, len(VALUES), 30)
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
        assert leader_isr(zk, cluster, tb).leader == leader
    text = Path(cluster.get(follower).log_file).read_text()
    assert len(re.findall(rf"{re.escape(str(segment))}: corrupt batch at offset \d+", text)) == 1, text[-3000:]
    assert re.search(r"corrupt log truncated at offset \d+ .*fetching it again from leader", text)
    assert _metric(cluster, follower, "fluss_log_corrupt_segments_total") == 1
    assert _metric(cluster, follower, "fluss_log_corruption_repairs_total") == 1
    assert _metric(cluster, follower, "fluss_log_recovery_verified_bytes") > 0
    assert [v for _, v in consume(cluster, "rot", 0, len(VALUES))] == VALUES


def test_leader_whose_scrubber_finds_corruption_hands_leadership_over_and_repairs(cluster_factory):
    overrides = {**OVERRIDES, "log.scrub.rate": "50MB", "log.scrub.interval": "300ms"}
    cluster, tb, files = _setup(cluster_factory, "rot", overrides)
    with ZkView(cluster.zookeeper_address) as zk:
        before = leader_isr(zk, cluster, tb)
        old = server_name(before.leader)
        segment = _segments(files[old])[1]
        _flip_byte(segment)  # under the running leader: the page cache holds the bad byte from now on
        assert files[old].batches() != files[server_name((before.leader % 3) + 1)].batches()

        after = wait_for_leader_change(zk, cluster, tb, before, 30)
        assert after.leader != before.leader
        wait_replicas_identical(cluster, files, len(VALUES), 30)  # the old leader repaired itself
        wait_full_isr(zk, cluster, tb, (1, 2, 3), 30)
    text = Path(cluster.get(old).log_file).read_text()
    assert len(re.findall(rf"{re.escape(str(segment))}: corrupt batch at offset \d+", text)) == 1, text[-3000:]
    assert re.search(rf"corrupt log truncated at offset \d+ .*fetching it again from leader {after.leader}", text)
    assert _metric(cluster, old, "fluss_log_corrupt_segments_total") == 1
    assert _metric(cluster, old, "fluss_log_corruption_repairs_total") == 1
    assert _metric(cluster, old, "fluss_log_scrubbed_bytes_total") > 0
    new_text = Path(cluster.get(server_name(after.leader)).log_file).read_text()
    assert "corrupt batch" not in new_text and "corrupt log" not in new_text
    assert server_id(old) == before.leader
    assert [v for _, v in consume(cluster, "rot", 0, len(VALUES))] == VALUES
