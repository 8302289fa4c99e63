"""Leader-side throttle of followers being added (docs/rebalance.md §6): the token bucket alone, then the
ReplicaManager fetch path (ISR buckets first and never throttled, buckets a rebalance move is adding the
follower to within the budget, a follower catching up after a restart never throttled)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from fluss_py.errors import ErrorCode
from fluss_py.replica.messages import FetchBucketRequest, LeaderAndIsrItem
from fluss_py.replica.throttle import ReplicationThrottle
from fluss_py.types import LeaderAndIsr, TableBucket
from tests.unit.replica.fakes import FakeClock, batch, values_of
from tests.unit.replica.harness import SETTINGS, ReplicaCluster, node


def test_unlimited_when_the_rate_is_zero() -> None:
    t = ReplicationThrottle(0, 1)
    assert not t.enabled and t.allowance(5000) == 5000
    t.take(5000)
    assert t.allowance(5000) == 5000 and t.bytes_total == 5000 and t.deferred_total == 0


def test_budget_is_spent_then_refilled_by_the_clock() -> None:
    clock = FakeClock()
    t = ReplicationThrottle(1000, 1000, clock)
    assert t.allowance(600) == 600
    t.take(600)
    assert t.allowance(600) == 400
    t.take(700)  # a whole batch may exceed the allowance: a debt of 300
    assert t.allowance(600) == 0 and t.deferred_total == 1
    clock.advance(0.3)
    assert t.allowance(600) == 0  # the debt is paid first
    clock.advance(0.5)
    assert 499 <= t.allowance(600) <= 500
    clock.advance(10)
    assert t.allowance(5000) == 1000  # never more than the burst saved up


@given(st.lists(st.tuples(st.floats(0, 0.5), st.integers(1, 4000)), max_size=200))
def test_served_bytes_never_exceed_rate_times_time_plus_burst_and_one_batch(steps) -> None:
    clock = FakeClock()
    rate, burst, batch_max = 10_000, 5_000, 4_000
    t = ReplicationThrottle(rate, burst, clock)
    start = clock.now
    for dt, batch_size in steps:
        clock.advance(dt)
        allowed = t.allowance(64_000)
        if allowed:
            t.take(max(min(allowed, batch_size), batch_size if allowed < batch_size else 0))  # >= one batch
        assert t.bytes_total <= rate * (clock.now - start) + burst + batch_max


TB_NEW = TableBucket(7, 0)  # a rebalance move is adding server 3: assigned, not in the ISR, named adding
TB_ISR = TableBucket(7, 1)  # server 3 is in the ISR
TB_BACK = TableBucket(7, 2)  # server 3 is back from a restart: assigned, not in the ISR, not being added


async def _leader_with_a_catching_up_follower(tmp_path: Path, rate: int) -> tuple[ReplicaCluster, FakeClock]:
    clock = FakeClock()
    c = ReplicaCluster(1, clock, tmp_path, dataclasses.replace(SETTINGS, throttle_bytes_per_s=rate))
    m = c.managers[1]
    for tb, isr, adding in ((TB_NEW, (1,), (3,)), (TB_ISR, (1, 3), ()), (TB_BACK, (1,), ())):
        lai = LeaderAndIsr(1, 0, isr, 1, 0)
        await m.become_leader_or_follower(1, [LeaderAndIsrItem(tb, lai, (1, 3), {}, adding)], [node(1), node(3)])
    for _ in range(10):
        for tb in (TB_NEW, TB_BACK):
            assert (await m.append(1, 1.0, {tb: batch(b"x" * 1000)}))[tb].error is None
    assert (await m.append(1, 1.0, {TB_ISR: batch(b"y" * 1000)}))[TB_ISR].error is None
    return c, clock


def _requests(new_offset: int, isr_offset: int = 0) -> list[FetchBucketRequest]:
    return [FetchBucketRequest(TB_NEW, new_offset, 1 << 20), FetchBucketRequest(TB_ISR, isr_offset, 1 << 20)]


async def test_fetches_of_a_follower_being_added_are_throttled_but_its_isr_buckets_are_not(tmp_path: Path) -> None:
    c, clock = await _leader_with_a_catching_up_follower(tmp_path, rate=3000)
    m = c.managers[1]
    try:
        assert m.replica(TB_NEW).is_throttled(3) and not m.replica(TB_ISR).is_throttled(3)
        out = await m.fetch(3, 0, 1, 1 << 20, _requests(0))
        assert list(out) == [TB_ISR, TB_NEW]  # ISR buckets are read first
        assert out[TB_ISR].records and 0 < len(out[TB_NEW].records) <= 3000
        served, offset = len(out[TB_NEW].records), len(values_of(out[TB_NEW].records))
        while True:  # drain what is left of the budget; then the bucket answers empty, never an error
            r = (await m.fetch(3, 0, 1, 1 << 20, _requests(offset, 1)))[TB_NEW]
            assert r.error is None
            if not r.records:
                break
            served += len(r.records)
            offset += len(values_of(r.records))
        assert served <= 3000 + 1100 and m.reads.throttle.deferred_total >= 1
        again = await m.fetch(3, 0, 1, 1 << 20, _requests(offset, 0))
        assert again[TB_ISR].records and not again[TB_NEW].records  # ISR data flows without tokens
        client = await m.fetch(-1, 0, 1, 1 << 20, [FetchBucketRequest(TB_NEW, 0, 1 << 20)])
        assert len(client[TB_NEW].records) > 3000  # clients are never throttled
        clock.advance(1.0)
        refill = (await m.fetch(3, 0, 1, 1 << 20, _requests(offset, 1)))[TB_NEW]
        assert refill.records and m.reads.throttle.bytes_total == served + len(refill.records)
    finally:
        await c.close()


async def test_no_throttle_when_the_rate_is_zero(tmp_path: Path) -> None:
    c, _ = await _leader_with_a_catching_up_follower(tmp_path, rate=0)
    try:
        out = await c.managers[1].fetch(3, 0, 1, 1 << 20, _requests(0))
        assert len(out[TB_NEW].records) > 10_000
    finally:
        await c.close()


async def test_a_follower_back_from_a_restart_catches_up_unthrottled(tmp_path: Path) -> None:
    """Assigned and out of the ISR but not named in adding_replicas: never throttled, even with no tokens."""
    c, _ = await _leader_with_a_catching_up_follower(tmp_path, rate=1000)
    m = c.managers[1]
    try:
        assert not m.replica(TB_BACK).is_throttled(3) and 3 not in m.replica(TB_BACK).maximal_isr
        first = await m.fetch(3, 0, 1, 1 << 20, [FetchBucketRequest(TB_NEW, 0, 1 << 20)])
        assert 0 < len(first[TB_NEW].records) <= 1000 + 1100  # the budget is spent on the added replica
        back = await m.fetch(3, 0, 1, 1 << 20, [FetchBucketRequest(TB_BACK, 0, 1 << 20)])
        assert len(back[TB_BACK].records) > 10_000  # all ten batches at once
        assert m.reads.throttle.bytes_total == len(first[TB_NEW].records)  # TB_BACK's bytes were not charged
    finally:
        await c.close()


async def test_the_move_ending_lifts_the_throttle_and_a_same_epoch_notify_sets_it(tmp_path: Path) -> None:
    """adding_replicas is the coordinator's latest word: applied from a NotifyLeaderAndIsr of the same epochs
    (a new coordinator re-telling an in-flight move) and cleared by the next one."""
    c, _ = await _leader_with_a_catching_up_follower(tmp_path, rate=1000)
    m = c.managers[1]
    try:
        lai = LeaderAndIsr(1, 0, (1,), 1, 0)
        await m.become_leader_or_follower(1, [LeaderAndIsrItem(TB_BACK, lai, (1, 3), {}, (3,))], [node(1), node(3)])
        assert m.replica(TB_BACK).is_throttled(3)
        await m.become_leader_or_follower(1, [LeaderAndIsrItem(TB_NEW, lai, (1, 3), {}, ())], [node(1), node(3)])
        assert not m.replica(TB_NEW).is_throttled(3)
        out = await m.fetch(3, 0, 1, 1 << 20, [FetchBucketRequest(TB_NEW, 0, 1 << 20)])
        assert len(out[TB_NEW].records) > 10_000
    finally:
        await c.close()


async def test_a_follower_the_leader_has_not_been_told_of_is_refused_until_it_is(tmp_path: Path) -> None:
    """A move's target may hear of step 1 before its leader does (one outbox per server) and fetch at once:
    until the leader knows it is assigned it gets nothing (REPLICA_NOT_ASSIGNED, retriable: it asks again),
    neither served unthrottled as a stranger nor counted as progress (docs/peer-trust.md)."""
    c, _ = await _leader_with_a_catching_up_follower(tmp_path, rate=1000)
    m = c.managers[1]
    try:
        assert 4 not in m.replica(TB_BACK).replicas
        out = await m.fetch(4, 0, 1, 1 << 20, [FetchBucketRequest(TB_BACK, 0, 1 << 20)])
        assert out[TB_BACK].error is not None and out[TB_BACK].error.code == ErrorCode.REPLICA_NOT_ASSIGNED
        assert out[TB_BACK].error.retriable
        assert out[TB_BACK].records == b"" and m.reads.throttle.bytes_total == 0 and m.reads.unassigned_fetches == 1
    finally:
        await c.close()
