"""Produce on a stream (``ProduceLogStream``, docs/client.md "Produce on a stream") against real processes:
real ZooKeeper, a real coordinator, three tablet servers, the Python client over gRPC.

- the producer's requests travel on one stream per leader (no unary ProduceLog, no reopened stream), every
  acknowledged record is read back exactly once at its offset, by a consumer fetching on one
  ConsumerFetchStream per leader;
- on one raw stream, answers carry the requests' correlation ids; a request to a server that does not lead
  the bucket is answered NOT_LEADER_OR_FOLLOWER for that bucket and the stream goes on;
- kill -9 of a leader while records are in flight on its stream: the pending requests fail as a broken
  stream, are retried under the same writer id and sequence, and nothing acknowledged is lost or duplicated.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import Counter

import grpc
import grpc.aio
import pytest

from fluss_py.client import ConsumerOptions, ProducerOptions, SyncAdmin, SyncConsumer, SyncProducer
from fluss_py.errors import ErrorCode
from fluss_py.record import RecordBatchBuilder
from fluss_py.rpc.pb import tablet_pb2, tablet_pb2_grpc
from fluss_py.testing.cluster_file import TABLET_SERVER
from fluss_py.testing.faults import kill9

pytestmark = pytest.mark.integration

TABLE = "fluss.produce_stream"
BUCKETS = 3
TABLET_OVERRIDES = {"replica.lag.time.max.ms": "3s"}


def _bootstrap(cluster) -> str:
    return ",".join(cluster.get(n).rpc_address for n in cluster.names(TABLET_SERVER))


def _fully_replicated(admin: SyncAdmin) -> bool:
    _, buckets = admin.get_table_placement(TABLE)
    return len(buckets) == BUCKETS and all(b.leader >= 0 and len(b.isr) == 3 for b in buckets)


def _consume(bootstrap: str, expected: int, timeout: float = 60.0, fetch_streams: dict | None = None) -> list:
    """The records read back; ``fetch_streams`` gets the consumer's fetch streams opened per address."""
    records: list = []
    with SyncConsumer(bootstrap, ConsumerOptions(fetch_max_wait=0.2)) as consumer:
        consumer.assign(TABLE)
        deadline = time.monotonic() + timeout
        while len(records) < expected and time.monotonic() < deadline:
            records.extend(consumer.poll(0.5))
        records.extend(consumer.poll(1.0))  # nothing more may come
        if fetch_streams is not None:
            transport = consumer._client._transport
            fetch_streams.update({a: s.opened for a, s in transport.consumer_fetch_streams.items()})
    return records


def _streams(producer: SyncProducer) -> dict:
    return producer._client._transport.produce_streams  # the transport's stream clients, by address


@pytest.fixture
def cluster(cluster_factory):
    cluster = cluster_factory(coordinators=1, tablet_servers=3, tablet_overrides=TABLET_OVERRIDES)
    cluster.wait_for_leader(15)
    with SyncAdmin(_bootstrap(cluster), request_timeout=10.0) as admin:
        admin.create_table(TABLE, num_buckets=BUCKETS, replication_factor=3)
        cluster.wait_until(lambda: _fully_replicated(admin), 30, "every bucket has a leader and an ISR of 3")
    return cluster


def test_the_producer_writes_on_one_stream_per_leader_exactly_once(cluster) -> None:
    bootstrap = _bootstrap(cluster)
    options = ProducerOptions(acks="all", request_timeout=10.0, delivery_timeout=60.0)
    with SyncProducer(bootstrap, options) as producer:
        futures = [producer.send(TABLE, f"v{i}".encode(), key=f"k{i}".encode()) for i in range(600)]
        producer.flush()
        acked = {(f.result(30).bucket.bucket, f.result(30).offset): f"v{i}".encode() for i, f in enumerate(futures)}
        streams = _streams(producer)
        with SyncAdmin(bootstrap) as admin:
            _, placement = admin.get_table_placement(TABLE)
        leaders = {cluster.get(f"tablet-server-{b.leader}").rpc_address for b in placement}
        assert set(streams) == leaders  # every request to a leader went on its stream
        assert all(s.opened == 1 for s in streams.values())  # none broke and reopened
    fetch_streams: dict = {}
    records = _consume(bootstrap, len(acked), fetch_streams=fetch_streams)
    got = Counter((r.bucket.bucket, r.offset) for r in records)
    assert all(n == 1 for n in got.values()), "a record was read twice"
    assert {(r.bucket.bucket, r.offset): r.value for r in records} == acked
    # the consumer's fetches went on a ConsumerFetchStream to each leader (docs/client.md), none broke
    assert set(fetch_streams) == leaders and set(fetch_streams.values()) == {1}


def test_answers_carry_correlation_ids_and_a_not_leader_answer_leaves_the_stream_open(cluster) -> None:
    with SyncAdmin(_bootstrap(cluster)) as admin:
        _, placement = admin.get_table_placement(TABLE)
    bucket = placement[0]
    leader = cluster.get(f"tablet-server-{bucket.leader}").rpc_address
    other = next(s for s in bucket.replicas if s != bucket.leader)
    follower = cluster.get(f"tablet-server-{other}").rpc_address

    def request(correlation_id: int) -> tablet_pb2.ProduceLogRequest:
        builder = RecordBatchBuilder()
        builder.append(b"raw")
        message = tablet_pb2.ProduceLogRequest(acks=1, timeout_ms=5000, correlation_id=correlation_id)
        tb = {"table_id": bucket.table_bucket.table_id, "bucket": bucket.table_bucket.bucket}
        message.buckets.add(table_bucket=tb, records=builder.build())
        return message

    async def exchange(address: str, ids: list[int]) -> list[tablet_pb2.ProduceLogResponse]:
        async with grpc.aio.insecure_channel(address) as channel:
            call = tablet_pb2_grpc.TabletServiceStub(channel).ProduceLogStream()
            for correlation_id in ids:
                await call.write(request(correlation_id))
            answers = [await asyncio.wait_for(call.read(), 10) for _ in ids]
            await call.done_writing()
            assert await asyncio.wait_for(call.read(), 10) is grpc.aio.EOF  # closing our side ends it cleanly
            return answers

    answers = asyncio.run(exchange(leader, [41, 42, 43]))
    assert sorted(a.correlation_id for a in answers) == [41, 42, 43]
    offsets = sorted(a.buckets[0].base_offset for a in answers)
    assert all(a.buckets[0].error.code == ErrorCode.NONE for a in answers)
    assert offsets == list(range(offsets[0], offsets[0] + 3))
    refused = asyncio.run(exchange(follower, [7, 8]))
    assert sorted(a.correlation_id for a in refused) == [7, 8]  # both answered: the stream went on
    assert all(a.buckets[0].error.code == ErrorCode.NOT_LEADER_OR_FOLLOWER for a in refused)


def test_kill_of_a_leader_mid_stream_loses_and_duplicates_nothing(cluster) -> None:
    bootstrap = _bootstrap(cluster)
    options = ProducerOptions(acks="all", request_timeout=5.0, delivery_timeout=60.0)
    sent: list[tuple[bytes, concurrent.futures.Future]] = []
    with SyncProducer(bootstrap, options) as producer:
        for i in range(300):
            sent.append((f"before-{i}".encode(), producer.send(TABLE, f"before-{i}".encode(), key=f"k{i}".encode())))
        with SyncAdmin(bootstrap) as admin:
            _, placement = admin.get_table_placement(TABLE)
        victim = f"tablet-server-{placement[0].leader}"
        victim_address = cluster.get(victim).rpc_address
        assert victim_address in _streams(producer)  # the first records went on its stream
        for i in range(300):  # in flight on the victim's stream when it dies
            sent.append((f"during-{i}".encode(), producer.send(TABLE, f"during-{i}".encode(), key=f"k{i}".encode())))
        kill9(cluster, victim)
        for i in range(300):
            sent.append((f"after-{i}".encode(), producer.send(TABLE, f"after-{i}".encode(), key=f"k{i}".encode())))
        producer.flush()
        acked = {(f.result(60).bucket.bucket, f.result(60).offset): value for value, f in sent}
        assert victim_address not in _streams(producer) or _streams(producer)[victim_address].pending == 0
    assert len(acked) == len(sent)  # every send acknowledged, each at its own offset
    records = _consume(bootstrap, len(acked))
    got = Counter(r.value for r in records)
    assert [v for v, n in got.items() if n > 1] == [], "a record was appended twice"
    assert {(r.bucket.bucket, r.offset): r.value for r in records} == acked
