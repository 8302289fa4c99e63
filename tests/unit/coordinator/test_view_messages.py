"""ClusterView's message cache (``bucket_pb`` / ``table_metadata_pb``): a message is reused while its inputs
are the same objects, and rebuilt as soon as the LeaderAndIsr, the replicas or the adding replicas change."""

from __future__ import annotations

from fluss_py.coordinator.tables import ClusterView, TableRegistration
from fluss_py.types import LeaderAndIsr, TableBucket, TablePath

INFO = TableRegistration(7, TablePath("db", "t"), 3, 3)


def view() -> ClusterView:
    v = ClusterView()
    v.add_table(INFO, {b: (1, 2, 3) for b in range(3)})
    for b in range(3):
        v.buckets[TableBucket(7, b)].leader_and_isr = LeaderAndIsr(1, 0, (1, 2, 3), 1, 0)
    return v


def test_unchanged_bucket_reuses_its_message() -> None:
    v = view()
    tb = TableBucket(7, 0)
    assert v.bucket_pb(tb) is v.bucket_pb(tb)
    assert v.table_metadata_pb(7) is v.table_metadata_pb(7)


def test_new_leader_rebuilds_bucket_and_table() -> None:
    v = view()
    tb = TableBucket(7, 1)
    table = v.table_metadata_pb(7)
    v.buckets[tb].leader_and_isr = LeaderAndIsr(2, 1, (2, 3), 1, 1)
    assert v.bucket_pb(tb).leader == 2 and list(v.bucket_pb(tb).isr) == [2, 3]
    fresh = v.table_metadata_pb(7)
    assert fresh is not table and [b.leader for b in fresh.buckets] == [1, 2, 1]


def test_table_metadata_sees_a_change_not_yet_asked_for_by_bucket() -> None:
    v = view()
    v.table_metadata_pb(7)
    v.buckets[TableBucket(7, 2)].leader_and_isr = LeaderAndIsr(3, 1, (3,), 1, 1)
    assert [b.leader for b in v.table_metadata_pb(7).buckets] == [1, 1, 3]


def test_replicas_and_adding_replicas_rebuild() -> None:
    v = view()
    tb = TableBucket(7, 0)
    v.table_metadata_pb(7)
    v.buckets[tb].replicas = (1, 2, 4)
    v.adding_replicas = {tb: (4,)}
    pb = v.table_metadata_pb(7).buckets[0]
    assert list(pb.replicas) == [1, 2, 4] and list(pb.adding_replicas) == [4]
    v.adding_replicas = {}
    assert list(v.table_metadata_pb(7).buckets[0].adding_replicas) == []


def test_re_added_table_starts_fresh() -> None:
    v = view()
    v.table_metadata_pb(7)
    v.remove_table(7)
    v.add_table(INFO, {b: (1, 2, 3) for b in range(3)})
    assert [b.leader for b in v.table_metadata_pb(7).buckets] == [-1, -1, -1]
