"""Leader election and ISR decisions (pure): explicit cases plus properties over random inputs."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from fluss_py.coordinator.election import (
    IsrChange,
    adjust_isr,
    controlled_shutdown_leader,
    corrupt_replica,
    initial_leader,
    offline_leader,
    preferred_leader,
    reassignment_leader,
    reconcile_liveness,
    remove_from_isr,
)
from fluss_py.errors import (
    FencedLeaderEpochError,
    IneligibleReplicaError,
    InvalidRequestError,
    InvalidUpdateVersionError,
    NotCoordinatorLeaderError,
)
from fluss_py.types import NO_LEADER, LeaderAndIsr

CE = 5  # the coordinator epoch used by these tests


def lai(leader, isr, leader_epoch=3, bucket_epoch=7, coordinator_epoch=4):
    return LeaderAndIsr(leader, leader_epoch, tuple(isr), coordinator_epoch, bucket_epoch)


# ---------------------------------------------------------------- initial


def test_initial_first_live_replica_leads_and_all_live_are_in_isr():
    assert initial_leader([2, 3, 1], {1, 2, 3}, CE) == LeaderAndIsr(2, 0, (2, 3, 1), CE, 0)
    assert initial_leader([2, 3, 1], {1, 3}, CE) == LeaderAndIsr(3, 0, (3, 1), CE, 0)
    assert initial_leader([2, 3, 1], {3}, CE, shutting_down={3}) is None
    assert initial_leader([2, 3, 1], set(), CE) is None


# ---------------------------------------------------------------- offline


def test_offline_picks_first_live_isr_member_in_assignment_order():
    current = lai(1, [1, 3, 2])
    new = offline_leader([1, 2, 3], current, {2, 3}, CE)
    assert new == LeaderAndIsr(2, 4, (3, 2), CE, 8)


def test_offline_skips_live_replicas_outside_the_isr():
    new = offline_leader([1, 2, 3], lai(1, [1, 3]), {2, 3}, CE)
    assert new is not None and new.leader == 3 and new.isr == (3,)


def test_offline_no_live_isr_member_means_no_election_by_default():
    current = lai(1, [1])
    assert offline_leader([1, 2, 3], current, {2, 3}, CE) is None


def test_offline_unclean_election_only_when_asked():
    new = offline_leader([1, 2, 3], lai(1, [1]), {2, 3}, CE, unclean=True)
    assert new == LeaderAndIsr(2, 4, (2,), CE, 8)
    assert offline_leader([1, 2, 3], lai(1, [1]), set(), CE, unclean=True) is None


def test_offline_keeps_a_still_eligible_leader():
    assert offline_leader([1, 2, 3], lai(2, [1, 2, 3]), {2, 3}, CE) is None


def test_offline_from_no_leader_elects_when_the_isr_member_returns():
    current = lai(NO_LEADER, [1], leader_epoch=4, bucket_epoch=8)
    assert offline_leader([1, 2, 3], current, {2, 3}, CE) is None
    assert offline_leader([1, 2, 3], current, {1, 2, 3}, CE) == LeaderAndIsr(1, 5, (1,), CE, 9)


def test_offline_does_not_elect_a_shutting_down_server():
    assert offline_leader([1, 2, 3], lai(1, [1, 2, 3]), {2, 3}, CE, shutting_down={2}).leader == 3


# ---------------------------------------------------------------- controlled shutdown


def test_controlled_shutdown_moves_leader_and_shrinks_isr():
    new = controlled_shutdown_leader([1, 2, 3], lai(1, [1, 2, 3]), {1, 2, 3}, {1}, CE)
    assert new == LeaderAndIsr(2, 4, (2, 3), CE, 8)


def test_controlled_shutdown_without_another_isr_member_keeps_leader():
    assert controlled_shutdown_leader([1, 2, 3], lai(1, [1]), {1, 2, 3}, {1}, CE) is None
    assert controlled_shutdown_leader([1, 2, 3], lai(1, [1, 2]), {1, 2, 3}, {1, 2}, CE) is None


def test_a_corrupt_leader_hands_over_to_another_isr_member_and_leaves_the_isr():
    assert corrupt_replica([1, 2, 3], lai(1, [1, 2, 3]), 1, {1, 2, 3}, CE) == LeaderAndIsr(2, 4, (2, 3), CE, 8)
    assert corrupt_replica([1, 2, 3], lai(1, [1, 2, 3]), 1, {1, 3}, CE) == LeaderAndIsr(3, 4, (3,), CE, 8)


def test_a_corrupt_leader_without_another_live_isr_member_keeps_leading():
    assert corrupt_replica([1, 2, 3], lai(1, [1]), 1, {1, 2, 3}, CE) is None
    assert corrupt_replica([1, 2, 3], lai(1, [1, 2]), 1, {1, 3}, CE) is None  # 2 is dead


def test_a_corrupt_follower_leaves_the_isr_unless_absent_or_last():
    assert corrupt_replica([1, 2, 3], lai(1, [1, 2, 3]), 2, {1, 2, 3}, CE) == LeaderAndIsr(1, 3, (1, 3), CE, 8)
    assert corrupt_replica([1, 2, 3], lai(1, [1, 3]), 2, {1, 2, 3}, CE) is None


# ---------------------------------------------------------------- preferred / reassignment


def test_preferred_leader():
    assert preferred_leader([1, 2, 3], lai(2, [2, 3, 1]), {1, 2, 3}, CE) == LeaderAndIsr(1, 4, (2, 3, 1), CE, 8)
    assert preferred_leader([1, 2, 3], lai(1, [1, 2]), {1, 2, 3}, CE) is None  # already leads
    assert preferred_leader([1, 2, 3], lai(2, [2, 3]), {1, 2, 3}, CE) is None  # not in ISR
    assert preferred_leader([1, 2, 3], lai(2, [2, 1]), {2, 3}, CE) is None  # dead
    assert preferred_leader([1, 2, 3], lai(2, [2, 1]), {1, 2}, CE, shutting_down={1}) is None
    assert preferred_leader([], lai(2, [2]), {2}, CE) is None


def test_reassignment_leader():
    assert reassignment_leader([4, 3, 2], lai(1, [1, 2, 3]), {1, 2, 3, 4}, CE) == LeaderAndIsr(3, 4, (1, 2, 3), CE, 8)
    assert reassignment_leader([3, 2], lai(3, [1, 2, 3]), {1, 2, 3}, CE) is None
    assert reassignment_leader([4], lai(1, [1, 2, 3]), {1, 2, 3, 4}, CE) is None


# ---------------------------------------------------------------- remove from ISR


def test_remove_follower_from_isr_bumps_only_bucket_epoch():
    assert remove_from_isr(lai(1, [1, 2, 3]), 2, CE) == LeaderAndIsr(1, 3, (1, 3), CE, 8)


def test_remove_last_isr_member_keeps_it_and_goes_leaderless():
    assert remove_from_isr(lai(1, [1]), 1, CE) == LeaderAndIsr(NO_LEADER, 4, (1,), CE, 8)
    assert remove_from_isr(lai(NO_LEADER, [1]), 1, CE) is None


def test_remove_leader_with_other_members():
    assert remove_from_isr(lai(1, [1, 2]), 1, CE) == LeaderAndIsr(NO_LEADER, 4, (2,), CE, 8)


def test_remove_non_member_is_no_change():
    assert remove_from_isr(lai(1, [1, 2]), 3, CE) is None


# ---------------------------------------------------------------- AdjustIsr validation

REPLICAS = (1, 2, 3)
CURRENT = lai(1, [1, 2, 3])


def change(isr, leader=1, leader_epoch=3, bucket_epoch=7):
    return IsrChange(leader, leader_epoch, bucket_epoch, tuple(isr))


def test_adjust_isr_shrink_and_expand():
    shrunk = adjust_isr(REPLICAS, CURRENT, change([1, 3]), {1, 2, 3}, set(), CE)
    assert shrunk == LeaderAndIsr(1, 3, (1, 3), CE, 8)
    grown = adjust_isr(REPLICAS, shrunk, change([1, 3, 2], bucket_epoch=8), {1, 2, 3}, set(), CE)
    assert grown == LeaderAndIsr(1, 3, (1, 3, 2), CE, 9)


def test_adjust_isr_same_state_is_accepted_idempotently_even_with_stale_bucket_epoch():
    shrunk = adjust_isr(REPLICAS, CURRENT, change([1, 3]), {1, 2, 3}, set(), CE)
    assert adjust_isr(REPLICAS, shrunk, change([1, 3], bucket_epoch=7), {1, 2, 3}, set(), CE) is shrunk


@pytest.mark.parametrize(
    ("req", "error"),
    [
        (change([1, 2], leader_epoch=4), NotCoordinatorLeaderError),
        (change([1, 2], bucket_epoch=8), NotCoordinatorLeaderError),
        (change([1, 2], leader_epoch=2), FencedLeaderEpochError),
        (change([2, 3], leader=2), FencedLeaderEpochError),
        (change([1, 2], bucket_epoch=6), InvalidUpdateVersionError),
        (change([]), InvalidRequestError),
        (change([2, 3]), InvalidRequestError),
        (change([1, 4]), InvalidRequestError),
        (change([1, 1, 2]), InvalidRequestError),
    ],
)
def test_adjust_isr_rejections(req, error):
    with pytest.raises(error):
        adjust_isr(REPLICAS, CURRENT, req, {1, 2, 3}, set(), CE)


def test_adjust_isr_added_member_must_be_live_and_not_shutting_down():
    current = lai(1, [1])
    with pytest.raises(IneligibleReplicaError):
        adjust_isr(REPLICAS, current, change([1, 2]), {1, 3}, set(), CE)
    with pytest.raises(IneligibleReplicaError):
        adjust_isr(REPLICAS, current, change([1, 2]), {1, 2, 3}, {2}, CE)
    # a dead member that is already in the ISR does not block a shrink of another one
    assert adjust_isr(REPLICAS, CURRENT, change([1, 2]), {1, 3}, set(), CE).isr == (1, 2)


def test_fenced_error_names_the_current_leader():
    with pytest.raises(FencedLeaderEpochError) as info:
        adjust_isr(REPLICAS, CURRENT, change([2], leader=2), {1, 2, 3}, set(), CE)
    assert info.value.leader_id == 1


# ---------------------------------------------------------------- properties


@st.composite
def bucket_situations(draw):
    servers = list(range(1, 7))
    rf = draw(st.integers(1, 5))
    replicas = draw(st.permutations(servers))[:rf]
    isr = draw(st.lists(st.sampled_from(replicas), min_size=1, unique=True))
    leader = draw(st.sampled_from([*isr, NO_LEADER]))
    live = set(draw(st.lists(st.sampled_from(servers), unique=True)))
    shutting = set(draw(st.lists(st.sampled_from(servers), unique=True, max_size=2)))
    return replicas, lai(leader, isr), live, shutting


@given(bucket_situations())
def test_offline_election_properties(situation):
    replicas, current, live, shutting = situation
    new = offline_leader(replicas, current, live, CE, shutting)
    eligible = [r for r in replicas if r in live and r in current.isr and r not in shutting]
    if current.leader in eligible or not eligible:
        assert new is None
        return
    assert new.leader == eligible[0]
    assert new.leader in new.isr and set(new.isr) <= set(current.isr) & live
    assert new.leader_epoch == current.leader_epoch + 1 and new.bucket_epoch == current.bucket_epoch + 1
    assert new.coordinator_epoch == CE


@given(bucket_situations())
def test_controlled_shutdown_properties(situation):
    replicas, current, live, shutting = situation
    new = controlled_shutdown_leader(replicas, current, live, shutting, CE)
    if new is None:
        assert not [r for r in replicas if r in live and r in current.isr and r not in shutting]
        return
    assert new.leader not in shutting and new.leader in live and new.leader in new.isr
    assert not set(new.isr) & shutting and set(new.isr) <= set(current.isr)


@given(bucket_situations(), st.integers(1, 6))
def test_remove_from_isr_properties(situation, server):
    _, current, _, _ = situation
    new = remove_from_isr(current, server, CE)
    if new is None:
        assert server not in current.isr or (current.isr == (server,) and current.leader == NO_LEADER)
        return
    assert new.isr  # never empty
    assert server not in new.isr or new.isr == (server,)
    assert new.leader != server
    assert new.bucket_epoch == current.bucket_epoch + 1
    assert new.leader_epoch == current.leader_epoch + (1 if current.leader == server else 0)


# ---------------------------------------------------------------- liveness reconciliation


def test_liveness_live_leader_loses_dead_followers():
    assert reconcile_liveness([1, 2, 3], lai(1, [1, 2, 3]), {1, 3}, CE) == LeaderAndIsr(1, 3, (1, 3), CE, 8)
    assert reconcile_liveness([1, 2, 3], lai(1, [1, 2, 3]), {1, 2, 3}, CE) is None


def test_liveness_dead_leader_is_replaced_by_first_live_isr_member():
    assert reconcile_liveness([1, 2, 3], lai(1, [1, 3, 2]), {2, 3}, CE) == LeaderAndIsr(2, 4, (3, 2), CE, 8)


def test_liveness_no_live_isr_member_goes_leaderless_and_keeps_isr():
    assert reconcile_liveness([1, 2, 3], lai(1, [1, 2]), {3}, CE) == LeaderAndIsr(NO_LEADER, 4, (1, 2), CE, 8)
    leaderless = LeaderAndIsr(NO_LEADER, 4, (1, 2), CE, 8)
    assert reconcile_liveness([1, 2, 3], leaderless, {3}, CE) is None
    # one ISR member returns: it leads, alone in the ISR
    assert reconcile_liveness([1, 2, 3], leaderless, {2, 3}, CE) == LeaderAndIsr(2, 5, (2,), CE, 9)


def test_liveness_shutting_down_isr_member_does_not_lead_but_stays_in_isr():
    new = reconcile_liveness([1, 2, 3], lai(1, [1, 2]), {2, 3}, CE, shutting_down={2})
    assert new == LeaderAndIsr(NO_LEADER, 4, (2,), CE, 8)


@given(bucket_situations())
def test_liveness_properties(situation):
    replicas, current, live, shutting = situation
    new = reconcile_liveness(replicas, current, live, CE, shutting)
    state = new or current
    assert state.isr  # never empty
    if state.leader != NO_LEADER:
        assert state.leader in live and state.leader in state.isr
        assert set(state.isr) <= live  # with a live leader, every ISR member is live
    if new is not None:
        assert new.bucket_epoch == current.bucket_epoch + 1
        assert set(new.isr) <= set(current.isr)
        assert new.leader_epoch == current.leader_epoch + (0 if new.leader == current.leader else 1)
    assert reconcile_liveness(replicas, state, live, CE, shutting) is None  # idempotent
