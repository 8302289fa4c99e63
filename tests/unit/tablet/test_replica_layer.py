"""ManagerReplicaLayer and MetadataCache: protobuf in, ReplicaManager calls, protobuf out (no sockets: the
ReplicaManagers run over real logs in a temp dir with in-memory endpoints, tests/unit/replica/harness.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fluss_py.errors import ErrorCode
from fluss_py.log.manager import LogManager, bucket_dir_name
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2, tablet_pb2
from fluss_py.tablet.metadata_cache import MetadataCache
from fluss_py.tablet.replica_layer import ManagerReplicaLayer
from fluss_py.tablet.strays import stray_buckets
from fluss_py.types import CoordinatorLeaderInfo, LeaderAndIsr, TableBucket, TablePath
from tests.unit.replica.fakes import FakeClock, batch, values_of
from tests.unit.replica.harness import ReplicaCluster, node

TB = TableBucket(5, 0)
OTHER = TableBucket(5, 1)


@pytest.fixture
async def cluster(tmp_path: Path):
    c = ReplicaCluster(2, FakeClock(), tmp_path)
    yield c
    await c.close()


def _layer(cluster: ReplicaCluster, server: int = 1) -> ManagerReplicaLayer:
    return ManagerReplicaLayer(cluster.managers[server], MetadataCache(), cluster.config)


def _table_info(table_id: int, props: dict[str, str] | None = None) -> common_pb2.TableInfo:
    return common_pb2.TableInfo(
        table_id=table_id,
        path=common_pb2.TablePath(database="fluss", table=f"t{table_id}"),
        descriptor=common_pb2.TableDescriptor(num_buckets=2, replication_factor=1, properties=props or {}),
    )


def _notify(
    epoch: int, buckets: list[tuple[TableBucket, LeaderAndIsr, tuple[int, ...]]], props: dict | None = None
) -> tablet_pb2.NotifyLeaderAndIsrRequest:
    return tablet_pb2.NotifyLeaderAndIsrRequest(
        coordinator_epoch=epoch,
        coordinator_id=1,
        buckets=[convert.leader_and_isr_to_pb(tb, lai, replicas) for tb, lai, replicas in buckets],
        tables=[_table_info(5, props)],
        servers=[convert.server_node_to_pb(node(i)) for i in (1, 2)],
    )


def _produce(tb: TableBucket, records: bytes, acks: int = 1) -> tablet_pb2.ProduceLogRequest:
    return tablet_pb2.ProduceLogRequest(
        acks=acks,
        timeout_ms=1000,
        buckets=[tablet_pb2.ProduceBucket(table_bucket=convert.table_bucket_to_pb(tb), records=records)],
    )


def _fetch(tb: TableBucket, offset: int) -> tablet_pb2.FetchLogRequest:
    return tablet_pb2.FetchLogRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        buckets=[
            tablet_pb2.FetchBucket(
                table_bucket=convert.table_bucket_to_pb(tb),
                fetch_offset=offset,
                max_bytes=1 << 20,
                current_leader_epoch=-1,
                last_fetched_epoch=-1,
            )
        ],
    )


async def test_notify_produce_fetch_and_offsets_round_trip(cluster: ReplicaCluster) -> None:
    layer = _layer(cluster)
    lai = LeaderAndIsr(1, 0, (1,), 1, 0)
    answer = await layer.notify_leader_and_isr(_notify(1, [(TB, lai, (1,))]))
    assert answer.error.code == ErrorCode.NONE
    assert list(answer.buckets) == []  # only failed buckets are named

    produced = await layer.produce_log(_produce(TB, batch(b"a", b"b")))
    assert produced.error.code == ErrorCode.NONE
    (r,) = produced.buckets
    assert (r.error.code, r.base_offset, r.last_offset) == (ErrorCode.NONE, 0, 1)

    fetched = await layer.fetch_log(_fetch(TB, 0))
    (f,) = fetched.buckets
    assert f.error.code == ErrorCode.NONE and (f.high_watermark, f.log_end_offset) == (2, 2)
    assert values_of(f.records) == [(0, b"a"), (1, b"b")]
    assert not f.HasField("diverging_epoch")

    offsets = await layer.list_offsets(
        tablet_pb2.ListOffsetsRequest(
            buckets=[tablet_pb2.ListOffsetsBucket(table_bucket=convert.table_bucket_to_pb(TB), spec=1)]
        )
    )
    assert offsets.buckets[0].offset == 2
    epochs = await layer.offsets_for_leader_epoch(
        tablet_pb2.OffsetsForLeaderEpochRequest(
            replica_id=2,
            buckets=[
                tablet_pb2.OffsetsForLeaderEpochBucket(
                    table_bucket=convert.table_bucket_to_pb(TB), leader_epoch=0, current_leader_epoch=0
                )
            ],
        )
    )
    assert (epochs.buckets[0].leader_epoch, epochs.buckets[0].end_offset) == (0, 2)

    out_of_range = await layer.fetch_log(_fetch(TB, 5))
    assert out_of_range.buckets[0].error.code == ErrorCode.OFFSET_OUT_OF_RANGE
    bad_spec = await layer.list_offsets(
        tablet_pb2.ListOffsetsRequest(
            buckets=[tablet_pb2.ListOffsetsBucket(table_bucket=convert.table_bucket_to_pb(TB), spec=9)]
        )
    )
    assert bad_spec.error.code == ErrorCode.INVALID_REQUEST


async def test_per_bucket_errors_carry_the_leader_hint_and_stale_epochs_fail_the_request(
    cluster: ReplicaCluster,
) -> None:
    layer = _layer(cluster)
    follower = LeaderAndIsr(2, 0, (2, 1), 1, 0)
    await layer.notify_leader_and_isr(_notify(3, [(OTHER, follower, (2, 1))]))
    (r,) = (await layer.produce_log(_produce(OTHER, batch(b"x")))).buckets
    assert r.error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert (r.error.leader_id, r.error.leader_address) == (2, node(2).address)

    (u,) = (await layer.produce_log(_produce(TableBucket(99, 0), batch(b"x")))).buckets
    assert u.error.code == ErrorCode.UNKNOWN_TABLE_OR_BUCKET

    stale = await layer.notify_leader_and_isr(_notify(2, [(OTHER, follower, (2, 1))]))
    assert stale.error.code == ErrorCode.INVALID_COORDINATOR_EPOCH

    older = await layer.notify_leader_and_isr(
        _notify(3, [(OTHER, LeaderAndIsr(2, -1, (2, 1), 3, 0), (2, 1)), (TB, LeaderAndIsr(1, 0, (1,), 3, 0), (1,))])
    )
    # the answer names the failed bucket only (TB became leader: not named)
    assert [(b.table_bucket.table_id, b.table_bucket.bucket, b.error.code) for b in older.buckets] == [
        (OTHER.table_id, OTHER.bucket, ErrorCode.FENCED_LEADER_EPOCH)
    ]
    assert cluster.managers[1].replica(TB).is_leader

    leaderless = await layer.notify_leader_and_isr(_notify(3, [(OTHER, LeaderAndIsr(-1, 1, (1,), 3, 1), (2, 1))]))
    assert leaderless.error.code == ErrorCode.NONE and list(leaderless.buckets) == []
    assert cluster.managers[1].fetchers.fetcher_of(OTHER) is None  # nobody to follow


async def test_table_properties_reach_logs_loaded_at_start_and_min_isr(cluster: ReplicaCluster) -> None:
    lai = LeaderAndIsr(1, 0, (1,), 1, 0)
    await _layer(cluster).notify_leader_and_isr(_notify(1, [(TB, lai, (1,))]))
    await _layer(cluster).produce_log(_produce(TB, batch(b"a")))  # on disk from its first write
    await cluster.kill(1)
    cluster.start_server(1)  # the log is loaded from disk with server defaults
    layer = _layer(cluster)
    tablet = cluster.log_managers[1].get(TB)
    assert tablet is not None and tablet.config.segment_bytes == 1024**3
    props = {"log.segment.file-size": "1MB", "min.insync.replicas": "1"}
    await layer.notify_leader_and_isr(_notify(1, [(TB, LeaderAndIsr(1, 1, (1,), 1, 1), (1,))], props))
    assert tablet.config.segment_bytes == 1024**2
    assert cluster.managers[1].replica(TB).min_insync_replicas == 1


async def test_stop_replica_with_delete_removes_the_files(cluster: ReplicaCluster) -> None:
    layer = _layer(cluster)
    await layer.notify_leader_and_isr(_notify(1, [(TB, LeaderAndIsr(1, 0, (1,), 1, 0), (1,))]))
    await layer.produce_log(_produce(TB, batch(b"a")))
    directory = cluster.log_managers[1].data_dir / bucket_dir_name(TB)
    assert directory.exists()
    answer = await layer.stop_replica(
        tablet_pb2.StopReplicaRequest(
            coordinator_epoch=1,
            coordinator_id=1,
            buckets=[tablet_pb2.StopReplicaBucket(table_bucket=convert.table_bucket_to_pb(TB), delete=True)],
        )
    )
    assert answer.error.code == ErrorCode.NONE and list(answer.buckets) == []
    assert not directory.exists()
    (r,) = (await layer.produce_log(_produce(TB, batch(b"b")))).buckets
    assert r.error.code == ErrorCode.UNKNOWN_TABLE_OR_BUCKET


def _view(epoch: int, table_ids: list[int]) -> common_pb2.ClusterMetadata:
    return common_pb2.ClusterMetadata(
        tablet_servers=[convert.server_node_to_pb(node(i)) for i in (1, 2)],
        coordinator=common_pb2.ServerNode(id=7, host="127.0.0.1", port=9123),
        tables=[common_pb2.TableMetadata(info=_table_info(t)) for t in table_ids],
        coordinator_epoch=epoch,
    )


async def test_update_metadata_replaces_the_view_that_get_metadata_serves(cluster: ReplicaCluster) -> None:
    layer = _layer(cluster)
    before = await layer.get_metadata(common_pb2.MetadataRequest())
    assert before.error.code == ErrorCode.COORDINATOR_NOT_AVAILABLE

    await layer.update_metadata(tablet_pb2.UpdateMetadataRequest(coordinator_epoch=2, metadata=_view(2, [5, 6])))
    md = (await layer.get_metadata(common_pb2.MetadataRequest())).metadata
    assert sorted(t.info.table_id for t in md.tables) == [5, 6] and md.coordinator.id == 7
    only = await layer.get_metadata(
        common_pb2.MetadataRequest(tables=[convert.table_path_to_pb(TablePath("fluss", "t6"))])
    )
    assert [t.info.table_id for t in only.metadata.tables] == [6]

    await layer.update_metadata(tablet_pb2.UpdateMetadataRequest(coordinator_epoch=2, metadata=_view(2, [6])))
    md = (await layer.get_metadata(common_pb2.MetadataRequest())).metadata
    assert [t.info.table_id for t in md.tables] == [6]  # a table missing from a full view is gone
    assert layer.metadata.table_properties(5) is None

    # a newer coordinator leader seen in ZooKeeper is named before its first UpdateMetadata arrives
    layer.metadata.observe_coordinator(CoordinatorLeaderInfo(8, 3, "127.0.0.1", 9200))
    md = (await layer.get_metadata(common_pb2.MetadataRequest())).metadata
    assert (md.coordinator.id, md.coordinator.port, md.coordinator_epoch) == (8, 9200, 3)


def test_fetch_messages_built_in_place_are_the_same_bytes() -> None:
    """fetch_response / fetch_request_pb build with ``buckets.add`` for speed; the wire bytes must equal the
    plain construction (a list of messages), errors and diverging epochs included."""
    from fluss_py.errors import NotLeaderOrFollowerError
    from fluss_py.replica.fetcher.leader_endpoint import fetch_request_pb
    from fluss_py.replica.messages import EpochEndOffset, FetchBucketRequest, FetchBucketResult, FetchRequest
    from fluss_py.tablet.replica_layer import OK_FIELDS, fetch_response

    assert common_pb2.ErrorInfo(**OK_FIELDS) == convert.ok()
    results = {
        TB: FetchBucketResult(TB, None, 5, 0, 7, b"abc"),
        OTHER: FetchBucketResult(OTHER, NotLeaderOrFollowerError("moved"), 1, 0, 2),
        TableBucket(5, 2): FetchBucketResult(TableBucket(5, 2), None, 3, 0, 4, b"", EpochEndOffset(2, 3)),
    }
    plain = []
    for tb, r in results.items():
        pb = tablet_pb2.FetchBucketResult(
            table_bucket=convert.table_bucket_to_pb(tb),
            error=convert.ok() if r.error is None else convert.error_info(r.error),
            high_watermark=r.high_watermark,
            log_start_offset=r.log_start_offset,
            log_end_offset=r.log_end_offset,
            records=r.records,
        )
        if r.diverging_epoch is not None:
            pb.diverging_epoch.epoch = r.diverging_epoch.epoch
            pb.diverging_epoch.end_offset = r.diverging_epoch.end_offset
        plain.append(pb)
    expected = tablet_pb2.FetchLogResponse(error=convert.ok(), buckets=plain)
    assert fetch_response(results).SerializeToString() == expected.SerializeToString()

    request = FetchRequest(
        2, 0.5, 1, 1 << 20, (FetchBucketRequest(TB, 9, 4096, 3, 2), FetchBucketRequest(OTHER, 0, 1, 0))
    )
    plain_request = tablet_pb2.FetchLogRequest(
        replica_id=2,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        buckets=[
            tablet_pb2.FetchBucket(
                table_bucket=convert.table_bucket_to_pb(b.table_bucket),
                fetch_offset=b.fetch_offset,
                max_bytes=b.max_bytes,
                current_leader_epoch=b.current_leader_epoch,
                last_fetched_epoch=b.last_fetched_epoch,
            )
            for b in request.buckets
        ],
    )
    assert fetch_request_pb(request).SerializeToString() == plain_request.SerializeToString()


def test_stray_rule_names_unhosted_logs_no_longer_assigned_here() -> None:
    on_disk = [TableBucket(3, 0), TableBucket(5, 0), TableBucket(5, 1), TableBucket(6, 0), TableBucket(6, 1)]
    on_disk.append(TableBucket(9, 0))
    hosted = {TableBucket(5, 1)}.__contains__
    me = 1
    snapshot = {4: {0: (1, 2)}, 6: {0: (1, 2, 3), 1: (2, 3, 4)}}
    # 3 and 5 are missing below the newest id 6: dropped (5-1 is hosted, so the coordinator decides); 6-1 moved
    # away from server 1; 9 is newer than this snapshot (created after it was taken): kept
    assert stray_buckets(on_disk, hosted, snapshot, me) == [TableBucket(3, 0), TableBucket(5, 0), TableBucket(6, 1)]
    assert stray_buckets(on_disk, hosted, {}, me) == []  # no tables known: no conclusion
    everything = {t: {0: (1,), 1: (1,)} for t in (3, 5, 6, 9)}
    assert stray_buckets(on_disk, hosted, everything, me) == []
    assert stray_buckets([TableBucket(6, 7)], hosted, snapshot, me) == []  # a bucket not listed: no conclusion


async def test_update_metadata_sets_aside_the_logs_of_tables_dropped_while_away(cluster: ReplicaCluster) -> None:
    layer = _layer(cluster)
    logs = cluster.managers[1].log_manager
    hosted, dropped, newer = TableBucket(5, 0), TableBucket(4, 0), TableBucket(9, 0)
    moved_away, still_mine = TableBucket(6, 1), TableBucket(6, 0)
    await layer.notify_leader_and_isr(_notify(1, [(hosted, LeaderAndIsr(1, 0, (1,), 1, 0), (1,))]))
    for tb in (dropped, newer, moved_away, still_mine):  # logs left on disk from before a restart, not hosted
        logs.get_or_create(tb).append_as_leader(batch(b"x"), 0)
    dropped_dir = logs.data_dir / bucket_dir_name(dropped)
    assert dropped_dir.exists()

    view = _view(1, [5, 6])
    lai = LeaderAndIsr(2, 0, (2,), 1, 0)
    view.tables[1].buckets.extend(
        [convert.leader_and_isr_to_pb(still_mine, lai, (2, 1)), convert.leader_and_isr_to_pb(moved_away, lai, (2,))]
    )
    await layer.update_metadata(tablet_pb2.UpdateMetadataRequest(coordinator_epoch=1, metadata=view))
    assert logs.get(moved_away) is None and (logs.data_dir / (bucket_dir_name(moved_away) + "-stray")).is_dir()
    assert logs.get(still_mine) is not None
    assert logs.get(dropped) is None and not dropped_dir.exists()
    aside = dropped_dir.with_name(dropped_dir.name + "-stray")
    assert values_of(b"".join(p.read_bytes() for p in sorted(aside.glob("*.log")))) == [(0, b"x")]  # kept aside
    assert logs.get(hosted) is not None and logs.get(newer) is not None
    reloaded = LogManager(logs.data_dir, cluster.config)
    reloaded.load_logs()
    assert dropped not in reloaded.logs  # never loaded again
    reloaded.shutdown()


async def test_fetch_max_bytes_and_waits_are_capped_by_the_server(cluster: ReplicaCluster) -> None:
    """A FetchLog asking for 2^31-1 bytes (whole and per bucket) gets at most fetch.response.max-bytes (plus
    at most one batch); a produce timeout or fetch wait of days is cut to request.max-hold."""
    from fluss_py import config as cfg
    from fluss_py.tablet.replica_layer import RequestLimits

    layer = _layer(cluster)
    layer.limits = RequestLimits(fetch_max_bytes=4096, max_hold_s=0.2)
    lai = LeaderAndIsr(1, 0, (1,), 1, 0)
    await layer.notify_leader_and_isr(_notify(1, [(TB, lai, (1,))]))
    value = b"x" * 1000
    for _ in range(40):
        assert (await layer.produce_log(_produce(TB, batch(value)))).buckets[0].error.code == ErrorCode.NONE
    request = _fetch(TB, 0)
    request.max_bytes = request.buckets[0].max_bytes = cfg.INT32_MAX
    (f,) = (await layer.fetch_log(request)).buckets
    assert f.error.code == ErrorCode.NONE and f.log_end_offset == 40
    assert 0 < len(f.records) <= 4096  # before the cap: all 40 batches (~42 KB)
    assert [o for o, _ in values_of(f.records)] == list(range(len(values_of(f.records))))

    limits = RequestLimits(fetch_max_bytes=1 << 20, max_hold_s=30.0)
    assert limits.wait_s(cfg.INT32_MAX) == 30.0 and limits.wait_s(-5) == 0.0 and limits.wait_s(250) == 0.25
    assert limits.fetch_bytes(cfg.INT32_MAX) == 1 << 20 and limits.fetch_bytes(100) == 100
    assert RequestLimits.from_config(cfg.Config(cfg.TABLET)) == RequestLimits(16 << 20, 60.0)


async def test_a_produce_naming_a_bucket_twice_is_refused_whole_and_writes_nothing(cluster: ReplicaCluster) -> None:
    """Two entries for one bucket would collapse into one (the first batch neither checked nor written, the
    answer NONE): the request is malformed, refused with INVALID_REQUEST, and no bucket of it is written."""
    layer = _layer(cluster)
    lai = LeaderAndIsr(1, 0, (1,), 1, 0)
    await layer.notify_leader_and_isr(_notify(1, [(TB, lai, (1,)), (OTHER, lai, (1,))]))
    request = _produce(TB, batch(b"first"))
    for tb, value in ((OTHER, b"other"), (TB, b"second")):
        request.buckets.add(table_bucket=convert.table_bucket_to_pb(tb), records=batch(value))
    answer = await layer.produce_log(request)
    assert answer.error.code == ErrorCode.INVALID_REQUEST and list(answer.buckets) == []
    assert "named twice" in answer.error.message
    assert [cluster.managers[1].replica(tb).log.log_end_offset for tb in (TB, OTHER)] == [0, 0]

    request.buckets.pop()  # each bucket once: written
    answer = await layer.produce_log(request)
    assert answer.error.code == ErrorCode.NONE and [b.error.code for b in answer.buckets] == [ErrorCode.NONE] * 2
    assert values_of((await layer.fetch_log(_fetch(TB, 0))).buckets[0].records) == [(0, b"first")]
