"""The sender's loop turns (docs/client.md "Producer pipeline"): a record sent while nothing is on the wire has
its request started in the caller's turn (the request task runs in the next turn); with a request on the wire,
records wait for the loop's round and batch meanwhile. In-memory fake cluster; turns counted by a callback
that re-schedules itself every loop iteration."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.options import ProducerOptions
from fluss_py.client.producer import Producer
from tests.unit.client.fake_cluster import FakeCluster

pytestmark = pytest.mark.timeout(30)


class Turns:
    """Counts event-loop iterations (one increment per turn)."""

    def __init__(self) -> None:
        self.n = 0
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_soon(self._tick)

    def _tick(self) -> None:
        self.n += 1
        self._handle = self._loop.call_soon(self._tick)

    def stop(self) -> None:
        self._handle.cancel()


def _produce_calls(cluster: FakeCluster) -> list:
    return [req for _, name, req in cluster.calls if name == "ProduceLog"]


async def test_a_record_sent_while_nothing_is_on_the_wire_reaches_the_transport_in_the_next_turn() -> None:
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    turns = Turns()
    at_call: list[int] = []
    call = cluster.call

    async def counting_call(address, rpc, request, timeout):  # type: ignore[no-untyped-def]
        if rpc.name == "ProduceLog":
            at_call.append(turns.n)
        return await call(address, rpc, request, timeout)

    cluster.call = counting_call  # type: ignore[method-assign]
    async with Producer(cluster.servers[0], ProducerOptions(acks=-1), transport=cluster) as producer:
        await producer.send_and_wait("fluss.t", b"warm-up")
        delays = []
        for i in range(5):  # back to back, as a one-at-a-time caller sends: the next as soon as the ack came
            before = turns.n
            await producer.send_and_wait("fluss.t", b"%d" % i)
            delays.append(at_call[-1] - before)
    turns.stop()
    assert delays == [1] * 5  # was 2: the sender task's wake-up, then the request task


async def test_records_sent_in_one_turn_by_send_go_in_one_request_even_when_the_sender_was_idle() -> None:
    """A paced pipelining caller (bench_latency's load producer): a burst of ``send`` in one turn, then a sleep
    long enough for every answer to come back. Each burst is one request; a sender round run by the first
    ``send`` of a burst would send it alone and the rest in a second request (twice the requests under load)."""
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=1)
    async with Producer(cluster.servers[0], ProducerOptions(acks=-1), transport=cluster) as producer:
        await producer.send_and_wait("fluss.t", b"warm-up")  # a writer id, the table's metadata
        cluster.calls.clear()
        for burst in range(3):
            futures = [await producer.send("fluss.t", b"%d-%d" % (burst, i)) for i in range(20)]
            await asyncio.gather(*futures)  # nothing on the wire again before the next burst
    assert [len(r.buckets) for r in _produce_calls(cluster)] == [1, 1, 1]  # one request (one batch) per burst


async def test_a_round_between_send_now_and_its_request_task_leaves_the_request_alone() -> None:
    """``send_and_wait``'s append wakes the sender task before ``send_now`` spawns the request task, so the
    task's round runs first in the next turn. It must see the batch in flight to its leader (marked sent when
    the request was started), not to no server: that looked like a moved leader, and each record went twice
    with a metadata refresh in between."""
    cluster = FakeCluster()
    cluster.create_table("fluss", "t", num_buckets=3)
    async with Producer(cluster.servers[0], ProducerOptions(acks=-1), transport=cluster) as producer:
        await producer.send_and_wait("fluss.t", b"warm-up")  # a writer id, the table's metadata
        cluster.calls.clear()
        offsets = [await producer.send_and_wait("fluss.t", b"%d" % i) for i in range(6)]
    assert [name for _, name, _ in cluster.calls] == ["ProduceLog"] * 6  # no retry, no metadata refresh
    assert all(o.offset >= 0 for o in offsets)
