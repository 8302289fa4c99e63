"""The purgatories' wait (fluss_py/replica/delayed.py): how many loop turns an answer takes, and timeouts."""

from __future__ import annotations

import asyncio

from fluss_py.replica.delayed import DelayedProduce, Waker, wait_futures
from fluss_py.types import TableBucket

TB = TableBucket(1, 0)


async def test_a_parked_produce_resumes_in_the_turn_after_the_hw_reaches_it() -> None:
    """docs/performance.md "Where the latency goes": the request completing the HW (a follower's fetch) makes the
    acks=all produce runnable at once; it answers in the next loop turn, not two turns later."""
    delayed = DelayedProduce()
    futures = [delayed.add(TB, 5), delayed.add(TableBucket(1, 1), 3)]
    waiting = asyncio.create_task(wait_futures(futures, 10.0))
    await asyncio.sleep(0)  # parked
    assert not waiting.done()
    delayed.complete_up_to(TableBucket(1, 1), 3)
    assert delayed.complete_up_to(TB, 5) == 1  # synchronously, as a follower fetch's read does
    await asyncio.sleep(0)  # one turn
    assert waiting.done()
    assert [f.result() for f in futures] == [None, None]


async def test_a_parked_long_poll_resumes_in_the_turn_after_a_wake() -> None:
    waker = Waker()
    waiting = asyncio.create_task(wait_futures((waker.arm(),), 10.0))
    await asyncio.sleep(0)
    waker.wake(TB)
    await asyncio.sleep(0)
    assert waiting.done() and waker.take_dirty() == {TB}


async def test_the_timeout_cancels_what_is_still_pending_and_keeps_what_completed() -> None:
    delayed = DelayedProduce()
    done, pending = delayed.add(TB, 1), delayed.add(TB, 9)
    delayed.complete_up_to(TB, 1)
    await wait_futures([done, pending], 0.01)
    assert done.result() is None
    assert pending.cancelled()


async def test_cancelling_the_waiter_propagates() -> None:
    """A request whose caller went away is cancelled, not turned into a timeout."""
    future = asyncio.get_running_loop().create_future()
    waiting = asyncio.create_task(wait_futures([future], 10.0))
    await asyncio.sleep(0)
    waiting.cancel()
    try:
        await waiting
    except asyncio.CancelledError:
        pass
    assert waiting.cancelled()
