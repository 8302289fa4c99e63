"""``LockstepStreamClient`` (a consumer's fetches on ConsumerFetchStreams): one exchange at a time per stream,
a stream reused only after its answer was read, a failed or abandoned exchange never leaving its stream for the
next call. The stream is in memory (the test plays the leader). No sockets.
"""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.client.lockstep_stream import MAX_IDLE, LockstepStreamClient
from fluss_py.errors import AuthenticationFailedError, FlussError, NetworkExceptionError, RequestTimedOutError
from fluss_py.rpc.streams import CONSUMER_FETCH_STREAM_ACCEPTED

pytestmark = pytest.mark.timeout(10)

_END = object()


class MemoryStream:
    """A DuplexStream: what the client writes lands in ``written``; the test answers with ``answer``."""

    def __init__(self, refuse: BaseException | None = None) -> None:
        self.written: asyncio.Queue[object] = asyncio.Queue()
        self._answers: asyncio.Queue[object] = asyncio.Queue()
        self.refuse = refuse
        self.cancelled = False
        self.readied: list[tuple[str, str]] = []

    async def ready(self, marker: tuple[str, str]) -> None:
        self.readied.append(marker)
        if self.refuse is not None:
            raise self.refuse

    async def write(self, message: object) -> None:
        if self.cancelled:
            raise NetworkExceptionError("written after the end")
        await self.written.put(message)

    async def read(self) -> object:
        answer = await self._answers.get()
        if answer is _END:
            raise NetworkExceptionError("the leader ended it")
        return answer

    def cancel(self) -> None:
        self.cancelled = True
        self._answers.put_nowait(_END)

    def answer(self, message: object) -> None:
        self._answers.put_nowait(message)


class Opener:
    def __init__(self, refuse: BaseException | None = None) -> None:
        self.streams: list[MemoryStream] = []
        self.refuse = refuse

    def __call__(self) -> MemoryStream:
        self.streams.append(MemoryStream(self.refuse))
        return self.streams[-1]


def _client(opener: Opener) -> LockstepStreamClient:
    def broken(cause: BaseException) -> BaseException:
        return cause if isinstance(cause, FlussError) else NetworkExceptionError(repr(cause))

    return LockstepStreamClient(opener, broken, CONSUMER_FETCH_STREAM_ACCEPTED, "ConsumerFetchStream to test")


async def _serve_one(stream: MemoryStream, reply: object) -> object:
    async with asyncio.timeout(2):
        request = await stream.written.get()
    stream.answer(reply)
    return request


async def test_calls_one_after_another_share_one_stream_opened_once_and_accepted_before_the_first_write() -> None:
    opener = Opener()
    client = _client(opener)
    for i in range(3):
        call = asyncio.ensure_future(client.call(f"request {i}", 1.0))
        await asyncio.sleep(0)
        assert await _serve_one(opener.streams[0], f"answer {i}") == f"request {i}"
        assert await call == f"answer {i}"
    assert client.opened == 1 and len(opener.streams) == 1
    assert opener.streams[0].readied == [CONSUMER_FETCH_STREAM_ACCEPTED]  # once, when it opened


async def test_a_timed_out_exchange_drops_its_stream_so_its_late_answer_is_never_the_next_calls() -> None:
    opener = Opener()
    client = _client(opener)
    with pytest.raises(RequestTimedOutError):
        await client.call("slow", 0.05)
    first = opener.streams[0]
    assert first.cancelled
    first.answer("late answer to slow")  # arrives after the client gave up
    call = asyncio.ensure_future(client.call("next", 1.0))
    await asyncio.sleep(0)
    assert len(opener.streams) == 2
    assert await _serve_one(opener.streams[1], "answer to next") == "next"
    assert await call == "answer to next"


async def test_two_calls_at_once_use_two_streams_and_each_gets_its_own_answer() -> None:
    opener = Opener()
    client = _client(opener)
    a = asyncio.ensure_future(client.call("a", 1.0))
    b = asyncio.ensure_future(client.call("b", 1.0))
    await asyncio.sleep(0)
    assert len(opener.streams) == 2
    await _serve_one(opener.streams[1], "answer b")  # answered out of order
    await _serve_one(opener.streams[0], "answer a")
    assert (await a, await b) == ("answer a", "answer b")
    # both are idle now, and reused
    c = asyncio.ensure_future(client.call("c", 1.0))
    await asyncio.sleep(0)
    assert client.opened == 2
    (taken,) = [s for s in opener.streams if not s.written.empty()]
    await _serve_one(taken, "answer c")
    assert await c == "answer c"


async def test_idle_streams_are_capped() -> None:
    opener = Opener()
    client = _client(opener)
    calls = [asyncio.ensure_future(client.call(i, 1.0)) for i in range(MAX_IDLE + 2)]
    await asyncio.sleep(0)
    for i, stream in enumerate(opener.streams):
        await _serve_one(stream, i)
    assert [await c for c in calls] == list(range(MAX_IDLE + 2))
    assert sum(not s.cancelled for s in opener.streams) == MAX_IDLE


async def test_a_stream_ending_mid_exchange_fails_the_call_and_the_next_call_opens_a_new_one() -> None:
    opener = Opener()
    client = _client(opener)
    call = asyncio.ensure_future(client.call("x", 1.0))
    await asyncio.sleep(0)
    await opener.streams[0].written.get()
    opener.streams[0].cancel()  # the leader went away
    with pytest.raises(NetworkExceptionError):
        await call
    again = asyncio.ensure_future(client.call("y", 1.0))
    await asyncio.sleep(0)
    await _serve_one(opener.streams[1], "ok")
    assert await again == "ok"


async def test_a_refusal_at_open_is_what_broken_makes_of_it() -> None:
    opener = Opener(refuse=AuthenticationFailedError("who are you"))
    client = _client(opener)
    with pytest.raises(AuthenticationFailedError):
        await client.call("x", 1.0)
    assert opener.streams[0].written.empty()  # nothing written before the server took the stream


async def test_close_fails_a_call_in_progress_as_a_broken_stream_not_a_cancel() -> None:
    opener = Opener()
    client = _client(opener)
    call = asyncio.ensure_future(client.call("x", 1.0))
    await asyncio.sleep(0)
    client.close()
    with pytest.raises(NetworkExceptionError):
        await call
    assert all(s.cancelled for s in opener.streams)
