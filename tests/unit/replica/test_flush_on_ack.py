"""log.flush.on-ack: the durable offset, acks=all waiting for every ISR member's fsync, group commit, ISR
expansion only once flushed (docs/replication.md "Durable acknowledgement")."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fluss_py.errors import ErrorCode, StorageError
from fluss_py.log.config import LogConfig
from fluss_py.log.tablet import LogTablet
from fluss_py.replica import isr as isr_rules
from fluss_py.replica.replica import LocalReplicaState, Replica
from fluss_py.tablet.metrics import render
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr
from tests.unit.replica.fakes import FakeClock, batch
from tests.unit.replica.harness import TB, ReplicaCluster

R3 = (1, 2, 3)
ON_ACK = {"log.flush.on-ack": "true"}


def recovery_points(cluster: ReplicaCluster) -> dict[int, int]:
    return {i: lm.get(TB).recovery_point for i, lm in cluster.log_managers.items()}


# ------------------------------------------------------------------------------------------ pure rules


def test_durable_offset_is_the_min_of_hw_leader_flush_and_isr_flushes() -> None:
    assert isr_rules.durable_offset_candidate(10, 8, [9, 12]) == 8
    assert isr_rules.durable_offset_candidate(10, 12, [11, 12]) == 10  # never above the HW
    assert isr_rules.durable_offset_candidate(10, 12, [12, 4]) == 4
    assert isr_rules.durable_offset_candidate(10, 12, [12, isr_rules.UNKNOWN_OFFSET]) == -1
    assert isr_rules.durable_offset_candidate(10, 12, []) == 10  # a leader alone in the ISR: its own flush


def test_a_followers_flushed_offset_never_counts_beyond_its_fetch_offset() -> None:
    p = isr_rules.record_fetch(isr_rules.FollowerProgress(), 5, 10, 1.0, flushed_offset=9)
    assert (p.log_end_offset, p.flushed_offset) == (5, 5)
    p = isr_rules.record_fetch(p, 10, 10, 2.0, flushed_offset=7)
    assert p.flushed_offset == 7
    assert isr_rules.polled_caught_up(p, 10, 3.0).flushed_offset == 7


def _leader(tmp_path: Path, on_ack: bool) -> Replica:
    log_ = LogTablet.open(tmp_path / "leader", TB, LogConfig(flush_on_ack=on_ack))
    r = Replica(TB, 1, log_, min_insync_replicas=1, lag_time_s=10.0, clock=FakeClock())
    r.transition(LocalReplicaState.ONLINE)
    r.make_leader(LeaderAndIsr(1, 0, (1, 2), 1, 0), R3)
    return r


@pytest.mark.parametrize("on_ack", [False, True])
def test_a_follower_joins_the_isr_of_an_on_ack_bucket_only_once_flushed_to_the_hw(tmp_path: Path, on_ack: bool) -> None:
    r = _leader(tmp_path, on_ack)
    r.append_as_leader(batch(b"a", b"b"), 1)
    r.update_follower_fetch(2, 2, 2)
    assert r.high_watermark == 2
    _, proposal = r.update_follower_fetch(3, 2, 0)  # caught up, nothing fsynced
    assert proposal == (None if on_ack else (1, 2, 3))
    _, proposal = r.update_follower_fetch(3, 2, 2)
    assert proposal == (1, 2, 3)


def test_the_durable_offset_counts_the_leaders_own_flush_and_moves_only_forwards(tmp_path: Path) -> None:
    r = _leader(tmp_path, True)
    r.append_as_leader(batch(b"a", b"b"), 1)
    r.update_follower_fetch(2, 2, 2)
    assert r.high_watermark == 2 and not r.maybe_advance_durable() and r.ack_offset == 0
    r.log.flush()
    assert r.maybe_advance_durable() and r.ack_offset == 2
    r.update_follower_fetch(2, 2, 0)  # a stale report cannot move it back
    assert not r.maybe_advance_durable() and r.durable_offset == 2


# ------------------------------------------------------------------------------------------ managers


@pytest.mark.parametrize("props", [{}, ON_ACK], ids=["default", "on-ack"])
async def test_acks_all_answers_once_every_isr_member_fsynced_the_batch(
    cluster3: ReplicaCluster, props: dict[str, str]
) -> None:
    await cluster3.create(TB, R3, props)
    result = (await cluster3.managers[1].append(-1, 5.0, {TB: batch(b"a", b"b")}))[TB]
    assert result.error is None and result.last_offset == 1
    points = recovery_points(cluster3)
    if props:  # every replica's recovery point (all below it fsynced) passed the batch before the answer
        assert all(p >= 2 for p in points.values()), points
    else:  # the default answers from memory: the periodic flush (every hour here) has not run
        assert all(p == 0 for p in points.values()), points


async def test_acks_all_waits_for_a_followers_fsync_not_only_its_fetch(cluster3: ReplicaCluster) -> None:
    release = asyncio.Event()
    real_flush = cluster3.managers[3].group_flush.flush

    async def stuck_flush(logs: list) -> None:
        await release.wait()
        await real_flush(logs)

    cluster3.managers[3].fetchers._flush = stuck_flush  # fetchers made from now on use it
    await cluster3.create(TB, R3, ON_ACK)
    leader = cluster3.managers[1]
    result = (await leader.append(-1, 0.3, {TB: batch(b"a")}))[TB]
    assert result.error_code is ErrorCode.REQUEST_TIMED_OUT
    assert "durable offset" in result.error.message
    follower = cluster3.log_managers[3].get(TB)
    assert (follower.log_end_offset, follower.recovery_point) == (1, 0)  # replicated to 3 (in memory), no fsync
    release.set()
    await wait_until(lambda: leader.replica(TB).durable_offset == 1)
    assert (await leader.append(-1, 5.0, {TB: batch(b"b")}))[TB].error is None


async def test_a_failed_leader_fsync_answers_the_waiting_produce_with_a_storage_error(
    cluster3: ReplicaCluster,
) -> None:
    await cluster3.create(TB, R3, ON_ACK)
    leader = cluster3.managers[1]
    tablet = cluster3.log_managers[1].get(TB)

    def failing_begin_flush():
        raise StorageError(f"{tablet.dir}: flush failed: [Errno 5] Input/output error")

    tablet.begin_flush = failing_begin_flush
    result = (await leader.append(-1, 5.0, {TB: batch(b"a")}))[TB]
    assert result.error_code is ErrorCode.STORAGE_ERROR and "Input/output error" in result.error.message
    assert leader.group_flush.failures >= 1
    del tablet.begin_flush
    assert (await leader.append(-1, 5.0, {TB: batch(b"b")}))[TB].error is None


async def test_one_fsync_round_covers_every_batch_appended_meanwhile(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, ON_ACK)
    leader = cluster3.managers[1]
    n = 40
    results = await asyncio.gather(*(leader.append(-1, 5.0, {TB: batch(b"%d" % i)}) for i in range(n)))
    assert all(r[TB].error is None for r in results)
    assert leader.replica(TB).durable_offset == n
    # group commit: the 40 requests (on the leader, and as fetched batches on each follower) took far fewer
    # fsync rounds than requests
    for i in R3:
        assert 1 <= cluster3.managers[i].group_flush.rounds <= n // 4, (i, cluster3.managers[i].group_flush.rounds)
    stats = leader.stats()
    assert (stats.group_flush_rounds, stats.group_flush_failures) == (leader.group_flush.rounds, 0)
    assert f"fluss_replica_group_flush_rounds_total {stats.group_flush_rounds}\n" in render(stats).decode()
