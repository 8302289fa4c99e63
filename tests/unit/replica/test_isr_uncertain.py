"""An AdjustIsr whose outcome the leader does not know (the call failed after the coordinator may have written
it): the leader keeps counting the maximal ISR and asks again, so the coordinator's ISR — the set a new leader
is elected from — never holds a member the HW did not wait for (docs/replication.md "ISR changes")."""

from __future__ import annotations

from fluss_py.testing.procs import async_wait_until as wait_until
from tests.unit.replica.fakes import batch, values_of
from tests.unit.replica.harness import LAG_S, TB, ReplicaCluster

R3 = (1, 2, 3)


def _values(cluster: ReplicaCluster, server: int) -> list[bytes]:
    log = cluster.log_managers[server].get(TB)
    assert log is not None
    return [v for _, v in values_of(bytes(log.read(0, 1 << 20, log.log_end_offset).records))]


async def test_an_expansion_whose_answer_was_lost_still_holds_the_hw(cluster3: ReplicaCluster) -> None:
    await cluster3.create(TB, R3, {"min.insync.replicas": "2"})
    m = cluster3.managers[1]
    await cluster3.kill(3)
    assert (await m.append(1, 5.0, {TB: batch(b"a")}))[TB].error is None  # 3 lags behind it
    cluster3.clock.advance(LAG_S + 1)
    assert m.maybe_shrink_isr() == 1
    await wait_until(lambda: m.replica(TB).isr == (1, 2) and m.replica(TB).pending_isr is None)

    # server 3 comes back and catches up; the coordinator writes its expansion, but the answer is lost
    cluster3.coordinator.lose_answers = 1
    cluster3.start_server(3)
    await cluster3.notify(TB, R3)
    await wait_until(lambda: cluster3.coordinator.state[TB].isr == R3)
    await wait_until(lambda: not cluster3.coordinator.lose_answers)
    await cluster3.kill(3)  # it stops fetching before the leader hears anything more
    # (the fake clock stands still: without the retry, the leader would not propose the expansion again)

    # Whatever the leader believes, the coordinator may elect 3: the HW must wait for it.
    assert set(cluster3.coordinator.state[TB].isr) <= set(m.replica(TB).maximal_isr)
    result = (await m.append(-1, 0.3, {TB: batch(b"b")}))[TB]
    cluster3.start_server(3)  # (its log, as it left it)
    if result.error is None:  # acknowledged: every member of the coordinator's ISR must hold it
        assert _values(cluster3, 3) == [b"a", b"b"], "an acks=all record 3 lacks, while 3 may be elected"
    assert m.replica(TB).isr == R3  # the retried proposal was answered: the leader knows what was written


async def test_a_stale_refusal_after_a_lost_answer_keeps_the_maximal_isr_until_notified(
    cluster3: ReplicaCluster,
) -> None:
    """The expansion was written, its answer lost, and the coordinator changed the ISR again (server 2 left)
    before the repeated proposal arrived: that one is refused as stale, which says nothing of the first. The
    leader keeps counting 3 until the coordinator's NotifyLeaderAndIsr tells it the ISR (1, 3)."""
    await cluster3.create(TB, R3, {"min.insync.replicas": "1"})
    m = cluster3.managers[1]
    await cluster3.kill(3)
    assert (await m.append(1, 5.0, {TB: batch(b"a")}))[TB].error is None
    cluster3.clock.advance(LAG_S + 1)
    assert m.maybe_shrink_isr() == 1
    await wait_until(lambda: m.replica(TB).isr == (1, 2) and m.replica(TB).pending_isr is None)

    coordinator = cluster3.coordinator

    def server_2_leaves() -> None:
        coordinator.state[TB] = coordinator.state[TB].with_isr((1, 3), cluster3.coordinator_epoch)

    coordinator.lose_answers, coordinator.after_lost_answer = 1, server_2_leaves
    cluster3.start_server(3)
    await cluster3.notify(TB, R3)
    calls = len(coordinator.calls)
    await wait_until(lambda: coordinator.state[TB].isr == (1, 3) and len(coordinator.calls) >= calls + 2)
    await cluster3.kill(3)
    assert set(coordinator.state[TB].isr) <= set(m.replica(TB).maximal_isr)
    await cluster3.notify(TB, R3)  # the coordinator's NotifyLeaderAndIsr for its own change
    assert m.replica(TB).isr == (1, 3) and m.replica(TB).pending_isr is None
