"""Incremental fetch sessions (docs/replication.md "Fetch sessions"): the leader's cache rules, what a
session request reads and answers, the caught-up rule for buckets a session does not re-read, and the
follower's side (deltas, starting over)."""

from __future__ import annotations

import asyncio

import pytest

from fluss_py.errors import ErrorCode, FetchSessionNotFoundError, InvalidFetchSessionEpochError
from fluss_py.replica.fetch_session import FetchSessionCache
from fluss_py.replica.messages import FetchBucketRequest, FetchRequest, FetchSessionRequest
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import TableBucket
from tests.unit.replica.fakes import FakeClock, batch, log_contents, values_of
from tests.unit.replica.harness import LAG_S, TB, ReplicaCluster

R3 = (1, 2, 3)
TB2 = TableBucket(7, 1)
MAX = 1 << 20


def position(tb: TableBucket, offset: int) -> FetchBucketRequest:
    return FetchBucketRequest(tb, offset, MAX, 0)


# ---------------------------------------------------------------- the cache alone


def test_open_continue_and_epoch_rules() -> None:
    clock = FakeClock()
    ids = iter([0, 11, 12])  # 0 is never a session id
    cache = FetchSessionCache(clock, new_id=lambda: next(ids))
    s = cache.begin(2, FetchSessionRequest(), [position(TB, 0), position(TB2, 0)])
    assert (s.id, s.next_epoch, set(s.positions)) == (11, 1, {TB, TB2})
    assert cache.begin(2, FetchSessionRequest(11, 1), []) is s and s.next_epoch == 2
    with pytest.raises(InvalidFetchSessionEpochError):
        cache.begin(2, FetchSessionRequest(11, 1), [])  # a repeated (or lost) request
    assert cache.get(11) is None  # a wrong epoch ends the session
    with pytest.raises(FetchSessionNotFoundError):
        cache.begin(2, FetchSessionRequest(11, 2), [])

    s = cache.begin(2, FetchSessionRequest(), [position(TB, 0)])
    with pytest.raises(FetchSessionNotFoundError):  # another follower's session
        cache.begin(3, FetchSessionRequest(s.id, 1), [])
    clock.advance(1)
    same = cache.begin(2, FetchSessionRequest(s.id, 1), [position(TB, 5)])
    assert same is s and s.positions[TB].fetch_offset == 5 and s.last_used == clock.now


def test_forgotten_buckets_leave_the_index_and_sessions_are_bounded() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock, per_follower=2, idle_s=60)
    a = cache.begin(2, FetchSessionRequest(), [position(TB, 0), position(TB2, 0)])
    cache.begin(2, FetchSessionRequest(a.id, 1, (TB2,)), [])
    assert list(cache.sessions_of(TB2)) == []
    assert cache.appended(TB2) == [] and a.dirty == set()

    clock.advance(1)
    b = cache.begin(2, FetchSessionRequest(), [position(TB, 0)])
    clock.advance(1)
    c = cache.begin(2, FetchSessionRequest(), [position(TB, 0)])  # a third: the least recently used goes
    assert cache.get(a.id) is None and a.closed
    assert {s.id for s in cache.sessions_of(TB)} == {b.id, c.id}
    other = cache.begin(3, FetchSessionRequest(), [position(TB, 0)])

    clock.advance(59.5)
    cache.begin(3, FetchSessionRequest(other.id, 1), [])
    clock.advance(1)
    assert cache.evict_idle() == 2  # b and c unused for 60 s; the other follower's was used
    assert len(cache) == 1 and {s.id for s in cache.sessions_of(TB)} == {other.id}


def test_consumers_share_a_bounded_pool_of_sessions() -> None:
    clock = FakeClock()
    cache = FetchSessionCache(clock, max_clients=2)
    a = cache.begin(-1, FetchSessionRequest(), [position(TB, 0)])
    clock.advance(1)
    b = cache.begin(-1, FetchSessionRequest(), [position(TB, 0)])
    follower = cache.begin(2, FetchSessionRequest(), [position(TB, 0)])
    clock.advance(1)
    c = cache.begin(-1, FetchSessionRequest(), [position(TB, 0)])
    assert a.closed and not b.closed and not c.closed and not follower.closed
    assert cache.appended(TB) == [follower]  # an append is no news for a consumer (it reads below the HW)
    assert TB not in b.dirty
    cache.hw_moved(TB)
    assert TB in b.dirty and TB in c.dirty


async def test_appends_wake_hw_moves_only_mark() -> None:
    cache = FetchSessionCache(FakeClock())
    s = cache.begin(2, FetchSessionRequest(), [position(TB, 0), position(TB2, 0)])
    future = s.arm()
    cache.hw_moved(TB)
    assert s.dirty == {TB} and not future.done()
    assert cache.appended(TB2) == [s]  # clean: read at the last look, not appended to since
    assert future.done() and s.dirty == {TB, TB2}
    assert cache.appended(TB2) == []  # not read since the last append: stale
    assert s.take_dirty() == {TB, TB2}
    assert cache.appended(TB2) == [s]  # read again: clean again
    cache.role_changed(TB)
    assert cache.appended(TB) == []


# ---------------------------------------------------------------- the leader: what a request reads


async def test_incremental_requests_answer_only_what_moved(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    await cluster3.create(TB2, R3, {"min.insync.replicas": "1"})
    await cluster3.kill(3)  # this test plays follower 3 by hand
    m = cluster3.managers[1]
    opened = await m.fetch_in_session(
        FetchRequest(3, 0, 1, MAX, (position(TB, 0), position(TB2, 0)), FetchSessionRequest())
    )
    assert set(opened.buckets) == {TB, TB2} and opened.session_id != 0
    sid = opened.session_id

    idle = await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (), FetchSessionRequest(sid, 1)))
    assert idle.buckets == {} and idle.session_id == sid  # an idle round reads and answers nothing

    poll = asyncio.create_task(m.fetch_in_session(FetchRequest(3, 5.0, 1, MAX, (), FetchSessionRequest(sid, 2))))
    await asyncio.sleep(0.02)
    assert not poll.done()  # parked on the session
    await m.append(1, 1.0, {TB2: batch(b"x")})
    answer = await asyncio.wait_for(poll, 1.0)
    assert set(answer.buckets) == {TB2} and values_of(answer.buckets[TB2].records) == [(0, b"x")]

    with pytest.raises(InvalidFetchSessionEpochError):  # epoch 3 is next, not 4
        await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (), FetchSessionRequest(sid, 4)))
    with pytest.raises(FetchSessionNotFoundError):
        await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (), FetchSessionRequest(sid, 3)))


async def test_a_bucket_left_out_by_the_response_budget_is_read_at_the_next_request(
    cluster3: ReplicaCluster,
) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    await cluster3.create(TB2, R3, {"min.insync.replicas": "1"})
    await cluster3.kill(3)
    m = cluster3.managers[1]
    await m.append(1, 1.0, {TB: batch(b"a" * 100), TB2: batch(b"b" * 100)})
    opened = await m.fetch_in_session(
        FetchRequest(3, 0, 1, 10, (position(TB, 0), position(TB2, 0)), FetchSessionRequest())
    )
    got = {tb for tb, r in opened.buckets.items() if r.records}
    assert len(got) == 1  # the first bucket with data gets a batch, the budget is then spent
    (left,) = {TB, TB2} - got
    # the follower appends what it got and names that bucket's new position, which has more data by then;
    # the other one is not named: it must be read again, and first (else a busy bucket starves it)
    (served,) = got
    await m.append(1, 1.0, {served: batch(b"c" * 100)})
    nxt = await m.fetch_in_session(
        FetchRequest(3, 0, 1, 10, (position(served, 1),), FetchSessionRequest(opened.session_id, 1))
    )
    assert nxt.buckets[left].records, "the bucket the budget left out must be read again, before the others"
    assert not nxt.buckets[served].records


async def test_an_hw_move_rides_on_the_next_answer(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    await cluster3.kill(2)
    await cluster3.kill(3)
    m = cluster3.managers[1]
    opened = await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (position(TB, 0),), FetchSessionRequest()))
    sid = opened.session_id
    await m.append(1, 1.0, {TB: batch(b"a")})
    got = await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (), FetchSessionRequest(sid, 1)))
    assert values_of(got.buckets[TB].records) == [(0, b"a")]
    caught_up = await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (position(TB, 1),), FetchSessionRequest(sid, 2)))
    assert caught_up.buckets[TB].high_watermark == 0  # server 2 (in the ISR) holds it back
    cluster3.clock.advance(LAG_S + 1)
    assert m.maybe_shrink_isr() == 1  # 2 leaves; 3 holds the LEO so it stays
    await wait_until(lambda: m.replica(TB).high_watermark == 1)
    answer = await m.fetch_in_session(FetchRequest(3, 0, 1, MAX, (), FetchSessionRequest(sid, 3)))
    assert answer.buckets[TB].high_watermark == 1 and not answer.buckets[TB].records


async def test_a_consumer_session_wakes_when_the_hw_moves_not_on_appends(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    await cluster3.kill(2)
    await cluster3.kill(3)
    m = cluster3.managers[1]
    opened = await m.fetch_in_session(FetchRequest(-1, 0, 1, MAX, (position(TB, 0),), FetchSessionRequest()))
    session = FetchSessionRequest(opened.session_id, 1)
    poll = asyncio.create_task(m.fetch_in_session(FetchRequest(-1, 5.0, 1, MAX, (), session)))
    await m.append(1, 1.0, {TB: batch(b"a")})
    await asyncio.sleep(0.05)
    assert not poll.done(), "above the HW there is nothing for a consumer"
    cluster3.clock.advance(LAG_S + 1)
    assert m.maybe_shrink_isr() == 1  # the dead followers leave the ISR: the HW moves to 1
    answer = await asyncio.wait_for(poll, 2.0)
    assert values_of(answer.buckets[TB].records) == [(0, b"a")] and answer.buckets[TB].high_watermark == 1


# ---------------------------------------------------------------- the caught-up rule


async def test_a_follower_polling_an_idle_bucket_stays_in_the_isr_when_a_write_comes(
    cluster3: ReplicaCluster,
) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[1]
    await m.append(-1, 5.0, {TB: batch(b"a")})
    # once the followers learnt the HW, nothing is left for the leader to read in the bucket
    await wait_until(lambda: all(cluster3.managers[i].replica(TB).high_watermark == 1 for i in (2, 3)))
    # a long idle period: followers poll, the leader reads nothing, so no fetch is recorded on the bucket
    cluster3.clock.advance(LAG_S * 3)
    polled = cluster3.clock.now
    await wait_until(lambda: all(s.last_used == polled for s in m.reads.fetch_sessions.sessions_of(TB)))
    await m.append(1, 5.0, {TB: batch(b"b")})  # acks=1 answers before any follower fetched it
    assert m.maybe_shrink_isr() == 0, "followers that kept polling were caught up until the write"
    assert m.replica(TB).isr == R3


async def test_a_follower_that_stopped_polling_leaves_the_isr_after_the_lag(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    m = cluster3.managers[1]
    await m.append(-1, 5.0, {TB: batch(b"a")})
    await cluster3.kill(3)  # its session stays in the leader's cache, no longer used
    cluster3.clock.advance(LAG_S * 3)
    polled = cluster3.clock.now
    sessions = m.reads.fetch_sessions
    await wait_until(lambda: any(s.replica_id == 2 and s.last_used == polled for s in sessions.sessions_of(TB)))
    await m.append(1, 5.0, {TB: batch(b"b")})
    assert m.maybe_shrink_isr() == 1
    await wait_until(lambda: m.replica(TB).isr == (1, 2))


async def test_an_expansion_refused_once_is_proposed_again_while_the_bucket_is_idle(
    cluster3: ReplicaCluster,
) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[1]
    cluster3.coordinator.fail = True
    cluster3.coordinator.state[TB] = cluster3.coordinator.state[TB].with_isr((1, 2), 1)
    await cluster3.notify(TB, R3)
    await wait_until(lambda: cluster3.coordinator.calls, message="3 caught up: an expansion is proposed")
    cluster3.coordinator.fail = False
    cluster3.clock.advance(1.0)  # past the proposal back-off; nothing is written to the bucket
    await wait_until(lambda: m.replica(TB).isr == R3, message=f"isr {m.replica(TB).isr}")


# ---------------------------------------------------------------- the follower


async def test_idle_follower_rounds_name_no_bucket_and_a_lost_session_starts_over(cluster3: ReplicaCluster) -> None:
    for b in range(20):
        await cluster3.create(TableBucket(7, b), R3)
    m = cluster3.managers[1]
    fetcher = cluster3.managers[2].fetchers.fetcher_of(TB)
    assert fetcher is not None
    await wait_until(lambda: fetcher.session.id != 0 and len(fetcher.session.sent) == 20)
    sent: list = []
    original = fetcher.endpoint.fetch

    async def recording(request):
        sent.append(request)
        return await original(request)

    fetcher.endpoint.fetch = recording  # type: ignore[method-assign]
    await wait_until(lambda: len(sent) >= 3)
    assert all(r.session.id == fetcher.session.id and r.buckets == () for r in sent[1:])

    full_before = fetcher.full_requests
    assert m.stats().fetch_sessions == 2  # one per follower
    opened_before = m.stats().fetch_sessions_opened
    m.reads.fetch_sessions.close_all()  # as if the leader restarted: the session is gone
    await m.append(-1, 5.0, {TableBucket(7, 3): batch(b"after")})  # acks=all: needs the follower back
    assert fetcher.full_requests == full_before + 1
    assert log_contents(cluster3.log_managers[2].get(TableBucket(7, 3))) == [(0, 0, b"after")]
    errors = [r for r in sent if r.session.id == 0]
    assert errors and len(errors[-1].buckets) == 20
    await wait_until(lambda: (m.stats().fetch_sessions, m.stats().fetch_sessions_opened) == (2, opened_before + 2))


def test_session_errors_are_retriable_without_metadata_refresh() -> None:
    for cls, code in (
        (FetchSessionNotFoundError, ErrorCode.FETCH_SESSION_NOT_FOUND),
        (InvalidFetchSessionEpochError, ErrorCode.INVALID_FETCH_SESSION_EPOCH),
    ):
        error = cls()
        assert error.code is code and error.retriable and not error.invalid_metadata
