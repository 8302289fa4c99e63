"""The replica layer's reaction to storage faults (docs/storage.md §9-10): a corrupt replica leaves the ISR
before it truncates and fetches again; a full data directory takes its replicas offline and reports them,
and brings them back once it has space again."""

from __future__ import annotations

import asyncio
import dataclasses
import errno

from fluss_py import config as cfg
from fluss_py.coordinator import election
from fluss_py.errors import ErrorCode
from fluss_py.replica.log_faults import CORRUPT, OFFLINE, RECOVERED
from fluss_py.replica.messages import LeaderAndIsrItem
from fluss_py.testing.procs import async_wait_until as wait_until
from fluss_py.types import LeaderAndIsr
from tests.unit.replica.fakes import batch, log_contents
from tests.unit.replica.harness import SETTINGS, TB, ReplicaCluster, node

R3 = (1, 2, 3)


async def test_a_corrupt_follower_reports_first_then_repairs_once_out_of_the_isr(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3)
    leader, follower = cluster3.managers[1], cluster3.managers[2]
    for i in range(5):
        assert (await leader.append(-1, 5.0, {TB: batch(b"v%d" % i)}))[TB].error is None
    log2 = follower.replica(TB).log
    await wait_until(lambda: log2.log_end_offset == 5)
    seg = log2.segments[-1]
    assert log2.mark_corrupt(2, seg.base_offset, seg.position_of(2))
    answer = cluster3.coordinator.fault_answers = asyncio.Event()

    follower.faults.check_corruption(TB)  # in the ISR: it must leave it before it truncates below the HW
    await wait_until(lambda: cluster3.coordinator.faults and follower.fetchers.fetcher_of(TB) is None)
    assert cluster3.coordinator.faults == [(2, CORRUPT, [TB])] and log2.log_end_offset == 5
    await cluster3.notify(TB, R3)  # a role change meanwhile does not start the fetch again
    assert follower.fetchers.fetcher_of(TB) is None and log2.log_end_offset == 5

    answer.set()  # the coordinator answers once it has taken the follower out of the ISR
    await wait_until(lambda: follower.faults.repairs == 1 and log2.corrupt_from is None)
    assert cluster3.coordinator.state[TB].isr == (1, 3)
    await wait_until(lambda: log_contents(log2) == log_contents(leader.replica(TB).log))


async def test_a_follower_back_in_the_isr_by_adjust_isr_reports_before_it_truncates(cluster3: ReplicaCluster) -> None:
    """The leader's AdjustIsr reaches a follower only as metadata: a follower that rejoined the ISR still holds
    the ISR it was told on becoming a follower, without itself. Its corruption must still be reported, and
    nothing cut until the answer; else the next election may pick it with acknowledged records gone."""
    c, replicas = cluster3, (1, 3, 2)
    await c.create(TB, replicas)
    leader = c.managers[1]
    await c.kill(3)
    c.coordinator.state[TB] = c.coordinator.state[TB].with_isr((1, 2), c.coordinator_epoch)
    await c.notify(TB, replicas)
    c.start_server(3)
    await c.notify(TB, replicas)  # the returning server is told: follower, ISR (1, 2)
    await wait_until(lambda: c.coordinator.state[TB].isr == (1, 3, 2), message="the leader's expansion")
    for i in range(5):
        assert (await leader.append(-1, 5.0, {TB: batch(b"v%d" % i)}))[TB].error is None
    log3 = c.managers[3].replica(TB).log
    await wait_until(lambda: log3.log_end_offset == 5)
    assert c.managers[3].replica(TB).isr == (1, 2)  # its own copy: stale
    c.down.add(1)  # the leader is unreachable: the follower cannot fetch the records again
    answer = c.coordinator.fault_answers = asyncio.Event()
    seg = log3.segments[-1]
    assert log3.mark_corrupt(2, seg.base_offset, seg.position_of(2))
    c.managers[3].faults.check_corruption(TB)
    await wait_until(lambda: c.coordinator.faults == [(3, CORRUPT, [TB])])
    assert log3.log_end_offset == 5 and c.managers[3].faults.repairs == 0  # nothing cut before the answer

    await c.kill(1)  # the leader dies before the coordinator answers: 3 still holds every acknowledged record
    new = election.offline_leader(replicas, c.coordinator.state[TB], {2, 3}, c.coordinator_epoch)
    assert new is not None and new.leader == 3
    c.coordinator.state[TB] = new
    await c.notify(TB, replicas)
    assert [v for _, _, v in log_contents(c.managers[3].replica(TB).log)] == [b"v%d" % i for i in range(5)]
    answer.set()


async def test_a_full_dir_takes_its_replicas_offline_and_brings_them_back_when_it_has_space(clock, tmp_path) -> None:
    c = ReplicaCluster(3, clock, tmp_path, SETTINGS)
    config = cfg.load_config(cfg.TABLET, None, {"log.dir.recovery-check-interval": "1s", "log.dir.min-free": "0"})
    m, dirs = await c.restart_on_dirs(2, [tmp_path / "server-2"], config)
    try:
        await c.create(TB, R3)
        assert m.replica(TB) is not None
        dirs.fail(tmp_path / "server-2", OSError(errno.ENOSPC, "No space left on device"))
        await wait_until(lambda: (2, OFFLINE, [TB]) in c.coordinator.faults)
        assert m.replica(TB) is None and TB in m.offline and m.fetchers.fetcher_of(TB) is None
        lai = c.coordinator.state[TB]
        errors = await m.become_leader_or_follower(1, [LeaderAndIsrItem(TB, lai, R3, {})], [node(r) for r in R3])
        assert errors[TB].code == ErrorCode.STORAGE_ERROR
        fetched = await m.fetch(-1, 0, 1, 1 << 20, [])
        assert fetched == {}

        # log.dir.min-free 0: the next probe (every 10 ms) finds the dir usable again
        await wait_until(lambda: (2, RECOVERED, [TB]) in c.coordinator.faults)
        assert not m.offline
        c.coordinator.state[TB] = LeaderAndIsr(1, lai.leader_epoch + 1, (1, 3), 1, lai.bucket_epoch + 1)
        await c.notify(TB, R3)
        assert m.replica(TB) is not None and m.replica(TB).leader_id == 1
    finally:
        await c.close()


async def test_the_checkpoint_loop_survives_an_unexpected_failure_and_counts_it(clock, tmp_path) -> None:
    c = ReplicaCluster(2, clock, tmp_path, dataclasses.replace(SETTINGS, checkpoint_interval_s=0.02))
    try:
        await c.create(TB, (1, 2))
        lm, m = c.log_managers[1], c.managers[1]
        real, calls = lm.checkpoint_snapshot, []

        def failing_once():
            calls.append(1)
            if len(calls) == 1:
                raise RuntimeError("a bug, not a disk")
            return real()

        lm.checkpoint_snapshot = failing_once
        assert (await m.append(-1, 5.0, {TB: batch(b"a", b"b")}))[TB].error is None
        await wait_until(lambda: lm.hw_checkpoint.read().get(TB) == 2)  # later rounds ran
        assert m.checkpoint_failures == 1
        m.check_health()  # the loop is alive
    finally:
        await c.close()
