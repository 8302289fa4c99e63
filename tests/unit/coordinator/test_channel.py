"""Per-server ordered outboxes and batched coordinator requests (no network: a recording fake gateway)."""

import asyncio

from fluss_py.coordinator import channel as channel_mod
from fluss_py.coordinator.channel import NOTIFY, STOP, UPDATE, MetadataViews, RequestBatch, TabletChannel
from fluss_py.errors import ErrorCode
from fluss_py.rpc import convert
from fluss_py.rpc.pb import common_pb2
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr, ServerNode, TableBucket

from .fakes import FakeGateway

NODES = {i: ServerNode(i, "127.0.0.1", 9000 + i) for i in (1, 2, 3)}
TABLE = common_pb2.TableInfo(table_id=5)


def views(version: int = 1) -> MetadataViews:
    return MetadataViews(version, lambda: common_pb2.ClusterMetadata(coordinator_epoch=7), common_pb2.ClusterMetadata())


def bucket_pb(bucket: int, leader: int, isr=(1, 2, 3), replicas=(1, 2, 3)):
    return convert.leader_and_isr_to_pb(TableBucket(5, bucket), LeaderAndIsr(leader, 1, tuple(isr), 7, 2), replicas)


def test_batch_groups_per_server_and_orders_update_notify_stop():
    batch = RequestBatch(coordinator_id=100, coordinator_epoch=7)
    assert batch.empty()
    for server in (1, 2):
        batch.leader_and_isr(server, bucket_pb(0, 1), TABLE)
        batch.leader_and_isr(server, bucket_pb(1, 2), TABLE)
    batch.leader_and_isr(1, bucket_pb(1, 3), TABLE)  # a later state of the same bucket replaces the first
    batch.stop_replica(1, TableBucket(5, 2), 4, delete=True)
    batch.update_metadata([1, 2, 3])
    requests = batch.requests(views(), NODES)
    expected = [(1, UPDATE), (1, NOTIFY), (1, STOP), (2, UPDATE), (2, NOTIFY), (3, UPDATE)]
    assert [(s, k) for s, k, _ in requests] == expected
    assert all(r.coordinator_epoch == 7 and r.coordinator_id == 100 for _, _, r in requests)
    notify = requests[1][2]
    assert [(b.table_bucket.bucket, b.leader) for b in notify.buckets] == [(0, 1), (1, 3)]
    assert [n.id for n in notify.servers] == [1, 2, 3] and [t.table_id for t in notify.tables] == [5]
    stop = requests[2][2]
    assert stop.buckets[0].delete and stop.buckets[0].leader_epoch == 4


async def test_requests_to_one_server_arrive_in_queue_order():
    gw = FakeGateway()
    ch = TabletChannel(gw)
    ch.add(NODES[1])
    for i in range(5):
        b = RequestBatch(100, 7)
        b.leader_and_isr(1, bucket_pb(i, 1), TABLE)
        b.send(ch, views(), NODES)
    await wait_until(lambda: ch.sent == 5)
    assert [r.buckets[0].table_bucket.bucket for r in gw.of(NOTIFY, 1)] == [0, 1, 2, 3, 4]
    await ch.close()


async def test_failed_sends_are_retried_until_the_server_answers(monkeypatch):
    monkeypatch.setattr(channel_mod, "RETRY_INITIAL", 0.001)
    monkeypatch.setattr(channel_mod, "RETRY_MAX", 0.002)
    gw = FakeGateway()
    gw.down.add(2)
    ch = TabletChannel(gw)
    ch.add(NODES[2])
    assert ch.enqueue(2, UPDATE, "first") and ch.enqueue(2, STOP, "second")
    await wait_until(lambda: gw.attempts >= 5)
    assert ch.pending(2) == 2 and not gw.calls
    gw.down.clear()
    await wait_until(lambda: ch.pending(2) == 0)
    assert [r for _, _, r in gw.calls] == ["first", "second"]
    await ch.close()


async def test_older_update_metadata_is_skipped_when_a_newer_one_waits(monkeypatch):
    monkeypatch.setattr(channel_mod, "RETRY_INITIAL", 0.001)
    gw = FakeGateway()
    gw.down.add(1)
    ch = TabletChannel(gw)
    ch.add(NODES[1])
    ch.enqueue(1, UPDATE, "u1")
    # between two failed attempts (not inside one, which would see the server back up and send u1)
    await wait_until(lambda: gw.failed >= 1 and gw.attempts == gw.failed)
    ch.enqueue(1, STOP, "n1")
    ch.enqueue(1, UPDATE, "u2")
    ch.enqueue(1, UPDATE, "u3")
    gw.down.clear()
    await wait_until(lambda: ch.pending(1) == 0)
    # u1 is superseded while it is being retried, u2 before it is sent: only the newest view goes out
    assert [r for _, _, r in gw.calls] == ["n1", "u3"]
    await ch.close()


async def test_removed_server_gets_nothing_and_unknown_servers_are_skipped():
    gw = FakeGateway()
    gw.down.add(3)
    ch = TabletChannel(gw)
    ch.add(NODES[3])
    ch.enqueue(3, UPDATE, "x")
    await wait_until(lambda: gw.attempts >= 1)
    ch.remove(3)
    assert ch.servers() == [] and not ch.enqueue(3, UPDATE, "y")
    await asyncio.sleep(0.01)
    assert not gw.calls
    await ch.close()
    assert not ch.enqueue(1, UPDATE, "z")


async def test_response_hook_sees_every_answer():
    seen = []
    gw = FakeGateway()
    ch = TabletChannel(gw, on_response=lambda s, k, req, resp: seen.append((s, k)))
    ch.add(NODES[1])
    ch.add(NODES[1])  # same address: same outbox
    ch.enqueue(1, STOP, common_pb2.ClusterMetadata())
    await wait_until(lambda: seen == [(1, STOP)])
    await ch.close()


def test_update_metadata_carries_every_live_servers_replica_token():
    batch = RequestBatch(coordinator_id=100, coordinator_epoch=7)
    batch.update_metadata([1, 2])
    batch.leader_and_isr(1, bucket_pb(0, 1), TABLE)
    requests = batch.requests(views(), NODES, {1: "s1", 2: "s2", 3: "s3"})
    updates = [r for _, k, r in requests if k == UPDATE]
    assert len(updates) == 2
    for u in updates:
        assert [(t.server_id, t.token) for t in u.replica_tokens] == [(1, "s1"), (2, "s2"), (3, "s3")]
        assert "s1" not in str(u.metadata)  # never in the cluster metadata the server serves to clients


async def test_refused_requests_are_sent_again_until_answered(monkeypatch):
    monkeypatch.setattr(channel_mod, "RETRY_INITIAL", 0.001)
    monkeypatch.setattr(channel_mod, "RETRY_MAX", 0.002)
    seen = []
    gw = FakeGateway()
    gw.refusing[1] = ErrorCode.COORDINATOR_NOT_AUTHENTICATED  # e.g. our leader node not yet seen there
    ch = TabletChannel(gw, on_response=lambda s, k, req, resp: seen.append((k, resp.error.code)))
    ch.add(NODES[1])
    b = RequestBatch(100, 7)
    b.update_metadata([1])
    b.leader_and_isr(1, bucket_pb(0, 1), TABLE)
    b.send(ch, views(), NODES)
    await wait_until(lambda: len(gw.calls) >= 5)
    assert {k for _, k, _ in gw.calls} == {UPDATE} and ch.pending(1) == 2 and not seen
    del gw.refusing[1]
    await wait_until(lambda: ch.pending(1) == 0)
    assert seen == [(UPDATE, ErrorCode.NONE), (NOTIFY, ErrorCode.NONE)]
    await ch.close()


async def test_a_refused_notify_drops_the_buckets_a_newer_notify_carries(monkeypatch):
    monkeypatch.setattr(channel_mod, "RETRY_INITIAL", 0.001)
    monkeypatch.setattr(channel_mod, "RETRY_MAX", 0.002)
    gw = FakeGateway()
    gw.refusing[1] = ErrorCode.INVALID_COORDINATOR_EPOCH
    ch = TabletChannel(gw)
    ch.add(NODES[1])
    first = RequestBatch(100, 7)
    for bucket in (0, 1):
        first.leader_and_isr(1, bucket_pb(bucket, 1), TABLE)
    first.send(ch, views(), NODES)
    await wait_until(lambda: gw.attempts >= 2)
    newer = RequestBatch(100, 7)
    newer.leader_and_isr(1, bucket_pb(1, 2), TABLE)  # bucket 1 moved on: its old state must not be re-sent
    newer.send(ch, views(), NODES)
    await wait_until(lambda: len(gw.calls) >= 4)
    del gw.refusing[1]
    await wait_until(lambda: ch.pending(1) == 0)
    answered = [[(b.table_bucket.bucket, b.leader) for b in r.buckets] for r in gw.of(NOTIFY, 1)[-2:]]
    assert answered == [[(0, 1)], [(1, 2)]]
    await ch.close()
