"""A server in controlled shutdown leaves the truncation of the buckets it hands over to its restart
(docs/replication.md "A stopping server leaves truncation to its restart")."""

from __future__ import annotations

from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import TableBucket
from tests.unit.replica.fakes import batch, epochs, log_contents
from tests.unit.replica.harness import TB, ReplicaCluster

MIN1 = {"min.insync.replicas": "1"}
STILL_IN_ISR = TableBucket(7, 1)


def values(c: ReplicaCluster, server: int, tb: TableBucket = TB) -> list[bytes]:
    return [v for _, _, v in log_contents(c.log_managers[server].get(tb))]


async def test_a_handed_over_bucket_is_truncated_by_the_restart_not_by_the_stopping_server(clock, tmp_path) -> None:
    """Server 1 leads TB with an acks=1 tail nobody fetched, begins its controlled shutdown and hands TB over
    to 2 (ISR without 1): 1 neither fetches nor truncates TB, while a bucket whose ISR still names 1 is
    fetched as before (in the same fetcher, whose rounds truncate before they fetch). The new leader writes
    other records at the same offsets (equal LEOs, diverged logs); 1 restarts, truncates by epoch and
    rejoins the ISR holding the leader's records only."""
    c = ReplicaCluster(2, clock, tmp_path)
    try:
        await c.create(TB, (1, 2), MIN1)
        await c.create(STILL_IN_ISR, (2, 1), MIN1)  # led by 2, ISR (2, 1)
        assert (await c.managers[1].append(-1, 5.0, {TB: batch(b"m0")}))[TB].error is None
        c.down.add(1)  # 2 cannot fetch from 1: the tail below stays 1's alone
        await c.managers[1].append(1, 5.0, {TB: batch(b"a1")})
        await c.managers[1].append(1, 5.0, {TB: batch(b"a2")})
        c.down.discard(1)

        c.managers[1].begin_controlled_shutdown()
        await c.elect(TB, (1, 2), leader=2, isr=(2,))  # the controlled-shutdown move: epoch 1, 1 out of the ISR
        await c.elect(STILL_IN_ISR, (2, 1), leader=2, isr=(2, 1))  # a new epoch whose ISR still names 1
        assert c.managers[1].fetchers.fetcher_of(TB) is None
        assert c.managers[1].fetchers.fetcher_of(STILL_IN_ISR) is not None
        # acks=all on a bucket whose ISR names the stopping server needs its fetches: they go on
        done = await c.managers[2].append(-1, 5.0, {STILL_IN_ISR: batch(b"s0")})
        assert done[STILL_IN_ISR].error is None
        assert values(c, 1, STILL_IN_ISR) == [b"s0"]
        # rounds ran on the fetcher from 2 (truncation first): TB was not truncated by any of them
        assert values(c, 1) == [b"m0", b"a1", b"a2"]
        assert epochs(c.log_managers[1].get(TB)) == [(0, 0)]

        await c.managers[2].append(1, 5.0, {TB: batch(b"b1")})
        await c.managers[2].append(1, 5.0, {TB: batch(b"b2")})
        await c.kill(1)  # stopped with the diverged tail, at the leader's LEO
        c.start_server(1)
        await c.notify(TB, (1, 2))
        await wait_until(lambda: 1 in c.coordinator.state[TB].isr, message="1 back in the ISR of TB")
        assert values(c, 1) == values(c, 2) == [b"m0", b"b1", b"b2"]
        assert epochs(c.log_managers[1].get(TB)) == [(0, 0), (1, 1)]
    finally:
        await c.close()
