"""The controlled-shutdown client loop (tablet/controlled_shutdown.py): one call may use the whole budget (the
coordinator finishes a call its client gave up on, so a retry after a short timeout only queues the same work
again), and failures that come back at once are retried within the budget."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.tablet.controlled_shutdown import controlled_shutdown
from fluss_py.types import TableBucket

Answer = tuple[list[TableBucket] | None, str]

pytestmark = pytest.mark.unit


class Coordinator:
    """Answers each call with the next scripted (remaining, why) after ``delay`` seconds, or times the call out
    as gRPC would when ``delay`` exceeds the call's timeout."""

    def __init__(self, answers: list[Answer], delay: float = 0.0) -> None:
        self.answers = answers
        self.delay = delay
        self.timeouts: list[float] = []

    async def ask(self, address: str, server_id: int, timeout_s: float, token: str) -> Answer:
        self.timeouts.append(timeout_s)
        if self.delay > timeout_s:
            await asyncio.sleep(timeout_s)
            return None, f"{address}: DEADLINE_EXCEEDED"
        await asyncio.sleep(self.delay)
        return self.answers.pop(0)


async def test_a_slow_coordinator_is_waited_for_once_not_asked_again() -> None:
    coordinator = Coordinator([([], "")], delay=0.3)
    done = await controlled_shutdown(2, lambda: "c:1", 1.0, ask=coordinator.ask)
    assert done
    assert len(coordinator.timeouts) == 1
    assert coordinator.timeouts[0] > 0.9  # the whole budget, not a shorter per-call timeout


async def test_quick_failures_and_remaining_leaders_are_retried_within_the_budget() -> None:
    still = [TableBucket(1, 0)]
    coordinator = Coordinator([(None, "c:1: UNAVAILABLE"), (still, ""), (None, "hint:c:2"), ([], "")])
    addresses: list[str] = []
    real_ask = coordinator.ask

    async def ask(address: str, server_id: int, timeout_s: float, token: str) -> Answer:
        addresses.append(address)
        return await real_ask(address, server_id, timeout_s, token)

    assert await controlled_shutdown(2, lambda: "c:1", 2.0, ask=ask)
    assert addresses == ["c:1", "c:1", "c:1", "c:2"]  # the hint is followed at once
    assert all(later <= earlier for earlier, later in zip(coordinator.timeouts, coordinator.timeouts[1:], strict=False))


async def test_a_coordinator_that_never_answers_ends_the_attempt_at_the_deadline() -> None:
    coordinator = Coordinator([], delay=10.0)
    assert not await controlled_shutdown(2, lambda: "c:1", 0.5, ask=coordinator.ask)
    assert len(coordinator.timeouts) == 1  # no second call once the budget is used up
