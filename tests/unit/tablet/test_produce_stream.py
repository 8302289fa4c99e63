"""The leader's ``ProduceStreamHandler``: messages started in order, answered in completion order with their
correlation ids, a refused message answered without being handled, at most ``max_pending`` at once, and the
stream's end cancelling what is unanswered. In-memory request stream and produce; no sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from fluss_py.errors import AuthorizationFailedError, ErrorCode
from fluss_py.rpc.pb import tablet_pb2
from fluss_py.tablet.produce_stream import ProduceStreamHandler

_CLOSE = object()


class Leader:
    """The replica layer's produce, answered when the test says so; and the stream's two directions."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue[object] = asyncio.Queue()
        self.started: list[int] = []  # correlation ids in the order produce was called
        self.results: dict[int, asyncio.Future[None]] = {}
        self.written: list[tablet_pb2.ProduceLogResponse] = []
        self.cancelled: list[int] = []

    async def produce(self, request: tablet_pb2.ProduceLogRequest) -> tablet_pb2.ProduceLogResponse:
        cid = request.correlation_id
        self.started.append(cid)
        self.results[cid] = asyncio.get_running_loop().create_future()
        try:
            await self.results[cid]
        except asyncio.CancelledError:
            self.cancelled.append(cid)
            raise
        return tablet_pb2.ProduceLogResponse(buckets=[tablet_pb2.ProduceBucketResult(base_offset=cid * 10)])

    async def write(self, response: tablet_pb2.ProduceLogResponse) -> None:
        await asyncio.sleep(0)
        self.written.append(response)

    async def stream(self) -> AsyncIterator[tablet_pb2.ProduceLogRequest]:
        while True:
            item = await self.requests.get()
            if item is _CLOSE:
                return
            yield item  # type: ignore[misc]

    def send(self, cid: int, table_id: int = 1) -> None:
        request = tablet_pb2.ProduceLogRequest(acks=-1, correlation_id=cid)
        request.buckets.add(table_bucket={"table_id": table_id, "bucket": 0}, records=b"x")
        self.requests.put_nowait(request)

    def complete(self, cid: int) -> None:
        self.results[cid].set_result(None)


async def _until(condition, timeout: float = 2.0) -> None:
    async with asyncio.timeout(timeout):
        while not condition():
            await asyncio.sleep(0)


def _no_refusal(request: object) -> None:
    return None


async def test_started_in_order_answered_in_completion_order_with_ids() -> None:
    leader = Leader()
    handler = ProduceStreamHandler(leader.produce, leader.write, _no_refusal)
    run = asyncio.create_task(handler.run(leader.stream()))
    for cid in (1, 2, 3):
        leader.send(cid)
    await _until(lambda: len(leader.started) == 3)
    assert leader.started == [1, 2, 3]
    for cid in (3, 1, 2):
        leader.complete(cid)
        await _until(lambda cid=cid: any(w.correlation_id == cid for w in leader.written))
    assert [(w.correlation_id, w.buckets[0].base_offset) for w in leader.written] == [(3, 30), (1, 10), (2, 20)]
    leader.requests.put_nowait(_CLOSE)
    await asyncio.wait_for(run, 2)


async def test_a_refused_message_is_answered_and_never_handled_the_stream_goes_on() -> None:
    leader = Leader()

    def refusal(request: tablet_pb2.ProduceLogRequest) -> AuthorizationFailedError | None:
        if request.buckets[0].table_bucket.table_id == 9:
            return AuthorizationFailedError("alice may not WRITE table db.secret")
        return None

    handler = ProduceStreamHandler(leader.produce, leader.write, refusal)
    run = asyncio.create_task(handler.run(leader.stream()))
    leader.send(1)
    leader.send(2, table_id=9)
    leader.send(3)
    await _until(lambda: len(leader.started) == 2 and len(leader.written) == 1)
    assert leader.started == [1, 3]  # 2 never reached the replica layer
    (refused,) = leader.written
    assert refused.correlation_id == 2 and refused.error.code == ErrorCode.AUTHORIZATION_FAILED
    assert "may not WRITE table db.secret" in refused.error.message
    leader.complete(1)
    leader.complete(3)
    leader.requests.put_nowait(_CLOSE)
    await asyncio.wait_for(run, 2)
    assert sorted(w.correlation_id for w in leader.written) == [1, 2, 3]


async def test_at_most_max_pending_messages_are_read() -> None:
    leader = Leader()
    handler = ProduceStreamHandler(leader.produce, leader.write, _no_refusal, max_pending=2)
    run = asyncio.create_task(handler.run(leader.stream()))
    for cid in (1, 2, 3, 4):
        leader.send(cid)
    await _until(lambda: len(leader.started) == 2)
    await asyncio.sleep(0.02)
    assert leader.started == [1, 2] and handler.handled == 2  # 3 and 4 wait in the stream
    leader.complete(2)
    await _until(lambda: len(leader.started) == 3)
    assert leader.started == [1, 2, 3]
    for cid in (1, 3):
        leader.complete(cid)
    await _until(lambda: len(leader.started) == 4)
    leader.complete(4)
    leader.requests.put_nowait(_CLOSE)
    await asyncio.wait_for(run, 2)
    assert sorted(w.correlation_id for w in leader.written) == [1, 2, 3, 4]


async def test_the_client_closing_its_side_still_gets_every_answer() -> None:
    leader = Leader()
    run = asyncio.create_task(ProduceStreamHandler(leader.produce, leader.write, _no_refusal).run(leader.stream()))
    leader.send(1)
    leader.send(2)
    leader.requests.put_nowait(_CLOSE)
    await _until(lambda: len(leader.started) == 2)
    assert not run.done()
    leader.complete(2)
    leader.complete(1)
    await asyncio.wait_for(run, 2)
    assert [w.correlation_id for w in leader.written] == [2, 1]


async def test_the_stream_ending_cancels_the_unanswered_messages() -> None:
    leader = Leader()
    run = asyncio.create_task(ProduceStreamHandler(leader.produce, leader.write, _no_refusal).run(leader.stream()))
    leader.send(1)
    leader.send(2)
    await _until(lambda: len(leader.started) == 2)
    leader.complete(1)
    await _until(lambda: len(leader.written) == 1)
    run.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await run
    await _until(lambda: leader.cancelled == [2])


async def test_a_failed_write_ends_the_stream() -> None:
    leader = Leader()

    async def write(response: object) -> None:
        raise RuntimeError("the connection is gone")

    run = asyncio.create_task(ProduceStreamHandler(leader.produce, write, _no_refusal).run(leader.stream()))
    leader.send(1)
    leader.send(2)
    await _until(lambda: len(leader.started) == 2)
    leader.complete(1)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(run, 2)
    await _until(lambda: leader.cancelled == [2])


async def test_a_refusal_that_raises_answers_what_was_read_before_and_ends_the_stream() -> None:
    """The interceptor's check raises when the stream's principal is no longer proven: the message it was
    asked about is never handled, the messages read before it are answered (their appends may have
    happened), then the stream ends with the exception."""
    leader = Leader()
    revoked = False

    def refusal(request: tablet_pb2.ProduceLogRequest) -> None:
        if revoked:
            raise PermissionError("the stream's user was removed")

    run = asyncio.create_task(ProduceStreamHandler(leader.produce, leader.write, refusal).run(leader.stream()))
    leader.send(1)
    leader.send(2)
    await _until(lambda: len(leader.started) == 2)
    revoked = True
    leader.send(3)
    await _until(lambda: leader.requests.empty())
    await asyncio.sleep(0.01)
    assert not run.done()  # 1 and 2 are still being handled: their answers are owed
    leader.complete(2)
    leader.complete(1)
    with pytest.raises(PermissionError, match="removed"):
        await asyncio.wait_for(run, 2)
    assert leader.started == [1, 2]  # 3 never reached the replica layer
    assert [w.correlation_id for w in leader.written] == [2, 1] and not leader.cancelled
