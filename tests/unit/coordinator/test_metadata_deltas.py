"""UpdateMetadata deltas (docs/control-plane.md §8): a change sends only what changed, every server's view
(a real ``MetadataCache`` behind the fake gateway) equals the coordinator's after any sequence of events, and
a server that cannot apply a delta gets the full view. In-memory ZooKeeper and gateway, no sockets."""

from __future__ import annotations

from typing import Any

from fluss_py.coordinator.channel import UPDATE
from fluss_py.coordinator.events import AdjustIsr, ControlledShutdown, CreateTable, DropTable
from fluss_py.rpc.pb import common_pb2, coordinator_pb2, tablet_pb2
from fluss_py.tablet.metadata_cache import MetadataCache
from fluss_py.types import ServerNode, TableBucket, TablePath

from .fakes import FakeGateway
from .harness import Harness, fresh_zk

A, B = TablePath("fluss", "a"), TablePath("fluss", "b")


class ViewGateway(FakeGateway):
    """FakeGateway whose servers apply UpdateMetadata to a real MetadataCache each (as the tablet service)."""

    def __init__(self) -> None:
        super().__init__()
        self.caches: dict[int, MetadataCache] = {}

    async def send(self, server: ServerNode, kind: str, request: Any) -> Any:
        response = await super().send(server, kind, request)
        if kind == UPDATE:
            applied = self.caches.setdefault(server.id, MetadataCache()).apply(request)
            return tablet_pb2.UpdateMetadataResponse(error=response.error, needs_full_view=not applied)
        return response


async def harness() -> Harness:
    zk, fence = fresh_zk()
    h = Harness(zk, {1: "", 2: "", 3: ""}, fence)
    h.gateway = h.channel._gateway = ViewGateway()
    await h.start()
    return h


def tables_of(metadata: common_pb2.ClusterMetadata) -> dict[int, list[bytes]]:
    return {t.info.table_id: [b.SerializeToString() for b in t.buckets] for t in metadata.tables}


def assert_views_match(h: Harness) -> None:
    truth = h.proc.cluster_metadata()
    for server in h.channel.servers():
        view = h.gateway.caches[server].cluster_metadata()
        assert tables_of(view) == tables_of(truth), f"server {server}"
        assert [s.id for s in view.tablet_servers] == [s.id for s in truth.tablet_servers]


def isr_change(h: Harness, tb: TableBucket, isr: list[int]) -> AdjustIsr:
    lai = h.view_lai(tb.table_id, tb.bucket)
    item = coordinator_pb2.AdjustIsrBucket(
        table_bucket=common_pb2.TableBucket(table_id=tb.table_id, bucket=tb.bucket),
        leader_epoch=lai.leader_epoch,
        bucket_epoch=lai.bucket_epoch,
        new_isr=isr,
    )
    return AdjustIsr(coordinator_pb2.AdjustIsrRequest(server_id=lai.leader, buckets=[item]))


async def test_an_isr_change_sends_only_its_bucket_whatever_the_tables_size() -> None:
    h = await harness()
    try:
        a = await h.proc.create_table(CreateTable(A, num_buckets=200, replication_factor=3))
        await h.proc.create_table(CreateTable(B, num_buckets=200, replication_factor=3))
        await h.drain()
        h.gateway.clear()
        tb = TableBucket(a, 7)
        leader = h.view_lai(a, 7).leader
        await h.proc.adjust_isr(isr_change(h, tb, [leader]))
        await h.drain()
        for server in (1, 2, 3):
            (update,) = h.gateway.of(UPDATE, server)
            assert update.incremental and update.base_version == update.metadata_version - 1
            assert [(t.info.table_id, [b.table_bucket.bucket for b in t.buckets]) for t in update.metadata.tables] == [
                (a, [7])
            ]
        assert_views_match(h)
    finally:
        await h.channel.close()


async def test_every_servers_view_follows_the_coordinators_through_deltas() -> None:
    h = await harness()
    try:
        a = await h.proc.create_table(CreateTable(A, num_buckets=12, replication_factor=3))
        await h.drain()
        assert_views_match(h)
        b = await h.proc.create_table(CreateTable(B, num_buckets=5, replication_factor=2))
        for bucket in (0, 3):
            leader = h.view_lai(a, bucket).leader
            await h.proc.adjust_isr(isr_change(h, TableBucket(a, bucket), [leader]))
        await h.drain()
        assert_views_match(h)
        await h.kill(3)  # leaders move, 3 leaves ISRs
        assert_views_match(h)
        await h.revive(3)  # 3 gets the full view, the others a delta
        assert_views_match(h)
        await h.proc.controlled_shutdown(ControlledShutdown(2))
        await h.drain()
        assert_views_match(h)
        await h.proc.drop_table(DropTable(A))
        await h.drain()
        assert_views_match(h)
        assert [t.info.table_id for t in h.gateway.caches[1].cluster_metadata().tables] == [b]
    finally:
        await h.channel.close()


async def test_a_server_without_the_base_view_is_sent_the_full_view() -> None:
    h = await harness()
    try:
        a = await h.proc.create_table(CreateTable(A, num_buckets=8, replication_factor=3))
        await h.drain()
        h.gateway.caches[2] = MetadataCache()  # server 2 restarted at the same address, unnoticed so far
        leader = h.view_lai(a, 1).leader
        await h.proc.adjust_isr(isr_change(h, TableBucket(a, 1), [leader]))
        await h.drain()
        assert h.channel.full_views_asked == 1 and h.gateway.caches[2].deltas_refused == 1
        assert not h.gateway.of(UPDATE, 2)[-1].incremental
        assert_views_match(h)
        leader = h.view_lai(a, 2).leader  # and deltas apply on top of that full view again
        await h.proc.adjust_isr(isr_change(h, TableBucket(a, 2), [leader]))
        await h.drain()
        assert h.channel.full_views_asked == 1 and h.gateway.of(UPDATE, 2)[-1].incremental
        assert_views_match(h)
    finally:
        await h.channel.close()


def delta(version: int, base: int, epoch: int = 1, **tables: Any) -> tablet_pb2.UpdateMetadataRequest:
    return tablet_pb2.UpdateMetadataRequest(
        metadata=common_pb2.ClusterMetadata(coordinator_epoch=epoch),
        metadata_version=version,
        incremental=True,
        base_version=base,
    )


def test_the_cache_applies_a_delta_only_on_its_base_view() -> None:
    cache = MetadataCache()
    assert not cache.apply(delta(1, 0))  # no view at all
    cache.apply(
        tablet_pb2.UpdateMetadataRequest(metadata=common_pb2.ClusterMetadata(coordinator_epoch=1), metadata_version=5)
    )
    assert cache.apply(delta(6, 5))
    assert cache.apply(delta(4, 3))  # already covered by the full view numbered 5: nothing to do
    assert not cache.apply(delta(8, 7))  # 7 never arrived
    assert not cache.apply(delta(7, 6, epoch=2))  # another leadership's numbering
    assert cache.apply(delta(7, 6)) and cache.deltas_refused == 3
