"""HTTP/2 keepalive takes effect (docs/failure-detection.md "Vanished peers"), with short ``rpc.keepalive.*``.

- A producer's ProduceLogStream to a real tablet server runs through a TCP proxy of the test's own, which
  then becomes a black hole (both sockets open, nothing forwarded, what arrives discarded: a partition with
  no FIN or RST). The server closes its side within time + timeout (+ margin), the client's pending request
  fails with a retriable error as quickly instead of waiting out its 30 s timeout, and once the network
  heals the client goes on (the discarded request never reached the log).
- A client that pings ten times as often as the server's own keepalive time is not sent GOAWAY
  ``too_many_pings``: the server permits pings every 0.5 s (``rpc/keepalive.py``).
"""

from __future__ import annotations

import asyncio

import grpc
import grpc.aio
import pytest

from fluss_py import config as cfg
from fluss_py.client import SyncAdmin
from fluss_py.client.transport import PRODUCE_LOG, GrpcTransport
from fluss_py.errors import ErrorCode, NetworkExceptionError
from fluss_py.record import RecordBatchBuilder
from fluss_py.rpc.channels import client_channel_options, open_channel
from fluss_py.rpc.keepalive import Keepalive
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.rpc.server import start_rpc_server
from fluss_py.security.identity import PLAINTEXT
from fluss_py.testing.blackhole import BlackHoleProxy
from fluss_py.testing.cluster_file import TABLET_SERVER

pytestmark = pytest.mark.integration

TABLE = "fluss.keepalive"
KEEPALIVE = {"rpc.keepalive.time": "1s", "rpc.keepalive.timeout": "1s"}
MARGIN_S = 4.0  # timers, a loaded machine; without keepalive nothing would happen for 30 s (the call's timeout)


@pytest.fixture
def tablet(cluster_factory) -> tuple[str, int]:
    """(the tablet server's address, the table's id): one coordinator, one tablet server, both with KEEPALIVE."""
    cluster = cluster_factory(coordinators=1, tablet_servers=1, overrides=KEEPALIVE)
    cluster.wait_for_leader(15)
    [name] = cluster.names(TABLET_SERVER)
    address = cluster.get(name).rpc_address
    with SyncAdmin(address, request_timeout=10.0) as admin:
        admin.create_table(TABLE, num_buckets=1, replication_factor=1)
        cluster.wait_until(lambda: admin.get_table_placement(TABLE)[1][0].leader >= 0, 30, "the bucket has a leader")
        return address, admin.get_table_info(TABLE).table_id


def _produce(table_id: int, value: bytes) -> tablet_pb2.ProduceLogRequest:
    builder = RecordBatchBuilder()
    builder.append(value)
    request = tablet_pb2.ProduceLogRequest(acks=1, timeout_ms=30_000)
    request.buckets.add(table_bucket={"table_id": table_id, "bucket": 0}, records=builder.build())
    return request


def _offset(response: tablet_pb2.ProduceLogResponse) -> int:
    [bucket] = response.buckets
    assert not bucket.error.code, bucket.error
    return bucket.base_offset


async def _first_offset(transport: GrpcTransport, address: str, table_id: int, timeout: float = 30.0) -> int:
    """The first write's offset. The coordinator's placement names the leader once it is written, which can be
    before the tablet server applied it: until then the server answers UNKNOWN_TABLE_OR_BUCKET or
    NOT_LEADER_OR_FOLLOWER (retriable, nothing written), so the write is sent again until it lands."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        [bucket] = (await transport.call(address, PRODUCE_LOG, _produce(table_id, b"before"), 10.0)).buckets
        code = ErrorCode(bucket.error.code)
        if code is ErrorCode.NONE or loop.time() > deadline:
            assert code is ErrorCode.NONE, bucket.error
            return bucket.base_offset
        assert code in (ErrorCode.UNKNOWN_TABLE_OR_BUCKET, ErrorCode.NOT_LEADER_OR_FOLLOWER), bucket.error
        await asyncio.sleep(0.1)


async def _within(what: str, done: asyncio.Event | asyncio.Task, deadline: float) -> float:
    """Wait for an event or a task until loop time ``deadline``; returns the loop time it was done at."""
    loop = asyncio.get_running_loop()
    timeout = max(0.0, deadline - loop.time())
    waiter = asyncio.ensure_future(done.wait()) if isinstance(done, asyncio.Event) else done
    finished, _ = await asyncio.wait([waiter], timeout=timeout)
    if not finished and waiter is not done:
        waiter.cancel()
    assert finished, f"{what}: not within {timeout:.1f} s"
    return loop.time()


async def test_a_black_holed_connection_is_closed_by_both_ends_and_the_client_goes_on(tablet) -> None:
    address, table_id = tablet
    keepalive = Keepalive.from_config(cfg.Config(cfg.CLIENT, KEEPALIVE))  # the client reads the same keys
    assert keepalive == Keepalive(1.0, 1.0)
    loop = asyncio.get_running_loop()
    proxy = await BlackHoleProxy.start(address)
    transport = GrpcTransport(keepalive=keepalive)
    pending: asyncio.Task | None = None
    try:
        assert await _first_offset(transport, proxy.address, table_id) == 0
        assert proxy.address in transport.produce_streams  # it went on the ProduceLogStream
        [conn] = proxy.connections

        proxy.black_hole()
        start = loop.time()
        deadline = start + keepalive.detection_s + MARGIN_S
        pending = asyncio.create_task(transport.call(proxy.address, PRODUCE_LOG, _produce(table_id, b"lost"), 30.0))
        # (a) the server's pings go unanswered: it closes the connection, ending the stream at its end
        server_gave_up = await _within("the server closing the black-holed connection", conn.upstream_closed, deadline)
        # (b) so do the client's: the pending request fails, retriable, instead of hanging for 30 s
        failed = await _within("the pending request failing", pending, deadline)
        with pytest.raises(NetworkExceptionError) as e:
            pending.result()
        assert e.value.retriable
        assert conn.downstream_closed.is_set()  # the client closed its side too
        print(f"server closed after {server_gave_up - start:.2f} s, request failed after {failed - start:.2f} s")

        proxy.heal()
        after = await transport.call(proxy.address, PRODUCE_LOG, _produce(table_id, b"after"), 10.0)
        assert _offset(after) == 1  # the discarded request never reached the log
        assert len(proxy.connections) == 2  # on a new connection
    finally:
        if pending is not None and not pending.done():
            pending.cancel()  # the test failed while it hung
        await transport.close()
        await proxy.close()
        if pending is not None:
            await asyncio.wait([pending])
            if not pending.cancelled():
                pending.exception()  # retrieved (raised above when the test got that far)


async def test_a_client_pinging_faster_than_the_servers_keepalive_time_is_not_sent_too_many_pings() -> None:
    """The server's own time is 10 s (it used to permit pings every 5 s); the client pings every second on a
    connection with one open, silent stream: after 5 acknowledged pings the server sent no GOAWAY (gRPC's
    server sends one on the third ping too soon) and the stream still answers."""

    async def park(requests, context: grpc.aio.ServicerContext):
        await context.send_initial_metadata(())
        async for request in requests:
            yield request

    handler = grpc.stream_stream_rpc_method_handler(park)
    service = grpc.method_handlers_generic_handler("fluss.test.Park", {"Park": handler})
    server, port = await start_rpc_server(
        "127.0.0.1", 0, [lambda s: s.add_generic_rpc_handlers((service,))], keepalive=Keepalive(10.0, 5.0)
    )
    proxy = await BlackHoleProxy.start(f"127.0.0.1:{port}")
    channel = open_channel(proxy.address, PLAINTEXT, client_channel_options(Keepalive(1.0, 1.0)))
    loop = asyncio.get_running_loop()
    try:
        call = channel.stream_stream("/fluss.test.Park/Park")()
        await call.initial_metadata()
        [conn] = proxy.connections
        acked = asyncio.Event()

        async def watch() -> None:
            while conn.frames[("down", "PING_ACK")] < 5 and not conn.goaways:
                await asyncio.sleep(0.05)
            acked.set()

        watcher = asyncio.create_task(watch())
        await _within("5 pings acknowledged", acked, loop.time() + 5 * 1.0 + MARGIN_S)
        await watcher
        assert not conn.goaways, f"the server sent GOAWAY: {conn.goaways}"
        await call.write(b"still there")
        assert await asyncio.wait_for(call.read(), 5.0) == b"still there"
        assert len(proxy.connections) == 1
        await call.done_writing()
    finally:
        await channel.close()
        await proxy.close()
        await server.stop(0)
