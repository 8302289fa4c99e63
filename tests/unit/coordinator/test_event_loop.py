"""The single-writer event loop: order, guard before every event, fencing, teardown."""

import asyncio
from dataclasses import dataclass

import pytest

from fluss_py.coordinator.event_loop import CoordinatorEventLoop
from fluss_py.coordinator.events import Event
from fluss_py.errors import DatabaseNotExistError, NotCoordinatorLeaderError
from fluss_py.zk.values import EpochFencedError


@dataclass(eq=False)
class Step(Event):
    n: int


async def _ok_guard() -> None:
    return None


async def test_events_apply_one_at_a_time_in_order():
    applied, active = [], []

    async def handle(ev: Step) -> int:
        active.append(ev.n)
        assert len(active) == 1, "two handlers ran at once"
        await asyncio.sleep(0)
        applied.append(ev.n)
        active.pop()
        return ev.n * 10

    loop = CoordinatorEventLoop(_ok_guard, lambda: None)
    loop.register(Step, handle)
    loop.start()
    results = await asyncio.gather(*(loop.submit(Step(i)) for i in range(20)))
    assert results == [i * 10 for i in range(20)]
    assert applied == list(range(20))
    await loop.stop()


async def test_guard_failure_refuses_the_event_without_running_it():
    ran = []
    allowed = True

    async def guard() -> None:
        if not allowed:
            raise RuntimeError("ZooKeeper session lost")

    async def handle(ev: Step) -> None:
        ran.append(ev.n)

    loop = CoordinatorEventLoop(guard, lambda: None)
    loop.register(Step, handle)
    loop.start()
    await loop.submit(Step(1))
    allowed = False
    with pytest.raises(NotCoordinatorLeaderError):
        await loop.submit(Step(2))
    assert ran == [1]
    await loop.stop()


async def test_fenced_write_fails_the_event_and_reports_fencing():
    fenced = []

    async def handle(ev: Step) -> None:
        raise EpochFencedError("epoch 3 fenced")

    loop = CoordinatorEventLoop(_ok_guard, lambda: fenced.append(True))
    loop.register(Step, handle)
    loop.start()
    with pytest.raises(NotCoordinatorLeaderError):
        await loop.submit(Step(1))
    assert fenced == [True]
    await loop.stop()


async def test_handler_errors_reach_the_caller_and_the_loop_goes_on():
    async def handle(ev: Step) -> int:
        if ev.n == 1:
            raise DatabaseNotExistError("no such database")
        return ev.n

    loop = CoordinatorEventLoop(_ok_guard, lambda: None)
    loop.register(Step, handle)
    loop.start()
    with pytest.raises(DatabaseNotExistError):
        await loop.submit(Step(1))
    assert await loop.submit(Step(2)) == 2
    await loop.stop()


async def test_stop_fails_queued_events_and_refuses_new_ones():
    gate = asyncio.Event()

    async def handle(ev: Step) -> None:
        await gate.wait()

    loop = CoordinatorEventLoop(_ok_guard, lambda: None)
    loop.register(Step, handle)
    loop.start()
    running = asyncio.ensure_future(loop.submit(Step(1)))
    queued = asyncio.ensure_future(loop.submit(Step(2)))
    await asyncio.sleep(0.01)
    await loop.stop()
    for fut in (running, queued):
        with pytest.raises(NotCoordinatorLeaderError):
            await fut
    with pytest.raises(NotCoordinatorLeaderError):
        await loop.submit(Step(3))


async def test_a_submitter_gets_its_answer_before_the_next_handler_runs():
    answered: list[int] = []
    seen_by_next: list[list[int]] = []

    async def handle(ev: Step) -> int:
        seen_by_next.append(list(answered))
        return ev.n

    async def ask(n: int) -> None:
        answered.append(await loop.submit(Step(n)))

    loop = CoordinatorEventLoop(_ok_guard, lambda: None)
    loop.register(Step, handle)
    asks = [asyncio.ensure_future(ask(n)) for n in range(3)]
    await asyncio.sleep(0)  # all three queued before the loop starts
    loop.start()
    await asyncio.gather(*asks)
    # each handler started after the previous event's submitter had its result (it could send its answer)
    assert seen_by_next == [[], [0], [0, 1]]
    await loop.stop()
