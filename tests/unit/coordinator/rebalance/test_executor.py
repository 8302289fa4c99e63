"""The rebalance executor on the coordinator's handlers, against the in-memory ZooKeeper and gateway.

A "tablet server" here is the fake gateway: a target catches up when the test sends the AdjustIsr its
leader would send. Invariant checked after every step: every bucket keeps at least its replication
factor of replicas, and a replica only leaves after its replacement is in the ISR.
"""

from collections import Counter

import pytest

from fluss_py.coordinator.channel import NOTIFY, STOP
from fluss_py.coordinator.events import CancelRebalance, GetRebalance, StartRebalance
from fluss_py.coordinator.rebalance.planner import MoveKind, spread
from fluss_py.coordinator.rebalance.progress import MoveStatus, RebalanceStatus
from fluss_py.errors import InvalidRebalancePlanError, RebalanceInProgressError
from fluss_py.rpc.pb import common_pb2
from fluss_py.zk.values import EpochFencedError

from ..harness import registration
from .rig import Rig, T, adjust, check_invariants, make


def counts(rig) -> list[int]:
    c = Counter(s for b in rig.proc.view.buckets.values() for s in b.replicas)
    return [c[s] for s in sorted(rig.ctx.tablet_servers)]


# ---------------------------------------------------------------- tests


async def test_dry_run_writes_nothing(grown):
    rig, _ = grown
    before = rig.zk.snapshot()
    view = await rig.ex.start_rebalance(StartRebalance(dry_run=True))
    assert view["status"] == "PLANNED" and view["moves"] and "replica spread" in view["summary"]
    assert rig.zk.snapshot() == before and rig.ex.progress is None


async def test_balanced_cluster_starts_nothing():
    rig, _ = await make()
    view = await rig.ex.start_rebalance(StartRebalance())
    assert view["status"] == "BALANCED" and view["moves"] == []
    assert rig.ex.progress is None
    await rig.channel.close()


async def test_full_rebalance_onto_new_servers(grown):
    rig, table_id = grown
    view = await rig.ex.start_rebalance(StartRebalance())
    await rig.drain()
    assert view["status"] == "REBALANCING" and rig.node()["status"] == "REBALANCING"
    pr = rig.ex.progress
    first = [m for _, m in pr.batch_moves(0)]
    # step 1: each target is assigned next to the old replicas and told its role
    for m in first:
        if m.kind is MoveKind.REPLICA:
            assert m.to_server in rig.zk_assignment(table_id)[m.bucket.bucket]
            assert m.from_server in rig.zk_assignment(table_id)[m.bucket.bucket]
            told = [b for r in rig.gateway.of(NOTIFY, m.to_server) for b in r.buckets]
            assert any(b.table_bucket.bucket == m.bucket.bucket and m.to_server in b.replicas for b in told)
    assert not rig.gateway.of(STOP)  # nothing removed before its replacement is in sync
    check_invariants(rig)
    await rig.run_to_end()
    assert rig.ex.progress.status is RebalanceStatus.COMPLETED and rig.node()["status"] == "COMPLETED"
    assert spread(counts(rig)) <= 0.1
    assert all(len(b.replicas) == 3 for b in rig.proc.view.buckets.values())
    check_invariants(rig)
    deleted = [(s, b.table_bucket.bucket) for s, k, r in rig.gateway.calls if k == STOP for b in r.buckets]
    moved = [m for m in pr.plan.moves if m.kind is MoveKind.REPLICA]
    assert sorted(deleted) == sorted((m.from_server, m.bucket.bucket) for m in moved)
    assert all(b.delete for r in rig.gateway.of(STOP) for b in r.buckets)
    assert (await rig.ex.get_rebalance(GetRebalance()))["moves_done"] == len(pr.plan.moves)


async def test_moved_leader_hands_over_to_its_replacement(grown):
    rig, table_id = grown
    # buckets led by server 1 are the smallest: their replica on 1 (the leader) moves first
    sizes = {tb: 0 if b.leader_and_isr.leader == 1 else 100 for tb, b in rig.proc.view.buckets.items()}
    rig.ex._sizes = lambda: sizes
    await rig.ex.start_rebalance(StartRebalance())
    pr = rig.ex.progress
    i, m = next((i, m) for i, m in enumerate(pr.plan.moves) if m.kind is MoveKind.REPLICA and m.leader_move)
    tb = m.bucket
    while rig.ex.progress.moves[i] is not MoveStatus.ADDING:
        await rig.catch_up()
    before = rig.proc.view.buckets[tb].leader_and_isr
    assert before.leader == m.from_server and m.to_server not in before.isr
    await rig.catch_up()
    after = rig.proc.view.buckets[tb].leader_and_isr
    assert after.leader == m.to_server and after.leader_epoch == before.leader_epoch + 1
    assert m.from_server not in after.isr and rig.zk_assignment(table_id)[tb.bucket][0] == m.to_server


async def test_already_running_is_refused_with_progress(grown):
    rig, _ = grown
    await rig.ex.start_rebalance(StartRebalance())
    with pytest.raises(RebalanceInProgressError, match=r"already running: batch 1/\d+, 0/\d+ moves done"):
        await rig.ex.start_rebalance(StartRebalance())


async def test_impossible_plan_is_refused_and_nothing_moves():
    rig, _ = await make(servers=(1, 2, 3, 4), buckets=8)
    await rig.kill(4)  # its replicas cannot be planned while it is down
    before = rig.zk.snapshot()
    with pytest.raises(InvalidRebalancePlanError, match="not live"):
        await rig.ex.start_rebalance(StartRebalance())
    assert rig.zk.snapshot() == before
    await rig.channel.close()


async def test_target_death_rolls_back_the_batch(grown):
    rig, table_id = grown
    await rig.ex.start_rebalance(StartRebalance())
    pr = rig.ex.progress
    batch = pr.batch_moves(0)
    origin = {m.bucket: rig.zk_assignment(table_id)[m.bucket.bucket] for _, m in batch}
    await rig.catch_up(only={5})  # moves to 5 finish; moves to 4 are still catching up
    rig.gateway.clear()
    await rig.kill(4)
    await rig.drain()
    assert rig.ex.progress.status is RebalanceStatus.FAILED and "died" in rig.node()["message"]
    for i, m in batch:
        replicas = rig.zk_assignment(table_id)[m.bucket.bucket]
        if m.to_server == 4:
            assert rig.ex.progress.moves[i] is MoveStatus.ROLLED_BACK
            assert 4 not in replicas and set(replicas) == {r for r in origin[m.bucket] if r != 4}
        elif m.kind is MoveKind.REPLICA:
            assert rig.ex.progress.moves[i] is MoveStatus.DONE and 5 in replicas
    assert not rig.gateway.of(STOP, 4)  # dead: nothing sent to it
    check_invariants(rig)


async def test_cancel_rolls_back_open_moves_and_keeps_done_ones(grown):
    rig, table_id = grown
    await rig.ex.start_rebalance(StartRebalance())
    await rig.catch_up(only={5})
    view = await rig.ex.cancel_rebalance(CancelRebalance())
    await rig.drain()
    assert view["status"] == "CANCELED" and view["moves_in_flight"] == 0
    pr = rig.ex.progress
    for i, m in pr.batch_moves(0):
        in_zk = rig.zk_assignment(table_id)[m.bucket.bucket]
        if m.to_server == 4 and m.kind is MoveKind.REPLICA:
            assert pr.moves[i] is MoveStatus.ROLLED_BACK and 4 not in in_zk
            assert any(b.table_bucket.bucket == m.bucket.bucket for r in rig.gateway.of(STOP, 4) for b in r.buckets)
    check_invariants(rig)
    assert (await rig.ex.cancel_rebalance(CancelRebalance()))["message"] == "no rebalance runs"


async def test_move_timeout_rolls_back(grown):
    rig, _ = grown
    rig.ex.move_timeout = 30
    await rig.ex.start_rebalance(StartRebalance())
    rig.clock.now += 31
    await rig.ex.tick()
    assert rig.ex.progress.status is RebalanceStatus.FAILED and "did not join the ISR" in rig.ex.progress.message
    check_invariants(rig)
    assert counts(rig)[3:] == [0, 0]


async def test_next_batch_waits_for_health_then_fails_after_the_timeout(grown):
    rig, _table_id = grown
    rig.ex.health_timeout = 10
    await rig.ex.start_rebalance(StartRebalance())
    # an unrelated bucket drops a follower from its ISR just before the batch ends
    moving = {m.bucket for _, m in rig.ex.progress.batch_moves(0)}
    tb = next(tb for tb in sorted(rig.proc.view.buckets) if tb not in moving)
    lai = rig.proc.view.buckets[tb].leader_and_isr
    await rig.proc.adjust_isr(adjust(lai.leader, tb, lai.leader_epoch, lai.bucket_epoch, list(lai.isr[:2])))
    await rig.catch_up()
    assert rig.ex.progress.batch == 0 and rig.ex.running  # waiting for health
    await rig.ex.tick()
    assert rig.ex.progress.batch == 0
    lai = rig.proc.view.buckets[tb].leader_and_isr
    await rig.proc.adjust_isr(adjust(lai.leader, tb, lai.leader_epoch, lai.bucket_epoch,
                                     list(rig.proc.view.buckets[tb].replicas)))  # fmt: skip
    await rig.ex.tick()
    assert rig.ex.progress.batch == 1  # healthy again: next batch
    moving = {m.bucket for _, m in rig.ex.progress.batch_moves(1)}
    tb = next(tb for tb in sorted(rig.proc.view.buckets) if tb not in moving)
    lai = rig.proc.view.buckets[tb].leader_and_isr
    await rig.proc.adjust_isr(adjust(lai.leader, tb, lai.leader_epoch, lai.bucket_epoch, list(lai.isr[:2])))
    await rig.catch_up()
    rig.clock.now += 11
    await rig.ex.tick()
    await rig.ex.tick()
    assert rig.ex.progress.status is RebalanceStatus.FAILED and "unhealthy" in rig.ex.progress.message


async def test_new_coordinator_resumes_and_the_old_one_is_fenced(grown):
    rig, _table_id = grown
    await rig.ex.start_rebalance(StartRebalance())
    await rig.catch_up(only={5})
    in_flight = [m for i, m in rig.ex.progress.batch_moves(0) if rig.ex.progress.moves[i] is MoveStatus.ADDING]
    assert in_flight
    # failover: a new leader bumps the epoch and loads everything from ZooKeeper
    new = Rig(rig.zk, {s: "" for s in (1, 2, 3, 4, 5)}, rig.zk.bump_epoch())
    await new.start()
    assert new.ex.progress is not None and new.ex.progress.running
    assert [m for i, m in new.ex.progress.batch_moves(0) if new.ex.progress.moves[i] is MoveStatus.ADDING] == in_flight
    with pytest.raises(EpochFencedError):
        await rig.catch_up()  # the old leader's writes fail as a whole
    await new.run_to_end()
    assert new.ex.progress.status is RebalanceStatus.COMPLETED
    assert spread(counts(new)) <= 0.1
    check_invariants(new)
    await new.channel.close()


async def test_resume_with_a_dead_target_rolls_back():
    rig, _table_id = await make()
    await rig.join(4)
    await rig.ex.start_rebalance(StartRebalance())
    new = Rig(rig.zk, {s: "" for s in (1, 2, 3)}, rig.zk.bump_epoch())  # 4 died during the failover
    await new.start()
    assert new.ex.progress.status is RebalanceStatus.FAILED and "not live after coordinator failover" in (
        new.ex.progress.message
    )
    assert counts(new) == [30, 30, 30]
    check_invariants(new)
    await rig.channel.close()
    await new.channel.close()


async def test_new_servers_trigger_automatically_after_the_join_delay():
    rig, _ = await make(check_interval=300, join_delay=5)
    rig.ctx.tablet_servers.update({4: registration(4), 5: registration(5)})
    await rig.proc.on_servers_changed({4: registration(4), 5: registration(5)}, [])
    await rig.ex.tick()
    assert rig.ex.progress is None
    rig.clock.now += 5
    await rig.ex.tick()
    assert rig.ex.running and "new-server" in rig.ex.progress.reason
    await rig.run_to_end()
    assert rig.ex.progress.status is RebalanceStatus.COMPLETED
    await rig.channel.close()


async def test_auto_off_never_triggers():
    rig, _ = await make(auto=False)
    await rig.join(4)
    rig.clock.now += 10_000
    await rig.ex.tick()
    assert rig.ex.progress is None
    await rig.channel.close()


async def test_metrics_follow_the_rebalance(grown):
    from prometheus_client import CollectorRegistry, generate_latest

    from fluss_py.coordinator.rebalance.metrics import RebalanceCollector

    rig, _ = grown
    registry = CollectorRegistry()
    registry.register(RebalanceCollector(lambda: rig.ex))

    def sample(name: str, **labels) -> float:
        value = registry.get_sample_value(name, labels or None)
        assert value is not None, (name, generate_latest(registry).decode())
        return value

    assert sample("fluss_rebalance_state", state="idle") == 1.0
    await rig.ex.start_rebalance(StartRebalance())
    assert sample("fluss_rebalance_state", state="rebalancing") == 1.0
    assert sample("fluss_rebalance_moves_in_flight") > 0 and sample("fluss_rebalance_batches_done") == 0
    assert 0 < sample("fluss_rebalance_server_migrations_peak") <= rig.ex.options.max_concurrent
    await rig.run_to_end()
    assert sample("fluss_rebalance_state", state="completed") == 1.0
    assert sample("fluss_rebalance_moves_done") == sample("fluss_rebalance_moves_total")
    assert sample("fluss_rebalance_batches_done") == sample("fluss_rebalance_batches_total")
    assert sample("fluss_rebalance_moves_in_flight") == 0
    assert sample("fluss_rebalance_server_migrations_peak") <= rig.ex.options.max_concurrent
    assert (
        RebalanceCollector(lambda: None) and registry.get_sample_value("fluss_rebalance_state", {"state": "x"}) is None
    )


async def test_a_table_dropped_mid_rebalance_skips_its_moves(grown):
    from fluss_py.coordinator.events import DropTable

    rig, _ = grown
    await rig.ex.start_rebalance(StartRebalance())
    await rig.proc.drop_table(DropTable(T))
    await rig.ex.tick()
    pr = rig.ex.progress
    for _ in range(20):
        if not rig.ex.running:
            break
        await rig.ex.tick()
    assert rig.ex.progress.status is RebalanceStatus.COMPLETED
    assert rig.ex.progress.count(MoveStatus.SKIPPED) == len(pr.plan.moves)


def _last_told(rig: Rig, server: int, tb) -> common_pb2.BucketLeaderAndIsr:
    told = [b for r in rig.gateway.of(NOTIFY, server) for b in r.buckets if b.table_bucket.bucket == tb.bucket]
    assert told, (server, tb)
    return told[-1]


async def test_notify_names_the_replicas_being_added_until_the_move_ends(grown):
    """docs/rebalance.md §6: only a move's target is throttled, so NotifyLeaderAndIsr names it while the move
    is adding, and a move's end (done or rolled back) tells the leader with an empty list."""
    rig, _ = grown
    await rig.ex.start_rebalance(StartRebalance())
    await rig.drain()
    pr = rig.ex.progress
    adding = [(i, m) for i, m in pr.batch_moves(0) if pr.moves[i] is MoveStatus.ADDING]
    assert adding
    for _, m in adding:
        leader = rig.proc.view.buckets[m.bucket].leader_and_isr.leader
        assert list(_last_told(rig, leader, m.bucket).adding_replicas) == [m.to_server]
    untouched = [tb for tb in rig.proc.view.buckets if tb not in {m.bucket for _, m in adding}]
    assert all(not rig.proc.view.bucket_pb(tb).adding_replicas for tb in untouched)
    await rig.catch_up()
    for _, m in adding:
        leader = rig.proc.view.buckets[m.bucket].leader_and_isr.leader
        told = _last_told(rig, leader, m.bucket).adding_replicas  # done: its target is not throttled any more
        assert m.to_server not in told and tuple(told) == rig.proc.view.adding_replicas.get(m.bucket, ())
    await rig.run_to_end()
    assert rig.ex.progress.status is RebalanceStatus.COMPLETED and not rig.proc.view.adding_replicas


async def test_rollback_clears_the_replicas_being_added(grown):
    rig, _ = grown
    await rig.ex.start_rebalance(StartRebalance())
    await rig.drain()
    pr = rig.ex.progress
    adding = [m for i, m in pr.batch_moves(0) if pr.moves[i] is MoveStatus.ADDING]
    await rig.ex.cancel_rebalance(CancelRebalance())
    await rig.drain()
    assert not rig.proc.view.adding_replicas
    for m in adding:
        leader = rig.proc.view.buckets[m.bucket].leader_and_isr.leader
        assert not _last_told(rig, leader, m.bucket).adding_replicas


async def test_a_new_coordinator_tells_leaders_which_replicas_are_being_added(grown):
    """Derived from the durable progress after a failover, not from the old leader's memory."""
    rig, _ = grown
    await rig.ex.start_rebalance(StartRebalance())
    pr = rig.ex.progress
    adding = {m.bucket: m.to_server for i, m in pr.batch_moves(0) if pr.moves[i] is MoveStatus.ADDING}
    new = Rig(rig.zk, {s: "" for s in (1, 2, 3, 4, 5)}, rig.zk.bump_epoch())
    await new.start()
    await new.drain()
    assert new.proc.view.adding_replicas == {tb: (t,) for tb, t in adding.items()}
    for tb, target in adding.items():
        leader = new.proc.view.buckets[tb].leader_and_isr.leader
        assert list(_last_told(new, leader, tb).adding_replicas) == [target]
    await new.run_to_end()
    assert not new.proc.view.adding_replicas
    await rig.channel.close()
    await new.channel.close()
