"""A tablet server's death in two rounds (docs/control-plane.md §6, "Tablet server died"): the buckets it led
get a leader in the death's event; it leaves the ISRs of the buckets it followed in a follow-up event, which
runs before any other membership change."""

from __future__ import annotations

import pytest

from fluss_py.coordinator import membership
from fluss_py.coordinator.events import CreateTable, DeadLeaveIsrs
from fluss_py.types import TablePath

from .harness import Harness, fresh_zk

T = TablePath("fluss", "orders")


class QueueingLoop:
    """Stands in for the CoordinatorEventLoop: records handlers and the events the processor queues."""

    def __init__(self) -> None:
        self.handlers: dict = {}
        self.events: list = []

    def register(self, event_type, handler) -> None:
        self.handlers[event_type] = handler

    def put(self, event) -> None:
        self.events.append(event)

    def followups(self) -> list[DeadLeaveIsrs]:
        return [e for e in self.events if isinstance(e, DeadLeaveIsrs)]


@pytest.fixture
async def h():
    zk, fence = fresh_zk()
    harness = Harness(zk, {1: "", 2: "", 3: ""}, fence)
    await harness.start()
    harness.loop = QueueingLoop()
    harness.proc.install(harness.loop)
    yield harness
    await harness.channel.close()


async def _table(h) -> tuple[int, set[int]]:
    table_id = await h.proc.create_table(CreateTable(T, num_buckets=6, replication_factor=3))
    await h.drain()
    led_by_3 = {b for b in range(6) if h.lai(table_id, b).leader == 3}
    assert led_by_3 and len(led_by_3) < 6
    return table_id, led_by_3


async def test_every_bucket_is_led_after_the_death_event_and_the_isrs_are_left_in_the_followup(h) -> None:
    table_id, led_by_3 = await _table(h)
    await h.kill(3)
    for b in range(6):
        lai = h.lai(table_id, b)
        assert lai.leader in (1, 2)
        assert (3 in lai.isr) is (b not in led_by_3)  # a followed bucket still names it until the follow-up
    (followup,) = h.loop.followups()
    assert followup.servers == [3]
    await h.loop.handlers[DeadLeaveIsrs](followup)
    await h.drain()
    assert all(3 not in h.lai(table_id, b).isr for b in range(6))


async def test_a_server_back_before_the_followup_leaves_every_isr_before_its_return_is_handled(h) -> None:
    table_id, led_by_3 = await _table(h)
    await h.kill(3)
    before = {b: h.lai(table_id, b) for b in range(6)}
    await h.revive(3)  # re-registered before the follow-up ran: handled as dead first
    for b in range(6):
        lai = h.lai(table_id, b)
        assert 3 not in lai.isr  # the leader adds it back by AdjustIsr once it has caught up
        if b not in led_by_3:
            assert lai.leader == before[b].leader and lai.bucket_epoch == before[b].bucket_epoch + 1
    (followup,) = h.loop.followups()
    versions = {b: h.lai(table_id, b) for b in range(6)}
    await h.loop.handlers[DeadLeaveIsrs](followup)  # nothing left to do
    assert {b: h.lai(table_id, b) for b in range(6)} == versions


async def test_the_followup_leaves_the_isrs_in_chunks_each_queued_as_the_next_event(h, monkeypatch) -> None:
    """A chunk per event (LEAVE_ISRS_CHUNK buckets, in table and bucket order): the events that waited run
    between two chunks, so none of them waits for the whole round."""
    monkeypatch.setattr(membership, "LEAVE_ISRS_CHUNK", 2)
    table_id, led_by_3 = await _table(h)
    await h.kill(3)
    for chunk in range(3):  # 6 buckets with a replica on 3: three events
        followups = h.loop.followups()
        assert len(followups) == chunk + 1
        await h.loop.handlers[DeadLeaveIsrs](followups[-1])
        await h.drain()
        for b in range(6):
            done = b < 2 * (chunk + 1) or b in led_by_3
            assert (3 not in h.lai(table_id, b).isr) is done, (chunk, b)
    assert len(h.loop.followups()) == 3  # the last chunk queued nothing
    assert not h.proc._isr_leavers and h.proc._isr_leave_todo is None


async def test_a_return_in_the_middle_of_the_chunks_finishes_the_round_first(h, monkeypatch) -> None:
    monkeypatch.setattr(membership, "LEAVE_ISRS_CHUNK", 2)
    table_id, _ = await _table(h)
    await h.kill(3)
    await h.loop.handlers[DeadLeaveIsrs](h.loop.followups()[-1])  # one chunk of three
    await h.revive(3)
    assert all(3 not in h.lai(table_id, b).isr for b in range(6))
    versions = {b: h.lai(table_id, b) for b in range(6)}
    await h.loop.handlers[DeadLeaveIsrs](h.loop.followups()[-1])  # queued by the first chunk: nothing left
    assert {b: h.lai(table_id, b) for b in range(6)} == versions
