"""A follower told of a new leader before the leader itself is refused once, and must keep trying until it is
accepted (issue: a bucket parked after one refusal held acks=all writes until its ISR shrank).

The new leader, still a follower of the dead one at the older epoch, refuses the first call with
UNKNOWN_LEADER_EPOCH ("I am behind you"), without naming a leader from its stale view; once told, it accepts
the next call, one ``replica.fetch.backoff.ms`` later. Checked for both steps a refused bucket can be in:
truncating (OffsetsForLeaderEpoch) and fetching (FetchLog).
"""

from __future__ import annotations

import asyncio

from fluss_py.errors import ErrorCode
from fluss_py.replica.messages import LeaderAndIsrItem
from fluss_py.testing.procs import async_wait_until as wait_until
from tests.unit.replica.fakes import batch
from tests.unit.replica.harness import TB, ReplicaCluster, node

REPLICAS = (1, 2, 3)
NODES = [node(i) for i in REPLICAS]


async def _failover_told_to_the_follower_first(c: ReplicaCluster) -> None:
    """Leader 1 dies; the bucket moves to 2 at epoch 1 with ISR (2, 3); follower 3 hears of it first."""
    c.down.add(1)
    c.coordinator.state[TB] = c.coordinator.state[TB].with_leader(2, (2, 3), c.coordinator_epoch)
    state = [LeaderAndIsrItem(TB, c.coordinator.state[TB], REPLICAS, {})]
    await c.managers[3].become_leader_or_follower(c.coordinator_epoch, state, NODES)


async def _tell_the_new_leader(c: ReplicaCluster) -> None:
    state = [LeaderAndIsrItem(TB, c.coordinator.state[TB], REPLICAS, {})]
    await c.managers[2].become_leader_or_follower(c.coordinator_epoch, state, NODES)


def _endpoint_to(c: ReplicaCluster, follower: int, leader: int):
    return c.managers[follower].fetchers.fetcher_of(TB).endpoint


async def test_a_refused_truncation_is_retried_and_the_leaders_hw_moves(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path)
    try:
        await c.create(TB, REPLICAS)
        assert (await c.managers[1].append(-1, 5.0, {TB: batch(b"a")}))[TB].error is None
        await wait_until(lambda: all(c.log_managers[i].get(TB).log_end_offset == 1 for i in REPLICAS))
        await _failover_told_to_the_follower_first(c)
        endpoint = _endpoint_to(c, 3, 2)
        await wait_until(lambda: endpoint.epoch_answers, message="the follower's first OffsetsForLeaderEpoch")
        refused = endpoint.epoch_answers[0][TB].error
        assert refused is not None and refused.code == ErrorCode.UNKNOWN_LEADER_EPOCH, refused
        assert refused.leader_id < 0  # no hint from a stale view (it would name the dead server 1)
        await _tell_the_new_leader(c)
        result = await asyncio.wait_for(c.managers[2].append(-1, 30.0, {TB: batch(b"b")}), 5.0)
        assert result[TB].error is None and c.managers[2].replica(TB).high_watermark == 2
        accepted = [a[TB] for a in endpoint.epoch_answers if a[TB].error is None]
        assert accepted and len(endpoint.epoch_answers) == len(accepted) + 1  # refused once, then accepted
    finally:
        await c.close()


async def test_a_refused_first_fetch_is_retried_and_the_leaders_hw_moves(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path)
    try:
        await c.create(TB, REPLICAS)  # empty log: no truncation step, the first call is a FetchLog
        await _failover_told_to_the_follower_first(c)
        endpoint = _endpoint_to(c, 3, 2)
        await wait_until(lambda: endpoint.fetch_answers, message="the follower's first FetchLog")
        refused = endpoint.fetch_answers[0].buckets[TB].error
        assert refused is not None and refused.code == ErrorCode.UNKNOWN_LEADER_EPOCH, refused
        assert refused.leader_id < 0
        await _tell_the_new_leader(c)
        result = await asyncio.wait_for(c.managers[2].append(-1, 30.0, {TB: batch(b"b")}), 5.0)
        assert result[TB].error is None and c.managers[2].replica(TB).high_watermark == 1
        assert c.log_managers[3].get(TB).log_end_offset == 1
    finally:
        await c.close()
