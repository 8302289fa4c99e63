"""ReplicaManager: produce (acks, min ISR, delayed completion), fetch, offsets, epochs, ISR tasks."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from fluss_py.errors import (
    ErrorCode,
    InvalidCoordinatorEpochError,
)
from fluss_py.replica.messages import (
    EpochRequest,
    FetchBucketRequest,
    LeaderAndIsrItem,
    ListOffsetsRequest,
    OffsetSpec,
    StopReplicaItem,
)
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr, TableBucket
from tests.unit.log.helpers import batch as log_batch
from tests.unit.replica.fakes import batch, values_of
from tests.unit.replica.harness import LAG_S, SETTINGS, TB, ReplicaCluster, node

R3 = (1, 2, 3)


async def test_acks_all_answers_only_once_the_hw_passes_the_batch(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    leader = cluster3.managers[1]
    result = (await leader.append(-1, 5.0, {TB: batch(b"a", b"b")}))[TB]
    assert result.error is None and (result.base_offset, result.last_offset) == (0, 1)
    # by the time it answered, both followers had fetched the batch and the HW covered it
    assert leader.replica(TB).high_watermark >= 2
    for i in (2, 3):
        assert cluster3.log_managers[i].get(TB).log_end_offset >= 2


async def test_acks_all_times_out_when_followers_do_not_fetch(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    await cluster3.kill(2)
    await cluster3.kill(3)
    leader = cluster3.managers[1]
    result = (await leader.append(-1, 0.1, {TB: batch(b"a")}))[TB]
    assert result.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert leader.delayed_produce.pending() == 0
    ack1 = (await leader.append(1, 0.1, {TB: batch(b"b")}))[TB]
    assert ack1.error is None and ack1.base_offset == 1


async def test_below_min_isr_rejected_before_append_and_acks1_works(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "2"})
    cluster3.coordinator.state[TB] = cluster3.coordinator.state[TB].with_isr((1,), 1)
    await cluster3.notify(TB, R3)
    leader = cluster3.managers[1]
    result = (await leader.append(-1, 1.0, {TB: batch(b"a")}))[TB]
    assert result.error_code is ErrorCode.NOT_ENOUGH_REPLICAS
    assert leader.replica(TB).log_end_offset == 0
    assert (await leader.append(1, 1.0, {TB: batch(b"a")}))[TB].error is None


async def test_produce_to_a_follower_names_the_leader(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    result = (await cluster3.managers[2].append(1, 1.0, {TB: batch(b"a")}))[TB]
    assert result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert result.error.leader_id == 1 and result.error.leader_address == node(1).address
    bad_acks = await cluster3.managers[1].append(2, 1.0, {TB: batch(b"a")})
    assert bad_acks[TB].error_code is ErrorCode.INVALID_REQUEST and cluster3.managers[1].replica(TB).log_end_offset == 0
    other = await cluster3.managers[2].append(1, 1.0, {TableBucket(99, 0): batch(b"a")})
    assert next(iter(other.values())).error_code is ErrorCode.UNKNOWN_TABLE_OR_BUCKET


async def test_leadership_loss_completes_waiting_produce_with_not_leader(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    await cluster3.kill(3)
    cluster3.down.add(2)  # 2 stops answering fetches... but 2's fetcher keeps fetching from 1: pause 1's HW
    leader = cluster3.managers[1]
    await cluster3.managers[2].fetchers.remove_buckets([TB])
    task = asyncio.create_task(leader.append(-1, 5.0, {TB: batch(b"a")}))
    await wait_until(lambda: leader.delayed_produce.pending(TB) == 1)
    cluster3.down.discard(2)
    await cluster3.elect(TB, R3, leader=2, isr=(1, 2))
    result = (await asyncio.wait_for(task, 2.0))[TB]
    assert result.error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER and result.error.leader_id == 2


async def test_stale_coordinator_epoch_is_rejected(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    lai = cluster3.coordinator.state[TB]
    with pytest.raises(InvalidCoordinatorEpochError):
        await cluster3.managers[1].become_leader_or_follower(0, [LeaderAndIsrItem(TB, lai, R3)], [])
    with pytest.raises(InvalidCoordinatorEpochError):
        await cluster3.managers[1].stop_replicas(0, [StopReplicaItem(TB)])


async def test_stale_leader_epoch_is_fenced_per_bucket(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    await cluster3.elect(TB, R3, leader=2, isr=R3)
    old = LeaderAndIsr(1, 0, R3, 1, 0)
    errors = await cluster3.managers[1].become_leader_or_follower(1, [LeaderAndIsrItem(TB, old, R3)], [])
    assert errors[TB].code is ErrorCode.FENCED_LEADER_EPOCH
    assert not cluster3.managers[1].replica(TB).is_leader


async def test_fetch_epoch_checks_and_offset_out_of_range(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    await cluster3.elect(TB, R3, leader=1, isr=R3)  # epoch 1
    m = cluster3.managers[1]

    async def one(req: FetchBucketRequest):
        return (await m.fetch(-1, 0, 1, 1 << 20, [req]))[TB]

    assert (await one(FetchBucketRequest(TB, 0, 100, current_leader_epoch=0))).error_code is (
        ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (await one(FetchBucketRequest(TB, 0, 100, current_leader_epoch=2))).error_code is (
        ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    r = await one(FetchBucketRequest(TB, 5, 100, current_leader_epoch=1))
    assert r.error_code is ErrorCode.OFFSET_OUT_OF_RANGE and r.log_end_offset == 0 and "0" in r.error.message


async def test_clients_read_below_hw_only_followers_up_to_leo(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2))
        await c.managers[2].fetchers.remove_buckets([TB])  # follower 2 stalls: HW stays
        m = c.managers[1]
        await m.append(1, 1.0, {TB: batch(b"a", b"b")})
        client = (await m.fetch(-1, 0, 1, 1 << 20, [FetchBucketRequest(TB, 0, 1 << 20)]))[TB]
        assert client.records == b"" and client.high_watermark == 0 and client.log_end_offset == 2
        follower = (await m.fetch(2, 0, 1, 1 << 20, [FetchBucketRequest(TB, 0, 1 << 20)]))[TB]
        assert [v for _, v in values_of(follower.records)] == [b"a", b"b"]
    finally:
        await c.close()


async def test_client_long_poll_wakes_when_hw_moves(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[1]
    poll = asyncio.create_task(m.fetch(-1, 5.0, 1, 1 << 20, [FetchBucketRequest(TB, 0, 1 << 20)]))
    await asyncio.sleep(0.02)
    assert not poll.done()
    await m.append(-1, 5.0, {TB: batch(b"x")})
    r = (await asyncio.wait_for(poll, 2.0))[TB]
    assert values_of(r.records) == [(0, b"x")]


async def test_long_poll_ends_at_max_wait_without_data(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    r = await cluster3.managers[1].fetch(-1, 0.05, 1, 1 << 20, [FetchBucketRequest(TB, 0, 1 << 20)])
    assert r[TB].error is None and r[TB].records == b""
    assert cluster3.managers[1].reads.delayed_fetch.parked(for_follower=False) == 0


async def test_list_offsets_and_offsets_for_leader_epoch(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[1]
    await m.append(-1, 5.0, {TB: batch(b"a", b"b")})
    await cluster3.elect(TB, R3, leader=1, isr=R3)
    await m.append(-1, 5.0, {TB: batch(b"c")})
    res = await m.list_offsets([ListOffsetsRequest(TB, s) for s in (OffsetSpec.EARLIEST,)])
    assert res[TB].offset == 0
    assert (await m.list_offsets([ListOffsetsRequest(TB, OffsetSpec.LATEST)]))[TB].offset == 3
    assert (await m.list_offsets([ListOffsetsRequest(TB, OffsetSpec.HIGH_WATERMARK)]))[TB].offset == 3
    assert (await m.list_offsets([ListOffsetsRequest(TB, OffsetSpec.TIMESTAMP, 0)]))[TB].offset == 0
    eps = await m.offsets_for_leader_epoch([EpochRequest(TB, 0, 1)])
    assert (eps[TB].leader_epoch, eps[TB].end_offset) == (0, 2)
    eps = await m.offsets_for_leader_epoch([EpochRequest(TB, 0, 0)])
    assert eps[TB].error_code is ErrorCode.FENCED_LEADER_EPOCH
    follower = await cluster3.managers[2].list_offsets([ListOffsetsRequest(TB, OffsetSpec.LATEST)])
    assert follower[TB].error_code is ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_isr_shrinks_after_lag_time_and_expands_on_catch_up(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[1]
    await m.append(-1, 5.0, {TB: batch(b"a")})
    await cluster3.kill(3)
    await m.append(1, 5.0, {TB: batch(b"b")})
    cluster3.clock.advance(LAG_S / 2)
    assert m.maybe_shrink_isr() == 0  # not yet
    cluster3.clock.advance(LAG_S / 2 + 0.1)
    assert m.maybe_shrink_isr() == 1
    await wait_until(lambda: m.replica(TB).isr == (1, 2))
    assert cluster3.coordinator.state[TB].isr == (1, 2)
    stats = m.stats()
    assert (stats.leader_count, stats.under_replicated, stats.under_min_isr, stats.isr_sizes) == (1, 1, 0, {TB: 2})
    assert cluster3.managers[2].stats().follower_count == 1
    # acks=all goes on with ISR {1, 2}
    assert (await m.append(-1, 5.0, {TB: batch(b"c")}))[TB].error is None
    # server 3 comes back with its log, follows, catches up and rejoins
    cluster3.start_server(3)
    await cluster3.notify(TB, R3)
    await wait_until(lambda: m.replica(TB).isr == (1, 2, 3), message=f"isr {m.replica(TB).isr}")
    assert cluster3.coordinator.state[TB].isr == (1, 2, 3)


async def test_maximal_isr_while_adjust_isr_is_in_flight(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    m = cluster3.managers[1]
    await cluster3.kill(3)
    cluster3.coordinator.block = asyncio.Event()
    cluster3.clock.advance(LAG_S + 1)
    await m.append(1, 5.0, {TB: batch(b"a")})
    await wait_until(lambda: cluster3.managers[2].replica(TB).log_end_offset == 1)
    assert m.maybe_shrink_isr() == 1
    await wait_until(lambda: cluster3.coordinator.calls)
    # pending shrink: the removed follower 3 still holds the HW back
    await asyncio.sleep(0.1)
    assert m.replica(TB).high_watermark == 0 and m.replica(TB).maximal_isr == R3
    cluster3.coordinator.block.set()
    await wait_until(lambda: m.replica(TB).high_watermark == 1)
    assert m.replica(TB).isr == (1, 2)


async def test_refused_adjust_isr_is_not_applied(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[1]
    await cluster3.kill(3)
    await m.append(1, 1.0, {TB: batch(b"a")})
    # the coordinator moved on (bucket epoch bumped by someone else): our proposal carries a stale one
    cluster3.coordinator.state[TB] = cluster3.coordinator.state[TB].with_isr(R3, 1)
    cluster3.clock.advance(LAG_S + 1)
    assert m.maybe_shrink_isr() == 1
    await wait_until(lambda: m.replica(TB).pending_isr is None)
    assert m.replica(TB).isr == R3


async def test_stop_replica_deletes_and_fails_waiters(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    m = cluster3.managers[2]
    errors = await m.stop_replicas(1, [StopReplicaItem(TB, 0, delete=True)])
    assert errors[TB] is None and m.replica(TB) is None and cluster3.log_managers[2].get(TB) is None
    assert m.fetchers.fetcher_of(TB) is None


async def test_checkpoint_task_writes_hw_and_recovery_point(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path, dataclasses.replace(SETTINGS, checkpoint_interval_s=0.02))
    try:
        await c.create(TB, (1, 2))
        assert (await c.managers[1].append(-1, 5.0, {TB: batch(b"a", b"b")}))[TB].error is None
        lm = c.log_managers[1]
        await wait_until(lambda: lm.hw_checkpoint.read().get(TB) == 2 and lm.recovery_checkpoint.read().get(TB) == 2)
        c.managers[1].check_health()
    finally:
        await c.close()


async def test_background_shrink_task_removes_a_stuck_follower(clock, tmp_path) -> None:
    settings = dataclasses.replace(SETTINGS, lag_time_s=0.05)
    c = ReplicaCluster(3, clock, tmp_path, settings)
    try:
        await c.create(TB, R3, {"min.insync.replicas": "1"})
        await c.kill(3)
        await c.managers[1].append(1, 1.0, {TB: batch(b"a")})
        clock.advance(1.0)
        await wait_until(lambda: c.coordinator.state[TB].isr == (1, 2), timeout=2.0)
        await wait_until(lambda: c.managers[1].replica(TB).isr == (1, 2))
    finally:
        await c.close()


async def test_acks_all_does_not_wait_for_the_follower_min_bytes(clock, tmp_path) -> None:
    """A parked follower fetch answers as soon as it carries data an acks=all produce waits for."""
    fetch = dataclasses.replace(SETTINGS.fetch, min_bytes=1 << 20, wait_max_s=30.0)
    c = ReplicaCluster(2, clock, tmp_path, dataclasses.replace(SETTINGS, fetch=fetch))
    try:
        await c.create(TB, (1, 2))
        await asyncio.sleep(0.05)  # the follower's fetch is parked at the leader
        result = await asyncio.wait_for(c.managers[1].append(-1, 30.0, {TB: batch(b"a")}), 5.0)
        assert result[TB].error is None
        # acks=1 data alone does not wake the parked follower fetch (min bytes not reached)
        await c.managers[1].append(1, 1.0, {TB: batch(b"b")})
        await asyncio.sleep(0.05)
        assert c.log_managers[2].get(TB).log_end_offset == 1
    finally:
        await c.close()


async def test_acks_all_duplicate_retry_wakes_the_follower_fetch_holding_its_records(clock, tmp_path) -> None:
    """A failover's retry at a new leader that already has the batch (its follower not): the idempotent
    duplicate waits for the HW, and the parked follower fetch that read those records before any produce
    waited (below min bytes) answers at once instead of after its max wait."""
    fetch = dataclasses.replace(SETTINGS.fetch, min_bytes=1 << 20, wait_max_s=30.0)
    c = ReplicaCluster(2, clock, tmp_path, dataclasses.replace(SETTINGS, fetch=fetch))
    try:
        await c.create(TB, (1, 2))
        await asyncio.sleep(0.05)  # the follower's fetch is parked at the leader
        records = log_batch(1, writer_id=7, writer_epoch=0, seq=0)
        first = (await c.managers[1].append(1, 1.0, {TB: records}))[TB]  # acks=1: the follower's poll stays
        await asyncio.sleep(0.05)
        assert first.error is None and c.log_managers[2].get(TB).log_end_offset == 0
        retry = await asyncio.wait_for(c.managers[1].append(-1, 30.0, {TB: records}), 5.0)
        assert retry[TB].error is None and retry[TB].base_offset == first.base_offset
        assert c.log_managers[2].get(TB).log_end_offset == 1
    finally:
        await c.close()


async def test_follower_fetch_outside_the_log_is_not_progress(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    await cluster3.kill(2)
    await cluster3.kill(3)
    m = cluster3.managers[1]
    await m.append(1, 1.0, {TB: batch(b"a", b"b")})
    for follower in (2, 3):  # a diverged follower claims offset 5 > LEO 2
        r = (await m.fetch(follower, 0, 1, 1 << 20, [FetchBucketRequest(TB, 5, 1 << 20, 0)]))[TB]
        assert r.error_code is ErrorCode.OFFSET_OUT_OF_RANGE and r.log_end_offset == 2
    assert m.replica(TB).high_watermark == 0


async def test_fetch_from_an_unassigned_replica_or_the_leader_itself_is_refused(cluster3: ReplicaCluster) -> None:
    """docs/peer-trust.md invariant 1, the assignment half (the token half is the tablet service's): a fetch
    as the leader itself or as a server holding no replica of the bucket gets nothing and moves nothing."""
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    m = cluster3.managers[1]
    followers = m.replica(TB).followers  # each follower's first fetch arrived (not a race with the kills)
    await wait_until(lambda: all(p.log_end_offset == 0 for p in followers.values()))
    await cluster3.kill(2)
    await cluster3.kill(3)
    await m.append(1, 1.0, {TB: batch(b"a", b"b")})
    for claimed in (1, 99):
        r = (await m.fetch(claimed, 0, 1, 1 << 20, [FetchBucketRequest(TB, 2, 1 << 20, 0)]))[TB]
        assert r.error_code is ErrorCode.REPLICA_NOT_ASSIGNED and r.records == b""
    assert m.replica(TB).high_watermark == 0 and m.reads.unassigned_fetches == 2
    assert {f: p.log_end_offset for f, p in m.replica(TB).followers.items()} == {2: 0, 3: 0}  # as created
    r = (await m.fetch(2, 0, 1, 1 << 20, [FetchBucketRequest(TB, 2, 1 << 20, 0)]))[TB]  # an assigned follower
    assert r.error is None and m.replica(TB).followers[2].log_end_offset == 2
