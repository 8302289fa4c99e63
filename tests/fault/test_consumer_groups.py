"""A consumer group resumes from its committed offsets across kill -9 of its buckets' leader and across a
coordinator failover, without skipping a record (docs/consumer-groups.md).

Real ZooKeeper (2 s sessions), 3 coordinators, 3 tablet servers. Consumers of group ``g`` come and go one
after another; each reads a slice, commits after "processing" and closes (a clean hand-over, so nothing
may be read twice either). Between them: kill -9 of the tablet server leading bucket 0 (with writes going
on), then kill -9 of the coordinator leader (the next commit must reach the new leader, which must answer
the offsets the old one acknowledged). Checked: every consumer starts each bucket exactly at the offset
the previous one committed, and the slices together are every produced record exactly once.
"""

from __future__ import annotations

import time
from collections import defaultdict
from itertools import pairwise

import pytest

from fluss_py.client import ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.testing.cluster import LocalCluster
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.types import TableBucket

pytestmark = pytest.mark.fault

TABLE = "fluss.groups_fault"
BUCKETS = 2
GROUP = "g"


def _produce(producer: SyncProducer, start: int, count: int) -> dict[bytes, tuple[int, int]]:
    futures = [(f"v{i:05d}".encode(), producer.send(TABLE, f"v{i:05d}".encode(), key=f"k{i}".encode()))
               for i in range(start, start + count)]  # fmt: skip
    producer.flush()
    out = {}
    for value, fut in futures:
        md = fut.result(timeout=60)
        out[value] = (md.bucket.bucket, md.offset)
    return out


def _read_slice(bootstrap: str, count: int, timeout: float = 60.0) -> tuple[dict[int, int], list, dict[int, int]]:
    """One group member's life: (start offset per bucket, records read, committed offsets)."""
    with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2, request_timeout=20.0), group=GROUP) as c:
        c.assign(TABLE)
        starts = {tb.bucket: c.position(tb) for tb in sorted(c.assignment())}
        records: list = []
        deadline = time.monotonic() + timeout
        while len(records) < count:
            assert time.monotonic() < deadline, f"read {len(records)} of {count} records"
            records += c.poll(0.5, max_records=count - len(records))
        committed = c.commit()  # after "processing"
        positions = {tb.bucket: c.position(tb) for tb in c.assignment()}
    for tb, offset in committed.items():
        assert positions[tb.bucket] == offset
    return starts, records, positions


def _leader(admin: SyncAdmin, bucket: int) -> int:
    _, buckets = admin.get_table_placement(TABLE)
    return next(b.leader for b in buckets if b.table_bucket.bucket == bucket)


def test_group_resumes_after_leader_kill_and_coordinator_failover(cluster_factory) -> None:
    cluster: LocalCluster = cluster_factory(coordinators=3, tablet_servers=3)
    cluster.wait_for_leader(30)
    bootstrap = ",".join(cluster.get(n).rpc_address for n in cluster.names(TABLET_SERVER))
    with (
        SyncAdmin(bootstrap, request_timeout=20.0) as admin,
        SyncProducer(bootstrap, ProducerOptions(acks=-1, request_timeout=10.0, delivery_timeout=60.0)) as producer,
    ):
        table_id = admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)
        cluster.wait_until(lambda: all(b.leader >= 0 for b in admin.get_table_placement(TABLE)[1]), 20, "leaders")
        produced = _produce(producer, 0, 300)

        slices = [_read_slice(bootstrap, 120)]

        # kill -9 the leader of bucket 0 while writes go on; the next member resumes from the commits
        victim = _leader(admin, 0)
        cluster.kill(f"{TABLET_SERVER}-{victim}")
        produced |= _produce(producer, 300, 200)
        cluster.wait_until(lambda: _leader(admin, 0) not in (victim, -1), 30, "a new leader of bucket 0")
        slices.append(_read_slice(bootstrap, 150))

        # kill -9 the coordinator leader: commits and fetches go to the new one, nothing is lost
        old = cluster.coordinator_leader()
        assert old is not None
        cluster.kill(old)
        new = cluster.wait_for_leader(20, exclude=[old])
        assert new != old
        slices.append(_read_slice(bootstrap, len(produced) - 270))

        cluster.start_process(f"{TABLET_SERVER}-{victim}", wait=True)

    # each member started exactly where the previous one committed, and nothing was read twice or skipped
    assert slices[0][0] == {b: 0 for b in range(BUCKETS)}
    for before, after in pairwise(slices):
        assert after[0] == before[2]
    read = [(r.bucket, r.offset, r.value) for s in slices for r in s[1]]
    assert len(read) == len(set(read)) == len(produced)
    assert {v: (b.bucket, o) for b, o, v in read} == produced
    per_bucket = defaultdict(list)
    for b, o, _ in read:
        per_bucket[b].append(o)
    assert all(offsets == sorted(offsets) for offsets in per_bucket.values())
    assert set(per_bucket) == {TableBucket(table_id, b) for b in range(BUCKETS)}
