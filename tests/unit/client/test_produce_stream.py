"""``ProduceStreamClient``: correlation ids, answers out of order, a broken stream, timeouts, one writer.

The stream is an in-memory duplex (``MemoryStream``): the test plays the leader, reading what the client
wrote and answering in any order, or breaking the stream. No sockets.
"""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.produce_stream import ProduceStreamClient
from fluss_py.client.producer.request import encode_produce_request
from fluss_py.errors import ErrorCode, FlussError, NetworkExceptionError
from fluss_py.rpc.pb import tablet_pb2

_END = object()


class MemoryStream:
    """A DuplexStream: the client's writes land in ``written``; the test feeds answers or an end."""

    def __init__(self) -> None:
        self.written: asyncio.Queue[object] = asyncio.Queue()
        self._answers: asyncio.Queue[object] = asyncio.Queue()
        self.cancelled = False
        self.writing = 0  # writes in progress now
        self.max_writing = 0
        self.write_delay = 0.0
        self.readied = 0

    async def write(self, message: object) -> None:
        if self.cancelled:
            raise NetworkExceptionError("written after the end")
        self.writing += 1
        self.max_writing = max(self.max_writing, self.writing)
        try:
            await asyncio.sleep(self.write_delay)
            await self.written.put(tablet_pb2.ProduceLogRequest.FromString(message.SerializeToString()))
        finally:
            self.writing -= 1

    async def ready(self, marker: tuple[str, str]) -> None:
        self.readied += 1  # the in-memory leader takes every stream at once

    async def read(self) -> object:
        answer = await self._answers.get()
        if answer is _END or isinstance(answer, BaseException):
            self.cancelled = True
            raise answer if isinstance(answer, BaseException) else NetworkExceptionError("the leader ended it")
        return answer

    def cancel(self) -> None:
        self.cancelled = True
        self._answers.put_nowait(_END)

    # ---- the leader's side
    def answer(self, correlation_id: int, base_offset: int = 0) -> None:
        response = tablet_pb2.ProduceLogResponse(correlation_id=correlation_id)
        response.buckets.add(base_offset=base_offset)
        self._answers.put_nowait(response)

    def end(self, error: BaseException | None = None) -> None:
        self._answers.put_nowait(error if error is not None else _END)


class Opener:
    def __init__(self) -> None:
        self.streams: list[MemoryStream] = []

    def __call__(self) -> MemoryStream:
        self.streams.append(MemoryStream())
        return self.streams[-1]


def _client(opener: Opener) -> ProduceStreamClient:
    def broken(cause: BaseException) -> BaseException:
        return cause if isinstance(cause, FlussError) else NetworkExceptionError(repr(cause))

    return ProduceStreamClient(opener, broken, "ProduceLogStream to test")


def _request(n: int = 1) -> object:
    return encode_produce_request(-1, 30_000, [(1, 0, bytes([n]) * 10)])


async def _received(opener: Opener, index: int, count: int) -> list[tablet_pb2.ProduceLogRequest]:
    """The next ``count`` messages written on the ``index``-th stream opened (waits for it to open)."""
    async with asyncio.timeout(2):
        while len(opener.streams) <= index:
            await asyncio.sleep(0)
        stream = opener.streams[index]
        return [await stream.written.get() for _ in range(count)]


async def test_answers_out_of_order_reach_their_own_callers() -> None:
    opener = Opener()
    client = _client(opener)
    calls = [asyncio.create_task(client.call(_request(i), 5)) for i in range(3)]
    sent = await _received(opener, 0, 3)
    assert [m.correlation_id for m in sent] == [1, 2, 3]  # numbered in write order, from 1
    assert [m.buckets[0].records for m in sent] == [bytes([i]) * 10 for i in range(3)]  # batches intact
    stream = opener.streams[0]
    for correlation_id, offset in ((3, 30), (1, 10), (2, 20)):
        stream.answer(correlation_id, offset)
    answers = await asyncio.gather(*calls)
    assert [a.buckets[0].base_offset for a in answers] == [10, 20, 30]
    assert client.pending == 0 and client.opened == 1
    await client.close()


async def test_a_broken_stream_fails_every_pending_call_and_the_next_call_opens_a_new_one() -> None:
    opener = Opener()
    client = _client(opener)
    calls = [asyncio.create_task(client.call(_request(i), 5)) for i in range(3)]
    await _received(opener, 0, 3)
    opener.streams[0].answer(2)
    await asyncio.sleep(0.01)
    opener.streams[0].end()  # the leader died: 1 and 3 have no answer, their fate is unknown
    results = await asyncio.gather(*calls, return_exceptions=True)
    assert isinstance(results[1], tablet_pb2.ProduceLogResponse)
    for r in (results[0], results[2]):
        assert isinstance(r, FlussError) and r.code is ErrorCode.NETWORK_EXCEPTION and r.retriable
    assert client.pending == 0
    assert opener.streams[0].cancelled
    again = asyncio.create_task(client.call(_request(), 5))
    (message,) = await _received(opener, 1, 1)  # a new stream
    assert message.correlation_id == 4  # never an id of the broken stream: no answer can be mistaken
    opener.streams[1].answer(4, 7)
    assert (await again).buckets[0].base_offset == 7
    assert client.opened == 2
    await client.close()


async def test_the_stream_error_is_what_broken_makes_of_it() -> None:
    opener = Opener()
    client = _client(opener)
    call = asyncio.create_task(client.call(_request(), 5))
    await _received(opener, 0, 1)
    opener.streams[0].end(RuntimeError("reset by peer"))
    with pytest.raises(NetworkExceptionError, match="reset by peer"):
        await call
    await client.close()


async def test_a_late_or_unknown_answer_is_dropped() -> None:
    opener = Opener()
    client = _client(opener)
    with pytest.raises(FlussError) as timed_out:
        await client.call(_request(), 0.05)  # nobody answers in time
    assert timed_out.value.code is ErrorCode.REQUEST_TIMED_OUT and timed_out.value.retriable
    stream = opener.streams[0]
    stream.answer(1)  # the late answer of the timed-out call
    stream.answer(99)  # never asked
    call = asyncio.create_task(client.call(_request(), 5))
    sent = await _received(opener, 0, 2)
    assert sent[-1].correlation_id == 2
    await asyncio.sleep(0.01)
    assert not call.done()  # neither stray answer was taken for it
    stream.answer(2, 5)
    assert (await call).buckets[0].base_offset == 5
    assert client.opened == 1  # a timeout leaves the stream open
    await client.close()


async def test_one_write_at_a_time_in_call_order() -> None:
    opener = Opener()
    client = _client(opener)
    first = asyncio.create_task(client.call(_request(0), 5))
    await asyncio.sleep(0)
    opener.streams[0].write_delay = 0.01
    calls = [first, *(asyncio.create_task(client.call(_request(i), 5)) for i in range(1, 6))]
    sent = await _received(opener, 0, 6)
    assert opener.streams[0].max_writing == 1  # grpc allows one write in progress per call
    assert [m.correlation_id for m in sent] == [1, 2, 3, 4, 5, 6]
    assert [m.buckets[0].records[0] for m in sent] == [0, 1, 2, 3, 4, 5]
    for m in sent:
        opener.streams[0].answer(m.correlation_id)
    await asyncio.gather(*calls)
    await client.close()


async def test_a_cancelled_call_is_forgotten_and_close_fails_the_rest() -> None:
    opener = Opener()
    client = _client(opener)
    gone = asyncio.create_task(client.call(_request(), 5))
    kept = asyncio.create_task(client.call(_request(), 5))
    await _received(opener, 0, 2)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert client.pending == 1
    await client.close()
    with pytest.raises(NetworkExceptionError):
        await kept
    assert opener.streams[0].cancelled


async def test_nothing_is_written_before_the_server_accepted_the_stream() -> None:
    """A server without ProduceLogStream (or refusing the caller) ends it at open: the calls waiting fail with
    that status and none of their messages was written (a write racing the status would blur it)."""
    opener = Opener()

    async def refused(marker: tuple[str, str]) -> None:
        await asyncio.sleep(0.01)
        raise NetworkExceptionError("UNIMPLEMENTED: no ProduceLogStream here")

    def open_refused() -> MemoryStream:
        stream = opener()
        stream.ready = refused  # type: ignore[method-assign]
        return stream

    client = ProduceStreamClient(open_refused, lambda cause: cause, "ProduceLogStream to test")
    results = await asyncio.gather(*(client.call(_request(i), 5) for i in range(3)), return_exceptions=True)
    assert all(isinstance(r, NetworkExceptionError) and "UNIMPLEMENTED" in str(r) for r in results)
    assert opener.streams[0].written.empty()
    assert client.pending == 0
    await client.close()
