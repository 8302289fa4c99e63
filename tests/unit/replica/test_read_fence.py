"""The read fence of KV reads (docs/primary-key-tables.md §1 invariant 5, replica/read_fence.py): a leader
answers a lookup only once every other member of its ISR sent, after the lookup arrived, a fetch that holds
the bucket at the leader's epoch — proven by the fetch session's order (the request after an answer produced
after the lookup arrived), not by when a request reached the leader.

Most tests drive one leader ReplicaManager (server 1) whose followers 2 and 3 are fetch sessions sent by hand
(``HandFetches``); the last ones run three managers with their real fetchers."""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from fluss_py.errors import ErrorCode
from fluss_py.replica.fetcher.state import FetchSettings
from fluss_py.replica.kv_reads import KvReadResult, KvReads
from fluss_py.replica.manager import ReplicaManager
from fluss_py.replica.messages import LeaderAndIsrItem
from fluss_py.replica.read_fence import confirmed_through
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr
from tests.unit.kv.helpers import SCHEMA, key, kv_batch, row, upsert
from tests.unit.replica.fakes import FakeClock, HandFetches
from tests.unit.replica.harness import LAG_S, SETTINGS, TB, ReplicaCluster, node

R3 = (1, 2, 3)
MIN1 = {"min.insync.replicas": "1"}


# ---------------------------------------------------------------- the decision


def test_confirmed_through_is_the_oldest_latest_proof_of_the_members_at_the_epoch() -> None:
    assert confirmed_through(1, 4, (1,), []) == math.inf  # the leader alone: nothing to confirm
    assert confirmed_through(1, 4, (), []) == math.inf
    assert confirmed_through(1, 4, R3, [(2, 4, 9)]) == 0  # member 3 never proved
    assert confirmed_through(1, 4, R3, [(2, 4, 9), (3, 4, 7), (3, 4, 12), (2, 4, 5)]) == 9  # min over members of max
    assert confirmed_through(1, 4, R3, [(2, 4, 9), (3, 3, 20)]) == 0  # 3 holds the bucket at an older epoch
    assert confirmed_through(1, 4, R3, [(2, 4, 9), (3, 3, 20), (3, 4, 8)]) == 8
    assert confirmed_through(1, 4, R3, [(2, 4, 9), (3, 5, 20)]) == 0  # nor a newer one
    assert confirmed_through(1, 4, (1, 2), [(2, 4, 9), (3, 4, 1)]) == 9  # a non-member's proof is ignored
    assert confirmed_through(1, 4, (1, 2), [(2, 4, 0)]) == 0  # a session never answered proves nothing


# ---------------------------------------------------------------- one leader, followers by hand


async def lookup(m: ReplicaManager, *keys: bytes, timeout_s: float = 10.0) -> KvReadResult:
    return (await KvReads(m, m.kv).lookup({TB: list(keys)}, timeout_s))[TB]


async def leader_of(c: ReplicaCluster, isr: tuple[int, ...] = R3, epoch: int = 0) -> ReplicaManager:
    """Server 1 leads TB (replicas 1, 2, 3) at ``epoch``; key 1 holds row (1, "a", 1), committed and applied
    once the followers fetched."""
    c.schemas[TB.table_id] = SCHEMA
    c.coordinator.state[TB] = LeaderAndIsr(1, epoch, isr, c.coordinator_epoch, 0)
    await c.notify(TB, R3, MIN1)
    m = c.managers[1]
    assert (await m.append(1, 5.0, {TB: kv_batch([upsert(1, "a", 1)])}))[TB].error is None
    return m


async def caught_up(m: ReplicaManager, *followers: HandFetches, epoch: int = 0) -> None:
    """Each follower opens its session at the leader's LEO: the HW reaches it, and the KV applies it."""
    replica = m.replica(TB)
    for f in followers:
        await f.open({TB: (replica.log_end_offset, epoch)})
    await wait_until(lambda: replica.kv.applied_offset == replica.log_end_offset, message="the KV applied the HW")


@asynccontextmanager
async def led_by_1(clock: FakeClock, tmp_path: Path, epoch: int = 0) -> AsyncIterator[tuple[ReplicaManager, ...]]:
    """``leader_of`` with followers 2 and 3 by hand, both caught up at ``epoch``: (leader, f2, f3)."""
    c = ReplicaCluster(1, clock, tmp_path)
    try:
        m = await leader_of(c, epoch=epoch)
        f2, f3 = HandFetches(m, 2), HandFetches(m, 3)
        await caught_up(m, f2, f3, epoch=epoch)
        yield m, f2, f3
    finally:
        await c.close()


async def test_a_lookup_waits_until_every_isr_member_fetched_after_it_arrived(clock, tmp_path: Path) -> None:
    async with led_by_1(clock, tmp_path) as (m, f2, f3):
        fence = m.reads.fence
        waiting = asyncio.ensure_future(lookup(m, key(1)))
        await wait_until(lambda: fence.rounds == 1, message="the lookup's round started")
        await f2.next()  # sent before the round's answers: proves nothing, answered at once
        await f2.next()  # sent after its answer: 2 fetched after the lookup arrived
        assert m.reads.fence.waiting(TB) == 1  # 3 has not
        await f3.next()
        assert m.reads.fence.waiting(TB) == 1
        await f3.next()
        answer = await asyncio.wait_for(waiting, 5)
        assert answer.error is None and answer.values == [row(1, "a", 1)]


async def test_a_parked_fetch_is_answered_at_once_and_a_fetch_sent_before_the_lookup_does_not_count(
    clock, tmp_path: Path
) -> None:
    """Follower 2's long poll, parked before the lookup arrived, is answered at once (not after its 30 s) and
    confirms nothing; follower 3's next request reaches the leader after the lookup arrived, but was sent
    before the leader answered anything after it (it could have waited in a socket buffer while the leader was
    paused): it confirms nothing either. Their following requests do."""
    async with led_by_1(clock, tmp_path) as (m, f2, f3):
        parked = asyncio.ensure_future(f2.next(max_wait_s=30.0))
        session = m.reads.fetch_sessions.get(f2.session_id)
        await wait_until(lambda: session.future is not None and not session.future.done(), message="2 is parked")
        waiting = asyncio.ensure_future(lookup(m, key(1)))
        answer = await asyncio.wait_for(parked, 5)  # the round answered it, with no records
        assert all(not r.records for r in answer.buckets.values())
        await asyncio.wait_for(f3.next(max_wait_s=30.0), 5)  # not parked either: the round needs an answer
        proving = asyncio.ensure_future(f2.next(max_wait_s=30.0))  # sent after the round's answer: counts
        await wait_until(lambda: session.future is not None and not session.future.done(), message="2 parks")
        assert m.reads.fence.waiting(TB) == 1  # (2 confirmed; 3 not yet)
        confirming = asyncio.ensure_future(f3.next(max_wait_s=30.0))
        assert (await asyncio.wait_for(waiting, 5)).values == [row(1, "a", 1)]
        assert not proving.done() and not confirming.done()  # confirming requests park as usual: nothing is owed


async def test_a_session_holding_the_bucket_at_an_older_leader_epoch_does_not_count(clock, tmp_path: Path) -> None:
    async with led_by_1(clock, tmp_path, epoch=1) as (m, f2, f3):
        stale = HandFetches(m, 3)  # 3 again, as a follower that has not heard of epoch 1 would fetch
        refused = await stale.open({TB: (m.replica(TB).log_end_offset, 0)})
        assert refused.buckets[TB].error is not None
        assert refused.buckets[TB].error.code is ErrorCode.FENCED_LEADER_EPOCH
        waiting = asyncio.ensure_future(lookup(m, key(1)))
        await wait_until(lambda: m.reads.fence.rounds == 1, message="the lookup's round started")
        for f in (f2, f2, stale, stale, stale):
            await f.next()
        assert m.reads.fence.waiting(TB) == 1  # 2 confirmed; 3 only at epoch 0
        await f3.next()
        await f3.next()
        assert (await asyncio.wait_for(waiting, 5)).values == [row(1, "a", 1)]


async def test_a_leader_alone_in_its_isr_answers_at_once(clock, tmp_path: Path) -> None:
    c = ReplicaCluster(1, clock, tmp_path)
    try:
        m = await leader_of(c, isr=(1,))  # 2 and 3 out of the ISR: no leader can be chosen without us
        replica = m.replica(TB)
        await wait_until(lambda: replica.kv.applied_offset == replica.log_end_offset, message="the KV applied it")
        answer = await lookup(m, key(1), timeout_s=0.5)
        assert answer.error is None and answer.values == [row(1, "a", 1)]
        assert m.reads.fence.rounds == 0
    finally:
        await c.close()


async def test_lookups_arriving_together_share_one_round(clock, tmp_path: Path) -> None:
    async with led_by_1(clock, tmp_path) as (m, f2, f3):
        fence = m.reads.fence
        waiting = [asyncio.ensure_future(lookup(m, key(1))) for _ in range(20)]
        await wait_until(lambda: fence.rounds == 1, message="the round started")
        for f in (f2, f2, f3, f3):  # two requests per follower, whatever the number of lookups
            await f.next()
        answers = await asyncio.wait_for(asyncio.gather(*waiting), 5)
        assert all(a.error is None and a.values == [row(1, "a", 1)] for a in answers)
        assert (fence.rounds, fence.wakeups) == (1, 2)  # one round, one wake-up per follower session


async def test_a_member_that_stopped_fetching_holds_lookups_until_it_leaves_the_isr(clock, tmp_path: Path) -> None:
    async with led_by_1(clock, tmp_path) as (m, f2, _):  # then 3 stops fetching
        timed_out = asyncio.ensure_future(lookup(m, key(1), timeout_s=0.3))
        await f2.next()
        await f2.next()
        answer = await timed_out
        assert answer.error is not None and answer.error.code is ErrorCode.KV_NOT_READY
        assert "ISR members [2, 3]" in answer.error.message and answer.values == []
        waiting = asyncio.ensure_future(lookup(m, key(1)))
        await wait_until(lambda: m.reads.fence.rounds == 2, message="the second lookup's round started")
        clock.advance(LAG_S + 1)  # 3 lags past replica.lag.time.max; 2 fetches on
        await f2.next()
        await f2.next()
        assert m.reads.fence.waiting(TB) == 1
        assert m.maybe_shrink_isr() == 1  # the AdjustIsr goes to the coordinator, whose answer removes 3
        answer = await asyncio.wait_for(waiting, 5)
        assert m.replica(TB).isr == (1, 2)
        assert answer.error is None and answer.values == [row(1, "a", 1)]


# ---------------------------------------------------------------- three managers, real fetchers


async def test_a_deposed_leader_that_does_not_know_it_answers_no_read(clock, tmp_path: Path) -> None:
    """Server 1 led at epoch 0; cut off, it missed its replacement by 2 (epoch 1), which acknowledged a new row.
    Back, it still believes it leads, but nobody fetches the bucket from it at epoch 0 any more: its lookups,
    prefix lookups and scans answer KV_NOT_READY, never the row it holds."""
    c = ReplicaCluster(3, clock, tmp_path)
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, R3)
        m1 = c.managers[1]
        assert (await m1.append(-1, 5.0, {TB: kv_batch([upsert(1, "old", 1)])}))[TB].error is None
        assert (await lookup(m1, key(1))).values == [row(1, "old", 1)]
        c.down.add(1)
        lai = c.coordinator.state[TB] = c.coordinator.state[TB].with_leader(2, (2, 3), c.coordinator_epoch)
        for s in (2, 3):  # 1 does not hear of it
            item = LeaderAndIsrItem(TB, lai, R3, {}, (), SCHEMA, 1)
            await c.managers[s].become_leader_or_follower(c.coordinator_epoch, [item], [node(r) for r in R3])
        assert (await c.managers[2].append(-1, 5.0, {TB: kv_batch([upsert(1, "new", 2)])}))[TB].error is None
        c.down.discard(1)
        assert m1.replica(TB).is_leader and m1.replica(TB).leader_epoch == 0
        reads = KvReads(m1, m1.kv)
        answers = [
            (await reads.lookup({TB: [key(1)]}, 0.5))[TB],
            (await reads.prefix_lookup({TB: [key(1)]}, 0.5, 0))[TB],
            await reads.scan(TB, None, 0, 0.5),
        ]
        for answer in answers:
            assert answer.error is not None and answer.error.code is ErrorCode.KV_NOT_READY, answer
            assert answer.values == [] and answer.groups == [] and answer.rows == []
        assert (await lookup(c.managers[2], key(1))).values == [row(1, "new", 2)]
    finally:
        await c.close()


@pytest.mark.parametrize("streams", [False, True], ids=["unary", "streams"])
async def test_lookups_do_not_wait_for_the_followers_long_polls(tmp_path: Path, streams: bool) -> None:
    """The followers long-poll for 5 s at a time; lookups with 3 s to wait are answered: their rounds answer
    the parked fetches at once, and the followers' next requests confirm."""
    settings = replace(SETTINGS, fetch=FetchSettings(wait_max_s=5.0, backoff_s=0.01))
    c = ReplicaCluster(3, FakeClock(), tmp_path, settings)
    c.streams = streams
    c.schemas[TB.table_id] = SCHEMA
    try:
        await c.create(TB, R3)
        m1 = c.managers[1]
        assert (await m1.append(-1, 5.0, {TB: kv_batch([upsert(1, "a", 1)])}))[TB].error is None
        sessions = m1.reads.fetch_sessions
        await wait_until(
            lambda: sum(1 for s in sessions.sessions_of(TB) if s.future is not None and not s.future.done()) == 2,
            message="both followers parked",
        )
        for i in range(3):
            answer = await lookup(m1, key(1), timeout_s=3.0)
            assert answer.error is None and answer.values == [row(1, "a", 1)], (i, answer)
    finally:
        await c.close()
