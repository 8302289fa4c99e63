"""Preferred-leader election, pure parts (docs/control-plane.md "Leader balance"), and the per-table unclean
election switch."""

from fluss_py.coordinator.context import CoordinatorContext
from fluss_py.coordinator.leader_balance import imbalance, plan
from fluss_py.coordinator.processor import TableProcessor
from fluss_py.coordinator.tables import BucketInfo, TableRegistration
from fluss_py.types import NO_LEADER, LeaderAndIsr, TableBucket, TablePath
from fluss_py.zk.values import EpochFence

from .fake_zk import FakeStore


def tb(b: int) -> TableBucket:
    return TableBucket(1, b)


def bucket(replicas, leader, isr=None) -> BucketInfo:
    return BucketInfo(tuple(replicas), LeaderAndIsr(leader, 3, tuple(isr or replicas), 1, 5))


# three servers, each preferred for two buckets; server 1 restarted: others lead its buckets
AFTER_RESTART = {
    tb(0): bucket((1, 2, 3), 2),
    tb(1): bucket((1, 3, 2), 3),
    tb(2): bucket((2, 3, 1), 2),
    tb(3): bucket((2, 1, 3), 2),
    tb(4): bucket((3, 1, 2), 3),
    tb(5): bucket((3, 2, 1), 3),
}
LIVE = {1, 2, 3}


def test_imbalance_is_the_share_of_preferred_buckets_led_by_another():
    assert imbalance(AFTER_RESTART, LIVE) == {1: 1.0, 2: 0.0, 3: 0.0}
    half = dict(AFTER_RESTART)
    half[tb(0)] = bucket((1, 2, 3), 1)
    assert imbalance(half, LIVE)[1] == 0.5
    assert 1 not in imbalance(AFTER_RESTART, {2, 3})  # a dead server is preferred for nothing


def test_leadership_goes_back_to_the_preferred_replica_with_a_new_leader_epoch():
    changes = dict(plan(AFTER_RESTART, LIVE, set(), set(), 10, coordinator_epoch=4))
    assert set(changes) == {tb(0), tb(1)}
    for t, new in changes.items():
        assert new.leader == 1 and new.leader_epoch == 4 and new.bucket_epoch == 6 and new.coordinator_epoch == 4
        assert new.isr == AFTER_RESTART[t].leader_and_isr.isr  # the ISR is unchanged


def test_never_to_a_replica_outside_the_isr_or_shutting_down_or_dead():
    lagging = dict(AFTER_RESTART)
    lagging[tb(0)] = bucket((1, 2, 3), 2, isr=(2, 3))  # server 1 has not caught up on bucket 0
    assert [t for t, _ in plan(lagging, LIVE, set(), set(), 10, 4)] == [tb(1)]
    assert plan(AFTER_RESTART, LIVE, {1}, set(), 10, 4) == []
    assert plan(AFTER_RESTART, {2, 3}, set(), set(), 10, 4) == []


def test_never_for_a_bucket_a_rebalance_batch_is_moving():
    assert [t for t, _ in plan(AFTER_RESTART, LIVE, set(), {tb(0)}, 10, 4)] == [tb(1)]


def test_only_servers_over_the_threshold():
    half = dict(AFTER_RESTART)
    half[tb(0)] = bucket((1, 2, 3), 1)  # 1 of 2 not led: 50 %
    assert [t for t, _ in plan(half, LIVE, set(), set(), 50, 4)] == []
    assert [t for t, _ in plan(half, LIVE, set(), set(), 49, 4)] == [tb(1)]


def test_leaderless_buckets_are_left_to_the_offline_election():
    leaderless = {tb(0): bucket((1, 2, 3), NO_LEADER, isr=(2,))}
    assert plan(leaderless, LIVE, set(), set(), 0, 4) == []


def test_the_unclean_switch_is_per_table_with_the_coordinator_default():
    proc = TableProcessor(FakeStore(), CoordinatorContext(1, EpochFence(1, 1), "h", 1), channel=None)
    for table_id, props in ((1, {}), (2, {"unclean.leader.election.enable": "true"})):
        proc.view.add_table(
            TableRegistration(table_id, TablePath("fluss", f"t{table_id}"), 1, 3, props), {0: (1, 2, 3)}
        )
    assert (proc.unclean_for(1), proc.unclean_for(2)) == (False, True)
    proc._unclean = True  # the coordinator's default applies where the table says nothing
    assert (proc.unclean_for(1), proc.unclean_for(2)) == (True, True)
